//! The HTTP application a gateway serves, in `serve` and in a cluster's gateway role: the
//! gateway's routes (MCP, auth metadata, admin API, file links) with the web console beside them.

use agentprocess_console::{ConsoleParts, UiAdmin, UiKey, console_routes};
use agentprocess_gateway::{ExtraRoutes, GatewayConfig, ToolBackend, router_with};
use agentprocess_service::OrgOverview;
use anyhow::Context;
use axum::Router;
use std::sync::Arc;

/// What the web UI's key is derived from the file URL key for: every gateway that shares the
/// one shares the other.
pub(crate) const UI_KEY_PURPOSE: &str = "web ui";

/// The gateway's routes and the console's, the console checking sessions with the gateway's
/// authenticator, calling tools through the same backend as `/mcp`, and reading its overview
/// page from `overview`.
pub(crate) fn gateway_with_console<B: ToolBackend>(
    config: &GatewayConfig,
    backend: Arc<B>,
    extra: ExtraRoutes,
    console_key: UiKey,
    admin: UiAdmin,
    overview: Arc<dyn OrgOverview>,
) -> anyhow::Result<Router> {
    let gateway = router_with(config, backend.clone(), extra).context("the gateway cannot start")?;
    let console = console_routes(ConsoleParts {
        auth: gateway.authenticator,
        provider: config.auth.provider.as_ref(),
        key: Some(console_key),
        runs: backend,
        describe: config.describe.result(),
        admin: Some(admin),
        overview: Some(overview),
    })
    .context("the web console cannot start")?;
    Ok(gateway.router.merge(console))
}
