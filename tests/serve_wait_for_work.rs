//! `get_work` that waits for work, through `serve` over MCP (our `x-wait-1` profile,
//! docs/profiles/wait.md): a first page that holds nothing waits until matching work is ready,
//! or `waitSeconds` pass, and answers the page then; `describe` lists the profile.

mod common;

use common::listener::Listener;
use common::{Mcp, Server, Who, request_id};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Calls `get_work` with `arguments` on its own task: the page it answers, and how long it took.
fn get_work_on_the_side(client: Mcp, arguments: Value) -> tokio::task::JoinHandle<(Value, Duration)> {
    tokio::spawn(async move {
        let started = Instant::now();
        let page = client.ok("get_work", arguments).await;
        (page, started.elapsed())
    })
}

fn item_runs(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["runId"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn describe_lists_the_wait_profile() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let agent = server.client(&Who::Agent("a_reader")).await;
    let describe = agent.ok("describe", json!({})).await;
    let profiles: Vec<&str> = describe["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|profile| profile.as_str().unwrap())
        .collect();
    assert!(profiles.contains(&"x-wait-1"), "{describe}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waiting_agent_gets_the_step_a_start_makes_ready_before_its_wait_is_over() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("defect-triage");
    server.publish_example("policy-update");
    // One agent waits for any work, one for work of another process only.
    let waiting = get_work_on_the_side(
        server.client(&Who::Agent("a_waiting")).await,
        json!({ "waitSeconds": 15 }),
    );
    let elsewhere = get_work_on_the_side(
        server.client(&Who::Agent("a_elsewhere")).await,
        json!({ "waitSeconds": 3, "process": "policy-update" }),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "nothing was ready: the call waits");
    let starter = server.client(&Who::Agent("a_starter")).await;
    let started = starter
        .ok(
            "start_run",
            json!({ "process": "defect-triage", "inputs": { "reportId": "T-1" }, "requestId": request_id() }),
        )
        .await;
    let run = started["run"]["id"].as_str().unwrap().to_string();
    let (page, took) = waiting.await.unwrap();
    assert_eq!(item_runs(&page), vec![run.clone()], "{page}");
    assert_eq!(page["items"][0]["stepId"], "triage");
    assert!(took < Duration::from_secs(10), "answered {took:?} after the call");
    // The agent that waits for another process is not woken by it: its wait runs out.
    let (page, took) = elsewhere.await.unwrap();
    assert_eq!(page["items"], json!([]), "{page}");
    assert!(took >= Duration::from_millis(2900), "{took:?}");

    // Work already ready answers at once, wait or not.
    let started = Instant::now();
    let page = starter.ok("get_work", json!({ "waitSeconds": 15 })).await;
    assert_eq!(item_runs(&page), vec![run]);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_with_nothing_to_do_answers_an_empty_page_when_it_is_over() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("defect-triage");
    let agent = server.client(&Who::Agent("a_idle")).await;
    let started = Instant::now();
    let page = agent.ok("get_work", json!({ "waitSeconds": 1 })).await;
    assert_eq!(page, json!({ "items": [], "nextCursor": null }));
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
    for wait in [json!(0), json!(21), json!("5"), json!(1.5)] {
        let refused = agent
            .refused("get_work", json!({ "waitSeconds": wait }), "invalid")
            .await;
        assert!(
            refused["issues"][0].as_str().unwrap().starts_with("waitSeconds"),
            "{refused}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waiting_person_gets_the_work_item_a_submission_opens_for_them() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("purchase-request");
    let agent = server.client(&Who::Agent("a_buyer")).await;
    let run = agent.start_purchase_request("PR-1").await["run"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let waiting = get_work_on_the_side(
        server.client(&Who::Person("manager@acme.test", &[])).await,
        json!({ "waitSeconds": 15 }),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "nothing was assigned yet: the call waits");
    let claimed = agent
        .ok(
            "claim",
            json!({ "runId": run, "stepId": "assess", "requestId": request_id() }),
        )
        .await;
    agent
        .ok(
            "submit",
            json!({
                "token": claimed["token"],
                "output": { "amountUsd": 1200, "vendor": "Acme Office", "justification": "Chairs." },
                "evidence": [{ "kind": "link", "ref": "https://docs.test/pr-1" }],
                "summary": "Read the quote; the vendor is approved.",
                "next": "team_lead_approval",
                "reason": "Under 5000 USD.",
                "requestId": request_id(),
            }),
        )
        .await;
    let (page, took) = waiting.await.unwrap();
    assert_eq!(item_runs(&page), vec![run], "{page}");
    assert_eq!(page["items"][0]["workItem"]["stepId"], "team_lead_approval");
    assert!(took < Duration::from_secs(10), "answered {took:?} after the call");
}

/// MCP 2026-07-28 `subscriptions/listen` with the official Python SDK: an agent subscribed to its
/// work of one process (`agentprocess://work?process=NAME`, docs/profiles/wait.md) hears
/// `notifications/resources/updated` when a start makes a step of that process ready, and
/// reads the resource to find it; a run of another process started first tells it nothing
/// (the script checks that what it reads after the first notification is of its process).
#[tokio::test(flavor = "multi_thread")]
async fn a_python_sdk_listener_hears_of_work_of_its_process() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("defect-triage");
    server.publish_example("release-notes");
    let listener = Listener::start(
        &server.mcp_url(),
        &server.token(&Who::Agent("a_listener")),
        "defect-triage",
    )
    .await;
    let starter = server.client(&Who::Agent("a_starter")).await;
    starter
        .ok(
            "start_run",
            json!({
                "process": "release-notes",
                "inputs": { "changes": "Faster search", "version": "2.1", "releaseAt": "2026-12-10T09:00:00Z" },
                "requestId": request_id()
            }),
        )
        .await;
    let started = starter
        .ok(
            "start_run",
            json!({ "process": "defect-triage", "inputs": { "reportId": "D-1" }, "requestId": request_id() }),
        )
        .await;
    listener.hears(started["run"]["id"].as_str().unwrap()).await;
}

/// Over plain Streamable HTTP: `resources/subscribe` (MCP 2025-11-25) is refused with why and
/// what to use instead, since this server keeps no sessions to carry its updates; a read of an
/// `agentprocess://` URI that is no resource is `resource not found`, naming the one there is.
#[tokio::test(flavor = "multi_thread")]
async fn a_2025_subscription_and_an_unknown_resource_are_refused_with_reasons() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let token = server.token(&Who::Agent("a_reader"));
    let http = reqwest::Client::new();
    let post = |version: &'static str, method: &'static str, params: Value| {
        http.post(server.mcp_url())
            .bearer_auth(&token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", version)
            .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }))
            .send()
    };
    let subscribed = post(
        "2025-11-25",
        "resources/subscribe",
        json!({ "uri": "agentprocess://work" }),
    )
    .await
    .unwrap();
    let (_, body) = common::status_and_json(subscribed).await;
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("keeps none")
            && message.contains("subscriptions/listen")
            && message.contains("waitSeconds"),
        "{body}"
    );
    let read = post(
        "2025-11-25",
        "resources/read",
        json!({ "uri": "agentprocess://runs" }),
    )
    .await
    .unwrap();
    let (_, body) = common::status_and_json(read).await;
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no resource agentprocess://runs") && message.contains("agentprocess://work"),
        "{body}"
    );
}
