//! The [`Store`] trait: the operations the runtime needs, with etcd's semantics.
//!
//! How each call maps onto etcd 3.4 (for the etcd implementation):
//!
//! | call | etcd | notes |
//! |---|---|---|
//! | `get`, `range` | `KV.Range` | `KeyRange::end: None` is `range_end = "\0"`; an empty start key is `"\0"`; `limit` as is; `more` and `header.revision` as is |
//! | `txn` | `KV.Txn` | `Compare` targets VALUE, VERSION, CREATE, MOD, LEASE with EQUAL, NOT_EQUAL, GREATER, LESS on one key; `TxnOp::Put` / `Delete` / `Range` are `RequestPut` / `RequestDeleteRange` / `RequestRange` |
//! | `lease_grant` | `Lease.LeaseGrant` with ID 0 | etcd may raise a TTL below its minimum; the answer says the TTL granted |
//! | `lease_keep_alive` | one round of `Lease.LeaseKeepAlive` | a TTL <= 0 in the answer is `StoreError::LeaseNotFound` |
//! | `lease_revoke` | `Lease.LeaseRevoke` | `ErrLeaseNotFound` is `StoreError::LeaseNotFound` |
//! | `lease_time_to_live` | `Lease.LeaseTimeToLive` with `keys: true` | TTL -1 is `None` |
//! | `watch` | one `Watch.Watch` create request on `[start, end)` with `start_revision` | a cancel with `compact_revision` is `StoreError::Compacted`; events of one response are sent in order |
//!
//! Left out on purpose, because the runtime does not need them: reads at a past revision,
//! `prev_kv`, `count_only`/`keys_only`, compares over a range of keys, watch filters and progress
//! notifications, and store-wide compaction calls. Each could be added without changing what is
//! here.

use async_trait::async_trait;

use crate::error::StoreError;
use crate::types::{
    KeyRange, KeyValue, LeaseGrant, LeaseId, LeaseStatus, RangeRequest, RangeResult, Txn, TxnResult,
    WatchStream,
};

/// A key-value store with etcd's semantics. Object safe: the runtime holds an `Arc<dyn Store>`.
///
/// Mapping onto etcd 3.4: `get`/`range` are `KV.Range` (serializable reads are acceptable for
/// `range`), `txn` is `KV.Txn`, the lease calls are `Lease.LeaseGrant`, `LeaseKeepAlive` (one
/// round), `LeaseRevoke` and `LeaseTimeToLive`, and `watch` is one `Watch.Watch` stream.
///
/// Every call that returns `Ok` after a write has made that write durable, and every later read,
/// from any handle, sees it. A write that fails with [`StoreError::Io`],
/// [`StoreError::Unavailable`] or [`StoreError::Closed`] may or may not have happened (as with etcd when a request times out):
/// callers make writes safe to retry (the runtime compares on the idempotency key).
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// One key, and the revision the read was served at.
    async fn get(&self, key: &[u8]) -> Result<(Option<KeyValue>, i64), StoreError>;

    /// Keys in `[start, end)` in key order, at most `limit` of them.
    async fn range(&self, request: RangeRequest) -> Result<RangeResult, StoreError>;

    /// Evaluates the compares and runs one branch, atomically.
    ///
    /// Fails (and changes nothing) when an operation puts with a lease that does not exist, or
    /// the transaction breaks etcd's request rules; a compare that does not hold is not a
    /// failure.
    async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError>;

    /// Grants a lease of `ttl` seconds. The store may grant a longer TTL than asked (etcd has a
    /// minimum); the answer says which.
    async fn lease_grant(&self, ttl: i64) -> Result<LeaseGrant, StoreError>;

    /// Restarts the lease's countdown from its TTL; returns the TTL.
    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64, StoreError>;

    /// Ends the lease now and deletes its keys in one revision.
    async fn lease_revoke(&self, lease: LeaseId) -> Result<(), StoreError>;

    /// The lease's TTLs and keys, or `None` when it does not exist.
    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<LeaseStatus>, StoreError>;

    /// Watches every change in `range`, from `start_revision` on when given (which must not be
    /// compacted away), else from the next revision.
    async fn watch(&self, range: KeyRange, start_revision: Option<i64>) -> Result<WatchStream, StoreError>;
}
