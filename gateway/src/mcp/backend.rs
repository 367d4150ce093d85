//! The seam between the gateway and the run runtime.

use super::result::ToolResult;
use super::tools::ToolName;
use crate::auth::Identity;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;

/// Carries out tool calls for authenticated callers.
///
/// The gateway has already checked the arguments against the tool's schema and answered
/// `describe` itself, so an implementation sees every tool but `describe`, with `arguments`
/// always a JSON object that matches the schema. It returns the `data` of `{ ok: true, data }`
/// or a protocol refusal; infrastructure failures become `retry`. The identity is the only
/// thing it learns about the caller: it NEVER sees the bearer token.
pub trait ToolBackend: Send + Sync + 'static {
    fn call(
        &self,
        identity: &Identity,
        tool: ToolName,
        arguments: Value,
    ) -> impl Future<Output = ToolResult> + Send;
}

impl<B: ToolBackend> ToolBackend for Arc<B> {
    fn call(
        &self,
        identity: &Identity,
        tool: ToolName,
        arguments: Value,
    ) -> impl Future<Output = ToolResult> + Send {
        B::call(self, identity, tool, arguments)
    }
}
