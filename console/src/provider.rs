//! Sign-in with the identity provider (`[auth.provider]` with a `client_id`): OpenID Connect's
//! authorization code flow with PKCE.
//!
//! `GET /ui/sign-in/provider` finds the provider's endpoints (OpenID Connect Discovery, from
//! `{issuer}/.well-known/openid-configuration`, once), keeps the state, the PKCE verifier and
//! where to go afterwards in a short-lived cookie signed with the UI key, and sends the browser
//! to the provider, asking for a token for this server (`resource`, RFC 8707). The provider
//! sends it back to `GET /ui/sign-in/callback`, which checks the state, exchanges the code with
//! the verifier, and verifies the access token with the same [`Authenticator`] as MCP bearer
//! tokens: its claims give the identity, and it becomes the session. The ID token is not used.
//! The session lasts as long as the access token; there is no refresh.
//!
//! [`Authenticator`]: agentprocess_gateway::auth::Authenticator

use super::UiState;
use super::layout::{Page, message_page};
use super::session::{MAX_SESSION_TOKEN_BYTES, SIGN_IN_COOKIE_SECONDS, SIGN_IN_PATH, read_cookie, safe_next};
use super::signing::random_text;
use crate::signed_in::SignedIn;
use agentprocess_gateway::auth::{AuthError, ProviderConfig};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use maud::html;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::Mutex;

/// Where a provider sign-in starts.
pub const START_PATH: &str = "/ui/sign-in/provider";
/// Where the provider sends the browser back: the redirect URI to register with it, under the
/// public URL, unless `redirect_url` says otherwise.
pub const CALLBACK_PATH: &str = "/ui/sign-in/callback";
/// The scopes asked for unless `sign_in_scopes` names others.
pub const DEFAULT_SCOPES: &str = "openid";
/// What the sign-in cookie is signed for.
const STATE_PURPOSE: &str = "provider sign-in";
/// How long a session lasts when the provider does not say how long its token does.
const DEFAULT_SESSION_SECONDS: u64 = 3600;

/// The client this server is at the identity provider, for signing people in.
pub struct ProviderSignIn {
    issuer: String,
    client_id: String,
    client_secret: Option<String>,
    redirect_url: String,
    scopes: String,
    resource: String,
    http: reqwest::Client,
    endpoints: Mutex<Option<Endpoints>>,
}

impl fmt::Debug for ProviderSignIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderSignIn")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("redirect_url", &self.redirect_url)
            .finish_non_exhaustive()
    }
}

/// The provider's endpoints, from its discovery document.
#[derive(Debug, Clone)]
struct Endpoints {
    authorization: String,
    token: String,
    /// Whether the client authenticates with HTTP Basic (else in the body).
    basic_auth: bool,
}

/// What the sign-in cookie holds between the redirect to the provider and its answer.
#[derive(Debug, Serialize, Deserialize)]
struct PendingSignIn {
    #[serde(rename = "s")]
    state: String,
    #[serde(rename = "v")]
    verifier: String,
    #[serde(rename = "n")]
    next: String,
    #[serde(rename = "e")]
    expires_at: u64,
}

impl ProviderSignIn {
    /// The sign-in `provider` configures for the server at `public_url`, if it names a client.
    pub fn from_config(provider: &ProviderConfig, public_url: &str) -> Result<Option<Self>, String> {
        let Some(client_id) = provider.client_id.clone() else {
            return Ok(None);
        };
        let redirect_url = provider
            .redirect_url
            .clone()
            .unwrap_or_else(|| format!("{}{CALLBACK_PATH}", public_url.trim_end_matches('/')));
        let scopes = if provider.sign_in_scopes.is_empty() {
            DEFAULT_SCOPES.to_owned()
        } else {
            provider.sign_in_scopes.join(" ")
        };
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Some(ProviderSignIn {
            issuer: provider.issuer.clone(),
            client_id,
            client_secret: provider.client_secret.clone(),
            redirect_url,
            scopes,
            resource: public_url.trim_end_matches('/').to_owned(),
            http,
            endpoints: Mutex::new(None),
        }))
    }

    /// The provider's endpoints: discovered on first use, then kept.
    async fn endpoints(&self) -> Result<Endpoints, String> {
        let mut known = self.endpoints.lock().await;
        if let Some(endpoints) = known.as_ref() {
            return Ok(endpoints.clone());
        }
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.issuer.trim_end_matches('/')
        );
        let response = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("{url}: HTTP {}", response.status()));
        }
        let document: Value = response.json().await.map_err(|e| format!("{url}: {e}"))?;
        let endpoints = endpoints_from_discovery(&document, &self.issuer)?;
        *known = Some(endpoints.clone());
        Ok(endpoints)
    }

    /// Exchanges `code` for the provider's token answer (RFC 6749 §4.1.3).
    async fn exchange(&self, endpoints: &Endpoints, code: &str, verifier: &str) -> Result<Value, String> {
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", self.redirect_url.as_str()),
            ("code_verifier", verifier),
            ("resource", self.resource.as_str()),
        ];
        let mut request = self.http.post(&endpoints.token);
        match (&self.client_secret, endpoints.basic_auth) {
            (Some(secret), true) => {
                request = request.basic_auth(form_encode(&self.client_id), Some(form_encode(secret)))
            }
            (Some(secret), false) => {
                form.push(("client_id", &self.client_id));
                form.push(("client_secret", secret));
            }
            (None, _) => form.push(("client_id", &self.client_id)),
        }
        let body = serde_urlencoded::to_string(&form).expect("strings encode");
        let response = request
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| format!("the token endpoint {}: {e}", endpoints.token))?;
        let status = response.status();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            return Err(format!(
                "the token endpoint answered {status}: {} {}",
                answer["error"].as_str().unwrap_or(""),
                answer["error_description"].as_str().unwrap_or("")
            ));
        }
        Ok(answer)
    }
}

/// The endpoints in a discovery document, which must name `issuer` as its issuer (OpenID
/// Connect Discovery §4.3). Pure.
fn endpoints_from_discovery(document: &Value, issuer: &str) -> Result<Endpoints, String> {
    if document["issuer"].as_str().map(|i| i.trim_end_matches('/')) != Some(issuer.trim_end_matches('/')) {
        return Err(format!(
            "the discovery document names issuer {}, not {issuer}",
            document["issuer"]
        ));
    }
    let endpoint = |name: &str| {
        document[name]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("the discovery document has no {name}"))
    };
    let methods: Vec<&str> = document["token_endpoint_auth_methods_supported"]
        .as_array()
        .map(|methods| methods.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // RFC 8414 §2: absent, the default is client_secret_basic.
    let basic_auth = methods.is_empty() || methods.contains(&"client_secret_basic");
    Ok(Endpoints {
        authorization: endpoint("authorization_endpoint")?,
        token: endpoint("token_endpoint")?,
        basic_auth,
    })
}

/// RFC 6749 §2.3.1: the client id and secret are form-encoded before they go into Basic.
fn form_encode(text: &str) -> String {
    serde_urlencoded::to_string([("x", text)]).expect("strings encode")[2..].to_owned()
}

/// The sign-in page of a deployment with an identity provider: one way in.
pub fn sign_in_page(provider: &ProviderSignIn, next: &str, signed_in: Option<&SignedIn>) -> Response {
    let start = format!(
        "{START_PATH}?{}",
        serde_urlencoded::to_string([("next", next)]).expect("strings encode")
    );
    let main = html! {
        h1 { "Sign in" }
        @if let Some(signed_in) = signed_in {
            p { "You are signed in as " strong { (signed_in.identity_label()) } "." }
        }
        p { "This server signs you in with your organization's identity provider, " code { (provider.issuer) } "." }
        div class="actions" {
            a class="button" href=(start) { "Sign in with the identity provider" }
        }
    };
    Page {
        title: "Sign in",
        signed_in,
        main,
    }
    .render(StatusCode::OK)
}

/// `?next=` of the start.
#[derive(Debug, Deserialize)]
pub struct StartQuery {
    next: Option<String>,
}

/// `GET /ui/sign-in/provider`: off to the provider, the state kept in the sign-in cookie.
pub async fn start(State(state): State<Arc<UiState>>, Query(query): Query<StartQuery>) -> Response {
    let Some(provider) = &state.provider else {
        return no_provider();
    };
    let endpoints = match provider.endpoints().await {
        Ok(endpoints) => endpoints,
        Err(error) => return provider_unreachable(&error),
    };
    let pending = PendingSignIn {
        state: random_text(24),
        verifier: random_text(32),
        next: query
            .next
            .as_deref()
            .and_then(safe_next)
            .unwrap_or(super::session::HOME_PATH)
            .to_owned(),
        expires_at: now_seconds() + SIGN_IN_COOKIE_SECONDS,
    };
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(pending.verifier.as_bytes()));
    let query = serde_urlencoded::to_string([
        ("response_type", "code"),
        ("client_id", provider.client_id.as_str()),
        ("redirect_uri", provider.redirect_url.as_str()),
        ("scope", provider.scopes.as_str()),
        ("state", pending.state.as_str()),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("resource", provider.resource.as_str()),
    ])
    .expect("strings encode");
    let separator = if endpoints.authorization.contains('?') {
        '&'
    } else {
        '?'
    };
    let mut response =
        Redirect::to(&format!("{}{separator}{query}", endpoints.authorization)).into_response();
    let cookie = state.key.sign(
        STATE_PURPOSE,
        &serde_json::to_vec(&pending).expect("the pending sign-in serializes"),
    );
    response.headers_mut().append(
        header::SET_COOKIE,
        state
            .cookies
            .set(state.cookies.sign_in, &cookie, SIGN_IN_COOKIE_SECONDS),
    );
    response
}

/// The provider's answer at the redirect URI (RFC 6749 §4.1.2).
#[derive(Debug, Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
    iss: Option<String>,
}

/// `GET /ui/sign-in/callback`: the code for a token, the token for a session.
pub async fn callback(
    State(state): State<Arc<UiState>>,
    Query(answer): Query<CallbackQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(provider) = &state.provider else {
        return no_provider();
    };
    let pending = read_cookie(&headers, state.cookies.sign_in)
        .and_then(|cookie| state.key.open(STATE_PURPOSE, &cookie))
        .and_then(|data| serde_json::from_slice::<PendingSignIn>(&data).ok())
        .filter(|pending| pending.expires_at > now_seconds());
    let Some(pending) = pending.filter(|pending| answer.state.as_deref() == Some(pending.state.as_str()))
    else {
        return start_again(
            "This answer from the identity provider does not belong to a sign-in started in this browser in the last ten minutes.",
        );
    };
    // RFC 9207: when the provider names itself, it must be the one asked.
    if let Some(iss) = &answer.iss
        && iss.trim_end_matches('/') != provider.issuer.trim_end_matches('/')
    {
        return start_again("The answer names another identity provider than the one this server uses.");
    }
    if let Some(error) = &answer.error {
        return start_again(&format!(
            "The identity provider did not sign you in: {error}{}.",
            answer
                .error_description
                .as_deref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        ));
    }
    let Some(code) = &answer.code else {
        return start_again("The identity provider's answer carries no code.");
    };
    let endpoints = match provider.endpoints().await {
        Ok(endpoints) => endpoints,
        Err(error) => return provider_unreachable(&error),
    };
    let tokens = match provider.exchange(&endpoints, code, &pending.verifier).await {
        Ok(tokens) => tokens,
        Err(error) => {
            tracing::warn!(%error, "provider sign-in: code exchange failed");
            return start_again(&format!("The code could not be exchanged for a token: {error}."));
        }
    };
    let Some(access_token) = tokens["access_token"].as_str() else {
        return start_again("The identity provider answered without an access token.");
    };
    if let Err(error) = state.auth.authenticate(access_token).await {
        if let AuthError::KeysUnavailable(_) = error {
            return provider_unreachable(&error.to_string());
        }
        tracing::warn!(%error, "provider sign-in: the access token is not accepted");
        return message_page(
            StatusCode::FORBIDDEN,
            "Signed in, but not accepted here",
            &format!(
                "The identity provider signed you in, but its token does not give an identity \
                 this server accepts: {error}."
            ),
            None,
        );
    }
    if access_token.len() > MAX_SESSION_TOKEN_BYTES {
        tracing::warn!(
            bytes = access_token.len(),
            "provider sign-in: the access token is too large for a cookie"
        );
        return message_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Signed in, but the session cannot be kept",
            &format!(
                "The identity provider's access token takes {} bytes, more than a browser keeps                  in a cookie ({MAX_SESSION_TOKEN_BYTES}). Its operator can make the token smaller                  (fewer groups or claims in it).",
                access_token.len()
            ),
            None,
        );
    }
    let lifetime = tokens["expires_in"]
        .as_u64()
        .unwrap_or(DEFAULT_SESSION_SECONDS)
        .max(1);
    let mut response = Redirect::to(&pending.next).into_response();
    let cookies = &state.cookies;
    let set = response.headers_mut();
    set.append(
        header::SET_COOKIE,
        cookies.set(cookies.session, access_token, lifetime),
    );
    set.append(header::SET_COOKIE, cookies.clear(cookies.sign_in));
    response
}

fn no_provider() -> Response {
    message_page(
        StatusCode::NOT_FOUND,
        "No identity provider sign-in here",
        "This server has no identity provider client to sign people in with.",
        None,
    )
}

fn provider_unreachable(error: &str) -> Response {
    tracing::error!(%error, "the identity provider cannot be reached");
    message_page(
        StatusCode::SERVICE_UNAVAILABLE,
        "The identity provider cannot be reached",
        "Sign-in needs the identity provider, which does not answer right now. Try again in a moment.",
        None,
    )
}

fn start_again(message: &str) -> Response {
    Page {
        title: "Sign-in did not complete",
        signed_in: None,
        main: html! {
            h1 { "Sign-in did not complete" }
            p { (message) }
            p { a href=(SIGN_IN_PATH) { "Sign in again" } }
        },
    }
    .render(StatusCode::BAD_REQUEST)
}

fn now_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_secs()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// OpenID Connect Discovery §4.3: the document must be the issuer's own.
    #[test]
    fn discovery_must_name_the_issuer() {
        let document = json!({
            "issuer": "https://id.example.test",
            "authorization_endpoint": "https://id.example.test/auth",
            "token_endpoint": "https://id.example.test/token",
            "token_endpoint_auth_methods_supported": ["client_secret_post"],
        });
        let endpoints = endpoints_from_discovery(&document, "https://id.example.test/").unwrap();
        assert_eq!(endpoints.token, "https://id.example.test/token");
        assert!(!endpoints.basic_auth);
        assert!(endpoints_from_discovery(&document, "https://other.example.test").is_err());
        let mut without_token = document.clone();
        without_token.as_object_mut().unwrap().remove("token_endpoint");
        assert!(endpoints_from_discovery(&without_token, "https://id.example.test").is_err());
        let mut without_methods = document;
        without_methods
            .as_object_mut()
            .unwrap()
            .remove("token_endpoint_auth_methods_supported");
        assert!(
            endpoints_from_discovery(&without_methods, "https://id.example.test")
                .unwrap()
                .basic_auth
        );
    }

    #[test]
    fn basic_credentials_are_form_encoded_first() {
        assert_eq!(form_encode("a b:c"), "a+b%3Ac");
    }
}
