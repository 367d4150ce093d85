//! The store conformance suite: checks every [`Store`] implementation must pass.
//!
//! Run the whole suite with [`run_all`], or one check at a time. Each check writes under its own
//! fresh prefix, so the suite can run against a store that holds other data (a shared etcd) and
//! run again on the same store. Checks panic with a message on the first violation, like tests.
//! They use real (or paused tokio) time only where leases need it: one lease of a 1 second TTL.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::{
    Compare, CompareOp, CompareTarget, EventKind, KeyRange, OpResult, RangeRequest, Store, StoreError, Txn,
    TxnOp, WatchEvent, WatchStream,
};

/// How long a check waits for an event that must come.
const PATIENCE: Duration = Duration::from_secs(30);

/// Runs every check, one after the other.
pub async fn run_all(store: Arc<dyn Store>) {
    keys_carry_etcd_metadata(store.clone()).await;
    transactions_choose_their_branch_by_compares(store.clone()).await;
    refused_transactions_change_nothing(store.clone()).await;
    requests_over_etcds_limits_are_too_large(store.clone()).await;
    transactions_are_atomic_under_concurrent_writers(store.clone()).await;
    absent_compare_admits_exactly_one_creator(store.clone()).await;
    ranges_are_ordered_and_paged(store.clone()).await;
    lease_expiry_removes_attached_keys_and_emits_events(store.clone()).await;
    lease_keep_alive_and_revoke(store.clone()).await;
    watches_deliver_every_change_in_order(store.clone()).await;
    watches_replay_from_a_past_revision(store.clone()).await;
    watches_see_concurrent_writes_exactly_once(store.clone()).await;
}

/// A prefix no other run of any check has used.
fn fresh_prefix(check: &str) -> Vec<u8> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("conformance/{check}/{nanos}-{n}/").into_bytes()
}

fn key(prefix: &[u8], name: &str) -> Vec<u8> {
    let mut key = prefix.to_vec();
    key.extend_from_slice(name.as_bytes());
    key
}

async fn put(store: &dyn Store, key: &[u8], value: &[u8]) -> i64 {
    let result = store
        .txn(Txn::new().and_then([TxnOp::put(key, value)]))
        .await
        .expect("put");
    assert!(result.succeeded);
    result.revision
}

async fn next_event(watch: &mut WatchStream) -> WatchEvent {
    match tokio::time::timeout(PATIENCE, watch.next()).await {
        Ok(Some(Ok(event))) => event,
        Ok(Some(Err(error))) => panic!("watch failed: {error}"),
        Ok(None) => panic!("watch ended early"),
        Err(_) => panic!("no watch event within {PATIENCE:?}"),
    }
}

/// Puts and deletes maintain `create_revision`, `mod_revision` and `version` like etcd, and each
/// change moves the store revision forward while reads and no-op deletes do not.
pub async fn keys_carry_etcd_metadata(store: Arc<dyn Store>) {
    let p = fresh_prefix("metadata");
    let k = key(&p, "k");
    let (missing, _) = store.get(&k).await.expect("get");
    assert_eq!(missing, None);

    let r1 = put(&*store, &k, b"one").await;
    let (kv, read_revision) = store.get(&k).await.expect("get");
    let kv = kv.expect("key after put");
    assert!(read_revision >= r1);
    assert_eq!(
        (
            kv.value.as_slice(),
            kv.create_revision,
            kv.mod_revision,
            kv.version,
            kv.lease
        ),
        (&b"one"[..], r1, r1, 1, None)
    );

    let r2 = put(&*store, &k, b"two").await;
    assert!(r2 > r1);
    let kv = store.get(&k).await.expect("get").0.expect("key");
    assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (r1, r2, 2));

    let deleted = store
        .txn(Txn::new().and_then([TxnOp::delete(k.clone())]))
        .await
        .expect("delete");
    assert_eq!(deleted.results, vec![OpResult::Delete { deleted: 1 }]);
    assert!(deleted.revision > r2);
    assert_eq!(store.get(&k).await.expect("get").0, None);

    let r3 = put(&*store, &k, b"three").await;
    let kv = store.get(&k).await.expect("get").0.expect("key");
    assert_eq!(
        (kv.create_revision, kv.version),
        (r3, 1),
        "a re-created key starts over"
    );

    // One transaction, one revision, whatever it touches.
    let a = key(&p, "a");
    let b = key(&p, "b");
    let both = store
        .txn(Txn::new().and_then([TxnOp::put(a.clone(), "1"), TxnOp::put(b.clone(), "2")]))
        .await
        .expect("txn");
    let ka = store.get(&a).await.expect("get").0.expect("a");
    let kb = store.get(&b).await.expect("get").0.expect("b");
    assert_eq!(ka.mod_revision, both.revision);
    assert_eq!(kb.mod_revision, both.revision);
}

/// Compares on value, version, create and mod revision, lease and absence are exact; the branch
/// they choose is the one that runs, and reads inside a transaction see its earlier writes.
pub async fn transactions_choose_their_branch_by_compares(store: Arc<dyn Store>) {
    let p = fresh_prefix("compares");
    let k = key(&p, "k");
    let other = key(&p, "other");
    let r1 = put(&*store, &k, b"v1").await;

    let cases: Vec<(Compare, bool)> = vec![
        (Compare::value_is(k.clone(), "v1"), true),
        (Compare::value_is(k.clone(), "v2"), false),
        (Compare::value_is(key(&p, "missing"), ""), false),
        (Compare::version_is(k.clone(), 1), true),
        (Compare::version_is(k.clone(), 2), false),
        (Compare::mod_revision_is(k.clone(), r1), true),
        (Compare::mod_revision_is(k.clone(), r1 - 1), false),
        (
            Compare::new(k.clone(), CompareOp::Less, CompareTarget::ModRevision(r1 + 1)),
            true,
        ),
        (
            Compare::new(k.clone(), CompareOp::Greater, CompareTarget::ModRevision(r1)),
            false,
        ),
        (
            Compare::new(k.clone(), CompareOp::NotEqual, CompareTarget::Version(5)),
            true,
        ),
        (
            Compare::new(k.clone(), CompareOp::Equal, CompareTarget::CreateRevision(r1)),
            true,
        ),
        (Compare::absent(k.clone()), false),
        (Compare::present(k.clone()), true),
        (Compare::absent(key(&p, "missing")), true),
        (Compare::lease_is(k.clone(), None), true),
    ];
    for (compare, expected) in cases {
        let result = store
            .txn(
                Txn::new()
                    .when([compare.clone()])
                    .and_then([TxnOp::put(other.clone(), "then")])
                    .or_else([TxnOp::put(other.clone(), "else")]),
            )
            .await
            .expect("txn");
        assert_eq!(result.succeeded, expected, "{compare:?}");
        let value = store.get(&other).await.expect("get").0.expect("other").value;
        let want: &[u8] = if expected { b"then" } else { b"else" };
        assert_eq!(value, want, "{compare:?} ran the wrong branch");
    }

    // All compares must hold, not some.
    let mixed = store
        .txn(
            Txn::new()
                .when([
                    Compare::value_is(k.clone(), "v1"),
                    Compare::version_is(k.clone(), 9),
                ])
                .and_then([TxnOp::put(k.clone(), "changed")]),
        )
        .await
        .expect("txn");
    assert!(!mixed.succeeded);
    assert_eq!(
        store.get(&k).await.expect("get").0.expect("k").value,
        b"v1",
        "a failed transaction without else operations changes nothing"
    );

    // A read in a transaction sees the transaction's own earlier writes.
    let result = store
        .txn(Txn::new().and_then([
            TxnOp::put(key(&p, "r/1"), "x"),
            TxnOp::delete(k.clone()),
            TxnOp::range(RangeRequest::new(KeyRange::prefix(p.clone()))),
        ]))
        .await
        .expect("txn");
    let OpResult::Range(seen) = &result.results[2] else {
        panic!("range result expected, got {:?}", result.results);
    };
    let keys: Vec<&[u8]> = seen.kvs.iter().map(|kv| kv.key.as_slice()).collect();
    assert_eq!(keys, vec![other.as_slice(), key(&p, "r/1").as_slice()]);
}

/// A put with an unknown lease fails the whole transaction and changes nothing; a transaction
/// that puts one key twice is refused like etcd refuses it.
pub async fn refused_transactions_change_nothing(store: Arc<dyn Store>) {
    let p = fresh_prefix("refused");
    let a = key(&p, "a");
    let before = store
        .range(RangeRequest::new(KeyRange::prefix(p.clone())))
        .await
        .expect("range");
    let unknown = crate::LeaseId(i64::MAX - 7);
    let error = store
        .txn(Txn::new().and_then([
            TxnOp::put(a.clone(), "x"),
            TxnOp::put_with_lease(key(&p, "b"), "y", unknown),
        ]))
        .await
        .expect_err("put with an unknown lease");
    assert!(
        matches!(error, StoreError::LeaseNotFound(l) if l == unknown),
        "{error}"
    );
    let error = store
        .txn(Txn::new().and_then([TxnOp::put(a.clone(), "x"), TxnOp::put(a.clone(), "y")]))
        .await
        .expect_err("the same key put twice");
    assert!(matches!(error, StoreError::InvalidRequest(_)), "{error}");
    let after = store
        .range(RangeRequest::new(KeyRange::prefix(p.clone())))
        .await
        .expect("range");
    assert!(before.kvs.is_empty() && after.kvs.is_empty());
}

/// etcd refuses a transaction of more than 128 operations (`--max-txn-ops`) or more than 1.5 MiB,
/// and so does every store: `TooLarge`, nothing written. At the limits, it goes through.
pub async fn requests_over_etcds_limits_are_too_large(store: Arc<dyn Store>) {
    let p = fresh_prefix("limits");
    let puts = |count: usize| -> Vec<TxnOp> {
        (0..count)
            .map(|i| TxnOp::put(key(&p, &format!("k{i:03}")), "v"))
            .collect()
    };
    let error = store
        .txn(Txn::new().and_then(puts(129)))
        .await
        .expect_err("129 operations");
    assert!(matches!(error, StoreError::TooLarge(_)), "{error}");
    let huge = vec![b'x'; 1536 * 1024 + 1];
    let error = store
        .txn(Txn::new().and_then([TxnOp::put(key(&p, "huge"), huge)]))
        .await
        .expect_err("over 1.5 MiB");
    assert!(matches!(error, StoreError::TooLarge(_)), "{error}");
    let nothing = store
        .range(RangeRequest::new(KeyRange::prefix(p.clone())))
        .await
        .expect("range");
    assert!(nothing.kvs.is_empty(), "a refused request wrote nothing");
    let result = store
        .txn(Txn::new().and_then(puts(128)))
        .await
        .expect("128 operations");
    assert!(result.succeeded);
    let big = vec![b'x'; 1024 * 1024];
    store
        .txn(Txn::new().and_then([TxnOp::put(key(&p, "big"), big)]))
        .await
        .expect("1 MiB is within the limit");
}

/// Many writers doing compare-and-swap increments on one counter lose no increment and apply
/// none twice; a transaction's writes to two keys are never seen half done.
pub async fn transactions_are_atomic_under_concurrent_writers(store: Arc<dyn Store>) {
    const WRITERS: u64 = 16;
    const INCREMENTS: u64 = 25;
    let p = fresh_prefix("atomic");
    let counter = key(&p, "counter");
    let left = key(&p, "left");
    let right = key(&p, "right");
    put(&*store, &counter, b"0").await;

    let mut tasks = Vec::new();
    for _ in 0..WRITERS {
        let store = store.clone();
        let (counter, left, right) = (counter.clone(), left.clone(), right.clone());
        tasks.push(tokio::spawn(async move {
            let mut conflicts = 0u64;
            for _ in 0..INCREMENTS {
                loop {
                    let kv = store.get(&counter).await.expect("get").0.expect("counter");
                    let n: u64 = std::str::from_utf8(&kv.value).unwrap().parse().unwrap();
                    let next = (n + 1).to_string();
                    let result = store
                        .txn(
                            Txn::new()
                                .when([Compare::mod_revision_is(counter.clone(), kv.mod_revision)])
                                .and_then([
                                    TxnOp::put(counter.clone(), next.clone()),
                                    TxnOp::put(left.clone(), next.clone()),
                                    TxnOp::put(right.clone(), next.clone()),
                                ]),
                        )
                        .await
                        .expect("txn");
                    if result.succeeded {
                        break;
                    }
                    conflicts += 1;
                }
            }
            conflicts
        }));
    }
    let reader = {
        let store = store.clone();
        let (left, right) = (left.clone(), right.clone());
        tokio::spawn(async move {
            for _ in 0..200 {
                let both = store
                    .txn(Txn::new().and_then([TxnOp::get(left.clone()), TxnOp::get(right.clone())]))
                    .await
                    .expect("read txn");
                let values: Vec<Option<Vec<u8>>> = both
                    .results
                    .iter()
                    .map(|r| match r {
                        OpResult::Range(r) => r.kvs.first().map(|kv| kv.value.clone()),
                        other => panic!("range result expected, got {other:?}"),
                    })
                    .collect();
                assert_eq!(values[0], values[1], "a transaction was seen half applied");
                tokio::task::yield_now().await;
            }
        })
    };
    for task in tasks {
        task.await.expect("writer task");
    }
    reader.await.expect("reader task");
    let kv = store.get(&counter).await.expect("get").0.expect("counter");
    assert_eq!(kv.value, (WRITERS * INCREMENTS).to_string().into_bytes());
    assert_eq!(kv.version as u64, WRITERS * INCREMENTS + 1);
}

/// Of many concurrent transactions creating one key if absent, exactly one succeeds.
pub async fn absent_compare_admits_exactly_one_creator(store: Arc<dyn Store>) {
    const CREATORS: usize = 32;
    let p = fresh_prefix("creators");
    let k = key(&p, "k");
    let mut tasks = Vec::new();
    for i in 0..CREATORS {
        let store = store.clone();
        let k = k.clone();
        tasks.push(tokio::spawn(async move {
            let result = store
                .txn(
                    Txn::new()
                        .when([Compare::absent(k.clone())])
                        .and_then([TxnOp::put(k.clone(), i.to_string())])
                        .or_else([TxnOp::get(k.clone())]),
                )
                .await
                .expect("txn");
            (i, result)
        }));
    }
    let mut winners = Vec::new();
    for task in tasks {
        let (i, result) = task.await.expect("creator task");
        if result.succeeded {
            winners.push(i);
        } else {
            let OpResult::Range(seen) = &result.results[0] else {
                panic!("range result expected");
            };
            assert_eq!(seen.kvs.len(), 1, "a loser sees the winner's key");
        }
    }
    assert_eq!(winners.len(), 1, "winners: {winners:?}");
    let kv = store.get(&k).await.expect("get").0.expect("k");
    assert_eq!(kv.value, winners[0].to_string().into_bytes());
    assert_eq!(kv.version, 1);
}

/// Ranges come back in key order, stay inside `[start, end)`, honour `limit` and say whether
/// more remain; paging from the last key + `\0` visits every key once.
pub async fn ranges_are_ordered_and_paged(store: Arc<dyn Store>) {
    let p = fresh_prefix("ranges");
    // Insert in a scrambled order, with byte values that sort differently as text.
    let names: Vec<String> = (0..37u32).map(|i| format!("{:03}", (i * 17) % 37)).collect();
    for name in &names {
        put(&*store, &key(&p, name), name.as_bytes()).await;
    }
    put(&*store, &key(&p, "zz\u{ff}"), b"high").await;
    let mut neighbour = p.clone();
    neighbour.pop();
    neighbour.push(b'0'); // next to the prefix, outside it
    put(&*store, &neighbour, b"outside").await;

    let mut expected: BTreeSet<Vec<u8>> = names.iter().map(|n| key(&p, n)).collect();
    expected.insert(key(&p, "zz\u{ff}"));
    let expected: Vec<Vec<u8>> = expected.into_iter().collect();

    let all = store
        .range(RangeRequest::new(KeyRange::prefix(p.clone())))
        .await
        .expect("range");
    let keys: Vec<Vec<u8>> = all.kvs.iter().map(|kv| kv.key.clone()).collect();
    assert_eq!(keys, expected);
    assert!(!all.more);

    let mut paged = Vec::new();
    let mut start = p.clone();
    let end = KeyRange::prefix(p.clone()).end;
    loop {
        let page = store
            .range(
                RangeRequest::new(KeyRange {
                    start: start.clone(),
                    end: end.clone(),
                })
                .with_limit(10),
            )
            .await
            .expect("range page");
        assert!(page.kvs.len() <= 10);
        paged.extend(page.kvs.iter().map(|kv| kv.key.clone()));
        if !page.more {
            break;
        }
        assert_eq!(page.kvs.len(), 10, "a page with more after it is full");
        start = page.kvs.last().unwrap().key.clone();
        start.push(0);
    }
    assert_eq!(paged, expected);

    let middle = store
        .range(RangeRequest::new(KeyRange::new(key(&p, "010"), key(&p, "020"))))
        .await
        .expect("range");
    let keys: Vec<Vec<u8>> = middle.kvs.iter().map(|kv| kv.key.clone()).collect();
    let want: Vec<Vec<u8>> = (10..20).map(|i| key(&p, &format!("{i:03}"))).collect();
    assert_eq!(keys, want, "the end is exclusive");

    let exact = store
        .range(RangeRequest::new(KeyRange::new(key(&p, "010"), key(&p, "010"))))
        .await
        .expect("empty range");
    assert!(exact.kvs.is_empty());
}

/// Keys attached to a lease vanish when it expires, in one revision, and watchers see the
/// deletes; keys not attached stay.
pub async fn lease_expiry_removes_attached_keys_and_emits_events(store: Arc<dyn Store>) {
    let p = fresh_prefix("lease-expiry");
    let lease = store.lease_grant(1).await.expect("grant");
    assert!(lease.ttl >= 1);
    let mut watch = store
        .watch(KeyRange::prefix(p.clone()), None)
        .await
        .expect("watch");
    store
        .txn(Txn::new().and_then([
            TxnOp::put_with_lease(key(&p, "a"), "1", lease.id),
            TxnOp::put_with_lease(key(&p, "b"), "2", lease.id),
            TxnOp::put(key(&p, "kept"), "3"),
        ]))
        .await
        .expect("attach");
    let status = store
        .lease_time_to_live(lease.id)
        .await
        .expect("ttl")
        .expect("live lease");
    assert_eq!(status.keys, vec![key(&p, "a"), key(&p, "b")]);
    for _ in 0..3 {
        assert_eq!(next_event(&mut watch).await.kind, EventKind::Put);
    }
    let first = next_event(&mut watch).await;
    let second = next_event(&mut watch).await;
    assert_eq!((first.kind, second.kind), (EventKind::Delete, EventKind::Delete));
    assert_eq!(
        BTreeSet::from([first.kv.key.clone(), second.kv.key.clone()]),
        BTreeSet::from([key(&p, "a"), key(&p, "b")])
    );
    assert_eq!(
        first.kv.mod_revision, second.kv.mod_revision,
        "an expiry deletes its keys in one revision"
    );
    let left = store
        .range(RangeRequest::new(KeyRange::prefix(p.clone())))
        .await
        .expect("range");
    let keys: Vec<Vec<u8>> = left.kvs.iter().map(|kv| kv.key.clone()).collect();
    assert_eq!(keys, vec![key(&p, "kept")]);
    assert!(left.revision >= first.kv.mod_revision);
    assert_eq!(store.lease_time_to_live(lease.id).await.expect("ttl"), None);
    assert!(matches!(
        store.lease_keep_alive(lease.id).await,
        Err(StoreError::LeaseNotFound(_))
    ));
}

/// Keep-alive renews a live lease; revoke deletes its keys at once; both refuse unknown leases.
pub async fn lease_keep_alive_and_revoke(store: Arc<dyn Store>) {
    let p = fresh_prefix("lease-revoke");
    let lease = store.lease_grant(60).await.expect("grant");
    assert_eq!(
        store.lease_keep_alive(lease.id).await.expect("keep alive"),
        lease.ttl
    );
    let status = store
        .lease_time_to_live(lease.id)
        .await
        .expect("ttl")
        .expect("live");
    assert_eq!(status.granted_ttl, lease.ttl);
    assert!(status.remaining_ttl > 0 && status.remaining_ttl <= lease.ttl);

    let k = key(&p, "claim");
    store
        .txn(Txn::new().and_then([TxnOp::put_with_lease(k.clone(), "held", lease.id)]))
        .await
        .expect("attach");
    let kv = store.get(&k).await.expect("get").0.expect("claim");
    assert_eq!(kv.lease, Some(lease.id));
    let fenced = store
        .txn(
            Txn::new()
                .when([Compare::lease_is(k.clone(), Some(lease.id))])
                .and_then([TxnOp::get(k.clone())]),
        )
        .await
        .expect("txn");
    assert!(fenced.succeeded);

    // Re-putting the key without the lease detaches it.
    let other = key(&p, "detached");
    store
        .txn(Txn::new().and_then([TxnOp::put_with_lease(other.clone(), "x", lease.id)]))
        .await
        .expect("attach");
    put(&*store, &other, b"y").await;

    store.lease_revoke(lease.id).await.expect("revoke");
    assert_eq!(store.get(&k).await.expect("get").0, None);
    assert!(store.get(&other).await.expect("get").0.is_some());
    assert!(matches!(
        store.lease_revoke(lease.id).await,
        Err(StoreError::LeaseNotFound(_))
    ));
    assert!(matches!(
        store.lease_keep_alive(lease.id).await,
        Err(StoreError::LeaseNotFound(_))
    ));
}

/// A watch on a prefix delivers every put and delete in it, in revision order, with the right
/// metadata, and nothing outside it.
pub async fn watches_deliver_every_change_in_order(store: Arc<dyn Store>) {
    let p = fresh_prefix("watch");
    let mut watch = store
        .watch(KeyRange::prefix(p.clone()), None)
        .await
        .expect("watch");
    let outside = fresh_prefix("watch-outside");
    let mut expected: Vec<(EventKind, Vec<u8>, i64)> = Vec::new();
    for i in 0..60 {
        let k = key(&p, &format!("k{}", i % 7));
        let revision = if i % 5 == 4 {
            let r = store
                .txn(Txn::new().and_then([TxnOp::delete(k.clone())]))
                .await
                .expect("delete");
            if r.results == [OpResult::Delete { deleted: 1 }] {
                expected.push((EventKind::Delete, k, r.revision));
            }
            continue;
        } else {
            put(&*store, &k, format!("v{i}").as_bytes()).await
        };
        expected.push((EventKind::Put, k, revision));
        put(&*store, &key(&outside, "noise"), b"x").await;
    }
    // A multi-key transaction: its events share one revision, in operation order.
    let multi = store
        .txn(Txn::new().and_then([
            TxnOp::put(key(&p, "m2"), "x"),
            TxnOp::put(key(&p, "m1"), "y"),
            TxnOp::delete_range(KeyRange::new(key(&p, "k0"), key(&p, "k2"))),
        ]))
        .await
        .expect("txn");
    expected.push((EventKind::Put, key(&p, "m2"), multi.revision));
    expected.push((EventKind::Put, key(&p, "m1"), multi.revision));
    expected.push((EventKind::Delete, key(&p, "k0"), multi.revision));
    expected.push((EventKind::Delete, key(&p, "k1"), multi.revision));

    let mut seen = Vec::new();
    let mut last_revision = 0;
    while seen.len() < expected.len() {
        let event = next_event(&mut watch).await;
        assert!(event.kv.mod_revision >= last_revision, "events out of order");
        last_revision = event.kv.mod_revision;
        if event.kind == EventKind::Put {
            let (kv, _) = store.get(&event.kv.key).await.expect("get");
            if let Some(kv) = kv.filter(|kv| kv.mod_revision == event.kv.mod_revision) {
                assert_eq!(kv, event.kv, "a put event carries the key's metadata");
            }
        }
        seen.push((event.kind, event.kv.key, event.kv.mod_revision));
    }
    assert_eq!(seen, expected);
}

/// A watch from a past revision (not yet compacted) replays the changes since then first.
pub async fn watches_replay_from_a_past_revision(store: Arc<dyn Store>) {
    let p = fresh_prefix("watch-replay");
    let first = put(&*store, &key(&p, "a"), b"1").await;
    let second = put(&*store, &key(&p, "b"), b"2").await;
    let mut watch = store
        .watch(KeyRange::prefix(p.clone()), Some(first))
        .await
        .expect("watch from the past");
    let third = put(&*store, &key(&p, "a"), b"3").await;
    let revisions: Vec<i64> = [
        next_event(&mut watch).await,
        next_event(&mut watch).await,
        next_event(&mut watch).await,
    ]
    .iter()
    .map(|e| e.kv.mod_revision)
    .collect();
    assert_eq!(revisions, vec![first, second, third]);
}

/// Under concurrent writers, a watch sees each write exactly once, in revision order, and the
/// revisions it reports are the ones the writers were told.
pub async fn watches_see_concurrent_writes_exactly_once(store: Arc<dyn Store>) {
    const WRITERS: usize = 8;
    const WRITES: usize = 25;
    let p = fresh_prefix("watch-concurrent");
    let mut watch = store
        .watch(KeyRange::prefix(p.clone()), None)
        .await
        .expect("watch");
    let mut tasks = Vec::new();
    for writer in 0..WRITERS {
        let store = store.clone();
        let p = p.clone();
        tasks.push(tokio::spawn(async move {
            let mut written = Vec::new();
            for n in 0..WRITES {
                let k = key(&p, &format!("w{writer}/{n}"));
                let result = store
                    .txn(Txn::new().and_then([
                        TxnOp::put(k.clone(), "v"),
                        TxnOp::put(key(&p, &format!("last/{writer}")), k.clone()),
                    ]))
                    .await
                    .expect("txn");
                written.push((k, result.revision));
            }
            written
        }));
    }
    let mut expected = BTreeSet::new();
    for task in tasks {
        expected.extend(task.await.expect("writer task"));
    }
    let mut seen = BTreeSet::new();
    let mut last_revision = 0;
    let mut events = 0;
    while events < 2 * WRITERS * WRITES {
        let event = next_event(&mut watch).await;
        events += 1;
        assert_eq!(event.kind, EventKind::Put);
        assert!(event.kv.mod_revision >= last_revision, "events out of order");
        last_revision = event.kv.mod_revision;
        if !event.kv.key.starts_with(&key(&p, "last/")) {
            assert!(
                seen.insert((event.kv.key, event.kv.mod_revision)),
                "an event was delivered twice"
            );
        }
    }
    assert_eq!(seen, expected);
}
