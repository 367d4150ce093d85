//! The MCP endpoint: rmcp's Streamable HTTP transport, stateless, serving the fourteen tools.

mod backend;
pub mod describe;
mod guard;
pub mod result;
mod server;
pub mod tools;

pub use backend::ToolBackend;
pub use describe::DescribeConfig;
pub use result::{ErrorCode, ToolError, ToolResult};
pub use server::ProtocolServer;
pub use tools::{ToolName, UnknownTool};

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
/// protocol revision rmcp knows is negotiated (those with `initialize` and those without).
pub fn mcp_router<B: ToolBackend>(
    server: ProtocolServer<B>,
    max_request_bytes: usize,
    allowed_hosts: Vec<String>,
) -> Router {
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
        .route_layer(from_fn_with_state(max_request_bytes, guard::check_jsonrpc_body))
}
