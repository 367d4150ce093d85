//! `agentprocess conformance` end to end: against `serve` every check passes; against a server
//! that breaks chosen rules (our server behind a proxy that rewrites its answers) exactly the
//! checks of those rules fail; checks that need time are "not run" without a clock, never passed.

mod common;

use agentprocess_testkit::fake_evaluator::FakeEvaluator;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use common::Server;
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

/// `serve` with clock control (every `Server` has it) and the fake evaluator, so check-1 is offered.
fn serve_with_evaluator(data: &Path, evaluator: &FakeEvaluator) -> Server {
    Server::start_with_env(
        data,
        &[],
        &[
            ("AGENTPROCESS_EVALUATOR__URL", evaluator.base_url.as_str()),
            ("AGENTPROCESS_EVALUATOR__MODEL", "fake"),
        ],
    )
}

struct Ran {
    code: i32,
    stdout: String,
    report: Value,
}

/// Runs the runner against `url`, minting identities with the server's data folder.
async fn conformance(url: &str, data: &Path, extra: &[&str]) -> Ran {
    let out = tempfile::tempdir().unwrap();
    let json_path = out.path().join("report.json");
    let junit_path = out.path().join("report.xml");
    let mut args: Vec<String> = vec!["conformance".into(), "--url".into(), url.into(), "--data".into()];
    args.push(data.display().to_string());
    args.extend([
        "--json".into(),
        json_path.display().to_string(),
        "--junit".into(),
        junit_path.display().to_string(),
    ]);
    args.extend(extra.iter().map(|a| a.to_string()));
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_agentprocess"))
            .args(&args)
            .env_remove("AGENTPROCESS_URL")
            .output()
            .expect("run agentprocess conformance")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(&json_path)
            .unwrap_or_else(|e| panic!("no JSON report ({e}):\n{stdout}\n{stderr}")),
    )
    .unwrap();
    let junit = std::fs::read_to_string(&junit_path).unwrap();
    let checks = report["checks"].as_array().unwrap();
    assert_eq!(junit.matches("<testcase ").count(), checks.len(), "{junit}");
    assert_eq!(
        junit.matches("<failure ").count(),
        report["failed"].as_u64().unwrap() as usize,
        "{junit}"
    );
    Ran {
        code: output.status.code().unwrap_or(-1),
        stdout: format!("{stdout}\n{stderr}"),
        report,
    }
}

fn names_with(report: &Value, outcome: &str) -> BTreeSet<String> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["outcome"] == outcome)
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn against_serve_every_check_passes_on_both_mcp_revisions_and_each_names_its_rule() {
    let evaluator = FakeEvaluator::spawn_on_thread(None);
    let data = tempfile::tempdir().unwrap();
    let server = serve_with_evaluator(data.path(), &evaluator);
    // The second run finds the processes published already; every run starts runs of its own.
    for revision in ["2025-11-25", "2026-07-28"] {
        let ran = conformance(
            &server.url,
            data.path(),
            &["--publish", "--mcp-revision", revision],
        )
        .await;
        assert_eq!(ran.code, 0, "{}", ran.stdout);
        assert!(
            ran.stdout.contains(&format!("over MCP {revision}")),
            "{}",
            ran.stdout
        );
        assert_eq!(ran.report["failed"], 0, "{}", ran.stdout);
        assert_eq!(
            ran.report["notRun"], 0,
            "every check runs against serve: {}",
            ran.stdout
        );
        let checks = ran.report["checks"].as_array().unwrap();
        assert!(checks.len() >= 30, "{}", ran.stdout);
        for check in checks {
            let rule = check["rule"].as_str().unwrap();
            assert!(
                rule.starts_with("spec §") || rule.starts_with("tools.md") || rule.ends_with("-1"),
                "each check names where its rule is written: {check}"
            );
        }
        assert!(
            ran.stdout
                .contains(&format!("{} passed, 0 failed, 0 not run", checks.len())),
            "{}",
            ran.stdout
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_clock_the_checks_that_need_time_are_not_run_never_passed() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let ran = conformance(&server.url, data.path(), &["--publish", "--no-clock"]).await;
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    let not_run = names_with(&ran.report, "not_run");
    for needs_time in [
        "an expired lease hands the step and its progress to the next agent",
        "a step past its due time is overdue and stays open",
        "wait_until holds the run until the time it names",
        "a wait_for that times out goes to on_timeout",
        // And without an evaluator, check-1 is not offered.
        "a checked step's submission gets a verdict",
    ] {
        assert!(
            not_run.contains(needs_time),
            "{needs_time} should not run: {}",
            ran.stdout
        );
    }
    let details: Vec<&Value> = ran.report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["outcome"] == "not_run")
        .map(|c| &c["details"])
        .collect();
    assert!(
        details.iter().all(|d| d.as_str().is_some_and(|d| !d.is_empty())),
        "each says why: {details:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn processes_are_written_with_their_bindings_for_another_server_to_import() {
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_agentprocess"))
        .args(["conformance", "processes", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let examples = agentprocess_testkit::examples();
    for (name, path) in &examples {
        assert_eq!(
            std::fs::read(out.path().join(name).join("PROCESS.md")).unwrap(),
            std::fs::read(path).unwrap(),
            "{name}"
        );
    }
    let bindings: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("bindings.json")).unwrap()).unwrap();
    assert_eq!(bindings.as_object().unwrap().len(), examples.len());
    assert_eq!(bindings["product-launch"]["engineering-lead"], "engineering-lead");

    // Imported as written, with those bindings, the processes publish.
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let roles: Vec<(String, String)> = bindings["purchase-request"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(role, group)| (role.clone(), group.as_str().unwrap().to_owned()))
        .collect();
    let roles: Vec<(&str, &str)> = roles.iter().map(|(r, g)| (r.as_str(), g.as_str())).collect();
    let (code, stdout, stderr) = server.import(&out.path().join("purchase-request"), &roles, true);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
}

// ------------------------------------------------------------------ a server that breaks rules

/// Which rules the proxy breaks: all four of the wrong server.
#[derive(Default)]
struct Breakage {
    /// The last granted claim of each (run, step): handed to the next claimant too.
    granted_claims: HashMap<(String, String), Value>,
    /// Each token renew replaced, and the token that replaced it.
    replaced_tokens: HashMap<String, String>,
}

#[derive(Clone)]
struct Proxy {
    upstream: String,
    http: reqwest::Client,
    breakage: Arc<Mutex<Breakage>>,
}

/// A request through to our server, rewritten on the way in and out so that the server: lets a
/// second agent claim a claimed step, accepts a token renew replaced, answers a replayed
/// `requestId` afresh, and leaves `requires` out of `list_processes`.
async fn wrong_server(
    State(proxy): State<Proxy>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let tool = request["params"]["name"].as_str().map(str::to_owned);
    let is_call = request["method"] == "tools/call";
    if is_call {
        let arguments = &mut request["params"]["arguments"];
        if arguments.get("requestId").is_some() {
            arguments["requestId"] = json!(uuid_like());
        }
        if let Some(token) = arguments["token"].as_str() {
            let breakage = proxy.breakage.lock().unwrap();
            let mut current = token.to_owned();
            while let Some(newer) = breakage.replaced_tokens.get(&current) {
                current = newer.clone();
            }
            arguments["token"] = json!(current);
        }
    }
    let sent_token = request["params"]["arguments"]["token"]
        .as_str()
        .map(str::to_owned);
    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let mut upstream = proxy.http.request(method, format!("{}{path}", proxy.upstream));
    for name in [
        "authorization",
        "content-type",
        "accept",
        "mcp-protocol-version",
        "mcp-session-id",
    ] {
        if let Some(value) = headers.get(name) {
            upstream = upstream.header(name, value);
        }
    }
    let body = if is_call {
        request.to_string().into_bytes()
    } else {
        body.to_vec()
    };
    let answer = upstream.body(body).send().await.unwrap();
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap();
    let mut response_headers = HeaderMap::new();
    for name in ["content-type", "mcp-session-id"] {
        if let Some(value) = answer.headers().get(name) {
            response_headers.insert(name, value.to_str().unwrap().parse().unwrap());
        }
    }
    let bytes = answer.bytes().await.unwrap();
    let mut message: Value = match serde_json::from_slice(&bytes) {
        Ok(message) if is_call => message,
        _ => return (status, response_headers, bytes).into_response(),
    };
    let content = &mut message["result"]["structuredContent"];
    match tool.as_deref() {
        Some("claim") => {
            let key = (
                request["params"]["arguments"]["runId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                request["params"]["arguments"]["stepId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
            let mut breakage = proxy.breakage.lock().unwrap();
            if content["ok"] == true {
                breakage.granted_claims.insert(key, content["data"].clone());
            } else if content["error"]["issues"] == json!(["claimed_by_other"])
                && let Some(granted) = breakage.granted_claims.get(&key)
            {
                *content = json!({ "ok": true, "data": granted });
            }
        }
        Some("renew") if content["ok"] == true => {
            if let (Some(old), Some(new)) = (sent_token, content["data"]["token"].as_str()) {
                proxy
                    .breakage
                    .lock()
                    .unwrap()
                    .replaced_tokens
                    .insert(old, new.to_owned());
            }
        }
        Some("list_processes") if content["ok"] == true => {
            for item in content["data"]["items"].as_array_mut().into_iter().flatten() {
                item.as_object_mut().unwrap().remove("requires");
            }
        }
        _ => {}
    }
    (status, response_headers, message.to_string()).into_response()
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "00000000-0000-4000-8000-{:012x}",
        NEXT.fetch_add(1, Ordering::Relaxed) + std::process::id() as u64 * 1_000_000
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn against_a_wrong_server_exactly_the_checks_of_the_broken_rules_fail() {
    let evaluator = FakeEvaluator::spawn_on_thread(None);
    let data = tempfile::tempdir().unwrap();
    let server = serve_with_evaluator(data.path(), &evaluator);
    let proxy = Proxy {
        upstream: server.url.clone(),
        http: reqwest::Client::new(),
        breakage: Arc::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = axum::Router::new().fallback(wrong_server).with_state(proxy);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let url = format!("http://{address}");

    // Tokens name the server's public URL; the proxy passes them through unchanged.
    let ran = conformance(&url, data.path(), &["--publish", "--public-url", &server.url]).await;
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    let failed = names_with(&ran.report, "failed");
    let expected: BTreeSet<String> = [
        // A double claim.
        "a claimed step is claimed by no one else",
        "competing agents never both hold one step, and no accepted submission is lost",
        // A replaced token accepted.
        "a replaced token is stale; one that does not verify is invalid",
        // A replayed requestId answered afresh.
        "a replayed requestId answers as the first time; reused with other arguments it is a conflict",
        // requires left out.
        "list_processes gives each process's inputs and requires",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(failed, expected, "{}", ran.stdout);
    assert_eq!(ran.report["notRun"], 0, "{}", ran.stdout);
    // Every failure shows the call, the answer and the rule.
    for check in ran.report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["outcome"] == "failed")
    {
        let details = check["details"].as_str().unwrap();
        assert!(details.lines().count() >= 2, "{check}");
    }
    assert!(
        ran.stdout.contains("FAILED: a replaced token is stale"),
        "{}",
        ran.stdout
    );
}

#[test]
fn bad_input_gets_a_clear_error_and_exit_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.json");
    std::fs::write(&tokens, r#"{ "agent": "a", "colour": "red" }"#).unwrap();
    let run = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_agentprocess"))
            .arg("conformance")
            .args(args)
            .env_remove("AGENTPROCESS_URL")
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, stderr) = run(&["--data", dir.path().to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--url is required"), "{stderr}");
    let (code, stderr) = run(&[
        "--url",
        "http://127.0.0.1:9",
        "--tokens",
        tokens.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("is not a tokens file") && stderr.contains("colour"),
        "{stderr}"
    );
    let (code, stderr) = run(&["--url", "http://127.0.0.1:9", "--agent-token", "a"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("no token for every identity"), "{stderr}");
    let (code, stderr) = run(&[
        "--url",
        "http://127.0.0.1:9",
        "--data",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("no dev signing key"), "{stderr}");
    let (code, stderr) = run(&[
        "--url",
        "http://127.0.0.1:9",
        "--mcp-revision",
        "1999-01-01",
        "--data",
        "x",
    ]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("2025-11-25") && stderr.contains("2026-07-28"),
        "{stderr}"
    );
}
