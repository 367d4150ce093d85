//! `EmbeddedStore` against a plain model of etcd's semantics: random transactions, lease grants
//! and revokes give the same answers from both, and the state after every restart (from logs and
//! snapshots alike) is the model's state.

use std::collections::{BTreeMap, BTreeSet};

use agentprocess_store::{
    Compare, CompareOp, CompareTarget, EmbeddedOptions, EmbeddedStore, KeyRange, KeyValue, LeaseId, OpResult,
    RangeRequest, RangeResult, Store, StoreError, Txn, TxnOp, TxnResult,
};

/// A small deterministic generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    fn key(&mut self) -> Vec<u8> {
        let len = 1 + self.below(3) as usize;
        (0..len).map(|_| b'a' + self.below(3) as u8).collect()
    }
}

#[derive(Debug, Default)]
struct Model {
    kvs: BTreeMap<Vec<u8>, KeyValue>,
    revision: i64,
    leases: BTreeMap<LeaseId, BTreeSet<Vec<u8>>>,
}

impl Model {
    fn holds(&self, compare: &Compare) -> bool {
        let kv = self.kvs.get(&compare.key);
        let ordering = match (&compare.target, kv) {
            (CompareTarget::Value(_), None) => return false,
            (CompareTarget::Value(v), Some(kv)) => kv.value.cmp(v),
            (CompareTarget::Version(v), kv) => kv.map_or(0, |kv| kv.version).cmp(v),
            (CompareTarget::CreateRevision(v), kv) => kv.map_or(0, |kv| kv.create_revision).cmp(v),
            (CompareTarget::ModRevision(v), kv) => kv.map_or(0, |kv| kv.mod_revision).cmp(v),
            (CompareTarget::Lease(v), kv) => kv
                .and_then(|kv| kv.lease)
                .map_or(0, |l| l.0)
                .cmp(&v.map_or(0, |l| l.0)),
        };
        match compare.op {
            CompareOp::Equal => ordering.is_eq(),
            CompareOp::NotEqual => ordering.is_ne(),
            CompareOp::Greater => ordering.is_gt(),
            CompareOp::Less => ordering.is_lt(),
        }
    }

    fn range(&self, request: &RangeRequest, revision: i64) -> RangeResult {
        let all: Vec<KeyValue> = self
            .kvs
            .values()
            .filter(|kv| request.range.contains(&kv.key))
            .cloned()
            .collect();
        let cut = if request.limit == 0 {
            all.len()
        } else {
            request.limit.min(all.len())
        };
        RangeResult {
            more: cut < all.len(),
            kvs: all[..cut].to_vec(),
            revision,
        }
    }

    fn delete(&mut self, key: &[u8]) {
        if let Some(kv) = self.kvs.remove(key)
            && let Some(lease) = kv.lease
        {
            self.leases.get_mut(&lease).unwrap().remove(key);
        }
    }

    fn txn(&mut self, txn: &Txn) -> Result<TxnResult, StoreError> {
        for branch in [&txn.then, &txn.otherwise] {
            let puts: Vec<&Vec<u8>> = branch
                .iter()
                .filter_map(|op| match op {
                    TxnOp::Put { key, .. } => Some(key),
                    _ => None,
                })
                .collect();
            let unique: BTreeSet<&Vec<u8>> = puts.iter().copied().collect();
            let overlaps = branch.iter().any(|op| match op {
                TxnOp::Delete { range } => puts.iter().any(|k| range.contains(k)),
                _ => false,
            });
            if unique.len() < puts.len() || overlaps {
                return Err(StoreError::InvalidRequest("model".into()));
            }
        }
        let succeeded = txn.compares.iter().all(|c| self.holds(c));
        let ops = if succeeded { &txn.then } else { &txn.otherwise };
        for op in ops {
            if let TxnOp::Put {
                lease: Some(lease), ..
            } = op
                && !self.leases.contains_key(lease)
            {
                return Err(StoreError::LeaseNotFound(*lease));
            }
        }
        let revision = self.revision + 1;
        let mut changed = false;
        let mut results = Vec::new();
        for op in ops {
            match op {
                TxnOp::Put { key, value, lease } => {
                    let previous = self.kvs.get(key).cloned();
                    self.delete(key);
                    if let Some(lease) = lease {
                        self.leases.get_mut(lease).unwrap().insert(key.clone());
                    }
                    self.kvs.insert(
                        key.clone(),
                        KeyValue {
                            key: key.clone(),
                            value: value.clone(),
                            create_revision: previous.as_ref().map_or(revision, |p| p.create_revision),
                            mod_revision: revision,
                            version: previous.as_ref().map_or(1, |p| p.version + 1),
                            lease: *lease,
                        },
                    );
                    changed = true;
                    results.push(OpResult::Put);
                }
                TxnOp::Delete { range } => {
                    let doomed: Vec<Vec<u8>> =
                        self.kvs.keys().filter(|k| range.contains(k)).cloned().collect();
                    for key in &doomed {
                        self.delete(key);
                    }
                    changed |= !doomed.is_empty();
                    results.push(OpResult::Delete {
                        deleted: doomed.len() as u64,
                    });
                }
                TxnOp::Range(request) => {
                    let at = if changed { revision } else { self.revision };
                    results.push(OpResult::Range(self.range(request, at)));
                }
            }
        }
        if changed {
            self.revision = revision;
        }
        Ok(TxnResult {
            succeeded,
            revision: self.revision,
            results,
        })
    }

    fn revoke(&mut self, lease: LeaseId) -> Result<(), StoreError> {
        let keys = self
            .leases
            .remove(&lease)
            .ok_or(StoreError::LeaseNotFound(lease))?;
        if !keys.is_empty() {
            self.revision += 1;
            for key in keys {
                self.kvs.remove(&key);
            }
        }
        Ok(())
    }
}

fn random_op(rng: &mut Rng, model: &Model) -> TxnOp {
    let lease = || {
        let leases: Vec<LeaseId> = model.leases.keys().copied().collect();
        leases
    };
    match rng.below(8) {
        0..=3 => {
            let leases = lease();
            let lease = match rng.below(4) {
                0 if !leases.is_empty() => Some(leases[rng.below(leases.len() as u64) as usize]),
                1 if rng.below(10) == 0 => Some(LeaseId(999_999)),
                _ => None,
            };
            TxnOp::Put {
                key: rng.key(),
                value: rng.below(1000).to_string().into_bytes(),
                lease,
            }
        }
        4 => TxnOp::delete(rng.key()),
        5 => TxnOp::delete_range(KeyRange::prefix(rng.key())),
        6 => TxnOp::range(RangeRequest::new(KeyRange::prefix(rng.key())).with_limit(rng.below(4) as usize)),
        _ => TxnOp::range(RangeRequest::new(KeyRange::new(rng.key(), rng.key()))),
    }
}

fn random_compare(rng: &mut Rng, model: &Model) -> Compare {
    let key = rng.key();
    let current = model.kvs.get(&key);
    let near = |v: i64, rng: &mut Rng| v + rng.below(3) as i64 - 1;
    let target = match rng.below(5) {
        0 => CompareTarget::Value(current.map_or_else(|| b"0".to_vec(), |kv| kv.value.clone())),
        1 => CompareTarget::Version(near(current.map_or(0, |kv| kv.version), rng)),
        2 => CompareTarget::CreateRevision(near(current.map_or(0, |kv| kv.create_revision), rng)),
        3 => CompareTarget::ModRevision(near(current.map_or(0, |kv| kv.mod_revision), rng)),
        _ => CompareTarget::Lease(current.and_then(|kv| kv.lease)),
    };
    let op = [
        CompareOp::Equal,
        CompareOp::NotEqual,
        CompareOp::Greater,
        CompareOp::Less,
    ][rng.below(4) as usize];
    Compare::new(key, op, target)
}

async fn check_state(store: &EmbeddedStore, model: &Model, step: usize) {
    let all = store
        .range(RangeRequest::new(KeyRange::prefix(Vec::new())))
        .await
        .unwrap();
    let want: Vec<KeyValue> = model.kvs.values().cloned().collect();
    assert_eq!(all.kvs, want, "state after step {step}");
    assert_eq!(all.revision, model.revision, "revision after step {step}");
    for (lease, keys) in &model.leases {
        let status = store.lease_time_to_live(*lease).await.unwrap();
        let status = status.unwrap_or_else(|| panic!("lease {lease} lost after step {step}"));
        let keys: Vec<Vec<u8>> = keys.iter().cloned().collect();
        assert_eq!(status.keys, keys, "keys of lease {lease} after step {step}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_operations_match_the_model_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions {
        compact_after_bytes: 4 * 1024,
        ..EmbeddedOptions::default()
    };
    let open = || EmbeddedStore::open(dir.path(), options.clone());
    let (mut store, _) = open().await.unwrap();
    let mut model = Model {
        revision: 1,
        ..Model::default()
    };
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for step in 0..3000 {
        match rng.below(20) {
            0 => {
                let grant = store.lease_grant(3600).await.unwrap();
                assert!(!model.leases.contains_key(&grant.id));
                model.leases.insert(grant.id, BTreeSet::new());
            }
            1 => {
                let leases: Vec<LeaseId> = model.leases.keys().copied().collect();
                let lease = if leases.is_empty() || rng.below(5) == 0 {
                    LeaseId(888_888)
                } else {
                    leases[rng.below(leases.len() as u64) as usize]
                };
                let got = store.lease_revoke(lease).await;
                let want = model.revoke(lease);
                assert_eq!(got.is_ok(), want.is_ok(), "revoke at step {step}");
            }
            2 => {
                store.close().await;
                let (reopened, report) = open().await.unwrap();
                store = reopened;
                assert_eq!(report.revision, model.revision);
                check_state(&store, &model, step).await;
            }
            _ => {
                let mut txn = Txn::new();
                for _ in 0..rng.below(3) {
                    txn.compares.push(random_compare(&mut rng, &model));
                }
                for _ in 0..rng.below(4) {
                    txn.then.push(random_op(&mut rng, &model));
                }
                for _ in 0..rng.below(3) {
                    txn.otherwise.push(random_op(&mut rng, &model));
                }
                let got = store.txn(txn.clone()).await;
                let want = model.txn(&txn);
                match (got, want) {
                    (Ok(got), Ok(want)) => assert_eq!(got, want, "step {step}: {txn:?}"),
                    (Err(StoreError::LeaseNotFound(a)), Err(StoreError::LeaseNotFound(b))) => {
                        assert_eq!(a, b)
                    }
                    (Err(StoreError::InvalidRequest(_)), Err(StoreError::InvalidRequest(_))) => {}
                    (got, want) => panic!("step {step}: store {got:?}, model {want:?}: {txn:?}"),
                }
            }
        }
        if step % 10 == 0 {
            check_state(&store, &model, step).await;
        }
    }
    check_state(&store, &model, 3000).await;
    assert!(store.stats().compactions > 0 || dir.path().join("snapshot").exists());
}
