//! Group commit: the small transactions of many independent runs merged into one store
//! transaction, so that one round trip (one raft commit on etcd) carries many writes.
//!
//! A transaction that only compares, puts and deletes single keys (every run write is one) waits
//! in a queue; a committer takes as many as fit in one request (etcd's 128 operations and a
//! byte budget, no key written by two of them) and sends them as one transaction whose compares
//! are all of theirs. Batches grow with the load: with none in flight the first transaction goes
//! at once; with `n` in flight the next batch goes once `2^n` transactions wait (or one of those
//! in flight comes back), so a busy store gets fewer, fuller transactions. When it succeeds, each gets its own share of the answer. When a compare
//! fails, nothing was written and nobody knows whose it was, so each is sent again alone and
//! gets its own answer: a merged batch never changes the outcome of any transaction in it. A
//! failure of the store reaches every transaction of the batch, as it would have alone (the
//! write may or may not have happened). Anything else — reads, `otherwise` branches, range
//! deletes, and transactions too big to share a request — goes straight to the store.
//!
//! Optionally bounded: past `max_pending` requests in flight or queued, a read or transaction
//! is not sent and fails at once with `StoreError::Overloaded`, rather than wait in a queue.

use crate::error::StoreError;
use crate::limits::{Limits, request_bytes};
use crate::metrics::StoreMetrics;
use crate::store::Store;
use crate::types::{
    KeyRange, KeyValue, LeaseGrant, LeaseId, LeaseStatus, RangeRequest, RangeResult, Txn, TxnOp, TxnResult,
    WatchStream,
};
use async_trait::async_trait;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

/// How transactions are grouped.
#[derive(Debug, Clone, Copy)]
pub struct GroupCommitOptions {
    /// Most compares, and most operations, in one merged transaction (etcd's `--max-txn-ops`).
    pub max_ops: usize,
    /// Most bytes of keys and values in one merged transaction; well under etcd's 1.5 MiB.
    pub max_bytes: usize,
    /// Merged transactions in flight at once. More than one keeps the store busy while the
    /// next batch fills, without putting writes of one run in two batches at once (a run's
    /// actor waits for each of its commits).
    pub max_in_flight: usize,
    /// Whether a batch waits to grow while others are in flight (`2^n` waiting with `n` in
    /// flight); without it every batch goes as soon as one of `max_in_flight` is free.
    pub grow: bool,
    /// Most requests (transactions and reads) this client has in flight or queued at once; past
    /// it a request is not sent and fails at once with [`StoreError::Overloaded`]. 0: no bound.
    pub max_pending: usize,
    /// The name the refusal gives that bound: the setting an operator changes.
    pub max_pending_setting: &'static str,
}

/// How long a request refused past [`GroupCommitOptions::max_pending`] is told to wait.
pub const OVERLOADED_RETRY_AFTER_MS: u64 = 100;

impl Default for GroupCommitOptions {
    fn default() -> Self {
        GroupCommitOptions {
            max_ops: Limits::ETCD_DEFAULTS.max_txn_ops,
            max_bytes: 1 << 20,
            max_in_flight: 2,
            grow: true,
            max_pending: 0,
            max_pending_setting: "max_pending",
        }
    }
}

/// A transaction waiting in the queue, and where its answer goes.
#[derive(Debug)]
struct Queued {
    txn: Txn,
    reply: oneshot::Sender<Result<TxnResult, StoreError>>,
}

/// A [`Store`] that merges the writes of independent callers into shared transactions. Every
/// other call goes straight to the store underneath. Must be created inside a tokio runtime.
#[derive(Debug)]
pub struct GroupCommit {
    inner: Arc<dyn Store>,
    options: GroupCommitOptions,
    queue: mpsc::UnboundedSender<Queued>,
    /// Requests in flight or queued now, against [`GroupCommitOptions::max_pending`].
    pending: AtomicUsize,
}

/// One request counted against [`GroupCommitOptions::max_pending`] until it is answered.
struct Pending<'a>(Option<&'a AtomicUsize>);

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if let Some(pending) = self.0 {
            pending.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl GroupCommit {
    pub fn new(inner: Arc<dyn Store>, options: GroupCommitOptions) -> GroupCommit {
        let (queue, receiver) = mpsc::unbounded_channel();
        tokio::spawn(commit_loop(inner.clone(), options, receiver));
        GroupCommit {
            inner,
            options,
            queue,
            pending: AtomicUsize::new(0),
        }
    }

    /// Counts one more request, or refuses it when the bound is reached.
    fn admit(&self) -> Result<Pending<'_>, StoreError> {
        let bound = self.options.max_pending;
        if bound == 0 {
            return Ok(Pending(None));
        }
        if self.pending.fetch_add(1, Ordering::AcqRel) >= bound {
            self.pending.fetch_sub(1, Ordering::AcqRel);
            return Err(StoreError::Overloaded {
                limit: self.options.max_pending_setting.to_owned(),
                retry_after_ms: OVERLOADED_RETRY_AFTER_MS,
            });
        }
        Ok(Pending(Some(&self.pending)))
    }

    /// Whether `txn` can share a transaction: compares, puts and single-key deletes only, small
    /// enough to leave room for others.
    fn mergeable(&self, txn: &Txn) -> bool {
        txn.otherwise.is_empty()
            && txn.then.len() <= self.options.max_ops / 2
            && txn.compares.len() <= self.options.max_ops / 2
            && txn.then.iter().all(|op| match op {
                TxnOp::Put { .. } => true,
                TxnOp::Delete { range } => single_key(range).is_some(),
                TxnOp::Range(_) => false,
            })
            && request_bytes(txn) <= self.options.max_bytes / 2
    }
}

/// The key a range names when it names exactly one (`[k, k\0)`).
fn single_key(range: &KeyRange) -> Option<&[u8]> {
    let end = range.end.as_ref()?;
    (end.len() == range.start.len() + 1 && end.starts_with(&range.start) && end.last() == Some(&0))
        .then_some(range.start.as_slice())
}

/// The keys a mergeable transaction writes.
fn written_keys(txn: &Txn) -> impl Iterator<Item = &[u8]> {
    txn.then.iter().filter_map(|op| match op {
        TxnOp::Put { key, .. } => Some(key.as_slice()),
        TxnOp::Delete { range } => single_key(range),
        TxnOp::Range(_) => None,
    })
}

async fn commit_loop(
    store: Arc<dyn Store>,
    options: GroupCommitOptions,
    mut receiver: mpsc::UnboundedReceiver<Queued>,
) {
    let max_in_flight = options.max_in_flight.max(1);
    let mut waiting: VecDeque<Queued> = VecDeque::new();
    let mut in_flight = JoinSet::new();
    let mut open = true;
    loop {
        while let Ok(queued) = receiver.try_recv() {
            waiting.push_back(queued);
        }
        while !waiting.is_empty()
            && in_flight.len() < max_in_flight
            && waiting.len() >= batch_to_send(&options, in_flight.len())
        {
            let batch = Batch::take(&mut waiting, &options);
            in_flight.spawn(batch.commit(store.clone()));
        }
        if !open && waiting.is_empty() && in_flight.is_empty() {
            return;
        }
        tokio::select! {
            received = receiver.recv(), if open => match received {
                Some(queued) => waiting.push_back(queued),
                None => open = false,
            },
            Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
        }
    }
}

/// How many transactions must wait before a batch goes with `in_flight` batches in flight: one
/// when none is (a lone write never waits), else `2^in_flight` when batches grow.
fn batch_to_send(options: &GroupCommitOptions, in_flight: usize) -> usize {
    if options.grow { 1 << in_flight.min(16) } else { 1 }
}

/// Transactions that go to the store together.
#[derive(Debug, Default)]
struct Batch {
    members: Vec<Queued>,
    compares: usize,
    ops: usize,
    bytes: usize,
    written: HashSet<Vec<u8>>,
}

impl Batch {
    /// The transactions at the front of `waiting` that fit one request together; the first that
    /// does not stays at the front, to start the next batch.
    fn take(waiting: &mut VecDeque<Queued>, options: &GroupCommitOptions) -> Batch {
        let mut batch = Batch::default();
        batch.add(waiting.pop_front().expect("a transaction waits"));
        while let Some(next) = waiting.front() {
            if !batch.fits(&next.txn, options) {
                break;
            }
            batch.add(waiting.pop_front().expect("looked at"));
        }
        batch
    }

    fn fits(&self, txn: &Txn, options: &GroupCommitOptions) -> bool {
        self.compares + txn.compares.len() <= options.max_ops
            && self.ops + txn.then.len() <= options.max_ops
            && self.bytes + request_bytes(txn) <= options.max_bytes
            && written_keys(txn).all(|key| !self.written.contains(key))
    }

    fn add(&mut self, queued: Queued) {
        self.compares += queued.txn.compares.len();
        self.ops += queued.txn.then.len();
        self.bytes += request_bytes(&queued.txn);
        self.written.extend(written_keys(&queued.txn).map(<[u8]>::to_vec));
        self.members.push(queued);
    }

    /// Commits the batch as one transaction, measured: its size and how long it took.
    async fn commit(self, store: Arc<dyn Store>) {
        let started = std::time::Instant::now();
        let transactions = self.members.len();
        self.commit_merged(store).await;
        StoreMetrics::global().record_commit("etcd", transactions, started.elapsed());
    }

    async fn commit_merged(self, store: Arc<dyn Store>) {
        if self.members.len() == 1 {
            let queued = self.members.into_iter().next().expect("one member");
            let _ = queued.reply.send(store.txn(queued.txn).await);
            return;
        }
        let mut merged = Txn::new();
        for queued in &self.members {
            merged.compares.extend(queued.txn.compares.iter().cloned());
            merged.then.extend(queued.txn.then.iter().cloned());
        }
        match store.txn(merged).await {
            Ok(result) if result.succeeded => {
                let mut results = result.results.into_iter();
                for queued in self.members {
                    let share = results.by_ref().take(queued.txn.then.len()).collect();
                    let _ = queued.reply.send(Ok(TxnResult {
                        succeeded: true,
                        revision: result.revision,
                        results: share,
                    }));
                }
            }
            // A compare failed, or the batch broke a rule none of its members breaks alone:
            // nothing was written; each goes again by itself and gets its own answer.
            Ok(_) | Err(StoreError::TooLarge(_) | StoreError::InvalidRequest(_)) => {
                let mut alone = JoinSet::new();
                for queued in self.members {
                    let store = store.clone();
                    alone.spawn(async move {
                        let _ = queued.reply.send(store.txn(queued.txn).await);
                    });
                }
                while alone.join_next().await.is_some() {}
            }
            Err(error) => {
                for queued in self.members {
                    let _ = queued.reply.send(Err(error.clone()));
                }
            }
        }
    }
}

#[async_trait]
impl Store for GroupCommit {
    async fn get(&self, key: &[u8]) -> Result<(Option<KeyValue>, i64), StoreError> {
        let _pending = self.admit()?;
        self.inner.get(key).await
    }

    async fn range(&self, request: RangeRequest) -> Result<RangeResult, StoreError> {
        let _pending = self.admit()?;
        self.inner.range(request).await
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError> {
        let _pending = self.admit()?;
        if !self.mergeable(&txn) {
            return self.inner.txn(txn).await;
        }
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Queued { txn, reply })
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    async fn lease_grant(&self, ttl: i64) -> Result<LeaseGrant, StoreError> {
        self.inner.lease_grant(ttl).await
    }

    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64, StoreError> {
        self.inner.lease_keep_alive(lease).await
    }

    async fn lease_revoke(&self, lease: LeaseId) -> Result<(), StoreError> {
        self.inner.lease_revoke(lease).await
    }

    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<LeaseStatus>, StoreError> {
        self.inner.lease_time_to_live(lease).await
    }

    async fn watch(&self, range: KeyRange, start_revision: Option<i64>) -> Result<WatchStream, StoreError> {
        self.inner.watch(range, start_revision).await
    }
}
