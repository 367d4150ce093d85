//! The web UI of `agentprocess serve` and its dev-mode OAuth 2.1 authorization server, over HTTP
//! and in a real browser: sign-in, sessions and CSRF; the protected resource metadata naming the
//! server (RFC 9728 §2), its metadata (RFC 8414), client registration (RFC 7591), the
//! authorization code with PKCE (RFC 6749 §4.1, RFC 7636) and its errors; an MCP client (the
//! Python SDK's OAuth client) signing in through the browser and calling tools as the person.
//! The browser (Debian's chromium, Playwright in `target/py-venv`) and axe-core
//! (`target/ui-test-deps`) come from `scripts/install-deps.sh`.

mod common;

use common::browser::{browser_prerequisites, drive_browser_script};
use common::ui::*;
use common::{Mcp, Server, Who, request_id};
use reqwest::header::{COOKIE, LOCATION};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;

const AGENT: Who = Who::Agent("a_ap");
/// Starts a purchase request approved by `approver` and walks `assess` as the agent, so that the
/// run waits on `approver`'s approval; returns its id.
async fn run_waiting_for(agent: &Mcp, approver: &str) -> String {
    let started = agent
        .ok(
            "start_run",
            json!({
                "process": "purchase-request",
                "inputs": { "requestId": format!("PR-{approver}"), "quoteDocument": "https://docs.test/quote",
                            "approver": approver },
                "requestId": request_id(),
            }),
        )
        .await;
    let run_id = started["run"]["id"].as_str().unwrap().to_owned();
    let claim = agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": "assess", "requestId": request_id() }),
        )
        .await;
    agent
        .ok(
            "submit",
            json!({
                "token": claim["token"], "requestId": request_id(),
                "output": { "amountUsd": 120.0, "vendor": "Acme Supplies", "justification": "Quote matches the request" },
                "evidence": [{ "kind": "link", "ref": "https://erp.test/match/ui" }],
                "summary": "Assessed", "next": "team_lead_approval", "reason": "120 USD is under 5000",
            }),
        )
        .await;
    run_id
}

/// The run ids of `get_work` for the holder of `token`.
async fn work_runs(server_mcp_url: &str, token: &str) -> Vec<String> {
    let client = Mcp::connect(server_mcp_url, token).await;
    let work = client.ok("get_work", json!({})).await;
    client.close().await;
    work["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["runId"].as_str().unwrap().to_owned())
        .collect()
}

/// Pages want a session (a GET comes back after sign-in, to a path on this server only); every
/// form wants its CSRF token; the session cookie is HttpOnly, SameSite=Lax, Path=/, and holds a
/// token the MCP endpoint takes as well.
#[tokio::test(flavor = "multi_thread")]
async fn pages_need_a_session_and_every_form_its_csrf_token() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let base = server.url.as_str();
    let get = |path: &str, cookie: Option<&str>| {
        let mut request = http().get(format!("{base}{path}"));
        if let Some(cookie) = cookie {
            request = request.header(COOKIE, cookie.to_owned());
        }
        request.send()
    };

    let root = get("/", None).await.unwrap();
    assert_eq!((root.status().as_u16(), location(&root)), (303, "/ui".to_owned()));
    let home = get("/ui", None).await.unwrap();
    assert_eq!(
        (home.status().as_u16(), location(&home)),
        (303, "/ui/sign-in".to_owned())
    );
    let deep = get("/ui?tab=mine", None).await.unwrap();
    assert_eq!(location(&deep), "/ui/sign-in?next=%2Fui%3Ftab%3Dmine");
    for foreign in ["//evil.test/", "https://evil.test/", "/\\evil.test"] {
        let page = get(&format!("/ui/sign-in?next={}", urlencode(foreign)), None)
            .await
            .unwrap();
        assert_eq!(hidden(&page.text().await.unwrap(), "next"), "/ui", "{foreign}");
    }

    // The sign-in form: its token must fit the browser's sign-in cookie.
    let (sign_in_cookie, csrf) = sign_in_form(base, "ap_sign_in").await;
    let (_, other_csrf) = sign_in_form(base, "ap_sign_in").await;
    for (cookie, token) in [
        (sign_in_cookie.as_str(), ""),
        (sign_in_cookie.as_str(), other_csrf.as_str()),
        ("", csrf.as_str()),
    ] {
        let mut form = vec![("next", "/ui")];
        form.extend_from_slice(PERSON_MIRA);
        if !token.is_empty() {
            form.push(("csrf", token));
        }
        let refused = http()
            .post(format!("{base}/ui/sign-in"))
            .header(COOKIE, cookie)
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 403, "cookie {cookie:?}, token {token:?}");
        assert!(set_cookie(&refused, "ap_session").is_none());
    }

    // Wrong fields: the form again, each error beside its field, no session.
    let errors = http()
        .post(format!("{base}/ui/sign-in"))
        .header(COOKIE, &sign_in_cookie)
        .form(&[
            ("csrf", csrf.as_str()),
            ("organization", ""),
            ("kind", "agent"),
            ("agent_id", "a b"),
        ])
        .send()
        .await
        .unwrap();
    assert!(set_cookie(&errors, "ap_session").is_none());
    let html = errors.text().await.unwrap();
    assert!(html.contains("id=\"organization-error\""), "{html}");
    assert!(html.contains("id=\"agent_id-error\""), "{html}");
    assert!(
        !html.contains("id=\"email-error\""),
        "an agent's email is not checked: {html}"
    );

    let session = dev_sign_in(base, ("ap_sign_in", "ap_session"), "/ui?tab=mine", PERSON_MIRA).await;
    assert!(
        session.contains("; HttpOnly") && session.contains("; SameSite=Lax") && session.contains("; Path=/"),
        "{session}"
    );
    assert!(!session.contains("Secure"), "plain http: {session}");
    let session = cookie_pair(&session);
    let page = get("/ui", Some(&session)).await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains(MIRA) && html.contains("staff"), "{html}");

    // The session holds a bearer token the MCP endpoint verifies alike.
    let token = session.strip_prefix("ap_session=").unwrap();
    let client = Mcp::connect(&server.mcp_url(), token).await;
    client.ok("get_work", json!({})).await;
    client.close().await;

    // Sign-out: refused without the session's CSRF token, or with the sign-in form's.
    for token in [None, Some(csrf.as_str())] {
        let mut form = vec![];
        if let Some(token) = token {
            form.push(("csrf", token));
        }
        let refused = http()
            .post(format!("{base}/ui/sign-out"))
            .header(COOKIE, &session)
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 403, "{token:?}");
        assert!(refused.text().await.unwrap().contains("cannot be accepted"));
    }
    let signed_out = http()
        .post(format!("{base}/ui/sign-out"))
        .header(COOKIE, &session)
        .form(&[("csrf", hidden(&html, "csrf"))])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_out.status(), 303);
    assert_eq!(location(&signed_out), "/ui/sign-in");
    assert!(
        set_cookie(&signed_out, "ap_session")
            .unwrap()
            .starts_with("ap_session=; Max-Age=0")
    );

    // A session cookie that does not verify is dropped on the way to sign in.
    let forged = get("/ui", Some("ap_session=not.a.token")).await.unwrap();
    assert_eq!(location(&forged), "/ui/sign-in");
    assert!(set_cookie(&forged, "ap_session").unwrap().contains("Max-Age=0"));
}

fn urlencode(text: &str) -> String {
    url_form(&[("x", text)]).trim_start_matches("x=").to_owned()
}

fn url_form(pairs: &[(&str, &str)]) -> String {
    let mut url = reqwest::Url::parse("http://x/").unwrap();
    url.query_pairs_mut().extend_pairs(pairs);
    url.query().unwrap().to_owned()
}

/// RFC 9728 §2 names the server as its own authorization server in dev mode; RFC 8414 §2
/// metadata; RFC 7591 §3.2 registration and its errors; RFC 6749 §4.1.2.1 errors at the
/// authorization endpoint: a bad client or redirect URI is told to the person, never redirected
/// to; anything else goes back to the client with its state.
#[tokio::test(flavor = "multi_thread")]
async fn the_authorization_server_describes_itself_registers_clients_and_refuses_bad_requests() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let base = server.url.as_str();

    let resource: Value = reqwest::get(format!("{base}/.well-known/oauth-protected-resource"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resource["authorization_servers"], json!([base]), "{resource}");
    let metadata: Value = reqwest::get(format!("{base}/.well-known/oauth-authorization-server"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["issuer"], base);
    assert_eq!(
        metadata["authorization_endpoint"],
        format!("{base}/oauth/authorize")
    );
    assert_eq!(metadata["token_endpoint"], format!("{base}/oauth/token"));
    assert_eq!(
        metadata["registration_endpoint"],
        format!("{base}/oauth/register")
    );
    assert_eq!(metadata["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(metadata["response_types_supported"], json!(["code"]));

    for (body, error) in [
        (
            json!({ "redirect_uris": ["http://app.example.test/cb"] }),
            "invalid_redirect_uri",
        ),
        (
            json!({ "redirect_uris": ["https://app.example.test/cb#x"] }),
            "invalid_redirect_uri",
        ),
        (json!({ "client_name": "no uris" }), "invalid_redirect_uri"),
        (
            json!({ "redirect_uris": [REDIRECT_URI], "response_types": ["token"] }),
            "invalid_client_metadata",
        ),
    ] {
        let response = http()
            .post(format!("{base}/oauth/register"))
            .json(&body)
            .send()
            .await
            .unwrap();
        let (status, answer) = common::status_and_json(response).await;
        assert_eq!(
            (status, answer["error"].as_str()),
            (400, Some(error)),
            "{body}: {answer}"
        );
    }
    let client_id = register(base, REDIRECT_URI).await;

    let authorize = |query: Vec<(&'static str, String)>| {
        http().get(format!("{base}/oauth/authorize")).query(&query).send()
    };
    let with = |name: &'static str, value: Option<&str>| {
        let mut query: Vec<(&'static str, String)> = authorize_query(&client_id, "st-1")
            .into_iter()
            .filter(|(k, _)| *k != name)
            .collect();
        if let Some(value) = value {
            query.push((name, value.to_owned()));
        }
        query
    };
    // Told to the person, with no redirect.
    for query in [
        with("client_id", Some("forged.client")),
        with("client_id", None),
        with("redirect_uri", Some("http://127.0.0.1:5123/elsewhere")),
    ] {
        let page = authorize(query.clone()).await.unwrap();
        assert_eq!(page.status(), 400, "{query:?}");
        assert!(page.headers().get(LOCATION).is_none());
    }
    // Sent back to the client, with its state and this issuer (RFC 9207).
    for (query, error) in [
        (with("response_type", Some("token")), "unsupported_response_type"),
        (with("code_challenge", None), "invalid_request"),
        (with("code_challenge_method", Some("plain")), "invalid_request"),
        (with("resource", Some("https://elsewhere.test")), "invalid_target"),
    ] {
        let answer = authorize(query.clone()).await.unwrap();
        assert_eq!(answer.status(), 303, "{query:?}");
        let to = location(&answer);
        assert!(to.starts_with(REDIRECT_URI), "{to}");
        assert_eq!(param(&to, "error").as_deref(), Some(error), "{to}");
        assert_eq!(param(&to, "state").as_deref(), Some("st-1"));
        assert_eq!(param(&to, "iss").as_deref(), Some(base));
    }
    // A good request without a session goes to sign in, and comes back to itself.
    let answer = authorize(authorize_query(&client_id, "st-1")).await.unwrap();
    assert_eq!(answer.status(), 303);
    let next = param(&format!("http://x{}", location(&answer)), "next").unwrap();
    assert!(
        next.starts_with("/oauth/authorize?response_type=code&client_id="),
        "{next}"
    );

    // Denied: access_denied, with the state.
    let session = cookie_pair(&dev_sign_in(base, ("ap_sign_in", "ap_session"), "/ui", PERSON_MIRA).await);
    let page = http()
        .get(format!("{base}/oauth/authorize"))
        .query(&authorize_query(&client_id, "st-2"))
        .header(COOKIE, &session)
        .send()
        .await
        .unwrap();
    let html = page.text().await.unwrap();
    let mut form = authorize_query(&client_id, "st-2");
    form.push(("csrf", hidden(&html, "csrf")));
    form.push(("decision", "deny".into()));
    let denied = http()
        .post(format!("{base}/oauth/authorize"))
        .header(COOKIE, &session)
        .form(&form)
        .send()
        .await
        .unwrap();
    let to = location(&denied);
    assert_eq!(param(&to, "error").as_deref(), Some("access_denied"));
    assert_eq!(param(&to, "state").as_deref(), Some("st-2"));
    assert_eq!(param(&to, "code"), None);
    // The consent form wants its CSRF token like every other.
    form.retain(|(k, _)| *k != "csrf");
    form.retain(|(k, _)| *k != "decision");
    form.push(("decision", "allow".into()));
    let refused = http()
        .post(format!("{base}/oauth/authorize"))
        .header(COOKIE, &session)
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
}

/// RFC 6749 §4.1.3 and §5, RFC 7636 §4.6: a code is exchanged once, by its client, at its
/// redirect URI, with its verifier; the token is a `Bearer` token with `expires_in`, never
/// cached, for the person who allowed the client, and the MCP endpoint takes it.
#[tokio::test(flavor = "multi_thread")]
async fn a_code_is_exchanged_once_for_a_token_of_the_person_who_allowed_it() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let base = server.url.as_str();
    server.publish_example("purchase-request");
    let agent = server.client(&AGENT).await;
    let mira_run = run_waiting_for(&agent, MIRA).await;
    let other_run = run_waiting_for(&agent, "other@acme.test").await;
    agent.close().await;

    let client_id = register(base, REDIRECT_URI).await;
    let other_client = register(base, REDIRECT_URI).await;
    let session = cookie_pair(&dev_sign_in(base, ("ap_sign_in", "ap_session"), "/ui", PERSON_MIRA).await);
    let answer = allow(base, &session, &client_id, "st-9").await;
    assert_eq!(param(&answer, "state").as_deref(), Some("st-9"));
    assert_eq!(param(&answer, "iss").as_deref(), Some(base));
    let code = param(&answer, "code").expect("a code");

    let exchange = |overrides: &[(&'static str, &'static str)]| {
        let mut form: Vec<(&str, &str)> = vec![
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", REDIRECT_URI),
            ("client_id", client_id.as_str()),
            ("code_verifier", VERIFIER),
        ];
        for (name, value) in overrides {
            form.retain(|(k, _)| k != name);
            if !value.is_empty() {
                form.push((name, value));
            }
        }
        form.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>()
    };
    let refusals: Vec<(Vec<(String, String)>, &str)> = vec![
        (
            exchange(&[("code_verifier", "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXK")]),
            "invalid_grant",
        ),
        (exchange(&[("code_verifier", "")]), "invalid_request"),
        (
            exchange(&[("redirect_uri", "http://127.0.0.1:5123/other")]),
            "invalid_grant",
        ),
        (
            exchange(&[("grant_type", "refresh_token")]),
            "unsupported_grant_type",
        ),
        (exchange(&[("client_id", "forged.client")]), "invalid_client"),
        (exchange(&[("code", "forged.code")]), "invalid_grant"),
        (
            exchange(&[("resource", "https://elsewhere.test")]),
            "invalid_target",
        ),
    ];
    for (form, error) in refusals {
        let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let (status, body, _) = token_request(base, &pairs).await;
        assert_eq!(body["error"], error, "{form:?}: {body}");
        assert!(status == 400 || status == 401, "{status}");
    }
    // Another registration's client id is not the client the code was issued to.
    let (_, body, _) = token_request(
        base,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT_URI),
            ("client_id", &other_client),
            ("code_verifier", VERIFIER),
        ],
    )
    .await;
    assert_eq!(body["error"], "invalid_grant", "{body}");

    let good = exchange(&[("resource", "")]);
    let pairs: Vec<(&str, &str)> = good.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (status, body, headers) = token_request(base, &pairs).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["expires_in"], 12 * 3600);
    assert_eq!(headers["cache-control"], "no-store");
    let token = body["access_token"].as_str().unwrap();
    // The token acts as Mira: her approval is in her work, another approver's is not.
    let runs = work_runs(&server.mcp_url(), token).await;
    assert!(runs.contains(&mira_run), "{runs:?}");
    assert!(!runs.contains(&other_run), "{runs:?}");

    // Used once: the same exchange again is refused.
    let (status, body, _) = token_request(base, &pairs).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
}

/// The gateways of one deployment share keys, not memory: a session started on one is good on
/// another, and a client registered on one is authorized on a second and gets its token on the
/// first. Over an https public URL the cookies are `__Host-` and `Secure`.
#[tokio::test(flavor = "multi_thread")]
async fn sessions_clients_and_codes_work_on_every_gateway_sharing_the_keys() {
    let shared = tempfile::tempdir().unwrap();
    let dev_key = shared.path().join("dev-signing-key");
    let env = [
        ("AGENTPROCESS_DEV_KEY", dev_key.to_str().unwrap()),
        ("AGENTPROCESS_FILES__KEY", &"ab".repeat(32)),
    ];
    let public_url = "https://ap.example.test";
    let args = ["--public-url", public_url];
    let (data_a, data_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Server::start_with_env(data_a.path(), &args, &env);
    let b = Server::start_with_env(data_b.path(), &args, &env);
    let (base_a, base_b) = (format!("http://{}", a.listen), format!("http://{}", b.listen));

    let session = dev_sign_in(
        &base_a,
        ("__Host-ap_sign_in", "__Host-ap_session"),
        "/ui",
        PERSON_MIRA,
    )
    .await;
    assert!(session.ends_with("; Secure"), "{session}");
    let session = cookie_pair(&session);
    let page = http()
        .get(format!("{base_b}/ui"))
        .header(COOKIE, &session)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200, "the session of gateway A on gateway B");
    assert!(page.text().await.unwrap().contains(MIRA));

    let client_id = register(&base_a, REDIRECT_URI).await;
    let answer = allow(&base_b, &session, &client_id, "st-x").await;
    assert_eq!(param(&answer, "iss").as_deref(), Some(public_url));
    let code = param(&answer, "code").expect("a code from gateway B");
    let (status, body, _) = token_request(
        &base_a,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT_URI),
            ("client_id", &client_id),
            ("code_verifier", VERIFIER),
        ],
    )
    .await;
    assert_eq!(status, 200, "gateway B's code at gateway A: {body}");
    let token = body["access_token"].as_str().unwrap();
    let client = Mcp::connect(&format!("{base_b}/mcp"), token).await;
    let described = client.ok("describe", json!({})).await;
    assert_eq!(described["protocol"], "agentprocess");
    client.close().await;
}

/// Runs `tests/python/ui_browser.py MODE` against `server` ([`drive_browser_script`]).
async fn drive_browser(server: &Server, mode: &str) -> Value {
    drive_browser_script(server, "ui_browser.py", &[mode], &[]).await
}

/// The pages in a real browser at 375 px (the sign-in page showing only the chosen kind's
/// fields, its button in view at 1280x900), and an MCP client that signs in through them with no
/// token pasted by hand: the Python SDK's OAuth client discovers, registers, sends the browser
/// to sign in and allow it, takes the code at its loopback redirect URI, and then calls tools
/// as Mira. No console errors, no serious or critical axe-core violation, no sideways scroll.
#[tokio::test(flavor = "multi_thread")]
async fn a_browser_signs_in_and_an_mcp_client_completes_oauth_through_it() {
    browser_prerequisites();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("purchase-request");
    let agent = server.client(&AGENT).await;
    let mira_run = run_waiting_for(&agent, MIRA).await;
    let other_run = run_waiting_for(&agent, "other@acme.test").await;
    agent.close().await;

    let summary = drive_browser(&server, "dev").await;
    assert_eq!(
        summary["pages"],
        json!([
            "sign-in",
            "sign-in-agent",
            "sign-in-errors",
            "home",
            "oauth-sign-in",
            "oauth-consent"
        ]),
        "{summary}"
    );
    assert_eq!(summary["describe"]["protocol"], "agentprocess", "{summary}");
    let runs: Vec<&str> = summary["workRuns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run.as_str().unwrap())
        .collect();
    assert!(
        runs.contains(&mira_run.as_str()),
        "Mira's approval is in her work: {summary}"
    );
    assert!(
        !runs.contains(&other_run.as_str()),
        "another approver's is not: {summary}"
    );
}

/// panva's oidc-provider (a certified OpenID provider) on a loopback port, killed when dropped.
struct OpenIdProvider {
    child: std::process::Child,
    issuer: String,
}

impl OpenIdProvider {
    /// Starts `tests/oidc/provider.mjs` with the web UI's client redirecting to `redirect_uri`.
    fn start(redirect_uri: &str, client_secret: &str) -> OpenIdProvider {
        use std::io::BufRead;
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let deps = root.join("target/ui-test-deps");
        assert!(
            deps.join("node_modules/oidc-provider").exists(),
            "oidc-provider is not in target/ui-test-deps: run scripts/install-deps.sh"
        );
        let mut child = Command::new("node")
            .arg(root.join("tests/oidc/provider.mjs"))
            .arg(&deps)
            .arg(redirect_uri)
            .arg(client_secret)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("node starts");
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let issuer = line
            .trim()
            .strip_prefix("issuer ")
            .unwrap_or_else(|| panic!("the provider printed {line:?}"))
            .to_owned();
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        OpenIdProvider { child, issuer }
    }
}

impl Drop for OpenIdProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// With `[auth.provider]` naming a client, sign-in is OpenID Connect's authorization code flow
/// with PKCE against the provider (discovered from its issuer), the state kept in a signed
/// cookie; the provider's access token, verified as MCP bearer tokens are, is the session. The
/// dev sign-in and the dev authorization server are not served.
#[tokio::test(flavor = "multi_thread")]
async fn a_person_signs_in_through_an_openid_provider() {
    browser_prerequisites();
    let listen: std::net::SocketAddr = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap()
    };
    let secret = "provider-client-secret";
    let provider = OpenIdProvider::start(&format!("http://{listen}/ui/sign-in/callback"), secret);
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("agentprocess.toml");
    std::fs::write(
        &config,
        format!(
            "[auth.provider]\nissuer = \"{issuer}\"\njwks_url = \"{issuer}/jwks\"\n\
             client_id = \"agentprocess-ui\"\nclient_secret = \"{secret}\"\n\
             sign_in_scopes = [\"openid\", \"agentprocess\"]\n",
            issuer = provider.issuer
        ),
    )
    .unwrap();
    let server = Server::start_listening(
        &data.path().join("data"),
        listen,
        &["--config", config.to_str().unwrap()],
    );
    let base = server.url.as_str();

    let resource: Value = reqwest::get(format!("{base}/.well-known/oauth-protected-resource"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resource["authorization_servers"], json!([provider.issuer]));
    for (method, path) in [
        ("GET", "/.well-known/oauth-authorization-server"),
        ("POST", "/oauth/register"),
    ] {
        let response = http()
            .request(method.parse().unwrap(), format!("{base}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "{method} {path}: not in provider mode");
    }
    let dev_sign_in = http()
        .post(format!("{base}/ui/sign-in"))
        .form(&PERSON_MIRA)
        .send()
        .await
        .unwrap();
    assert_eq!(dev_sign_in.status(), 404, "no dev sign-in with a provider");

    // The way to the provider: PKCE S256, this server as the resource, state in a signed cookie.
    let start = http()
        .get(format!("{base}/ui/sign-in/provider?next=/ui"))
        .send()
        .await
        .unwrap();
    assert_eq!(start.status(), 303);
    let to = location(&start);
    assert!(to.starts_with(&format!("{}/auth?", provider.issuer)), "{to}");
    assert_eq!(param(&to, "code_challenge_method").as_deref(), Some("S256"));
    assert_eq!(param(&to, "resource").as_deref(), Some(base));
    assert_eq!(param(&to, "client_id").as_deref(), Some("agentprocess-ui"));
    let state = param(&to, "state").unwrap();
    let cookie = cookie_pair(&set_cookie(&start, "ap_sign_in").expect("the sign-in cookie"));
    // An answer that does not carry the state of this browser's sign-in is refused.
    for (cookie, answer_state) in [(cookie.as_str(), "another-state"), ("", state.as_str())] {
        let refused = http()
            .get(format!("{base}/ui/sign-in/callback?code=x&state={answer_state}"))
            .header(COOKIE, cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 400, "cookie {cookie:?}");
        assert!(set_cookie(&refused, "ap_session").is_none());
    }

    let summary = drive_browser(&server, "provider").await;
    assert_eq!(
        summary["pages"],
        json!(["provider-sign-in", "provider-home"]),
        "{summary}"
    );
}
