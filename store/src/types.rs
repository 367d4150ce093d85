//! Request and response types of the [`crate::Store`] interface, shaped like etcd's.

use std::fmt;

use tokio::sync::mpsc;

use crate::error::StoreError;

/// A lease id. Like etcd, ids are positive and never `0` (etcd's "no lease").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseId(pub i64);

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x}", self.0)
    }
}

/// A key and its value with etcd's metadata.
///
/// Invariants (as in etcd): `create_revision <= mod_revision`; `version` counts the puts since
/// the key was created (1 after the first); a deleted and re-created key starts again at
/// version 1 with a new `create_revision`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub version: i64,
    pub lease: Option<LeaseId>,
}

/// A half-open key range `[start, end)`; `end: None` means "every key from `start` on".
///
/// Maps to etcd's `key` / `range_end` pair (`None` is etcd's `"\0"` range end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    pub start: Vec<u8>,
    pub end: Option<Vec<u8>>,
}

impl KeyRange {
    /// `[start, end)`.
    pub fn new(start: impl Into<Vec<u8>>, end: impl Into<Vec<u8>>) -> Self {
        KeyRange {
            start: start.into(),
            end: Some(end.into()),
        }
    }

    /// Exactly one key.
    pub fn single(key: impl Into<Vec<u8>>) -> Self {
        let start = key.into();
        let mut end = start.clone();
        end.push(0);
        KeyRange {
            start,
            end: Some(end),
        }
    }

    /// Every key that starts with `prefix` (every key at all for an empty prefix).
    pub fn prefix(prefix: impl Into<Vec<u8>>) -> Self {
        let start = prefix.into();
        let end = prefix_end(&start);
        KeyRange { start, end }
    }

    /// Every key from `start` on.
    pub fn from(start: impl Into<Vec<u8>>) -> Self {
        KeyRange {
            start: start.into(),
            end: None,
        }
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && self.end.as_deref().is_none_or(|end| key < end)
    }
}

/// The smallest key greater than every key starting with `prefix`, or `None` when there is none
/// (the prefix is empty or all `0xff`).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// A read of a key range, in key order, at the store's current revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeRequest {
    pub range: KeyRange,
    /// At most this many keys; `0` means no limit (as in etcd).
    pub limit: usize,
}

impl RangeRequest {
    pub fn new(range: KeyRange) -> Self {
        RangeRequest { range, limit: 0 }
    }

    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }
}

/// The answer to a [`RangeRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeResult {
    /// The keys found, in ascending key order.
    pub kvs: Vec<KeyValue>,
    /// True when the range holds more keys than `limit` let through. To read the next page, ask
    /// again from the last key followed by a `0` byte.
    pub more: bool,
    /// The store's revision the read was served at.
    pub revision: i64,
}

/// What a [`Compare`] looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompareTarget {
    /// The key's value. As in etcd, a value compare on a missing key is always false.
    Value(Vec<u8>),
    /// The key's version; a missing key has version `0`.
    Version(i64),
    /// The key's create revision; a missing key has `0`.
    CreateRevision(i64),
    /// The key's mod revision; a missing key has `0`.
    ModRevision(i64),
    /// The key's lease; a missing key or a key without lease has `None`.
    Lease(Option<LeaseId>),
}

/// How the key's current field is compared with the target: `current OP target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    Equal,
    NotEqual,
    Greater,
    Less,
}

/// One condition of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compare {
    pub key: Vec<u8>,
    pub op: CompareOp,
    pub target: CompareTarget,
}

impl Compare {
    pub fn new(key: impl Into<Vec<u8>>, op: CompareOp, target: CompareTarget) -> Self {
        Compare {
            key: key.into(),
            op,
            target,
        }
    }

    /// The key does not exist (etcd: `create_revision == 0`).
    pub fn absent(key: impl Into<Vec<u8>>) -> Self {
        Compare::new(key, CompareOp::Equal, CompareTarget::CreateRevision(0))
    }

    /// The key exists.
    pub fn present(key: impl Into<Vec<u8>>) -> Self {
        Compare::new(key, CompareOp::Greater, CompareTarget::CreateRevision(0))
    }

    /// The key's value equals `value` (false when the key is missing).
    pub fn value_is(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        Compare::new(key, CompareOp::Equal, CompareTarget::Value(value.into()))
    }

    /// The key was last written at `revision` (`0`: the key is missing).
    pub fn mod_revision_is(key: impl Into<Vec<u8>>, revision: i64) -> Self {
        Compare::new(key, CompareOp::Equal, CompareTarget::ModRevision(revision))
    }

    /// The key has version `version` (`0`: the key is missing).
    pub fn version_is(key: impl Into<Vec<u8>>, version: i64) -> Self {
        Compare::new(key, CompareOp::Equal, CompareTarget::Version(version))
    }

    /// The key is attached to `lease` (`None`: missing or without lease).
    pub fn lease_is(key: impl Into<Vec<u8>>, lease: Option<LeaseId>) -> Self {
        Compare::new(key, CompareOp::Equal, CompareTarget::Lease(lease))
    }

    /// Evaluates the compare against the key's current state (`None`: missing), like etcd.
    pub(crate) fn holds(&self, current: Option<CurrentKey<'_>>) -> bool {
        use std::cmp::Ordering;
        let ordering: Ordering = match (&self.target, current) {
            (CompareTarget::Value(_), None) => return false,
            (CompareTarget::Value(target), Some(kv)) => kv.value.cmp(target.as_slice()),
            (CompareTarget::Version(target), kv) => kv.map_or(0, |kv| kv.version).cmp(target),
            (CompareTarget::CreateRevision(target), kv) => kv.map_or(0, |kv| kv.create_revision).cmp(target),
            (CompareTarget::ModRevision(target), kv) => kv.map_or(0, |kv| kv.mod_revision).cmp(target),
            (CompareTarget::Lease(target), kv) => {
                let current = kv.and_then(|kv| kv.lease).map_or(0, |l| l.0);
                current.cmp(&target.map_or(0, |l| l.0))
            }
        };
        match self.op {
            CompareOp::Equal => ordering == Ordering::Equal,
            CompareOp::NotEqual => ordering != Ordering::Equal,
            CompareOp::Greater => ordering == Ordering::Greater,
            CompareOp::Less => ordering == Ordering::Less,
        }
    }
}

/// A borrowed view of a key's state, for evaluating compares.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CurrentKey<'a> {
    pub value: &'a [u8],
    pub create_revision: i64,
    pub mod_revision: i64,
    pub version: i64,
    pub lease: Option<LeaseId>,
}

/// One operation of a transaction branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnOp {
    /// Create or replace a key, attached to `lease` if given (which must exist).
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        lease: Option<LeaseId>,
    },
    /// Delete every key in the range (one key: [`TxnOp::delete`]).
    Delete { range: KeyRange },
    /// Read a range, seeing the effects of the operations before it in the same branch.
    Range(RangeRequest),
}

impl TxnOp {
    pub fn put(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        TxnOp::Put {
            key: key.into(),
            value: value.into(),
            lease: None,
        }
    }

    pub fn put_with_lease(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>, lease: LeaseId) -> Self {
        TxnOp::Put {
            key: key.into(),
            value: value.into(),
            lease: Some(lease),
        }
    }

    pub fn delete(key: impl Into<Vec<u8>>) -> Self {
        TxnOp::Delete {
            range: KeyRange::single(key),
        }
    }

    pub fn delete_range(range: KeyRange) -> Self {
        TxnOp::Delete { range }
    }

    pub fn get(key: impl Into<Vec<u8>>) -> Self {
        TxnOp::Range(RangeRequest::new(KeyRange::single(key)))
    }

    pub fn range(request: RangeRequest) -> Self {
        TxnOp::Range(request)
    }

    pub(crate) fn is_write(&self) -> bool {
        !matches!(self, TxnOp::Range(_))
    }
}

/// A transaction: if every compare holds, run `then`, else run `otherwise`; atomically.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Txn {
    pub compares: Vec<Compare>,
    pub then: Vec<TxnOp>,
    pub otherwise: Vec<TxnOp>,
}

impl Txn {
    pub fn new() -> Self {
        Txn::default()
    }

    pub fn when(mut self, compares: impl IntoIterator<Item = Compare>) -> Self {
        self.compares.extend(compares);
        self
    }

    pub fn and_then(mut self, ops: impl IntoIterator<Item = TxnOp>) -> Self {
        self.then.extend(ops);
        self
    }

    pub fn or_else(mut self, ops: impl IntoIterator<Item = TxnOp>) -> Self {
        self.otherwise.extend(ops);
        self
    }

    pub(crate) fn writes(&self) -> bool {
        self.then.iter().chain(&self.otherwise).any(TxnOp::is_write)
    }
}

/// The result of one operation of the branch that ran, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    Put,
    /// How many keys were deleted.
    Delete {
        deleted: u64,
    },
    Range(RangeResult),
}

/// The answer to a [`Txn`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnResult {
    /// Whether the compares held (and `then` ran) or not (and `otherwise` ran).
    pub succeeded: bool,
    /// The store revision after the transaction: its own revision if it changed something.
    pub revision: i64,
    /// One result per operation of the branch that ran.
    pub results: Vec<OpResult>,
}

/// A lease that was granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseGrant {
    pub id: LeaseId,
    /// The TTL granted, in seconds.
    pub ttl: i64,
}

/// A live lease, as [`crate::Store::lease_time_to_live`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseStatus {
    pub id: LeaseId,
    pub granted_ttl: i64,
    /// Seconds left before expiry, rounded up (etcd rounds down to whole seconds too; this
    /// rounds up so a live lease never reports 0).
    pub remaining_ttl: i64,
    /// The keys attached, in key order.
    pub keys: Vec<Vec<u8>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Put,
    Delete,
}

/// One change seen by a watch.
///
/// For a delete, `kv` has the key and the revision of the delete in `mod_revision`; its other
/// fields are zero or empty (as in etcd).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchEvent {
    pub kind: EventKind,
    pub kv: KeyValue,
}

/// The events of one watch, in revision order (and in operation order within a revision).
///
/// Ends with `None` when the store closes, or with one `Err` (for instance
/// [`StoreError::Compacted`] when the watcher fell too far behind) after which it yields `None`.
/// Dropping it cancels the watch.
#[derive(Debug)]
pub struct WatchStream {
    receiver: mpsc::Receiver<Result<WatchEvent, StoreError>>,
}

impl WatchStream {
    /// A stream fed by an implementation through the sender half of a channel.
    pub fn from_channel(receiver: mpsc::Receiver<Result<WatchEvent, StoreError>>) -> Self {
        WatchStream { receiver }
    }

    /// The next event; `None` when the watch is over.
    pub async fn next(&mut self) -> Option<Result<WatchEvent, StoreError>> {
        self.receiver.recv().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ranges_cover_exactly_the_prefix() {
        let range = KeyRange::prefix(b"ab".to_vec());
        assert!(range.contains(b"ab"));
        assert!(range.contains(b"ab\xff\xff"));
        assert!(!range.contains(b"ac"));
        assert!(!range.contains(b"aa\xff"));
        let all_ff = KeyRange::prefix(vec![0xff, 0xff]);
        assert_eq!(all_ff.end, None);
        assert!(all_ff.contains(&[0xff, 0xff, 0x01]));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
    }

    #[test]
    fn single_key_range_holds_one_key() {
        let range = KeyRange::single(b"k".to_vec());
        assert!(range.contains(b"k"));
        assert!(!range.contains(b"k\0"));
        assert!(!range.contains(b"j"));
    }

    #[test]
    fn compares_on_missing_keys_follow_etcd() {
        assert!(Compare::absent(b"k".to_vec()).holds(None));
        assert!(!Compare::present(b"k".to_vec()).holds(None));
        assert!(!Compare::value_is(b"k".to_vec(), b"".to_vec()).holds(None));
        assert!(Compare::mod_revision_is(b"k".to_vec(), 0).holds(None));
        let kv = CurrentKey {
            value: b"v",
            create_revision: 2,
            mod_revision: 5,
            version: 3,
            lease: Some(LeaseId(7)),
        };
        assert!(Compare::value_is(b"k".to_vec(), b"v".to_vec()).holds(Some(kv)));
        assert!(Compare::version_is(b"k".to_vec(), 3).holds(Some(kv)));
        assert!(Compare::lease_is(b"k".to_vec(), Some(LeaseId(7))).holds(Some(kv)));
        assert!(Compare::new(b"k".to_vec(), CompareOp::Less, CompareTarget::ModRevision(6)).holds(Some(kv)));
        assert!(!Compare::absent(b"k".to_vec()).holds(Some(kv)));
    }
}
