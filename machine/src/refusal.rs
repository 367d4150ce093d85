//! Refusals: the protocol saying no (spec §4.3). A refusal changes nothing and is not an error
//! of the server; infrastructure failures are not the machine's business.

use super::state::RunState;
use crate::{ErrorCode, Timestamp};
use agentprocess_ids::StepId;
use std::fmt;

/// A refused command: `{ code, message, issues? }` for the caller.
///
/// `remember` is the one exception to "nothing changed": a submission that was not accepted
/// leaves its issues in the step's `handoff` for whoever claims the step next (spec §3.3). Run
/// data, and so the snapshot, are untouched; the runtime SHOULD persist this state without an
/// idempotency record, since the call itself failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
    pub issues: Vec<String>,
    pub remember: Option<Box<RunState>>,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Refusal {
            code,
            message: message.into(),
            issues: Vec::new(),
            remember: None,
        }
    }

    pub fn with_issues(mut self, issues: Vec<String>) -> Self {
        self.issues = issues;
        self
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Refusal::new(ErrorCode::Invalid, message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Refusal::new(ErrorCode::Forbidden, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Refusal::new(ErrorCode::NotFound, message)
    }

    pub fn stale(message: impl Into<String>) -> Self {
        Refusal::new(ErrorCode::Stale, message)
    }

    /// `stale` for a token of a claim whose lease ran out: the claim (by its token's
    /// generation) and step, when the lease ended, and what to do now, which is what spec §4.3
    /// tells an agent after `stale` (read the work again) and then `claim`.
    pub fn claim_expired(step: &StepId, generation: u64, expired_at: Timestamp) -> Self {
        Refusal::stale(format!(
            "claim {generation} on step {step} (the generation in your token) expired at {}: its \
             lease ran out before this call; call `get_work` or `get_run`, then claim the step \
             again with `claim`",
            expired_at.to_rfc3339()
        ))
    }

    /// `conflict` with the one machine-readable issue that says why.
    pub fn conflict(issue: &str, message: impl Into<String>) -> Self {
        Refusal::new(ErrorCode::Conflict, message).with_issues(vec![issue.to_string()])
    }

    /// `conflict` with `issues: ["run_ended"]`: every write to an ended run (spec §3.5).
    pub fn run_ended() -> Self {
        Refusal::conflict("run_ended", "the run has ended")
    }

    /// `retry`: transient server state; the caller repeats the call with the same `requestId`.
    pub fn retry(message: impl Into<String>) -> Self {
        Refusal::new(ErrorCode::Retry, message)
    }

    pub fn not_accepted(issues: Vec<String>) -> Self {
        Refusal::new(ErrorCode::NotAccepted, "the submission was not accepted").with_issues(issues)
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)?;
        if !self.issues.is_empty() {
            write!(f, " ({})", self.issues.join("; "))?;
        }
        Ok(())
    }
}

impl std::error::Error for Refusal {}
