//! Leader election over one key: the scheduler's, so that one scheduler fires timers at a time.
//!
//! The leader's key is attached to its lease. A candidate puts the key only if it is absent;
//! the others watch it and try again when it is deleted (the leader resigned, or its lease
//! expired after a crash), and at least once every TTL.

use std::sync::Arc;
use std::time::Duration;

use agentprocess_store::{
    Compare, EventKind, KeyRange, KeyValue, LeaseGrant, LeaseId, Store, StoreError, Txn, TxnOp,
};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::lease;
use crate::task::AbortOnDrop;

/// How long to wait before trying a failed store call again.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// Campaigns for leadership; see [`Election::campaign`].
#[derive(Debug)]
pub struct Election;

impl Election {
    /// Campaigns for `key` as `candidate` until it wins. Keeps a lease of `ttl_seconds` alive
    /// meanwhile (a new one if it is lost), tries `compare absent(key) → put(key, candidate,
    /// lease)`, and when another candidate leads, watches the key and tries again once it is
    /// deleted, or after a TTL at the latest. Failures the store may recover from are retried;
    /// others end the campaign with the error. Cancel by dropping the future.
    pub async fn campaign(
        store: Arc<dyn Store>,
        key: Vec<u8>,
        candidate: String,
        ttl_seconds: i64,
    ) -> Result<Leadership, StoreError> {
        loop {
            let granted_at = Instant::now();
            let grant = match store.lease_grant(ttl_seconds).await {
                Ok(grant) => grant,
                Err(error) => {
                    retry_or_fail(error).await?;
                    continue;
                }
            };
            let (lost_sender, lost) = watch::channel(false);
            let keeper = {
                let (store, lost_sender) = (store.clone(), lost_sender.clone());
                AbortOnDrop::spawn(async move {
                    let loss = lease::keep_alive(store.as_ref(), grant, granted_at).await;
                    tracing::warn!(lease = %grant.id, reason = %loss, "an election lease was lost");
                    lost_sender.send_replace(true);
                })
            };
            let seat = Seat {
                store: store.clone(),
                key: key.clone(),
                candidate: candidate.clone(),
                lease: grant.id,
            };
            match seat.contend(&grant, lost.clone()).await {
                Ok(Some(won_at)) => {
                    tracing::info!(%candidate, lease = %grant.id, "won the election");
                    let watcher = AbortOnDrop::spawn(seat.clone().watch(won_at, lost_sender));
                    return Ok(Leadership {
                        seat,
                        lost,
                        _tasks: [keeper, watcher],
                    });
                }
                // The lease was lost while waiting: campaign again with a new one.
                Ok(None) => {}
                Err(error) => {
                    drop(keeper);
                    let _ = store.lease_revoke(grant.id).await;
                    return Err(error);
                }
            }
        }
    }
}

/// Won leadership. Holds the leader's lease alive until it is resigned or dropped; dropping it
/// without [`Leadership::resign`] is what a crash looks like: the key goes when the lease
/// expires.
#[derive(Debug)]
pub struct Leadership {
    seat: Seat,
    lost: watch::Receiver<bool>,
    /// The lease keep-alive and the watch on the key.
    _tasks: [AbortOnDrop; 2],
}

impl Leadership {
    pub fn candidate(&self) -> &str {
        &self.seat.candidate
    }

    /// The lease the key is attached to.
    pub fn lease(&self) -> LeaseId {
        self.seat.lease
    }

    /// The compare a leader's writes can add to their transaction: the key still names this
    /// leadership's lease.
    pub fn fence(&self) -> Compare {
        Compare::lease_is(self.seat.key.clone(), Some(self.seat.lease))
    }

    /// Whether leadership is known to be lost.
    pub fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }

    /// Completes when leadership is lost: the lease was lost, or the key was deleted or no
    /// longer names this candidate and lease. A leader stops acting as one at once.
    pub async fn lost(&self) {
        let mut lost = self.lost.clone();
        // An error means every task that could tell is gone: nothing keeps the lease any more.
        let _ = lost.wait_for(|lost| *lost).await;
    }

    /// A receiver that turns `true` when leadership is lost, for use in `select!`.
    pub fn lost_receiver(&self) -> watch::Receiver<bool> {
        self.lost.clone()
    }

    /// Gives leadership up: deletes the key if it is still on this lease and revokes the
    /// lease, so another candidate can win at once.
    pub async fn resign(self) -> Result<(), StoreError> {
        let Leadership {
            seat,
            lost: _,
            _tasks,
        } = self;
        drop(_tasks);
        let txn = Txn::new()
            .when([Compare::lease_is(seat.key.clone(), Some(seat.lease))])
            .and_then([TxnOp::delete(seat.key.clone())]);
        seat.store.txn(txn).await?;
        match seat.store.lease_revoke(seat.lease).await {
            Ok(()) | Err(StoreError::LeaseNotFound(_)) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Stops keeping the lease alive and watching the key, without resigning: what a crash
    /// looks like to the other candidates, who win once the lease expires.
    pub fn shutdown(self) {}
}

/// One candidate's claim on the key under one lease.
#[derive(Debug, Clone)]
struct Seat {
    store: Arc<dyn Store>,
    key: Vec<u8>,
    candidate: String,
    lease: LeaseId,
}

impl Seat {
    /// Whether `kv` is this seat's key: this candidate, this lease.
    fn is_ours(&self, kv: &KeyValue) -> bool {
        kv.lease == Some(self.lease) && kv.value == self.candidate.as_bytes()
    }

    /// Tries for the key until it is won (`Some(revision of the win)`) or the lease is lost
    /// (`None`).
    async fn contend(
        &self,
        grant: &LeaseGrant,
        mut lost: watch::Receiver<bool>,
    ) -> Result<Option<i64>, StoreError> {
        let ttl = lease::ttl(grant);
        loop {
            if *lost.borrow() {
                return Ok(None);
            }
            let txn = Txn::new()
                .when([Compare::absent(self.key.clone())])
                .and_then([TxnOp::put_with_lease(
                    self.key.clone(),
                    self.candidate.clone(),
                    self.lease,
                )]);
            let revision = match self.store.txn(txn).await {
                Ok(result) if result.succeeded => return Ok(Some(result.revision)),
                Ok(result) => result.revision,
                Err(StoreError::LeaseNotFound(_)) => return Ok(None),
                Err(error) => {
                    retry_or_fail(error).await?;
                    continue;
                }
            };
            // Someone else leads: wait for the key to go (or a TTL, or our lease to go).
            let mut events = match self
                .store
                .watch(KeyRange::single(self.key.clone()), Some(revision + 1))
                .await
            {
                Ok(events) => events,
                Err(error) => {
                    retry_or_fail(error).await?;
                    continue;
                }
            };
            let vacant = async {
                loop {
                    match events.next().await {
                        Some(Ok(event)) if event.kind == EventKind::Delete => return,
                        Some(Ok(_)) => {}
                        Some(Err(_)) | None => return,
                    }
                }
            };
            tokio::select! {
                () = vacant => {}
                () = tokio::time::sleep(ttl) => {}
                _ = lost.wait_for(|lost| *lost) => {}
            }
        }
    }

    /// Watches the key from the win on, and reports leadership lost when it is deleted or
    /// names someone else. A watch that ends is replaced after a read of the key.
    async fn watch(self, won_at: i64, lost: watch::Sender<bool>) {
        let mut seen = won_at;
        loop {
            match self
                .store
                .watch(KeyRange::single(self.key.clone()), Some(seen + 1))
                .await
            {
                Ok(mut events) => {
                    while let Some(Ok(event)) = events.next().await {
                        if event.kind == EventKind::Delete || !self.is_ours(&event.kv) {
                            self.report_lost(&lost, "the leader's key was deleted or taken over");
                            return;
                        }
                        seen = event.kv.mod_revision;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot watch the leader's key; reading it instead");
                    tokio::time::sleep(RETRY_AFTER).await;
                }
            }
            match self.store.get(&self.key).await {
                Ok((kv, revision)) => {
                    if !kv.is_some_and(|kv| self.is_ours(&kv)) {
                        self.report_lost(&lost, "the leader's key was deleted or taken over");
                        return;
                    }
                    seen = revision;
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot read the leader's key; trying again");
                    tokio::time::sleep(RETRY_AFTER).await;
                }
            }
        }
    }

    fn report_lost(&self, lost: &watch::Sender<bool>, why: &str) {
        tracing::warn!(candidate = %self.candidate, lease = %self.lease, "{why}: leadership lost");
        lost.send_replace(true);
    }
}

/// After a failure worth retrying (the store was unreachable), pauses and returns `Ok`; any
/// other error ends the campaign.
async fn retry_or_fail(error: StoreError) -> Result<(), StoreError> {
    match error {
        StoreError::Unavailable { .. } => {
            tracing::warn!(%error, "the election cannot reach the store; trying again");
            tokio::time::sleep(RETRY_AFTER).await;
            Ok(())
        }
        error => Err(error),
    }
}
