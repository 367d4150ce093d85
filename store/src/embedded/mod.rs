//! `EmbeddedStore`: the [`Store`] interface in one process, durable on local disk.
//!
//! The keys, the revision and the leases live in an embedded storage engine on disk (`redb`, see
//! [`engine`]): memory holds the engine's page cache, bounded by
//! [`EmbeddedOptions::cache_bytes`], and not the key space.
//!
//! Writes (transactions that may write, lease grants and revokes, lease expiry) go through ONE
//! writer task. It takes every request queued, applies them in order to an overlay over a
//! snapshot, appends the whole batch to the journal and syncs it (one sequential write, see
//! [`journal`]), then makes the batch visible to readers, announces it to watchers and
//! acknowledges it. A write acknowledged is a write that survives `kill -9`. The engine takes the
//! acknowledged batches later, several in ONE write transaction (not synced: the journal holds
//! them), while the next batch is journaled; once the journal outgrows
//! [`EmbeddedOptions::checkpoint_after_bytes`], that engine commit is a checkpoint instead: synced,
//! and the journals before it removed. Applying, journaling and engine commits overlap. Reads
//! never wait for the writer: each reads a snapshot, one engine read transaction (MVCC) seen
//! through the acknowledged batches the engine does not hold yet, so it sees every acknowledged
//! write and never one before it is durable.
//!
//! Leases and watches are emulated in process ([`lease`], [`watch`]). A directory written in the
//! store's former format (a snapshot and logs) is imported into the engine on open ([`legacy`]).
//! A running store is copied at one revision, and a store written from such a copy, by
//! [`backup`].

mod apply;
mod backup;
mod engine;
mod journal;
mod lease;
mod legacy;
mod watch;

use crate::metrics::StoreMetrics;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

pub use self::backup::{ExportedKey, ExportedLease, ImportReport, StoreExport, StoreImport};
pub use self::legacy::LegacyImport;

use self::apply::{Applied, Change, View, key_value, read_only_txn};
use self::engine::{Commit, ENGINE_FILE, Engine, Overlay};
use self::journal::Journal;
use self::lease::LeaseTable;
use self::watch::{History, HistoryEvent};
use crate::error::StoreError;
use crate::limits::Limits;
use crate::store::Store;
use crate::types::{
    KeyRange, KeyValue, LeaseGrant, LeaseId, LeaseStatus, RangeRequest, RangeResult, Txn, TxnResult,
    WatchStream,
};

/// Tuning of an [`EmbeddedStore`]. The defaults suit a single machine.
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    /// Most memory the engine's page cache takes, in bytes. Reads of pages outside it go to the
    /// disk (the operating system's page cache first).
    pub cache_bytes: usize,
    /// Checkpoint the engine and start a new journal once the journal outgrows this. A longer
    /// journal means fewer synced engine commits and a longer replay when the store opens after
    /// a crash (a clean close checkpoints).
    pub checkpoint_after_bytes: u64,
    /// How many bytes of recent events to keep for watchers that lag or start in the past.
    pub watch_history_bytes: usize,
    /// Most operations in one transaction branch (etcd's `--max-txn-ops` default).
    pub max_txn_ops: usize,
    /// Largest transaction in bytes of keys and values (etcd's `--max-request-bytes` default).
    pub max_request_bytes: usize,
    /// Most requests applied and committed together.
    pub max_batch: usize,
    /// A batch stops taking requests once its changes reach about this size; the rest wait for
    /// the next batch. Bounds the memory and the latency of one commit under large writes.
    pub max_batch_bytes: usize,
    /// Capacity of each watch's channel before its feeding task waits.
    pub watch_channel: usize,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        EmbeddedOptions {
            cache_bytes: 256 << 20,
            checkpoint_after_bytes: 64 << 20,
            watch_history_bytes: 64 << 20,
            max_txn_ops: Limits::ETCD_DEFAULTS.max_txn_ops,
            max_request_bytes: Limits::ETCD_DEFAULTS.max_request_bytes,
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
    /// Journal records replayed on top of the engine's last checkpoint.
    pub replayed_records: usize,
    /// Bytes after the last whole record of the newest journal: a write torn by a crash, never
    /// acknowledged, and not replayed.
    pub torn_bytes: u64,
    /// Set when the directory was in the store's former format and was imported.
    pub legacy_import: Option<LegacyImport>,
}

impl std::fmt::Display for RecoveryReport {
    /// One line for the log: `revision 42, 1200 keys, 3 leases, 17 journal records replayed`,
    /// with the torn bytes and a legacy import when there were any.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "revision {}, {} keys, {} leases, {} journal records replayed",
            self.revision, self.keys, self.leases, self.replayed_records
        )?;
        if self.torn_bytes > 0 {
            write!(
                f,
                ", {} torn bytes after the last whole record dropped",
                self.torn_bytes
            )?;
        }
        if self.legacy_import.is_some() {
            write!(f, ", imported from the former format")?;
        }
        Ok(())
    }
}

/// The lock file: held with an exclusive `flock` while a process has the store open.
const LOCK_FILE: &str = "LOCK";

/// State shared by the handles, the writer and the watch tasks.
#[derive(Debug)]
struct Shared {
    /// `None` once the store is closed, so the engine's file is released.
    engine: RwLock<Option<Arc<Engine>>>,
    leases: Arc<Mutex<LeaseTable>>,
    history: Arc<Mutex<History>>,
    /// The last committed revision, announced to watchers. Its sender belongs to the writer, so
    /// it closes when the store does.
    committed: tokio::sync::watch::Receiver<i64>,
    limits: Limits,
    watch_channel: usize,
    stats: Counters,
    /// Set by the writer at its first failed commit: every later write fails.
    writes_failed: AtomicBool,
    /// The acknowledged batches the engine does not hold yet, which reads see through.
    visible: Mutex<Visible>,
    /// Switches tests use to hold or fail journal appends.
    #[cfg(test)]
    journal_switch: StageSwitch,
    /// Switches tests use to hold or fail engine commits.
    #[cfg(test)]
    engine_switch: StageSwitch,
}

/// Test-only switches of one of the writer's blocking stages (a journal append, an engine commit).
#[cfg(test)]
#[derive(Debug, Default)]
struct StageSwitch {
    /// The stage waits while this is set.
    hold: AtomicBool,
    /// The stage fails (with an I/O error naming `context`) while this is set.
    fail: AtomicBool,
}

#[cfg(test)]
impl StageSwitch {
    /// Called at the start of the stage, on its blocking thread.
    fn pass(&self, context: &'static str) -> Result<(), StoreError> {
        while self.hold.load(Ordering::Relaxed) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if self.fail.load(Ordering::Relaxed) {
            return Err(StoreError::io(context, std::io::Error::other("injected failure")));
        }
        Ok(())
    }
}

impl Shared {
    fn engine(&self) -> Result<Arc<Engine>, StoreError> {
        self.engine.read().unwrap().clone().ok_or(StoreError::Closed)
    }

    /// A consistent view of every acknowledged write: an engine read transaction, and the
    /// acknowledged batches newer than it.
    fn snapshot(&self, engine: &Engine) -> Result<Snapshot, StoreError> {
        loop {
            let read = engine.read()?;
            let visible = self.visible.lock().unwrap();
            // Batches leave `layers` only once the engine holds them. If the engine moved past
            // this read since it began, batches it lacks may be gone from `layers`: read again.
            if visible.engine_revision > read.revision {
                continue;
            }
            let layers = visible
                .layers
                .iter()
                .filter(|(revision, _)| *revision > read.revision)
                .map(|(_, overlay)| overlay.clone())
                .collect();
            let revision = visible.revision.max(read.revision);
            return Ok(Snapshot {
                read,
                layers,
                revision,
            });
        }
    }
}

/// Acknowledged batches the engine does not hold yet.
#[derive(Debug)]
struct Visible {
    /// Each batch's changes with its newest revision, oldest first.
    layers: std::collections::VecDeque<(i64, Arc<Overlay>)>,
    /// The newest acknowledged revision.
    revision: i64,
    /// The revision of the newest batch the engine holds and `layers` no longer does.
    engine_revision: i64,
}

/// What one read sees: the engine as of one commit, through the acknowledged batches after it.
struct Snapshot {
    read: engine::ReadView,
    /// Oldest first.
    layers: Vec<Arc<Overlay>>,
    revision: i64,
}

impl Snapshot {
    fn view(&self) -> View<'_> {
        let mut view = View::new(&self.read, self.revision);
        view.lower = self.layers.iter().map(|layer| &**layer).collect();
        view
    }
}

/// Counters the writer keeps, read through [`EmbeddedStore::stats`].
#[derive(Debug, Default)]
struct Counters {
    syncs: AtomicU64,
    engine_commits: AtomicU64,
    records: AtomicU64,
}

/// What the writer has done since the store was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbeddedStats {
    /// Batches made durable, each one journal sync (in memory: each acknowledged at once): one
    /// per batch that changed anything.
    pub syncs: u64,
    /// Engine write transactions, each holding one or more of those batches.
    pub engine_commits: u64,
    /// Change sets committed (one per transaction that changed something, lease grant or revoke).
    pub records: u64,
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
/// On disk, the directory holds `LOCK` (an exclusive `flock` while open) and `store.redb` (the
/// engine's file: keys, revision, leases). A directory of the former format is imported on open
/// and its files moved into `legacy-<unix seconds>/`.
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
    /// Opens (creating if needed) the store in `dir`: imports a directory of the former format,
    /// opens the engine (on its last checkpoint, if a crash came after it), replays the journals
    /// since that checkpoint and checkpoints the result, rebuilds the lease table, and starts the
    /// writer and lease expiry tasks.
    pub async fn open(
        dir: impl AsRef<Path>,
        options: EmbeddedOptions,
    ) -> Result<(EmbeddedStore, RecoveryReport), StoreError> {
        let dir = dir.as_ref().to_path_buf();
        let cache_bytes = options.cache_bytes;
        let (lock, engine, journal, legacy_import, replay, recovered) = {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || {
                std::fs::create_dir_all(&dir)
                    .map_err(|e| StoreError::io("creating the store directory", e))?;
                let lock = lock_dir(&dir)?;
                let legacy_import = legacy::import(&dir, cache_bytes)?;
                let engine = Engine::open(&dir.join(ENGINE_FILE), cache_bytes)?;
                let (journal, replay) = replay_journals(&dir, &engine)?;
                let recovered = engine.recover()?;
                Ok::<_, StoreError>((lock, engine, journal, legacy_import, replay, recovered))
            })
            .await
            .map_err(|e| StoreError::io("opening the store", std::io::Error::other(e)))??
        };
        let mut table = LeaseTable::new(&recovered.leases, recovered.next_lease_id, Instant::now());
        for (lease, key) in &recovered.lease_keys {
            table.attach(*lease, key);
        }
        let revision = recovered.revision;
        let report = RecoveryReport {
            revision,
            keys: usize::try_from(recovered.keys).unwrap_or(usize::MAX),
            leases: recovered.leases.len(),
            replayed_records: replay.entries.len(),
            torn_bytes: replay.torn_bytes,
            legacy_import,
        };
        // A store never written to has no events to miss; a reopened one has lost those up to now.
        let compacted = if revision > 1 { revision } else { 0 };
        let disk = Disk { dir, lock, journal };
        let store = EmbeddedStore::start(engine, revision, compacted, table, Some(disk), options);
        Ok((store, report))
    }

    /// A store that keeps everything in memory and nothing on disk: same semantics, nothing
    /// survives it. For tests of the code above the store. Must be called inside a tokio runtime.
    pub fn in_memory(options: EmbeddedOptions) -> EmbeddedStore {
        let engine = Engine::in_memory(options.cache_bytes).expect("an engine in memory opens");
        let table = LeaseTable::new(&[], 1, Instant::now());
        EmbeddedStore::start(engine, 1, 0, table, None, options)
    }

    fn start(
        engine: Engine,
        revision: i64,
        compacted: i64,
        leases: LeaseTable,
        disk: Option<Disk>,
        options: EmbeddedOptions,
    ) -> EmbeddedStore {
        let engine = Arc::new(engine);
        let (committed_tx, committed) = tokio::sync::watch::channel(revision);
        let shared = Arc::new(Shared {
            engine: RwLock::new(Some(engine.clone())),
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
            visible: Mutex::new(Visible {
                layers: std::collections::VecDeque::new(),
                revision,
                engine_revision: revision,
            }),
            #[cfg(test)]
            journal_switch: StageSwitch::default(),
            #[cfg(test)]
            engine_switch: StageSwitch::default(),
        });
        let (dir, journal, lock) = match disk {
            Some(Disk { dir, lock, journal }) => (Some(dir), Some(Arc::new(Mutex::new(journal))), Some(lock)),
            None => (None, None, None),
        };
        let (requests, receiver) = mpsc::channel(options.max_batch.max(1) * 2);
        let writer = Writer {
            shared: shared.clone(),
            engine,
            journal,
            dir: dir.clone(),
            committed: committed_tx,
            options,
            acknowledged: Vec::new(),
            unengined_bytes: 0,
            failed: None,
            _lock: lock,
            metrics: StoreMetrics::global(),
        };
        tokio::spawn(writer.run(receiver));
        tokio::spawn(lease::expire_leases(shared.leases.clone(), requests.downgrade()));
        EmbeddedStore {
            shared,
            requests,
            dir: dir.map(Arc::new),
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
            engine_commits: c.engine_commits.load(Ordering::Relaxed),
            records: c.records.load(Ordering::Relaxed),
        }
    }

    /// Whether the store takes writes: it was not closed, and no commit has failed (after one,
    /// every write fails until the store is opened again).
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
        let snapshot = self.shared.snapshot(&*self.shared.engine()?)?;
        let kv = snapshot.view().get(key)?.map(|kv| key_value(key, &kv));
        Ok((kv, snapshot.revision))
    }

    async fn range(&self, request: RangeRequest) -> Result<RangeResult, StoreError> {
        self.check_open()?;
        let snapshot = self.shared.snapshot(&*self.shared.engine()?)?;
        snapshot.view().range_result(&request, snapshot.revision)
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError> {
        if txn.writes() {
            return self.call(|reply| Request::Txn(txn, reply)).await;
        }
        self.check_open()?;
        let snapshot = self.shared.snapshot(&*self.shared.engine()?)?;
        read_only_txn(&snapshot.view(), txn, self.shared.limits)
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
            None => *self.shared.committed.borrow() + 1,
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
        .open(dir.join(LOCK_FILE))
        .map_err(|e| StoreError::io("opening the lock file", e))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(file),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(StoreError::Locked(dir.to_path_buf())),
        Err(e) => Err(StoreError::io("locking the store directory", e.into())),
    }
}

/// What a store on disk holds beside its engine: its directory, the directory's lock, and the
/// journal being appended to.
struct Disk {
    dir: PathBuf,
    lock: File,
    journal: Journal,
}

/// Replays the journals the engine's last checkpoint does not hold, then checkpoints the result
/// on a new journal generation (removing the journals it replayed) and returns that journal.
/// Runs on every open, so a store that was closed cleanly (nothing to replay) pays one small
/// synced commit.
fn replay_journals(dir: &Path, engine: &Engine) -> Result<(Journal, journal::Replay), StoreError> {
    let checkpointed = engine.recover()?;
    let replay = journal::read_from(dir, checkpointed.journal_generation)?;
    let mut overlay = Overlay::new();
    let mut lease_changes = Vec::new();
    let mut revision = checkpointed.revision;
    let mut next_lease_id = checkpointed.next_lease_id;
    for entry in &replay.entries {
        if entry.revision < revision {
            return Err(StoreError::Corrupt(format!(
                "journal revision {} after revision {revision}",
                entry.revision
            )));
        }
        revision = entry.revision;
        for change in &entry.changes {
            match change {
                Change::Put { key, kv } => {
                    overlay.insert(key.clone(), Some(kv.clone()));
                }
                Change::Delete { key } => {
                    overlay.insert(key.clone(), None);
                }
                Change::LeaseGrant { id, ttl } => {
                    lease_changes.push((*id, Some(*ttl)));
                    next_lease_id = next_lease_id.max(id + 1);
                }
                Change::LeaseRevoke { id } => lease_changes.push((*id, None)),
            }
        }
    }
    let generation = replay
        .last_generation
        .map_or(checkpointed.journal_generation, |last| last + 1)
        .max(checkpointed.journal_generation);
    let journal = Journal::create(dir, generation)?;
    engine.commit(&Commit {
        overlays: &[&overlay],
        lease_changes: &lease_changes,
        revision,
        next_lease_id,
        checkpoint: Some(generation),
    })?;
    journal.remove_before()?;
    Ok((journal, replay))
}

/// Syncs a directory, so that files created, renamed or removed in it stay so after a crash.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("syncing the store directory", e))
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

/// How many acknowledged batches gather, while the journal is busy, before the engine takes them
/// in one commit.
const ENGINE_COMMIT_BATCHES: usize = 16;

/// The single writer: applies batches, makes each durable in the journal and acknowledges it,
/// and commits what was acknowledged to the engine, several batches per engine commit.
struct Writer {
    shared: Arc<Shared>,
    engine: Arc<Engine>,
    /// The journal of a store on disk (`None` in memory). Only the batch being journaled uses it.
    journal: Option<Arc<Mutex<Journal>>>,
    /// The store's directory, where the journals are (`None` in memory).
    dir: Option<PathBuf>,
    committed: tokio::sync::watch::Sender<i64>,
    options: EmbeddedOptions,
    /// Batches acknowledged and not yet handed to an engine commit, oldest first.
    acknowledged: Vec<Acknowledged>,
    /// About how many bytes of changes are acknowledged and not yet in the engine (including an
    /// engine commit running): past [`Writer::most_unengined_bytes`], no batch is journaled
    /// until the engine catches up.
    unengined_bytes: usize,
    /// Set by the first failed journal append or engine commit; every later write fails with it.
    failed: Option<StoreError>,
    /// The directory's lock, held while the writer runs (`None` for a store in memory).
    _lock: Option<File>,
    metrics: StoreMetrics,
}

/// A batch applied in memory, waiting for (or without need of) its journal.
struct Pending {
    overlay: Overlay,
    revision: i64,
    next_lease_id: i64,
    /// Events per revision, for watchers.
    published: Vec<(i64, Vec<HistoryEvent>)>,
    /// Lease grants (`Some(ttl)`) and revokes (`None`), in order.
    lease_changes: Vec<(i64, Option<i64>)>,
    replies: Vec<Reply>,
    /// The change sets' journal frames (empty in memory).
    frames: Vec<u8>,
    /// Change sets applied, and about how many bytes they add to the commit.
    records: usize,
    bytes: usize,
}

/// A batch whose journal append and sync is running.
struct Journaling {
    pending: Pending,
    /// The batch's changes, read by the next batch's view.
    overlay: Arc<Overlay>,
    /// `Some(generation)` when the journal started generation `generation` after this batch.
    append: tokio::task::JoinHandle<Result<Option<u64>, StoreError>>,
    /// When the append started.
    started: std::time::Instant,
}

/// A batch in the journal and acknowledged, whose changes the engine does not hold yet.
struct Acknowledged {
    overlay: Arc<Overlay>,
    lease_changes: Vec<(i64, Option<i64>)>,
    revision: i64,
    next_lease_id: i64,
    /// `Some(generation)` when the journal started generation `generation` after this batch: an
    /// engine commit that holds it may be the checkpoint at that generation.
    new_generation: Option<u64>,
    bytes: usize,
}

/// An engine commit running over acknowledged batches.
struct EngineCommit {
    bytes: usize,
    /// The revision of the newest batch it holds.
    commit: tokio::task::JoinHandle<Result<i64, StoreError>>,
}

impl Writer {
    /// Whether the engine should take the acknowledged batches now even though the journal is
    /// busy: enough of them wait, or one ends a journal generation. While the journal is busy,
    /// batches are left to gather, so that one engine commit copies each page they touch once;
    /// once it is idle, the engine takes whatever waits.
    fn engine_commit_is_due(&self) -> bool {
        self.acknowledged.len() >= ENGINE_COMMIT_BATCHES
            || self.unengined_bytes >= self.most_unengined_bytes() / 2
            || self
                .acknowledged
                .iter()
                .any(|batch| batch.new_generation.is_some())
    }

    /// How many bytes of acknowledged changes may wait for the engine before journaling pauses.
    fn most_unengined_bytes(&self) -> usize {
        self.options.max_batch_bytes.saturating_mul(4)
    }

    /// The writer loop. Three stages overlap: while batch N's journal append and sync runs, the
    /// writer keeps receiving requests and applying them, as batch N+1, on top of N's changes,
    /// and an engine commit writes the batches acknowledged before N into the engine. Once N is
    /// durable it is visible to readers, announced and acknowledged, and N+1 takes what else is
    /// queued and is journaled in turn. If N's journal fails, N+1 fails with it.
    async fn run(mut self, mut receiver: mpsc::Receiver<Request>) {
        let max_batch = self.options.max_batch.max(1);
        let mut batch = Vec::with_capacity(max_batch);
        let mut closing = Vec::new();
        let mut next: Option<Pending> = None;
        let mut journaling: Option<Journaling> = None;
        let mut engine_commit: Option<EngineCommit> = None;
        let mut open = true;
        loop {
            let stopping = !open || !closing.is_empty();
            if stopping {
                // Requests after a close are dropped: their callers see `Closed`.
                batch.clear();
            }
            // After a failure, batches are answered with it at once, whatever waits for the engine.
            let engine_keeps_up = self.unengined_bytes < self.most_unengined_bytes() || self.failed.is_some();
            if journaling.is_none() && engine_keeps_up {
                // The batch before is out of the way: take what else is queued, then journal.
                if open && closing.is_empty() {
                    while batch.len() < max_batch {
                        match receiver.try_recv() {
                            Ok(request) => batch.push(request),
                            Err(_) => break,
                        }
                    }
                }
                self.apply(&mut next, &mut batch, &mut closing, None);
                if let Some(pending) = next.take() {
                    journaling = self.journal(pending);
                }
            }
            if engine_commit.is_none() && (journaling.is_none() || self.engine_commit_is_due()) {
                engine_commit = self.commit_to_engine();
            }
            if journaling.is_none() && engine_commit.is_none() && next.is_none() && batch.is_empty() {
                // A close may have come with the requests taken above.
                if !open || !closing.is_empty() {
                    break;
                }
                open = receiver.recv_many(&mut batch, max_batch).await > 0;
                self.apply(&mut next, &mut batch, &mut closing, None);
                continue;
            }
            let full = next
                .as_ref()
                .is_some_and(|n: &Pending| n.bytes >= self.options.max_batch_bytes);
            let receiving = open && closing.is_empty() && !full;
            tokio::select! {
                received = receiver.recv_many(&mut batch, max_batch), if receiving => {
                    open = received > 0;
                    self.apply(&mut next, &mut batch, &mut closing, journaling.as_ref());
                }
                appended = async { (&mut journaling.as_mut().expect("checked").append).await },
                    if journaling.is_some() =>
                {
                    let flight = journaling.take().expect("a journal append in flight");
                    let appended = appended.expect("the journal task does not panic");
                    self.journaled(flight, appended);
                }
                committed = async { (&mut engine_commit.as_mut().expect("checked").commit).await },
                    if engine_commit.is_some() =>
                {
                    let flight = engine_commit.take().expect("an engine commit in flight");
                    let committed = committed.expect("the engine commit task does not panic");
                    self.engine_committed(flight.bytes, committed);
                }
            }
        }
        receiver.close();
        drop(receiver);
        self.checkpoint_at_close().await;
        // Release the engine's file before the lock and before the closers hear back.
        self.shared.engine.write().unwrap().take();
        self.shared.leases.lock().unwrap().wake.notify_one();
        drop(self);
        for done in closing {
            let _ = done.send(());
        }
    }

    /// Checkpoints what the journal holds, so the next open has nothing to replay. A failure
    /// loses nothing (the journal stays and is replayed on the next open): it is logged.
    async fn checkpoint_at_close(&self) {
        let Some(journal) = self.journal.clone() else {
            return;
        };
        if self.failed.is_some() || journal.lock().unwrap().appended() == 0 {
            return;
        }
        let engine = self.engine.clone();
        let checkpointed = tokio::task::spawn_blocking(move || {
            let mut journal = journal.lock().unwrap();
            journal.rotate()?;
            engine.checkpoint(journal.generation())?;
            journal.remove_before()
        })
        .await;
        match checkpointed {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::warn!(%error, "the store's checkpoint at close failed; its journal is replayed when it opens again")
            }
            Err(error) => {
                tracing::warn!(%error, "the store's checkpoint at close failed; its journal is replayed when it opens again")
            }
        }
    }

    /// Applies the requests at the front of `batch`, up to the byte limit, to the batch being
    /// built (`next`, started if `None`), on top of the batch being journaled. Requests past the
    /// limit stay in `batch`. A failure to read the engine stops every write.
    fn apply(
        &mut self,
        next: &mut Option<Pending>,
        batch: &mut Vec<Request>,
        closing: &mut Vec<oneshot::Sender<()>>,
        journaling: Option<&Journaling>,
    ) {
        if batch.is_empty() {
            return;
        }
        if self.failed.is_none() {
            match self.shared.snapshot(&self.engine) {
                Ok(snapshot) => {
                    if let Err(error) = self.apply_on(&snapshot, next, batch, closing, journaling) {
                        self.stop_writes(error);
                    }
                }
                Err(error) => self.stop_writes(error),
            }
        }
        if let Some(failed) = &self.failed {
            for request in batch.drain(..) {
                fail(request, failed, closing);
            }
        }
    }

    /// [`Writer::apply`] on one snapshot. Returns the first engine failure.
    fn apply_on(
        &self,
        snapshot: &Snapshot,
        next: &mut Option<Pending>,
        batch: &mut Vec<Request>,
        closing: &mut Vec<oneshot::Sender<()>>,
        journaling: Option<&Journaling>,
    ) -> Result<(), StoreError> {
        let shared = &self.shared;
        let now = Instant::now();
        let mut leases = shared.leases.lock().unwrap();
        let pending = next.get_or_insert_with(|| Pending {
            overlay: Overlay::new(),
            revision: journaling.map_or(snapshot.revision, |flight| flight.pending.revision),
            next_lease_id: leases.next_id(),
            published: Vec::new(),
            lease_changes: Vec::new(),
            replies: Vec::new(),
            frames: Vec::new(),
            records: 0,
            bytes: 0,
        });
        let mut view = snapshot.view();
        view.revision = pending.revision;
        view.lower.extend(journaling.map(|flight| &*flight.overlay));
        view.overlay = std::mem::take(&mut pending.overlay);
        let Pending {
            published,
            lease_changes,
            replies,
            frames,
            records,
            bytes,
            ..
        } = pending;
        let journaled = self.journal.is_some();
        // Records a change set; returns about how many bytes it adds to the commit.
        let mut record = |applied: Applied| -> usize {
            shared.stats.records.fetch_add(1, Ordering::Relaxed);
            *records += 1;
            let size = applied.entry.size();
            if journaled {
                journal::encode_entry(&applied.entry, frames);
            }
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
            size
        };
        let mut engine_failure = None;
        let mut requests = std::mem::take(batch).into_iter();
        for request in requests.by_ref() {
            if engine_failure.is_some() {
                batch.push(request);
                continue;
            }
            if *bytes >= self.options.max_batch_bytes {
                batch.push(request);
                break;
            }
            match request {
                Request::Txn(txn, reply) => {
                    let answer = view.apply_txn(txn, &mut leases, shared.limits);
                    let answer = answer.map(|(result, applied)| {
                        if let Some(applied) = applied {
                            *bytes += record(applied);
                        }
                        result
                    });
                    if let Err(error) = &answer
                        && is_engine_failure(error)
                    {
                        engine_failure = Some(error.clone());
                    }
                    replies.push(Reply::Txn(reply, answer));
                }
                Request::Grant(ttl, reply) => {
                    let (id, applied) = view.grant(ttl, &mut leases, now);
                    *bytes += record(applied);
                    replies.push(Reply::Grant(reply, Ok(LeaseGrant { id, ttl })));
                }
                Request::Revoke(lease, reply) => {
                    let answer = match view.revoke(lease, &mut leases) {
                        Ok(Some(applied)) => {
                            *bytes += record(applied);
                            Ok(())
                        }
                        Ok(None) => Err(StoreError::LeaseNotFound(lease)),
                        Err(error) => {
                            engine_failure = Some(error.clone());
                            Err(error)
                        }
                    };
                    replies.push(Reply::Revoke(reply, answer));
                }
                Request::Expire(lease) => {
                    if leases.is_expired(lease, now) {
                        match view.revoke(lease, &mut leases) {
                            Ok(Some(applied)) => *bytes += record(applied),
                            Ok(None) => {}
                            Err(error) => engine_failure = Some(error),
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
        pending.next_lease_id = leases.next_id();
        engine_failure.map_or(Ok(()), Err)
    }

    /// Starts appending the batch to the journal and syncing it, off the async threads. A batch
    /// that changed nothing (or one after a failure) is answered at once, and a batch of a store
    /// in memory is acknowledged at once.
    fn journal(&mut self, mut pending: Pending) -> Option<Journaling> {
        if pending.records == 0 || self.failed.is_some() {
            self.answer(pending);
            return None;
        }
        let overlay = Arc::new(std::mem::take(&mut pending.overlay));
        let Some(journal) = self.journal.clone() else {
            self.acknowledge(pending, overlay, None);
            return None;
        };
        let frames = std::mem::take(&mut pending.frames);
        let checkpoint_after_bytes = self.options.checkpoint_after_bytes;
        #[cfg(test)]
        let shared = self.shared.clone();
        let append = tokio::task::spawn_blocking(move || {
            #[cfg(test)]
            shared.journal_switch.pass("writing the journal")?;
            let mut journal = journal.lock().unwrap();
            journal.append(&frames)?;
            if journal.appended() >= checkpoint_after_bytes {
                journal.rotate()?;
                return Ok(Some(journal.generation()));
            }
            Ok(None)
        });
        Some(Journaling {
            pending,
            overlay,
            append,
            started: std::time::Instant::now(),
        })
    }

    /// Completes a batch's journal append: acknowledges the batch, or fails it and every later
    /// write.
    fn journaled(&mut self, flight: Journaling, appended: Result<Option<u64>, StoreError>) {
        match appended {
            Ok(new_generation) => {
                self.metrics
                    .record_commit("embedded", flight.pending.records, flight.started.elapsed());
                self.acknowledge(flight.pending, flight.overlay, new_generation)
            }
            Err(error) => {
                self.stop_writes(error);
                self.answer(flight.pending);
            }
        }
    }

    /// A durable batch: readers see it from now on, the engine will hold it, and its requests
    /// are answered.
    fn acknowledge(&mut self, mut pending: Pending, overlay: Arc<Overlay>, new_generation: Option<u64>) {
        self.shared.stats.syncs.fetch_add(1, Ordering::Relaxed);
        {
            let mut visible = self.shared.visible.lock().unwrap();
            visible.layers.push_back((pending.revision, overlay.clone()));
            visible.revision = pending.revision;
        }
        self.unengined_bytes += pending.bytes;
        self.acknowledged.push(Acknowledged {
            overlay,
            lease_changes: std::mem::take(&mut pending.lease_changes),
            revision: pending.revision,
            next_lease_id: pending.next_lease_id,
            new_generation,
            bytes: pending.bytes,
        });
        self.announce(pending);
    }

    /// Answers a batch that was not made durable: with the failure if writes have stopped, else
    /// (it changed nothing) with what it read.
    fn answer(&mut self, pending: Pending) {
        if let Some(failed) = &self.failed {
            for reply in pending.replies {
                reply.send(Some(failed));
            }
            return;
        }
        self.announce(pending);
    }

    /// Announces a batch's changes to watchers and answers its requests. A durable batch is
    /// announced even if writes stopped while its journal was synced: it is visible, and the
    /// journal brings it back on the next open.
    fn announce(&mut self, pending: Pending) {
        if !pending.published.is_empty() {
            {
                let mut history = self.shared.history.lock().unwrap();
                for (revision, events) in pending.published {
                    history.push(revision, events);
                }
            }
            self.committed.send_replace(pending.revision);
        }
        for reply in pending.replies {
            reply.send(None);
        }
    }

    /// Starts committing the acknowledged batches to the engine in one write transaction, off
    /// the async threads: not synced (the journal holds them). A batch that was the last of a
    /// journal generation ends the commit, which is then the checkpoint at the next generation
    /// (synced, and the journals before it removed once it returns): a checkpoint holds exactly
    /// the journals it removes, and replay starts at the first batch it does not hold.
    fn commit_to_engine(&mut self) -> Option<EngineCommit> {
        if self.acknowledged.is_empty() || self.failed.is_some() {
            return None;
        }
        let end = self
            .acknowledged
            .iter()
            .position(|batch| batch.new_generation.is_some())
            .map_or(self.acknowledged.len(), |last| last + 1);
        let batches: Vec<Acknowledged> = self.acknowledged.drain(..end).collect();
        let bytes = batches.iter().map(|batch| batch.bytes).sum();
        let engine = self.engine.clone();
        let journal_dir = self.dir.clone();
        #[cfg(test)]
        let shared = self.shared.clone();
        let commit = tokio::task::spawn_blocking(move || {
            #[cfg(test)]
            shared.engine_switch.pass("committing to the store")?;
            let newest = batches.last().expect("at least one batch");
            let checkpoint = newest.new_generation;
            let overlays: Vec<&Overlay> = batches.iter().map(|batch| &*batch.overlay).collect();
            let lease_changes: Vec<(i64, Option<i64>)> = batches
                .iter()
                .flat_map(|batch| batch.lease_changes.iter().copied())
                .collect();
            engine.commit(&Commit {
                overlays: &overlays,
                lease_changes: &lease_changes,
                revision: newest.revision,
                next_lease_id: newest.next_lease_id,
                checkpoint,
            })?;
            if let (Some(generation), Some(dir)) = (checkpoint, journal_dir) {
                journal::remove_before(&dir, generation)?;
            }
            Ok(newest.revision)
        });
        Some(EngineCommit { bytes, commit })
    }

    /// Completes an engine commit: readers find its batches in the engine from now on. A failed
    /// commit stops every write (the batches stay readable: they are in the journal).
    fn engine_committed(&mut self, bytes: usize, committed: Result<i64, StoreError>) {
        self.unengined_bytes -= bytes;
        match committed {
            Ok(revision) => {
                self.shared.stats.engine_commits.fetch_add(1, Ordering::Relaxed);
                let mut visible = self.shared.visible.lock().unwrap();
                while visible
                    .layers
                    .front()
                    .is_some_and(|(layer, _)| *layer <= revision)
                {
                    visible.layers.pop_front();
                }
                visible.engine_revision = revision;
            }
            Err(error) => self.stop_writes(error),
        }
    }

    /// Fails every later write with `error`, keeping the first failure.
    fn stop_writes(&mut self, error: StoreError) {
        self.failed.get_or_insert(error);
        self.shared.writes_failed.store(true, Ordering::Relaxed);
    }
}

/// Whether an error is the engine failing (rather than the store refusing a request).
fn is_engine_failure(error: &StoreError) -> bool {
    matches!(error, StoreError::Io { .. } | StoreError::Corrupt(_))
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

    /// After a failed commit, the writes in that batch fail, every later write fails too (the
    /// page cache can no longer be trusted), reads go on from what was committed, and a reopened
    /// store has exactly what was acknowledged.
    #[tokio::test]
    async fn a_failed_commit_stops_all_writes() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = EmbeddedStore::open(dir.path(), EmbeddedOptions::default())
            .await
            .unwrap();
        put(&store, "acknowledged").await.unwrap();
        assert!(store.is_open());
        store.shared.journal_switch.fail.store(true, Ordering::Relaxed);
        assert!(matches!(put(&store, "failed").await, Err(StoreError::Io { .. })));
        assert!(!store.is_open());
        store.shared.journal_switch.fail.store(false, Ordering::Relaxed);
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

    /// An engine commit that fails stops every later write, but loses nothing acknowledged: the
    /// batches it held stay readable, and the journal brings them back when the store reopens.
    #[tokio::test]
    async fn a_failed_engine_commit_stops_writes_and_loses_nothing_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_with_the_engine_held(dir.path()).await;
        put(&store, "held").await.unwrap();
        put(&store, "waiting").await.unwrap();
        store.shared.engine_switch.fail.store(true, Ordering::Relaxed);
        store.shared.engine_switch.hold.store(false, Ordering::Relaxed);
        eventually("the failed engine commit stops writes", || !store.is_open()).await;
        assert!(matches!(put(&store, "later").await, Err(StoreError::Io { .. })));
        for key in ["before", "held", "waiting"] {
            assert!(store.get(key.as_bytes()).await.unwrap().0.is_some(), "{key}");
        }
        store.close().await;

        let (store, report) = EmbeddedStore::open(dir.path(), EmbeddedOptions::default())
            .await
            .unwrap();
        assert_eq!(
            report.replayed_records, 3,
            "the journal holds every acknowledged batch"
        );
        for key in ["before", "held", "waiting"] {
            assert!(store.get(key.as_bytes()).await.unwrap().0.is_some(), "{key}");
        }
        assert_eq!(store.get(b"later").await.unwrap().0, None);
        store.close().await;
    }

    /// A batch whose journal sync completes after an engine commit failed is durable: it is
    /// acknowledged, readable, and back after reopening; only the writes after it fail.
    #[tokio::test]
    async fn a_batch_made_durable_as_the_engine_fails_is_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_with_the_engine_held(dir.path()).await;
        put(&store, "held").await.unwrap();
        store.shared.journal_switch.hold.store(true, Ordering::Relaxed);
        let journaled = tokio::spawn({
            let store = store.clone();
            async move { put(&store, "journaled").await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        store.shared.engine_switch.fail.store(true, Ordering::Relaxed);
        store.shared.engine_switch.hold.store(false, Ordering::Relaxed);
        eventually("the failed engine commit stops writes", || !store.is_open()).await;
        store.shared.journal_switch.hold.store(false, Ordering::Relaxed);
        journaled.await.unwrap().expect("a durable batch is acknowledged");
        assert!(store.get(b"journaled").await.unwrap().0.is_some());
        assert!(matches!(put(&store, "later").await, Err(StoreError::Io { .. })));
        store.close().await;

        let (store, _) = EmbeddedStore::open(dir.path(), EmbeddedOptions::default())
            .await
            .unwrap();
        for key in ["before", "held", "journaled"] {
            assert!(store.get(key.as_bytes()).await.unwrap().0.is_some(), "{key}");
        }
        store.close().await;
    }

    /// Waits up to 5 s for `condition`.
    async fn eventually(what: &str, condition: impl Fn() -> bool) {
        for _ in 0..2500 {
            if condition() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        panic!("not within 5 s: {what}");
    }

    /// A store in `dir` holding the key `before` in its engine, whose next engine commits wait
    /// until the test releases `engine_switch.hold`.
    async fn open_with_the_engine_held(dir: &Path) -> EmbeddedStore {
        let (store, _) = EmbeddedStore::open(dir, EmbeddedOptions::default())
            .await
            .unwrap();
        put(&store, "before").await.unwrap();
        eventually("the engine holds the first write", || {
            store.stats().engine_commits == 1
        })
        .await;
        store.shared.engine_switch.hold.store(true, Ordering::Relaxed);
        store
    }

    fn value(found: Option<KeyValue>) -> Option<Vec<u8>> {
        found.map(|kv| kv.value)
    }

    /// A write is acknowledged once its journal is synced: reads see it, and later writes build
    /// on it, while the engine does not hold it yet. The engine then takes every batch
    /// acknowledged meanwhile in one commit, each key in its latest state, and a reopened store
    /// has exactly that.
    #[tokio::test]
    async fn reads_see_acknowledged_writes_the_engine_does_not_hold_yet() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_with_the_engine_held(dir.path()).await;
        // The first write's engine commit starts and is held; the next ones wait behind it.
        for key in ["a", "b", "c", "gone"] {
            put(&store, key).await.unwrap();
        }
        store
            .txn(Txn::new().and_then([TxnOp::delete("gone"), TxnOp::put("a", "again")]))
            .await
            .unwrap();
        let kept_version = store
            .txn(
                Txn::new()
                    .when([crate::types::Compare::version_is("a", 2)])
                    .and_then([TxnOp::put("b", "seen a twice")]),
            )
            .await
            .unwrap();
        assert!(kept_version.succeeded, "a later write sees the earlier ones");
        assert_eq!(value(store.get(b"a").await.unwrap().0), Some(b"again".to_vec()));
        assert_eq!(value(store.get(b"gone").await.unwrap().0), None);
        let listed = store.range(RangeRequest::new(KeyRange::from("a"))).await.unwrap();
        let keys: Vec<&[u8]> = listed.kvs.iter().map(|kv| kv.key.as_slice()).collect();
        assert_eq!(keys, [&b"a"[..], b"b", b"before", b"c"]);
        let stats = store.stats();
        assert_eq!(stats.syncs, 7, "{stats:?}");
        assert_eq!(stats.engine_commits, 1, "the engine was held: {stats:?}");

        store.shared.engine_switch.hold.store(false, Ordering::Relaxed);
        eventually("three engine commits", || store.stats().engine_commits >= 3).await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(
            store.stats().engine_commits,
            3,
            "the six held batches go in two engine commits: the first one's, then the rest"
        );
        assert_eq!(
            value(store.get(b"b").await.unwrap().0),
            Some(b"seen a twice".to_vec())
        );
        store.close().await;

        let (store, report) = EmbeddedStore::open(dir.path(), EmbeddedOptions::default())
            .await
            .unwrap();
        assert_eq!(report.replayed_records, 0, "the clean close checkpointed");
        assert_eq!(value(store.get(b"a").await.unwrap().0), Some(b"again".to_vec()));
        assert_eq!(value(store.get(b"gone").await.unwrap().0), None);
        assert_eq!(report.keys, 4);
        store.close().await;
    }
}
