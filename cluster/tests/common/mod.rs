//! The cluster scenarios, written once against any store: the embedded store (on paused time)
//! and a real etcd cluster run the same ones.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentprocess_cluster::{
    ActorMembership, DEFAULT_SHARDS, Election, HostRecord, MembershipOptions, ShardMap, rendezvous_owner,
};
use agentprocess_store::keys::Keys;
use agentprocess_store::probed::{Probe, Probed};
use agentprocess_store::{
    Compare, CompareTarget, EventKind, KeyRange, LeaseId, RangeRequest, Store, Txn, TxnOp, WatchEvent,
    WatchStream,
};
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long a shard handover after a graceful leave may take.
pub const HANDOVER: Duration = Duration::from_secs(1);

/// What the store lets the slower things take beyond a lease's TTL: its expiry check, the
/// watch event, the survivor's transactions.
pub const AFTER_TTL: Duration = Duration::from_secs(2);

/// A scenario's cluster: the store and the keys of a cluster of its own.
#[derive(Debug, Clone)]
pub struct Setup {
    pub store: Arc<dyn Store>,
    pub keys: Keys,
    /// The lease TTL the hosts and candidates ask for, in seconds.
    pub ttl: i64,
}

impl Setup {
    pub fn new(store: Arc<dyn Store>, cluster: &str, ttl: i64) -> Self {
        Setup {
            store,
            keys: Keys::new(cluster),
            ttl,
        }
    }

    fn ttl(&self) -> Duration {
        Duration::from_secs(self.ttl as u64)
    }

    pub fn options(&self) -> MembershipOptions {
        MembershipOptions {
            shards: DEFAULT_SHARDS,
            lease_ttl_seconds: self.ttl,
            drain_timeout: Duration::from_secs(10),
        }
    }

    pub async fn join(&self, id: &str) -> Arc<ActorMembership> {
        self.join_with(id, self.options()).await
    }

    pub async fn join_with(&self, id: &str, options: MembershipOptions) -> Arc<ActorMembership> {
        ActorMembership::join(self.store.clone(), self.keys.clone(), record(id), options)
            .await
            .expect("join the cluster")
    }

    /// Every shard key in the store: shard → (host id, lease).
    pub async fn holders(&self) -> BTreeMap<u32, (String, Option<LeaseId>)> {
        let answer = self
            .store
            .range(RangeRequest::new(self.keys.shards()))
            .await
            .expect("read the shard keys");
        answer
            .kvs
            .into_iter()
            .map(|kv| {
                let shard = self.keys.parse_shard(&kv.key).expect("a shard key");
                let host = String::from_utf8(kv.value).expect("a host id");
                (shard, (host, kv.lease))
            })
            .collect()
    }

    /// Waits until the store has every shard under the host rendezvous hashing gives it among
    /// `members`, attached to that host's lease, and each member's `held()` says the same.
    pub async fn wait_for_split(&self, members: &[&Arc<ActorMembership>], within: Duration) {
        let ids: Vec<String> = members.iter().map(|m| m.host_id().to_string()).collect();
        eventually("every shard held by its rendezvous owner", within, || async {
            let holders = self.holders().await;
            if holders.len() != DEFAULT_SHARDS as usize {
                return false;
            }
            let leases: BTreeMap<&str, Option<LeaseId>> =
                members.iter().map(|m| (m.host_id(), lease_of(m))).collect();
            let store_agrees = holders.iter().all(|(&shard, (host, lease))| {
                Some(host.as_str()) == rendezvous_owner(shard, &ids)
                    && leases.get(host.as_str()) == Some(lease)
            });
            let members_agree = members.iter().all(|m| m.held() == wins(m.host_id(), &ids));
            store_agrees && members_agree
        })
        .await;
    }

    pub async fn exists(&self, key: &[u8]) -> bool {
        self.store.get(key).await.expect("read a key").0.is_some()
    }
}

/// A host's record, with a URL made from its id.
pub fn record(id: &str) -> HostRecord {
    HostRecord {
        id: id.to_string(),
        url: format!("http://{id}.test:50051"),
    }
}

/// The shards `host` wins among `hosts`.
pub fn wins(host: &str, hosts: &[String]) -> Vec<u32> {
    (0..DEFAULT_SHARDS)
        .filter(|&shard| rendezvous_owner(shard, hosts) == Some(host))
        .collect()
}

/// The lease a member holds its shards under, read from the fence of any shard it holds.
pub fn lease_of(member: &ActorMembership) -> Option<LeaseId> {
    let shard = *member.held().first()?;
    match member.fence(shard)?.target {
        CompareTarget::Lease(lease) => lease,
        _ => None,
    }
}

/// Polls `check` until it holds; panics when it still does not after `within`. Returns how long
/// it took.
pub async fn eventually<F, Fut>(what: &str, within: Duration, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if check().await {
            return start.elapsed();
        }
        assert!(start.elapsed() <= within, "not within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A write fenced by `fence`: true when it committed.
async fn fenced_put(setup: &Setup, fence: &Compare, key: &str) -> bool {
    setup
        .store
        .txn(Txn::new().when([fence.clone()]).and_then([TxnOp::put(key, "v")]))
        .await
        .expect("a fenced write")
        .succeeded
}

/// The next change of a watched key; panics when none comes within `within`.
async fn next_change(changes: &mut WatchStream, within: Duration) -> WatchEvent {
    tokio::time::timeout(within, changes.next())
        .await
        .expect("a change of the watched key in time")
        .expect("the watch goes on")
        .expect("a change, not an error")
}

/// Tells whoever waits on `opened` each time a watch is opened through the store: how a test
/// sees a candidate start watching the leader's key, as it does when it found the seat taken
/// (and also once it won, to notice losing it: the test checks whose the seat is).
#[derive(Debug, Default)]
struct WatchOpened {
    opened: Arc<Notify>,
}

#[async_trait::async_trait]
impl Probe for WatchOpened {
    async fn watch(&self, _range: &KeyRange, events: WatchStream) -> WatchStream {
        self.opened.notify_one();
        events
    }
}

/// Campaigns as `candidate` in a task, through a store that says when the candidate starts
/// watching the leader's key; returns once it does, after checking that the seat is still
/// `leader`'s and the campaign has not ended: one leader at a time.
async fn standby_waiting_behind(
    setup: &Setup,
    key: &[u8],
    candidate: &str,
    leader: &str,
) -> tokio::task::JoinHandle<Result<agentprocess_cluster::Leadership, agentprocess_store::StoreError>> {
    let opened = Arc::new(Notify::new());
    let store: Arc<dyn Store> = Arc::new(Probed::new(
        setup.store.clone(),
        WatchOpened {
            opened: opened.clone(),
        },
    ));
    let (owned_key, owned_candidate, ttl) = (key.to_vec(), candidate.to_string(), setup.ttl);
    let standby =
        tokio::spawn(async move { Election::campaign(store, owned_key, owned_candidate, ttl).await });
    tokio::time::timeout(setup.ttl(), opened.notified())
        .await
        .expect("the standby finds the seat taken and waits for the leader key to go");
    assert_eq!(
        setup
            .store
            .get(key)
            .await
            .expect("read the leader key")
            .0
            .map(|kv| kv.value),
        Some(leader.as_bytes().to_vec()),
        "the seat is still the leader's"
    );
    assert!(!standby.is_finished(), "one leader at a time");
    standby
}

/// One host holds every shard; a second joins: they split by rendezvous, every shard held by
/// exactly one of them (as the store says), and the shards that moved are exactly those the
/// newcomer wins.
pub async fn second_host_takes_exactly_the_shards_it_wins(setup: Setup) {
    let a = setup.join("actor-a").await;
    setup.wait_for_split(&[&a], setup.ttl() + AFTER_TTL).await;
    let before = setup.holders().await;
    assert!(before.values().all(|(host, _)| host == "actor-a"));

    let b = setup.join("actor-b").await;
    setup.wait_for_split(&[&a, &b], setup.ttl() + AFTER_TTL).await;
    let after = setup.holders().await;
    let moved: Vec<u32> = (0..DEFAULT_SHARDS)
        .filter(|shard| before[shard].0 != after[shard].0)
        .collect();
    let hosts = vec!["actor-a".to_string(), "actor-b".to_string()];
    assert_eq!(
        moved,
        wins("actor-b", &hosts),
        "exactly the newcomer's shards moved"
    );
    assert_eq!(b.held(), moved);
    let kept: Vec<u32> = (0..DEFAULT_SHARDS).filter(|s| !moved.contains(s)).collect();
    assert_eq!(a.held(), kept, "the first host kept the rest");
    assert!(
        kept.iter().all(|shard| before[shard] == after[shard]),
        "shards that stayed were not rewritten"
    );
    // About half each.
    assert!((90..=166).contains(&moved.len()), "{} moved", moved.len());
}

/// Graceful leave: a call admitted before the leave finishes before its shard's key is
/// deleted (the key's first change comes after the call ended); once it is done, the other host
/// holds every shard within [`HANDOVER`].
pub async fn leave_waits_for_calls_in_flight_then_hands_every_shard_over(setup: Setup) {
    let a = setup.join("actor-a").await;
    let b = setup.join("actor-b").await;
    setup.wait_for_split(&[&a, &b], setup.ttl() + AFTER_TTL).await;
    let shard = a.held()[0];
    let other = a.held()[1];
    let permit = a.admit(shard).expect("a admits calls on its shard");
    let fence = permit.fence().clone();
    assert_eq!(Some(&fence), a.fence(shard).as_ref());
    let shard_key = setup.keys.shard(shard);
    let (_, before_leave) = setup.store.get(&shard_key).await.expect("read the shard key");
    let mut shard_changes = setup
        .store
        .watch(KeyRange::single(shard_key.clone()), Some(before_leave + 1))
        .await
        .expect("watch the shard key");

    let leaving = {
        let a = a.clone();
        tokio::spawn(async move { a.leave().await })
    };
    eventually("the leaving host admits nothing", HANDOVER, || async {
        a.admit(other).is_err()
    })
    .await;
    // The call in flight holds the shard: the key is still on the leaving host's lease.
    assert!(a.still_holds(shard).await.expect("read the shard key"));
    assert_eq!(setup.holders().await[&shard].0, "actor-a");
    assert!(
        fenced_put(&setup, &fence, "/test/in-flight-write").await,
        "the call in flight still commits"
    );
    // Nothing marks a leave that is waiting. A leave with no call in flight lets go of its
    // shards within HANDOVER (as checked below once the call ends), so the call is held that
    // long while the shard's key is watched: a leave that did not wait would change it.
    let changed = tokio::time::timeout(HANDOVER, shard_changes.next()).await;
    assert!(
        changed.is_err(),
        "leave waits for the call in flight, but the shard's key changed: {changed:?}"
    );

    let (_, call_ended_at) = setup.store.get(&shard_key).await.expect("read the shard key");
    drop(permit);
    let took = eventually("the remaining host holds every shard", HANDOVER, || async {
        let holders = setup.holders().await;
        holders.len() == DEFAULT_SHARDS as usize
            && holders.values().all(|(host, _)| host == "actor-b")
            && b.held().len() == DEFAULT_SHARDS as usize
    })
    .await;
    eprintln!("handover after leave: {took:?}");
    let let_go = next_change(&mut shard_changes, HANDOVER).await;
    assert_eq!(
        let_go.kind,
        EventKind::Delete,
        "the leaving host lets go of the shard (its lease revoked) before another takes it"
    );
    assert!(
        let_go.kv.mod_revision > call_ended_at,
        "leave waits for the call in flight: the shard's key went at revision {}, while the call \
         held it (up to revision {call_ended_at})",
        let_go.kv.mod_revision
    );
    leaving.await.expect("leave ends");
    assert!(a.held().is_empty());
    assert!(a.fence(shard).is_none());
    assert!(
        !setup.exists(&setup.keys.host("actor-a")).await,
        "the host key is gone"
    );
    assert!(
        !fenced_put(&setup, &fence, "/test/after-leave").await,
        "the old fence holds no more"
    );
}

/// Crash (shutdown without leave): the survivor holds every shard within TTL + [`AFTER_TTL`].
pub async fn survivor_takes_a_crashed_hosts_shards_after_its_lease_expires(setup: Setup) {
    let a = setup.join("actor-a").await;
    let b = setup.join("actor-b").await;
    setup.wait_for_split(&[&a, &b], setup.ttl() + AFTER_TTL).await;
    b.shutdown();
    assert!(b.admit(b_shard(&setup)).is_err(), "a stopped host admits nothing");
    let took = eventually(
        "the survivor holds every shard",
        setup.ttl() + AFTER_TTL,
        || async {
            let holders = setup.holders().await;
            holders.len() == DEFAULT_SHARDS as usize
                && holders.values().all(|(host, _)| host == "actor-a")
                && a.held().len() == DEFAULT_SHARDS as usize
        },
    )
    .await;
    eprintln!("takeover after a crash: {took:?}");
    assert!(!setup.exists(&setup.keys.host("actor-b")).await);
}

/// A shard actor-b wins against actor-a.
fn b_shard(_setup: &Setup) -> u32 {
    let hosts = vec!["actor-a".to_string(), "actor-b".to_string()];
    wins("actor-b", &hosts)[0]
}

/// Fence: a write with `fence(shard)` commits while the shard is held; after the shard moved
/// to another host, the same compare (captured earlier) fails and writes nothing.
pub async fn a_captured_fence_stops_writes_once_the_shard_moved(setup: Setup) {
    let a = setup.join("actor-a").await;
    setup.wait_for_split(&[&a], setup.ttl() + AFTER_TTL).await;
    let shard = b_shard(&setup);
    let fence = a.fence(shard).expect("a holds every shard");
    assert_eq!(fence, Compare::lease_is(setup.keys.shard(shard), lease_of(&a)));
    assert!(fenced_put(&setup, &fence, "/test/while-held").await);
    assert!(setup.exists(b"/test/while-held").await);

    let b = setup.join("actor-b").await;
    setup.wait_for_split(&[&a, &b], setup.ttl() + AFTER_TTL).await;
    assert_eq!(setup.holders().await[&shard].0, "actor-b");
    assert!(
        !fenced_put(&setup, &fence, "/test/after-move").await,
        "the old fence fails"
    );
    assert!(!setup.exists(b"/test/after-move").await, "and wrote nothing");
    assert!(a.fence(shard).is_none());
    assert!(!a.still_holds(shard).await.expect("read the shard key"));
    assert!(a.admit(shard).is_err());
    let new_fence = b.fence(shard).expect("b holds it now");
    assert!(fenced_put(&setup, &new_fence, "/test/new-owner").await);
    assert!(b.still_holds(shard).await.expect("read the shard key"));
}

/// The shard map follows joins, leaves and crashes; `route` returns the holder.
pub async fn shard_map_follows_joins_leaves_and_crashes(setup: Setup) {
    let map = ShardMap::watch(setup.store.clone(), setup.keys.clone(), DEFAULT_SHARDS)
        .await
        .expect("watch the shard map");
    assert_eq!(map.route(0), None, "no host, no route");
    assert_eq!(map.any_host(), None);
    let converged = setup.ttl() + AFTER_TTL;
    // Every route names the holder the store has, as a live host's record.
    let routes_match_the_store = || async {
        let holders = setup.holders().await;
        holders.len() == DEFAULT_SHARDS as usize
            && holders
                .iter()
                .all(|(&shard, (host, _))| map.route(shard) == Some(record(host)))
    };

    let a = setup.join("actor-a").await;
    eventually("routes to the only host", converged, || async {
        routes_match_the_store().await && (0..DEFAULT_SHARDS).all(|s| map.route(s) == Some(record("actor-a")))
    })
    .await;
    assert_eq!(map.hosts(), vec![record("actor-a")]);

    let b = setup.join("actor-b").await;
    setup.wait_for_split(&[&a, &b], converged).await;
    eventually("routes follow the split", converged, || async {
        routes_match_the_store().await && map.route(b_shard(&setup)) == Some(record("actor-b"))
    })
    .await;
    assert_eq!(map.hosts(), vec![record("actor-a"), record("actor-b")]);
    let first = map.any_host().expect("a host");
    let second = map.any_host().expect("a host");
    assert_ne!(first, second, "any_host takes turns");
    assert_eq!(
        map.route_key("run-1"),
        map.route(agentprocess_cluster::shard_of("run-1", DEFAULT_SHARDS))
    );

    b.shutdown();
    eventually("routes follow a crash", converged, || async {
        map.hosts() == vec![record("actor-a")]
            && routes_match_the_store().await
            && (0..DEFAULT_SHARDS).all(|s| map.route(s) == Some(record("actor-a")))
    })
    .await;

    a.leave().await;
    eventually("no host after the last one left", converged, || async {
        map.hosts().is_empty() && map.route(0).is_none() && map.any_host().is_none()
    })
    .await;
    map.refresh().await.expect("refresh");
    assert!(map.hosts().is_empty());
}

/// Election: of two candidates one leads; when the leader crashes, the standby leads within
/// TTL + [`AFTER_TTL`]; `lost()` fires for a leader whose key was deleted.
pub async fn standby_leads_after_the_leader_crashes_and_lost_fires_on_deletion(setup: Setup) {
    let key = setup.keys.scheduler_leader();
    let leader = Election::campaign(setup.store.clone(), key.clone(), "scheduler-a".into(), setup.ttl)
        .await
        .expect("the first candidate wins");
    assert!(!leader.is_lost());
    let (kv, _) = setup.store.get(&key).await.expect("read the leader key");
    let kv = kv.expect("the leader key");
    assert_eq!(kv.value, b"scheduler-a");
    assert_eq!(kv.lease, Some(leader.lease()));
    let mut key_changes = setup
        .store
        .watch(KeyRange::single(key.clone()), Some(kv.mod_revision + 1))
        .await
        .expect("watch the leader key");
    let standby = standby_waiting_behind(&setup, &key, "scheduler-b", "scheduler-a").await;
    assert!(fenced_put(&setup, &leader.fence(), "/test/leader-write").await);

    let crashed_at = Instant::now();
    leader.shutdown();
    let standby = tokio::time::timeout(setup.ttl() + AFTER_TTL, standby)
        .await
        .expect("the standby leads within TTL + 2 s")
        .expect("campaign task")
        .expect("campaign");
    eprintln!("standby leads after a crash: {:?}", crashed_at.elapsed());
    let (kv, _) = setup.store.get(&key).await.expect("read the leader key");
    assert_eq!(kv.expect("the leader key").value, b"scheduler-b");
    assert!(!standby.is_lost());
    // One leader at a time, as the key's history tells: the leader's key went (its lease
    // expired) before the standby's was written.
    let expired = next_change(&mut key_changes, AFTER_TTL).await;
    assert_eq!(expired.kind, EventKind::Delete, "{expired:?}");
    let took_over = next_change(&mut key_changes, AFTER_TTL).await;
    assert_eq!(
        (took_over.kind, took_over.kv.value.as_slice()),
        (EventKind::Put, b"scheduler-b".as_slice())
    );

    setup
        .store
        .txn(Txn::new().and_then([TxnOp::delete(key.clone())]))
        .await
        .expect("delete the leader key");
    tokio::time::timeout(Duration::from_secs(5), standby.lost())
        .await
        .expect("lost() fires once the key is deleted");
    assert!(standby.is_lost());
}

/// A leader that resigns hands over at once: the standby does not wait for a TTL.
pub async fn resigning_hands_leadership_over_at_once(setup: Setup) {
    let key = setup.keys.scheduler_leader();
    let leader = Election::campaign(setup.store.clone(), key.clone(), "scheduler-a".into(), setup.ttl)
        .await
        .expect("the first candidate wins");
    let standby = standby_waiting_behind(&setup, &key, "scheduler-b", "scheduler-a").await;
    leader.resign().await.expect("resign");
    let standby = tokio::time::timeout(HANDOVER, standby)
        .await
        .expect("the standby leads at once")
        .expect("campaign task")
        .expect("campaign");
    assert_eq!(standby.candidate(), "scheduler-b");
    standby.resign().await.expect("resign");
    assert!(!setup.exists(&key).await);
}
