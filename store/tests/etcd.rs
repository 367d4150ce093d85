//! `EtcdStore` against a real three-member etcd cluster on loopback: the conformance suite,
//! failover when a member is killed, compaction, and what it refuses before sending.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use agentprocess_store::{
    EtcdOptions, EtcdStore, EventKind, KeyRange, MemberStatus, RangeRequest, Store, StoreError, Txn, TxnOp,
    WatchStream, conformance, parse_endpoint_list,
};
use agentprocess_testkit::EtcdCluster;

/// One cluster at a time: three members and the suite already keep a small machine busy, and
/// a starved member calls elections that make writes fail with an unknown outcome.
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Generous timeouts: a call may wait out a leader election on a busy machine.
fn options() -> EtcdOptions {
    EtcdOptions {
        request_timeout: Duration::from_secs(30),
        ..EtcdOptions::default()
    }
}

async fn connect(endpoint_list: &str) -> EtcdStore {
    let endpoints = parse_endpoint_list(endpoint_list).expect("endpoint list");
    EtcdStore::connect(&endpoints, options())
        .await
        .expect("connect to etcd")
}

async fn put(store: &dyn Store, key: &str, value: &str) -> i64 {
    store
        .txn(Txn::new().and_then([TxnOp::put(key, value)]))
        .await
        .expect("put")
        .revision
}

async fn next_put(watch: &mut WatchStream) -> (Vec<u8>, i64) {
    let event = tokio::time::timeout(Duration::from_secs(60), watch.next())
        .await
        .expect("a watch event in time")
        .expect("the watch goes on")
        .expect("a watch event, not an error");
    assert_eq!(event.kind, EventKind::Put);
    (event.kv.key, event.kv.mod_revision)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_store_passes_the_conformance_suite_on_a_three_member_cluster() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    let cluster = EtcdCluster::start(3);
    let store = connect(&cluster.endpoint_list()).await;
    conformance::run_all(Arc::new(store.clone())).await;
    // The suite writes under fresh prefixes, so it passes again on the same cluster.
    conformance::ranges_are_ordered_and_paged(Arc::new(store.clone())).await;
    conformance::watches_replay_from_a_past_revision(Arc::new(store)).await;
}

/// The leader is killed while the store is pinned to it, with a watch open and a lease held on
/// it: the store goes on through the other two members: its watch resumes without losing or
/// repeating an event, its lease stays alive, and the whole conformance suite passes again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_store_fails_over_when_its_member_is_killed() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = EtcdCluster::start(3);
    let leader = cluster.leader();
    let urls = cluster.client_urls();
    // The leader first, so the store prefers it: the member it talks to is the one that dies.
    let mut ordered = vec![urls[leader].clone()];
    ordered.extend(
        urls.iter()
            .enumerate()
            .filter(|(i, _)| *i != leader)
            .map(|(_, u)| u.clone()),
    );
    let store = connect(&ordered.join(",")).await;
    assert_eq!(store.preferred_endpoint(), urls[leader]);

    let mut watch = store
        .watch(KeyRange::prefix(b"failover/".to_vec()), None)
        .await
        .expect("watch");
    let lease = store.lease_grant(60).await.expect("grant");
    let attached = store
        .txn(Txn::new().and_then([TxnOp::put_with_lease("failover/claim", "held", lease.id)]))
        .await
        .expect("attach the lease");
    let mut written = vec![(b"failover/claim".to_vec(), attached.revision)];
    for i in 0..5 {
        let key = format!("failover/before/{i}");
        written.push((key.clone().into_bytes(), put(&store, &key, "v").await));
    }

    cluster.kill(leader);

    // A read first: a write sent on the dead member's connection before the client noticed the
    // reset would have an unknown outcome, which the store reports instead of retrying. The
    // read is retried on the next member, and the store stays there.
    let (claim, _) = store.get(b"failover/claim").await.expect("read after the kill");
    assert_eq!(claim.expect("the claim survives").lease, Some(lease.id));
    assert_ne!(store.preferred_endpoint(), urls[leader]);

    for i in 0..5 {
        let key = format!("failover/after/{i}");
        written.push((key.clone().into_bytes(), put(&store, &key, "v").await));
    }
    let mut seen = Vec::new();
    while seen.len() < written.len() {
        seen.push(next_put(&mut watch).await);
    }
    assert_eq!(
        seen, written,
        "the watch resumed on another member with no event lost or repeated"
    );

    assert_eq!(
        store.lease_keep_alive(lease.id).await.expect("keep alive"),
        lease.ttl
    );
    let status = store
        .lease_time_to_live(lease.id)
        .await
        .expect("ttl")
        .expect("the lease lives on");
    assert_eq!(status.keys, vec![b"failover/claim".to_vec()]);

    conformance::run_all(Arc::new(store.clone())).await;
    store.lease_revoke(lease.id).await.expect("revoke");
    assert_eq!(store.get(b"failover/claim").await.expect("get").0, None);
}

/// A watch from a compacted revision is refused with `Compacted`, naming the newest revision
/// gone; from the compaction revision on, it replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_store_reports_compacted_revisions_as_the_trait_says() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    let cluster = EtcdCluster::start(3);
    let store = connect(&cluster.endpoint_list()).await;
    let first = put(&store, "compact/a", "1").await;
    let second = put(&store, "compact/b", "2").await;
    let third = put(&store, "compact/c", "3").await;
    cluster.compact(second);

    let range = KeyRange::prefix(b"compact/".to_vec());
    let error = store
        .watch(range.clone(), Some(first))
        .await
        .expect_err("a watch from before the compaction");
    assert!(
        matches!(error, StoreError::Compacted { compact_revision } if compact_revision == second - 1),
        "{error}"
    );
    let mut watch = store
        .watch(range.clone(), Some(second))
        .await
        .expect("watch from the compaction");
    assert_eq!(next_put(&mut watch).await, (b"compact/b".to_vec(), second));
    assert_eq!(next_put(&mut watch).await, (b"compact/c".to_vec(), third));
    let all = store.range(RangeRequest::new(range)).await.expect("range");
    let keys: BTreeSet<Vec<u8>> = all.kvs.into_iter().map(|kv| kv.key).collect();
    assert_eq!(keys.len(), 3, "compaction drops history, not keys");
}

/// Requests over etcd's limits are refused by the store itself: with every member dead, an
/// oversized transaction is still `TooLarge` while a small one is `Unavailable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_store_refuses_oversized_requests_before_sending_them() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = EtcdCluster::start(3);
    let endpoints = parse_endpoint_list(&cluster.endpoint_list()).unwrap();
    let store = EtcdStore::connect(
        &endpoints,
        EtcdOptions {
            request_timeout: Duration::from_secs(3),
            ..EtcdOptions::default()
        },
    )
    .await
    .expect("connect");
    for member in 0..3 {
        cluster.kill(member);
    }
    let too_many: Vec<TxnOp> = (0..129).map(|i| TxnOp::put(format!("limits/{i}"), "v")).collect();
    let error = store
        .txn(Txn::new().and_then(too_many))
        .await
        .expect_err("129 operations");
    assert!(matches!(error, StoreError::TooLarge(_)), "{error}");
    let huge = TxnOp::put("limits/huge", vec![b'x'; 1536 * 1024 + 1]);
    let error = store
        .txn(Txn::new().and_then([huge]))
        .await
        .expect_err("over 1.5 MiB");
    assert!(matches!(error, StoreError::TooLarge(_)), "{error}");
    let error = store
        .txn(Txn::new().and_then([TxnOp::put("limits/small", "v")]))
        .await
        .expect_err("no member is left");
    assert!(matches!(error, StoreError::Unavailable { .. }), "{error}");
}

/// Connecting to endpoints where nothing listens fails with `Unavailable`, naming each one.
#[tokio::test]
async fn connecting_to_no_live_member_is_unavailable() {
    let closed: Vec<String> = (0..2)
        .map(|_| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("127.0.0.1:{}", listener.local_addr().unwrap().port())
        })
        .collect();
    let error = EtcdStore::connect(&closed, EtcdOptions::default())
        .await
        .expect_err("nothing listens");
    let StoreError::Unavailable { reason, .. } = &error else {
        panic!("{error}");
    };
    for endpoint in &closed {
        assert!(reason.contains(endpoint.as_str()), "{reason}");
    }
}

/// Every member's status, each of which must answer.
async fn statuses_of_every_member(store: &EtcdStore) -> Vec<MemberStatus> {
    store
        .member_statuses()
        .await
        .into_iter()
        .map(|status| status.expect("every member answers"))
        .collect()
}

/// The bytes of a member's database file that are not in use: what defragmentation gives back.
fn free_bytes(status: &MemberStatus) -> i64 {
    status.db_bytes - status.db_bytes_in_use
}

/// The upkeep a cluster's scheduler leader runs: compaction through the store (a watch from
/// before it is refused; compacting again is no error), every member's status (one leader, a
/// database size), and defragmentation of each member in turn, which shrinks each file by the
/// garbage that writes, deletes and compaction left in it; after it the cluster still serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_store_compacts_reports_member_sizes_and_defragments_each_member() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    let cluster = EtcdCluster::start(3);
    let store = connect(&cluster.endpoint_list()).await;
    // Garbage once compacted: 200 overwritten versions of one key, and 200 keys written then
    // deleted, 4 KiB each.
    let first = put(&store, "upkeep/a", "1").await;
    for i in 0..200 {
        put(&store, "upkeep/a", &format!("{i:0>4096}")).await;
    }
    for i in 0..200 {
        put(&store, &format!("upkeep/deleted/{i:03}"), &format!("{i:0>4096}")).await;
    }
    store
        .txn(Txn::new().and_then([TxnOp::delete_range(KeyRange::prefix(b"upkeep/deleted/".to_vec()))]))
        .await
        .expect("delete what was written");
    let last = put(&store, "upkeep/b", "2").await;
    store.compact(last).await.expect("compaction");
    store
        .compact(first)
        .await
        .expect("compacting an older revision again is no error");
    let error = store
        .watch(KeyRange::prefix(b"upkeep/".to_vec()), Some(first))
        .await
        .expect_err("a watch from before the compaction");
    assert!(matches!(error, StoreError::Compacted { .. }), "{error}");

    // etcd removes the compacted versions from its file after it answers the compaction, and
    // counts their pages free when it next commits (a write makes it commit); each member's
    // status tells when the freed pages are there for defragmentation to give back.
    const GARBAGE: i64 = 1024 * 1024;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let statuses = loop {
        put(&store, "upkeep/commit", "a write, so that each member commits").await;
        let statuses = statuses_of_every_member(&store).await;
        if statuses.iter().all(|status| free_bytes(status) >= GARBAGE) {
            break statuses;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "every member frees at least {GARBAGE} bytes of compacted versions within 60 s: {statuses:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(statuses.len(), 3);
    assert_eq!(statuses.iter().filter(|s| s.leader).count(), 1, "{statuses:?}");
    for status in &statuses {
        assert!(status.db_bytes > 0 && status.db_bytes_in_use > 0, "{status:?}");
        assert!(status.db_bytes_in_use <= status.db_bytes, "{status:?}");
        assert!(status.revision >= last, "{status:?}");
    }
    for member in 0..3 {
        store.defragment(member).await.expect("defragmentation");
    }
    let after = statuses_of_every_member(&store).await;
    for (before, after) in statuses.iter().zip(&after) {
        assert!(
            after.db_bytes <= before.db_bytes - free_bytes(before) / 2,
            "defragmentation gives back at least half of the free bytes: {before:?} {after:?}"
        );
    }
    let revision = after.iter().map(|status| status.revision).max().unwrap();
    assert_eq!(
        put(&store, "upkeep/c", "3").await,
        revision + 1,
        "the cluster still takes writes"
    );
    store
        .disarm_space_alarm()
        .await
        .expect("clearing an alarm that is not raised is no error");
}
