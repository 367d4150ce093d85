//! Tool results as the protocol writes them: `{ ok: true, data }` or `{ ok: false, error }`.

use serde::Serialize;
use serde_json::{Value, json};
use std::fmt;

/// What a tool call returns: the `data` of `{ ok: true, data }`, or a protocol refusal.
pub type ToolResult = Result<Value, ToolError>;

/// The protocol's error codes (spec §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
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

/// A protocol refusal: `{ code, message, issues? }`. A value for the caller, not a server fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
    /// Every problem at once, when the code has them. Omitted on the wire when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub issues: Vec<String>,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            issues: Vec::new(),
        }
    }

    pub fn with_issues(mut self, issues: Vec<String>) -> Self {
        self.issues = issues;
        self
    }

    /// Arguments that break the tool's schema: `invalid` with every violation as an issue.
    pub fn invalid_arguments(issues: Vec<String>) -> Self {
        ToolError::new(ErrorCode::Invalid, "the arguments do not match the tool's schema").with_issues(issues)
    }
}

/// The envelope a tool result travels in: `{ "ok": true, "data": … }` or
/// `{ "ok": false, "error": { "code", "message", "issues"? } }`.
pub fn envelope(result: &ToolResult) -> Value {
    match result {
        Ok(data) => json!({ "ok": true, "data": data }),
        Err(error) => json!({ "ok": false, "error": error }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_follow_the_contract() {
        assert_eq!(
            envelope(&Ok(json!({ "consumedBy": null }))),
            json!({ "ok": true, "data": { "consumedBy": null } })
        );
        assert_eq!(
            envelope(&Err(ToolError::new(ErrorCode::NotFound, "no such run"))),
            json!({ "ok": false, "error": { "code": "not_found", "message": "no such run" } })
        );
        assert_eq!(
            envelope(&Err(ToolError::new(ErrorCode::Conflict, "the run has ended")
                .with_issues(vec!["run_ended".into()]))),
            json!({ "ok": false, "error": { "code": "conflict", "message": "the run has ended", "issues": ["run_ended"] } })
        );
    }
}
