//! A call to the runtime and its answer: the protocol write as the gateway hands it in, the
//! tool's outcome, and the infrastructure failure that is not an outcome.

use crate::machine::{Decision, EvidenceItem, Mode, Refusal, RunId, StepId, Submission};
use agentprocess_org::OrgError;
use agentprocess_store::StoreError;
use serde_json::{Map, Value};

/// A protocol write as the gateway hands it in: the tool's arguments, without `requestId`.
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

/// A tool's answer: `{ ok: true, data }` or `{ ok: false, error }`.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    Ok(Value),
    Refused(Refusal),
}

impl ToolOutcome {
    pub fn data(&self) -> Option<&Value> {
        match self {
            ToolOutcome::Ok(data) => Some(data),
            ToolOutcome::Refused(_) => None,
        }
    }

    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            ToolOutcome::Ok(_) => None,
            ToolOutcome::Refused(refusal) => Some(refusal),
        }
    }
}

/// An infrastructure failure: the caller sees `retry`. A write that failed this way may or may
/// not have been committed; retrying it with the same `requestId` is always safe.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored record does not parse: a bug or a foreign writer.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The run's actor stopped before it answered.
    #[error("the run's actor is gone")]
    ActorGone,
    #[error("blob store failed: {0}")]
    Blobs(String),
}

impl From<OrgError> for RuntimeError {
    fn from(error: OrgError) -> Self {
        match error {
            OrgError::Store(error) => RuntimeError::Store(error),
            OrgError::Corrupt(why) => RuntimeError::Corrupt(why),
            OrgError::Blobs(why) => RuntimeError::Blobs(why),
        }
    }
}
