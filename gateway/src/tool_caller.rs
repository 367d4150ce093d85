//! Tools called as an identity through a boxed backend: the console's pages and the operators'
//! reads (escalations, the trust report) reach the run services through the same backend as
//! `/mcp`, so every protocol rule holds for them as for an MCP client.

use crate::Identity;
use crate::mcp::{RunRead, ToolBackend, ToolName, ToolResult};
use serde_json::Value;
use std::fmt;
use std::future::Future;
use std::pin::Pin;

/// A tool call's answer, boxed so callers need not know the backend's type.
pub type ToolCall<'a> = Pin<Box<dyn Future<Output = ToolResult> + Send + 'a>>;

/// Calls tools as an identity. Every [`ToolBackend`] is one. `describe` is not a backend tool:
/// callers answer it from what the gateway's `describe` is configured with.
pub trait ToolCaller: Send + Sync + 'static {
    fn run_tool<'a>(&'a self, identity: &'a Identity, tool: ToolName, arguments: Value) -> ToolCall<'a>;

    /// A read of a run beside the tools (its history), as the identity.
    fn read_run<'a>(&'a self, identity: &'a Identity, read: RunRead, run_id: &'a str) -> ToolCall<'a>;
}

impl<B: ToolBackend> ToolCaller for B {
    fn run_tool<'a>(&'a self, identity: &'a Identity, tool: ToolName, arguments: Value) -> ToolCall<'a> {
        Box::pin(self.call(identity, tool, arguments))
    }

    fn read_run<'a>(&'a self, identity: &'a Identity, read: RunRead, run_id: &'a str) -> ToolCall<'a> {
        Box::pin(ToolBackend::read_run(self, identity, read, run_id))
    }
}

impl fmt::Debug for dyn ToolCaller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ToolCaller")
    }
}
