//! Applying transactions and lease changes on top of the durable state, inside the writer.
//!
//! The writer applies a batch of requests to an overlay (the batch's pending changes) over a
//! read view of the engine and the batches acknowledged but not yet in the engine (lower
//! overlays). Readers see a batch once its journal is synced, through the same lower overlays, so
//! they never see a write that could still be lost; each transaction in a batch sees the effects
//! of the ones before it, including those of the batch whose journal is still being synced.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use tokio::time::Instant;

use super::engine::{KeyBounds, Overlay, ReadView, Stored};
use super::lease::LeaseTable;
use super::watch::HistoryEvent;
use crate::error::StoreError;
use crate::limits::{Limits, validate};
use crate::types::{
    CurrentKey, KeyRange, KeyValue, LeaseId, OpResult, RangeRequest, RangeResult, Txn, TxnOp, TxnResult,
};

/// One change inside an applied change set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// The key's new state; its mod revision is the entry's revision.
    Put {
        key: Vec<u8>,
        kv: Stored,
    },
    Delete {
        key: Vec<u8>,
    },
    LeaseGrant {
        id: i64,
        ttl: i64,
    },
    LeaseRevoke {
        id: i64,
    },
}

/// An applied change set: everything one transaction, grant or revoke did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The store revision after this entry (unchanged by lease grants).
    pub revision: i64,
    pub changes: Vec<Change>,
}

impl Entry {
    /// About how many bytes the entry adds to a batch's commit.
    pub fn size(&self) -> usize {
        self.changes
            .iter()
            .map(|change| match change {
                Change::Put { key, kv } => 48 + key.len() + kv.value.len(),
                Change::Delete { key } => 16 + key.len(),
                Change::LeaseGrant { .. } | Change::LeaseRevoke { .. } => 16,
            })
            .sum()
    }
}

/// The engine's state seen through the changes of batches the engine does not hold yet (`lower`,
/// oldest first) and of the batch being applied (`overlay`), upper layers winning.
pub(crate) struct View<'a> {
    pub base: &'a ReadView,
    pub lower: Vec<&'a Overlay>,
    pub overlay: Overlay,
    pub revision: i64,
}

/// A key and its state.
pub(crate) type KeyState = (Vec<u8>, Stored);

/// Which layer holds the next key of a range: the engine, the pending changes, or both (the
/// pending change wins).
enum Layer {
    Durable,
    Pending,
    Both,
}

/// What one applied request produced, for the commit and for watchers.
pub(crate) struct Applied {
    pub entry: Entry,
    pub events: Vec<HistoryEvent>,
}

impl<'a> View<'a> {
    pub fn new(base: &'a ReadView, revision: i64) -> Self {
        View {
            base,
            lower: Vec::new(),
            overlay: BTreeMap::new(),
            revision,
        }
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Stored>, StoreError> {
        if let Some(pending) = self.overlay.get(key) {
            return Ok(pending.clone());
        }
        for lower in self.lower.iter().rev() {
            if let Some(pending) = lower.get(key) {
                return Ok(pending.clone());
            }
        }
        self.base.get(key)
    }

    /// Keys and states in `range`, in order, at most `limit` (0: all); and whether more exist.
    /// The engine's keys are read only as far as the limit needs.
    pub fn range(&self, range: &KeyRange, limit: usize) -> Result<(Vec<KeyState>, bool), StoreError> {
        let Some(bounds) = bounds(range) else {
            return Ok((Vec::new(), false));
        };
        // The pending layers are one batch each: merge them first, the upper one winning.
        let mut pending: BTreeMap<&[u8], Option<&Stored>> = BTreeMap::new();
        for layer in self.lower.iter().copied().chain([&self.overlay]) {
            for (key, kv) in layer.range::<[u8], _>(bounds) {
                pending.insert(key.as_slice(), kv.as_ref());
            }
        }
        let mut pending = pending.into_iter().peekable();
        let mut durable = self.base.range(bounds)?.peekable();
        let mut out = Vec::new();
        loop {
            let next = match (durable.peek(), pending.peek()) {
                (None, None) => break,
                (Some(_), None) | (Some(Err(_)), Some(_)) => Layer::Durable,
                (None, Some(_)) => Layer::Pending,
                (Some(Ok((durable_key, _))), Some((pending_key, _))) => {
                    match durable_key.as_slice().cmp(*pending_key) {
                        std::cmp::Ordering::Less => Layer::Durable,
                        std::cmp::Ordering::Equal => Layer::Both,
                        std::cmp::Ordering::Greater => Layer::Pending,
                    }
                }
            };
            let found = match next {
                Layer::Durable => Some(durable.next().expect("peeked")?),
                Layer::Pending | Layer::Both => {
                    if matches!(next, Layer::Both) {
                        durable.next();
                    }
                    let (key, kv) = pending.next().expect("peeked");
                    kv.map(|kv| (key.to_vec(), kv.clone()))
                }
            };
            if let Some(found) = found {
                if limit > 0 && out.len() == limit {
                    return Ok((out, true));
                }
                out.push(found);
            }
        }
        Ok((out, false))
    }

    /// Applies a transaction that writes (in either branch). Changes nothing on error.
    pub fn apply_txn(
        &mut self,
        txn: Txn,
        leases: &mut LeaseTable,
        limits: Limits,
    ) -> Result<(TxnResult, Option<Applied>), StoreError> {
        validate(&txn, limits)?;
        let succeeded = self.compares_hold(&txn)?;
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
                    let previous = self.get(&key)?;
                    let kv = Stored {
                        value: Arc::from(value),
                        create_revision: previous.as_ref().map_or(revision, |p| p.create_revision),
                        mod_revision: revision,
                        version: previous.as_ref().map_or(1, |p| p.version + 1),
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
                        .range(&range, 0)?
                        .0
                        .into_iter()
                        .map(|(k, kv)| (k, kv.lease))
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
                    results.push(OpResult::Range(self.range_result(&request, revision)?));
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

    /// Revokes a lease and deletes its keys in one revision (none if it had no keys). `None`
    /// when the lease does not exist.
    pub fn revoke(&mut self, lease: LeaseId, leases: &mut LeaseTable) -> Result<Option<Applied>, StoreError> {
        let Some(keys) = leases.remove(lease) else {
            return Ok(None);
        };
        let mut changes = vec![Change::LeaseRevoke { id: lease.0 }];
        let mut events = Vec::new();
        let mut live = Vec::new();
        for key in keys {
            if self.get(&key)?.is_some_and(|kv| kv.lease == lease.0) {
                live.push(key);
            }
        }
        if !live.is_empty() {
            self.revision += 1;
            for key in live {
                self.delete(key, &mut changes, &mut events);
            }
        }
        Ok(Some(Applied {
            entry: Entry {
                revision: self.revision,
                changes,
            },
            events,
        }))
    }

    fn delete(&mut self, key: Vec<u8>, changes: &mut Vec<Change>, events: &mut Vec<HistoryEvent>) {
        events.push(HistoryEvent::delete(key.clone()));
        changes.push(Change::Delete { key: key.clone() });
        self.overlay.insert(key, None);
    }

    pub fn range_result(&self, request: &RangeRequest, revision: i64) -> Result<RangeResult, StoreError> {
        let (found, more) = self.range(&request.range, request.limit)?;
        Ok(RangeResult {
            kvs: found.into_iter().map(|(k, kv)| key_value(&k, &kv)).collect(),
            more,
            revision,
        })
    }

    /// Whether every compare of the transaction holds.
    fn compares_hold(&self, txn: &Txn) -> Result<bool, StoreError> {
        for compare in &txn.compares {
            let found = self.get(&compare.key)?;
            if !compare.holds(found.as_ref().map(current)) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Runs a transaction that only reads, on one consistent view.
pub(crate) fn read_only_txn(view: &View<'_>, txn: Txn, limits: Limits) -> Result<TxnResult, StoreError> {
    validate(&txn, limits)?;
    let revision = view.revision;
    let succeeded = view.compares_hold(&txn)?;
    let ops = if succeeded { txn.then } else { txn.otherwise };
    let results = ops
        .iter()
        .map(|op| match op {
            TxnOp::Range(request) => Ok(OpResult::Range(view.range_result(request, revision)?)),
            _ => unreachable!("read-only transactions hold only ranges"),
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(TxnResult {
        succeeded,
        revision,
        results,
    })
}

/// The bounds of `range` as map bounds; `None` when it holds no key.
fn bounds(range: &KeyRange) -> Option<KeyBounds<'_>> {
    let start = Bound::Included(range.start.as_slice());
    match range.end.as_deref() {
        Some(end) if end <= range.start.as_slice() => None,
        Some(end) => Some((start, Bound::Excluded(end))),
        None => Some((start, Bound::Unbounded)),
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
    use super::super::engine::{Commit, Engine};
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

    /// Reads of the engine seen through the batch being committed and the batch being
    /// applied give exactly what the merged map would give, for every key, bound and limit.
    #[test]
    fn ranges_through_the_overlay_match_the_merged_map() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..300 {
            let engine = Engine::in_memory(1 << 20).unwrap();
            let mut base = BTreeMap::new();
            for i in 0..rng.next(20) {
                base.insert(rng.key(), stored(i as i64));
            }
            let committed: Overlay = base.iter().map(|(k, v)| (k.clone(), Some(v.clone()))).collect();
            engine
                .commit(&Commit {
                    overlays: &[&committed],
                    lease_changes: &[],
                    revision: 100,
                    next_lease_id: 1,
                    checkpoint: None,
                })
                .unwrap();
            let read = engine.read().unwrap();
            // Zero to three acknowledged batches the engine does not hold yet, oldest first.
            let mut lowers = Vec::new();
            let mut merged = base.clone();
            for layer in 0..rng.next(4) {
                let mut lower = Overlay::new();
                for i in 0..rng.next(10) {
                    let key = rng.key();
                    let revision = 100 + 20 * layer as i64 + i as i64;
                    if rng.next(3) == 0 {
                        lower.insert(key.clone(), None);
                        merged.remove(&key);
                    } else {
                        lower.insert(key.clone(), Some(stored(revision)));
                        merged.insert(key, stored(revision));
                    }
                }
                lowers.push(lower);
            }
            let mut view = View::new(&read, 100);
            view.lower = lowers.iter().collect();
            for i in 0..rng.next(20) {
                let key = rng.key();
                if rng.next(3) == 0 {
                    view.overlay.insert(key.clone(), None);
                    merged.remove(&key);
                } else {
                    view.overlay.insert(key.clone(), Some(stored(300 + i as i64)));
                    merged.insert(key, stored(300 + i as i64));
                }
            }
            for _ in 0..10 {
                let key = rng.key();
                assert_eq!(
                    view.get(&key).unwrap().as_ref(),
                    merged.get(&key),
                    "round {round}, get {key:?}"
                );
            }
            for _ in 0..10 {
                let range = match rng.next(3) {
                    0 => KeyRange::prefix(rng.key()),
                    1 => KeyRange::new(rng.key(), rng.key()),
                    _ => KeyRange::from(rng.key()),
                };
                let limit = rng.next(6) as usize;
                let (found, more) = view.range(&range, limit).unwrap();
                let want: Vec<KeyState> = merged
                    .iter()
                    .filter(|(k, _)| range.contains(k))
                    .map(|(k, v)| (k.clone(), v.clone()))
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
