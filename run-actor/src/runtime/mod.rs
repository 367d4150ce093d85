//! The runtime: routes every write to the actor of its run, serves reads from the indexes, and
//! takes uploads; the organization-level state it reads (catalog, uploads) is `agentprocess-org`.
//!
//! ```text
//! runtime/
//!   mod.rs           Runtime: routes writes to actors, prefetches what they look up
//!   filing.rs        files the runs a store held before under their inputs' values, once
//!   reads.rs         get_run, get_work, list_runs, list_processes: index ranges, opaque cursors
//!   service.rs       the in-process run service: service types in, machine types to the actors
//!   uploads.rs       the upload tool: bytes to the blob store, record and idempotency together
//! ```
//!
//! A write goes: [`Runtime::execute`] → the run's id (from the token, the arguments, or for
//! `start_run` derived from the organization and `requestId`) → the run's actor
//! ([`crate::actor`]), which applies it with [`crate::machine::apply`] and commits the new
//! state, index entries, timers, claim keys, outbox entries and the idempotency record in ONE
//! store transaction before it answers.

mod filing;
pub mod mirror;
mod reads;
mod service;
mod uploads;
pub(crate) mod waiting;

// Organization-level state lives in its own crate; these names stay reachable here for the
// actor host's own callers.
pub use crate::actor::Stats;
pub use crate::call::{RuntimeError, ToolOutcome};
pub use crate::config::{Evaluator, RunFence, RuntimeConfig};
pub use agentprocess_org::{
    Archive, BlobStore, BlobUrlError, Catalog, CatalogError, CatalogRefusal, Clock, DeadLetterId, Draft,
    DraftView, LocalBlobs, MAX_DEAD_LETTER_RUN_ID_BYTES, MAX_WEBHOOK_ID_CHARS, MAX_WEBHOOK_SECRET_BYTES,
    MAX_WEBHOOK_URL_CHARS, ObjectBlobs, OrgError, ProcessEntry, PublishedVersion, Redelivery, UploadRecord,
    Uploads, VersionSummary, Webhook, WebhookView, binding_issues, blob_store_from_url, configure_webhook,
    dead_letters, discard_dead_letter, redeliver_dead_letter, remove_webhook, unbound_issues,
    webhook_from_request, webhooks,
};
pub use agentprocess_service::{
    Decision, EvidenceItem, GetWork, Hints, ListRuns, LocalHints, Mode, NoHints, ReadySteps, Submission,
    Upload, Write,
};
pub use filing::Filing;

use crate::actor::{self, Envelope, Host, Mail, RunAddress};
use crate::idempotency;
use crate::machine::{
    self, Caller, Command, Decide, OrgId, PinnedProcess, Refusal, RunId, StartRun, UploadStatus, token,
};
use crate::pinned::PinnedProcesses;
use agentprocess_store::Store;
use agentprocess_store::keys::Keys;
use mirror::IndexMirrors;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// How many times a start of a process's latest version is made again when versions keep being
/// published under it; then the caller is told to try again.
const START_AGAIN_ON_NEWER_VERSION: usize = 3;

/// A runtime's state: what its actors share ([`Host`]), and the organization-level state the
/// runtime itself reads before a command reaches an actor.
#[derive(Debug)]
pub(crate) struct Inner {
    pub host: Arc<Host>,
    pub catalog: Catalog,
    pub uploads: Uploads,
}

/// The in-process runtime: one actor per live run, on top of a [`Store`].
///
/// Cheap to clone. Must be created and used inside a tokio runtime.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<Inner>,
}

impl Runtime {
    pub fn new(
        store: Arc<dyn Store>,
        blobs: Arc<dyn BlobStore>,
        config: RuntimeConfig,
        clock: Clock,
    ) -> Self {
        let keys = Keys::new(&config.cluster);
        let catalog = Catalog::new(store.clone(), keys.clone(), clock.clone());
        Runtime {
            inner: Arc::new(Inner {
                catalog: catalog.clone(),
                uploads: Uploads::new(store.clone(), keys.clone(), blobs.clone()),
                host: Arc::new(Host {
                    pinned: PinnedProcesses::new(catalog),
                    clock,
                    stats: Stats::default(),
                    archive: Archive::new(blobs),
                    actors: Mutex::new(HashMap::new()),
                    claim_leases: Default::default(),
                    runs_filed_by_input: Default::default(),
                    waiters: Default::default(),
                    mirrors: config.index_mirror.map(|limits| {
                        Arc::new(IndexMirrors::new(
                            store.clone(),
                            limits,
                            config.metrics.index_mirror_bytes.clone(),
                        ))
                    }),
                    store,
                    keys,
                    config,
                }),
            }),
        }
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.host.store
    }

    pub fn keys(&self) -> &Keys {
        &self.inner.host.keys
    }

    pub fn clock(&self) -> &Clock {
        &self.inner.host.clock
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.host.config
    }

    pub fn catalog(&self) -> &Catalog {
        &self.inner.catalog
    }

    /// The organizations' uploads: records and bytes.
    pub fn uploads(&self) -> &Uploads {
        &self.inner.uploads
    }

    /// Where this runtime's writes send their hints (see [`RuntimeConfig::hints`]).
    pub fn hints(&self) -> &Arc<dyn Hints> {
        &self.inner.host.config.hints
    }

    /// Bytes this host's copies of the work indexes hold, or `None` when it keeps none
    /// ([`RuntimeConfig::index_mirror`]).
    pub fn index_mirror_bytes(&self) -> Option<usize> {
        self.inner
            .host
            .mirrors
            .as_ref()
            .map(|mirrors| mirrors.held_bytes())
    }

    pub fn stats(&self) -> &Stats {
        &self.inner.host.stats
    }

    /// How many run actors are in memory now.
    pub fn live_actors(&self) -> usize {
        self.inner.host.actors.lock().unwrap().len()
    }

    /// Publishes a process version (an admin action): see [`Catalog::publish`].
    pub async fn publish(
        &self,
        organization: &OrgId,
        source: &[u8],
        roles: indexmap::IndexMap<String, String>,
    ) -> Result<u64, CatalogError> {
        self.inner.catalog.publish(organization, source, roles).await
    }

    async fn send(&self, address: RunAddress, envelope: Envelope) -> Result<ToolOutcome, RuntimeError> {
        let (reply, answer) = oneshot::channel();
        // Boxed, so that an idle actor's mailbox costs a block of pointers, not of envelopes.
        self.deliver(
            &address,
            Mail::Apply(Box::new(Envelope {
                reply: Some(reply),
                ..envelope
            })),
        )
        .await;
        answer.await.map_err(|_| RuntimeError::ActorGone)?
    }

    /// Puts `mail` in the mailbox of the run's actor, starting the actor if need be.
    async fn deliver(&self, address: &RunAddress, mail: Mail) {
        let mut mail = Some(mail);
        loop {
            let sender = actor::sender(&self.inner.host, address);
            match sender.send(mail.take().expect("sent once")).await {
                Ok(()) => return,
                // The actor was evicted between the lookup and the send: route again.
                Err(tokio::sync::mpsc::error::SendError(back)) => {
                    actor::forget(&self.inner.host, address, &sender);
                    mail = Some(back);
                }
            }
        }
    }

    /// One upload of `organization` with its bytes, for serving file evidence: `None` when the
    /// organization has no upload `upload_id`. Bytes that are gone or no longer match the
    /// recorded SHA-256 are an error, not a different file.
    pub async fn read_upload(
        &self,
        organization: &OrgId,
        upload_id: &str,
    ) -> Result<Option<(UploadRecord, Vec<u8>)>, RuntimeError> {
        Ok(self.inner.uploads.read(organization, upload_id).await?)
    }

    /// The uploads that file evidence in `evidence` names, looked up before the command reaches
    /// the actor (the machine's lookup is synchronous; the blob store is not).
    async fn prefetch_uploads(
        &self,
        organization: &OrgId,
        evidence: &[machine::EvidenceItem],
    ) -> Result<HashMap<String, UploadStatus>, RuntimeError> {
        let mut found = HashMap::new();
        for item in evidence.iter().filter(|e| e.kind == "file") {
            if !found.contains_key(&item.reference) {
                let status = self.inner.uploads.verify(organization, &item.reference).await?;
                found.insert(item.reference.clone(), status);
            }
        }
        Ok(found)
    }
}

/// A fresh 32 random bytes for one command.
pub(crate) fn random_seed() -> [u8; 32] {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).expect("the operating system's random source works");
    seed
}

fn bad_token() -> ToolOutcome {
    ToolOutcome::Refused(Refusal::invalid("the token does not verify"))
}

/// The runtime's own API, in the machine's types but for the write, which is the service
/// layer's [`Write`] (`execute` turns it into a machine command): what the in-process run
/// service ([`agentprocess_service::RunService`], in `service.rs`) and the actor host's tests call.
impl Runtime {
    /// Applies one protocol write, idempotent on `(organization, request_id)`.
    pub async fn execute(
        &self,
        caller: &Caller,
        write: Write,
        request_id: &str,
    ) -> Result<ToolOutcome, RuntimeError> {
        self.inner.host.stats.commands.fetch_add(1, Ordering::Relaxed);
        // A start of a process's latest version is made again when a newer version was
        // published since this host last read which is the latest (nothing was written).
        let again = matches!(write, Write::StartRun { version: None, .. }).then(|| write.clone());
        let first = self.execute_once(caller, write, request_id).await;
        let (Err(RuntimeError::LatestMoved(_)), Some(write)) = (&first, again) else {
            return first;
        };
        let mut outcome = first;
        for _ in 0..START_AGAIN_ON_NEWER_VERSION {
            outcome = self.execute_once(caller, write.clone(), request_id).await;
            if !matches!(outcome, Err(RuntimeError::LatestMoved(_))) {
                break;
            }
        }
        outcome
    }

    async fn execute_once(
        &self,
        caller: &Caller,
        write: Write,
        request_id: &str,
    ) -> Result<ToolOutcome, RuntimeError> {
        let organization = caller.organization.clone();
        let fingerprint = idempotency::of_write(caller, &write);
        let caller = caller.clone();
        let mut seed = random_seed();
        let mut pinned: Option<Arc<PinnedProcess>> = None;
        let mut latest_guard = None;
        let mut uploads = HashMap::new();
        let (run_id, command) = match write {
            Write::StartRun {
                process,
                version,
                inputs,
                mode,
            } => {
                seed = machine::start_seed(&organization, request_id);
                let run_id = machine::start_run_id(seed, self.inner.host.clock.now());
                let resolved = match version {
                    Some(version) => (self.inner.host.pinned)
                        .get(&organization, &process, version)
                        .await?
                        .map(|found| (found, None)),
                    None => (self.inner.host.pinned)
                        .resolve_latest(&organization, &process)
                        .await?
                        .map(|(found, guard)| (found, Some(guard))),
                };
                match resolved {
                    Some((found, guard)) => {
                        pinned = Some(found);
                        latest_guard = guard;
                    }
                    None => {
                        // A replay of a start whose process was since removed still answers.
                        if let Some(answer) = idempotency::replay(
                            self.inner.host.store.as_ref(),
                            &self.inner.host.keys,
                            &self.inner.host.pinned,
                            &organization,
                            request_id,
                            &fingerprint,
                        )
                        .await?
                        {
                            return Ok(answer);
                        }
                        let reason = self
                            .inner
                            .catalog
                            .unresolved_reason(&organization, &process, version)
                            .await?;
                        return Ok(ToolOutcome::Refused(Refusal::not_found(reason)));
                    }
                }
                (
                    run_id.clone(),
                    Command::StartRun(StartRun {
                        run_id,
                        caller,
                        inputs,
                        mode: service::mode_of(mode),
                    }),
                )
            }
            Write::Claim { run_id, step } => (run_id, Command::Claim { caller, step }),
            Write::Renew { token, progress } => match token::run_id(&token) {
                Some(run_id) => (
                    RunId::from(run_id),
                    Command::Renew {
                        caller,
                        token,
                        progress,
                    },
                ),
                None => return Ok(bad_token()),
            },
            Write::Submit { token, submission } => match token::run_id(&token) {
                Some(run_id) => {
                    let submission = service::submission_of(submission);
                    uploads = self.prefetch_uploads(&organization, &submission.evidence).await?;
                    (
                        RunId::from(run_id),
                        Command::Submit {
                            caller,
                            token,
                            submission,
                            evaluation: None,
                        },
                    )
                }
                None => return Ok(bad_token()),
            },
            Write::Escalate { token, note } => match token::run_id(&token) {
                Some(run_id) => (RunId::from(run_id), Command::Escalate { caller, token, note }),
                None => return Ok(bad_token()),
            },
            Write::Decide {
                run_id,
                work_item,
                snapshot,
                decision,
                output,
                evidence,
                summary,
                next,
                reason,
                note,
            } => {
                let evidence = evidence.map(service::evidence_of);
                if let Some(evidence) = &evidence {
                    uploads = self.prefetch_uploads(&organization, evidence).await?;
                }
                (
                    run_id,
                    Command::Decide(Decide {
                        caller,
                        work_item,
                        snapshot,
                        decision: service::decision_of(decision),
                        output,
                        evidence,
                        summary,
                        next,
                        reason,
                        note,
                        evaluation: None,
                    }),
                )
            }
            Write::Cancel { run_id, reason } => (run_id, Command::Cancel { caller, reason }),
            Write::SendEvent { run_id, name, data } => (run_id, Command::SendEvent { caller, name, data }),
        };
        let address = RunAddress { organization, run_id };
        let mut envelope = Envelope::new(
            command,
            Some(idempotency::RequestKey {
                id: request_id.to_string(),
                fingerprint,
            }),
            seed,
            pinned,
            uploads,
        );
        envelope.latest_guard = latest_guard;
        self.send(address, envelope).await
    }

    /// Fires the timer `timer_id` of the timer index on its run (see
    /// [`agentprocess_service::RunService::fire_timer`]): a machine command, or moving an ended
    /// run to the archive; a timer id this runtime did not write is `Corrupt`.
    pub async fn fire_timer(
        &self,
        organization: &OrgId,
        run_id: &RunId,
        timer_id: &str,
    ) -> Result<(), RuntimeError> {
        let address = RunAddress {
            organization: organization.clone(),
            run_id: run_id.clone(),
        };
        if timer_id == actor::ARCHIVE_TIMER {
            let (done, archived) = oneshot::channel();
            self.deliver(&address, Mail::Archive(done)).await;
            return archived.await.map_err(|_| RuntimeError::ActorGone)?;
        }
        let command = actor::timer_command(timer_id)
            .ok_or_else(|| RuntimeError::Corrupt(format!("timer id {timer_id:?} names no command")))?;
        let envelope = Envelope::new(command, None, random_seed(), None, HashMap::new());
        self.send(address, envelope).await.map(|_| ())
    }

    pub async fn get_run(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, RuntimeError> {
        reads::get_run(&self.inner.host, caller, run_id).await
    }

    /// The run's history, `{ runId, events, dropped }`, for whoever may `get_run` it.
    pub async fn run_history(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, RuntimeError> {
        reads::run_history(&self.inner.host, caller, run_id).await
    }

    /// An operator's inspection of the run: claims with their holders and expiry, lease
    /// expiries, open work items.
    pub async fn inspect_run(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, RuntimeError> {
        reads::inspect_run(&self.inner.host, caller, run_id).await
    }

    /// Answers every `get_work` call waiting for work with its page as it is now, and every
    /// later one at once: for a host that is shutting down.
    pub fn stop_waiting_for_work(&self) {
        self.inner.host.waiters.stop();
    }

    pub async fn get_work(&self, caller: &Caller, request: GetWork) -> Result<ToolOutcome, RuntimeError> {
        Ok(
            match waiting::work_page(&self.inner.host, caller, request).await? {
                Ok(page) => ToolOutcome::Ok(page.to_value()),
                Err(refusal) => ToolOutcome::Refused(refusal),
            },
        )
    }

    /// An operator's page of the organization's ready, unclaimed agent steps, oldest first.
    pub async fn ready_steps(
        &self,
        caller: &Caller,
        request: ReadySteps,
    ) -> Result<ToolOutcome, RuntimeError> {
        Ok(
            match reads::ready_steps_page(&self.inner.host, caller, request).await? {
                Ok(page) => ToolOutcome::Ok(page.to_value()),
                Err(refusal) => ToolOutcome::Refused(refusal),
            },
        )
    }

    /// Files the runs the store held before runs were filed by input (see [`Filing`]), once
    /// per store; until then `list_runs` filtered by inputs reads runs in start order. Run it
    /// beside serving: it is safe beside live writes and on several hosts at once.
    pub async fn file_runs_by_inputs(&self) -> Result<Filing, RuntimeError> {
        filing::file_runs_by_inputs(&self.inner.host).await
    }

    pub async fn list_runs(&self, caller: &Caller, request: ListRuns) -> Result<ToolOutcome, RuntimeError> {
        reads::list_runs(&self.inner.host, caller, request).await
    }

    pub async fn list_processes(
        &self,
        caller: &Caller,
        cursor: Option<String>,
    ) -> Result<ToolOutcome, RuntimeError> {
        reads::list_processes(&self.inner.host, caller, cursor).await
    }

    pub async fn upload(
        &self,
        caller: &Caller,
        upload: Upload,
        request_id: &str,
    ) -> Result<ToolOutcome, RuntimeError> {
        uploads::upload(&self.inner.host, &self.inner.uploads, caller, upload, request_id).await
    }
}
