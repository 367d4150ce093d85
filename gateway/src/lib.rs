//! The MCP gateway: the protocol's edge (the fourteen tools over MCP), the resource server's
//! authentication, uploads and signed file links, and the admin API. The web console is a crate
//! of its own, mounted beside it by the binary.
//!
//! [`router`] builds the gateway's HTTP application from a [`GatewayConfig`] and a
//! [`ToolBackend`] that carries out the tool calls:
//!
//! - `POST /mcp`: MCP over Streamable HTTP (rmcp), stateless, behind bearer-token authentication.
//!   Each tool call's arguments are checked against the protocol's schema, `describe` is answered
//!   here, and every other tool goes to the backend with the caller's [`Identity`]. A plain
//!   `tools/call` is answered without rmcp's per-call machinery, byte for byte as rmcp answers it.
//! - `GET /.well-known/oauth-protected-resource`: the RFC 9728 metadata clients discover the
//!   authorization server from.
//!
//! [`router_with`] mounts more routes: [`admin_routes`], the operators' admin API
//! (`/admin/v1/...`: import, bind, publish, list; webhooks, dead letters) behind the same bearer layer,
//! [`admin_ops::routes`] (runs, cancel, unclaimed work, escalations) beside it, and
//! [`files::file_routes`] (`GET /files/{link}`: the short-lived signed URLs of file evidence),
//! which carry their own credentials.

pub mod admin;
pub mod admin_model;
pub mod admin_ops;
pub mod admin_ops_model;
pub mod admin_runs;
pub mod admission;
pub mod auth;
pub mod escalations;
pub mod files;
pub mod mcp;
pub mod metrics;
pub mod process_diff;
pub mod respond;
pub mod runtime_backend;
mod secret_file;
pub mod tool;
pub mod tool_caller;
pub mod trust;

pub use admin::{AdminParts, admin_routes, trust_routes};
pub use admin_runs::admin_run_routes;
pub use auth::{AuthConfig, Authenticator, Identity, IdentityKind};
pub use mcp::{DescribeConfig, ErrorCode, RunRead, ToolBackend, ToolData, ToolError, ToolName, ToolResult};
pub use runtime_backend::{DecorateResult, RuntimeBackend};

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::get;
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::Arc;

/// The public URL of a gateway run with no configuration (dev mode on this machine).
pub const DEFAULT_PUBLIC_URL: &str = "http://127.0.0.1:8080";
/// The data folder used when none is given, relative to the working folder.
pub const DEFAULT_DATA_DIR: &str = ".agentprocess";

/// Everything the gateway needs to know.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// The URL clients reach this server at, without `/mcp`. It is the OAuth resource URI: the
    /// audience tokens must name, and in dev mode also their issuer.
    pub public_url: String,
    /// Where local state lives; dev mode keeps its signing key here unless `dev_key` names it.
    pub data_dir: PathBuf,
    /// Dev mode: the signing key file every gateway of a cluster shares, instead of the one in
    /// `data_dir`.
    pub dev_key: Option<PathBuf>,
    pub auth: AuthConfig,
    pub describe: DescribeConfig,
    /// The largest request body `/mcp` takes. Default: room for the largest upload in base64.
    pub max_request_bytes: Option<usize>,
    /// `Host` header values accepted besides the public URL's host and loopback names (DNS
    /// rebinding protection). `["*"]` accepts any host.
    pub allowed_hosts: Vec<String>,
    /// How many tool calls this gateway takes at once, and how fast from one identity or one
    /// organization (none by default).
    pub admission: admission::AdmissionLimits,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            public_url: DEFAULT_PUBLIC_URL.to_owned(),
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            dev_key: None,
            auth: AuthConfig::default(),
            describe: DescribeConfig::default(),
            max_request_bytes: None,
            allowed_hosts: Vec::new(),
            admission: admission::AdmissionLimits::default(),
        }
    }
}

/// A configuration the gateway cannot start with.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("public_url {0:?} is not an absolute http(s) URL")]
    PublicUrl(String),
    #[error(transparent)]
    Auth(#[from] auth::AuthConfigError),
}

impl GatewayConfig {
    /// The resource URI: the public URL without a trailing slash.
    pub fn resource(&self) -> String {
        resource_uri(&self.public_url)
    }

    /// Where dev mode finds its signing key: `dev_key` when set, else the data folder.
    pub fn dev_key_location(&self) -> auth::DevKeyLocation {
        match &self.dev_key {
            Some(path) => auth::DevKeyLocation::File(path.clone()),
            None => auth::DevKeyLocation::DataDir(self.data_dir.clone()),
        }
    }

    fn max_request_bytes(&self) -> usize {
        self.max_request_bytes.unwrap_or_else(|| {
            let upload = usize::try_from(self.describe.max_upload_bytes).unwrap_or(usize::MAX);
            // base64 grows by 4/3; the rest of the call is small.
            upload.div_ceil(3).saturating_mul(4).saturating_add(1024 * 1024)
        })
    }

    fn allowed_hosts(&self) -> Vec<String> {
        if self.allowed_hosts.iter().any(|host| host == "*") {
            return Vec::new();
        }
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).into();
        if let Ok(url) = reqwest::Url::parse(&self.public_url)
            && let Some(host) = url.host_str()
        {
            hosts.push(host.trim_matches(['[', ']']).to_owned());
        }
        hosts.extend(self.allowed_hosts.iter().cloned());
        hosts
    }
}

/// The resource URI for a public URL: the URL without a trailing slash. Dev tokens name it as
/// issuer and audience.
pub fn resource_uri(public_url: &str) -> String {
    public_url.trim_end_matches('/').to_owned()
}

/// Builds the gateway's HTTP application. Reads (or in dev mode creates) the signing keys.
pub fn router<B: ToolBackend>(config: &GatewayConfig, backend: B) -> Result<Router, ConfigError> {
    router_with(config, backend, ExtraRoutes::default()).map(|gateway| gateway.router)
}

/// A built gateway: its routes, and the authenticator they check bearer tokens with, which the
/// console mounted beside it checks sessions with too.
#[derive(Debug)]
pub struct Gateway {
    pub router: Router,
    pub authenticator: Arc<Authenticator>,
}

/// Routes served next to the MCP endpoint.
#[derive(Debug, Default)]
pub struct ExtraRoutes {
    /// Served behind bearer authentication: handlers find the caller's [`Identity`] in the
    /// request extensions (the admin API).
    pub authenticated: Router,
    /// Served without a bearer token: they check their own credentials (signed file URLs).
    pub public: Router,
}

/// [`router`] with more routes: see [`ExtraRoutes`].
pub fn router_with<B: ToolBackend>(
    config: &GatewayConfig,
    backend: B,
    extra: ExtraRoutes,
) -> Result<Gateway, ConfigError> {
    build_router(config, backend, extra, true)
}

/// [`router_with`], with the MCP endpoint's direct path for plain `tools/call`s or without it.
/// Only the tests that compare the two answers build one without it.
pub(crate) fn build_router<B: ToolBackend>(
    config: &GatewayConfig,
    backend: B,
    extra: ExtraRoutes,
    direct_calls: bool,
) -> Result<Gateway, ConfigError> {
    let resource = config.resource();
    match reqwest::Url::parse(&resource) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {}
        _ => return Err(ConfigError::PublicUrl(config.public_url.clone())),
    }
    let authenticator = Arc::new(Authenticator::new(
        &config.auth,
        &resource,
        &config.dev_key_location(),
    )?);
    if config.auth.provider.is_none() {
        tracing::warn!(
            dev_key = %config.dev_key_location().key_path().display(),
            "no identity provider configured: dev mode, accepting tokens from `agentprocess token`"
        );
    }
    let backend = Arc::new(backend);
    let server = mcp::ProtocolServer::with_admission(
        backend.clone(),
        config.describe.result(),
        config.admission.clone(),
    );
    let mut app = mcp::mcp_router_with(
        server,
        config.max_request_bytes(),
        config.allowed_hosts(),
        direct_calls,
    )
    .route_layer(from_fn_with_state(authenticator.clone(), auth::require_bearer));
    if extra.authenticated.has_routes() {
        app = app.merge(
            extra
                .authenticated
                .route_layer(from_fn_with_state(authenticator.clone(), auth::require_bearer)),
        );
    }
    let metadata = Router::new()
        .route(
            &auth::metadata_path(&resource),
            get(auth::protected_resource_metadata),
        )
        .with_state(authenticator.clone());
    let app = app.merge(metadata).merge(extra.public);
    Ok(Gateway {
        router: app,
        authenticator,
    })
}

pub use agentprocess_service::error_chain;
