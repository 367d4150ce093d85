//! The HTTP face of authentication: the bearer middleware and the RFC 9728 metadata document.

use super::{AuthError, Authenticator};
use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;

/// The path of the protected resource metadata for `resource` (RFC 9728 §3.1): the well-known
/// prefix, then the resource URI's path, if it has one.
pub fn metadata_path(resource: &str) -> String {
    let path = reqwest::Url::parse(resource)
        .map(|url| url.path().trim_end_matches('/').to_owned())
        .unwrap_or_default();
    format!("/.well-known/oauth-protected-resource{path}")
}

/// The absolute URL of the metadata document, as given in `WWW-Authenticate`.
pub fn metadata_url(resource: &str) -> String {
    match reqwest::Url::parse(resource) {
        Ok(url) => format!(
            "{}{}",
            url.origin().ascii_serialization(),
            metadata_path(resource)
        ),
        Err(_) => format!("{}{}", resource.trim_end_matches('/'), metadata_path(resource)),
    }
}

/// The protected resource metadata document (RFC 9728 §2).
pub fn metadata_document(auth: &Authenticator) -> Value {
    let mut document = json!({
        "resource": auth.resource,
        "bearer_methods_supported": ["header"],
        "resource_name": "agentprocess",
    });
    if !auth.authorization_servers.is_empty() {
        document["authorization_servers"] = json!(auth.authorization_servers);
    }
    if !auth.scopes_supported.is_empty() {
        document["scopes_supported"] = json!(auth.scopes_supported);
    }
    document
}

/// `GET /.well-known/oauth-protected-resource`: public, no token needed.
pub async fn protected_resource_metadata(State(auth): State<Arc<Authenticator>>) -> Json<Value> {
    Json(metadata_document(&auth))
}

/// Lets a request through only with a valid bearer token, and puts the caller's
/// [`Identity`](super::Identity) in the request extensions for the handlers behind it.
pub async fn require_bearer(
    State(auth): State<Arc<Authenticator>>,
    mut request: Request,
    next: Next,
) -> Response {
    let token = match bearer_token(&request) {
        Ok(token) => token,
        Err(error) => return unauthorized(&auth, &error),
    };
    match auth.authenticate(&token).await {
        Ok(identity) => {
            request.extensions_mut().insert(identity);
            next.run(request).await
        }
        Err(error) => {
            match &error {
                AuthError::KeysUnavailable(_) => tracing::error!(%error, "cannot verify bearer tokens"),
                _ => tracing::debug!(%error, "bearer token refused"),
            }
            unauthorized(&auth, &error)
        }
    }
}

fn bearer_token(request: &Request) -> Result<String, AuthError> {
    let Some(value) = request.headers().get(header::AUTHORIZATION) else {
        return Err(AuthError::Missing);
    };
    let value = value
        .to_str()
        .map_err(|_| AuthError::InvalidToken("the Authorization header is not text".into()))?;
    match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => {
            Ok(token.trim().to_owned())
        }
        _ => Err(AuthError::Missing),
    }
}

/// A 401 with `WWW-Authenticate: Bearer resource_metadata="…"` (RFC 9728 §5.1), plus
/// `error="invalid_token"` when a token was presented and refused (RFC 6750 §3.1). When the
/// provider's keys cannot be fetched the answer is 503: the caller's token may well be good.
fn unauthorized(auth: &Authenticator, error: &AuthError) -> Response {
    let metadata = metadata_url(&auth.resource);
    let (status, challenge, body) = match error {
        AuthError::Missing => (
            StatusCode::UNAUTHORIZED,
            format!("Bearer resource_metadata=\"{metadata}\""),
            json!({ "error": "unauthorized", "error_description": error.to_string() }),
        ),
        AuthError::InvalidToken(description) => (
            StatusCode::UNAUTHORIZED,
            format!(
                "Bearer resource_metadata=\"{metadata}\", error=\"invalid_token\", error_description=\"{}\"",
                quoted_string(description)
            ),
            json!({ "error": "invalid_token", "error_description": description }),
        ),
        AuthError::KeysUnavailable(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("Bearer resource_metadata=\"{metadata}\""),
            json!({ "error": "temporarily_unavailable", "error_description": "the identity provider's keys cannot be fetched; try again" }),
        ),
    };
    let mut response = (status, Json(body)).into_response();
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// Keeps an error description inside an RFC 6750 quoted string: printable ASCII without `"` or `\`.
fn quoted_string(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '\''
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_location_follows_rfc_9728() {
        assert_eq!(
            metadata_path("http://127.0.0.1:8080"),
            "/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            metadata_url("https://ap.example.com/"),
            "https://ap.example.com/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            metadata_url("https://example.com/ap"),
            "https://example.com/.well-known/oauth-protected-resource/ap"
        );
    }

    #[test]
    fn descriptions_stay_quotable() {
        assert_eq!(quoted_string("no \"kid\" é"), "no 'kid' '");
    }
}
