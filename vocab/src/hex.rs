//! Lower-case hex, as every key, hash and id of the protocol writes bytes.

/// Lower-case hex of some bytes: two digits per byte, looked up in a table.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::hex;

    #[test]
    fn hex_writes_two_lowercase_digits_per_byte() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff, 0x3c]), "000fa0ff3c");
        let every: Vec<u8> = (0..=255).collect();
        let expected: String = every.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex(&every), expected);
    }
}
