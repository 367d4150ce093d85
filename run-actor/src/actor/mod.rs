//! Run actors: one task per live run. Commands to a run are applied one at a time, in arrival
//! order; what queued while the previous commit was in flight is applied as one batch and
//! committed in ONE store transaction, so many commands share one log sync.
//!
//! A batch's transaction:
//!
//! - compare: the run record's version is the one this actor last committed (0: no run yet),
//!   every idempotency key of a command that succeeded is absent, and in a cluster the fence:
//!   this host still owns the run's shard ([`crate::RunFence`]);
//! - put: the run record, index and timer entries that changed, claim keys (attached to store
//!   leases), outbox entries, idempotency records and their expiry entries;
//! - delete: index, timer and claim entries that no longer hold.
//!
//! Replies go out only after the commit. When a compare fails (a concurrent retry of the same
//! `requestId` landed first, or the run changed under this actor), nothing was written and the
//! batch is redone one command at a time, each looking for its idempotency record first.
//! A refusal is never recorded; when it comes with a state to remember, that state is
//! committed with the batch.

mod archiving;
mod claim_leases;
mod events;
pub(crate) mod plan;
pub(crate) mod records;

pub(crate) use records::ARCHIVE_TIMER;
pub use records::{OutboxEntry, OutboxEvent, Recipients, timer_command};

use crate::call::{RuntimeError, ToolOutcome};
use crate::config::RuntimeConfig;
pub(crate) use crate::idempotency::RequestKey;
use crate::machine::{
    self, Command, Ctx, Effect, Notification, OrgId, PinnedProcess, Refusal, Reply, RunId, RunState, StepId,
    Timestamp, Transition, UploadLookup, UploadStatus, history,
};
use crate::packed;
use crate::pinned::{LatestGuard, PinnedProcesses};
use agentprocess_org::{Archive, Clock};
use agentprocess_service::trace::{self, TraceParent};
use agentprocess_store::Store;
use agentprocess_store::keys::Keys;
use agentprocess_store::{RangeRequest, StoreError, Txn, TxnOp};
use records::ClaimRecord;
pub(crate) use records::IndexEntries;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

/// How many commands may wait for one run's actor before senders wait.
const MAILBOX: usize = 1024;
/// Most operations one transaction carries (the store's, and etcd's, default limit is 128).
const MAX_TXN_OPS: usize = 128;

/// Which run an actor owns. Runs are per organization, so the organization is part of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RunAddress {
    pub organization: OrgId,
    pub run_id: RunId,
}

/// Counters of the runtime, for benchmarks and metrics.
#[derive(Debug, Default)]
pub struct Stats {
    pub commands: AtomicU64,
    pub commits: AtomicU64,
    pub loads: AtomicU64,
    pub evictions: AtomicU64,
}

/// What every actor of a runtime shares: the store, the key layout, the settings, the clock, the
/// pinned processes, the counters, and the actors in memory by run.
#[derive(Debug)]
pub(crate) struct Host {
    pub store: Arc<dyn Store>,
    pub keys: Keys,
    pub config: RuntimeConfig,
    pub clock: Clock,
    pub pinned: PinnedProcesses,
    pub stats: Stats,
    /// Where ended runs go once their time in the hot store is over.
    pub archive: Archive,
    pub actors: Mutex<HashMap<RunAddress, mpsc::Sender<Mail>>>,
    /// Store leases shared by claims that end in the same window.
    pub claim_leases: claim_leases::ClaimLeases,
    /// Seen to be true: every run the store held is filed under its inputs' values.
    pub runs_filed_by_input: std::sync::atomic::AtomicBool,
    /// `get_work` calls waiting for work, by organization.
    pub waiters: Arc<crate::runtime::waiting::WorkWaiters>,
    /// Copies of the organizations' work indexes that `get_work` pages are read from (a
    /// cluster's actor host); `None` reads every page from the store.
    pub mirrors: Option<Arc<crate::runtime::mirror::IndexMirrors>>,
}

/// Where a run's record was found.
#[derive(Debug)]
pub(crate) enum RunRecord {
    /// In the hot store, at this store version.
    Hot { bytes: Vec<u8>, version: i64 },
    /// In the archive: the run ended and left the hot store.
    Archived(Vec<u8>),
}

impl Host {
    /// The record of run `run_id`: from the hot store, else (if `search` says so) from the
    /// archive; `None` when neither holds it.
    pub(crate) async fn run_record(
        &self,
        organization: &OrgId,
        run_id: &RunId,
        search: Search,
    ) -> Result<Option<RunRecord>, RuntimeError> {
        if search == Search::Nowhere {
            return Ok(None);
        }
        let (record, _) = self.store.get(&self.keys.run(organization, run_id)).await?;
        if let Some(record) = record {
            return Ok(Some(RunRecord::Hot {
                bytes: record.value,
                version: record.version,
            }));
        }
        Ok(self
            .archive
            .run_record(organization, run_id)
            .await?
            .map(RunRecord::Archived))
    }
}

/// What an actor's mailbox carries: a command to apply, or the order to move its ended run to
/// the archive (the scheduler's [`ARCHIVE_TIMER`]).
#[derive(Debug)]
pub(crate) enum Mail {
    /// Boxed, so that an idle actor's mailbox costs a block of pointers, not of envelopes.
    Apply(Box<Envelope>),
    Archive(oneshot::Sender<Result<(), RuntimeError>>),
}

/// One command on its way to an actor, with what the actor needs to apply it.
#[derive(Debug)]
pub(crate) struct Envelope {
    pub command: Command,
    pub request: Option<RequestKey>,
    pub seed: [u8; 32],
    /// The process a `start_run` pins.
    pub pinned: Option<Arc<PinnedProcess>>,
    /// When that is the latest version as this host last read it: what the commit compares.
    pub latest_guard: Option<LatestGuard>,
    /// Upload statuses looked up for the command's file evidence.
    pub uploads: HashMap<String, UploadStatus>,
    pub reply: Option<oneshot::Sender<Result<ToolOutcome, RuntimeError>>>,
    /// The trace of the call that sent the command, if it came in one: the actor's spans of the
    /// command hang under it.
    pub trace: Option<TraceParent>,
}

impl Envelope {
    pub(crate) fn new(
        command: Command,
        request: Option<RequestKey>,
        seed: [u8; 32],
        pinned: Option<Arc<PinnedProcess>>,
        uploads: HashMap<String, UploadStatus>,
    ) -> Self {
        Envelope {
            command,
            request,
            seed,
            pinned,
            latest_guard: None,
            uploads,
            reply: None,
            trace: trace::current(),
        }
    }

    fn answer(self, outcome: Result<ToolOutcome, RuntimeError>) {
        if let Some(reply) = self.reply {
            let _ = reply.send(outcome);
        }
    }
}

/// The sender of the run's actor, spawning the actor if it is not in memory.
pub(crate) fn sender(host: &Arc<Host>, address: &RunAddress) -> mpsc::Sender<Mail> {
    let mut actors = host.actors.lock().unwrap();
    if let Some(sender) = actors.get(address)
        && !sender.is_closed()
    {
        return sender.clone();
    }
    let (sender, receiver) = mpsc::channel(MAILBOX);
    // A closed sender still in the map is replaced: the count of actors stays the same.
    if actors.insert(address.clone(), sender.clone()).is_none() {
        host.config.metrics.live_actors.add(1, &[]);
    }
    let actor = Actor {
        host: host.clone(),
        address: address.clone(),
        loaded: None,
    };
    tokio::spawn(actor.run(receiver));
    sender
}

/// Drops a sender whose actor has stopped, unless a new actor took its place already.
pub(crate) fn forget(host: &Host, address: &RunAddress, stale: &mpsc::Sender<Mail>) {
    let mut actors = host.actors.lock().unwrap();
    if actors
        .get(address)
        .is_some_and(|current| current.same_channel(stale))
    {
        actors.remove(address);
        host.config.metrics.live_actors.add(-1, &[]);
    }
}

/// A live claim as the store knows it.
#[derive(Debug, Clone)]
struct ClaimLease {
    lease: u64,
    expires_at: Timestamp,
}

/// What the actor knows the store holds for its run.
#[derive(Debug)]
struct Loaded {
    run: Option<RunState>,
    /// The run record's store version (0: no record).
    version: i64,
    pinned: Option<Arc<PinnedProcess>>,
    index: IndexEntries,
    claims: HashMap<StepId, ClaimLease>,
    /// The run was read from the archive: it ended, and the hot store no longer holds it.
    archived: bool,
}

/// How one attempt at a batch ended.
enum Attempt {
    Done,
    /// Compares failed: nothing was written. The envelopes come back unanswered.
    Raced(Vec<Envelope>),
    /// More operations than one transaction may carry: split the batch.
    TooLarge(Vec<Envelope>),
}

/// Upload statuses looked up before the command reached the actor.
#[derive(Debug)]
struct Prefetched<'a>(&'a HashMap<String, UploadStatus>);

impl UploadLookup for Prefetched<'_> {
    fn lookup(&self, _organization: &OrgId, upload_id: &str) -> UploadStatus {
        self.0.get(upload_id).cloned().unwrap_or(UploadStatus::NotFound)
    }
}

/// The outcome of one command within a batch, before the commit.
pub(crate) enum Applied {
    Ok {
        data: Value,
        notifications: Vec<Notification>,
    },
    Refused(Refusal),
}

/// A batch applied to a working copy of the run: the run and the process it pins afterwards,
/// one outcome per command, and the history events the batch appended (a log line each once
/// committed).
struct AppliedBatch {
    run: Option<RunState>,
    pinned: Option<Arc<PinnedProcess>>,
    outcomes: Vec<Applied>,
    events: Vec<events::Change>,
    /// Each command's span, in its order.
    spans: Vec<tracing::Span>,
}

struct Actor {
    host: Arc<Host>,
    address: RunAddress,
    loaded: Option<Loaded>,
}

impl Actor {
    async fn run(mut self, mut mailbox: mpsc::Receiver<Mail>) {
        let idle = self.host.config.idle_eviction;
        let max_batch = self.host.config.max_batch.max(1);
        // Mail taken out of the mailbox while collecting a batch, that the batch cannot carry.
        let mut held: Option<Mail> = None;
        loop {
            let mail = match held.take() {
                Some(mail) => mail,
                None => match tokio::time::timeout(idle, mailbox.recv()).await {
                    Ok(Some(mail)) => mail,
                    Ok(None) => return,
                    Err(_) => {
                        if self.evict_if_idle(&mailbox) {
                            return;
                        }
                        continue;
                    }
                },
            };
            let first = match mail {
                Mail::Apply(envelope) => envelope,
                Mail::Archive(done) => {
                    let outcome = self.archive().await;
                    let _ = done.send(outcome);
                    // Archived or not, an ended run has nothing left to wait for.
                    if self.evict_if_idle(&mailbox) {
                        return;
                    }
                    continue;
                }
            };
            let mut batch = vec![*first];
            while batch.len() < max_batch {
                match mailbox.try_recv() {
                    Ok(Mail::Apply(envelope)) => batch.push(*envelope),
                    Ok(archive) => {
                        held = Some(archive);
                        break;
                    }
                    Err(_) => break,
                }
            }
            self.handle(batch).await;
            // An ended run refuses every later write from its record alone, and a run that does
            // not exist (a start that was not committed, a call naming no run) holds nothing:
            // keep no actor for either. A caller refused `retry` makes a start again under a new
            // run id, so an actor kept for each refused start would pile up under overload.
            if held.is_none() && (self.run_ended() || self.no_run()) && self.evict_if_idle(&mailbox) {
                return;
            }
        }
    }

    /// Leaves memory unless mail arrived meanwhile; whether it left. Senders are handed out
    /// under the same lock, so none can appear once the entry is gone.
    fn evict_if_idle(&self, mailbox: &mpsc::Receiver<Mail>) -> bool {
        let mut actors = self.host.actors.lock().unwrap();
        if !mailbox.is_empty() {
            return false;
        }
        if actors.remove(&self.address).is_some() {
            self.host.config.metrics.live_actors.add(-1, &[]);
        }
        self.host.stats.evictions.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Read, and no run is there.
    fn no_run(&self) -> bool {
        self.loaded.as_ref().is_some_and(|loaded| loaded.run.is_none())
    }

    fn run_ended(&self) -> bool {
        self.loaded
            .as_ref()
            .and_then(|loaded| loaded.run.as_ref())
            .is_some_and(|run| run.end.is_some())
    }

    /// Applies a batch in order. A `requestId` seen twice in one batch starts a new batch, so
    /// that the second sees the first's record.
    async fn handle(&mut self, mut batch: Vec<Envelope>) {
        while !batch.is_empty() {
            let cut = (1..batch.len())
                .find(|&i| {
                    batch[i].request.as_ref().is_some_and(|r| {
                        batch[..i]
                            .iter()
                            .any(|e| e.request.as_ref().is_some_and(|q| q.id == r.id))
                    })
                })
                .unwrap_or(batch.len());
            let rest = batch.split_off(cut);
            self.handle_batch(batch).await;
            batch = rest;
        }
    }

    async fn handle_batch(&mut self, batch: Vec<Envelope>) {
        let mut pending = vec![batch];
        while let Some(batch) = pending.pop() {
            match self.attempt(batch).await {
                Attempt::Done => {}
                Attempt::TooLarge(mut batch) => {
                    let second = batch.split_off(batch.len() / 2);
                    pending.push(second);
                    pending.push(batch);
                }
                Attempt::Raced(batch) => {
                    for envelope in batch {
                        self.handle_alone(envelope).await;
                    }
                }
            }
        }
    }

    /// One command by itself, after a race: answer from its record if there is one, else
    /// reload the run and apply it again.
    async fn handle_alone(&mut self, envelope: Envelope) {
        let mut envelope = envelope;
        for _ in 0..3 {
            if let Some(request) = &envelope.request {
                match crate::idempotency::replay(
                    self.host.store.as_ref(),
                    &self.host.keys,
                    &self.host.pinned,
                    &self.address.organization,
                    &request.id,
                    &request.fingerprint,
                )
                .await
                {
                    Ok(Some(answer)) => return envelope.answer(Ok(answer)),
                    Ok(None) => {}
                    Err(e) => return envelope.answer(Err(e)),
                }
            }
            // A start on a latest version that is no longer the latest goes back to be made
            // again: applied again here it would fail the same compare.
            if let Some(guard) = &envelope.latest_guard {
                match self
                    .host
                    .pinned
                    .guard_holds(self.host.store.as_ref(), guard)
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => {
                        let process = guard.process.clone();
                        return envelope.answer(Err(RuntimeError::LatestMoved(process)));
                    }
                    Err(e) => return envelope.answer(Err(e)),
                }
            }
            // Read the run again, wherever it is: a start that raced may have found its run.
            self.loaded = None;
            if let Err(error) = self.load(Search::HotStoreAndArchive).await {
                return envelope.answer(Err(error));
            }
            match self.attempt(vec![envelope]).await {
                Attempt::Done => return,
                Attempt::Raced(mut back) | Attempt::TooLarge(mut back) => {
                    envelope = back.pop().expect("one envelope");
                }
            }
        }
        self.loaded = None;
        envelope.answer(Err(RuntimeError::Corrupt(
            "the run kept changing under its actor".into(),
        )));
    }

    async fn load(&mut self, search: Search) -> Result<(), RuntimeError> {
        if self.loaded.is_some() {
            return Ok(());
        }
        let host = &self.host;
        let RunAddress { organization, run_id } = &self.address;
        let (record, version, archived) = match host.run_record(organization, run_id, search).await? {
            Some(RunRecord::Hot { bytes, version }) => (bytes, version, false),
            Some(RunRecord::Archived(bytes)) => (bytes, 0, true),
            None => {
                self.loaded = Some(Loaded {
                    run: None,
                    version: 0,
                    pinned: None,
                    index: IndexEntries::new(),
                    claims: HashMap::new(),
                    archived: false,
                });
                return Ok(());
            }
        };
        let run: RunState =
            packed::read_json(&record).map_err(|e| RuntimeError::Corrupt(format!("run {run_id}: {e}")))?;
        let pinned = host
            .pinned
            .get(organization, &run.process, run.version)
            .await?
            .ok_or_else(|| {
                RuntimeError::Corrupt(format!(
                    "run {run_id} pins {} v{}, which is not published",
                    run.process, run.version
                ))
            })?;
        let mut claims = HashMap::new();
        let found = host
            .store
            .range(RangeRequest::new(host.keys.run_claims(organization, run_id)))
            .await?;
        for kv in found.kvs {
            let (Some(key), Ok(record)) = (
                host.keys.parse_claim(&kv.key),
                serde_json::from_slice::<ClaimRecord>(&kv.value),
            ) else {
                continue;
            };
            claims.insert(
                key.step_id,
                ClaimLease {
                    lease: record.lease,
                    expires_at: record.expires_at,
                },
            );
        }
        host.stats.loads.fetch_add(1, Ordering::Relaxed);
        self.loaded = Some(Loaded {
            index: if archived {
                IndexEntries::new()
            } else {
                records::index_of(&host.keys, &pinned, &run, archive_after_ms(&host.config))
            },
            run: Some(run),
            version,
            pinned: Some(pinned),
            claims,
            archived,
        });
        Ok(())
    }

    /// One try at a batch: apply its commands to a working copy of the run, plan the
    /// transaction, add the claim keys (which need store leases), commit, then act.
    async fn attempt(&mut self, batch: Vec<Envelope>) -> Attempt {
        let search = search_for(batch.iter().map(|e| &e.command), &self.host.config);
        if let Err(e) = self.load(search).await {
            for envelope in batch {
                envelope.answer(Err(e.clone()));
            }
            return Attempt::Done;
        }
        let applied = self.apply_batch(&batch).await;
        let loaded = self.loaded.as_ref().expect("loaded above");
        let changed = applied.run != loaded.run;
        let records_needed = batch
            .iter()
            .zip(&applied.outcomes)
            .any(|(e, a)| e.request.is_some() && matches!(a, Applied::Ok { .. }));
        if !changed && !records_needed {
            // Nothing to commit, so no fence is checked: a fenced host answers from what it
            // read only once the store shows that is still the run (it may have been frozen
            // while another host changed the run).
            match self.loaded_is_current().await {
                Ok(true) => {}
                Ok(false) => {
                    self.loaded = None;
                    return Attempt::Raced(batch);
                }
                Err(error) => {
                    self.loaded = None;
                    for envelope in batch {
                        envelope.answer(Err(error.clone()));
                    }
                    return Attempt::Done;
                }
            }
            self.answer(batch, applied.outcomes).await;
            return Attempt::Done;
        }
        if loaded.archived {
            // Every write to an ended run is refused; one that is not would bring it back.
            for envelope in batch {
                envelope.answer(Err(RuntimeError::Corrupt(format!(
                    "run {} is archived and cannot change",
                    self.address.run_id
                ))));
            }
            return Attempt::Done;
        }
        let requests: Vec<Option<&RequestKey>> = batch.iter().map(|e| e.request.as_ref()).collect();
        let plan = match plan::plan(plan::Inputs {
            keys: &self.host.keys,
            address: &self.address,
            loaded_version: loaded.version,
            loaded_index: &loaded.index,
            run: applied.run.as_ref(),
            pinned: applied.pinned.as_deref(),
            changed,
            requests: &requests,
            outcomes: &applied.outcomes,
            now: self.host.clock.now(),
            retention_seconds: self.host.config.idempotency_retention.as_secs(),
            archive_after_ms: archive_after_ms(&self.host.config),
        }) {
            Ok(plan) => plan,
            Err(error) => {
                for envelope in batch {
                    envelope.answer(Err(error.clone()));
                }
                return Attempt::Done;
            }
        };
        if plan.ops.len() > MAX_TXN_OPS && batch.len() > 1 {
            return Attempt::TooLarge(batch);
        }
        let (claim_ops, claims) = match self.claim_changes(applied.run.as_ref()).await {
            Ok(changes) => changes,
            Err(e) => {
                for envelope in batch {
                    envelope.answer(Err(e.clone().into()));
                }
                return Attempt::Done;
            }
        };
        let mut ops = plan.ops;
        ops.extend(claim_ops);
        let mut compares = plan.compares;
        for guard in batch.iter().filter_map(|envelope| envelope.latest_guard.as_ref()) {
            let compare = guard.compare();
            if !compares.contains(&compare) {
                compares.push(compare);
            }
        }
        match self.fence() {
            Ok(Some(fence)) => compares.push(fence),
            Ok(None) => {}
            Err(error) => {
                self.loaded = None;
                for envelope in batch {
                    envelope.answer(Err(error.clone()));
                }
                return Attempt::Done;
            }
        }
        let operations = ops.len();
        let txn = Txn::new().when(compares).and_then(ops);
        // One span per command, in that command's trace: each call's trace shows the commit it
        // waited for, with the batch it shared.
        let commit_spans: Vec<tracing::Span> = applied
            .spans
            .iter()
            .map(|command| {
                tracing::debug_span!(parent: command, "store_commit", commands = batch.len(), operations)
            })
            .collect();
        let started = Instant::now();
        let committed = self.host.store.txn(txn).await;
        drop(commit_spans);
        if let Ok(result) = &committed {
            self.host
                .config
                .metrics
                .record_commit(result.succeeded, started.elapsed());
        }
        match committed {
            Ok(result) if result.succeeded => {
                self.host.stats.commits.fetch_add(1, Ordering::Relaxed);
                self.loaded = Some(Loaded {
                    run: applied.run,
                    version: plan.version,
                    pinned: applied.pinned,
                    index: plan.index,
                    claims,
                    archived: false,
                });
                self.after_commit(plan.earliest_new_timer, plan.notified, &applied.events);
                self.answer(batch, applied.outcomes).await;
                Attempt::Done
            }
            Ok(_) => match self.fence_lost().await {
                None => Attempt::Raced(batch),
                Some(error) => {
                    self.loaded = None;
                    for envelope in batch {
                        envelope.answer(Err(error.clone()));
                    }
                    Attempt::Done
                }
            },
            // Over the store's operation count or request size (many claim results, each with
            // its run data, in idempotency records): commit the batch in halves.
            Err(StoreError::TooLarge(_)) if batch.len() > 1 => Attempt::TooLarge(batch),
            // A shared claim lease the store no longer knows: nothing was written; stop handing
            // it out and apply the batch again (a new lease is granted).
            Err(StoreError::LeaseNotFound(lease)) => {
                self.host.claim_leases.forget(lease).await;
                self.loaded = None;
                Attempt::Raced(batch)
            }
            // Not sent: the run is as loaded, and each caller is told to come back.
            Err(error @ StoreError::Overloaded { .. }) => {
                for envelope in batch {
                    envelope.answer(Err(error.clone().into()));
                }
                Attempt::Done
            }
            Err(e) => {
                // The outcome is unknown: forget what we know and read the store again next time.
                self.loaded = None;
                for envelope in batch {
                    envelope.answer(Err(e.clone().into()));
                }
                Attempt::Done
            }
        }
    }

    /// The compare that fences this run's writes to its shard's owner: `None` when this process
    /// owns every run, an error when this host does not own the run's shard now.
    fn fence(&self) -> Result<Option<agentprocess_store::Compare>, RuntimeError> {
        match &self.host.config.fence {
            None => Ok(None),
            Some(fence) => fence
                .compare(&self.address.run_id)
                .map(Some)
                .map_err(RuntimeError::NotOwner),
        }
    }

    /// Whether the run as this actor last read or wrote it is still the run in the store: always
    /// when this process owns every run (nothing else writes them); else by reading the run
    /// record's version now. A run that was not there still is not when the hot store has no
    /// record of it (a run started, ended and archived elsewhere in between is not looked for:
    /// that takes the archive retention, and the actor of an absent run leaves memory when idle).
    async fn loaded_is_current(&self) -> Result<bool, RuntimeError> {
        if self.host.config.fence.is_none() {
            return Ok(true);
        }
        let loaded = self.loaded.as_ref().expect("loaded before answering");
        let RunAddress { organization, run_id } = &self.address;
        let (record, _) = self
            .host
            .store
            .get(&self.host.keys.run(organization, run_id))
            .await?;
        Ok(match record {
            Some(record) => loaded.run.is_some() && !loaded.archived && record.version == loaded.version,
            // Archiving is the run's last change: an archived run stays as it was read.
            None => loaded.archived || loaded.run.is_none(),
        })
    }

    /// After a transaction whose compares failed: why, when it is that this host lost the
    /// run's shard (or cannot tell); `None` when the fence held and the run raced.
    async fn fence_lost(&self) -> Option<RuntimeError> {
        let fence = self.host.config.fence.as_ref()?;
        match fence.still_holds(&self.address.run_id).await {
            Ok(true) => None,
            Ok(false) => Some(RuntimeError::NotOwner(format!(
                "this host no longer owns the shard of run {}",
                self.address.run_id
            ))),
            Err(error) => Some(error.into()),
        }
    }

    /// Applies every command of the batch in order to a working copy of the run.
    async fn apply_batch(&self, batch: &[Envelope]) -> AppliedBatch {
        let host = &self.host;
        let config = &host.config;
        let loaded = self.loaded.as_ref().expect("loaded before applying");
        let run_id = &self.address.run_id;
        let mut work = loaded.run.clone();
        let mut pinned = loaded.pinned.clone();
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut events = Vec::new();
        let mut spans = Vec::with_capacity(batch.len());
        for envelope in batch {
            let Some(process) = pinned.clone().or_else(|| envelope.pinned.clone()) else {
                outcomes.push(Applied::Refused(machine::no_such_run(&envelope.command)));
                continue;
            };
            let apply = |command: Command, run: Option<&RunState>| {
                let uploads = Prefetched(&envelope.uploads);
                let ctx = Ctx {
                    now: host.clock.now(),
                    seed: envelope.seed,
                    limits: config.limits,
                    person_format: config.person_format,
                    escalate_to: &config.escalate_to,
                    uploads: &uploads,
                };
                machine::apply(&process, run, command, &ctx)
            };
            let span = command_span(run_id, envelope);
            let mut result = span.in_scope(|| apply(envelope.command.clone(), work.as_ref()));
            // check-1: ask the evaluator, then apply the same command with its outcome. The run
            // waits meanwhile: the outcome is judged against the state it was asked about.
            if let Ok(Transition {
                reply: Reply::NeedsEvaluation(request),
                ..
            }) = &result
            {
                let evaluator_call = tracing::debug_span!(parent: &span, "evaluator_call");
                let outcome = crate::config::evaluate(config.evaluator.as_ref(), request)
                    .instrument(evaluator_call)
                    .await;
                result =
                    span.in_scope(|| apply(envelope.command.clone().with_evaluation(outcome), work.as_ref()));
            }
            match result {
                Ok(transition) => {
                    events.extend(changes(work.as_ref(), &transition.state, envelope));
                    let notifications = transition
                        .effects
                        .into_iter()
                        .map(|Effect::Notify(notification)| notification)
                        .collect();
                    if work.is_none() {
                        pinned = Some(process);
                    }
                    work = Some(transition.state);
                    outcomes.push(Applied::Ok {
                        data: transition.reply.into_data(),
                        notifications,
                    });
                }
                Err(mut refusal) => {
                    if let Some(state) = refusal.remember.take() {
                        events.extend(changes(work.as_ref(), &state, envelope));
                        work = Some(*state);
                    }
                    outcomes.push(Applied::Refused(refusal));
                }
            }
            spans.push(span);
        }
        AppliedBatch {
            run: work,
            pinned,
            outcomes,
            events,
            spans,
        }
    }

    /// What follows a commit: the scheduler told of new timers and notifications, the run's
    /// events logged.
    fn after_commit(&self, earliest_new_timer: Option<u64>, notified: bool, events: &[events::Change]) {
        let host = &self.host;
        if let Some(fire_at) = earliest_new_timer {
            host.config
                .hints
                .timer_armed(i64::try_from(fire_at).unwrap_or(i64::MAX));
        }
        if notified {
            host.config.hints.outbox_written();
        }
        let process = self
            .loaded
            .as_ref()
            .and_then(|l| l.run.as_ref())
            .map_or("", |run| run.process.as_str());
        events::log(&self.address, process, events);
        events::count(&host.config.metrics, process, events);
    }

    /// The claim key operations that bring the store's claims to `work`'s, each key attached to
    /// the shared store lease of its expiry's window (see [`claim_leases`]); the claims after
    /// the commit.
    async fn claim_changes(
        &self,
        work: Option<&RunState>,
    ) -> Result<(Vec<TxnOp>, HashMap<StepId, ClaimLease>), StoreError> {
        let host = &self.host;
        let loaded = self.loaded.as_ref().expect("loaded");
        let RunAddress { organization, run_id } = &self.address;
        let now_ms = records::millis(host.clock.now());
        let mut ops = Vec::new();
        let mut claims = HashMap::new();
        for step in work.iter().flat_map(|run| &run.steps) {
            let Some(claim) = &step.claim else { continue };
            if let Some(old) = loaded.claims.get(&step.id)
                && old.lease == claim.lease
                && old.expires_at == claim.expires_at
            {
                claims.insert(step.id.clone(), old.clone());
                continue;
            }
            let store_lease = host
                .claim_leases
                .lease_until(host.store.as_ref(), now_ms, records::millis(claim.expires_at))
                .await?;
            ops.push(TxnOp::put_with_lease(
                host.keys.claim(organization, run_id, &step.id),
                ClaimRecord {
                    lease: claim.lease,
                    store_lease: store_lease.0,
                    holder: Cow::Borrowed(&claim.holder),
                    expires_at: claim.expires_at,
                }
                .to_bytes(),
                store_lease,
            ));
            claims.insert(
                step.id.clone(),
                ClaimLease {
                    lease: claim.lease,
                    expires_at: claim.expires_at,
                },
            );
        }
        for step in loaded.claims.keys() {
            if !claims.contains_key(step) {
                ops.push(TxnOp::delete(host.keys.claim(organization, run_id, step)));
            }
        }
        Ok((ops, claims))
    }

    /// Replies to a batch after its commit. A refused command whose `requestId` has a record
    /// (a replay the machine now refuses, such as a second claim) answers from the record.
    async fn answer(&self, batch: Vec<Envelope>, applied: Vec<Applied>) {
        for (envelope, outcome) in batch.into_iter().zip(applied) {
            let answer = match outcome {
                Applied::Ok { data, .. } => Ok(ToolOutcome::Ok(data)),
                Applied::Refused(refusal) => match &envelope.request {
                    Some(request) => crate::idempotency::replay(
                        self.host.store.as_ref(),
                        &self.host.keys,
                        &self.host.pinned,
                        &self.address.organization,
                        &request.id,
                        &request.fingerprint,
                    )
                    .await
                    .map(|recorded| recorded.unwrap_or(ToolOutcome::Refused(refusal))),
                    None => Ok(ToolOutcome::Refused(refusal)),
                },
            };
            envelope.answer(answer);
        }
    }
}

/// Where to look for a run's record when loading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Search {
    /// The hot store, then the archive.
    HotStoreAndArchive,
    /// Nowhere: the run is new ([`search_for`]), unless this is a retry of the call that made
    /// it, which the commit's compares (its record absent, its `requestId` unused) catch.
    Nowhere,
}

/// The history events `after` holds beyond `before` (a command's), each in the trace of the call
/// that sent the command.
fn changes<'a>(
    before: Option<&RunState>,
    after: &'a RunState,
    envelope: &Envelope,
) -> impl Iterator<Item = events::Change> + 'a {
    let trace = envelope.trace;
    history::appended(before, after)
        .iter()
        .cloned()
        .map(move |event| events::Change { event, trace })
}

/// The span of one command applied by an actor: `run_command`, naming the run and the command,
/// in the trace of the call that sent it. Debug level: free unless traces are exported (or the
/// log asks for debug spans).
fn command_span(run_id: &RunId, envelope: &Envelope) -> tracing::Span {
    let span = tracing::debug_span!(
        "run_command",
        runId = %run_id,
        command = envelope.command.name(),
        traceId = tracing::field::Empty,
        spanId = tracing::field::Empty,
    );
    if !span.is_disabled()
        && let Some(parent) = envelope.trace
    {
        trace::join(&span, Some(parent), trace::random_ids());
    }
    span
}

/// Where to look for the run of a batch of `commands`. A batch of `start_run`s alone names a
/// run id of its own ([`machine::start_run_id`]: derived from each call's `requestId` and
/// carrying the clock's current millisecond), so the run is new: the hot store could hold it only
/// if this were a retry of the call that made it within the same millisecond, after its actor
/// left memory, and the archive only if such a run had also ended and waited out its archiving
/// delay. Neither is read ([`Search::Nowhere`]); should the run exist after all, the commit's
/// compare on its record fails and the batch is taken again, one call at a time, from what the
/// store holds. Under a second of archiving delay, where a run could start, end and be archived
/// within one millisecond, and for every other batch, both tiers are read.
pub(crate) fn search_for<'a>(
    commands: impl IntoIterator<Item = &'a Command>,
    config: &RuntimeConfig,
) -> Search {
    let mut commands = commands.into_iter().peekable();
    let starts_only = commands.peek().is_some() && commands.all(|c| matches!(c, Command::StartRun(_)));
    if starts_only && config.archive_ended_runs_after >= std::time::Duration::from_secs(1) {
        Search::Nowhere
    } else {
        Search::HotStoreAndArchive
    }
}

/// How long an ended run stays hot, in milliseconds.
pub(crate) fn archive_after_ms(config: &RuntimeConfig) -> u64 {
    u64::try_from(config.archive_ended_runs_after.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{Caller, Mode, StartRun, Timestamp};
    use std::time::Duration;

    fn start_run() -> Command {
        Command::StartRun(StartRun {
            run_id: machine::start_run_id([7; 32], Timestamp::from_millis(1_000)),
            caller: Caller::agent("acme", "a1"),
            inputs: serde_json::json!({}),
            mode: Mode::Live,
        })
    }

    fn claim() -> Command {
        Command::Claim {
            caller: Caller::agent("acme", "a1"),
            step: StepId::from_wire("triage"),
        }
    }

    fn archiving_after(after: Duration) -> RuntimeConfig {
        RuntimeConfig {
            archive_ended_runs_after: after,
            ..RuntimeConfig::default()
        }
    }

    /// A batch of `start_run`s alone creates a run whose id carries this millisecond: neither
    /// tier is read once archiving takes a second or more. Any other batch reads both tiers.
    #[test]
    fn only_a_batch_of_starts_reads_nothing() {
        let days = archiving_after(Duration::from_secs(3 * 24 * 3600));
        let second = archiving_after(Duration::from_secs(1));
        let instant = archiving_after(Duration::from_millis(999));
        let starts = [start_run(), start_run()];
        assert_eq!(search_for(&starts, &days), Search::Nowhere);
        assert_eq!(search_for(&starts, &second), Search::Nowhere);
        assert_eq!(search_for(&starts, &instant), Search::HotStoreAndArchive);
        assert_eq!(
            search_for(&[start_run(), claim()], &days),
            Search::HotStoreAndArchive
        );
        assert_eq!(search_for(&[claim()], &days), Search::HotStoreAndArchive);
        assert_eq!(search_for(&[], &days), Search::HotStoreAndArchive);
    }
}
