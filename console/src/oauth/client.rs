//! Dynamic client registration (RFC 7591) of public clients, and the signed client ids that
//! carry a registration so that no gateway needs to remember it.

use super::OAuthError;
use crate::UiKey;
use crate::signing::random_text;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::net::IpAddr;

/// What a client id is signed for.
const CLIENT_PURPOSE: &str = "oauth client";
/// The most redirect URIs one client may register.
const MAX_REDIRECT_URIS: usize = 10;
/// The longest redirect URI accepted.
const MAX_REDIRECT_URI_BYTES: usize = 2000;
/// The longest client name kept.
const MAX_CLIENT_NAME_CHARS: usize = 100;
/// The most bytes a registration may take, so that its client id (about 4/3 of it) keeps the
/// authorization URL, and the sign-in that comes back to it, a few kilobytes long.
const MAX_REGISTRATION_BYTES: usize = 1536;

/// A registered client, as its client id carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredClient {
    /// The redirect URIs, checked at registration.
    #[serde(rename = "r")]
    pub redirect_uris: Vec<String>,
    /// The name the client gave itself (its own say-so, shown as such).
    #[serde(rename = "n", default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// When it registered, in seconds since 1970.
    #[serde(rename = "t")]
    pub issued_at: u64,
    /// Random: two registrations alike are still two clients.
    #[serde(rename = "j")]
    pub nonce: String,
}

impl RegisteredClient {
    /// The client id: this registration, signed with the UI key.
    pub fn client_id(&self, key: &UiKey) -> String {
        let data = serde_json::to_vec(self).expect("a registration serializes");
        key.sign(CLIENT_PURPOSE, &data)
    }

    /// The registration a client id carries, if the UI key signed it.
    pub fn from_client_id(key: &UiKey, client_id: &str) -> Option<RegisteredClient> {
        let data = key.open(CLIENT_PURPOSE, client_id)?;
        serde_json::from_slice(&data).ok()
    }

    /// The registered redirect URI `presented` stands for: exact match, or for a loopback IP
    /// literal the same URI on any port (RFC 8252 §7.3: a native app picks its port when it
    /// starts).
    pub fn redirect_uri_for(&self, presented: &str) -> Option<&str> {
        self.redirect_uris
            .iter()
            .find(|registered| redirect_uri_matches(registered, presented))
            .map(String::as_str)
    }
}

/// Whether `presented` is the registered redirect URI: the same string, or for loopback IP
/// literals over http the same URI with another port.
fn redirect_uri_matches(registered: &str, presented: &str) -> bool {
    if registered == presented {
        return true;
    }
    let (Ok(mut registered), Ok(mut presented)) = (url::Url::parse(registered), url::Url::parse(presented))
    else {
        return false;
    };
    let loopback_ip = |url: &url::Url| {
        url.scheme() == "http"
            && match url.host() {
                Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                _ => false,
            }
    };
    if !loopback_ip(&registered) || !loopback_ip(&presented) {
        return false;
    }
    let _ = registered.set_port(None);
    let _ = presented.set_port(None);
    registered == presented
}

/// Why a redirect URI cannot be registered, or `Ok` with it as given: an absolute https URL,
/// or http to a loopback address (RFC 8252 §7.3, native apps), without a fragment (RFC 6749
/// §3.1.2) or user info.
pub fn check_redirect_uri(text: &str) -> Result<(), String> {
    if text.len() > MAX_REDIRECT_URI_BYTES {
        return Err(format!(
            "a redirect URI is longer than {MAX_REDIRECT_URI_BYTES} bytes"
        ));
    }
    let url = url::Url::parse(text).map_err(|e| format!("{text:?} is not an absolute URL: {e}"))?;
    if url.fragment().is_some() {
        return Err(format!(
            "{text:?} has a fragment, which redirect URIs must not have"
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{text:?} has user information, which redirect URIs must not have"
        ));
    }
    let loopback = match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" if url.host().is_some() => Ok(()),
        "http" if loopback => Ok(()),
        "http" => Err(format!(
            "{text:?} is plain http to a host other than this machine: use https, or http to \
             127.0.0.1, [::1] or localhost"
        )),
        _ => Err(format!(
            "{text:?} is not an https URL or an http URL to this machine"
        )),
    }
}

/// Registers a client from an RFC 7591 §2 metadata document: the registration, or the RFC 7591
/// §3.2.2 error. Pure. Only public clients using the authorization code are registered: a
/// requested `token_endpoint_auth_method` is replaced by `none` and `grant_types` by
/// `authorization_code` (§3.2.1 lets the server replace requested values).
pub fn register(metadata: &Value, now_seconds: u64) -> Result<RegisteredClient, OAuthError> {
    let invalid_metadata = |description: String| OAuthError::new("invalid_client_metadata", description);
    let invalid_uri = |description: String| OAuthError::new("invalid_redirect_uri", description);
    let Some(metadata) = metadata.as_object() else {
        return Err(invalid_metadata("the registration must be a JSON object".into()));
    };
    let uris = match metadata.get("redirect_uris") {
        Some(Value::Array(uris)) if !uris.is_empty() => uris,
        _ => {
            return Err(invalid_uri(
                "redirect_uris must be a non-empty array of URLs".into(),
            ));
        }
    };
    if uris.len() > MAX_REDIRECT_URIS {
        return Err(invalid_uri(format!(
            "give at most {MAX_REDIRECT_URIS} redirect URIs"
        )));
    }
    let mut redirect_uris = Vec::with_capacity(uris.len());
    for uri in uris {
        let Some(uri) = uri.as_str() else {
            return Err(invalid_uri("every redirect URI must be a string".into()));
        };
        check_redirect_uri(uri).map_err(invalid_uri)?;
        redirect_uris.push(uri.to_owned());
    }
    let strings = |field: &str| -> Result<Option<Vec<&str>>, OAuthError> {
        match metadata.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(values)) => values
                .iter()
                .map(|value| {
                    value
                        .as_str()
                        .ok_or_else(|| invalid_metadata(format!("{field} must be an array of strings")))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(invalid_metadata(format!("{field} must be an array of strings"))),
        }
    };
    if let Some(grant_types) = strings("grant_types")?
        && !grant_types.contains(&"authorization_code")
    {
        return Err(invalid_metadata(
            "this server grants only authorization_code: grant_types must include it".into(),
        ));
    }
    if let Some(response_types) = strings("response_types")?
        && !response_types.contains(&"code")
    {
        return Err(invalid_metadata(
            "this server answers only response_type code: response_types must include it".into(),
        ));
    }
    let name = match metadata.get("client_name") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => Some(name.chars().take(MAX_CLIENT_NAME_CHARS).collect()),
        Some(_) => return Err(invalid_metadata("client_name must be a string".into())),
    };
    let client = RegisteredClient {
        redirect_uris,
        name,
        issued_at: now_seconds,
        nonce: random_text(12),
    };
    if serde_json::to_vec(&client)
        .expect("a registration serializes")
        .len()
        > MAX_REGISTRATION_BYTES
    {
        return Err(invalid_metadata(format!(
            "the redirect URIs and name take more than {MAX_REGISTRATION_BYTES} bytes: register fewer or shorter ones"
        )));
    }
    Ok(client)
}

/// The RFC 7591 §3.2.1 answer to a registration: the client id and the metadata as registered.
pub fn registration_response(client: &RegisteredClient, key: &UiKey) -> Value {
    let mut response = json!({
        "client_id": client.client_id(key),
        "client_id_issued_at": client.issued_at,
        "redirect_uris": client.redirect_uris,
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code"],
        "response_types": ["code"],
    });
    if let Some(name) = &client.name {
        response["client_name"] = json!(name);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> UiKey {
        UiKey::new([3; 32])
    }

    /// RFC 7591 §2 and RFC 8252 §7.3: https anywhere, http only to this machine.
    #[test]
    fn redirect_uris_are_https_or_loopback_http() {
        for good in [
            "https://app.example.com/callback",
            "http://127.0.0.1:33418/callback",
            "http://[::1]:8000/cb?x=1",
            "http://localhost:3000/oauth/callback",
        ] {
            assert_eq!(check_redirect_uri(good), Ok(()), "{good}");
        }
        for bad in [
            "http://app.example.com/callback",
            "http://10.0.0.1/cb",
            "https://app.example.com/cb#frag",
            "https://user:pw@app.example.com/cb",
            "com.example.app:/callback",
            "/callback",
            "javascript:alert(1)",
        ] {
            assert!(check_redirect_uri(bad).is_err(), "{bad}");
        }
    }

    /// RFC 7591 §3.2: the client id carries the registration; errors are invalid_redirect_uri or
    /// invalid_client_metadata.
    #[test]
    fn a_registration_round_trips_through_its_client_id() {
        let metadata = json!({
            "redirect_uris": ["http://127.0.0.1:5000/callback"],
            "client_name": "Test client",
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": "client_secret_post",
        });
        let client = register(&metadata, 1_700_000_000).unwrap();
        assert_ne!(
            client.client_id(&key()),
            register(&metadata, 1_700_000_000).unwrap().client_id(&key()),
            "two registrations are two clients"
        );
        let response = registration_response(&client, &key());
        assert_eq!(response["token_endpoint_auth_method"], "none");
        assert_eq!(response["grant_types"], json!(["authorization_code"]));
        let client_id = response["client_id"].as_str().unwrap();
        assert_eq!(RegisteredClient::from_client_id(&key(), client_id), Some(client));
        assert_eq!(
            RegisteredClient::from_client_id(&UiKey::new([4; 32]), client_id),
            None
        );

        let error = |metadata: Value| register(&metadata, 0).unwrap_err().error;
        assert_eq!(error(json!({})), "invalid_redirect_uri");
        assert_eq!(error(json!({ "redirect_uris": [] })), "invalid_redirect_uri");
        assert_eq!(
            error(json!({ "redirect_uris": ["http://evil.test/cb"] })),
            "invalid_redirect_uri"
        );
        assert_eq!(
            error(json!({ "redirect_uris": ["https://a.test/cb"], "grant_types": ["client_credentials"] })),
            "invalid_client_metadata"
        );
        assert_eq!(
            error(json!({ "redirect_uris": ["https://a.test/cb"], "response_types": ["token"] })),
            "invalid_client_metadata"
        );
        assert_eq!(error(json!(["not an object"])), "invalid_client_metadata");
        let long_uris: Vec<String> = (0..5)
            .map(|i| format!("https://app.example.test/{i}/{}", "x".repeat(400)))
            .collect();
        assert_eq!(
            error(json!({ "redirect_uris": long_uris })),
            "invalid_client_metadata"
        );
    }

    /// RFC 8252 §7.3: a loopback IP redirect URI matches on any port; nothing else moves.
    #[test]
    fn loopback_redirects_match_on_any_port() {
        let client = RegisteredClient {
            redirect_uris: vec![
                "http://127.0.0.1:5000/callback".into(),
                "https://app.example.com/cb".into(),
            ],
            name: None,
            issued_at: 0,
            nonce: "n".into(),
        };
        assert!(
            client
                .redirect_uri_for("http://127.0.0.1:5000/callback")
                .is_some()
        );
        assert!(
            client
                .redirect_uri_for("http://127.0.0.1:61234/callback")
                .is_some()
        );
        assert!(client.redirect_uri_for("http://127.0.0.1:5000/other").is_none());
        assert!(
            client
                .redirect_uri_for("https://app.example.com:8443/cb")
                .is_none()
        );
        assert!(client.redirect_uri_for("https://app.example.com/cb").is_some());
        assert!(client.redirect_uri_for("https://app.example.com/cb?x").is_none());
    }
}
