//! The store's error type: infrastructure failures and requests the store refuses.

use std::path::PathBuf;
use std::sync::Arc;

use crate::types::LeaseId;

/// Why a store call failed.
///
/// A transaction whose compares fail is NOT an error: it is a [`crate::TxnResult`] with
/// `succeeded: false`. The variants fall in two kinds:
///
/// - the infrastructure failed: `Io`, `Corrupt`, `Locked`, `Closed`, `Unavailable`, `Config`.
///   After `Io`, `Closed` or `Unavailable` on a write, the write's outcome is unknown: it may be
///   on disk (or in etcd) and come back after a restart or be seen by a later read;
/// - the store refused the request, and nothing happened: `LeaseNotFound`, `Compacted`,
///   `TooLarge`, `InvalidRequest`, `Overloaded`.
///
/// The error is `Clone` so that one failure (a failed `fsync`) can be reported to every caller
/// it affected.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// Reading or writing the disk failed. After a failed write or `fsync` the embedded store
    /// refuses every later write: the page cache can no longer be trusted.
    #[error("store i/o failed while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The files on disk are not what the store wrote (bad magic, bad checksum where no torn
    /// write can explain it, impossible contents).
    #[error("store files are corrupt: {0}")]
    Corrupt(String),
    /// Another process (or another handle in this one) holds the store directory.
    #[error("store directory {} is locked by another process", .0.display())]
    Locked(PathBuf),
    /// The store was closed, or it stopped after an earlier failure.
    #[error("store is closed")]
    Closed,
    /// The store could not be reached or did not answer in time: every etcd endpoint failed, or
    /// the cluster had no leader for longer than the request timeout. Retrying later may work.
    #[error("store unavailable while {context}: {reason}")]
    Unavailable { context: String, reason: String },
    /// The store's configuration cannot work (no endpoint, an endpoint that is not a URL,
    /// endpoints of different clusters). Retrying does not help; the configuration must change.
    #[error("store configuration: {0}")]
    Config(String),
    /// The lease does not exist: it was never granted, was revoked, or has expired.
    #[error("lease {0} not found")]
    LeaseNotFound(LeaseId),
    /// A watch asked for, or fell behind to, a revision the store no longer keeps events for.
    /// The watch is over; range the keys again and watch from the range's revision + 1.
    #[error("revision {compact_revision} and older are compacted; the watch cannot continue")]
    Compacted { compact_revision: i64 },
    /// The request is over a size limit etcd enforces too: more operations than its
    /// `--max-txn-ops` (128) or more bytes than its request limit (1.5 MiB). Nothing happened;
    /// the same writes split over smaller requests may go through.
    #[error("request too large: {0}")]
    TooLarge(String),
    /// The request breaks another rule etcd enforces too (the same key written twice in one
    /// transaction, an empty key, a lease TTL out of range).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// This client has as many requests in flight as its bound (`limit` names the setting):
    /// the request was not sent. Calling again after `retry_after_ms` may go through.
    #[error("the store client is at its limit ({limit}); call again in {retry_after_ms} ms")]
    Overloaded { limit: String, retry_after_ms: u64 },
}

impl StoreError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        StoreError::Io {
            context: context.into(),
            source: Arc::new(source),
        }
    }
}
