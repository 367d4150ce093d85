//! An actor host's membership: its host key, the shards it holds, and the fence of each.
//!
//! A host joins with a lease: its host key and every shard key it holds are attached to it.
//! From then on it converges, again after every change to the hosts or the shard map and once
//! every TTL in any case: it takes each free shard that rendezvous hashing over the live hosts
//! gives it, and gives up each shard it holds that now belongs to another host, after the calls
//! in flight on it have finished. A shard key's lease is the shard's fence: every run write
//! compares it, so a host that lost its lease (or a shard) cannot write, whatever it believes.
//!
//! Lifecycle of one shard on one host:
//!
//! - free → held: rendezvous hashing over the live hosts gives it to this host and its key is
//!   absent: txn `absent(key) → put(key, host id, our lease)`;
//! - held → draining: another live host should hold it: no new call is admitted;
//! - draining → free: no call is in flight, or the drain timeout passed: txn
//!   `lease_is(key, our lease) → delete(key)`;
//! - held or draining → free at once: the lease is lost, or the store no longer has the key
//!   under it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentprocess_store::keys::Keys;
use agentprocess_store::{Compare, LeaseGrant, LeaseId, Store, StoreError, Txn, TxnOp};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::lease::{self, LeaseLoss};
use crate::mirror::Mirror;
use crate::shards::{DEFAULT_SHARDS, rendezvous_owner};

/// Most shards taken in one transaction: one compare and one put each, under etcd's limit of
/// 128 of either per transaction.
const ACQUIRE_BATCH: usize = 64;

/// How long to wait before trying a failed store call of the membership again.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// A live actor host, as its host key records it (JSON, attached to the host's lease).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRecord {
    /// The host's id: unique in the cluster, stable across restarts of the same host.
    pub id: String,
    /// Where the host serves the run service over gRPC.
    pub url: String,
}

/// How a host takes part in the cluster.
#[derive(Debug, Clone)]
pub struct MembershipOptions {
    /// The cluster's shard count (the same on every host and gateway).
    pub shards: u32,
    /// The TTL asked for the host's lease. The store may grant more (etcd has a minimum). A
    /// crashed host's shards are free again at most this long after its last keep-alive.
    pub lease_ttl_seconds: i64,
    /// How long a shard that is given up (or a host that leaves) waits for the calls in flight
    /// on it before giving it up anyway. Their commits then fail on the fence.
    pub drain_timeout: Duration,
}

impl Default for MembershipOptions {
    fn default() -> Self {
        MembershipOptions {
            shards: DEFAULT_SHARDS,
            lease_ttl_seconds: 5,
            drain_timeout: Duration::from_secs(10),
        }
    }
}

/// A call for a shard this host does not own (or no longer admits calls for): the caller's
/// gateway refreshes its shard map and sends the call to the owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this host does not own shard {shard}")]
pub struct NotOwner {
    pub shard: u32,
}

/// One call admitted on a shard: the shard is not given up while the permit lives (up to the
/// drain timeout). Drop it when the call is done.
#[derive(Debug)]
pub struct ShardPermit {
    shard: u32,
    fence: Compare,
    slot: Arc<Slot>,
}

impl ShardPermit {
    pub fn shard(&self) -> u32 {
        self.shard
    }

    /// The fence of the lease the call was admitted under: the compare to add to the call's
    /// writes. If the host lost the shard and took it again since, this still names the old
    /// lease, so the write fails rather than commit on state read under the old one.
    pub fn fence(&self) -> &Compare {
        &self.fence
    }
}

impl Drop for ShardPermit {
    fn drop(&mut self) {
        self.slot.leave();
    }
}

/// The calls in flight on one holding of a shard.
#[derive(Debug, Default)]
struct Slot {
    in_flight: AtomicUsize,
    idle: Notify,
}

impl Slot {
    fn enter(&self) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
    }

    fn leave(&self) {
        if self.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle.notify_waiters();
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Waits until no call is in flight, or `deadline`; true when none is.
    async fn wait_idle(&self, deadline: Instant) -> bool {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            // Registered before the count is read, so a call that ends in between still wakes us.
            idle.as_mut().enable();
            if self.in_flight() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, idle).await.is_err() {
                return self.in_flight() == 0;
            }
        }
    }
}

/// An actor host's place in the cluster. See the module docs for what it does in the
/// background.
///
/// Stopping: [`ActorMembership::leave`] hands every shard over at once. Dropping the last
/// handle, or [`ActorMembership::shutdown`], only stops the background work: to the store that
/// is a crash, and the host's keys go when its lease expires.
#[derive(Debug)]
pub struct ActorMembership {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn Store>,
    keys: Keys,
    host: HostRecord,
    /// The host key's value: `host` as JSON.
    host_value: Vec<u8>,
    options: MembershipOptions,
    hosts: Arc<Mirror>,
    shard_map: Arc<Mirror>,
    /// Wakes the converging task: the mirrors changed, or the lease was lost.
    wake: Arc<Notify>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    /// The lease the host key and the held shards are attached to; `None` after it was lost,
    /// until the host joined again.
    lease: Option<LeaseGrant>,
    /// A lease given up as lost, revoked at the next join in case the store still has it, so
    /// its shard keys go at once.
    lost_lease: Option<LeaseId>,
    held: BTreeMap<u32, Held>,
    /// The revision at which each shard was last given up by this host: a mirror older than
    /// that may still show it under our lease.
    released_at: BTreeMap<u32, i64>,
    /// Every background task. Aborted all at once when the membership stops.
    tasks: JoinSet<()>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Taking and giving up shards, admitting calls.
    Serving,
    /// Leaving: admitting nothing, waiting for the calls in flight.
    Leaving,
    /// Stopped: holding nothing, doing nothing.
    Stopped,
}

/// One shard this host holds under its current lease.
#[derive(Debug)]
struct Held {
    slot: Arc<Slot>,
    /// Given up: no new call is admitted; the key is deleted once the calls in flight end.
    draining: bool,
    /// The revision of the write that took the shard: a mirror older than that cannot tell
    /// whether we still hold it.
    acquired_at: i64,
}

impl Held {
    fn new(acquired_at: i64) -> Self {
        Held {
            slot: Arc::new(Slot::default()),
            draining: false,
            acquired_at,
        }
    }
}

impl ActorMembership {
    /// Joins the cluster: grants the host's lease, puts its host key, starts keeping the lease
    /// alive and following the hosts and the shard map, and takes the free shards it should
    /// own (in the background after that first attempt). Must be called inside a tokio
    /// runtime.
    pub async fn join(
        store: Arc<dyn Store>,
        keys: Keys,
        host: HostRecord,
        options: MembershipOptions,
    ) -> Result<Arc<ActorMembership>, StoreError> {
        let wake = Arc::new(Notify::new());
        let host_value = serde_json::to_vec(&host).expect("a host record is plain JSON");
        let inner = Arc::new(Inner {
            hosts: Arc::new(Mirror::new(store.clone(), keys.hosts(), wake.clone())),
            shard_map: Arc::new(Mirror::new(store.clone(), keys.shards(), wake.clone())),
            store,
            keys,
            host,
            host_value,
            options,
            wake,
            state: Mutex::new(State {
                phase: Phase::Serving,
                lease: None,
                lost_lease: None,
                held: BTreeMap::new(),
                released_at: BTreeMap::new(),
                tasks: JoinSet::new(),
            }),
        });
        // From here on, an early return drops the membership, which stops what was started.
        let membership = Arc::new(ActorMembership { inner: inner.clone() });
        let hosts_at = inner.hosts.load().await?;
        let shards_at = inner.shard_map.load().await?;
        inner.register().await?;
        inner.spawn(inner.hosts.clone().follow(Some(hosts_at)));
        inner.spawn(inner.shard_map.clone().follow(Some(shards_at)));
        inner.converge().await;
        inner.spawn(inner.clone().converge_forever());
        Ok(membership)
    }

    pub fn host_id(&self) -> &str {
        &self.inner.host.id
    }

    /// Admits one call on `shard`: Ok only while this host holds the shard and is not giving
    /// it up. The permit counts the call as in flight until it is dropped.
    pub fn admit(&self, shard: u32) -> Result<ShardPermit, NotOwner> {
        let state = self.inner.state.lock().unwrap();
        let (Phase::Serving, Some(lease)) = (state.phase, state.lease) else {
            return Err(NotOwner { shard });
        };
        match state.held.get(&shard) {
            Some(held) if !held.draining => {
                held.slot.enter();
                Ok(ShardPermit {
                    shard,
                    fence: Compare::lease_is(self.inner.keys.shard(shard), Some(lease.id)),
                    slot: held.slot.clone(),
                })
            }
            _ => Err(NotOwner { shard }),
        }
    }

    /// The compare every run write of `shard` adds to its transaction: the shard key is still
    /// attached to this host's current lease. `None` when the host does not hold the shard
    /// (a shard being given up is still held until its key is deleted).
    pub fn fence(&self, shard: u32) -> Option<Compare> {
        let state = self.inner.state.lock().unwrap();
        let lease = state.lease?;
        if state.phase == Phase::Stopped || !state.held.contains_key(&shard) {
            return None;
        }
        Some(Compare::lease_is(self.inner.keys.shard(shard), Some(lease.id)))
    }

    /// Whether the store has `shard` under this host's current lease, read now. After a write
    /// whose compares failed, tells a lost fence (false) from an ordinary race (true).
    pub async fn still_holds(&self, shard: u32) -> Result<bool, StoreError> {
        let lease = self.inner.state.lock().unwrap().lease.map(|lease| lease.id);
        let Some(lease) = lease else {
            return Ok(false);
        };
        let (kv, _) = self.inner.store.get(&self.inner.keys.shard(shard)).await?;
        Ok(kv.is_some_and(|kv| kv.lease == Some(lease)))
    }

    /// The shards this host holds, those being given up included, in order.
    pub fn held(&self) -> Vec<u32> {
        self.inner.state.lock().unwrap().held.keys().copied().collect()
    }

    /// Leaves the cluster gracefully: admits no more calls, waits for the calls in flight (up
    /// to the drain timeout), then revokes the lease, which deletes the host key and every
    /// shard key this host holds in one revision: other hosts see the host gone and its shards
    /// free at the same moment, and take them at once. Stops the background work. Does
    /// nothing when the membership has already left or stopped.
    pub async fn leave(&self) {
        let inner = &self.inner;
        let (lease, slots) = {
            let mut state = inner.state.lock().unwrap();
            if state.phase != Phase::Serving {
                return;
            }
            state.phase = Phase::Leaving;
            let slots: Vec<Arc<Slot>> = state.held.values().map(|held| held.slot.clone()).collect();
            (state.lease, slots)
        };
        let deadline = Instant::now() + inner.options.drain_timeout;
        let mut still_in_flight = 0;
        for slot in &slots {
            if !slot.wait_idle(deadline).await {
                still_in_flight += slot.in_flight();
            }
        }
        if still_in_flight > 0 {
            tracing::warn!(
                host = %inner.host.id,
                still_in_flight,
                "leaving with calls still in flight after the drain timeout; their writes will fail"
            );
        }
        if let Some(lease) = lease {
            match inner.store.lease_revoke(lease.id).await {
                Ok(()) | Err(StoreError::LeaseNotFound(_)) => {
                    tracing::info!(host = %inner.host.id, "left the cluster");
                }
                Err(error) => tracing::warn!(
                    host = %inner.host.id,
                    %error,
                    "cannot revoke the host's lease; its keys go when it expires"
                ),
            }
        }
        inner.stop();
    }

    /// Stops every background task without leaving: the lease is no longer kept alive, and
    /// the store frees the host's keys when it expires, as after a crash. The host admits
    /// nothing from now on.
    pub fn shutdown(&self) {
        self.inner.stop();
    }
}

impl Drop for ActorMembership {
    fn drop(&mut self) {
        self.inner.stop();
    }
}

impl Inner {
    /// Runs `task` in the background until the membership stops.
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut state = self.state.lock().unwrap();
        spawn_locked(&mut state, task);
    }

    fn stop(&self) {
        let mut state = self.state.lock().unwrap();
        state.phase = Phase::Stopped;
        state.lease = None;
        state.held.clear();
        state.tasks.abort_all();
    }

    /// Grants a new lease, puts the host key with it and keeps it alive.
    async fn register(self: &Arc<Self>) -> Result<LeaseGrant, StoreError> {
        let lost_lease = self.state.lock().unwrap().lost_lease;
        if let Some(lost) = lost_lease {
            // Usually gone already; if the store still has it, this frees its shards now. If the
            // store cannot be reached, the next join tries again (or the lease expires first).
            if let Ok(()) | Err(StoreError::LeaseNotFound(_)) = self.store.lease_revoke(lost).await {
                let mut state = self.state.lock().unwrap();
                if state.lost_lease == Some(lost) {
                    state.lost_lease = None;
                }
            }
        }
        let granted_at = Instant::now();
        let grant = self.store.lease_grant(self.options.lease_ttl_seconds).await?;
        let put = TxnOp::put_with_lease(self.keys.host(&self.host.id), self.host_value.clone(), grant.id);
        if let Err(error) = self.store.txn(Txn::new().and_then([put])).await {
            let _ = self.store.lease_revoke(grant.id).await;
            return Err(error);
        }
        let installed = {
            let mut state = self.state.lock().unwrap();
            let serving = state.phase == Phase::Serving;
            if serving {
                state.lease = Some(grant);
                let inner = self.clone();
                spawn_locked(&mut state, async move {
                    let loss = lease::keep_alive(inner.store.as_ref(), grant, granted_at).await;
                    inner.lease_lost(grant.id, loss);
                });
            }
            serving
        };
        if !installed {
            // The host left or stopped meanwhile.
            let _ = self.store.lease_revoke(grant.id).await;
            return Err(StoreError::Closed);
        }
        tracing::info!(host = %self.host.id, lease = %grant.id, ttl = grant.ttl, "joined the cluster");
        Ok(grant)
    }

    /// Drops every shard at once and wakes the converging task, which joins again with a new
    /// lease (a new fence).
    fn lease_lost(&self, lease: LeaseId, loss: LeaseLoss) {
        let mut state = self.state.lock().unwrap();
        if state.lease.map(|current| current.id) != Some(lease) {
            return;
        }
        let dropped = state.held.len();
        state.lease = None;
        state.held.clear();
        state.lost_lease = Some(lease);
        if state.phase == Phase::Serving {
            tracing::warn!(
                host = %self.host.id,
                %lease,
                dropped,
                reason = %loss,
                "lost the host's lease: dropped every shard; joining again with a new lease"
            );
        }
        self.wake.notify_one();
    }

    /// Converges after every change the mirrors see, and every TTL in any case (reading the
    /// hosts and the shard map again then, in case a watch fell silent).
    async fn converge_forever(self: Arc<Self>) {
        let every = Duration::from_secs(u64::try_from(self.options.lease_ttl_seconds).unwrap_or(0).max(1));
        loop {
            let wait = if self.converge().await { every } else { RETRY_AFTER };
            tokio::select! {
                () = self.wake.notified() => {}
                () = tokio::time::sleep(wait) => {
                    for mirror in [&self.hosts, &self.shard_map] {
                        if let Err(error) = mirror.load().await {
                            tracing::warn!(%error, "cannot read the cluster's keys");
                        }
                    }
                }
            }
        }
    }

    /// One pass: joins again if the lease was lost, drops shards the store no longer has under
    /// our lease, starts giving up the shards another host should own, and takes the free
    /// shards this host should own. False when a store call failed (try again soon).
    async fn converge(self: &Arc<Self>) -> bool {
        let lease = {
            let state = self.state.lock().unwrap();
            if state.phase != Phase::Serving {
                return true;
            }
            state.lease
        };
        let lease = match lease {
            Some(lease) => lease,
            None => match self.register().await {
                Ok(lease) => lease,
                Err(error) => {
                    tracing::warn!(host = %self.host.id, %error, "cannot join the cluster again; trying again");
                    return false;
                }
            },
        };
        let me = self.host.id.as_str();
        let (host_keys, _) = self.hosts.entries();
        let mut live: Vec<String> = host_keys
            .iter()
            .filter_map(|kv| self.keys.parse_host(&kv.key))
            .collect();
        if !live.iter().any(|host| host == me) {
            live.push(me.to_string());
        }
        let (shard_keys, seen) = self.shard_map.entries();
        // Each shard with a key, and the revision and lease of that key.
        let taken: BTreeMap<u32, (i64, Option<LeaseId>)> = shard_keys
            .iter()
            .filter_map(|kv| Some((self.keys.parse_shard(&kv.key)?, (kv.mod_revision, kv.lease))))
            .collect();
        let mut to_acquire = Vec::new();
        {
            let mut state = self.state.lock().unwrap();
            if state.phase != Phase::Serving || state.lease.map(|current| current.id) != Some(lease.id) {
                return true;
            }
            let state = &mut *state;
            state.held.retain(|&shard, held| {
                let ours = held.acquired_at > seen
                    || taken.get(&shard).is_some_and(|(_, holder)| *holder == Some(lease.id));
                // A shard being given up goes when its delete is seen, before or after the
                // release task hears back: that is no surprise.
                if !ours && !held.draining {
                    tracing::warn!(host = %me, shard, "the store no longer has this shard under our lease; dropped it");
                }
                ours
            });
            // A key on our lease that we do not track: a write whose answer was lost took it.
            for (&shard, &(revision, holder)) in &taken {
                let released_at = state.released_at.get(&shard).copied().unwrap_or(0);
                if holder == Some(lease.id) && seen >= released_at && !state.held.contains_key(&shard) {
                    state.held.insert(shard, Held::new(revision));
                }
            }
            for shard in 0..self.options.shards {
                let ours = rendezvous_owner(shard, &live) == Some(me);
                match state.held.get_mut(&shard) {
                    Some(held) if !ours && !held.draining => {
                        held.draining = true;
                        let slot = held.slot.clone();
                        spawn_locked(&mut *state, self.clone().release(shard, lease.id, slot));
                    }
                    None if ours && !taken.contains_key(&shard) => to_acquire.push(shard),
                    _ => {}
                }
            }
        }
        for batch in to_acquire.chunks(ACQUIRE_BATCH) {
            match self.acquire(batch, lease).await {
                Ok(true) => {}
                // Another host was faster for one of them: take the others one by one.
                Ok(false) if batch.len() > 1 => {
                    for &shard in batch {
                        if let Err(error) = self.acquire(&[shard], lease).await {
                            return self.acquire_failed(lease.id, error);
                        }
                    }
                }
                Ok(false) => {}
                Err(error) => return self.acquire_failed(lease.id, error),
            }
        }
        true
    }

    /// Takes `shards` in one transaction if every one of them is free. True when it did.
    async fn acquire(&self, shards: &[u32], lease: LeaseGrant) -> Result<bool, StoreError> {
        let keys: Vec<Vec<u8>> = shards.iter().map(|&shard| self.keys.shard(shard)).collect();
        let txn = Txn::new()
            .when(keys.iter().map(|key| Compare::absent(key.clone())))
            .and_then(
                keys.into_iter()
                    .map(|key| TxnOp::put_with_lease(key, self.host.id.clone(), lease.id)),
            );
        let result = self.store.txn(txn).await?;
        if result.succeeded {
            let mut state = self.state.lock().unwrap();
            if state.phase == Phase::Serving && state.lease.map(|current| current.id) == Some(lease.id) {
                for &shard in shards {
                    state
                        .held
                        .entry(shard)
                        .or_insert_with(|| Held::new(result.revision));
                }
            }
            crate::metrics::ClusterMetrics::global()
                .shards_taken
                .add(shards.len() as u64, &[]);
            tracing::debug!(host = %self.host.id, ?shards, "took shards");
        }
        Ok(result.succeeded)
    }

    fn acquire_failed(&self, lease: LeaseId, error: StoreError) -> bool {
        if let StoreError::LeaseNotFound(_) = error {
            self.lease_lost(lease, LeaseLoss::NotFound);
        } else {
            tracing::warn!(host = %self.host.id, %error, "cannot take shards; trying again");
        }
        false
    }

    /// Gives `shard` up: waits for its calls in flight (up to the drain timeout), then deletes
    /// its key if it is still on `lease`.
    async fn release(self: Arc<Self>, shard: u32, lease: LeaseId, slot: Arc<Slot>) {
        let deadline = Instant::now() + self.options.drain_timeout;
        if !slot.wait_idle(deadline).await {
            tracing::warn!(
                host = %self.host.id,
                shard,
                in_flight = slot.in_flight(),
                "giving a shard up with calls still in flight after the drain timeout; their writes will fail"
            );
        }
        let key = self.keys.shard(shard);
        loop {
            let txn = Txn::new()
                .when([Compare::lease_is(key.clone(), Some(lease))])
                .and_then([TxnOp::delete(key.clone())]);
            match self.store.txn(txn).await {
                Ok(result) => {
                    let mut state = self.state.lock().unwrap();
                    if state
                        .held
                        .get(&shard)
                        .is_some_and(|held| Arc::ptr_eq(&held.slot, &slot))
                    {
                        state.held.remove(&shard);
                    }
                    if result.succeeded {
                        state.released_at.insert(shard, result.revision);
                        crate::metrics::ClusterMetrics::global()
                            .shards_given_up
                            .add(1, &[]);
                        tracing::debug!(host = %self.host.id, shard, "gave a shard up");
                    }
                    return;
                }
                Err(error) => {
                    tracing::warn!(host = %self.host.id, shard, %error, "cannot give a shard up; trying again");
                    tokio::time::sleep(RETRY_AFTER).await;
                    let current = self.state.lock().unwrap().lease.map(|current| current.id);
                    if current != Some(lease) {
                        // The lease is gone, and the key with it.
                        return;
                    }
                }
            }
        }
    }
}

/// Spawns `task` into the membership's task set, unless the membership stopped. Takes the
/// locked state so a task cannot be added after [`Inner::stop`] aborted them all.
fn spawn_locked(state: &mut State, task: impl Future<Output = ()> + Send + 'static) {
    if state.phase == Phase::Stopped {
        return;
    }
    while state.tasks.try_join_next().is_some() {}
    state.tasks.spawn(task);
}
