//! The MCP endpoint: rmcp's Streamable HTTP transport, stateless, serving the fourteen tools.

mod backend;
pub mod describe;
mod direct;
mod guard;
mod server;
pub mod work_resource;

pub use crate::tool::{ErrorCode, ToolData, ToolError, ToolName, ToolResult, UnknownTool};
pub use backend::{RunRead, ToolBackend, WORK_PAGE_LIMIT, WorkWait};
pub use describe::DescribeConfig;
pub use server::ProtocolServer;

use axum::Router;
use axum::middleware::from_fn_with_state;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;

/// The path of the MCP endpoint.
pub const MCP_PATH: &str = "/mcp";

/// A router serving the MCP endpoint at [`MCP_PATH`], without authentication: the caller layers
/// authentication in front, which must put an [`Identity`](crate::auth::Identity) in the request
/// extensions.
///
/// Stateless: no protocol sessions, so any gateway instance serves any call, and every MCP
/// protocol revision rmcp knows is negotiated (those with `initialize` and those without). A
/// plain `tools/call` is answered on the direct path (see `direct`), everything else by rmcp.
pub fn mcp_router<B: ToolBackend>(
    server: ProtocolServer<B>,
    max_request_bytes: usize,
    allowed_hosts: Vec<String>,
) -> Router {
    mcp_router_with(server, max_request_bytes, allowed_hosts, true)
}

/// [`mcp_router`], with the direct path or without it (then rmcp answers every request, which
/// the tests compare the direct path's answers with).
pub(crate) fn mcp_router_with<B: ToolBackend>(
    server: ProtocolServer<B>,
    max_request_bytes: usize,
    allowed_hosts: Vec<String>,
    direct_calls: bool,
) -> Router {
    let guard = Arc::new(guard::Guard {
        max_bytes: max_request_bytes,
        direct: direct_calls.then(|| direct::DirectCalls::new(server.clone(), &allowed_hosts)),
    });
    let transport = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(max_request_bytes);
    let transport = if allowed_hosts.is_empty() {
        transport.disable_allowed_hosts()
    } else {
        transport.with_allowed_hosts(allowed_hosts)
    };
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(NeverSessionManager::default()),
        transport,
    );
    Router::new()
        .route_service(MCP_PATH, service)
        .route_layer(from_fn_with_state(guard, guard::check_jsonrpc_body::<B>))
}
