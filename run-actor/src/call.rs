//! A call's answer: the tool's outcome, and the infrastructure failure that is not an outcome.
//! The call itself is the service layer's `Write`.

use crate::machine::Refusal;
use agentprocess_org::OrgError;
use agentprocess_store::StoreError;
use serde_json::Value;

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
    /// This host does not own the run's shard (any more): nothing was written.
    #[error("{0}")]
    NotOwner(String),
    /// A start pinned the latest version of a process as this host last read it, and a newer
    /// version was published since: nothing was written; the start is made again on the newer.
    #[error("process {0} was published again while a run of it started; nothing was written")]
    LatestMoved(String),
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
