//! The protocol's error codes (spec §4.3): the one list of them in this server.

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
