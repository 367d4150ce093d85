//! Refusals: the protocol saying no (spec §4.3). A refusal changes nothing and is not an error
//! of the server; infrastructure failures are not the machine's business.

use super::state::RunState;
use serde::{Serialize, Serializer};
use std::fmt;

/// The protocol's error codes (spec §4.3): the one list of them in this server. The machine
/// refuses with them, and the gateway writes them on every wire (MCP tool results, the HTTP
/// APIs), always through [`ErrorCode::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// Bad arguments.
    Invalid,
    /// A submission broke a rule; `issues` lists each one. Nothing changed.
    NotAccepted,
    /// The token, claim or snapshot is no longer current.
    Stale,
    /// Someone else holds it, it is already decided, or the `requestId` was reused.
    Conflict,
    /// Not allowed for this identity.
    Forbidden,
    /// No such run, step or process in this organization.
    NotFound,
    /// Transient server state; retry with the same `requestId`.
    Retry,
}

impl ErrorCode {
    /// Every code, in the order of spec §4.3.
    pub const ALL: [ErrorCode; 7] = [
        ErrorCode::Invalid,
        ErrorCode::NotAccepted,
        ErrorCode::Stale,
        ErrorCode::Conflict,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::Retry,
    ];

    /// The code as the protocol writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Invalid => "invalid",
            ErrorCode::NotAccepted => "not_accepted",
            ErrorCode::Stale => "stale",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Retry => "retry",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

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
