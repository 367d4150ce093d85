//! `agentprocess serve` refusing callers: bearer tokens checked per RFC 6750 / RFC 9728 (spec §5,
//! authentication), `forbidden` for a caller outside what a tool allows (tools.md `decide`), and
//! organizations that never see each other's runs, work items, uploads or request ids (`not_found`).

mod common;

use agentprocess_gateway::auth::dev::DevKey;
use common::{Mcp, ORG, Server, Who, request_id};
use serde_json::{Value, json};
use std::time::{SystemTime, UNIX_EPOCH};

const AGENT: Who = Who::Agent("a_ap");
const MANAGER: Who = Who::Person("manager@acme.test", &["staff"]);
const OUTSIDER: Who = Who::Person("outsider@acme.test", &["staff"]);
const OTHER_ORG: &str = "globex";

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// Claims of a good agent token of `ORG` for `server`, to spoil one field at a time.
fn agent_claims(server: &Server) -> Value {
    json!({
        "iss": server.url, "aud": server.url, "iat": now(), "nbf": now(), "exp": now() + 600,
        "org": ORG, "operator": false, "kind": "agent", "sub": "a_ap",
    })
}

fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// A POST of `describe` to the MCP endpoint with `authorization` (if any): status, the
/// `WWW-Authenticate` header, and the body.
async fn post_describe(server: &Server, authorization: Option<String>) -> (u16, Option<String>, Value) {
    let mut request = reqwest::Client::new()
        .post(server.mcp_url())
        .header("accept", "application/json, text/event-stream")
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                        "params": { "name": "describe", "arguments": {} } }));
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = response.json().await.unwrap_or(Value::Null);
    (status, challenge, body)
}

/// RFC 6750 §3 and RFC 9728 §5.1: no token → 401 pointing at the metadata document, which is
/// served there without a token and names this server as the resource.
#[tokio::test(flavor = "multi_thread")]
async fn no_token_is_401_with_resource_metadata() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let metadata_url = format!("{}/.well-known/oauth-protected-resource", server.url);

    for authorization in [
        None,
        Some("Basic dXNlcjpwdw==".to_owned()),
        Some("Bearer ".to_owned()),
    ] {
        let (status, challenge, _) = post_describe(&server, authorization.clone()).await;
        assert_eq!(status, 401, "{authorization:?}");
        assert_eq!(
            challenge.as_deref(),
            Some(format!("Bearer resource_metadata=\"{metadata_url}\"").as_str()),
            "{authorization:?}"
        );
    }

    let document: Value = reqwest::get(&metadata_url).await.unwrap().json().await.unwrap();
    assert_eq!(document["resource"], server.url.as_str(), "{document}");
    assert_eq!(document["bearer_methods_supported"], json!(["header"]));

    // The admin API is behind the same check.
    let response = reqwest::Client::new()
        .get(format!("{}/admin/v1/processes", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
}

/// RFC 6750 §3.1: a presented token that does not verify → 401 `error="invalid_token"`, for each
/// way a token can be wrong; the same claims signed properly pass.
#[tokio::test(flavor = "multi_thread")]
async fn bad_tokens_are_401_invalid_token() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let key = DevKey::load_or_create(&server.data).unwrap();
    let stranger_dir = tempfile::tempdir().unwrap();
    let stranger_key = DevKey::load_or_create(stranger_dir.path()).unwrap();
    let good = agent_claims(&server);

    // The control: these claims, signed by the server's dev key, are accepted.
    let (status, _, body) = post_describe(&server, Some(format!("Bearer {}", key.sign(&good)))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["structuredContent"]["ok"], true, "{body}");

    let with = |field: &str, value: Value| {
        let mut claims = good.clone();
        claims[field] = value;
        claims
    };
    let other_url = "http://127.0.0.1:9";
    let mut other_server = good.clone();
    other_server["iss"] = json!(other_url);
    other_server["aud"] = json!(other_url);
    let alg_none = format!(
        "{}.{}.",
        base64url(br#"{"alg":"none","typ":"JWT","kid":"agentprocess-dev"}"#),
        base64url(good.to_string().as_bytes())
    );
    let cases: Vec<(&str, String)> = vec![
        ("expired", key.sign(&with("exp", json!(now() - 3600)))),
        (
            "wrong audience",
            key.sign(&with("aud", json!("https://elsewhere.test"))),
        ),
        (
            "wrong issuer",
            key.sign(&with("iss", json!("https://elsewhere.test"))),
        ),
        ("bad signature", stranger_key.sign(&good)),
        ("alg none", alg_none),
        ("another server's URL", key.sign(&other_server)),
        ("not a JWT", "not-a-token".to_owned()),
    ];
    for (case, token) in cases {
        let (status, challenge, body) = post_describe(&server, Some(format!("Bearer {token}"))).await;
        assert_eq!(status, 401, "{case}: {body}");
        let challenge = challenge.unwrap_or_else(|| panic!("{case}: no WWW-Authenticate"));
        assert!(
            challenge.starts_with(&format!(
                "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource\", error=\"invalid_token\"",
                server.url
            )),
            "{case}: {challenge}"
        );
        assert_eq!(body["error"], "invalid_token", "{case}: {body}");
    }
}

/// Starts a purchase request as the agent, submits `assess` towards the team lead's approval
/// (its approver, manager@acme.test), and returns (run id, the approver's work item).
async fn run_waiting_on_approver(server: &Server, agent: &Mcp, request: &str) -> (String, Value) {
    let started = agent
        .ok(
            "start_run",
            json!({
                "process": "purchase-request",
                "inputs": { "requestId": "PR-1", "quoteDocument": "https://docs.test/pr-1",
                            "approver": "manager@acme.test" },
                "requestId": request,
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
    let submitted = agent
        .ok(
            "submit",
            json!({
                "token": claim["token"], "requestId": request_id(),
                "output": { "amountUsd": 120.0, "vendor": "Acme Supplies", "justification": "Quote matches the request" },
                "evidence": [{ "kind": "link", "ref": "https://erp.test/match/1" }],
                "summary": "Assessed", "next": "team_lead_approval", "reason": "120 USD is under 5000",
            }),
        )
        .await;
    let item = submitted["workItems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["stepId"] == "team_lead_approval")
        .cloned()
        .unwrap_or_else(|| panic!("no approver work item: {submitted}"));
    let _ = server;
    (run_id, item)
}

/// tools.md `decide`: `forbidden` for a non-human identity or a person outside the assignment;
/// the item stays open and its rightful person can still decide it.
#[tokio::test(flavor = "multi_thread")]
async fn decide_is_forbidden_to_agents_and_people_outside_the_assignment() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("purchase-request");
    let agent = server.client(&AGENT).await;
    let (run_id, item) = run_waiting_on_approver(&server, &agent, &request_id()).await;
    let decide = |request: String| {
        json!({ "runId": run_id, "workItemId": item["id"], "snapshot": item["snapshot"],
                "decision": "approved", "requestId": request })
    };

    agent.refused("decide", decide(request_id()), "forbidden").await;
    let outsider = server.client(&OUTSIDER).await;
    outsider
        .refused("decide", decide(request_id()), "forbidden")
        .await;
    let work = outsider.ok("get_work", json!({})).await;
    assert_eq!(
        work["items"],
        json!([]),
        "the outsider is offered nothing: {work}"
    );

    let manager = server.client(&MANAGER).await;
    let decided = manager.ok("decide", decide(request_id())).await;
    assert_eq!(
        decided["data"]["steps"]["team_lead_approval"]["decision"],
        "approved"
    );
    assert_eq!(
        decided["data"]["steps"]["team_lead_approval"]["by"],
        "manager@acme.test"
    );
    for client in [agent, outsider, manager] {
        client.close().await;
    }
}

/// Organizations are separate: another organization's run ids, work item ids, upload ids and
/// request ids are `not_found` there (never `forbidden`, which would confirm they exist), and a
/// `requestId` reused by another organization does not replay the first organization's result.
#[tokio::test(flavor = "multi_thread")]
async fn another_organizations_ids_are_not_found() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("purchase-request");
    let agent = server.client(&AGENT).await;
    let start_request = request_id();
    let (run_id, item) = run_waiting_on_approver(&server, &agent, &start_request).await;
    let upload_request = request_id();
    let upload = agent
        .ok(
            "upload",
            json!({ "fileName": "inv.txt", "contentType": "text/plain",
                    "contentBase64": "aW52b2ljZQ==", "requestId": upload_request }),
        )
        .await;
    let upload_id = upload["id"].as_str().unwrap().to_owned();

    let foreign_agent = server.client_in(OTHER_ORG, &AGENT).await;
    let foreign_manager = server
        .client_in(OTHER_ORG, &Who::Person("manager@acme.test", &["staff"]))
        .await;
    foreign_agent
        .refused("get_run", json!({ "runId": run_id }), "not_found")
        .await;
    foreign_agent
        .refused(
            "claim",
            json!({ "runId": run_id, "stepId": "place_order", "requestId": request_id() }),
            "not_found",
        )
        .await;
    foreign_agent
        .refused(
            "send_event",
            json!({ "runId": run_id, "name": "ping", "requestId": request_id() }),
            "not_found",
        )
        .await;
    foreign_agent
        .refused(
            "cancel",
            json!({ "runId": run_id, "reason": "mine now", "requestId": request_id() }),
            "not_found",
        )
        .await;
    foreign_manager
        .refused(
            "decide",
            json!({ "runId": run_id, "workItemId": item["id"], "snapshot": item["snapshot"],
                    "decision": "approved", "requestId": request_id() }),
            "not_found",
        )
        .await;
    let listed = foreign_agent.ok("list_runs", json!({})).await;
    assert_eq!(listed["items"], json!([]), "{listed}");
    let work = foreign_manager.ok("get_work", json!({})).await;
    assert_eq!(work["items"], json!([]), "{work}");

    // Reusing the first organization's start_run requestId: no replay of its run; the other
    // organization has no such process.
    let replay = foreign_agent
        .refused(
            "start_run",
            json!({
                "process": "purchase-request",
                "inputs": { "requestId": "PR-1", "quoteDocument": "https://docs.test/pr-1",
                            "approver": "manager@acme.test" },
                "requestId": start_request,
            }),
            "not_found",
        )
        .await;
    assert!(!replay.to_string().contains(&run_id), "{replay}");
    // Reusing the upload's requestId stores a new file of the other organization.
    let foreign_upload = foreign_agent
        .ok(
            "upload",
            json!({ "fileName": "other.txt", "contentType": "text/plain",
                    "contentBase64": "b3RoZXIgb3Jn", "requestId": upload_request }),
        )
        .await;
    assert_ne!(foreign_upload["id"], upload_id.as_str());
    assert_ne!(foreign_upload["sha256"], upload["sha256"]);
    assert_eq!(foreign_upload["bytes"], 9);

    // The first organization still sees everything as it was.
    let run = agent.ok("get_run", json!({ "runId": run_id })).await;
    assert_eq!(run["run"]["state"], "waiting", "{run}");
    for client in [agent, foreign_agent, foreign_manager] {
        client.close().await;
    }
}

/// An upload id of another organization is `not found` as evidence (tools.md `submit`:
/// `"evidence f_000: not found"`), exactly as an id that never existed.
#[tokio::test(flavor = "multi_thread")]
async fn another_organizations_upload_is_not_found_as_evidence() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("purchase-request");
    let owner = server.client_in(OTHER_ORG, &AGENT).await;
    let upload = owner
        .ok(
            "upload",
            json!({ "fileName": "inv.txt", "contentType": "text/plain",
                    "contentBase64": "aW52b2ljZQ==", "requestId": request_id() }),
        )
        .await;
    let foreign_id = upload["id"].as_str().unwrap().to_owned();

    let agent = server.client(&AGENT).await;
    let started = agent.start_purchase_request("PR-2").await;
    let run_id = started["run"]["id"].as_str().unwrap().to_owned();
    let claim = agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": "assess", "requestId": request_id() }),
        )
        .await;
    let submit = |reference: &str| {
        json!({
            "token": claim["token"], "requestId": request_id(),
            "output": { "amountUsd": 1.0, "vendor": "S", "justification": "ok" },
            "evidence": [{ "kind": "link", "ref": "https://erp.test/1" }, { "kind": "file", "ref": reference }],
            "summary": "Assessed", "next": "team_lead_approval", "reason": "small",
        })
    };
    let foreign = agent.refused("submit", submit(&foreign_id), "not_accepted").await;
    assert!(
        foreign["issues"]
            .as_array()
            .unwrap()
            .contains(&json!(format!("evidence {foreign_id}: not found"))),
        "{foreign}"
    );
    agent.close().await;
    owner.close().await;
}

/// The admin API is for operators: a valid non-operator token is 403, an operator's is 200.
#[tokio::test(flavor = "multi_thread")]
async fn admin_api_needs_an_operator() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let client = reqwest::Client::new();
    for who in [AGENT, MANAGER] {
        let token = server.token(&who);
        let listed = client
            .get(format!("{}/admin/v1/processes", server.url))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(listed.status(), 403, "{who:?}");
        let clock = client
            .post(format!("{}/admin/v1/clock", server.url))
            .bearer_auth(&token)
            .json(&json!({ "advanceSeconds": 60 }))
            .send()
            .await
            .unwrap();
        assert_eq!(clock.status(), 403, "{who:?}");
    }
    let listed = client
        .get(format!("{}/admin/v1/processes", server.url))
        .bearer_auth(server.token(&Who::Operator("ops@acme.test", &["ops"])))
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200);
}
