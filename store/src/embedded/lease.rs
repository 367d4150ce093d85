//! Leases of the embedded store: the table of live leases and the task that expires them.
//!
//! Grants and revokes are durable (they are committed to the engine with their batch). Deadlines are not: they live in
//! memory on tokio's clock, so tests can drive them with `tokio::time::pause()`. After a restart,
//! every lease's countdown starts again from its full TTL. That is the choice etcd makes too when
//! a new leader takes over leases (it extends them), and the safe one: a lease never expires
//! early because the process was down, and the holder gets one TTL to come back and keep it alive.
//! Whoever relies on a lease for correctness checks its own `expiresAt` anyway.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use super::Request;
use crate::types::{LeaseId, LeaseStatus};

/// etcd's maximum lease TTL, in seconds.
pub(crate) const MAX_TTL: i64 = 9_000_000_000;

#[derive(Debug)]
struct Lease {
    ttl: i64,
    deadline: Instant,
    keys: BTreeSet<Vec<u8>>,
}

/// Live leases and their deadlines. Changed by the writer (grant, revoke, key attachment) and by
/// keep-alives (deadline only).
#[derive(Debug)]
pub(crate) struct LeaseTable {
    leases: HashMap<i64, Lease>,
    next_id: i64,
    /// Deadlines to look at, earliest first. An entry may be stale (the lease was kept alive or
    /// revoked); the expiry task checks the table before acting on it.
    deadlines: BinaryHeap<Reverse<(Instant, i64)>>,
    /// Wakes the expiry task when a deadline earlier than the ones it knows may exist.
    pub wake: Arc<Notify>,
}

impl LeaseTable {
    /// A table holding `leases` (id, TTL) recovered from disk, each restarting its countdown now.
    pub fn new(recovered: &[(i64, i64)], next_id: i64, now: Instant) -> Self {
        let mut table = LeaseTable {
            leases: HashMap::new(),
            next_id,
            deadlines: BinaryHeap::new(),
            wake: Arc::new(Notify::new()),
        };
        for &(id, ttl) in recovered {
            table.insert(id, ttl, now);
        }
        table
    }

    fn insert(&mut self, id: i64, ttl: i64, now: Instant) {
        let deadline = now + Duration::from_secs(ttl as u64);
        self.leases.insert(
            id,
            Lease {
                ttl,
                deadline,
                keys: BTreeSet::new(),
            },
        );
        self.next_id = self.next_id.max(id + 1);
        self.deadlines.push(Reverse((deadline, id)));
        self.wake.notify_one();
    }

    pub fn next_id(&self) -> i64 {
        self.next_id
    }

    pub fn grant(&mut self, ttl: i64, now: Instant) -> LeaseId {
        let id = self.next_id;
        self.insert(id, ttl, now);
        LeaseId(id)
    }

    pub fn exists(&self, lease: LeaseId) -> bool {
        self.leases.contains_key(&lease.0)
    }

    pub fn attach(&mut self, lease: i64, key: &[u8]) {
        if let Some(l) = self.leases.get_mut(&lease) {
            l.keys.insert(key.to_vec());
        }
    }

    pub fn detach(&mut self, lease: i64, key: &[u8]) {
        if let Some(l) = self.leases.get_mut(&lease) {
            l.keys.remove(key);
        }
    }

    /// Removes the lease; returns the keys that were attached, or `None` if it did not exist.
    pub fn remove(&mut self, lease: LeaseId) -> Option<BTreeSet<Vec<u8>>> {
        self.leases.remove(&lease.0).map(|l| l.keys)
    }

    /// Restarts the countdown; `None` when the lease does not exist or its time is up (as in
    /// etcd, a lease past its deadline cannot be revived even before it is revoked).
    pub fn keep_alive(&mut self, lease: LeaseId, now: Instant) -> Option<i64> {
        let l = self.leases.get_mut(&lease.0)?;
        if l.deadline <= now {
            return None;
        }
        l.deadline = now + Duration::from_secs(l.ttl as u64);
        Some(l.ttl)
    }

    pub fn status(&self, lease: LeaseId, now: Instant) -> Option<LeaseStatus> {
        let l = self.leases.get(&lease.0)?;
        if l.deadline <= now {
            return None;
        }
        let left = l.deadline - now;
        Some(LeaseStatus {
            id: lease,
            granted_ttl: l.ttl,
            remaining_ttl: left.as_secs() as i64 + i64::from(left.subsec_nanos() > 0),
            keys: l.keys.iter().cloned().collect(),
        })
    }

    /// The granted TTL of every lease whose time is not up at `now`, by lease id.
    pub fn live_ttls(&self, now: Instant) -> HashMap<i64, i64> {
        self.leases
            .iter()
            .filter(|(_, l)| l.deadline > now)
            .map(|(id, l)| (*id, l.ttl))
            .collect()
    }

    /// Whether the lease exists and its time is up.
    pub fn is_expired(&self, lease: LeaseId, now: Instant) -> bool {
        self.leases.get(&lease.0).is_some_and(|l| l.deadline <= now)
    }

    /// Pops the leases whose time is up; returns them and the next deadline to wake at.
    fn take_expired(&mut self, now: Instant) -> (Vec<LeaseId>, Option<Instant>) {
        let mut expired = Vec::new();
        while let Some(Reverse((deadline, id))) = self.deadlines.peek().copied() {
            if deadline > now {
                return (expired, Some(deadline));
            }
            self.deadlines.pop();
            match self.leases.get(&id) {
                Some(l) if l.deadline <= now => expired.push(LeaseId(id)),
                Some(l) => self.deadlines.push(Reverse((l.deadline, id))),
                None => {}
            }
        }
        (expired, None)
    }

    /// Puts a deadline back to look at (a lease the writer found kept alive after all).
    pub fn recheck(&mut self, lease: LeaseId) {
        if let Some(l) = self.leases.get(&lease.0) {
            self.deadlines.push(Reverse((l.deadline, lease.0)));
            self.wake.notify_one();
        }
    }
}

/// Sends an expiry request to the writer for each lease whose time is up. Holds the writer's
/// queue weakly, so it ends when the store does.
pub(crate) async fn expire_leases(table: Arc<Mutex<LeaseTable>>, requests: mpsc::WeakSender<Request>) {
    let wake = table.lock().unwrap().wake.clone();
    loop {
        let (expired, next) = table.lock().unwrap().take_expired(Instant::now());
        if !expired.is_empty() {
            let Some(requests) = requests.upgrade() else {
                return;
            };
            for lease in expired {
                if requests.send(Request::Expire(lease)).await.is_err() {
                    return;
                }
            }
            continue;
        }
        if requests.strong_count() == 0 {
            return;
        }
        match next {
            Some(deadline) => {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => {}
                    () = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}
