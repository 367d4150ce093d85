//! The people's web UI under `/ui`: server-rendered HTML (maud templates compiled in), one
//! embedded stylesheet, no script, every asset in the binary.
//!
//! Routes: `GET /` (to `/ui`), `GET /ui` (the inbox, [`inbox`]), `GET|POST /ui/work/{runId}/{stepId}`
//! (a work item and its decisions, [`work`]), `GET|POST /ui/sign-in`
//! (the dev sign-in form, or the way to the identity provider), `GET /ui/sign-in/provider` and
//! `GET /ui/sign-in/callback` (sign-in with the identity provider, [`provider`]),
//! `POST /ui/sign-out`, the runs area ([`run_pages`]: runs, a run's page and map, escalations,
//! trust), the operators' processes ([`processes`]) and webhooks ([`webhooks`]) pages, and the
//! assets. Sessions and CSRF are in [`session`]: nothing is kept in memory between requests, so
//! every gateway of a cluster serves every page, given the same [`UiKey`].

pub mod inbox;
pub mod layout;
pub mod markdown;
mod operator;
mod processes;
pub mod provider;
pub mod run_pages;
pub mod runs;
pub mod session;
pub mod sign_in;
pub mod signing;
mod webhooks;
pub mod when;
pub mod work;

pub use runs::UiRuns;
pub use session::{SignedForm, SignedIn};
pub use signing::UiKey;

use crate::AdminParts;
use crate::Identity;
use crate::auth::Authenticator;
use crate::mcp::{ToolData, ToolError, ToolName};
use agentprocess_process::Offer;
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
    pub runs: Arc<dyn UiRuns>,
    /// What `describe` answers (limits, profiles, tools).
    pub describe: Value,
    /// The catalog, webhooks and dead letters, and what publications are checked against; `None`
    /// where the server mounts no admin API.
    pub admin: Option<UiAdmin>,
}

/// The operators' parts of the UI: the admin API's parts and the server's offer.
#[derive(Debug, Clone)]
pub struct UiAdmin {
    pub parts: AdminParts,
    /// What imports and publications are validated against (as the admin API does).
    pub offer: Offer,
}

/// Everything [`UiState::new`] takes.
#[derive(Debug)]
pub struct UiParts {
    pub auth: Arc<Authenticator>,
    pub key: UiKey,
    pub provider: Option<ProviderSignIn>,
    pub runs: Arc<dyn UiRuns>,
    pub describe: Value,
    pub admin: Option<UiAdmin>,
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
