//! The content hash of spec §6.5: SHA-256 of canonical frontmatter JSON, `\n`, then the body.
//!
//! The canonical JSON is RFC 8785 (JCS): keys sorted by UTF-16 code units, no whitespace, strings
//! escaped as ECMAScript does, and numbers written as ECMAScript writes an IEEE 754 double, so
//! `1.50`, `1.5` and `15e-1` all canonicalize to `1.5`. Our `serde_json` keeps every number's
//! text (`arbitrary_precision`); the canonicalizer reads that text as a double, as JCS requires.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;

/// A SHA-256 content hash. Renders and parses as 64 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContentHash(pub [u8; 32]);

impl ContentHash {
    /// The hash as 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// Why a text is not a content hash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseContentHashError {
    #[error("a content hash is 64 hex digits, not {0} characters")]
    Length(usize),
    #[error("a content hash is hex digits only, found {0:?}")]
    NotHex(char),
}

impl FromStr for ContentHash {
    type Err = ParseContentHashError;

    /// Reads 64 hex digits, upper or lower case.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if let Some(bad) = text.chars().find(|c| !c.is_ascii_hexdigit()) {
            return Err(ParseContentHashError::NotHex(bad));
        }
        if text.len() != 64 {
            return Err(ParseContentHashError::Length(text.len()));
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(text.as_bytes().chunks_exact(2)) {
            *byte = (hex_value(pair[0]) << 4) | hex_value(pair[1]);
        }
        Ok(ContentHash(bytes))
    }
}

/// The value of an ASCII hex digit (already checked to be one).
fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        b'A'..=b'F' => digit - b'A' + 10,
        _ => 0,
    }
}

/// Hashes a document's parsed frontmatter and its body.
///
/// Every number in `frontmatter` must be finite as a double, as [`crate::parse`] guarantees.
pub fn content_hash(frontmatter: &Value, body: &str) -> ContentHash {
    let mut hasher = Sha256::new();
    hasher.update(canonical_json(frontmatter));
    hasher.update(b"\n");
    hasher.update(body.as_bytes());
    ContentHash(hasher.finalize().into())
}

/// The RFC 8785 canonical JSON of a value.
///
/// A number too large for a double has no canonical form; such a value (never one that
/// [`crate::parse`] produced) gives empty bytes rather than a panic.
pub fn canonical_json(value: &Value) -> Vec<u8> {
    let mut canonical = Vec::with_capacity(128);
    match write_canonical(value, &mut canonical) {
        Some(()) => canonical,
        None => Vec::new(),
    }
}

/// Writes the canonical JSON of `value` to `out` in one pass; `None` when a number is not
/// finite as a double. Strings and keys are escaped as `serde_json` escapes them, which is what
/// RFC 8785 §3.2.2.2 asks (`"`, `\` and control characters only, `\u00XX` in lower case); every
/// number is read as a double and written as ECMAScript writes it (§3.2.2.3); object members
/// are sorted by their keys' UTF-16 code units (§3.2.3).
fn write_canonical(value: &Value, out: &mut Vec<u8>) -> Option<()> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => {
            let double = number.as_f64().filter(|double| double.is_finite())?;
            out.extend_from_slice(ryu_js::Buffer::new().format_finite(double).as_bytes());
        }
        Value::String(text) => write_string(text, out),
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_canonical(item, out)?;
            }
            out.push(b']');
        }
        Value::Object(members) => {
            let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
            sorted.sort_unstable_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
            out.push(b'{');
            for (index, (key, member)) in sorted.into_iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_string(key, out);
                out.push(b':');
                write_canonical(member, out)?;
            }
            out.push(b'}');
        }
    }
    Some(())
}

/// Writes `text` as a JSON string, escaped as RFC 8785 asks.
fn write_string(text: &str, out: &mut Vec<u8>) {
    serde_json::to_writer(out, text).expect("a string serializes into memory");
}
