//! Applying transactions and lease changes on top of the durable state, inside the writer.
//!
//! The writer applies a batch of requests to an overlay (the batch's pending changes) over the
//! durable map, which readers keep reading undisturbed. After the batch's log write is synced,
//! the overlay is folded into the durable map. So readers never see a write that could still be
//! lost, and each transaction in a batch sees the effects of the ones before it, including those
//! of the batch still being synced (a second, lower overlay).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use tokio::time::Instant;

use super::lease::LeaseTable;
use super::wal::{Change, Entry, KeyMap, Stored};
use super::watch::HistoryEvent;
use crate::error::StoreError;
use crate::types::{
    CurrentKey, KeyRange, KeyValue, LeaseId, OpResult, RangeRequest, RangeResult, Txn, TxnOp, TxnResult,
};

/// Limits etcd enforces on requests, kept so that code that works here works on etcd.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_txn_ops: usize,
    pub max_request_bytes: usize,
}

/// Pending changes of a batch: `None` marks a delete.
pub(crate) type Overlay = BTreeMap<Vec<u8>, Option<Stored>>;

/// The durable map seen through the pending changes of the batch being synced (`lower`) and of
/// the batch being applied (`overlay`), upper layers winning.
pub(crate) struct View<'a> {
    pub base: &'a KeyMap,
    pub lower: Option<&'a Overlay>,
    pub overlay: Overlay,
    pub revision: i64,
}

/// What one applied request produced, for the log and for watchers.
pub(crate) struct Applied {
    pub entry: Entry,
    pub events: Vec<HistoryEvent>,
}

type Layer<'m> = Box<dyn Iterator<Item = (&'m [u8], Option<&'m Stored>)> + 'm>;

/// Merges two key-ordered layers; on equal keys the upper one wins.
struct Merge<'m> {
    lower: std::iter::Peekable<Layer<'m>>,
    upper: std::iter::Peekable<Layer<'m>>,
}

impl<'m> Iterator for Merge<'m> {
    type Item = (&'m [u8], Option<&'m Stored>);

    fn next(&mut self) -> Option<Self::Item> {
        match (self.lower.peek(), self.upper.peek()) {
            (None, _) => self.upper.next(),
            (_, None) => self.lower.next(),
            (Some((lower, _)), Some((upper, _))) => {
                if lower < upper {
                    self.lower.next()
                } else {
                    if lower == upper {
                        self.lower.next();
                    }
                    self.upper.next()
                }
            }
        }
    }
}

fn merge<'m>(lower: Layer<'m>, upper: Layer<'m>) -> Layer<'m> {
    Box::new(Merge {
        lower: lower.peekable(),
        upper: upper.peekable(),
    })
}

impl<'a> View<'a> {
    pub fn new(base: &'a KeyMap, revision: i64) -> Self {
        View {
            base,
            lower: None,
            overlay: BTreeMap::new(),
            revision,
        }
    }

    pub fn get(&self, key: &[u8]) -> Option<&Stored> {
        if let Some(pending) = self.overlay.get(key) {
            return pending.as_ref();
        }
        if let Some(pending) = self.lower.and_then(|lower| lower.get(key)) {
            return pending.as_ref();
        }
        self.base.get(key)
    }

    /// Keys and states in `range`, in order, at most `limit` (0: all); and whether more exist.
    pub fn range(&self, range: &KeyRange, limit: usize) -> (Vec<(&[u8], &Stored)>, bool) {
        let mut layers: Layer<'_> =
            Box::new(durable_range(self.base, range).map(|(k, v)| (k.as_slice(), Some(v))));
        if let Some(lower) = self.lower {
            let lower = range_of(lower, range).map(|(k, v)| (k.as_slice(), v.as_ref()));
            layers = merge(layers, Box::new(lower));
        }
        let overlay = range_of(&self.overlay, range).map(|(k, v)| (k.as_slice(), v.as_ref()));
        let mut live = merge(layers, Box::new(overlay)).filter_map(|(k, v)| Some((k, v?)));
        let mut out = Vec::new();
        for found in live.by_ref() {
            if limit > 0 && out.len() == limit {
                return (out, true);
            }
            out.push(found);
        }
        (out, false)
    }

    /// Applies a transaction that writes (in either branch). Changes nothing on error.
    pub fn apply_txn(
        &mut self,
        txn: Txn,
        leases: &mut LeaseTable,
        limits: Limits,
    ) -> Result<(TxnResult, Option<Applied>), StoreError> {
        validate(&txn, limits)?;
        let succeeded = txn
            .compares
            .iter()
            .all(|c| c.holds(self.get(&c.key).map(current)));
        let ops = if succeeded { txn.then } else { txn.otherwise };
        for op in &ops {
            if let TxnOp::Put {
                lease: Some(lease), ..
            } = op
                && !leases.exists(*lease)
            {
                return Err(StoreError::LeaseNotFound(*lease));
            }
        }
        let revision = self.revision + 1;
        let mut changes = Vec::new();
        let mut events = Vec::new();
        let mut results = Vec::with_capacity(ops.len());
        for op in ops {
            match op {
                TxnOp::Put { key, value, lease } => {
                    let lease = lease.map_or(0, |l| l.0);
                    let previous = self.get(&key);
                    let kv = Stored {
                        value: Arc::from(value),
                        create_revision: previous.map_or(revision, |p| p.create_revision),
                        mod_revision: revision,
                        version: previous.map_or(1, |p| p.version + 1),
                        lease,
                    };
                    if let Some(previous) = previous
                        && previous.lease != 0
                        && previous.lease != lease
                    {
                        leases.detach(previous.lease, &key);
                    }
                    if lease != 0 {
                        leases.attach(lease, &key);
                    }
                    events.push(HistoryEvent::put(key.clone(), kv.clone()));
                    changes.push(Change::Put {
                        key: key.clone(),
                        kv: kv.clone(),
                    });
                    self.overlay.insert(key, Some(kv));
                    results.push(OpResult::Put);
                }
                TxnOp::Delete { range } => {
                    let doomed: Vec<(Vec<u8>, i64)> = self
                        .range(&range, 0)
                        .0
                        .into_iter()
                        .map(|(k, kv)| (k.to_vec(), kv.lease))
                        .collect();
                    let deleted = doomed.len() as u64;
                    for (key, lease) in doomed {
                        if lease != 0 {
                            leases.detach(lease, &key);
                        }
                        self.delete(key, &mut changes, &mut events);
                    }
                    results.push(OpResult::Delete { deleted });
                }
                TxnOp::Range(request) => {
                    let revision = if changes.is_empty() {
                        self.revision
                    } else {
                        revision
                    };
                    results.push(OpResult::Range(self.range_result(&request, revision)));
                }
            }
        }
        let applied = if changes.is_empty() {
            None
        } else {
            self.revision = revision;
            Some(Applied {
                entry: Entry { revision, changes },
                events,
            })
        };
        Ok((
            TxnResult {
                succeeded,
                revision: self.revision,
                results,
            },
            applied,
        ))
    }

    /// Grants a lease; the grant is logged but does not change the revision.
    pub fn grant(&mut self, ttl: i64, leases: &mut LeaseTable, now: Instant) -> (LeaseId, Applied) {
        let id = leases.grant(ttl, now);
        let entry = Entry {
            revision: self.revision,
            changes: vec![Change::LeaseGrant { id: id.0, ttl }],
        };
        (
            id,
            Applied {
                entry,
                events: Vec::new(),
            },
        )
    }

    /// Revokes a lease and deletes its keys in one revision (none if it had no keys).
    pub fn revoke(&mut self, lease: LeaseId, leases: &mut LeaseTable) -> Option<Applied> {
        let keys = leases.remove(lease)?;
        let mut changes = vec![Change::LeaseRevoke { id: lease.0 }];
        let mut events = Vec::new();
        let live: Vec<Vec<u8>> = keys
            .into_iter()
            .filter(|k| self.get(k).is_some_and(|kv| kv.lease == lease.0))
            .collect();
        if !live.is_empty() {
            self.revision += 1;
            for key in live {
                self.delete(key, &mut changes, &mut events);
            }
        }
        Some(Applied {
            entry: Entry {
                revision: self.revision,
                changes,
            },
            events,
        })
    }

    fn delete(&mut self, key: Vec<u8>, changes: &mut Vec<Change>, events: &mut Vec<HistoryEvent>) {
        events.push(HistoryEvent::delete(key.clone()));
        changes.push(Change::Delete { key: key.clone() });
        self.overlay.insert(key, None);
    }

    pub fn range_result(&self, request: &RangeRequest, revision: i64) -> RangeResult {
        let (found, more) = self.range(&request.range, request.limit);
        RangeResult {
            kvs: found.into_iter().map(|(k, kv)| key_value(k, kv)).collect(),
            more,
            revision,
        }
    }
}

/// Runs a transaction that only reads, directly on the durable state.
pub(crate) fn read_only_txn(
    base: &KeyMap,
    revision: i64,
    txn: Txn,
    limits: Limits,
) -> Result<TxnResult, StoreError> {
    validate(&txn, limits)?;
    let view = View::new(base, revision);
    let succeeded = txn
        .compares
        .iter()
        .all(|c| c.holds(view.get(&c.key).map(current)));
    let ops = if succeeded { txn.then } else { txn.otherwise };
    let results = ops
        .iter()
        .map(|op| match op {
            TxnOp::Range(request) => OpResult::Range(view.range_result(request, revision)),
            _ => unreachable!("read-only transactions hold only ranges"),
        })
        .collect();
    Ok(TxnResult {
        succeeded,
        revision,
        results,
    })
}

/// etcd's request rules: operation count and request size ([`StoreError::TooLarge`]), non-empty
/// keys, and no key written twice (or put and deleted) in one branch.
fn validate(txn: &Txn, limits: Limits) -> Result<(), StoreError> {
    let invalid = |why: String| Err(StoreError::InvalidRequest(why));
    for (name, len) in [
        ("compares", txn.compares.len()),
        ("then operations", txn.then.len()),
        ("else operations", txn.otherwise.len()),
    ] {
        if len > limits.max_txn_ops {
            return Err(StoreError::TooLarge(format!(
                "{len} {name}, more than the limit of {}",
                limits.max_txn_ops
            )));
        }
    }
    let mut size = 0;
    for compare in &txn.compares {
        size += compare.key.len();
        if let crate::types::CompareTarget::Value(v) = &compare.target {
            size += v.len();
        }
    }
    for branch in [&txn.then, &txn.otherwise] {
        let mut puts: Vec<&[u8]> = Vec::new();
        for op in branch.iter() {
            match op {
                TxnOp::Put { key, value, .. } => {
                    if key.is_empty() {
                        return invalid("empty key".into());
                    }
                    size += key.len() + value.len();
                    puts.push(key);
                }
                TxnOp::Delete { range } | TxnOp::Range(RangeRequest { range, .. }) => {
                    size += range.start.len() + range.end.as_ref().map_or(0, Vec::len);
                }
            }
        }
        puts.sort_unstable();
        if puts.windows(2).any(|w| w[0] == w[1]) {
            return invalid("the same key is put twice in one transaction".into());
        }
        for op in branch.iter() {
            if let TxnOp::Delete { range } = op
                && puts.iter().any(|k| range.contains(k))
            {
                return invalid("a key is both put and deleted in one transaction".into());
            }
        }
    }
    if size > limits.max_request_bytes {
        return Err(StoreError::TooLarge(format!(
            "request of {size} bytes, more than the limit of {}",
            limits.max_request_bytes
        )));
    }
    Ok(())
}

/// A key range as the maps take it.
type KeyBounds<'r> = (Bound<&'r [u8]>, Bound<&'r [u8]>);

/// The bounds of `range` as map bounds; `None` when it holds no key.
fn bounds(range: &KeyRange) -> Option<KeyBounds<'_>> {
    let start = Bound::Included(range.start.as_slice());
    match range.end.as_deref() {
        Some(end) if end <= range.start.as_slice() => None,
        Some(end) => Some((start, Bound::Excluded(end))),
        None => Some((start, Bound::Unbounded)),
    }
}

/// Keys of the durable map in `range`, in order.
fn durable_range<'m>(
    map: &'m KeyMap,
    range: &KeyRange,
) -> Box<dyn Iterator<Item = (&'m Vec<u8>, &'m Stored)> + 'm> {
    match bounds(range) {
        None => Box::new(std::iter::empty()),
        Some(bounds) => Box::new(map.range::<_, [u8]>(bounds)),
    }
}

/// Keys of a pending batch in `range`, in order.
fn range_of<'m, V>(
    map: &'m BTreeMap<Vec<u8>, V>,
    range: &KeyRange,
) -> Box<dyn Iterator<Item = (&'m Vec<u8>, &'m V)> + 'm> {
    match bounds(range) {
        None => Box::new(std::iter::empty()),
        Some(bounds) => Box::new(map.range::<[u8], _>(bounds)),
    }
}

fn current(kv: &Stored) -> CurrentKey<'_> {
    CurrentKey {
        value: &kv.value,
        create_revision: kv.create_revision,
        mod_revision: kv.mod_revision,
        version: kv.version,
        lease: lease_id(kv.lease),
    }
}

pub(crate) fn lease_id(raw: i64) -> Option<LeaseId> {
    (raw != 0).then_some(LeaseId(raw))
}

pub(crate) fn key_value(key: &[u8], kv: &Stored) -> KeyValue {
    KeyValue {
        key: key.to_vec(),
        value: kv.value.to_vec(),
        create_revision: kv.create_revision,
        mod_revision: kv.mod_revision,
        version: kv.version,
        lease: lease_id(kv.lease),
    }
}

/// Used by readers too: a delete's event payload as etcd shapes it.
pub(crate) fn deleted_key_value(key: &[u8], revision: i64) -> KeyValue {
    KeyValue {
        key: key.to_vec(),
        value: Vec::new(),
        create_revision: 0,
        mod_revision: revision,
        version: 0,
        lease: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator, so failures reproduce.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self, below: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % below
        }

        fn key(&mut self) -> Vec<u8> {
            let len = 1 + self.next(3) as usize;
            (0..len).map(|_| b'a' + self.next(4) as u8).collect()
        }
    }

    fn stored(revision: i64) -> Stored {
        Stored {
            value: Arc::from(revision.to_string().into_bytes()),
            create_revision: revision,
            mod_revision: revision,
            version: 1,
            lease: 0,
        }
    }

    /// Reads of the durable map seen through the batch being synced and the batch being
    /// applied give exactly what the merged map would give, for every key, bound and limit.
    #[test]
    fn ranges_through_the_overlay_match_the_merged_map() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..300 {
            let mut base = KeyMap::new();
            for i in 0..rng.next(20) {
                base.insert(rng.key(), stored(i as i64));
            }
            let mut lower = Overlay::new();
            let mut merged = base.clone();
            for i in 0..rng.next(10) {
                let key = rng.key();
                if rng.next(3) == 0 {
                    lower.insert(key.clone(), None);
                    merged.remove(&key);
                } else {
                    lower.insert(key.clone(), Some(stored(100 + i as i64)));
                    merged.insert(key, stored(100 + i as i64));
                }
            }
            let mut view = View::new(&base, 100);
            if rng.next(2) == 0 {
                view.lower = Some(&lower);
            } else {
                merged = base.clone();
            }
            for i in 0..rng.next(20) {
                let key = rng.key();
                if rng.next(3) == 0 {
                    view.overlay.insert(key.clone(), None);
                    merged.remove(&key);
                } else {
                    view.overlay.insert(key.clone(), Some(stored(200 + i as i64)));
                    merged.insert(key, stored(200 + i as i64));
                }
            }
            for _ in 0..10 {
                let key = rng.key();
                assert_eq!(view.get(&key), merged.get(&key), "round {round}, get {key:?}");
            }
            for _ in 0..10 {
                let range = match rng.next(3) {
                    0 => KeyRange::prefix(rng.key()),
                    1 => KeyRange::new(rng.key(), rng.key()),
                    _ => KeyRange::from(rng.key()),
                };
                let limit = rng.next(6) as usize;
                let (found, more) = view.range(&range, limit);
                let want: Vec<(&[u8], &Stored)> = merged
                    .iter()
                    .filter(|(k, _)| range.contains(k))
                    .map(|(k, v)| (k.as_slice(), v))
                    .collect();
                let cut = if limit == 0 {
                    want.len()
                } else {
                    limit.min(want.len())
                };
                assert_eq!(found, want[..cut], "round {round}, {range:?} limit {limit}");
                assert_eq!(more, cut < want.len(), "round {round}");
            }
        }
    }
}
