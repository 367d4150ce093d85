//! The authorization endpoint: `GET /oauth/authorize` checks the request (RFC 6749 §4.1.1,
//! PKCE S256 only), sends a browser without a session to sign in, and asks a signed-in person
//! to allow the client; `POST /oauth/authorize` carries the answer back to the client with a
//! code, or with an error (§4.1.2.1).

use super::client::RegisteredClient;
use super::code::{CodeGrant, is_s256_challenge};
use super::{OAuthState, now_seconds, same_resource};
use crate::UiKey;
use crate::layout::{Page, message_page};
use crate::session::DEV_SESSION_TTL;
use crate::session::{SignedForm, to_sign_in};
use crate::signed_in::SignedIn;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use serde::{Deserialize, Serialize};

/// The authorization endpoint's path.
pub const AUTHORIZE_PATH: &str = "/oauth/authorize";

/// The parameters of an authorization request (RFC 6749 §4.1.1, RFC 7636 §4.3, RFC 8707 §2),
/// and on the consent form the person's `decision`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AuthorizationRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_challenge: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_challenge_method: Option<String>,
    /// Accepted and ignored: this server has no scopes, its tokens carry the identity alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// `allow` or `deny`, from the consent form.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
}

/// A request that may go ahead: the client, where its answer goes, and what binds the code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidRequest {
    pub client: RegisteredClient,
    pub client_id: String,
    /// The redirect URI as the client sent it (or the one it registered, when it sent none).
    pub redirect_uri: String,
    pub state: Option<String>,
    pub code_challenge: String,
}

/// Why a request cannot go ahead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The client or its redirect URI cannot be trusted: told to the person, never redirected
    /// (RFC 6749 §4.1.2.1).
    ToPerson(String),
    /// Told to the client at its redirect URI.
    ToClient {
        redirect_uri: String,
        state: Option<String>,
        error: &'static str,
        description: String,
    },
}

/// Checks an authorization request. Pure: the order is RFC 6749 §4.1.2.1's, so nothing is
/// redirected before the client and its redirect URI are known good.
pub fn check_request(
    key: &UiKey,
    resource: &str,
    request: &AuthorizationRequest,
) -> Result<ValidRequest, Refusal> {
    let Some(client_id) = request.client_id.as_deref().filter(|id| !id.is_empty()) else {
        return Err(Refusal::ToPerson(
            "The application sent no client_id, so it cannot be told anything.".into(),
        ));
    };
    let Some(client) = RegisteredClient::from_client_id(key, client_id) else {
        return Err(Refusal::ToPerson(
            "The application's client_id was not issued by this server. It must register again.".into(),
        ));
    };
    let redirect_uri = match request.redirect_uri.as_deref() {
        Some(presented) => match client.redirect_uri_for(presented) {
            Some(_) => presented.to_owned(),
            None => {
                return Err(Refusal::ToPerson(format!(
                    "The application asked to be answered at {presented}, which it did not register."
                )));
            }
        },
        None => match client.redirect_uris.as_slice() {
            [only] => only.clone(),
            _ => {
                return Err(Refusal::ToPerson(
                    "The application registered several redirect URIs and named none.".into(),
                ));
            }
        },
    };
    let to_client = |error: &'static str, description: &str| Refusal::ToClient {
        redirect_uri: redirect_uri.clone(),
        state: request.state.clone(),
        error,
        description: description.to_owned(),
    };
    match request.response_type.as_deref() {
        Some("code") => {}
        None => return Err(to_client("invalid_request", "response_type is missing")),
        Some(_) => {
            return Err(to_client(
                "unsupported_response_type",
                "this server answers only response_type=code",
            ));
        }
    }
    let Some(code_challenge) = request.code_challenge.as_deref() else {
        return Err(to_client(
            "invalid_request",
            "PKCE is required: send code_challenge and code_challenge_method=S256",
        ));
    };
    if request.code_challenge_method.as_deref() != Some("S256") {
        return Err(to_client("invalid_request", "code_challenge_method must be S256"));
    }
    if !is_s256_challenge(code_challenge) {
        return Err(to_client(
            "invalid_request",
            "code_challenge is not an S256 challenge (43 base64url characters)",
        ));
    }
    if let Some(asked) = request.resource.as_deref()
        && !same_resource(asked, resource)
    {
        return Err(to_client(
            "invalid_target",
            &format!("this server issues tokens for {resource} only"),
        ));
    }
    Ok(ValidRequest {
        client_id: client_id.to_owned(),
        client,
        redirect_uri,
        state: request.state.clone(),
        code_challenge: code_challenge.to_owned(),
    })
}

/// `redirect_uri` with `params` added to its query, and `iss` (RFC 9207) naming this server.
fn answer_url(redirect_uri: &str, params: &[(&str, &str)], issuer: &str) -> String {
    let mut url = url::Url::parse(redirect_uri).expect("checked at registration");
    {
        let mut query = url.query_pairs_mut();
        for (name, value) in params {
            query.append_pair(name, value);
        }
        query.append_pair("iss", issuer);
    }
    url.into()
}

/// A refusal as the answer it is: a page for the person, or a redirect to the client.
fn refuse(refusal: Refusal, issuer: &str, signed_in: Option<&SignedIn>) -> Response {
    match refusal {
        Refusal::ToPerson(message) => message_page(
            StatusCode::BAD_REQUEST,
            "This sign-in request cannot be used",
            &message,
            signed_in,
        ),
        Refusal::ToClient {
            redirect_uri,
            state,
            error,
            description,
        } => {
            let mut params = vec![("error", error), ("error_description", description.as_str())];
            if let Some(state) = state.as_deref() {
                params.push(("state", state));
            }
            Redirect::to(&answer_url(&redirect_uri, &params, issuer)).into_response()
        }
    }
}

/// `GET /oauth/authorize`.
pub async fn authorize_page(
    State(state): State<OAuthState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let ui = &state.ui;
    let query = query.unwrap_or_default();
    let signed_in = match SignedIn::of(ui, &headers).await {
        Ok(signed_in) => signed_in,
        Err(page) => return page,
    };
    let Ok(request) = serde_urlencoded::from_str::<AuthorizationRequest>(&query) else {
        return refuse(
            Refusal::ToPerson("The request's parameters cannot be read (a parameter given twice?).".into()),
            ui.public_url(),
            signed_in.as_ref(),
        );
    };
    let valid = match check_request(&ui.key, ui.public_url(), &request) {
        Ok(valid) => valid,
        Err(refusal) => return refuse(refusal, ui.public_url(), signed_in.as_ref()),
    };
    let here = format!("{AUTHORIZE_PATH}?{query}");
    let Some(signed_in) = signed_in else {
        return to_sign_in(&here).into_response();
    };
    consent_page(&valid, &request, &signed_in, &here)
}

/// The question to a signed-in person: may this client act as you?
fn consent_page(
    valid: &ValidRequest,
    request: &AuthorizationRequest,
    signed_in: &SignedIn,
    here: &str,
) -> Response {
    let destination = url::Url::parse(&valid.redirect_uri)
        .map(|url| url.origin().ascii_serialization())
        .unwrap_or_else(|_| valid.redirect_uri.clone());
    let switch = serde_urlencoded::to_string([("next", here)]).expect("strings encode");
    let hidden = [
        ("response_type", Some("code")),
        ("client_id", Some(valid.client_id.as_str())),
        ("redirect_uri", Some(valid.redirect_uri.as_str())),
        ("state", valid.state.as_deref()),
        ("code_challenge", Some(valid.code_challenge.as_str())),
        ("code_challenge_method", Some("S256")),
        ("scope", request.scope.as_deref()),
        ("resource", request.resource.as_deref()),
    ];
    let main = html! {
        h1 { "Allow an application to act as you?" }
        p {
            @match &valid.client.name {
                Some(name) => { "An application that calls itself " strong { (name) } }
                None => { "An application" }
            }
            " asks to call this server's tools as "
            strong { (signed_in.identity_label()) }
            "."
        }
        dl class="facts" {
            dt { "Answer goes to" }
            dd { code { (destination) } }
            dt { "Access lasts" }
            dd { (DEV_SESSION_TTL.as_secs() / 3600) " hours" }
        }
        p { "Allow it only if you started this sign-in from an application you trust." }
        form method="post" action=(AUTHORIZE_PATH) {
            input type="hidden" name="csrf" value=(signed_in.csrf());
            @for (name, value) in hidden {
                @if let Some(value) = value {
                    input type="hidden" name=(name) value=(value);
                }
            }
            div class="actions" {
                button type="submit" name="decision" value="allow" { "Allow" }
                button type="submit" name="decision" value="deny" class="secondary" { "Deny" }
            }
        }
        p { a href={ (crate::session::SIGN_IN_PATH) "?" (switch) } { "Sign in as someone else" } }
    };
    Page {
        title: "Allow access",
        signed_in: Some(signed_in),
        main,
    }
    .render(StatusCode::OK)
}

/// `POST /oauth/authorize`: the person's answer, its CSRF token checked. The request is checked
/// again (nothing was kept), then the client gets a code or `access_denied`.
pub async fn decide(
    State(state): State<OAuthState>,
    SignedForm { signed_in, form }: SignedForm<AuthorizationRequest>,
) -> Response {
    let ui = &state.ui;
    let issuer = ui.public_url();
    let valid = match check_request(&ui.key, issuer, &form) {
        Ok(valid) => valid,
        Err(refusal) => return refuse(refusal, issuer, Some(&signed_in)),
    };
    let mut params = Vec::new();
    let code;
    match form.decision.as_deref() {
        Some("allow") => {
            code = CodeGrant::new(
                &valid.client_id,
                &valid.redirect_uri,
                &valid.code_challenge,
                signed_in.identity.clone(),
                now_seconds(),
            )
            .code(&ui.key);
            params.push(("code", code.as_str()));
        }
        _ => {
            params.push(("error", "access_denied"));
            params.push(("error_description", "the person denied the request"));
        }
    }
    if let Some(client_state) = valid.state.as_deref() {
        params.push(("state", client_state));
    }
    Redirect::to(&answer_url(&valid.redirect_uri, &params, issuer)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESOURCE: &str = "http://127.0.0.1:8080";
    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

    fn key() -> UiKey {
        UiKey::new([9; 32])
    }

    fn client_id(uris: &[&str]) -> String {
        RegisteredClient {
            redirect_uris: uris.iter().map(|u| u.to_string()).collect(),
            name: Some("cli".into()),
            issued_at: 0,
            nonce: "n".into(),
        }
        .client_id(&key())
    }

    fn request() -> AuthorizationRequest {
        AuthorizationRequest {
            response_type: Some("code".into()),
            client_id: Some(client_id(&["http://127.0.0.1:5000/cb"])),
            redirect_uri: Some("http://127.0.0.1:5000/cb".into()),
            state: Some("xyz".into()),
            code_challenge: Some(CHALLENGE.into()),
            code_challenge_method: Some("S256".into()),
            resource: Some(format!("{RESOURCE}/")),
            ..AuthorizationRequest::default()
        }
    }

    fn error_of(request: &AuthorizationRequest) -> &'static str {
        match check_request(&key(), RESOURCE, request) {
            Err(Refusal::ToClient {
                error,
                redirect_uri,
                state,
                ..
            }) => {
                assert_eq!(redirect_uri, "http://127.0.0.1:5000/cb");
                assert_eq!(state.as_deref(), Some("xyz"));
                error
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_good_request_goes_ahead() {
        let valid = check_request(&key(), RESOURCE, &request()).unwrap();
        assert_eq!(valid.redirect_uri, "http://127.0.0.1:5000/cb");
        assert_eq!(valid.code_challenge, CHALLENGE);
        let without_uri = AuthorizationRequest {
            redirect_uri: None,
            ..request()
        };
        assert_eq!(
            check_request(&key(), RESOURCE, &without_uri)
                .unwrap()
                .redirect_uri,
            "http://127.0.0.1:5000/cb",
            "the one registered URI"
        );
    }

    /// RFC 6749 §4.1.2.1: an unknown client or redirect URI is told to the person, not redirected.
    #[test]
    fn a_bad_client_or_redirect_uri_is_never_redirected_to() {
        for request in [
            AuthorizationRequest {
                client_id: None,
                ..request()
            },
            AuthorizationRequest {
                client_id: Some("forged.id".into()),
                ..request()
            },
            AuthorizationRequest {
                redirect_uri: Some("http://127.0.0.1:5000/other".into()),
                ..request()
            },
            AuthorizationRequest {
                client_id: Some(client_id(&["https://a.test/1", "https://a.test/2"])),
                redirect_uri: None,
                ..request()
            },
        ] {
            assert!(
                matches!(
                    check_request(&key(), RESOURCE, &request),
                    Err(Refusal::ToPerson(_))
                ),
                "{request:?}"
            );
        }
    }

    /// RFC 6749 §4.1.2.1, RFC 7636 §4.4.1, RFC 8707 §2: the client hears why, with its state.
    #[test]
    fn other_errors_go_back_to_the_client() {
        assert_eq!(
            error_of(&AuthorizationRequest {
                response_type: Some("token".into()),
                ..request()
            }),
            "unsupported_response_type"
        );
        assert_eq!(
            error_of(&AuthorizationRequest {
                response_type: None,
                ..request()
            }),
            "invalid_request"
        );
        assert_eq!(
            error_of(&AuthorizationRequest {
                code_challenge: None,
                ..request()
            }),
            "invalid_request"
        );
        assert_eq!(
            error_of(&AuthorizationRequest {
                code_challenge_method: Some("plain".into()),
                ..request()
            }),
            "invalid_request"
        );
        assert_eq!(
            error_of(&AuthorizationRequest {
                code_challenge_method: None,
                ..request()
            }),
            "invalid_request"
        );
        assert_eq!(
            error_of(&AuthorizationRequest {
                resource: Some("https://other.test".into()),
                ..request()
            }),
            "invalid_target"
        );
    }

    #[test]
    fn answers_keep_the_redirect_uri_query_and_name_the_issuer() {
        let url = answer_url("http://127.0.0.1:5000/cb?app=1", &[("code", "c d")], RESOURCE);
        assert_eq!(
            url,
            "http://127.0.0.1:5000/cb?app=1&code=c+d&iss=http%3A%2F%2F127.0.0.1%3A8080"
        );
    }
}
