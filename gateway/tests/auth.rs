//! The gateway as an OAuth 2.1 resource server, over real HTTP: which bearer tokens open `/mcp`,
//! the 401 challenges (RFC 6750, RFC 9728), and the protected resource metadata.

mod common;

use agentprocess_gateway::auth::{KeyFile, ProviderConfig};
use agentprocess_gateway::{AuthConfig, DescribeConfig};
use common::{TestServer, initialize, post_mcp, start_dev, start_with};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

const ISSUER: &str = "https://login.example.test";

fn key_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/keys")
        .join(name)
}

fn pem(name: &str) -> Vec<u8> {
    std::fs::read(key_path(name)).unwrap()
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// A provider that signs with the RSA, EC and Ed25519 test keys, configured as PEM files.
fn provider_with_key_files() -> AuthConfig {
    let file = |name: &str, algorithm: &str, kid: &str| KeyFile {
        path: key_path(name),
        algorithm: algorithm.into(),
        kid: Some(kid.into()),
    };
    AuthConfig {
        provider: Some(ProviderConfig {
            issuer: ISSUER.into(),
            authorization_servers: Vec::new(),
            jwks_url: None,
            jwks: None,
            key_files: vec![
                file("rsa-public.pem", "RS256", "rsa"),
                file("ec-public.pem", "ES256", "ec"),
                file("ed-public.pem", "EdDSA", "ed"),
            ],
            scopes_supported: vec!["agentprocess".into()],
            client_id: None,
            client_secret: None,
            redirect_url: None,
            sign_in_scopes: Vec::new(),
        }),
        ..AuthConfig::default()
    }
}

/// Claims for an agent of `acme`, issued by [`ISSUER`] for `server`, valid for ten minutes.
fn claims(server: &TestServer) -> Value {
    json!({
        "iss": ISSUER, "aud": server.url, "sub": "a_screener", "org": "acme", "kind": "agent",
        "iat": now(), "exp": now() + 600,
    })
}

fn sign(algorithm: Algorithm, kid: &str, key: &EncodingKey, claims: &Value) -> String {
    let mut header = Header::new(algorithm);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

fn rsa_token(claims: &Value) -> String {
    sign(
        Algorithm::RS256,
        "rsa",
        &EncodingKey::from_rsa_pem(&pem("rsa-private.pem")).unwrap(),
        claims,
    )
}

fn base64url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Asserts a 401 whose challenge points at the metadata, with `error="invalid_token"` iff `invalid`.
fn assert_challenge(server: &TestServer, answer: &common::Answer, invalid: bool) {
    assert_eq!(answer.status, 401, "{answer:?}");
    let challenge = answer
        .www_authenticate
        .as_deref()
        .expect("a WWW-Authenticate header");
    let metadata = format!("{}/.well-known/oauth-protected-resource", server.url);
    assert!(
        challenge.starts_with(&format!("Bearer resource_metadata=\"{metadata}\"")),
        "{challenge}"
    );
    assert_eq!(
        challenge.contains("error=\"invalid_token\""),
        invalid,
        "{challenge}"
    );
}

#[tokio::test]
async fn tokens_from_each_key_type_are_accepted() {
    let server = start_with(provider_with_key_files(), DescribeConfig::default(), None).await;
    let claims = claims(&server);
    let tokens = [
        rsa_token(&claims),
        sign(
            Algorithm::ES256,
            "ec",
            &EncodingKey::from_ec_pem(&pem("ec-private.pem")).unwrap(),
            &claims,
        ),
        sign(
            Algorithm::EdDSA,
            "ed",
            &EncodingKey::from_ed_pem(&pem("ed-private.pem")).unwrap(),
            &claims,
        ),
    ];
    for token in tokens {
        let answer = post_mcp(&server, Some(&token), initialize()).await;
        assert_eq!(answer.status, 200, "{answer:?}");
    }
}

#[tokio::test]
async fn no_token_is_a_401_pointing_at_the_metadata() {
    let server = start_with(provider_with_key_files(), DescribeConfig::default(), None).await;
    let answer = post_mcp(&server, None, initialize()).await;
    assert_challenge(&server, &answer, false);

    // Another scheme is no bearer token either.
    let answer = reqwest::Client::new()
        .post(server.mcp_url())
        .header("authorization", "Basic dTpw")
        .header("content-type", "application/json")
        .body(initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 401);
}

#[tokio::test]
async fn refused_tokens_are_invalid_token() {
    let server = start_with(provider_with_key_files(), DescribeConfig::default(), None).await;
    let good = claims(&server);
    let with = |field: &str, value: Value| {
        let mut claims = good.clone();
        claims[field] = value;
        claims
    };
    let mut without_org = good.clone();
    without_org.as_object_mut().unwrap().remove("org");

    let rsa_public_pem = pem("rsa-public.pem");
    let header_none = base64url(br#"{"alg":"none","typ":"JWT"}"#);
    let payload = base64url(good.to_string().as_bytes());
    let good_token = rsa_token(&good);
    let (signed, _signature) = good_token.rsplit_once('.').unwrap();
    let other_payload = base64url(with("sub", json!("someone_else")).to_string().as_bytes());
    let (header_part, _) = good_token.split_once('.').unwrap();

    let cases = [
        ("expired", rsa_token(&with("exp", json!(now() - 3600)))),
        ("not yet valid", rsa_token(&with("nbf", json!(now() + 3600)))),
        (
            "wrong audience",
            rsa_token(&with("aud", json!("https://other.example.test"))),
        ),
        (
            "wrong issuer",
            rsa_token(&with("iss", json!("https://evil.example.test"))),
        ),
        ("no exp", {
            let mut claims = good.clone();
            claims.as_object_mut().unwrap().remove("exp");
            rsa_token(&claims)
        }),
        ("bad signature", format!("{signed}.{}", base64url(&[7u8; 256]))),
        (
            "payload swapped",
            format!(
                "{header_part}.{other_payload}.{}",
                good_token.rsplit('.').next().unwrap()
            ),
        ),
        ("alg none", format!("{header_none}.{payload}.")),
        (
            "HS256 signed with the RSA public key",
            sign(
                Algorithm::HS256,
                "rsa",
                &EncodingKey::from_secret(&rsa_public_pem).unwrap(),
                &good,
            ),
        ),
        ("unknown kid", {
            let key = EncodingKey::from_rsa_pem(&pem("rsa-private.pem")).unwrap();
            sign(Algorithm::RS256, "nobody", &key, &good)
        }),
        ("no organization", rsa_token(&without_org)),
        ("person without email", rsa_token(&with("kind", json!("person")))),
        ("garbage", "not-a-jwt".to_owned()),
    ];
    for (case, token) in cases {
        let answer = post_mcp(&server, Some(&token), initialize()).await;
        assert_eq!(answer.status, 401, "{case}: {answer:?}");
        assert_challenge(&server, &answer, true);
        assert_eq!(answer.json()["error"], json!("invalid_token"), "{case}");
    }
}

#[tokio::test]
async fn dev_tokens_are_refused_when_a_provider_is_configured() {
    let server = start_with(provider_with_key_files(), DescribeConfig::default(), None).await;
    let answer = post_mcp(&server, Some(&server.agent_token()), initialize()).await;
    assert_challenge(&server, &answer, true);
}

#[tokio::test]
async fn dev_mode_accepts_its_own_tokens_only() {
    let server = start_dev().await;
    assert_eq!(
        post_mcp(&server, Some(&server.agent_token()), initialize())
            .await
            .status,
        200
    );

    let mut claims = json!({
        "iss": server.url, "aud": server.url, "sub": "a", "org": "acme", "kind": "agent", "exp": now() + 600
    });
    let foreign = EncodingKey::from_secret(b"some other secret of enough length!!").unwrap();
    let answer = post_mcp(
        &server,
        Some(&sign(Algorithm::HS256, "agentprocess-dev", &foreign, &claims)),
        initialize(),
    )
    .await;
    assert_challenge(&server, &answer, true);

    claims["exp"] = json!(now() - 3600);
    let answer = post_mcp(&server, Some(&server.dev_key().sign(&claims)), initialize()).await;
    assert_challenge(&server, &answer, true);
}

/// A token accepted before (and so remembered as verified) is refused once it has expired: the
/// gateway remembers verified tokens no longer than they verify (RFC 6750 §3.1 `invalid_token`).
#[tokio::test]
async fn a_token_accepted_before_is_refused_once_it_has_expired() {
    let auth = AuthConfig {
        leeway_seconds: Some(0),
        ..AuthConfig::default()
    };
    let server = start_with(auth, DescribeConfig::default(), None).await;
    let claims = json!({
        "iss": server.url, "aud": server.url, "sub": "a", "org": "acme", "kind": "agent", "exp": now() + 1
    });
    let token = server.dev_key().sign(&claims);
    for _ in 0..2 {
        assert_eq!(post_mcp(&server, Some(&token), initialize()).await.status, 200);
    }
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let answer = post_mcp(&server, Some(&token), initialize()).await;
    assert_challenge(&server, &answer, true);
    assert!(answer.body.contains("expired"), "{}", answer.body);
}

/// A refused token's description (`error_description` and the JSON body) says what this server
/// expected and where a token it accepts comes from.
#[tokio::test]
async fn refusals_say_what_was_expected_and_how_to_get_a_matching_token() {
    let dev = start_dev().await;
    let data = dev.data_dir.path().display().to_string();
    let mint = format!("agentprocess token --data {data} --url {}", dev.url);
    let description = |answer: &common::Answer| {
        assert_challenge_status(answer);
        answer.json()["error_description"].as_str().unwrap().to_owned()
    };
    let elsewhere = "http://127.0.0.1:9";
    let dev_claims = json!({
        "iss": elsewhere, "aud": elsewhere, "sub": "a", "org": "acme", "kind": "agent", "exp": now() + 600
    });
    let text = description(&post_mcp(&dev, Some(&dev.dev_key().sign(&dev_claims)), initialize()).await);
    assert!(
        text.contains(&format!(
            "minted for {elsewhere}, not for this server, {}",
            dev.url
        )),
        "{text}"
    );
    assert!(text.contains(&mint), "{text}");

    let mut expired = dev_claims.clone();
    expired["iss"] = json!(dev.url);
    expired["aud"] = json!(dev.url);
    expired["exp"] = json!(now() - 3600);
    let text = description(&post_mcp(&dev, Some(&dev.dev_key().sign(&expired)), initialize()).await);
    assert!(text.contains("expired"), "{text}");
    assert!(text.contains("60 s allowed for clock skew"), "{text}");
    assert!(text.contains(&mint), "{text}");

    let foreign = EncodingKey::from_secret(b"some other secret of enough length!!").unwrap();
    let mut current = expired.clone();
    current["exp"] = json!(now() + 600);
    let token = sign(Algorithm::HS256, "agentprocess-dev", &foreign, &current);
    let text = description(&post_mcp(&dev, Some(&token), initialize()).await);
    assert!(
        text.contains("does not verify with this server's dev key"),
        "{text}"
    );
    assert!(text.contains(&data), "{text}");

    let provider = start_with(provider_with_key_files(), DescribeConfig::default(), None).await;
    let good = claims(&provider);
    let mut other_audience = good.clone();
    other_audience["aud"] = json!("https://other.example.test");
    let text = description(&post_mcp(&provider, Some(&rsa_token(&other_audience)), initialize()).await);
    assert!(
        text.contains(&format!(
            "for https://other.example.test (aud), not for this server, {}",
            provider.url
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "from the identity provider {ISSUER} with audience {}",
            provider.url
        )),
        "{text}"
    );
    let mut other_issuer = good.clone();
    other_issuer["iss"] = json!("https://evil.example.test");
    let text = description(&post_mcp(&provider, Some(&rsa_token(&other_issuer)), initialize()).await);
    assert!(
        text.contains(&format!("issued by https://evil.example.test, not by {ISSUER}")),
        "{text}"
    );
    let text = description(&post_mcp(&provider, Some(&provider.agent_token()), initialize()).await);
    assert!(
        text.contains("no key of this server verifies HS256 tokens"),
        "{text}"
    );
    assert!(text.contains(ISSUER), "{text}");
}

/// A token that is not a JWT at all is refused in a person's words, in the challenge's
/// `error_description` (RFC 6750 §3) and the body alike, one message per kind of malformation;
/// the JWT library's names for its errors never show.
#[tokio::test]
async fn malformed_tokens_are_described_in_words_not_library_names() {
    let server = start_dev().await;
    let header = base64url(br#"{"alg":"HS256","typ":"JWT"}"#);
    let claims = base64url(br#"{"sub":"a"}"#);
    let cases = [
        (
            "not-a-jwt".to_owned(),
            "the bearer token is not a JWT: expected three base64url parts separated by dots, found 1",
        ),
        (
            format!("{header}.{claims}"),
            "expected three base64url parts separated by dots, found 2",
        ),
        (
            format!("%%%.{claims}.c2ln"),
            "its header (the first part) is not base64url",
        ),
        (
            format!("{header}.%%%.c2ln"),
            "its claims (the second part) is not base64url",
        ),
        (
            format!("{}.{claims}.c2ln", base64url(b"[]")),
            "its header (the first part) does not decode to a JSON object",
        ),
        (
            format!("{header}.{}.c2ln", base64url(b"42")),
            "its claims (the second part) does not decode to a JSON object",
        ),
        (
            format!("{}.{claims}.c2ln", base64url(br#"{"typ":"JWT"}"#)),
            "names no signing algorithm (alg)",
        ),
        (
            format!("{}.{claims}.", base64url(br#"{"alg":"none"}"#)),
            "the bearer token is unsigned",
        ),
        (
            format!("{}.{claims}.c2ln", base64url(br#"{"alg":"XS1"}"#)),
            "names an algorithm (alg) that is not a JWS signing algorithm",
        ),
        (format!("{header}.{claims}."), "the bearer token has no signature"),
    ];
    for (token, expected) in cases {
        let answer = post_mcp(&server, Some(&token), initialize()).await;
        assert_challenge(&server, &answer, true);
        let body = answer.json()["error_description"].as_str().unwrap().to_owned();
        let challenge = answer.www_authenticate.clone().unwrap();
        for (place, text) in [("body", &body), ("challenge", &challenge)] {
            assert!(
                text.contains(expected),
                "{token}: the {place} says {text:?}, not {expected:?}"
            );
            assert!(
                !names_a_library_error(text),
                "{token}: the {place} names a library error: {text}"
            );
        }
    }
}

/// Whether `text` holds a word like `InvalidToken` or `Base64(`: an error's name in code.
fn names_a_library_error(text: &str) -> bool {
    let camel_case = text.split(|c: char| !c.is_ascii_alphanumeric()).any(|word| {
        let mut chars = word.chars();
        chars.next().is_some_and(|c| c.is_ascii_uppercase())
            && word
                .as_bytes()
                .windows(2)
                .any(|pair| pair[0].is_ascii_lowercase() && pair[1].is_ascii_uppercase())
    });
    camel_case
        || ["Base64(", "Json(", "Utf8(", "Error {"]
            .iter()
            .any(|name| text.contains(name))
}

fn assert_challenge_status(answer: &common::Answer) {
    assert_eq!(answer.status, 401, "{answer:?}");
    assert_eq!(answer.json()["error"], json!("invalid_token"), "{answer:?}");
}

#[tokio::test]
async fn protected_resource_metadata() {
    let server = start_with(provider_with_key_files(), DescribeConfig::default(), None).await;
    let response = reqwest::get(format!("{}/.well-known/oauth-protected-resource", server.url))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let document: Value = response.json().await.unwrap();
    assert_eq!(document["resource"], json!(server.url));
    assert_eq!(document["authorization_servers"], json!([ISSUER]));
    assert_eq!(document["bearer_methods_supported"], json!(["header"]));
    assert_eq!(document["scopes_supported"], json!(["agentprocess"]));

    let dev = start_dev().await;
    let document: Value = reqwest::get(format!("{}/.well-known/oauth-protected-resource", dev.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(document["resource"], json!(dev.url));
}

/// Serves a JWKS document holding the EC test key as `kid: ec-1`; returns its URL.
async fn serve_jwks() -> String {
    let key = EncodingKey::from_ec_pem(&pem("ec-private.pem")).unwrap();
    let mut jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).unwrap();
    jwk.common.key_id = Some("ec-1".into());
    let set = serde_json::to_value(JwkSet { keys: vec![jwk] }).unwrap();
    let app = axum::Router::new().route(
        "/jwks.json",
        axum::routing::get(move || async move { axum::Json(set) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

#[tokio::test]
async fn keys_are_fetched_from_a_jwks_url() {
    let jwks_url = serve_jwks().await;
    let auth = AuthConfig {
        provider: Some(ProviderConfig {
            issuer: ISSUER.into(),
            authorization_servers: vec!["https://as.example.test".into()],
            jwks_url: Some(jwks_url),
            jwks: None,
            key_files: Vec::new(),
            scopes_supported: Vec::new(),
            client_id: None,
            client_secret: None,
            redirect_url: None,
            sign_in_scopes: Vec::new(),
        }),
        ..AuthConfig::default()
    };
    let server = start_with(auth, DescribeConfig::default(), None).await;
    let key = EncodingKey::from_ec_pem(&pem("ec-private.pem")).unwrap();
    let claims = claims(&server);

    let answer = post_mcp(
        &server,
        Some(&sign(Algorithm::ES256, "ec-1", &key, &claims)),
        initialize(),
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let answer = post_mcp(
        &server,
        Some(&sign(Algorithm::ES256, "ec-2", &key, &claims)),
        initialize(),
    )
    .await;
    assert_challenge(&server, &answer, true);
    let answer = post_mcp(&server, Some(&rsa_token(&claims)), initialize()).await;
    assert_challenge(&server, &answer, true);

    let document: Value = reqwest::get(format!("{}/.well-known/oauth-protected-resource", server.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        document["authorization_servers"],
        json!(["https://as.example.test"])
    );
    assert!(document.get("scopes_supported").is_none());
}

#[tokio::test]
async fn the_rmcp_client_sees_the_challenge() {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let server = start_dev().await;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(server.mcp_url()).auth_header("not-a-jwt"),
    );
    let error = ().serve(transport).await.expect_err("the handshake is refused");
    let text = format!("{error:?}");
    assert!(text.contains("invalid_token"), "{text}");
    assert!(text.contains("resource_metadata"), "{text}");
}

#[tokio::test]
async fn unreachable_provider_keys_are_a_503_not_a_refusal() {
    let auth = AuthConfig {
        provider: Some(ProviderConfig {
            issuer: ISSUER.into(),
            authorization_servers: Vec::new(),
            jwks_url: Some("http://127.0.0.1:1/jwks.json".into()),
            jwks: None,
            key_files: Vec::new(),
            scopes_supported: Vec::new(),
            client_id: None,
            client_secret: None,
            redirect_url: None,
            sign_in_scopes: Vec::new(),
        }),
        ..AuthConfig::default()
    };
    let server = start_with(auth, DescribeConfig::default(), None).await;
    let answer = post_mcp(&server, Some(&rsa_token(&claims(&server))), initialize()).await;
    assert_eq!(answer.status, 503, "{answer:?}");
    assert!(
        answer
            .www_authenticate
            .unwrap()
            .starts_with("Bearer resource_metadata=")
    );
}
