//! The stored form of run records and index entries: their JSON, LZ4-compressed when that is smaller.
//!
//! A stored value that begins with [`PACKED`] is an LZ4 block (its size prepended) of the JSON;
//! anything else is the JSON itself (every value written before packing, and values too small to
//! gain). JSON never begins with that byte, so both read the same way.

use std::borrow::Cow;

/// The first byte of a packed value.
const PACKED: u8 = 0x01;
/// Values shorter than this are stored as they are: LZ4 gains nothing on them.
const SMALLEST_PACKED: usize = 96;
/// The most an LZ4 block expands (255 bytes out for one in, at best): a header claiming more is
/// damage, refused before allocating.
pub(crate) const LZ4_MAX_RATIO: usize = 255;

/// The stored form of `json`.
pub(crate) fn pack(json: Vec<u8>) -> Vec<u8> {
    if json.len() < SMALLEST_PACKED {
        return json;
    }
    let mut packed = Vec::with_capacity(json.len() / 2 + 8);
    packed.push(PACKED);
    packed.extend_from_slice(&lz4_flex::block::compress_prepend_size(&json));
    if packed.len() < json.len() { packed } else { json }
}

/// The JSON of a stored value.
pub fn unpack(stored: &[u8]) -> Result<Cow<'_, [u8]>, String> {
    match stored.split_first() {
        Some((&PACKED, block)) => decompress(block).map(Cow::Owned),
        _ => Ok(Cow::Borrowed(stored)),
    }
}

/// A stored value read as `T`: unpacked, then parsed.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(stored: &[u8]) -> Result<T, String> {
    serde_json::from_slice(&unpack(stored)?).map_err(|e| e.to_string())
}

/// The bytes of an LZ4 block with its size prepended, refusing a size no block of this length
/// holds before allocating it.
pub(crate) fn decompress(block: &[u8]) -> Result<Vec<u8>, String> {
    let (size, compressed) = lz4_flex::block::uncompressed_size(block).map_err(|e| e.to_string())?;
    if size > compressed.len().saturating_mul(LZ4_MAX_RATIO) {
        return Err(format!(
            "a block of {} bytes cannot hold {size}",
            compressed.len()
        ));
    }
    lz4_flex::block::decompress_size_prepended(block).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_values_unpack_to_their_json_and_small_or_plain_ones_read_as_they_are() {
        let record = serde_json::json!({
            "id": "0193a7c2-6d1e-7b3a-9c4d-5e6f7a8b9c0d",
            "process": "training-request",
            "steps": [{"id": "submit", "state": "ready"}, {"id": "review", "state": "pending"},
                      {"id": "pay", "state": "pending"}],
            "inputs": {"amount": 120, "currency": "EUR", "description": "a train ticket to the plant"}
        })
        .to_string()
        .into_bytes();
        let packed = pack(record.clone());
        assert_eq!(packed[0], PACKED);
        assert!(packed.len() < record.len(), "{} < {}", packed.len(), record.len());
        assert_eq!(unpack(&packed).unwrap(), record.as_slice());
        // A value from before packing, and one too small to pack, read as they are.
        assert_eq!(unpack(&record).unwrap(), record.as_slice());
        let small = br#"{"id":"a"}"#.to_vec();
        assert_eq!(pack(small.clone()), small);
    }

    #[test]
    fn a_damaged_packed_value_is_an_error_not_a_huge_allocation() {
        let mut claims_four_gib = vec![PACKED];
        claims_four_gib.extend_from_slice(&u32::MAX.to_le_bytes());
        claims_four_gib.extend_from_slice(&[0; 10]);
        assert!(unpack(&claims_four_gib).is_err());
        assert!(unpack(&[PACKED, 1]).is_err());
    }
}
