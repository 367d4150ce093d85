//! The web console: the people's and operators' pages under `/ui`, sign-in, and in dev mode the
//! OAuth authorization server that signs MCP clients in through it ([`oauth`]). Server-rendered
//! HTML (maud templates compiled in), one embedded stylesheet, no script, every asset in the
//! binary. It reaches runs through the gateway's tool backend as the signed-in caller, and org
//! state through the admin API's parts, exactly as the MCP edge does; the binary mounts
//! [`console_routes`] beside the gateway's router, in `serve` and in a cluster's gateway role.
//!
//! Routes: `GET /` (to `/ui`), `GET /ui` (the inbox, [`inbox`]), `GET|POST /ui/work/{runId}/{stepId}`
//! (a work item and its decisions, [`work`]), `GET|POST /ui/sign-in`
//! (the dev sign-in form, or the way to the identity provider), `GET /ui/sign-in/provider` and
//! `GET /ui/sign-in/callback` (sign-in with the identity provider, [`provider`]),
//! `POST /ui/sign-out`, the operators' overview ([`overview`]), the runs area ([`run_pages`]: runs, a run's page and map, escalations,
//! trust), the operators' processes ([`processes`]) and webhooks ([`webhooks`]) pages, and the
//! assets. Sessions and CSRF are in [`session`]: nothing is kept in memory between requests, so
//! every gateway of a cluster serves every page, given the same [`UiKey`].

pub mod inbox;
pub mod layout;
pub mod markdown;
pub mod oauth;
mod operator;
pub mod overview;
mod processes;
pub mod provider;
pub mod run_pages;
pub mod session;
pub mod sign_in;
pub mod signed_in;
pub mod signing;
mod webhooks;
pub mod when;
pub mod work;

pub use session::SignedForm;
pub use signed_in::SignedIn;
pub use signing::UiKey;

use agentprocess_gateway::AdminParts;
use agentprocess_gateway::Identity;
use agentprocess_gateway::auth::Authenticator;
use agentprocess_gateway::mcp::{ToolData, ToolError, ToolName};
use agentprocess_gateway::tool_caller::ToolCaller;
use agentprocess_org::Clock;
use agentprocess_process::Offer;
use agentprocess_service::{OrgOverview, RunService};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::response::Redirect;
use axum::routing::get;
use provider::ProviderSignIn;
use serde_json::Value;
use session::Cookies;
use std::sync::Arc;

/// What the pages share: the authenticator that checks sessions, the key that signs, where this
/// server is, the tools (as the signed-in caller) and the operators' admin parts.
#[derive(Debug)]
pub struct UiState {
    pub auth: Arc<Authenticator>,
    pub key: UiKey,
    pub cookies: Cookies,
    /// Sign-in with the identity provider, when `[auth.provider]` names a client for it.
    pub provider: Option<ProviderSignIn>,
    /// Every tool but `describe`, called as the signed-in identity through `/mcp`'s backend.
    pub runs: Arc<dyn ToolCaller>,
    /// What `describe` answers (limits, profiles, tools).
    pub describe: Value,
    /// The catalog, webhooks and dead letters, and what publications are checked against; `None`
    /// where the server mounts no admin API.
    pub admin: Option<UiAdmin>,
    /// The organization at a glance (the overview page); `None` where the server reads none.
    pub overview: Option<Arc<dyn OrgOverview>>,
}

/// The operators' parts of the UI: the admin API's parts, the server's offer, and what the
/// admin API's run listings read beside the tools.
#[derive(Debug, Clone)]
pub struct UiAdmin {
    pub parts: AdminParts,
    /// What imports and publications are validated against (as the admin API does).
    pub offer: Offer,
    /// The run service the tools reach, for the organization's ready-step index (the stuck
    /// runs), which only operators read and no tool lists.
    pub run_service: Arc<dyn RunService>,
    /// The server's clock, which ages and the stuck threshold are measured by.
    pub clock: Clock,
}

/// Everything [`UiState::new`] takes.
#[derive(Debug)]
pub struct UiParts {
    pub auth: Arc<Authenticator>,
    pub key: UiKey,
    pub provider: Option<ProviderSignIn>,
    pub runs: Arc<dyn ToolCaller>,
    pub describe: Value,
    pub admin: Option<UiAdmin>,
    pub overview: Option<Arc<dyn OrgOverview>>,
}

impl UiState {
    /// The state of a server whose resource URI is the authenticator's; cookies are `Secure` when
    /// that is https.
    pub fn new(parts: UiParts) -> UiState {
        let secure = parts.auth.resource().starts_with("https://");
        UiState {
            auth: parts.auth,
            key: parts.key,
            cookies: Cookies::new(secure),
            provider: parts.provider,
            runs: parts.runs,
            describe: parts.describe,
            admin: parts.admin,
            overview: parts.overview,
        }
    }

    /// This server's public URL, without a trailing slash.
    pub fn public_url(&self) -> &str {
        self.auth.resource()
    }

    /// Calls `tool` as `identity`, as `/mcp` does: the arguments are checked against the tool's
    /// schema first, `describe` answers from [`UiState::describe`], every other tool goes to the
    /// run services. A page shows a refusal's `issues` next to the fields they name.
    pub async fn call(
        &self,
        identity: &Identity,
        tool: ToolName,
        arguments: Value,
    ) -> Result<Value, ToolError> {
        if let Err(issues) = tool.validate_arguments(&arguments) {
            return Err(ToolError::invalid_arguments(issues));
        }
        match tool {
            ToolName::Describe => Ok(self.describe.clone()),
            _ => self
                .runs
                .run_tool(identity, tool, arguments)
                .await
                .map(ToolData::into_value),
        }
    }
}

/// A configuration the console cannot start with.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("the identity provider sign-in cannot be set up: {0}")]
    ProviderSignIn(String),
}

/// Everything [`console_routes`] takes: the gateway's authenticator (sessions are checked as
/// bearer tokens are), its identity provider settings, the shared key, the backend `/mcp` calls,
/// what `describe` answers, and the operators' parts.
#[derive(Debug)]
pub struct ConsoleParts<'a> {
    pub auth: Arc<Authenticator>,
    pub provider: Option<&'a agentprocess_gateway::auth::ProviderConfig>,
    /// The key sessions' CSRF tokens, OAuth client ids and codes are signed with. Every gateway of
    /// a deployment needs the same one; `None` makes one for this process alone.
    pub key: Option<UiKey>,
    pub runs: Arc<dyn ToolCaller>,
    pub describe: Value,
    pub admin: Option<UiAdmin>,
    /// What the overview page reads; `None`: no overview page.
    pub overview: Option<Arc<dyn OrgOverview>>,
}

/// The console's routes: the pages, and in dev mode (no identity provider) the OAuth
/// authorization server.
pub fn console_routes(parts: ConsoleParts<'_>) -> Result<Router, ConsoleError> {
    let provider = match parts.provider {
        Some(provider) => ProviderSignIn::from_config(provider, parts.auth.resource())
            .map_err(ConsoleError::ProviderSignIn)?,
        None => None,
    };
    let dev_mode = parts.auth.is_dev();
    let state = Arc::new(UiState::new(UiParts {
        auth: parts.auth,
        key: parts.key.unwrap_or_else(UiKey::random),
        provider,
        runs: parts.runs,
        describe: parts.describe,
        admin: parts.admin,
        overview: parts.overview,
    }));
    let mut routes = ui_routes(state.clone());
    if dev_mode {
        routes = routes.merge(oauth::oauth_routes(state));
    }
    Ok(routes)
}

/// The UI's routes, `/` included.
pub fn ui_routes(state: Arc<UiState>) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to(session::HOME_PATH) }))
        .route(session::HOME_PATH, get(inbox::inbox))
        .route(
            work::WORK_PATH,
            get(work::page)
                .post(work::post)
                .layer(DefaultBodyLimit::max(work::max_form_bytes(&state))),
        )
        .route(
            session::SIGN_IN_PATH,
            get(sign_in::sign_in_page).post(sign_in::sign_in),
        )
        .route("/ui/sign-out", axum::routing::post(sign_in::sign_out))
        .route(provider::START_PATH, get(provider::start))
        .route(provider::CALLBACK_PATH, get(provider::callback))
        .route(overview::OVERVIEW_PATH, get(overview::overview_page))
        .merge(run_pages::routes())
        .merge(processes::routes())
        .merge(webhooks::routes())
        .route(
            layout::STYLESHEET_PATH,
            get(|| async { layout::asset("text/css; charset=utf-8", layout::STYLESHEET) }),
        )
        .route(
            layout::ICON_PATH,
            get(|| async { layout::asset("image/svg+xml", layout::ICON) }),
        )
        .with_state(state)
}
