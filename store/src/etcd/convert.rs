//! Conversions between the store's request and answer types and etcd-client's.

use etcd_client as etcd;

use crate::types::{
    Compare, CompareOp, CompareTarget, EventKind, KeyRange, KeyValue, LeaseId, OpResult, RangeRequest,
    RangeResult, TxnOp, WatchEvent,
};

/// A [`KeyRange`] as etcd's `key` / `range_end` pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum EtcdRange {
    /// The range holds no key (`end <= start`). etcd has no spelling for it that is safe in
    /// every request (an empty `range_end` means one key, `"\0"` means every key from `key` on),
    /// so it is sent as [`EtcdRange::EMPTY_KEY`] to itself, and never watched.
    Empty,
    /// `[key, end)`; `end: None` is etcd's `range_end = "\0"` (every key from `key` on).
    Keys { key: Vec<u8>, end: Option<Vec<u8>> },
}

impl EtcdRange {
    /// A key that starts an empty range `[key, key)` in etcd: any key but `"\0"`, whose range
    /// end `"\0"` would mean "to the end".
    const EMPTY_KEY: &'static [u8] = b"\x01";

    /// etcd refuses an empty key, so an empty start is `"\0"`, the smallest key etcd can hold.
    pub(super) fn new(range: &KeyRange) -> Self {
        let key = if range.start.is_empty() {
            vec![0]
        } else {
            range.start.clone()
        };
        match &range.end {
            None => EtcdRange::Keys { key, end: None },
            Some(end) if end.as_slice() <= key.as_slice() => EtcdRange::Empty,
            Some(end) => EtcdRange::Keys {
                key,
                end: Some(end.clone()),
            },
        }
    }

    /// The key to send and the options that carry the range end.
    pub(super) fn get_options(&self, limit: usize) -> (Vec<u8>, etcd::GetOptions) {
        let options = etcd::GetOptions::new().with_limit(i64::try_from(limit).unwrap_or(i64::MAX));
        match self {
            EtcdRange::Empty => (Self::EMPTY_KEY.to_vec(), options.with_range(Self::EMPTY_KEY)),
            EtcdRange::Keys { key, end: None } => (key.clone(), options.with_from_key()),
            EtcdRange::Keys { key, end: Some(end) } => (key.clone(), options.with_range(end.clone())),
        }
    }

    fn delete_options(&self) -> (Vec<u8>, etcd::DeleteOptions) {
        let options = etcd::DeleteOptions::new();
        match self {
            EtcdRange::Empty => (Self::EMPTY_KEY.to_vec(), options.with_range(Self::EMPTY_KEY)),
            EtcdRange::Keys { key, end: None } => (key.clone(), options.with_from_key()),
            EtcdRange::Keys { key, end: Some(end) } => (key.clone(), options.with_range(end.clone())),
        }
    }

    /// The key and options of a watch from `start_revision` (`0`: from the next revision); `None`
    /// for an empty range, which no event can fall in.
    pub(super) fn watch_options(&self, start_revision: i64) -> Option<(Vec<u8>, etcd::WatchOptions)> {
        let options = etcd::WatchOptions::new().with_start_revision(start_revision);
        match self {
            EtcdRange::Empty => None,
            EtcdRange::Keys { key, end: None } => Some((key.clone(), options.with_from_key())),
            EtcdRange::Keys { key, end: Some(end) } => Some((key.clone(), options.with_range(end.clone()))),
        }
    }
}

pub(super) fn lease_from_etcd(lease: i64) -> Option<LeaseId> {
    (lease != 0).then_some(LeaseId(lease))
}

fn lease_to_etcd(lease: Option<LeaseId>) -> i64 {
    lease.map_or(0, |lease| lease.0)
}

pub(super) fn key_value(kv: &etcd::KeyValue) -> KeyValue {
    KeyValue {
        key: kv.key().to_vec(),
        value: kv.value().to_vec(),
        create_revision: kv.create_revision(),
        mod_revision: kv.mod_revision(),
        version: kv.version(),
        lease: lease_from_etcd(kv.lease()),
    }
}

/// A range answer; `fallback_revision` stands in when etcd sent no header (it always does for
/// a top-level range; ranges inside a transaction carry the transaction's read revision).
pub(super) fn range_result(response: &etcd::GetResponse, fallback_revision: i64) -> RangeResult {
    RangeResult {
        kvs: response.kvs().iter().map(key_value).collect(),
        more: response.more(),
        revision: response
            .header()
            .map_or(fallback_revision, |header| header.revision()),
    }
}

fn compare_op(op: CompareOp) -> etcd::CompareOp {
    match op {
        CompareOp::Equal => etcd::CompareOp::Equal,
        CompareOp::NotEqual => etcd::CompareOp::NotEqual,
        CompareOp::Greater => etcd::CompareOp::Greater,
        CompareOp::Less => etcd::CompareOp::Less,
    }
}

pub(super) fn compare(compare: &Compare) -> etcd::Compare {
    let key = compare.key.clone();
    let op = compare_op(compare.op);
    match &compare.target {
        CompareTarget::Value(value) => etcd::Compare::value(key, op, value.clone()),
        CompareTarget::Version(version) => etcd::Compare::version(key, op, *version),
        CompareTarget::CreateRevision(revision) => etcd::Compare::create_revision(key, op, *revision),
        CompareTarget::ModRevision(revision) => etcd::Compare::mod_revision(key, op, *revision),
        CompareTarget::Lease(lease) => etcd::Compare::lease(key, op, lease_to_etcd(*lease)),
    }
}

pub(super) fn txn_op(op: &TxnOp) -> etcd::TxnOp {
    match op {
        TxnOp::Put { key, value, lease } => etcd::TxnOp::put(
            key.clone(),
            value.clone(),
            Some(etcd::PutOptions::new().with_lease(lease_to_etcd(*lease))),
        ),
        TxnOp::Delete { range } => {
            let (key, options) = EtcdRange::new(range).delete_options();
            etcd::TxnOp::delete(key, Some(options))
        }
        TxnOp::Range(RangeRequest { range, limit }) => {
            let (key, options) = EtcdRange::new(range).get_options(*limit);
            etcd::TxnOp::get(key, Some(options))
        }
    }
}

/// One operation's answer inside a transaction that was applied at `revision`; `None` for a
/// nested transaction's answer, which etcd sends only for a nested transaction the store never
/// sends.
pub(super) fn op_result(response: &etcd::TxnOpResponse, revision: i64) -> Option<OpResult> {
    match response {
        etcd::TxnOpResponse::Put(_) => Some(OpResult::Put),
        etcd::TxnOpResponse::Delete(delete) => Some(OpResult::Delete {
            deleted: u64::try_from(delete.deleted()).unwrap_or(0),
        }),
        etcd::TxnOpResponse::Get(get) => Some(OpResult::Range(range_result(get, revision))),
        etcd::TxnOpResponse::Txn(_) => None,
    }
}

/// A watch event; `None` for an event type this version of the store does not know.
pub(super) fn watch_event(event: &etcd::Event) -> Option<WatchEvent> {
    let kind = match event.event_type() {
        etcd::EventType::Put => EventKind::Put,
        etcd::EventType::Delete => EventKind::Delete,
    };
    Some(WatchEvent {
        kind,
        kv: key_value(event.kv()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_map_onto_etcds_key_and_range_end() {
        assert_eq!(
            EtcdRange::new(&KeyRange::prefix(b"ab".to_vec())),
            EtcdRange::Keys {
                key: b"ab".to_vec(),
                end: Some(b"ac".to_vec())
            }
        );
        assert_eq!(
            EtcdRange::new(&KeyRange::from(Vec::new())),
            EtcdRange::Keys {
                key: vec![0],
                end: None
            },
            "an empty start is etcd's smallest key"
        );
        assert_eq!(
            EtcdRange::new(&KeyRange::new(b"b".to_vec(), b"b".to_vec())),
            EtcdRange::Empty
        );
        assert_eq!(
            EtcdRange::new(&KeyRange::new(b"b".to_vec(), Vec::new())),
            EtcdRange::Empty
        );
        assert_eq!(
            EtcdRange::new(&KeyRange::new(Vec::new(), vec![0])),
            EtcdRange::Empty,
            "[\"\", \"\\0\") holds no key etcd can store, and \"\\0\" must not reach etcd as a range end"
        );
        assert_eq!(EtcdRange::Empty.watch_options(0).map(|(key, _)| key), None);
    }

    #[test]
    fn lease_zero_is_no_lease() {
        assert_eq!(lease_from_etcd(0), None);
        assert_eq!(lease_from_etcd(7), Some(LeaseId(7)));
        assert_eq!(lease_to_etcd(None), 0);
    }
}
