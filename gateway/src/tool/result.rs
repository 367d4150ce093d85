//! What a tool call returns: its `data`, or a protocol refusal. [`crate::respond`] writes either
//! as the tool result's envelope.

pub use agentprocess_service::ErrorCode;
use agentprocess_service::RenderedData;
use serde::Serialize;
use serde_json::Value;

/// What a tool call returns: the `data` of `{ ok: true, data }`, or a protocol refusal.
pub type ToolResult = Result<ToolData, ToolError>;

/// The `data` of a result: a value, or JSON the run service rendered (an agent's `get_work`
/// page), which goes out as it came.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolData {
    Value(Value),
    Rendered(RenderedData),
}

impl ToolData {
    /// The data as a value (rendered data is parsed).
    pub fn into_value(self) -> Value {
        match self {
            ToolData::Value(value) => value,
            ToolData::Rendered(rendered) => rendered.to_value(),
        }
    }
}

impl From<Value> for ToolData {
    fn from(value: Value) -> ToolData {
        ToolData::Value(value)
    }
}

/// A protocol refusal: `{ code, message, issues? }`. A value for the caller, not a server fault.
///
/// The gateway's own type, not the run service's [`ToolRefusal`](agentprocess_service::ToolRefusal):
/// tool backends other than the run service (tests, `describe`) refuse with it too, and it is
/// what the wire carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
    /// Every problem at once, when the code has them. Omitted on the wire when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub issues: Vec<String>,
    /// The server failed, rather than refused: metrics count it as an error. Not on the wire.
    #[serde(skip)]
    server_failure: bool,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            issues: Vec::new(),
            server_failure: false,
        }
    }

    /// A refusal that says the server failed (its code is `retry`, which is safe to follow).
    pub fn server_failure(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            server_failure: true,
            ..ToolError::new(code, message)
        }
    }

    /// Whether the server failed, rather than refused.
    pub fn is_server_failure(&self) -> bool {
        self.server_failure
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
