//! `agentprocess serve` end to end over MCP: our purchase-request example imported with the CLI,
//! then an agent routing by reason, a person approving, and the run finishing (spec §3, §4).

mod common;

use common::{Server, Who, request_id};
use serde_json::{Value, json};

const AGENT: Who = Who::Agent("a_ap");
const MANAGER: Who = Who::Person("manager@acme.test", &["staff"]);

/// The item of `run_id` in an agent's `get_work`, with its exact claim call.
async fn agent_item(client: &common::Mcp, run_id: &str) -> Value {
    let work = client
        .ok("get_work", json!({ "process": "purchase-request" }))
        .await;
    work["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["runId"] == run_id)
        .cloned()
        .unwrap_or_else(|| panic!("no item of {run_id} in {work}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_purchase_request_routes_by_reason_is_approved_and_finishes() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("purchase-request");

    let agent = server.client(&AGENT).await;
    let processes = agent.ok("list_processes", json!({})).await;
    assert_eq!(processes["items"][0]["name"], "purchase-request");
    assert_eq!(processes["items"][0]["version"], 1);

    let started = agent.start_purchase_request("PR-1").await;
    let run_id = started["run"]["id"].as_str().unwrap().to_owned();

    let item = agent_item(&agent, &run_id).await;
    assert_eq!(item["stepId"], "assess");
    let claim = agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": "assess", "requestId": request_id() }),
        )
        .await;
    let token = claim["token"].as_str().unwrap().to_owned();

    // A route outside `next` is refused with the reason, nothing changes.
    let refused = agent
        .refused(
            "submit",
            json!({
                "token": token, "requestId": request_id(),
                "output": { "amountUsd": 4200.5, "vendor": "Acme Supplies", "justification": "Quote matches the request" },
                "evidence": [{ "kind": "link", "ref": "https://erp.test/match/1" }],
                "summary": "Assessed", "next": "done", "reason": "small",
            }),
            "not_accepted",
        )
        .await;
    assert!(!refused["issues"].as_array().unwrap().is_empty(), "{refused}");

    let submitted = agent
        .ok(
            "submit",
            json!({
                "token": token, "requestId": request_id(),
                "output": { "amountUsd": 4200.5, "vendor": "Acme Supplies", "justification": "Quote matches the request" },
                "evidence": [{ "kind": "link", "ref": "https://erp.test/match/1" }],
                "summary": "Assessed", "next": "team_lead_approval", "reason": "4200.50 USD is under 5000",
            }),
        )
        .await;
    assert_eq!(submitted["run"]["id"], run_id.as_str(), "{submitted}");

    let manager = server.client(&MANAGER).await;
    let work = manager.ok("get_work", json!({})).await;
    let item = work["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["runId"] == run_id.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("the approver has no item: {work}"));
    let work_item = &item["workItem"];
    manager
        .ok(
            "decide",
            json!({
                "runId": run_id, "workItemId": work_item["id"], "snapshot": work_item["snapshot"],
                "decision": "approved", "requestId": request_id(),
            }),
        )
        .await;

    let item = agent_item(&agent, &run_id).await;
    assert_eq!(item["stepId"], "place_order");
    let claim = agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": "place_order", "requestId": request_id() }),
        )
        .await;
    agent
        .ok(
            "submit",
            json!({
                "token": claim["token"], "requestId": request_id(),
                "output": { "orderNumber": "PO-1" },
                "evidence": [{ "kind": "link", "ref": "https://erp.test/po/1" }],
                "summary": "Ordered",
            }),
        )
        .await;
    let run = agent.ok("get_run", json!({ "runId": run_id })).await;
    assert_eq!(run["run"]["state"], "ended", "{run}");
    assert_eq!(
        run["data"]["steps"]["assess"]["reason"],
        "4200.50 USD is under 5000"
    );
    agent.close().await;
    manager.close().await;
}
