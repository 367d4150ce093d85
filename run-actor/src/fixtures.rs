//! Runs written straight into a store exactly as their actor commits them, and the pinned
//! processes they need: for fixtures that fill a stopped server's store with many runs in minutes.

use crate::actor::plan::{self, Inputs};
use crate::actor::{Applied, IndexEntries, RunAddress, archive_after_ms};
use crate::call::RuntimeError;
use crate::config::RuntimeConfig;
use crate::idempotency::{Fingerprint, RequestKey};
use crate::machine::{PinnedProcess, RunState, Timestamp};
use crate::pinned::PinnedProcesses;
use agentprocess_ids::{OrgId, RunId, StepId};
use agentprocess_org::Catalog;
use agentprocess_store::keys::Keys;
use agentprocess_store::{Compare, TxnOp};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// What committing one new run writes: compares and operations to put in a transaction.
#[derive(Debug)]
pub struct RunWrites {
    /// The run does not exist yet.
    pub compares: Vec<Compare>,
    /// The run record, then its index and timer entries.
    pub ops: Vec<TxnOp>,
}

/// A write that made a fixture run: its `requestId` and the data it answered.
#[derive(Debug, Clone)]
pub struct Answered {
    pub request_id: String,
    pub data: Value,
}

/// Why a run cannot be written as a fixture.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// A claim key lives on a store lease held by a running actor host; a fixture has none.
    #[error("run {run} holds a claim on step {step}: only runs without a live claim can be written directly")]
    Claimed { run: RunId, step: StepId },
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// The writes of `run` as the first commit of its actor, in a runtime with `config`, would make
/// them, with the same planner: the run record and every index and timer entry its state implies
/// (ready steps, work items, the per-process run entry, timers, an ended run's archive timer),
/// on the condition that no run of that id exists.
///
/// With `answered`, each write that made the run also leaves its idempotency record and the
/// record's expiry entry, made at `now` and kept for the configured retention, as a server that
/// ran those calls holds them. A fixture record's fingerprint is the SHA-256 of its `requestId`
/// alone: it stands in for a real one in size and place, and no caller can replay it.
///
/// Left out on purpose: outbox entries (the scheduler delivers and removes them) and claim keys
/// (a run holding a claim is refused).
pub fn run_writes(
    keys: &Keys,
    config: &RuntimeConfig,
    pinned: &PinnedProcess,
    run: &RunState,
    answered: Vec<Answered>,
    now: Timestamp,
) -> Result<RunWrites, FixtureError> {
    if let Some(step) = run.steps.iter().find(|step| step.claim.is_some()) {
        return Err(FixtureError::Claimed {
            run: run.id.clone(),
            step: step.id.clone(),
        });
    }
    let address = RunAddress {
        organization: run.organization.clone(),
        run_id: run.id.clone(),
    };
    let (requests, outcomes): (Vec<RequestKey>, Vec<Applied>) = answered
        .into_iter()
        .map(|answer| {
            let fingerprint = Fingerprint(Sha256::digest(answer.request_id.as_bytes()).into());
            let request = RequestKey {
                id: answer.request_id,
                fingerprint,
            };
            let outcome = Applied::Ok {
                data: answer.data,
                notifications: Vec::new(),
            };
            (request, outcome)
        })
        .unzip();
    let plan = plan::plan(Inputs {
        keys,
        address: &address,
        loaded_version: 0,
        loaded_index: &IndexEntries::new(),
        run: Some(run),
        pinned: Some(pinned),
        changed: true,
        requests: &requests.iter().map(Some).collect::<Vec<_>>(),
        outcomes: &outcomes,
        now,
        retention_seconds: config.idempotency_retention.as_secs(),
        archive_after_ms: archive_after_ms(config),
    })?;
    Ok(RunWrites {
        compares: plan.compares,
        ops: plan.ops,
    })
}

/// The published process `name` at `version` of `organization` as runs pin it, read and parsed
/// the way the actor host does; `None` when there is no such version.
pub async fn pinned_process(
    catalog: &Catalog,
    organization: &OrgId,
    name: &str,
    version: u64,
) -> Result<Option<Arc<PinnedProcess>>, RuntimeError> {
    PinnedProcesses::new(catalog.clone())
        .get(organization, name, version)
        .await
}
