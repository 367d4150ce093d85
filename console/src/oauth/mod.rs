//! Dev mode's OAuth 2.1 authorization server, so that an MCP client connects with nothing but
//! the server's URL and a browser sign-in (MCP authorization: RFC 9728 → RFC 8414 → RFC 7591 →
//! authorization code with PKCE).
//!
//! Served only in dev mode, by `serve` and by every gateway of a cluster:
//!
//! - `GET /.well-known/oauth-authorization-server` (RFC 8414), also named in the protected
//!   resource metadata's `authorization_servers` (RFC 9728). The issuer is the public URL, which
//!   is also the issuer of dev tokens.
//! - `POST /oauth/register` (RFC 7591): public clients only, redirect URIs https or http to a
//!   loopback address.
//! - `GET|POST /oauth/authorize`: authorization code with PKCE S256 only. A browser without a
//!   session goes through the dev sign-in first; a signed-in person is asked to allow the client.
//! - `POST /oauth/token`: the code for a dev token of the person who allowed it, `Bearer`, with
//!   `expires_in`. No refresh tokens: they could not be revoked or rotated without state, and
//!   a client signs in again when its token expires.
//!
//! Nothing is stored. A client id is the registration itself (redirect URIs, name), signed with
//! the UI key every gateway shares; a code is the grant itself (client, redirect URI, PKCE
//! challenge, identity, expiry, a random nonce), signed the same way. So any gateway checks any
//! client id and redeems any code.
//!
//! Single use of codes, as far as that design allows: a gateway remembers the nonces of the codes
//! it redeemed until they expire and refuses them a second time, and a code lives one minute.
//! Two gateways of a cluster do not share that memory, so within that minute a code could be
//! redeemed once on each; doing so still takes the PKCE verifier, which only the client that
//! asked for the code holds (RFC 7636), so a code stolen from a browser history or log is useless.

pub mod authorize;
pub mod client;
pub mod code;
pub mod token;

use crate::UiState;
use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRef, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use code::RedeemedCodes;
use serde::Serialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The registration endpoint's path.
pub const REGISTER_PATH: &str = "/oauth/register";

/// What the endpoints share: the UI's state (key, sessions, dev minting) and the codes this
/// gateway redeemed.
#[derive(Debug, Clone)]
pub struct OAuthState {
    pub ui: Arc<UiState>,
    pub redeemed: Arc<RedeemedCodes>,
}

impl FromRef<OAuthState> for Arc<UiState> {
    fn from_ref(state: &OAuthState) -> Arc<UiState> {
        state.ui.clone()
    }
}

/// An OAuth error answer (RFC 6749 §5.2, RFC 7591 §3.2.2): a 400 with `error` and
/// `error_description`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OAuthError {
    pub error: &'static str,
    pub error_description: String,
}

impl OAuthError {
    pub fn new(error: &'static str, description: impl Into<String>) -> OAuthError {
        OAuthError {
            error,
            error_description: description.into(),
        }
    }
}

impl IntoResponse for OAuthError {
    fn into_response(self) -> Response {
        let status = match self.error {
            "invalid_client" => StatusCode::UNAUTHORIZED,
            "server_error" => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        };
        (status, Json(self)).into_response()
    }
}

/// The authorization server's routes. Mount only in dev mode.
pub fn oauth_routes(ui: Arc<UiState>) -> Router {
    let metadata_path = metadata_path(ui.public_url());
    let state = OAuthState {
        ui,
        redeemed: Arc::new(RedeemedCodes::default()),
    };
    Router::new()
        .route(&metadata_path, get(metadata))
        .route(REGISTER_PATH, post(register))
        .route(
            authorize::AUTHORIZE_PATH,
            get(authorize::authorize_page).post(authorize::decide),
        )
        .route(token::TOKEN_PATH, post(token::token))
        .with_state(state)
}

/// Where the metadata of the issuer `issuer` is served (RFC 8414 §3.1): the well-known prefix,
/// then the issuer's path, if it has one.
pub fn metadata_path(issuer: &str) -> String {
    let path = url::Url::parse(issuer)
        .map(|url| url.path().trim_end_matches('/').to_owned())
        .unwrap_or_default();
    format!("/.well-known/oauth-authorization-server{path}")
}

/// The authorization server metadata (RFC 8414 §2) of the server at `issuer`.
pub fn metadata_document(issuer: &str) -> Value {
    json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}{}", authorize::AUTHORIZE_PATH),
        "token_endpoint": format!("{issuer}{}", token::TOKEN_PATH),
        "registration_endpoint": format!("{issuer}{REGISTER_PATH}"),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code"],
        "token_endpoint_auth_methods_supported": ["none"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": true,
    })
}

async fn metadata(State(state): State<OAuthState>) -> Json<Value> {
    Json(metadata_document(state.ui.public_url()))
}

/// `POST /oauth/register`: a 201 with the client id and the metadata as registered, or a 400.
async fn register(State(state): State<OAuthState>, body: Bytes) -> Response {
    let Ok(metadata) = serde_json::from_slice::<Value>(&body) else {
        return OAuthError::new("invalid_client_metadata", "the body must be a JSON object").into_response();
    };
    match client::register(&metadata, now_seconds()) {
        Ok(registered) => (
            StatusCode::CREATED,
            Json(client::registration_response(&registered, &state.ui.key)),
        )
            .into_response(),
        Err(error) => error.into_response(),
    }
}

/// Whether `asked`, a `resource` parameter (RFC 8707), names this server's resource `ours`: the
/// same URL, a trailing slash aside.
pub fn same_resource(asked: &str, ours: &str) -> bool {
    asked.trim_end_matches('/') == ours.trim_end_matches('/')
}

/// Seconds since 1970 by this machine's clock: code lifetimes.
fn now_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_secs()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8414 §3.1 and §2; MCP authorization requires code_challenge_methods_supported.
    #[test]
    fn metadata_follows_rfc_8414() {
        assert_eq!(
            metadata_path("http://127.0.0.1:8080"),
            "/.well-known/oauth-authorization-server"
        );
        assert_eq!(
            metadata_path("https://example.com/ap"),
            "/.well-known/oauth-authorization-server/ap"
        );
        let document = metadata_document("http://127.0.0.1:8080");
        assert_eq!(document["issuer"], "http://127.0.0.1:8080");
        assert_eq!(document["token_endpoint"], "http://127.0.0.1:8080/oauth/token");
        assert_eq!(document["code_challenge_methods_supported"], json!(["S256"]));
    }

    #[test]
    fn a_resource_matches_with_or_without_its_slash() {
        assert!(same_resource("http://127.0.0.1:8080/", "http://127.0.0.1:8080"));
        assert!(same_resource("http://127.0.0.1:8080", "http://127.0.0.1:8080"));
        assert!(!same_resource(
            "http://127.0.0.1:8080/mcp",
            "http://127.0.0.1:8080"
        ));
    }
}
