//! What a runtime is told: its settings, and who answers `check-1` questions.

use crate::machine::{Assignment, EvaluatorAnswer, EvaluatorOutcome, EvaluatorRequest, Limits, RunId};
use crate::metrics::RunActorMetrics;
use crate::runtime::mirror::MirrorLimits;
use agentprocess_process::PersonFormat;
use agentprocess_service::{Hints, LocalHints};
use agentprocess_store::{Compare, StoreError};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;

/// Settings of a runtime. [`RuntimeConfig::default`] suits a single machine.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// The cluster name under which every key lives.
    pub cluster: String,
    pub limits: Limits,
    pub person_format: PersonFormat,
    /// Who escalated steps wait on: the operator queue (every operator, plus a named group's
    /// members), or only a named group.
    pub escalate_to: Assignment,
    /// How long an idempotency record answers replays before the scheduler removes it.
    pub idempotency_retention: Duration,
    /// How long an ended run stays in the hot store before it moves to the archive in the
    /// blob store (where `get_run` and `list_runs` still read it).
    pub archive_ended_runs_after: Duration,
    /// How long a run actor stays in memory without commands.
    pub idle_eviction: Duration,
    /// Most commands of one run applied together and committed in one transaction.
    pub max_batch: usize,
    /// `describe.maxUploadBytes`.
    pub max_upload_bytes: usize,
    /// `check-1`: who answers check questions. Without one, every check ends in an evaluator
    /// error verdict.
    pub evaluator: Option<Arc<dyn Evaluator>>,
    /// Where writes send their "look sooner" hints: in memory to a scheduler in this process
    /// ([`LocalHints`], the default), or nowhere when the scheduler watches the store.
    pub hints: Arc<dyn Hints>,
    /// Where the runtime records its metrics: the process-wide meter provider by default.
    pub metrics: RunActorMetrics,
    /// What stops this host writing a run whose shard it no longer owns (a cluster's actor
    /// host); `None` when this process owns every run (`serve`).
    pub fence: Option<Arc<dyn RunFence>>,
    /// Copies of the organizations' ready-step and work-item indexes kept by watches, that
    /// `get_work` pages are read from (a cluster's actor host, where each read is an etcd
    /// request); `None` (the default) reads every page from the store.
    pub index_mirror: Option<MirrorLimits>,
}

/// The fence of a cluster's actor host: every write of a run carries, in its transaction, a
/// compare that holds only while this host owns the run's shard, so a host that lost the shard
/// (its lease expired while it was frozen or cut off) writes nothing, whatever it believes.
#[async_trait]
pub trait RunFence: Send + Sync + std::fmt::Debug {
    /// The compare to add to every transaction that writes `run_id`; `Err` (with why) when this
    /// host does not own the run's shard now.
    fn compare(&self, run_id: &RunId) -> Result<Compare, String>;

    /// Whether this host still owns `run_id`'s shard, read from the store: asked after a
    /// transaction whose compares failed, to tell a lost shard from a race on the run.
    async fn still_holds(&self, run_id: &RunId) -> Result<bool, StoreError>;
}

/// Answers the questions of a step's `check` (`check-1`): a model behind an API in production.
#[async_trait]
pub trait Evaluator: Send + Sync + std::fmt::Debug {
    /// One answer per question, in question order, and the model that gave them.
    async fn evaluate(&self, request: &EvaluatorRequest) -> Result<(String, Vec<EvaluatorAnswer>), String>;
}

/// Asks the evaluator, retrying once; a second failure is the outcome `Failed`.
pub(crate) async fn evaluate(
    evaluator: Option<&Arc<dyn Evaluator>>,
    request: &EvaluatorRequest,
) -> EvaluatorOutcome {
    let Some(evaluator) = evaluator else {
        return EvaluatorOutcome::Failed;
    };
    for _ in 0..2 {
        if let Ok((model, answers)) = evaluator.evaluate(request).await {
            return EvaluatorOutcome::Answered { model, answers };
        }
    }
    EvaluatorOutcome::Failed
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            cluster: "default".into(),
            limits: Limits::default(),
            person_format: PersonFormat::Email,
            escalate_to: Assignment::Operators { also: None },
            idempotency_retention: Duration::from_secs(7 * 24 * 3600),
            archive_ended_runs_after: Duration::from_secs(3 * 24 * 3600),
            idle_eviction: Duration::from_secs(60),
            max_batch: 64,
            max_upload_bytes: 10 << 20,
            evaluator: None,
            hints: Arc::new(LocalHints::new()),
            metrics: RunActorMetrics::global(),
            fence: None,
            index_mirror: None,
        }
    }
}
