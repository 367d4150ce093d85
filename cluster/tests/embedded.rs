//! The cluster on the embedded store, on paused time: every shared scenario, and the ones where
//! only timing matters (lease loss, a store out of reach, the drain timeout).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use agentprocess_cluster::{DEFAULT_SHARDS, MembershipOptions};
use agentprocess_store::{
    EmbeddedOptions, EmbeddedStore, KeyRange, KeyValue, LeaseGrant, LeaseId, LeaseStatus, RangeRequest,
    RangeResult, Store, StoreError, Txn, TxnOp, TxnResult, WatchStream,
};
use async_trait::async_trait;
use common::{AFTER_TTL, Setup, eventually, lease_of, wins};

const TTL: i64 = 2;

fn ttl() -> Duration {
    Duration::from_secs(TTL as u64)
}

fn setup() -> Setup {
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::in_memory(EmbeddedOptions::default()));
    Setup::new(store, "test", TTL)
}

#[tokio::test(start_paused = true)]
async fn second_host_takes_exactly_the_shards_it_wins() {
    common::second_host_takes_exactly_the_shards_it_wins(setup()).await;
}

#[tokio::test(start_paused = true)]
async fn leave_waits_for_calls_in_flight_then_hands_every_shard_over() {
    common::leave_waits_for_calls_in_flight_then_hands_every_shard_over(setup()).await;
}

#[tokio::test(start_paused = true)]
async fn survivor_takes_a_crashed_hosts_shards_after_its_lease_expires() {
    common::survivor_takes_a_crashed_hosts_shards_after_its_lease_expires(setup()).await;
}

#[tokio::test(start_paused = true)]
async fn a_captured_fence_stops_writes_once_the_shard_moved() {
    common::a_captured_fence_stops_writes_once_the_shard_moved(setup()).await;
}

#[tokio::test(start_paused = true)]
async fn shard_map_follows_joins_leaves_and_crashes() {
    common::shard_map_follows_joins_leaves_and_crashes(setup()).await;
}

#[tokio::test(start_paused = true)]
async fn standby_leads_after_the_leader_crashes_and_lost_fires_on_deletion() {
    common::standby_leads_after_the_leader_crashes_and_lost_fires_on_deletion(setup()).await;
}

#[tokio::test(start_paused = true)]
async fn resigning_hands_leadership_over_at_once() {
    common::resigning_hands_leadership_over_at_once(setup()).await;
}

/// A host whose lease is revoked under it joins again with a new lease and takes its shards
/// again under it: a new fence, and the old one fails. (It joins again at once, so the moment
/// it holds nothing is too short to see here; the test of a store out of reach sees it.)
#[tokio::test(start_paused = true)]
async fn a_host_whose_lease_is_revoked_rejoins_with_a_new_fence() {
    let setup = setup();
    let a = setup.join("actor-a").await;
    setup.wait_for_split(&[&a], Duration::from_secs(1)).await;
    let old_lease = lease_of(&a).expect("a lease");
    let old_fence = a.fence(0).expect("a holds shard 0");
    setup
        .store
        .lease_revoke(old_lease)
        .await
        .expect("revoke the host's lease");

    eventually("the host rejoins under a new lease", ttl(), || async {
        lease_of(&a).is_some_and(|lease| lease != old_lease)
    })
    .await;
    setup.wait_for_split(&[&a], ttl() + AFTER_TTL).await;
    assert_ne!(lease_of(&a), Some(old_lease), "a fresh lease, a fresh fence");
    let permit = a.admit(0).expect("admits again");
    assert_ne!(permit.fence(), &old_fence);
    let fenced = |fence| Txn::new().when([fence]).and_then([TxnOp::put("/test/w", "v")]);
    let old = setup.store.txn(fenced(old_fence)).await.expect("txn");
    assert!(!old.succeeded, "the old fence fails");
    let new = setup
        .store
        .txn(fenced(permit.fence().clone()))
        .await
        .expect("txn");
    assert!(new.succeeded);
    assert!(
        setup.exists(&setup.keys.host("actor-a")).await,
        "the host key is back"
    );
}

/// How [`Flaky`] treats calls.
const NORMAL: u8 = 0;
/// Keep-alives reach the store but their answers are lost: the lease lives on in the store,
/// and the host cannot know it.
const KEEP_ALIVE_ANSWERS_LOST: u8 = 1;
/// No call reaches the store (watches already open go on).
const UNREACHABLE: u8 = 2;

/// The embedded store behind a switch that loses answers or every call.
#[derive(Debug)]
struct Flaky {
    store: EmbeddedStore,
    mode: AtomicU8,
}

impl Flaky {
    fn new() -> Arc<Flaky> {
        Arc::new(Flaky {
            store: EmbeddedStore::in_memory(EmbeddedOptions::default()),
            mode: AtomicU8::new(NORMAL),
        })
    }

    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
    }

    fn reachable(&self) -> Result<(), StoreError> {
        if self.mode.load(Ordering::SeqCst) == UNREACHABLE {
            return Err(unavailable());
        }
        Ok(())
    }
}

fn unavailable() -> StoreError {
    StoreError::Unavailable {
        context: "a test".into(),
        reason: "the store is out of reach".into(),
    }
}

#[async_trait]
impl Store for Flaky {
    async fn get(&self, key: &[u8]) -> Result<(Option<KeyValue>, i64), StoreError> {
        self.reachable()?;
        self.store.get(key).await
    }

    async fn range(&self, request: RangeRequest) -> Result<RangeResult, StoreError> {
        self.reachable()?;
        self.store.range(request).await
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError> {
        self.reachable()?;
        self.store.txn(txn).await
    }

    async fn lease_grant(&self, ttl: i64) -> Result<LeaseGrant, StoreError> {
        self.reachable()?;
        self.store.lease_grant(ttl).await
    }

    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64, StoreError> {
        self.reachable()?;
        let answer = self.store.lease_keep_alive(lease).await;
        if self.mode.load(Ordering::SeqCst) == KEEP_ALIVE_ANSWERS_LOST {
            return Err(unavailable());
        }
        answer
    }

    async fn lease_revoke(&self, lease: LeaseId) -> Result<(), StoreError> {
        self.reachable()?;
        self.store.lease_revoke(lease).await
    }

    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<LeaseStatus>, StoreError> {
        self.reachable()?;
        self.store.lease_time_to_live(lease).await
    }

    async fn watch(&self, range: KeyRange, start_revision: Option<i64>) -> Result<WatchStream, StoreError> {
        self.reachable()?;
        self.store.watch(range, start_revision).await
    }
}

/// A host whose keep-alives go unanswered for a whole TTL takes its lease as lost although
/// the store still has it, then joins again: it revokes the old lease (freeing its shard keys
/// at once) and takes its shards again under a new one.
#[tokio::test(start_paused = true)]
async fn a_host_whose_keep_alives_go_unanswered_for_a_ttl_rejoins_under_a_new_lease() {
    let flaky = Flaky::new();
    let setup = Setup::new(flaky.clone(), "test", TTL);
    let a = setup.join("actor-a").await;
    setup.wait_for_split(&[&a], Duration::from_secs(1)).await;
    let old_lease = lease_of(&a).expect("a lease");

    flaky.set(KEEP_ALIVE_ANSWERS_LOST);
    let rejoined_after = eventually(
        "the host rejoins under a new lease",
        ttl() + Duration::from_secs(1),
        || async { lease_of(&a).is_some_and(|lease| lease != old_lease) },
    )
    .await;
    assert!(
        rejoined_after + Duration::from_secs(1) >= ttl(),
        "not before a TTL without answers"
    );
    flaky.set(NORMAL);

    setup.wait_for_split(&[&a], ttl() + AFTER_TTL).await;
    assert_ne!(lease_of(&a), Some(old_lease));
    let status = setup
        .store
        .lease_time_to_live(old_lease)
        .await
        .expect("lease status");
    assert_eq!(status, None, "the old lease was revoked");
}

/// A host that cannot reach the store drops every shard once its keep-alives went unanswered
/// for a TTL (admits nothing, fences nothing), holds nothing while the store stays out of
/// reach, and takes its shards again under a new lease once it is back.
#[tokio::test(start_paused = true)]
async fn a_host_cut_off_from_the_store_drops_every_shard_until_it_is_back() {
    let flaky = Flaky::new();
    let setup = Setup::new(flaky.clone(), "test", TTL);
    let a = setup.join("actor-a").await;
    setup.wait_for_split(&[&a], Duration::from_secs(1)).await;
    let old_lease = lease_of(&a).expect("a lease");

    flaky.set(UNREACHABLE);
    let nothing_held = || async { a.held().is_empty() && a.admit(0).is_err() && a.fence(0).is_none() };
    let dropped_after = eventually(
        "the host drops every shard",
        ttl() + Duration::from_secs(1),
        nothing_held,
    )
    .await;
    assert!(
        dropped_after + Duration::from_secs(1) >= ttl(),
        "not before a TTL without answers"
    );
    let cut_off = tokio::time::Instant::now();
    while cut_off.elapsed() < 2 * ttl() {
        assert!(
            nothing_held().await,
            "holds nothing while the store is out of reach"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    flaky.set(NORMAL);
    setup.wait_for_split(&[&a], ttl() + AFTER_TTL).await;
    assert_ne!(lease_of(&a), Some(old_lease));
}

/// A shard given up waits for its calls in flight no longer than the drain timeout: admits
/// nothing new meanwhile, then goes to its new owner, and the late call's write fails.
#[tokio::test(start_paused = true)]
async fn a_shard_given_up_waits_for_calls_in_flight_only_up_to_the_drain_timeout() {
    let setup = setup();
    let drain_timeout = Duration::from_secs(3);
    let options = MembershipOptions {
        drain_timeout,
        ..setup.options()
    };
    let a = setup.join_with("actor-a", options.clone()).await;
    setup.wait_for_split(&[&a], Duration::from_secs(1)).await;
    let hosts = vec!["actor-a".to_string(), "actor-b".to_string()];
    let shard = wins("actor-b", &hosts)[0];
    let stuck = a.admit(shard).expect("a admits calls on its shard");

    let b = setup.join_with("actor-b", options).await;
    eventually("the shard is draining", Duration::from_secs(1), || async {
        a.admit(shard).is_err() && a.fence(shard).is_some()
    })
    .await;
    // Every other shard b wins moves at once; this one waits for the call.
    let others: Vec<u32> = wins("actor-b", &hosts)
        .into_iter()
        .filter(|&s| s != shard)
        .collect();
    eventually("the idle shards moved", Duration::from_secs(1), || async {
        let holders = setup.holders().await;
        others
            .iter()
            .all(|s| holders.get(s).is_some_and(|(host, _)| host == "actor-b"))
    })
    .await;
    assert_eq!(setup.holders().await[&shard].0, "actor-a");

    let moved_after = eventually(
        "the stuck shard moved",
        drain_timeout + Duration::from_secs(1),
        || async {
            setup
                .holders()
                .await
                .get(&shard)
                .is_some_and(|(host, _)| host == "actor-b")
        },
    )
    .await;
    assert!(
        moved_after + Duration::from_secs(1) >= drain_timeout,
        "not before the drain timeout"
    );
    setup.wait_for_split(&[&a, &b], Duration::from_secs(1)).await;
    let late = setup
        .store
        .txn(
            Txn::new()
                .when([stuck.fence().clone()])
                .and_then([TxnOp::put("/test/late", "v")]),
        )
        .await
        .expect("txn");
    assert!(!late.succeeded, "the late call's write fails on the fence");
    drop(stuck);
    assert_eq!(a.held().len() + b.held().len(), DEFAULT_SHARDS as usize);
}
