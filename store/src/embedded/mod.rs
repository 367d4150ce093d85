//! `EmbeddedStore`: the [`Store`] interface in one process, durable on local disk.
//!
//! The whole key space lives in memory in a persistent B-tree; durability comes from an
//! append-only log with group commit, and a snapshot written when the log grows (see [`wal`]).
//!
//! Writes (transactions that may write, lease grants and revokes, lease expiry) go through ONE
//! writer task. It takes every request queued, applies them in order to an overlay over the
//! durable map, appends their log records in one write, syncs the log once, then makes the batch
//! visible to readers and acknowledges it. A write acknowledged is a write that survives `kill -9`.
//! The writer is pipelined one batch deep: while one batch's log write is being synced, it applies
//! the next batch on top of it, so applying and syncing overlap. Reads never wait for the writer:
//! they read the durable map under a short read lock, and never see a write before it is synced.
//!
//! Leases and watches are emulated in process ([`lease`], [`watch`]).

mod apply;
mod lease;
mod wal;
mod watch;

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use self::apply::{Applied, Limits, Overlay, View, key_value, read_only_txn};
use self::lease::LeaseTable;
use self::wal::{Change, KeyMap};
use self::watch::{History, HistoryEvent};
use crate::error::StoreError;
use crate::store::Store;
use crate::types::{
    KeyRange, KeyValue, LeaseGrant, LeaseId, LeaseStatus, RangeRequest, RangeResult, Txn, TxnResult,
    WatchStream,
};

/// Tuning of an [`EmbeddedStore`]. The defaults suit a single machine.
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    /// Write a snapshot and start a new log once the log is larger than this and than the last
    /// snapshot.
    pub compact_after_bytes: u64,
    /// How many bytes of recent events to keep for watchers that lag or start in the past.
    pub watch_history_bytes: usize,
    /// Most operations in one transaction branch (etcd's `--max-txn-ops` default).
    pub max_txn_ops: usize,
    /// Largest transaction in bytes of keys and values (etcd's `--max-request-bytes` default).
    pub max_request_bytes: usize,
    /// Most requests applied and synced together.
    pub max_batch: usize,
    /// A batch stops taking requests once its log records reach this size; the rest wait for
    /// the next batch. Bounds the memory and the latency of one sync under large writes.
    pub max_batch_bytes: usize,
    /// Capacity of each watch's channel before its feeding task waits.
    pub watch_channel: usize,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        EmbeddedOptions {
            compact_after_bytes: 64 << 20,
            watch_history_bytes: 64 << 20,
            max_txn_ops: 128,
            max_request_bytes: 1_572_864,
            max_batch: 4096,
            max_batch_bytes: 8 << 20,
            watch_channel: 1024,
        }
    }
}

/// What opening the store found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The store revision after recovery.
    pub revision: i64,
    pub keys: usize,
    pub leases: usize,
    /// Log records replayed on top of the snapshot.
    pub replayed_records: usize,
    /// Bytes cut off the end of the log: a record torn by a crash, never acknowledged.
    pub truncated_bytes: u64,
}

/// The durable key-value state that readers see.
#[derive(Debug)]
struct Durable {
    kvs: KeyMap,
    revision: i64,
}

/// The nice value of the thread that writes snapshots (commits run at the process's own).
const SNAPSHOT_NICE: i32 = 10;

/// State shared by the handles, the writer and the watch tasks.
#[derive(Debug)]
struct Shared {
    durable: RwLock<Durable>,
    leases: Arc<Mutex<LeaseTable>>,
    history: Arc<Mutex<History>>,
    /// The last committed revision, announced to watchers. Its sender belongs to the writer, so
    /// it closes when the store does.
    committed: tokio::sync::watch::Receiver<i64>,
    limits: Limits,
    watch_channel: usize,
    stats: Counters,
    /// Set by the writer at its first failed write or sync: every later write fails.
    writes_failed: AtomicBool,
    /// Tests set this to make log writes fail.
    #[cfg(test)]
    fail_writes: AtomicBool,
}

/// Counters the writer keeps, read through [`EmbeddedStore::stats`].
#[derive(Debug, Default)]
struct Counters {
    syncs: AtomicU64,
    records: AtomicU64,
    log_bytes: AtomicU64,
    compactions: AtomicU64,
}

/// What the writer has done since the store was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbeddedStats {
    /// Log syncs: one per batch that wrote anything.
    pub syncs: u64,
    /// Log records written (one per transaction that changed something, lease grant or revoke).
    pub records: u64,
    pub log_bytes: u64,
    /// Snapshots started.
    pub compactions: u64,
}

/// A request to the writer task.
#[derive(Debug)]
pub(crate) enum Request {
    Txn(Txn, oneshot::Sender<Result<TxnResult, StoreError>>),
    Grant(i64, oneshot::Sender<Result<LeaseGrant, StoreError>>),
    Revoke(LeaseId, oneshot::Sender<Result<(), StoreError>>),
    /// From the expiry task: the lease's time is up (the writer checks again).
    Expire(LeaseId),
    Close(oneshot::Sender<()>),
}

/// The embedded store. Cheap to clone; every clone is the same store.
///
/// Open it with [`EmbeddedStore::open`] inside a tokio runtime. The store's directory is locked
/// while it is open; [`EmbeddedStore::close`] (or dropping every handle) releases it.
///
/// On disk, the directory holds `LOCK` (an exclusive `flock` while open), `snapshot` (the whole
/// state at the start of the current log generation; absent until the first compaction) and
/// `wal-<generation>.log` (checksummed records of every change since). When the log outgrows
/// [`EmbeddedOptions::compact_after_bytes`] and the last snapshot, the writer starts a new log
/// generation, writes a snapshot of the state at that point in the background and then deletes
/// the old log: the log is "truncated" by replacing it, never rewritten in place.
///
/// Semantics are etcd's, with these differences: there is no history of old revisions to read
/// (only recent watch events are kept, see [`EmbeddedOptions::watch_history_bytes`]); after a
/// restart, watches can start at the recovered revision + 1 at the earliest; and a lease's
/// countdown restarts from its full TTL when the store reopens.
#[derive(Debug, Clone)]
pub struct EmbeddedStore {
    shared: Arc<Shared>,
    requests: mpsc::Sender<Request>,
    dir: Option<Arc<PathBuf>>,
}

impl EmbeddedStore {
    /// Opens (creating if needed) the store in `dir`: loads the snapshot, replays the log,
    /// truncates a torn last record, and starts the writer and lease expiry tasks.
    pub async fn open(
        dir: impl AsRef<Path>,
        options: EmbeddedOptions,
    ) -> Result<(EmbeddedStore, RecoveryReport), StoreError> {
        let dir = dir.as_ref().to_path_buf();
        let (lock, recovered, wal) = {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || {
                std::fs::create_dir_all(&dir)
                    .map_err(|e| StoreError::io("creating the store directory", e))?;
                let lock = lock_dir(&dir)?;
                let recovered = wal::recover(&dir)?;
                let file = wal::open_wal(&dir, recovered.generation)?;
                Ok::<_, StoreError>((lock, recovered, file))
            })
            .await
            .map_err(|e| StoreError::io("opening the store", std::io::Error::other(e)))??
        };

        let mut snapshot = recovered.snapshot;
        let mut leases: BTreeMap<i64, i64> = snapshot.leases.iter().copied().collect();
        let mut next_lease_id = snapshot.next_lease_id;
        let mut revision = snapshot.revision;
        for entry in &recovered.entries {
            if entry.revision < revision {
                return Err(StoreError::Corrupt(format!(
                    "log revision {} after revision {revision}",
                    entry.revision
                )));
            }
            revision = entry.revision;
            for change in &entry.changes {
                match change {
                    Change::Put { key, kv } => {
                        snapshot.kvs.insert(key.clone(), kv.clone());
                    }
                    Change::Delete { key } => {
                        snapshot.kvs.remove(key);
                    }
                    Change::LeaseGrant { id, ttl } => {
                        leases.insert(*id, *ttl);
                        next_lease_id = next_lease_id.max(id + 1);
                    }
                    Change::LeaseRevoke { id } => {
                        leases.remove(id);
                    }
                }
            }
        }
        let leases: Vec<(i64, i64)> = leases.into_iter().collect();
        let mut table = LeaseTable::new(&leases, next_lease_id, Instant::now());
        for (key, kv) in &snapshot.kvs {
            table.attach(kv.lease, key);
        }
        let report = RecoveryReport {
            revision,
            keys: snapshot.kvs.len(),
            leases: leases.len(),
            replayed_records: recovered.entries.len(),
            truncated_bytes: recovered.truncated_bytes,
        };

        // A fresh store has no events to miss; a reopened one has lost those up to now.
        let compacted = if recovered.wal_len == 0 && recovered.snapshot_bytes == 0 {
            0
        } else {
            revision
        };
        let disk = Disk {
            dir,
            wal: Some(wal),
            wal_len: recovered.wal_len,
            generation: recovered.generation,
            snapshot_bytes: recovered.snapshot_bytes,
            compaction: None,
            _lock: lock,
        };
        let store = EmbeddedStore::start(snapshot.kvs, revision, compacted, table, Some(disk), options);
        Ok((store, report))
    }

    /// A store that keeps everything in memory and nothing on disk: same semantics, nothing
    /// survives it. For tests of the code above the store. Must be called inside a tokio runtime.
    pub fn in_memory(options: EmbeddedOptions) -> EmbeddedStore {
        let table = LeaseTable::new(&[], 1, Instant::now());
        EmbeddedStore::start(KeyMap::new(), 1, 0, table, None, options)
    }

    fn start(
        kvs: KeyMap,
        revision: i64,
        compacted: i64,
        leases: LeaseTable,
        disk: Option<Disk>,
        options: EmbeddedOptions,
    ) -> EmbeddedStore {
        let (committed_tx, committed) = tokio::sync::watch::channel(revision);
        let shared = Arc::new(Shared {
            durable: RwLock::new(Durable { kvs, revision }),
            leases: Arc::new(Mutex::new(leases)),
            history: Arc::new(Mutex::new(History::new(options.watch_history_bytes, compacted))),
            committed,
            limits: Limits {
                max_txn_ops: options.max_txn_ops,
                max_request_bytes: options.max_request_bytes,
            },
            watch_channel: options.watch_channel.max(1),
            stats: Counters::default(),
            writes_failed: AtomicBool::new(false),
            #[cfg(test)]
            fail_writes: AtomicBool::new(false),
        });
        let dir = disk.as_ref().map(|d| Arc::new(d.dir.clone()));
        let (requests, receiver) = mpsc::channel(options.max_batch.max(1) * 2);
        let writer = Writer {
            shared: shared.clone(),
            disk,
            committed: committed_tx,
            options,
            failed: None,
        };
        tokio::spawn(writer.run(receiver));
        tokio::spawn(lease::expire_leases(shared.leases.clone(), requests.downgrade()));
        EmbeddedStore {
            shared,
            requests,
            dir,
        }
    }

    /// The directory the store lives in (`None` for a store in memory).
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref().map(PathBuf::as_path)
    }

    /// What the writer has done since the store was opened.
    pub fn stats(&self) -> EmbeddedStats {
        let c = &self.shared.stats;
        EmbeddedStats {
            syncs: c.syncs.load(Ordering::Relaxed),
            records: c.records.load(Ordering::Relaxed),
            log_bytes: c.log_bytes.load(Ordering::Relaxed),
            compactions: c.compactions.load(Ordering::Relaxed),
        }
    }

    /// Whether the store takes writes: it was not closed, and no write or sync has failed (after
    /// one, every write fails until the store is opened again).
    pub fn is_open(&self) -> bool {
        !self.requests.is_closed() && !self.shared.writes_failed.load(Ordering::Relaxed)
    }

    /// Stops the writer after the requests already queued and releases the directory lock.
    /// Every handle fails with [`StoreError::Closed`] afterwards; watches end.
    pub async fn close(&self) {
        let (done, wait) = oneshot::channel();
        if self.requests.send(Request::Close(done)).await.is_ok() {
            let _ = wait.await;
        }
    }

    async fn call<T>(
        &self,
        request: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> Request,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(request(reply))
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    fn check_open(&self) -> Result<(), StoreError> {
        if self.requests.is_closed() {
            Err(StoreError::Closed)
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl Store for EmbeddedStore {
    async fn get(&self, key: &[u8]) -> Result<(Option<KeyValue>, i64), StoreError> {
        self.check_open()?;
        let durable = self.shared.durable.read().unwrap();
        let kv = durable.kvs.get(key).map(|kv| key_value(key, kv));
        Ok((kv, durable.revision))
    }

    async fn range(&self, request: RangeRequest) -> Result<RangeResult, StoreError> {
        self.check_open()?;
        let durable = self.shared.durable.read().unwrap();
        Ok(View::new(&durable.kvs, durable.revision).range_result(&request, durable.revision))
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError> {
        if txn.writes() {
            return self.call(|reply| Request::Txn(txn, reply)).await;
        }
        self.check_open()?;
        let durable = self.shared.durable.read().unwrap();
        read_only_txn(&durable.kvs, durable.revision, txn, self.shared.limits)
    }

    async fn lease_grant(&self, ttl: i64) -> Result<LeaseGrant, StoreError> {
        if ttl > lease::MAX_TTL {
            return Err(StoreError::InvalidRequest(format!(
                "lease TTL {ttl} is above the maximum of {}",
                lease::MAX_TTL
            )));
        }
        self.call(|reply| Request::Grant(ttl.max(1), reply)).await
    }

    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64, StoreError> {
        self.check_open()?;
        let mut table = self.shared.leases.lock().unwrap();
        table
            .keep_alive(lease, Instant::now())
            .ok_or(StoreError::LeaseNotFound(lease))
    }

    async fn lease_revoke(&self, lease: LeaseId) -> Result<(), StoreError> {
        self.call(|reply| Request::Revoke(lease, reply)).await
    }

    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<LeaseStatus>, StoreError> {
        self.check_open()?;
        Ok(self.shared.leases.lock().unwrap().status(lease, Instant::now()))
    }

    async fn watch(&self, range: KeyRange, start_revision: Option<i64>) -> Result<WatchStream, StoreError> {
        self.check_open()?;
        let cursor = match start_revision {
            Some(revision) => revision.max(1),
            None => self.shared.durable.read().unwrap().revision + 1,
        };
        let compacted = self.shared.history.lock().unwrap().compacted();
        if cursor <= compacted {
            return Err(StoreError::Compacted {
                compact_revision: compacted,
            });
        }
        let (sender, receiver) = mpsc::channel(self.shared.watch_channel);
        tokio::spawn(watch::pump(
            self.shared.history.clone(),
            self.shared.committed.clone(),
            range,
            cursor,
            sender,
        ));
        Ok(WatchStream::from_channel(receiver))
    }
}

/// Takes the directory's lock file, or fails with [`StoreError::Locked`].
fn lock_dir(dir: &Path) -> Result<File, StoreError> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(wal::LOCK_FILE))
        .map_err(|e| StoreError::io("opening the lock file", e))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(file),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(StoreError::Locked(dir.to_path_buf())),
        Err(e) => Err(StoreError::io("locking the store directory", e.into())),
    }
}

/// A request's answer, sent once its batch is durable.
enum Reply {
    Txn(
        oneshot::Sender<Result<TxnResult, StoreError>>,
        Result<TxnResult, StoreError>,
    ),
    Grant(
        oneshot::Sender<Result<LeaseGrant, StoreError>>,
        Result<LeaseGrant, StoreError>,
    ),
    Revoke(oneshot::Sender<Result<(), StoreError>>, Result<(), StoreError>),
}

impl Reply {
    fn send(self, failure: Option<&StoreError>) {
        match self {
            Reply::Txn(to, answer) => {
                let _ = to.send(failure.map_or(answer, |e| Err(e.clone())));
            }
            Reply::Grant(to, answer) => {
                let _ = to.send(failure.map_or(answer, |e| Err(e.clone())));
            }
            Reply::Revoke(to, answer) => {
                let _ = to.send(failure.map_or(answer, |e| Err(e.clone())));
            }
        }
    }
}

/// The single writer: owns the log, applies and syncs batches, compacts.
struct Writer {
    shared: Arc<Shared>,
    /// `None` for a store in memory.
    disk: Option<Disk>,
    committed: tokio::sync::watch::Sender<i64>,
    options: EmbeddedOptions,
    /// Set by the first failed write or sync; every later write fails with it.
    failed: Option<StoreError>,
}

/// The files of a store on disk, owned by its writer.
struct Disk {
    dir: PathBuf,
    /// `None` only while a blocking write holds it.
    wal: Option<File>,
    wal_len: u64,
    generation: u64,
    snapshot_bytes: u64,
    /// The snapshot being written in the background, if any.
    compaction: Option<oneshot::Receiver<Result<u64, StoreError>>>,
    /// Held while the writer runs; dropping it releases the directory.
    _lock: File,
}

/// A batch applied in memory, waiting for (or without need of) its log write.
struct Pending {
    overlay: Overlay,
    revision: i64,
    /// Events per revision, for watchers.
    published: Vec<(i64, Vec<HistoryEvent>)>,
    /// Lease grants (`Some(ttl)`) and revokes (`None`), for the durable lease view.
    lease_changes: Vec<(i64, Option<i64>)>,
    replies: Vec<Reply>,
    log: Vec<u8>,
}

/// A batch whose log write and sync is running.
struct InFlight {
    pending: Pending,
    write: tokio::task::JoinHandle<(File, Result<(), StoreError>)>,
    len: u64,
}

/// How a log write ended: the file back, and the outcome.
type Written = Result<(File, Result<(), StoreError>), tokio::task::JoinError>;

impl Writer {
    /// The writer loop, pipelined one batch deep: while batch N's log write is being synced,
    /// the writer keeps receiving requests and applying them, as batch N+1, on top of N's
    /// pending changes. Once N is synced, made visible and acknowledged, N+1 takes what else is
    /// queued and is written in turn. If N's write fails, N+1 fails with it.
    async fn run(mut self, mut receiver: mpsc::Receiver<Request>) {
        let max_batch = self.options.max_batch.max(1);
        let mut batch = Vec::with_capacity(max_batch);
        let mut closing = Vec::new();
        let mut in_flight: Option<InFlight> = None;
        let mut open = true;
        loop {
            let stopping = !open || !closing.is_empty();
            if stopping {
                // Requests after a close are dropped: their callers see `Closed`.
                batch.clear();
            }
            if batch.is_empty() && in_flight.is_none() {
                if stopping {
                    break;
                }
                open = receiver.recv_many(&mut batch, max_batch).await > 0;
                continue;
            }

            let mut next = None;
            self.apply(&mut next, &mut batch, &mut closing, in_flight.as_ref());
            while let Some(flight) = in_flight.as_mut() {
                let full = next
                    .as_ref()
                    .is_some_and(|n: &Pending| n.log.len() >= self.options.max_batch_bytes);
                let receiving = open && closing.is_empty() && !full;
                tokio::select! {
                    received = receiver.recv_many(&mut batch, max_batch), if receiving => {
                        open = received > 0;
                        self.apply(&mut next, &mut batch, &mut closing, in_flight.as_ref());
                    }
                    written = &mut flight.write => {
                        let flight = in_flight.take().expect("a write in flight");
                        self.finish(flight.pending, Some((written, flight.len))).await;
                    }
                }
            }
            // The previous batch is out of the way: take what else is queued, then write.
            if open && closing.is_empty() {
                while batch.len() < max_batch {
                    match receiver.try_recv() {
                        Ok(request) => batch.push(request),
                        Err(_) => break,
                    }
                }
                self.apply(&mut next, &mut batch, &mut closing, None);
            }
            if let Some(next) = next {
                in_flight = self.write(next).await;
            }
        }
        receiver.close();
        drop(receiver);
        // The directory is ours until the snapshot being written is in place.
        if let Some(disk) = &mut self.disk {
            let _ = disk.finish_compaction(true).await;
        }
        self.shared.leases.lock().unwrap().wake.notify_one();
        drop(self);
        for done in closing {
            let _ = done.send(());
        }
    }

    /// Applies the requests at the front of `batch`, up to the byte limit, to the batch being
    /// built (`next`, started if `None`), on top of the batch in flight. Requests past the limit
    /// stay in `batch`.
    fn apply(
        &self,
        next: &mut Option<Pending>,
        batch: &mut Vec<Request>,
        closing: &mut Vec<oneshot::Sender<()>>,
        in_flight: Option<&InFlight>,
    ) {
        if batch.is_empty() {
            return;
        }
        let shared = &self.shared;
        let now = Instant::now();
        let durable = shared.durable.read().unwrap();
        let mut leases = shared.leases.lock().unwrap();
        let lower = in_flight.map(|flight| &flight.pending);
        let pending = next.get_or_insert_with(|| Pending {
            overlay: Overlay::new(),
            revision: lower.map_or(durable.revision, |l| l.revision),
            published: Vec::new(),
            lease_changes: Vec::new(),
            replies: Vec::new(),
            log: Vec::new(),
        });
        let mut view = View::new(&durable.kvs, pending.revision);
        view.lower = lower.map(|l| &l.overlay);
        view.overlay = std::mem::take(&mut pending.overlay);
        let Pending {
            published,
            lease_changes,
            replies,
            log,
            ..
        } = pending;
        let mut record = |applied: Applied, log: &mut Vec<u8>| {
            shared.stats.records.fetch_add(1, Ordering::Relaxed);
            wal::encode_entry(&applied.entry, log);
            for change in &applied.entry.changes {
                match change {
                    Change::LeaseGrant { id, ttl } => lease_changes.push((*id, Some(*ttl))),
                    Change::LeaseRevoke { id } => lease_changes.push((*id, None)),
                    Change::Put { .. } | Change::Delete { .. } => {}
                }
            }
            if !applied.events.is_empty() {
                published.push((applied.entry.revision, applied.events));
            }
        };
        let mut requests = std::mem::take(batch).into_iter();
        for request in requests.by_ref() {
            if log.len() >= self.options.max_batch_bytes {
                batch.push(request);
                break;
            }
            if let Some(failed) = &self.failed {
                fail(request, failed, closing);
                continue;
            }
            match request {
                Request::Txn(txn, reply) => {
                    let answer = view.apply_txn(txn, &mut leases, shared.limits);
                    let answer = answer.map(|(result, applied)| {
                        if let Some(applied) = applied {
                            record(applied, log);
                        }
                        result
                    });
                    replies.push(Reply::Txn(reply, answer));
                }
                Request::Grant(ttl, reply) => {
                    let (id, applied) = view.grant(ttl, &mut leases, now);
                    record(applied, log);
                    replies.push(Reply::Grant(reply, Ok(LeaseGrant { id, ttl })));
                }
                Request::Revoke(lease, reply) => {
                    let answer = match view.revoke(lease, &mut leases) {
                        Some(applied) => {
                            record(applied, log);
                            Ok(())
                        }
                        None => Err(StoreError::LeaseNotFound(lease)),
                    };
                    replies.push(Reply::Revoke(reply, answer));
                }
                Request::Expire(lease) => {
                    if leases.is_expired(lease, now) {
                        if let Some(applied) = view.revoke(lease, &mut leases) {
                            record(applied, log);
                        }
                    } else {
                        leases.recheck(lease);
                    }
                }
                Request::Close(done) => closing.push(done),
            }
        }
        batch.extend(requests);
        pending.overlay = view.overlay;
        pending.revision = view.revision;
    }

    /// Starts the batch's log write; a batch with nothing to write (or a store in memory) is
    /// finished at once.
    async fn write(&mut self, mut pending: Pending) -> Option<InFlight> {
        match &mut self.disk {
            Some(disk) if !pending.log.is_empty() && self.failed.is_none() => {
                let log = std::mem::take(&mut pending.log);
                let len = log.len() as u64;
                #[cfg(test)]
                let inject_failure = self.shared.fail_writes.load(Ordering::Relaxed);
                #[cfg(not(test))]
                let inject_failure = false;
                let write = disk.start_append(log, inject_failure);
                Some(InFlight { pending, write, len })
            }
            _ => {
                self.finish(pending, None).await;
                None
            }
        }
    }

    /// Completes a batch after its write (if it had one): on success, makes its changes visible,
    /// announces them to watchers and acknowledges them; on failure, fails every request in it.
    async fn finish(&mut self, pending: Pending, written: Option<(Written, u64)>) {
        if let Some((written, len)) = written {
            let (file, result) = written.expect("log write task does not panic");
            let disk = self.disk.as_mut().expect("a write means a disk");
            if let Err(error) = disk.complete_append(file, result, len, &self.shared) {
                self.stop_writes(error);
            }
        }
        if let Some(failed) = &self.failed {
            for reply in pending.replies {
                reply.send(Some(failed));
            }
            return;
        }
        let shared = self.shared.clone();
        {
            let mut durable = shared.durable.write().unwrap();
            for (key, kv) in pending.overlay {
                match kv {
                    Some(kv) => durable.kvs.insert(key, kv),
                    None => durable.kvs.remove(&key),
                };
            }
            durable.revision = pending.revision;
        }
        shared.leases.lock().unwrap().synced(&pending.lease_changes);
        if !pending.published.is_empty() {
            {
                let mut history = shared.history.lock().unwrap();
                for (revision, events) in pending.published {
                    history.push(revision, events);
                }
            }
            self.committed.send_replace(pending.revision);
        }
        for reply in pending.replies {
            reply.send(None);
        }
        if let Some(disk) = &mut self.disk
            && let Err(error) = disk.maintain(&shared, &self.options).await
        {
            self.stop_writes(error);
        }
    }

    /// Fails every later write with `error`, keeping the first failure.
    fn stop_writes(&mut self, error: StoreError) {
        self.failed.get_or_insert(error);
        self.shared.writes_failed.store(true, Ordering::Relaxed);
    }
}

impl Disk {
    /// Collects a finished compaction, and starts one if the log has grown too long.
    async fn maintain(&mut self, shared: &Shared, options: &EmbeddedOptions) -> Result<(), StoreError> {
        self.finish_compaction(false).await?;
        let log_too_long = self.wal_len > options.compact_after_bytes.max(self.snapshot_bytes);
        if self.compaction.is_none() && log_too_long {
            self.start_compaction(shared).await?;
        }
        Ok(())
    }

    /// Starts appending `log` to the log file and syncing it, off the async threads.
    fn start_append(
        &mut self,
        log: Vec<u8>,
        inject_failure: bool,
    ) -> tokio::task::JoinHandle<(File, Result<(), StoreError>)> {
        let mut file = self.wal.take().expect("one log write at a time");
        tokio::task::spawn_blocking(move || {
            let result = if inject_failure {
                Err(std::io::Error::other("injected write failure"))
            } else {
                file.write_all(&log).and_then(|()| file.sync_data())
            };
            let result = result.map_err(|e| StoreError::io("appending to the log", e));
            (file, result)
        })
    }

    /// Takes the log file back after a write of `len` bytes.
    fn complete_append(
        &mut self,
        file: File,
        result: Result<(), StoreError>,
        len: u64,
        shared: &Shared,
    ) -> Result<(), StoreError> {
        self.wal = Some(file);
        result?;
        self.wal_len += len;
        shared.stats.log_bytes.fetch_add(len, Ordering::Relaxed);
        shared.stats.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Starts a compaction: begins a new log generation at once, and writes a snapshot of the
    /// state at that point in the background, removing the old log when the snapshot is in place.
    /// The copy of the key map it writes costs constant time (a persistent B-tree shares its
    /// nodes), so commits do not pause; writes go on into the new log meanwhile. A crash before
    /// the snapshot is renamed into place leaves the old snapshot and both logs, which recovery
    /// replays in order.
    async fn start_compaction(&mut self, shared: &Shared) -> Result<(), StoreError> {
        let dir = self.dir.clone();
        let old = self.generation;
        let new = old + 1;
        let file = {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || wal::open_wal(&dir, new))
                .await
                .expect("log open task does not panic")?
        };
        let (kvs, revision) = {
            let durable = shared.durable.read().unwrap();
            (durable.kvs.clone(), durable.revision)
        };
        let (leases, next_id) = {
            let table = shared.leases.lock().unwrap();
            (table.durable_view(), table.next_id())
        };
        self.wal = Some(file);
        self.generation = new;
        self.wal_len = 0;
        shared.stats.compactions.fetch_add(1, Ordering::Relaxed);
        let (done, compaction) = oneshot::channel();
        std::thread::Builder::new()
            .name("store-snapshot".into())
            .spawn(move || {
                // Serializing the whole state takes a core for a while: let commits have it
                // first. Linux gives each thread its own nice value; failing to lower it only
                // costs latency.
                let _ = rustix::process::setpriority_process(None, SNAPSHOT_NICE);
                let written =
                    wal::write_snapshot(&dir, revision, next_id, new, &leases, &kvs).and_then(|size| {
                        drop(kvs);
                        wal::remove_wal(&dir, old)?;
                        Ok(size)
                    });
                let _ = done.send(written);
            })
            .map_err(|e| StoreError::io("starting the snapshot thread", e))?;
        self.compaction = Some(compaction);
        Ok(())
    }

    /// Collects a finished compaction; with `wait`, waits for a running one.
    async fn finish_compaction(&mut self, wait: bool) -> Result<(), StoreError> {
        let Some(mut compaction) = self.compaction.take() else {
            return Ok(());
        };
        let written = match compaction.try_recv() {
            Ok(written) => written,
            Err(oneshot::error::TryRecvError::Empty) if !wait => {
                self.compaction = Some(compaction);
                return Ok(());
            }
            Err(oneshot::error::TryRecvError::Empty) => {
                compaction.await.expect("the snapshot thread does not panic")
            }
            Err(oneshot::error::TryRecvError::Closed) => panic!("the snapshot thread panicked"),
        };
        self.snapshot_bytes = written?;
        Ok(())
    }
}

/// Answers a request the writer can no longer carry out.
fn fail(request: Request, failed: &StoreError, closing: &mut Vec<oneshot::Sender<()>>) {
    match request {
        Request::Txn(_, reply) => {
            let _ = reply.send(Err(failed.clone()));
        }
        Request::Grant(_, reply) => {
            let _ = reply.send(Err(failed.clone()));
        }
        Request::Revoke(_, reply) => {
            let _ = reply.send(Err(failed.clone()));
        }
        Request::Expire(_) => {}
        Request::Close(done) => closing.push(done),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::TxnOp;

    async fn put(store: &EmbeddedStore, key: &str) -> Result<TxnResult, StoreError> {
        store.txn(Txn::new().and_then([TxnOp::put(key, "v")])).await
    }

    /// After a failed log write, the writes in that batch fail, every later write fails too (the
    /// page cache can no longer be trusted), reads go on from what was synced, and a reopened
    /// store has exactly what was acknowledged.
    #[tokio::test]
    async fn a_failed_log_write_stops_all_writes() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = EmbeddedStore::open(dir.path(), EmbeddedOptions::default())
            .await
            .unwrap();
        put(&store, "acknowledged").await.unwrap();
        assert!(store.is_open());
        store.shared.fail_writes.store(true, Ordering::Relaxed);
        assert!(matches!(put(&store, "failed").await, Err(StoreError::Io { .. })));
        assert!(!store.is_open());
        store.shared.fail_writes.store(false, Ordering::Relaxed);
        assert!(matches!(put(&store, "later").await, Err(StoreError::Io { .. })));
        assert!(matches!(store.lease_grant(10).await, Err(StoreError::Io { .. })));
        assert!(store.get(b"acknowledged").await.unwrap().0.is_some());
        assert_eq!(store.get(b"failed").await.unwrap().0, None);
        store.close().await;

        let (store, _) = EmbeddedStore::open(dir.path(), EmbeddedOptions::default())
            .await
            .unwrap();
        assert!(store.get(b"acknowledged").await.unwrap().0.is_some());
        assert_eq!(store.get(b"failed").await.unwrap().0, None);
        put(&store, "after reopening").await.unwrap();
        assert!(store.is_open());
        store.close().await;
        assert!(!store.is_open());
    }
}
