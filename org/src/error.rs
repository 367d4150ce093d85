//! The infrastructure failures of organization-level state: the caller may retry.

use agentprocess_store::StoreError;

/// Why reading or writing organization-level state failed. Protocol and admin refusals are not
/// errors here; each operation returns them as values of its own.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OrgError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored record does not parse: a bug or a foreign writer.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("blob store failed: {0}")]
    Blobs(String),
}
