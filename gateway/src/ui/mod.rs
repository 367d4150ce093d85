//! The people's web UI under `/ui`: server-rendered HTML (maud templates compiled in), one
//! embedded stylesheet, no script, every asset in the binary.
//!
//! Routes: `GET /` (to `/ui`), `GET /ui` (who you are; the inbox later), `GET|POST /ui/sign-in`
//! (the dev sign-in form, or the way to the identity provider), `GET /ui/sign-in/provider` and
//! `GET /ui/sign-in/callback` (sign-in with the identity provider, [`provider`]),
//! `POST /ui/sign-out`, and the assets. Sessions and CSRF are in [`session`]: nothing is kept in memory between requests, so
//! every gateway of a cluster serves every page, given the same [`UiKey`].

mod home;
pub mod layout;
pub mod provider;
pub mod session;
pub mod sign_in;
pub mod signing;

pub use session::{SignedForm, SignedIn};
pub use signing::UiKey;

use crate::auth::Authenticator;
use axum::Router;
use axum::response::Redirect;
use axum::routing::get;
use provider::ProviderSignIn;
use session::Cookies;
use std::sync::Arc;

/// What the pages share: the authenticator that checks sessions, the key that signs, and where
/// this server is.
#[derive(Debug)]
pub struct UiState {
    pub auth: Arc<Authenticator>,
    pub key: UiKey,
    pub cookies: Cookies,
    /// Sign-in with the identity provider, when `[auth.provider]` names a client for it.
    pub provider: Option<ProviderSignIn>,
}

impl UiState {
    /// The state of a server whose resource URI is the authenticator's; cookies are `Secure` when
    /// that is https.
    pub fn new(auth: Arc<Authenticator>, key: UiKey, provider: Option<ProviderSignIn>) -> UiState {
        let secure = auth.resource().starts_with("https://");
        UiState {
            auth,
            key,
            cookies: Cookies::new(secure),
            provider,
        }
    }

    /// This server's public URL, without a trailing slash.
    pub fn public_url(&self) -> &str {
        self.auth.resource()
    }
}

/// The UI's routes, `/` included.
pub fn ui_routes(state: Arc<UiState>) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to(session::HOME_PATH) }))
        .route(session::HOME_PATH, get(home::home))
        .route(
            session::SIGN_IN_PATH,
            get(sign_in::sign_in_page).post(sign_in::sign_in),
        )
        .route("/ui/sign-out", axum::routing::post(sign_in::sign_out))
        .route(provider::START_PATH, get(provider::start))
        .route(provider::CALLBACK_PATH, get(provider::callback))
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
