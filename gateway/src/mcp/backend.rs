//! The seam between the gateway and the run runtime.

use crate::auth::Identity;
use crate::tool::names::ToolName;
use crate::tool::result::ToolResult;
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

    /// A read of run `run_id` that no tool makes (see [`RunRead`]), answered like a tool:
    /// its data, or a refusal (`not_found` for a run the caller's organization does not have,
    /// `forbidden` for an inspection by a non-operator).
    fn read_run(
        &self,
        identity: &Identity,
        read: RunRead,
        run_id: &str,
    ) -> impl Future<Output = ToolResult> + Send;

    /// The caller's first `get_work` page (of up to 100 items), read for a resource or a
    /// `subscriptions/listen` stream rather than a tool call: see [`WorkWait`]. A backend that
    /// cannot wait answers the page at once, through `get_work`.
    fn work_page(&self, identity: &Identity, wait: WorkWait) -> impl Future<Output = ToolResult> + Send {
        let mut arguments = serde_json::json!({ "limit": WORK_PAGE_LIMIT });
        if let Some(process) = wait.process {
            arguments["process"] = Value::String(process);
        }
        self.call(identity, ToolName::GetWork, arguments)
    }
}

/// Most items of a [`ToolBackend::work_page`].
pub const WORK_PAGE_LIMIT: usize = 100;

/// Which `get_work` page [`ToolBackend::work_page`] reads, and how long it may wait for one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkWait {
    /// Only work of this process.
    pub process: Option<String>,
    /// `None`: the page as it is. Else the page once it holds work, or once `wait` passed (the
    /// `x-wait-1` wait).
    pub wait: Option<std::time::Duration>,
    /// With `wait`: the page once work is made ready after the read started, whatever it holds
    /// now; an empty page when none was.
    pub only_new: bool,
}

/// The reads of one run beside the protocol's tools: the operator's audit trail and an
/// operator's inspection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunRead {
    /// `{ runId, events, dropped }`: the run's history, for whoever may `get_run` the run.
    History,
    /// `{ run, steps, workItems }` with claim holders and expiries: operators only.
    Inspection,
}

impl RunRead {
    pub fn as_str(self) -> &'static str {
        match self {
            RunRead::History => "run_history",
            RunRead::Inspection => "inspect_run",
        }
    }
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

    fn read_run(
        &self,
        identity: &Identity,
        read: RunRead,
        run_id: &str,
    ) -> impl Future<Output = ToolResult> + Send {
        B::read_run(self, identity, read, run_id)
    }

    fn work_page(&self, identity: &Identity, wait: WorkWait) -> impl Future<Output = ToolResult> + Send {
        B::work_page(self, identity, wait)
    }
}
