//! `EmbeddedStore`: the [`Store`] interface in one process, durable on local disk.
//!
//! The whole key space lives in memory in a `BTreeMap`; durability comes from an append-only log
//! with group commit, and a snapshot written when the log grows (see [`wal`] for the files).
//!
//! Writes (transactions that may write, lease grants and revokes, lease expiry) go through ONE
//! writer task. It takes every request queued, applies them in order to an overlay over the
//! durable map, appends their log records in one write, syncs the log once, then makes the batch
//! visible to readers and acknowledges it. A write acknowledged is a write that survives `kill -9`.
//! Reads never wait for the writer: they read the durable map under a short read lock.
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use self::apply::{Applied, Limits, View, key_value, read_only_txn};
use self::lease::LeaseTable;
use self::wal::{Change, Stored};
use self::watch::History;
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
    kvs: BTreeMap<Vec<u8>, Stored>,
    revision: i64,
}

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
}

/// Counters the writer keeps, read through [`EmbeddedStore::stats`].
#[derive(Debug, Default)]
struct Counters {
    batches: AtomicU64,
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
#[derive(Debug, Clone)]
pub struct EmbeddedStore {
    shared: Arc<Shared>,
    requests: mpsc::Sender<Request>,
    dir: Arc<PathBuf>,
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

        let (committed_tx, committed) = tokio::sync::watch::channel(revision);
        let shared = Arc::new(Shared {
            durable: RwLock::new(Durable {
                kvs: snapshot.kvs,
                revision,
            }),
            leases: Arc::new(Mutex::new(table)),
            // A fresh store has no events to miss; a reopened one has lost those up to now.
            history: Arc::new(Mutex::new(History::new(
                options.watch_history_bytes,
                if recovered.wal_len == 0 && recovered.snapshot_bytes == 0 {
                    0
                } else {
                    revision
                },
            ))),
            committed,
            limits: Limits {
                max_txn_ops: options.max_txn_ops,
                max_request_bytes: options.max_request_bytes,
            },
            watch_channel: options.watch_channel.max(1),
            stats: Counters::default(),
        });
        let (requests, receiver) = mpsc::channel(options.max_batch.max(1) * 2);
        let writer = Writer {
            shared: shared.clone(),
            dir: dir.clone(),
            wal: Some(wal),
            wal_len: recovered.wal_len,
            generation: recovered.generation,
            snapshot_bytes: recovered.snapshot_bytes,
            compaction: None,
            committed: committed_tx,
            options,
            failed: None,
            _lock: lock,
        };
        tokio::spawn(writer.run(receiver));
        tokio::spawn(lease::expire_leases(shared.leases.clone(), requests.downgrade()));
        Ok((
            EmbeddedStore {
                shared,
                requests,
                dir: Arc::new(dir),
            },
            report,
        ))
    }

    /// The directory the store lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the writer has done since the store was opened.
    pub fn stats(&self) -> EmbeddedStats {
        let c = &self.shared.stats;
        EmbeddedStats {
            syncs: c.batches.load(Ordering::Relaxed),
            records: c.records.load(Ordering::Relaxed),
            log_bytes: c.log_bytes.load(Ordering::Relaxed),
            compactions: c.compactions.load(Ordering::Relaxed),
        }
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
    dir: PathBuf,
    /// `None` only while a blocking write holds it.
    wal: Option<File>,
    wal_len: u64,
    generation: u64,
    snapshot_bytes: u64,
    /// The snapshot being written in the background, if any.
    compaction: Option<tokio::task::JoinHandle<Result<u64, StoreError>>>,
    committed: tokio::sync::watch::Sender<i64>,
    options: EmbeddedOptions,
    /// Set by the first failed write or sync; every later write fails with it.
    failed: Option<StoreError>,
    /// Held while the writer runs; dropping it releases the directory.
    _lock: File,
}

impl Writer {
    async fn run(mut self, mut receiver: mpsc::Receiver<Request>) {
        let mut batch = Vec::with_capacity(self.options.max_batch);
        let mut closing = Vec::new();
        while closing.is_empty() {
            if receiver.recv_many(&mut batch, self.options.max_batch).await == 0 {
                break;
            }
            self.commit(&mut batch, &mut closing).await;
        }
        receiver.close();
        drop(receiver);
        // The directory is ours until the snapshot being written is in place.
        let _ = self.finish_compaction(true).await;
        self.shared.leases.lock().unwrap().wake.notify_one();
        drop(self);
        for done in closing {
            let _ = done.send(());
        }
    }

    /// Applies, logs, syncs, publishes and acknowledges one batch.
    async fn commit(&mut self, batch: &mut Vec<Request>, closing: &mut Vec<oneshot::Sender<()>>) {
        let shared = self.shared.clone();
        let now = Instant::now();
        let mut log = Vec::new();
        let mut published = Vec::new();
        let mut replies = Vec::with_capacity(batch.len());
        let (overlay, revision) = {
            let durable = shared.durable.read().unwrap();
            let mut leases = shared.leases.lock().unwrap();
            let mut view = View::new(&durable.kvs, durable.revision);
            let mut record = |applied: Applied, log: &mut Vec<u8>| {
                shared.stats.records.fetch_add(1, Ordering::Relaxed);
                wal::encode_entry(&applied.entry, log);
                if !applied.events.is_empty() {
                    published.push((applied.entry.revision, applied.events));
                }
            };
            for request in batch.drain(..) {
                if let Some(failed) = &self.failed {
                    fail(request, failed, closing);
                    continue;
                }
                match request {
                    Request::Txn(txn, reply) => {
                        let answer = view.apply_txn(txn, &mut leases, shared.limits);
                        let answer = answer.map(|(result, applied)| {
                            if let Some(applied) = applied {
                                record(applied, &mut log);
                            }
                            result
                        });
                        replies.push(Reply::Txn(reply, answer));
                    }
                    Request::Grant(ttl, reply) => {
                        let (id, applied) = view.grant(ttl, &mut leases, now);
                        record(applied, &mut log);
                        replies.push(Reply::Grant(reply, Ok(LeaseGrant { id, ttl })));
                    }
                    Request::Revoke(lease, reply) => {
                        let answer = match view.revoke(lease, &mut leases) {
                            Some(applied) => {
                                record(applied, &mut log);
                                Ok(())
                            }
                            None => Err(StoreError::LeaseNotFound(lease)),
                        };
                        replies.push(Reply::Revoke(reply, answer));
                    }
                    Request::Expire(lease) => {
                        if leases.is_expired(lease, now) {
                            if let Some(applied) = view.revoke(lease, &mut leases) {
                                record(applied, &mut log);
                            }
                        } else {
                            leases.recheck(lease);
                        }
                    }
                    Request::Close(done) => closing.push(done),
                }
            }
            (view.overlay, view.revision)
        };

        let failure = if log.is_empty() {
            None
        } else {
            self.append(log).await.err()
        };
        if failure.is_none() {
            let mut durable = shared.durable.write().unwrap();
            for (key, kv) in overlay {
                match kv {
                    Some(kv) => durable.kvs.insert(key, kv),
                    None => durable.kvs.remove(&key),
                };
            }
            durable.revision = revision;
            drop(durable);
            if !published.is_empty() {
                let mut history = shared.history.lock().unwrap();
                for (revision, events) in published {
                    history.push(revision, events);
                }
                drop(history);
                self.committed.send_replace(revision);
            }
        }
        for reply in replies {
            reply.send(failure.as_ref());
        }
        if failure.is_none() {
            if let Err(error) = self.finish_compaction(false).await {
                self.failed = Some(error);
            }
            let log_too_long = self.wal_len > self.options.compact_after_bytes.max(self.snapshot_bytes);
            if self.compaction.is_none()
                && self.failed.is_none()
                && log_too_long
                && let Err(error) = self.start_compaction().await
            {
                self.failed = Some(error);
            }
        }
    }

    /// Appends `log` to the log file and syncs it, off the async threads.
    async fn append(&mut self, log: Vec<u8>) -> Result<(), StoreError> {
        let mut file = self.wal.take().expect("log file present between batches");
        let len = log.len() as u64;
        let (file, result) = tokio::task::spawn_blocking(move || {
            let result = file
                .write_all(&log)
                .and_then(|()| file.sync_data())
                .map_err(|e| StoreError::io("appending to the log", e));
            (file, result)
        })
        .await
        .expect("log write task does not panic");
        self.wal = Some(file);
        match result {
            Ok(()) => {
                self.wal_len += len;
                let stats = &self.shared.stats;
                stats.batches.fetch_add(1, Ordering::Relaxed);
                stats.log_bytes.fetch_add(len, Ordering::Relaxed);
                Ok(())
            }
            Err(error) => {
                self.failed = Some(error.clone());
                Err(error)
            }
        }
    }

    /// Starts a compaction: begins a new log generation at once, and writes a snapshot of the
    /// state at that point in the background, removing the old log when the snapshot is in place.
    /// The writer only pauses to copy the key map (keys are copied, values shared); writes go on
    /// into the new log meanwhile. A crash before the snapshot is renamed into place leaves the
    /// old snapshot and both logs, which recovery replays in order.
    async fn start_compaction(&mut self) -> Result<(), StoreError> {
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
            let durable = self.shared.durable.read().unwrap();
            (durable.kvs.clone(), durable.revision)
        };
        let (leases, next_id) = {
            let table = self.shared.leases.lock().unwrap();
            (table.durable_view(), table.next_id())
        };
        self.wal = Some(file);
        self.generation = new;
        self.wal_len = 0;
        self.shared.stats.compactions.fetch_add(1, Ordering::Relaxed);
        self.compaction = Some(tokio::task::spawn_blocking(move || {
            let size = wal::write_snapshot(&dir, revision, next_id, new, &leases, &kvs)?;
            drop(kvs);
            wal::remove_wal(&dir, old)?;
            Ok(size)
        }));
        Ok(())
    }

    /// Collects a finished compaction; with `wait`, waits for a running one.
    async fn finish_compaction(&mut self, wait: bool) -> Result<(), StoreError> {
        let Some(task) = self.compaction.take_if(|task| wait || task.is_finished()) else {
            return Ok(());
        };
        self.snapshot_bytes = task.await.expect("compaction task does not panic")?;
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
