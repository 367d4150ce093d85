//! The token endpoint (RFC 6749 §3.2, §4.1.3): an authorization code, its client, redirect URI
//! and PKCE verifier in; a dev token for the person who allowed the client out.

use super::client::RegisteredClient;
use super::code::{CodeGrant, pkce_matches};
use super::{OAuthError, OAuthState, now_seconds, same_resource};
use crate::session::DEV_SESSION_TTL;
use agentprocess_gateway::auth::dev::DevTokenRequest;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::collections::HashMap;

/// The token endpoint's path.
pub const TOKEN_PATH: &str = "/oauth/token";

/// `POST /oauth/token` with `grant_type=authorization_code`. Answers RFC 6749 §5.1 (a bearer
/// token and `expires_in`) or §5.2 (an error), never cached.
pub async fn token(State(state): State<OAuthState>, body: Bytes) -> Response {
    let answer = match exchange(&state, &body) {
        Ok(access_token) => (
            StatusCode::OK,
            Json(json!({
                "access_token": access_token,
                "token_type": "Bearer",
                "expires_in": DEV_SESSION_TTL.as_secs(),
            })),
        )
            .into_response(),
        Err(error) => error.into_response(),
    };
    no_store(answer)
}

/// RFC 6749 §5.1: token answers carry `Cache-Control: no-store` and `Pragma: no-cache`.
fn no_store(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    response
}

/// The checks of RFC 6749 §4.1.3 and RFC 7636 §4.6, in order; the access token when all pass.
fn exchange(state: &OAuthState, body: &[u8]) -> Result<String, OAuthError> {
    let invalid_request = |description: &str| OAuthError::new("invalid_request", description);
    let invalid_grant = |description: &str| OAuthError::new("invalid_grant", description);
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(body)
        .map_err(|_| invalid_request("the body must be application/x-www-form-urlencoded"))?;
    let mut params = HashMap::new();
    for (name, value) in &pairs {
        if params.insert(name.as_str(), value.as_str()).is_some() {
            return Err(invalid_request(&format!("{name} is given more than once")));
        }
    }
    match params.get("grant_type") {
        Some(&"authorization_code") => {}
        Some(_) => {
            return Err(OAuthError::new(
                "unsupported_grant_type",
                "this server grants only authorization_code",
            ));
        }
        None => return Err(invalid_request("grant_type is missing")),
    }
    let required = |name: &str| {
        params
            .get(name)
            .copied()
            .filter(|value| !value.is_empty())
            .ok_or_else(|| invalid_request(&format!("{name} is missing")))
    };
    let client_id = params.get("client_id").copied().ok_or_else(|| {
        OAuthError::new(
            "invalid_client",
            "client_id is missing (a public client names itself)",
        )
    })?;
    let key = &state.ui.key;
    if RegisteredClient::from_client_id(key, client_id).is_none() {
        return Err(OAuthError::new(
            "invalid_client",
            "client_id was not issued by this server: register again",
        ));
    }
    let code = required("code")?;
    let redirect_uri = required("redirect_uri")?;
    let verifier = required("code_verifier")?;
    let resource = state.ui.public_url();
    if let Some(asked) = params.get("resource")
        && !same_resource(asked, resource)
    {
        return Err(OAuthError::new(
            "invalid_target",
            format!("this server issues tokens for {resource} only"),
        ));
    }
    let now = now_seconds();
    let grant = CodeGrant::from_code(key, code)
        .ok_or_else(|| invalid_grant("the code was not issued by this server"))?;
    if grant.expires_at <= now {
        return Err(invalid_grant("the code expired: sign in again"));
    }
    if !grant.is_for_client(client_id) {
        return Err(invalid_grant("the code was issued to another client"));
    }
    if grant.redirect_uri != redirect_uri {
        return Err(invalid_grant(
            "redirect_uri differs from the one the code was sent to",
        ));
    }
    if !pkce_matches(verifier, &grant.code_challenge) {
        return Err(invalid_grant("code_verifier does not match the code_challenge"));
    }
    if !state.redeemed.redeem(&grant, now) {
        return Err(invalid_grant("the code was used already"));
    }
    let identity = grant.identity;
    let request = DevTokenRequest {
        organization: identity.organization.to_string(),
        kind: identity.kind,
        operator: identity.operator,
        ttl: DEV_SESSION_TTL,
    };
    state
        .ui
        .auth
        .mint_dev(&request)
        .ok_or_else(|| OAuthError::new("server_error", "this server is not in dev mode"))
}
