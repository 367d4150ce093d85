//! What the blob store says about an upload named as file evidence (spec §5).

/// What the blob store says about an upload id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UploadStatus {
    /// Exists in this organization and the stored bytes still match; the hex SHA-256 recorded.
    Verified { sha256: String },
    /// No such upload in this organization.
    NotFound,
    /// Exists, but the stored bytes no longer match the hash recorded at upload.
    HashMismatch,
}
