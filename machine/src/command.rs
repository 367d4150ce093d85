//! Commands: the protocol's writes, with their arguments already shaped by the tool schemas,
//! plus the scheduler's (timer fired, claim expired).

use super::check::EvaluatorOutcome;
use super::ctx::Caller;
use super::state::{Mode, TimerKind};
use agentprocess_ids::{RunId, StepId};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    StartRun(StartRun),
    Claim {
        caller: Caller,
        step: StepId,
    },
    Renew {
        caller: Caller,
        token: String,
        progress: Option<String>,
    },
    Submit {
        caller: Caller,
        token: String,
        submission: Submission,
        /// `check-1`: the evaluator's outcome, attached by the runtime when it applies the same
        /// command again after [`Reply::NeedsEvaluation`](super::Reply::NeedsEvaluation).
        evaluation: Option<EvaluatorOutcome>,
    },
    Escalate {
        caller: Caller,
        token: String,
        note: String,
    },
    Decide(Decide),
    Cancel {
        caller: Caller,
        reason: String,
    },
    SendEvent {
        caller: Caller,
        name: String,
        data: Option<Map<String, Value>>,
    },
    /// The scheduler fired a timer the run armed (a step's `timers` entry).
    TimerFired {
        step: StepId,
        kind: TimerKind,
        generation: u64,
    },
    /// A claim lease lapsed (or its holder's lease vanished).
    ClaimExpired {
        step: StepId,
        lease: u64,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct StartRun {
    /// The new run's id, chosen by the runtime with [`start_run_id`](crate::start_run_id).
    pub run_id: RunId,
    pub caller: Caller,
    /// The run's inputs: a JSON object per the tool schema (anything else is refused).
    pub inputs: Value,
    pub mode: Mode,
}

/// What a `submit` (or a `completed` decision) hands in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Submission {
    pub output: Option<Map<String, Value>>,
    pub evidence: Vec<EvidenceItem>,
    pub summary: Option<String>,
    pub next: Option<String>,
    pub reason: Option<String>,
}

/// An evidence item as sent: `{ kind, ref }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvidenceItem {
    /// `file` or `link`.
    pub kind: String,
    pub reference: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Completed,
    Approved,
    Rejected,
    Returned,
    Failed,
}

impl Decision {
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

#[derive(Debug, Clone, PartialEq)]
pub struct Decide {
    pub caller: Caller,
    pub work_item: String,
    pub snapshot: String,
    pub decision: Decision,
    pub output: Option<Map<String, Value>>,
    pub evidence: Option<Vec<EvidenceItem>>,
    pub summary: Option<String>,
    pub next: Option<String>,
    pub reason: Option<String>,
    pub note: Option<String>,
    /// `check-1`: the evaluator's outcome for a `completed` task; see `Command::Submit`.
    pub evaluation: Option<EvaluatorOutcome>,
}

impl Command {
    /// The tool (or scheduler event) this command carries out, for logs and spans.
    pub fn name(&self) -> &'static str {
        match self {
            Command::StartRun(_) => "start_run",
            Command::Claim { .. } => "claim",
            Command::Renew { .. } => "renew",
            Command::Submit { .. } => "submit",
            Command::Escalate { .. } => "escalate",
            Command::Decide(_) => "decide",
            Command::Cancel { .. } => "cancel",
            Command::SendEvent { .. } => "send_event",
            Command::TimerFired { .. } => "timer_fired",
            Command::ClaimExpired { .. } => "claim_expired",
        }
    }

    /// The same command with the evaluator's outcome attached: what the runtime applies after
    /// [`Reply::NeedsEvaluation`](super::Reply::NeedsEvaluation). Commands that take no
    /// evaluation come back unchanged.
    pub fn with_evaluation(self, outcome: EvaluatorOutcome) -> Command {
        match self {
            Command::Submit {
                caller,
                token,
                submission,
                ..
            } => Command::Submit {
                caller,
                token,
                submission,
                evaluation: Some(outcome),
            },
            Command::Decide(decide) => Command::Decide(Decide {
                evaluation: Some(outcome),
                ..decide
            }),
            other => other,
        }
    }
}
