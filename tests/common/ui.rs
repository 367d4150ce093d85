//! Helpers of the web UI tests: a browser's requests made by hand (no redirect followed, cookies
//! carried explicitly), the dev sign-in, client registration, consent, the token request.

use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use serde_json::{Value, json};

/// The person the UI tests sign in as.
pub const MIRA: &str = "mira@acme.test";
/// The redirect URI the UI tests' clients register.
pub const REDIRECT_URI: &str = "http://127.0.0.1:5123/callback";
/// The PKCE pair of RFC 7636 Appendix B.
pub const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
pub const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

/// A client that follows no redirect and keeps no cookie: every answer is seen as sent.
pub fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The `Set-Cookie` header of `response` that sets `name`, whole.
pub fn set_cookie(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .map(|value| value.to_str().unwrap().to_owned())
        .find(|value| value.starts_with(&format!("{name}=")))
}

/// `name=value` of a `Set-Cookie` header, for a `Cookie` header.
pub fn cookie_pair(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().to_owned()
}

/// The value of the hidden input `name` in a page.
pub fn hidden(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no hidden {name} in {html}"))
        + marker.len();
    let end = start + html[start..].find('"').unwrap();
    html[start..end].replace("&amp;", "&")
}

pub fn location(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(LOCATION)
        .unwrap_or_else(|| panic!("no Location in a {}", response.status()))
        .to_str()
        .unwrap()
        .to_owned()
}

/// The query parameters of a URL.
pub fn query_of(url: &str) -> Vec<(String, String)> {
    reqwest::Url::parse(url)
        .unwrap()
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

pub fn param(url: &str, name: &str) -> Option<String> {
    query_of(url).into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

/// The sign-in form's cookie (`name=nonce`) and CSRF token, as a browser gets them.
pub async fn sign_in_form(base: &str, cookie_name: &str) -> (String, String) {
    let response = http().get(format!("{base}/ui/sign-in")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let cookie = cookie_pair(&set_cookie(&response, cookie_name).expect("the sign-in cookie"));
    let csrf = hidden(&response.text().await.unwrap(), "csrf");
    (cookie, csrf)
}

/// Signs in on the dev sign-in form with `fields`, coming back to `next`; returns the session
/// cookie's `Set-Cookie` header.
pub async fn dev_sign_in(base: &str, cookies: (&str, &str), next: &str, fields: &[(&str, &str)]) -> String {
    let (sign_in_cookie, csrf) = sign_in_form(base, cookies.0).await;
    let mut form = vec![("csrf", csrf.as_str()), ("next", next)];
    form.extend_from_slice(fields);
    let response = http()
        .post(format!("{base}/ui/sign-in"))
        .header(COOKIE, sign_in_cookie)
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303, "{}", response.text().await.unwrap());
    assert_eq!(location(&response), next);
    set_cookie(&response, cookies.1).expect("a session cookie")
}

pub const PERSON_MIRA: &[(&str, &str)] = &[
    ("organization", "acme"),
    ("kind", "person"),
    ("email", MIRA),
    ("groups", "staff"),
];

/// Registers a client redirecting to `redirect_uri`; returns its client id.
pub async fn register(base: &str, redirect_uri: &str) -> String {
    let response = http()
        .post(format!("{base}/oauth/register"))
        .json(&json!({ "redirect_uris": [redirect_uri], "client_name": "test client" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["token_endpoint_auth_method"], "none", "{body}");
    body["client_id"].as_str().unwrap().to_owned()
}

pub fn authorize_query(client_id: &str, state: &str) -> Vec<(&'static str, String)> {
    vec![
        ("response_type", "code".into()),
        ("client_id", client_id.into()),
        ("redirect_uri", REDIRECT_URI.into()),
        ("state", state.into()),
        ("code_challenge", CHALLENGE.into()),
        ("code_challenge_method", "S256".into()),
    ]
}

/// The signed-in person (`session`, a `Cookie` pair) allows `client_id` on the consent page;
/// returns where the browser is sent.
pub async fn allow(authorize_base: &str, session: &str, client_id: &str, state: &str) -> String {
    let page = http()
        .get(format!("{authorize_base}/oauth/authorize"))
        .query(&authorize_query(client_id, state))
        .header(COOKIE, session)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("test client"), "{html}");
    let mut form: Vec<(&str, String)> = authorize_query(client_id, state);
    form.push(("csrf", hidden(&html, "csrf")));
    form.push(("decision", "allow".into()));
    let answer = http()
        .post(format!("{authorize_base}/oauth/authorize"))
        .header(COOKIE, session)
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 303);
    location(&answer)
}

/// `POST /oauth/token` with `form`: status and body.
pub async fn token_request(base: &str, form: &[(&str, &str)]) -> (u16, Value, reqwest::header::HeaderMap) {
    let response = http()
        .post(format!("{base}/oauth/token"))
        .form(form)
        .send()
        .await
        .unwrap();
    let headers = response.headers().clone();
    let (status, body) = super::status_and_json(response).await;
    (status, body, headers)
}
