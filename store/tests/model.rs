//! `EmbeddedStore` against a plain model of etcd's semantics: random transactions, lease grants
//! and revokes give the same answers from both, and the state after every restart (with a page
//! cache far smaller than the store, so reads go to disk) is the model's state.

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
        cache_bytes: 16 * 1024,
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
}

/// One task's keys (under its prefix): value and version of each.
type TaskModel = (Vec<u8>, BTreeMap<Vec<u8>, (Vec<u8>, i64)>);

async fn check_tasks(store: &EmbeddedStore, models: &[TaskModel]) {
    for (prefix, model) in models {
        let read = store
            .range(RangeRequest::new(KeyRange::prefix(prefix.clone())))
            .await
            .unwrap();
        let seen: BTreeMap<Vec<u8>, (Vec<u8>, i64)> = read
            .kvs
            .into_iter()
            .map(|kv| (kv.key, (kv.value, kv.version)))
            .collect();
        assert_eq!(&seen, model);
    }
}

/// Many tasks at once, each on its own keys with its own model of them: under concurrent
/// batches (applied on top of a batch still committing, through a small page cache), every answer and the
/// final state match each task's model, and a restart changes nothing. Revisions are global, so
/// here they are only checked to increase.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_tasks_each_match_their_model() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions {
        cache_bytes: 16 * 1024,
        ..EmbeddedOptions::default()
    };
    let (store, _) = EmbeddedStore::open(dir.path(), options.clone()).await.unwrap();
    let mut tasks = Vec::new();
    for task in 0..16u64 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let prefix = format!("t{task:02}/").into_bytes();
            let within = |key: Vec<u8>| [prefix.clone(), key].concat();
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((task + 1) * 0x1000_0001));
            // key -> (value, version)
            let mut model: BTreeMap<Vec<u8>, (Vec<u8>, i64)> = BTreeMap::new();
            let mut last_revision = 0;
            for step in 0..150 {
                if step % 5 == 0 {
                    // A key all tasks share: increments that race must all land, once each.
                    loop {
                        let (kv, _) = store.get(b"shared/counter").await.unwrap();
                        let (n, revision) = kv.map_or((0, 0), |kv| {
                            let n: u64 = String::from_utf8(kv.value).unwrap().parse().unwrap();
                            (n, kv.mod_revision)
                        });
                        let result = store
                            .txn(
                                Txn::new()
                                    .when([Compare::mod_revision_is("shared/counter", revision)])
                                    .and_then([TxnOp::put("shared/counter", (n + 1).to_string())]),
                            )
                            .await
                            .unwrap();
                        if result.succeeded {
                            break;
                        }
                    }
                }
                let k = within(rng.key());
                let current = model.get(&k).cloned();
                let compare = match rng.below(3) {
                    0 => Compare::version_is(k.clone(), current.as_ref().map_or(0, |c| c.1)),
                    1 => Compare::absent(k.clone()),
                    _ => Compare::value_is(k.clone(), b"1".to_vec()),
                };
                let holds = match &compare.target {
                    CompareTarget::Version(_) => true,
                    CompareTarget::CreateRevision(_) => current.is_none(),
                    _ => current.as_ref().is_some_and(|c| c.0 == b"1"),
                };
                let value = rng.below(3).to_string().into_bytes();
                let (then, otherwise) = match rng.below(3) {
                    0 => (TxnOp::put(k.clone(), value.clone()), TxnOp::delete(k.clone())),
                    1 => (
                        TxnOp::delete_range(KeyRange::prefix(k.clone())),
                        TxnOp::put(k.clone(), value.clone()),
                    ),
                    _ => (TxnOp::put(k.clone(), value.clone()), TxnOp::get(k.clone())),
                };
                let result = store
                    .txn(
                        Txn::new()
                            .when([compare])
                            .and_then([then.clone()])
                            .or_else([otherwise.clone()]),
                    )
                    .await
                    .unwrap();
                assert_eq!(result.succeeded, holds, "task {task} step {step}");
                assert!(result.revision >= last_revision);
                last_revision = result.revision;
                match if holds { then } else { otherwise } {
                    TxnOp::Put { key, value, .. } => {
                        let version = model.get(&key).map_or(1, |c| c.1 + 1);
                        model.insert(key, (value, version));
                    }
                    TxnOp::Delete { range } => {
                        let doomed: Vec<Vec<u8>> =
                            model.keys().filter(|k| range.contains(k)).cloned().collect();
                        assert_eq!(
                            result.results,
                            vec![OpResult::Delete {
                                deleted: doomed.len() as u64
                            }],
                            "task {task} step {step}"
                        );
                        for key in doomed {
                            model.remove(&key);
                        }
                    }
                    TxnOp::Range(_) => {
                        let OpResult::Range(read) = &result.results[0] else {
                            panic!("range result expected");
                        };
                        let seen: Vec<(Vec<u8>, i64)> =
                            read.kvs.iter().map(|kv| (kv.value.clone(), kv.version)).collect();
                        let want: Vec<(Vec<u8>, i64)> = current.into_iter().collect();
                        assert_eq!(seen, want, "task {task} step {step}");
                    }
                }
            }
            (prefix, model)
        }));
    }
    let mut models = Vec::new();
    for task in tasks {
        models.push(task.await.unwrap());
    }
    check_tasks(&store, &models).await;
    let counter = store.get(b"shared/counter").await.unwrap().0.unwrap();
    assert_eq!((counter.value, counter.version), (b"480".to_vec(), 480));
    assert!(store.stats().syncs < store.stats().records, "{:?}", store.stats());
    store.close().await;
    let (store, _) = EmbeddedStore::open(dir.path(), options).await.unwrap();
    check_tasks(&store, &models).await;
}
