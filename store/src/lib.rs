//! The narrow key-value interface the runtime needs from etcd, and its implementations.
//!
//! [`Store`] is the seam between the runtime and its storage. It has etcd's semantics and maps
//! one to one onto etcd 3.4's KV, Lease and Watch APIs:
//!
//! - every key carries `create_revision`, `mod_revision`, `version` and an optional lease;
//! - the store has one global revision, incremented by each transaction that changes something,
//!   and every change in a transaction carries that transaction's revision;
//! - a transaction evaluates its compares and runs either its `then` or its `else` operations,
//!   atomically; a failed compare is an answer ([`TxnResult::succeeded`] is `false`), never an error;
//! - keys attached to a lease are deleted, in one revision, when the lease expires or is revoked;
//! - a watch delivers every put and delete in a key range in revision order, or ends with an
//!   explicit error: it never skips an event silently.
//!
//! [`EmbeddedStore`] implements it in one process, durable on local disk (or, for tests of the
//! crates above, [`EmbeddedStore::in_memory`]). [`EtcdStore`] implements it over an etcd 3.4
//! cluster, failing over between its members. [`GroupCommit`] wraps either to merge the writes
//! of independent callers into shared transactions (a cluster's actor hosts: one etcd round
//! trip for many runs' writes). The `conformance` feature exposes the suite every
//! implementation must pass. [`keys`] holds the whole key layout.

#![forbid(unsafe_code)]

#[cfg(feature = "conformance")]
pub mod conformance;
mod embedded;
mod error;
mod etcd;
mod group_commit;
pub mod keys;
mod limits;
pub mod metrics;
#[cfg(feature = "testing")]
pub mod probed;
mod store;
mod types;

pub use embedded::{
    EmbeddedOptions, EmbeddedStats, EmbeddedStore, ExportedKey, ExportedLease, ImportReport, LegacyImport,
    RecoveryReport, StoreExport, StoreImport,
};
pub use error::StoreError;
pub use etcd::{EtcdOptions, EtcdStore, EtcdTls, EtcdUser, MemberStatus, parse_endpoint_list};
pub use group_commit::{GroupCommit, GroupCommitOptions, OVERLOADED_RETRY_AFTER_MS};
pub use store::Store;
pub use types::{
    Compare, CompareOp, CompareTarget, EventKind, KeyRange, KeyValue, LeaseGrant, LeaseId, LeaseStatus,
    OpResult, RangeRequest, RangeResult, Txn, TxnOp, TxnResult, WatchEvent, WatchStream,
};
