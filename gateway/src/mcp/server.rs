//! The MCP server handler: lists the fourteen tools and turns each call into a backend call.

use super::backend::{ToolBackend, WorkWait};
use super::work_resource;
use crate::admission::{Admission, AdmissionLimits};
use crate::auth::Identity;
use crate::metrics::GatewayMetrics;
use crate::respond;
use crate::tool::names::ToolName;
use crate::tool::result::{ToolData, ToolError, ToolResult};
use agentprocess_service::trace::{self, TraceParent};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use rmcp::ErrorData as McpError;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ServerCapabilities, ServerConfig, SubscribeRequestParams, SubscriptionFilter, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;

const INSTRUCTIONS: &str = "An Agent Process server. Call describe first. Agents: get_work, claim, \
    do the step, submit (or escalate). People: get_work, then decide. Every result is \
    { ok: true, data } or { ok: false, error: { code, message, issues? } }.";

/// One MCP server; cheap to clone, since the stateless transport builds one per request.
#[derive(Debug)]
pub struct ProtocolServer<B> {
    shared: Arc<Shared<B>>,
}

impl<B> Clone for ProtocolServer<B> {
    fn clone(&self) -> Self {
        ProtocolServer {
            shared: self.shared.clone(),
        }
    }
}

#[derive(Debug)]
struct Shared<B> {
    backend: B,
    describe: Value,
    tools: Vec<Tool>,
    metrics: GatewayMetrics,
    admission: Admission,
}

impl<B: ToolBackend> ProtocolServer<B> {
    /// `describe` is the `data` the gateway answers `describe` with.
    /// Records into the process-wide meter provider's instruments.
    pub fn new(backend: B, describe: Value) -> Self {
        ProtocolServer::with_metrics(backend, describe, GatewayMetrics::global())
    }

    /// [`ProtocolServer::new`], recording into `metrics`.
    pub fn with_metrics(backend: B, describe: Value, metrics: GatewayMetrics) -> Self {
        ProtocolServer::build(backend, describe, metrics, AdmissionLimits::default())
    }

    /// [`ProtocolServer::new`], admitting calls within `limits` ([`Admission`]).
    pub fn with_admission(backend: B, describe: Value, limits: AdmissionLimits) -> Self {
        ProtocolServer::build(backend, describe, GatewayMetrics::global(), limits)
    }

    fn build(backend: B, describe: Value, metrics: GatewayMetrics, limits: AdmissionLimits) -> Self {
        let tools = ToolName::ALL.into_iter().map(tool_listing).collect();
        ProtocolServer {
            shared: Arc::new(Shared {
                backend,
                describe,
                tools,
                metrics,
                admission: Admission::new(limits),
            }),
        }
    }

    /// Runs one tool call, if admitted ([`Admission`]: else `retry` at once), and counts its
    /// outcome and duration.
    pub async fn call(
        &self,
        identity: &Identity,
        tool: ToolName,
        arguments: Option<Map<String, Value>>,
    ) -> ToolResult {
        let started = Instant::now();
        let result = match self.shared.admission.admit(identity, started) {
            Ok(_admitted) => self.call_unrecorded(identity, tool, arguments).await,
            Err(refused) => {
                self.shared.metrics.record_admission_refusal(refused.limit);
                Err(refused.error)
            }
        };
        self.shared
            .metrics
            .record_tool_call(tool.as_str(), &result, started.elapsed());
        result
    }

    /// Runs one validated tool call: `describe` here, every other tool in the backend.
    async fn call_unrecorded(
        &self,
        identity: &Identity,
        tool: ToolName,
        arguments: Option<Map<String, Value>>,
    ) -> ToolResult {
        let arguments = Value::Object(arguments.unwrap_or_default());
        if let Err(issues) = tool.validate_arguments(&arguments) {
            return Err(ToolError::invalid_arguments(issues));
        }
        match tool {
            ToolName::Describe => Ok(self.shared.describe.clone().into()),
            _ => self.shared.backend.call(identity, tool, arguments).await,
        }
    }
}

impl<B: ToolBackend> ProtocolServer<B> {
    /// Runs one tool call of the MCP endpoint: [`ProtocolServer::call`] in a `tool_call` span
    /// naming the tool, the organization, the run and the trace, with the outcome logged (a
    /// refusal with its code), in the caller's W3C trace when its request carried a valid
    /// `traceparent` ([`trace_of_call`]), else in a new one; the roles it calls get the trace
    /// over gRPC, with this span as their parent. Both ways a `tools/call` is answered (rmcp's
    /// handler and the direct path) go through here.
    pub(crate) async fn answer(
        &self,
        identity: &Identity,
        tool: ToolName,
        arguments: Option<Map<String, Value>>,
        caller_trace: Option<TraceParent>,
    ) -> ToolResult {
        let span = tracing::info_span!(
            "tool_call",
            tool = tool.as_str(),
            organization = identity.organization.as_str(),
            runId = run_id_of_call(arguments.as_ref()),
            traceId = tracing::field::Empty,
            spanId = tracing::field::Empty,
        );
        let trace = trace::join(&span, caller_trace, trace::random_ids());
        let result = trace::scope(
            trace,
            self.call(identity, tool, arguments).instrument(span.clone()),
        )
        .await;
        // A refusal is the caller's answer, not the server's trouble; operators follow a run by
        // it all the same: an info line with its code.
        if let Err(refusal) = &result {
            span.in_scope(|| {
                tracing::info!(
                    code = refusal.code.as_str(),
                    detail = %refusal.message,
                    issues = %refusal.issues.join("; "),
                    "tool call refused"
                )
            });
        }
        result
    }
}

/// The caller's trace, when its call carried a valid W3C `traceparent`: in the request's
/// `_meta` (MCP 2026-07-28 carries it per request), else in the HTTP header.
pub(crate) fn trace_of_call(headers: &HeaderMap, meta: Option<&Map<String, Value>>) -> Option<TraceParent> {
    let in_meta = meta
        .and_then(|meta| meta.get(TRACEPARENT))
        .and_then(Value::as_str)
        .and_then(TraceParent::parse);
    in_meta.or_else(|| {
        headers
            .get(TRACEPARENT)
            .and_then(|value| value.to_str().ok())
            .and_then(TraceParent::parse)
    })
}

/// The header (and gRPC metadata key) of W3C Trace Context.
const TRACEPARENT: &str = "traceparent";

/// The run a call is about: its `runId`, or the run a claim token names (`submit`, `renew`,
/// `escalate` carry only the token).
fn run_id_of_call(arguments: Option<&Map<String, Value>>) -> Option<&str> {
    arguments
        .and_then(|a| a.get("runId"))
        .and_then(Value::as_str)
        .or_else(|| {
            arguments
                .and_then(|a| a.get("token"))
                .and_then(Value::as_str)
                .and_then(agentprocess_service::run_id_of_token)
        })
}

/// How a tool appears in `tools/list`: its name, description, argument schema and result schema.
fn tool_listing(tool: ToolName) -> Tool {
    let annotations = ToolAnnotations::new()
        .read_only(tool.is_read_only())
        .destructive(tool == ToolName::Cancel)
        .idempotent(true)
        .open_world(false);
    Tool::new(tool.as_str(), tool.description(), tool.arguments_schema())
        .with_raw_output_schema(tool.output_schema())
        .with_annotations(annotations)
}

/// The identity the auth layer in front of the MCP endpoint put in the HTTP request's
/// extensions, which rmcp hands to the handler.
fn identity_of(context: &RequestContext<RoleServer>) -> Result<Identity, McpError> {
    context
        .extensions
        .get::<Parts>()
        .and_then(|parts| parts.extensions.get::<Identity>())
        .cloned()
        .ok_or_else(|| McpError::internal_error("the request arrived without an identity", None))
}

impl<B: ToolBackend> ServerHandler for ProtocolServer<B> {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_resources_subscribe()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("agentprocess", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.shared.tools.clone()))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let work = Resource::new(work_resource::WORK_URI, "work")
            .with_title("Your work")
            .with_description(
                "What get_work lists for you, first page. Subscribe to it on a \
                 subscriptions/listen stream to hear when new work is ready; add \
                 ?process=NAME for one process's work.",
            )
            .with_mime_type("application/json");
        Ok(ListResourcesResult::with_all_items(vec![work]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let Some(process) = work_resource::process_of(&request.uri) else {
            return Err(McpError::resource_not_found(
                format!(
                    "no resource {}: this server has {} (and ?process=NAME)",
                    request.uri,
                    work_resource::WORK_URI
                ),
                None,
            ));
        };
        let identity = identity_of(&context)?;
        let wait = WorkWait {
            process,
            ..WorkWait::default()
        };
        match self.shared.backend.work_page(&identity, wait).await {
            Ok(page) => {
                let text = match page {
                    ToolData::Value(value) => value.to_string(),
                    ToolData::Rendered(rendered) => rendered.json().to_owned(),
                };
                let contents = ResourceContents::text(text, request.uri).with_mime_type("application/json");
                Ok(ReadResourceResult::new(vec![contents]).into())
            }
            Err(refused) => Err(McpError::internal_error(
                format!("{}: {}", refused.code.as_str(), refused.message),
                Some(serde_json::json!({ "code": refused.code.as_str(), "issues": refused.issues })),
            )),
        }
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        let work: Vec<String> = requested
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|uri| work_resource::process_of(uri).is_some())
            .cloned()
            .collect();
        Some(SubscriptionFilter::builder().resource_subscriptions(work).build())
    }

    /// MCP 2025-11-25 delivers updates on a session's GET stream, and gateways keep no sessions
    /// (any of them answers any request): say so, and what works instead.
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        _request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Err(McpError::invalid_request(
            "resources/subscribe needs a session, and this server keeps none; subscribe on a \
             subscriptions/listen stream (MCP 2026-07-28), or call get_work with waitSeconds \
             (profile x-wait-1)",
            None,
        ))
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        let identity = identity_of(subscription.request_context())?;
        let streams = subscription
            .accepted()
            .resource_subscriptions
            .iter()
            .flatten()
            .map(|uri| {
                work_resource::tell_of_new_work(
                    &self.shared.backend,
                    &identity,
                    uri.clone(),
                    subscription.sink().clone(),
                )
            })
            .collect::<Vec<_>>();
        tokio::select! {
            _ = subscription.cancelled() => {}
            _ = futures_util::future::join_all(streams) => {}
        }
        Ok(())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.shared.tools.iter().find(|tool| tool.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let tool: ToolName = request
            .name
            .parse()
            .map_err(|unknown: crate::tool::UnknownTool| {
                McpError::invalid_params(unknown.to_string(), None)
            })?;
        let identity = identity_of(&context)?;
        // rmcp hands a request's `_meta` to the handler in the context, or leaves it in the
        // parameters.
        let meta = Some(&context.meta.0.0)
            .filter(|meta| meta.contains_key(TRACEPARENT))
            .or(request.meta.as_ref().map(|meta| &meta.0.0));
        let trace = match context.extensions.get::<Parts>() {
            Some(parts) => trace_of_call(&parts.headers, meta),
            None => trace_of_call(&HeaderMap::new(), meta),
        };
        let result = self.answer(&identity, tool, request.arguments, trace).await;
        Ok(respond::tool_result(result).into())
    }
}
