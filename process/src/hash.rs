//! The content hash of spec §6.5: SHA-256 of canonical frontmatter JSON, `\n`, then the body.

use serde_json::Value;

/// A SHA-256 content hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContentHash(pub [u8; 32]);

/// Hashes a document's parsed frontmatter and its body.
pub fn content_hash(frontmatter: &Value, body: &str) -> ContentHash {
    let _ = (frontmatter, body);
    ContentHash([0; 32])
}

impl ContentHash {
    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl std::fmt::Display for ContentHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}
