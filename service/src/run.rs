//! The run service: every protocol write and read of runs, fired timers and uploads, with the
//! caller's identity as typed fields (never their token).

use crate::{ErrorCode, OrgId, RunId, StepId};
use async_trait::async_trait;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Who is calling, as the gateway verified it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub organization: OrgId,
    pub kind: CallerKind,
    /// Whether this identity is one of the organization's operators.
    pub operator: bool,
}

/// An agent or a person, with what identifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallerKind {
    Agent {
        id: String,
    },
    /// A person's `person` value (an email) and the groups they belong to.
    Person {
        email: String,
        groups: Vec<String>,
    },
}

/// `start_run`'s `mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Live,
    Test,
}

impl Mode {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Live => "live",
            Mode::Test => "test",
        }
    }
}

/// `decide`'s `decision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Completed,
    Approved,
    Rejected,
    Returned,
    Failed,
}

impl Decision {
    pub const ALL: [Decision; 5] = [
        Decision::Completed,
        Decision::Approved,
        Decision::Rejected,
        Decision::Returned,
        Decision::Failed,
    ];

    /// The decision of a name on the wire.
    pub fn parse(text: &str) -> Option<Decision> {
        Decision::ALL.into_iter().find(|d| d.as_str() == text)
    }

    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Completed => "completed",
            Decision::Approved => "approved",
            Decision::Rejected => "rejected",
            Decision::Returned => "returned",
            Decision::Failed => "failed",
        }
    }
}

/// An evidence item as sent: `{ kind, ref }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvidenceItem {
    /// `file` or `link` (anything else is the run's to refuse).
    pub kind: String,
    pub reference: String,
}

/// What a `submit` hands in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Submission {
    pub output: Option<Map<String, Value>>,
    pub evidence: Vec<EvidenceItem>,
    pub summary: Option<String>,
    pub next: Option<String>,
    pub reason: Option<String>,
}

/// A protocol write: the tool's arguments, without `requestId`.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    StartRun {
        process: String,
        version: Option<u64>,
        inputs: Value,
        mode: Mode,
    },
    Claim {
        run_id: RunId,
        step: StepId,
    },
    Renew {
        token: String,
        progress: Option<String>,
    },
    Submit {
        token: String,
        submission: Submission,
    },
    Escalate {
        token: String,
        note: String,
    },
    Decide {
        run_id: RunId,
        work_item: String,
        snapshot: String,
        decision: Decision,
        output: Option<Map<String, Value>>,
        evidence: Option<Vec<EvidenceItem>>,
        summary: Option<String>,
        next: Option<String>,
        reason: Option<String>,
        note: Option<String>,
    },
    Cancel {
        run_id: RunId,
        reason: String,
    },
    SendEvent {
        run_id: RunId,
        name: String,
        data: Option<Map<String, Value>>,
    },
}

impl Write {
    /// The key that places this write's run on a shard (see [`crate::run_routing_key`]), known
    /// before the run is reached: for `start_run` from the organization and `requestId`, for a
    /// token's write from the run id the token carries. `None` for a token that names no run
    /// (any host refuses it the same way).
    pub fn routing_key(&self, organization: &OrgId, request_id: &str) -> Option<String> {
        let run_id = match self {
            Write::StartRun { .. } => return Some(crate::start_routing_key(organization, request_id)),
            Write::Claim { run_id, .. }
            | Write::Decide { run_id, .. }
            | Write::Cancel { run_id, .. }
            | Write::SendEvent { run_id, .. } => run_id.as_str(),
            Write::Renew { token, .. } | Write::Submit { token, .. } | Write::Escalate { token, .. } => {
                crate::run_id_of_token(token)?
            }
        };
        Some(crate::run_routing_key(run_id).to_owned())
    }
}

/// `get_work` arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GetWork {
    pub limit: Option<usize>,
    pub cursor: Option<String>,
    pub process: Option<String>,
    /// `waitSeconds` (the `x-wait-1` profile): how long a first page that holds nothing waits
    /// for matching work before it answers; at most [`MAX_WAIT_FOR_WORK`].
    pub wait: Option<std::time::Duration>,
    /// With `wait`: the call waits for work made ready after it started, whatever the page holds
    /// now, and answers an empty page when none came. How a `subscriptions/listen` stream hears
    /// of new work; no tool call sets it.
    pub only_new: bool,
}

/// The `x-wait-1` profile's name, as `describe.profiles` lists it.
pub const WAIT_PROFILE: &str = "x-wait-1";
/// The longest `get_work` wait: `waitSeconds` is 1 to 20, well inside every hop's request
/// timeout (30 s between a gateway and an actor host).
pub const MAX_WAIT_FOR_WORK: std::time::Duration = std::time::Duration::from_secs(20);

/// An operator's read of the organization's ready-step index: the agent steps that are ready
/// and not claimed, oldest `readySince` first, each as an agent's `get_work` item. Paged like
/// `get_work` (`limit` 1 to 100, default 20; an opaque cursor).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadySteps {
    pub limit: Option<usize>,
    pub cursor: Option<String>,
    /// Only steps ready since this instant or before (milliseconds since the Unix epoch).
    pub ready_until_ms: Option<u64>,
}

/// `list_runs` arguments.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListRuns {
    pub process: Option<String>,
    pub state: Option<String>,
    pub inputs: Option<Map<String, Value>>,
    pub limit: Option<usize>,
    pub cursor: Option<String>,
}

/// The `upload` tool's arguments, with the content already decoded from base64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    pub file_name: String,
    pub content_type: String,
    pub bytes: Vec<u8>,
}

/// The protocol said no: `{ code, message, issues? }` for the caller. Nothing changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRefusal {
    pub code: ErrorCode,
    pub message: String,
    pub issues: Vec<String>,
}

/// A tool's answer: the result's `data`, or a refusal.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    Ok(Value),
    /// The result's `data` as JSON text, written once where it was read and passed on unchanged.
    Rendered(RenderedData),
    Refused(ToolRefusal),
}

/// A result's `data` rendered as JSON by the run service: an agent's `get_work` page, spliced
/// from its items' stored JSON instead of parsed into values and written again. It holds no file
/// evidence, so nothing between the run service and the caller needs to rewrite it.
#[derive(Debug, Clone)]
pub struct RenderedData(Box<RawValue>);

impl RenderedData {
    pub fn new(json: Box<RawValue>) -> RenderedData {
        RenderedData(json)
    }

    /// The JSON text.
    pub fn json(&self) -> &str {
        self.0.get()
    }

    /// The data as a [`Value`].
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.0.get()).expect("rendered data is one JSON value")
    }
}

impl PartialEq for RenderedData {
    fn eq(&self, other: &RenderedData) -> bool {
        self.json() == other.json()
    }
}

/// The infrastructure failed: the caller sees `retry`. A write that failed this way may or may
/// not have been committed; retrying it with the same `requestId` is always safe.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    #[error("{0}")]
    Unavailable(String),
    /// The actor host reached does not own the run's shard (the shard moved, or the host is
    /// leaving): nothing was done. A router looks the owner up again and retries; a caller that
    /// still sees it gets `retry`.
    #[error("{0}")]
    NotOwner(String),
    /// The host reached has as many calls in flight as `limit` lets it take: nothing was done.
    /// Not tried again by a router: the caller gets `retry` at once, with the hint.
    #[error("the actor host is at its limit ({limit}); call again in {retry_after_ms} ms")]
    Overloaded { limit: String, retry_after_ms: u64 },
}

/// What gateways and the scheduler call: every write and read of runs.
#[async_trait]
pub trait RunService: Send + Sync + std::fmt::Debug {
    /// Applies one protocol write, idempotent on `(organization, request_id)`.
    async fn execute(
        &self,
        caller: &Caller,
        write: Write,
        request_id: &str,
    ) -> Result<ToolOutcome, ServiceError>;

    /// Fires the timer `timer_id` of the timer index (a wait, a `wait_for` timeout, a due date,
    /// a claim's expiry) on its run. Idempotent: a timer names the generation or claim lease it
    /// was armed for, and the run ignores one that no longer applies.
    async fn fire_timer(
        &self,
        organization: &OrgId,
        run_id: &RunId,
        timer_id: &str,
    ) -> Result<(), ServiceError>;

    async fn get_run(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, ServiceError>;

    /// The run's history, the operator's audit trail: `{ runId, events, dropped }`, every change
    /// of the run oldest first (who, when, what, with its notes) and how many of the oldest the
    /// bound dropped. Whoever may `get_run` the run may read it, with the same refusals; an
    /// archived run's history is the archived record's.
    async fn run_history(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, ServiceError>;

    /// An operator's inspection of the run: `{ run, steps, workItems }`, with who holds each
    /// claim until when and how often each step's leases lapsed, which the run view does not
    /// say. Operators of the run's organization only: anyone else is `forbidden`.
    async fn inspect_run(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, ServiceError>;

    async fn get_work(&self, caller: &Caller, request: GetWork) -> Result<ToolOutcome, ServiceError>;

    async fn list_runs(&self, caller: &Caller, request: ListRuns) -> Result<ToolOutcome, ServiceError>;

    /// The organization's ready, unclaimed agent steps, for an operator (`forbidden` for anyone
    /// else): `{ items, nextCursor }`, a page costing in proportion to its limit.
    async fn ready_steps(&self, caller: &Caller, request: ReadySteps) -> Result<ToolOutcome, ServiceError>;

    async fn list_processes(
        &self,
        caller: &Caller,
        cursor: Option<String>,
    ) -> Result<ToolOutcome, ServiceError>;

    /// The `upload` tool: stores the bytes and records their hash and size.
    async fn upload(
        &self,
        caller: &Caller,
        upload: Upload,
        request_id: &str,
    ) -> Result<ToolOutcome, ServiceError>;
}
