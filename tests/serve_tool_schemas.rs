//! What `tools/list` publishes against what the tools answer: every tool's `inputSchema` and
//! `outputSchema` are our `schemas/core-2/` files, bundled; and a real result of each of the
//! fourteen tools from `agentprocess serve` matches the published `outputSchema` (the check is in
//! `common::Mcp::call`, which every call below goes through).

mod common;

use agentprocess_gateway::tool::schemas::{ID_PREFIX, bundle, envelope};
use agentprocess_testkit::SchemaSet;
use common::{Mcp, Server, Who, request_id};
use serde_json::{Value, json};
use std::collections::BTreeSet;

const AGENT: Who = Who::Agent("a_ap");
const MANAGER: Who = Who::Person("manager@acme.test", &["staff"]);
const OPERATOR: Who = Who::Operator("ops@acme.test", &["staff"]);

/// `schema` bundled from the files in the repository's schema folder, as a test reads them.
fn bundled_from_folder(schema: &Value) -> Value {
    bundle(schema, |name| {
        SchemaSet::ours().by_id(&format!("{ID_PREFIX}{name}")).cloned()
    })
    .unwrap_or_else(|e| panic!("the schema folder does not bundle: {e}"))
}

/// The tools that answered `ok: true` at least once.
#[derive(Default)]
struct Answered(BTreeSet<String>);

impl Answered {
    async fn ok(&mut self, client: &Mcp, tool: &str, arguments: Value) -> Value {
        let data = client.ok(tool, arguments).await;
        self.0.insert(tool.to_owned());
        data
    }
}

/// tools.md, "JSON Schemas": `tools/list` gives each tool our argument schema as `inputSchema`
/// and the `{ ok, data | error }` envelope of our result schema as `outputSchema`, each standing
/// alone.
#[tokio::test(flavor = "multi_thread")]
async fn tools_list_publishes_our_schema_files_bundled() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let agent = server.client(&AGENT).await;
    let published = agent.published_schemas().await;
    assert_eq!(published.len(), 14);
    for (tool, (input, output)) in &published {
        let arguments = SchemaSet::ours()
            .file(&format!("tools/{tool}.arguments.json"))
            .unwrap_or_else(|| panic!("no argument schema file for {tool}"));
        assert_eq!(input, &bundled_from_folder(arguments), "{tool}: inputSchema");
        assert_eq!(
            output,
            &bundled_from_folder(&envelope(tool)),
            "{tool}: outputSchema"
        );
        for schema in [input, output] {
            assert!(
                !schema.to_string().contains(ID_PREFIX),
                "{tool} names an id it does not carry"
            );
        }
    }
    agent.close().await;
}

/// tools.md, every tool: a real result of each of the fourteen matches its published
/// `outputSchema`, refusals included.
#[tokio::test(flavor = "multi_thread")]
async fn a_real_result_of_every_tool_matches_its_published_output_schema() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("purchase-request");
    let agent = server.client(&AGENT).await;
    let manager = server.client(&MANAGER).await;
    let operator = server.client(&OPERATOR).await;
    let mut answered = Answered::default();

    answered.ok(&agent, "describe", json!({})).await;
    answered.ok(&agent, "list_processes", json!({})).await;
    let inputs = json!({ "requestId": "PR-1", "quoteDocument": "https://docs.test/pr-1",
                         "approver": "manager@acme.test" });
    let started = answered
        .ok(
            &agent,
            "start_run",
            json!({ "process": "purchase-request", "inputs": inputs, "requestId": request_id() }),
        )
        .await;
    let run_id = started["run"]["id"].as_str().unwrap().to_owned();
    answered.ok(&agent, "get_run", json!({ "runId": run_id })).await;
    let work = answered.ok(&agent, "get_work", json!({})).await;
    assert_eq!(work["items"][0]["stepId"], "assess", "{work}");

    let claimed = answered
        .ok(
            &agent,
            "claim",
            json!({ "runId": run_id, "stepId": "assess", "requestId": request_id() }),
        )
        .await;
    let renewed = answered
        .ok(
            &agent,
            "renew",
            json!({ "token": claimed["token"], "progress": "read the quote", "requestId": request_id() }),
        )
        .await;
    let uploaded = answered
        .ok(
            &agent,
            "upload",
            json!({ "fileName": "match.txt", "contentType": "text/plain",
                    "contentBase64": "UE8gYW5kIEdSIG1hdGNo", "requestId": request_id() }),
        )
        .await;
    let submitted = answered
        .ok(
            &agent,
            "submit",
            json!({
                "token": renewed["token"], "requestId": request_id(),
                "output": { "amountUsd": 120.0, "vendor": "Acme Supplies", "justification": "Quote matches the request" },
                "evidence": [ { "kind": "link", "ref": "https://erp.test/match/1" },
                              { "kind": "file", "ref": uploaded["id"] } ],
                "summary": "Assessed the quote against the request.",
                "next": "team_lead_approval", "reason": "120 USD is under 5000",
            }),
        )
        .await;
    assert!(
        submitted["data"]["steps"]["assess"]["evidence"][1]["url"].is_string(),
        "{submitted}"
    );

    let inbox = manager.ok("get_work", json!({})).await;
    let item = &inbox["items"][0]["workItem"];
    assert_eq!(item["stepId"], "team_lead_approval", "{inbox}");
    answered
        .ok(
            &manager,
            "decide",
            json!({ "runId": run_id, "workItemId": item["id"], "snapshot": item["snapshot"],
                    "decision": "approved", "requestId": request_id() }),
        )
        .await;

    let order = agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": "place_order", "requestId": request_id() }),
        )
        .await;
    answered
        .ok(
            &agent,
            "escalate",
            json!({ "token": order["token"], "note": "The procurement system is read-only today", "requestId": request_id() }),
        )
        .await;
    let sent = answered
        .ok(
            &agent,
            "send_event",
            json!({ "runId": run_id, "name": "erp-back", "requestId": request_id() }),
        )
        .await;
    assert_eq!(sent, json!({ "consumedBy": null }));
    answered
        .ok(&agent, "list_runs", json!({ "process": "purchase-request" }))
        .await;

    let second = agent
        .ok(
            "start_run",
            json!({ "process": "purchase-request", "requestId": request_id(),
                    "inputs": { "requestId": "PR-2", "quoteDocument": "https://docs.test/pr-2",
                                "approver": "manager@acme.test" } }),
        )
        .await;
    let second_id = second["run"]["id"].as_str().unwrap().to_owned();
    answered
        .ok(
            &operator,
            "cancel",
            json!({ "runId": second_id, "reason": "duplicate request", "requestId": request_id() }),
        )
        .await;

    // Refusals travel in the same envelope and match the same outputSchema.
    agent
        .refused(
            "claim",
            json!({ "runId": second_id, "stepId": "assess", "requestId": request_id() }),
            "conflict",
        )
        .await;
    agent
        .refused("get_run", json!({ "runId": "r_nowhere" }), "not_found")
        .await;

    let every_tool: BTreeSet<String> = [
        "describe",
        "list_processes",
        "start_run",
        "get_run",
        "get_work",
        "claim",
        "renew",
        "upload",
        "submit",
        "escalate",
        "decide",
        "cancel",
        "send_event",
        "list_runs",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(answered.0, every_tool);
    for client in [agent, manager, operator] {
        client.close().await;
    }
}
