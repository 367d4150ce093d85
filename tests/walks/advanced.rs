//! The example walks beyond one straight line, each against any [`Deployment`]:
//! `serve_walks_advanced` runs them against `agentprocess serve`, `cluster_walks` against a
//! cluster. Every walk acts in the deployment's organization. The partner-screening walks need a
//! deployment whose evaluator is the [`FakeEvaluator`] they are given.

use crate::common::{Deployment, Mcp, Who, request_id};
use agentprocess_run_actor::machine::Timestamp;
use agentprocess_testkit::fake_evaluator::FakeEvaluator;
use agentprocess_testkit::run_view::{step_of, step_state};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

const OPERATOR: Who = Who::Operator("ops@acme.test", &["ops"]);
/// Not an operator: a member of the escalation group the partner-screening server names.
const ESCALATION_DESK: Who = Who::Person("desk@acme.test", &["escalation-desk"]);
const YEAR_SECONDS: u64 = 365 * 24 * 3600;

/// Starts a run of `process` and returns its id.
async fn start_run(client: &Mcp, process: &str, inputs: Value) -> String {
    let started = client
        .ok(
            "start_run",
            json!({ "process": process, "inputs": inputs, "requestId": request_id() }),
        )
        .await;
    started["run"]["id"].as_str().unwrap().to_owned()
}

/// The agent items of `run_id` in `client`'s `get_work`, as their step ids.
async fn agent_steps_ready(client: &Mcp, run_id: &str) -> Vec<String> {
    let work = client.ok("get_work", json!({})).await;
    work["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["runId"] == run_id && item.get("claim").is_some())
        .map(|item| item["stepId"].as_str().unwrap().to_owned())
        .collect()
}

/// The agent item of `step` in `run_id`, with its exact claim call.
async fn agent_item(client: &Mcp, run_id: &str, step: &str) -> Value {
    let work = client.ok("get_work", json!({})).await;
    work["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["runId"] == run_id && item["stepId"] == step)
        .cloned()
        .unwrap_or_else(|| panic!("no agent item {step} of {run_id} in {work}"))
}

/// Claims `step` through the call its `get_work` item carries; returns the claim data.
async fn claim(client: &Mcp, run_id: &str, step: &str) -> Value {
    let item = agent_item(client, run_id, step).await;
    assert_eq!(item["claim"]["tool"], "claim");
    let mut arguments = item["claim"]["arguments"].clone();
    arguments["requestId"] = json!(request_id());
    client.ok("claim", arguments).await
}

/// Claims `step` and submits `submission` (token and request id added); returns the result.
async fn claim_and_submit(client: &Mcp, run_id: &str, step: &str, submission: Value) -> Value {
    let claimed = claim(client, run_id, step).await;
    let mut arguments = submission;
    arguments["token"] = claimed["token"].clone();
    arguments["requestId"] = json!(request_id());
    client.ok("submit", arguments).await
}

/// The open work items of `run_id` in a person's `get_work`.
async fn person_items(client: &Mcp, run_id: &str) -> Vec<Value> {
    let work = client.ok("get_work", json!({})).await;
    work["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["runId"] == run_id && item.get("workItem").is_some())
        .map(|item| item["workItem"].clone())
        .collect()
}

/// The person's open work item on `step` of `run_id`.
async fn person_item(client: &Mcp, run_id: &str, step: &str) -> Value {
    let items = person_items(client, run_id).await;
    items
        .iter()
        .find(|item| item["stepId"] == step)
        .cloned()
        .unwrap_or_else(|| panic!("no work item {step} of {run_id} in {items:?}"))
}

/// Decides `work_item` with `decision` and the extra fields of `fields`; returns the envelope.
async fn decide_call(client: &Mcp, run_id: &str, work_item: &Value, decision: &str, fields: Value) -> Value {
    let mut arguments = json!({
        "runId": run_id, "workItemId": work_item["id"], "snapshot": work_item["snapshot"],
        "decision": decision, "requestId": request_id(),
    });
    for (key, value) in fields.as_object().unwrap() {
        arguments[key] = value.clone();
    }
    client.call("decide", arguments).await
}

/// Decides `step` of `run_id` from a fresh `get_work` read; returns the data.
async fn decide(client: &Mcp, run_id: &str, step: &str, decision: &str, fields: Value) -> Value {
    let item = person_item(client, run_id, step).await;
    let envelope = decide_call(client, run_id, &item, decision, fields).await;
    assert_eq!(envelope["ok"], true, "decide {step} {decision}: {envelope}");
    envelope["data"].clone()
}

/// Polls `get_run` until `holds` is true of the view (timers fire in the background once the
/// clock moves); panics with `what` after ten seconds.
async fn run_once(client: &Mcp, run_id: &str, what: &str, holds: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..200 {
        let run = get_run(client, run_id).await;
        if holds(&run) {
            return run;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{what} never happened: {}", get_run(client, run_id).await);
}

async fn get_run(client: &Mcp, run_id: &str) -> Value {
    client.ok("get_run", json!({ "runId": run_id })).await
}

pub async fn upload(client: &Mcp, file_name: &str, content_type: &str, bytes: &[u8]) -> Value {
    client
        .ok(
            "upload",
            json!({
                "fileName": file_name, "contentType": content_type,
                "contentBase64": BASE64.encode(bytes), "requestId": request_id(),
            }),
        )
        .await
}

async fn fetch(url: &str) -> (u16, Vec<u8>) {
    let response = reqwest::get(url).await.unwrap();
    let status = response.status().as_u16();
    (status, response.bytes().await.unwrap().to_vec())
}

// ----------------------------------------------------------------------------------------------
// purchase-request: the budget and executive tiers, and a rejection without on_reject.

const BUYING_AGENT: Who = Who::Agent("a_buying");
const BUDGET_OWNER: Who = Who::Person("budget@acme.test", &["budget-owner"]);
const EXECUTIVE: Who = Who::Person("exec@acme.test", &["executive"]);
const TEAM_LEAD: Who = Who::Person("lead@acme.test", &["staff"]);

async fn assessed_request(agent: &Mcp, request: &str, amount: f64, tier: &str) -> String {
    let run_id = start_run(
        agent,
        "purchase-request",
        json!({ "requestId": request, "quoteDocument": format!("https://docs.test/{request}"),
                "approver": "lead@acme.test" }),
    )
    .await;
    claim_and_submit(
        agent,
        &run_id,
        "assess",
        json!({
            "output": { "amountUsd": amount, "vendor": "Acme Supplies",
                        "justification": "Quote matches the plan" },
            "evidence": [{ "kind": "link", "ref": format!("https://procure.test/quote/{request}") }],
            "summary": "Assessed", "next": tier, "reason": format!("{amount} USD picks {tier}"),
        }),
    )
    .await;
    run_id
}

/// Spec §3.5 (`decide`) and the example's replacement tiers (team lead up to 5000 USD, budget
/// owner above 5000 up to 50000, executive above 50000): the budget owner approves a mid-sized
/// request, the executive a large one; the team lead sees neither.
pub async fn purchase_request_tiers_route_to_budget_and_executive_and_each_approval_records(
    server: &impl Deployment,
) {
    server.publish_example("purchase-request");
    let agent = server.client(&BUYING_AGENT).await;
    let budget_owner = server.client(&BUDGET_OWNER).await;
    let executive = server.client(&EXECUTIVE).await;
    let team_lead = server.client(&TEAM_LEAD).await;

    let budget_run = assessed_request(&agent, "PR-20", 45000.0, "budget_approval").await;
    let executive_run = assessed_request(&agent, "PR-21", 250000.0, "executive_approval").await;

    // Each tier's work goes to its own group and nobody else.
    assert!(person_items(&team_lead, &budget_run).await.is_empty());
    assert!(person_items(&team_lead, &executive_run).await.is_empty());
    assert!(person_items(&executive, &budget_run).await.is_empty());
    assert!(person_items(&budget_owner, &executive_run).await.is_empty());
    let item = person_item(&budget_owner, &budget_run, "budget_approval").await;
    assert_eq!(item["kind"], "approve");

    decide(
        &budget_owner,
        &budget_run,
        "budget_approval",
        "approved",
        json!({}),
    )
    .await;
    decide(
        &executive,
        &executive_run,
        "executive_approval",
        "approved",
        json!({}),
    )
    .await;

    for (run_id, approver, step) in [
        (&budget_run, "budget@acme.test", "budget_approval"),
        (&executive_run, "exec@acme.test", "executive_approval"),
    ] {
        claim_and_submit(
            &agent,
            run_id,
            "place_order",
            json!({
                "output": { "orderNumber": format!("PO-{step}") },
                "evidence": [{ "kind": "link", "ref": "https://procure.test/po" }],
                "summary": "Ordered",
            }),
        )
        .await;
        let run = get_run(&agent, run_id).await;
        assert_eq!(run["run"]["state"], "ended", "{run}");
        assert_eq!(run["run"]["outcome"], "ordered", "{run}");
        assert_eq!(run["data"]["steps"][step]["by"], approver, "{run}");
        assert!(run["data"]["steps"]["team_lead_approval"].is_null(), "{run}");
        assert_eq!(step_state(&run, "team_lead_approval"), Value::Null);
    }
}

/// Spec §3.5: a rejected approval without `on_reject` ends the run with outcome `rejected`, the
/// approver and note on `ended`; nothing after it becomes ready.
pub async fn purchase_request_rejected_by_the_executive_ends_the_run_rejected(server: &impl Deployment) {
    server.publish_example("purchase-request");
    let agent = server.client(&BUYING_AGENT).await;
    let executive = server.client(&EXECUTIVE).await;

    let run_id = assessed_request(&agent, "PR-30", 180000.0, "executive_approval").await;
    // A rejection needs a note.
    let item = person_item(&executive, &run_id, "executive_approval").await;
    let refused = decide_call(&executive, &run_id, &item, "rejected", json!({})).await;
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "invalid", "{refused}");

    decide(
        &executive,
        &run_id,
        "executive_approval",
        "rejected",
        json!({ "note": "Not budgeted this quarter" }),
    )
    .await;
    let run = get_run(&agent, &run_id).await;
    assert_eq!(run["run"]["state"], "ended", "{run}");
    assert_eq!(run["run"]["outcome"], "rejected", "{run}");
    assert_eq!(run["run"]["ended"]["by"], "exec@acme.test", "{run}");
    assert_eq!(run["run"]["ended"]["note"], "Not budgeted this quarter", "{run}");
    assert_eq!(
        run["data"]["steps"]["executive_approval"]["decision"], "rejected",
        "{run}"
    );
    assert_eq!(step_state(&run, "executive_approval"), "done", "{run}");
    assert_eq!(run["data"]["steps"]["executive_approval"]["by"], "exec@acme.test");
    assert_eq!(
        run["data"]["steps"]["executive_approval"]["note"],
        "Not budgeted this quarter"
    );
    assert!(agent_steps_ready(&agent, &run_id).await.is_empty());
    assert!(person_items(&executive, &run_id).await.is_empty());
}

// ----------------------------------------------------------------------------------------------
// audit-remediation: rework through on_reject, then the follow-up task.

/// Spec §3.5 `on_reject`: the owner's rejection sends the report back (the earlier report goes
/// to history), a second report is approved, tickets are opened and the follow-up task finishes
/// the run.
pub async fn audit_remediation_rejected_report_is_reworked_then_follow_up_finishes(server: &impl Deployment) {
    server.publish_example("audit-remediation");
    let agent = server.client(&Who::Agent("a_audit")).await;
    let owner = server
        .client(&Who::Person("owner@acme.test", &["compliance"]))
        .await;

    let run_id = start_run(
        &agent,
        "audit-remediation",
        json!({ "auditId": "AUD-7", "findingsOwner": "owner@acme.test" }),
    )
    .await;
    let report = |version: u32| {
        json!({
            "output": { "findingsReport": format!("Findings v{version}"),
                        "remediations": [{ "deliverable": "Rotate keys", "owner": "sam@acme.test",
                                           "due": "2026-12-20" }] },
            "evidence": [{ "kind": "link", "ref": format!("https://wiki.test/aud-7/v{version}") }],
            "summary": format!("Report {version}"),
        })
    };
    claim_and_submit(&agent, &run_id, "write_report", report(1)).await;
    let rejected = decide(
        &owner,
        &run_id,
        "owner_review",
        "rejected",
        json!({ "note": "The key rotation lacks a way to verify it" }),
    )
    .await;
    assert_eq!(step_state(&rejected, "write_report"), "ready", "{rejected}");
    // Spec §3.1: the rejecting approval keeps its decision and note current for the rework.
    assert_eq!(step_state(&rejected, "owner_review"), Value::Null, "{rejected}");
    assert_eq!(
        rejected["data"]["steps"]["owner_review"]["decision"], "rejected",
        "{rejected}"
    );
    assert_eq!(
        rejected["data"]["steps"]["owner_review"]["note"],
        "The key rotation lacks a way to verify it"
    );

    claim_and_submit(&agent, &run_id, "write_report", report(2)).await;
    let run = get_run(&agent, &run_id).await;
    let history = run["data"]["steps"]["write_report"]["history"]
        .as_array()
        .unwrap();
    assert_eq!(history.len(), 1, "{run}");
    assert_eq!(history[0]["output"]["findingsReport"], "Findings v1");
    assert_eq!(
        run["data"]["steps"]["write_report"]["output"]["findingsReport"],
        "Findings v2"
    );

    decide(&owner, &run_id, "owner_review", "approved", json!({})).await;
    claim_and_submit(
        &agent,
        &run_id,
        "open_tickets",
        json!({
            "output": { "ticketIds": ["CMP-101"], "boardUrl": "https://board.test/aud-7" },
            "evidence": [{ "kind": "link", "ref": "https://board.test/aud-7" }],
            "summary": "One ticket opened",
        }),
    )
    .await;

    let item = person_item(&owner, &run_id, "follow_up").await;
    assert_eq!(item["kind"], "task");
    // A task completion must meet the step's output contract (spec §6 rule 3).
    let refused = decide_call(
        &owner,
        &run_id,
        &item,
        "completed",
        json!({ "output": { "resolutionSummary": "All resolved" }, "summary": "Resolved",
                "evidence": [{ "kind": "link", "ref": "https://board.test/CMP-101" }] }),
    )
    .await;
    assert_eq!(refused["error"]["code"], "not_accepted", "{refused}");
    decide(
        &owner,
        &run_id,
        "follow_up",
        "completed",
        json!({
            "output": { "resolutions": [{ "ticketId": "CMP-101", "evidence": "https://board.test/CMP-101" }],
                        "resolutionSummary": "All resolved" },
            "evidence": [{ "kind": "link", "ref": "https://board.test/CMP-101" }],
            "summary": "Every remediation resolved",
        }),
    )
    .await;
    let run = get_run(&agent, &run_id).await;
    assert_eq!(run["run"]["state"], "ended", "{run}");
    assert_eq!(run["run"]["outcome"], "remediated", "{run}");
    assert_eq!(run["data"]["steps"]["follow_up"]["by"], "owner@acme.test");
    assert_eq!(run["data"]["steps"]["owner_review"]["by"], "owner@acme.test");
    assert_eq!(run["data"]["steps"]["owner_review"]["decision"], "approved");
    assert_eq!(
        run["data"]["steps"]["owner_review"]["history"][0]["decision"], "rejected",
        "{run}"
    );
    // Spec §3.5: a finish ends the run by the server with no note.
    assert_eq!(run["run"]["ended"]["by"], "server", "{run}");
    assert_eq!(run["run"]["ended"]["note"], Value::Null, "{run}");
}

// ----------------------------------------------------------------------------------------------
// product-launch (parallel-1) and service-restoration (core only).

const ENGINEERING_LEAD: Who = Who::Person("eng-lead@acme.test", &["engineering-lead"]);
const MARKETING_LEAD: Who = Who::Person("marketing-lead@acme.test", &["marketing-lead"]);
const SUPPORT_LEAD: Who = Who::Person("support-lead@acme.test", &["support-lead"]);
const LAUNCH_LEAD: Who = Who::Person("launch-lead@acme.test", &["product"]);
const SRE_LEAD: Who = Who::Person("sre-lead@acme.test", &["sre-lead"]);
const DATA_LEAD: Who = Who::Person("data-lead@acme.test", &["data-lead"]);
const CUSTOMER_LEAD: Who = Who::Person("customer-lead@acme.test", &["customer-lead"]);
const COORDINATOR: Who = Who::Person("coordinator@acme.test", &["on-call"]);

/// A completion of the person task `step` (a product-launch branch or a service-restoration
/// team's step) with the output field its step asks for.
fn branch_completion(step: &str, round: u32) -> Value {
    let field = match step {
        "engineering_ready" => "engineeringNote",
        "marketing_ready" => "marketingNote",
        "support_ready" => "supportNote",
        "recover" => "recoveryNote",
        "protect_data" => "dataNote",
        "inform_customers" => "customerNote",
        other => panic!("no person task {other}"),
    };
    json!({
        "output": { field: format!("{step} done, round {round}") },
        "evidence": [{ "kind": "link", "ref": format!("https://work.test/{step}/{round}") }],
        "summary": format!("{step} round {round}"),
    })
}

/// parallel-1 §3: the fork makes all three branches ready in one write, each lead gets a work
/// item at once, a sibling's completion makes an older snapshot `stale`, the join waits for the
/// last branch, and the launch lead's rejection to the parallel step reruns every branch with the
/// earlier completions in history.
pub async fn product_launch_forks_three_branches_joins_after_all_and_reruns_on_rejection(
    server: &impl Deployment,
) {
    server.publish_example("product-launch");
    let agent = server.client(&Who::Agent("a_launch")).await;
    let engineering = server.client(&ENGINEERING_LEAD).await;
    let marketing = server.client(&MARKETING_LEAD).await;
    let support = server.client(&SUPPORT_LEAD).await;
    let launch_lead = server.client(&LAUNCH_LEAD).await;

    let describe = agent.ok("describe", json!({})).await;
    assert!(
        describe["profiles"]
            .as_array()
            .unwrap()
            .contains(&json!("parallel-1")),
        "{describe}"
    );

    let run_id = start_run(
        &agent,
        "product-launch",
        json!({ "launchId": "LCH-9", "launchLead": "launch-lead@acme.test" }),
    )
    .await;
    let kicked_off = claim_and_submit(
        &agent,
        &run_id,
        "kickoff",
        json!({ "output": { "plan": "plan-9" }, "summary": "Plan page up, leads notified" }),
    )
    .await;
    // Fork: every branch entry open in the same write that completed `kickoff` (person tasks
    // wait on their person).
    assert_eq!(step_state(&kicked_off, "prepare"), "waiting", "{kicked_off}");
    for branch in ["engineering_ready", "marketing_ready", "support_ready"] {
        assert_eq!(step_state(&kicked_off, branch), "waiting", "{kicked_off}");
    }
    let kind = step_of(&kicked_off, "prepare")["kind"].clone();
    assert_eq!(kind, "parallel");

    // Each lead has their own item, at once.
    let marketing_item = person_item(&marketing, &run_id, "marketing_ready").await;
    person_item(&engineering, &run_id, "engineering_ready").await;
    person_item(&support, &run_id, "support_ready").await;
    assert_eq!(person_items(&engineering, &run_id).await.len(), 1);

    // Engineering completes; the marketing lead's older snapshot is now stale.
    decide(
        &engineering,
        &run_id,
        "engineering_ready",
        "completed",
        branch_completion("engineering_ready", 1),
    )
    .await;
    let stale = decide_call(
        &marketing,
        &run_id,
        &marketing_item,
        "completed",
        branch_completion("marketing_ready", 1),
    )
    .await;
    assert_eq!(stale["ok"], false, "{stale}");
    assert_eq!(stale["error"]["code"], "stale", "{stale}");
    // Read again and decide.
    decide(
        &marketing,
        &run_id,
        "marketing_ready",
        "completed",
        branch_completion("marketing_ready", 1),
    )
    .await;

    // Two of three joined: the parallel step still waits and the launch lead has nothing.
    let run = get_run(&launch_lead, &run_id).await;
    assert_eq!(step_state(&run, "prepare"), "waiting", "{run}");
    assert_eq!(step_state(&run, "engineering_ready"), "done");
    assert_eq!(step_state(&run, "marketing_ready"), "done");
    assert_eq!(step_state(&run, "support_ready"), "waiting");
    assert_eq!(step_state(&run, "go_decision"), Value::Null);
    assert!(person_items(&launch_lead, &run_id).await.is_empty());

    let joined = decide(
        &support,
        &run_id,
        "support_ready",
        "completed",
        branch_completion("support_ready", 1),
    )
    .await;
    assert_eq!(step_state(&joined, "prepare"), "done", "{joined}");
    assert_eq!(step_state(&joined, "go_decision"), "waiting", "{joined}");

    // Rejection to the parallel step: the whole region runs again.
    let reopened = decide(
        &launch_lead,
        &run_id,
        "go_decision",
        "rejected",
        json!({ "note": "The announcement copy is not approved" }),
    )
    .await;
    assert_eq!(step_state(&reopened, "prepare"), "waiting", "{reopened}");
    for branch in ["engineering_ready", "marketing_ready", "support_ready"] {
        assert_eq!(step_state(&reopened, branch), "waiting", "{reopened}");
    }
    let run = get_run(&launch_lead, &run_id).await;
    assert_eq!(
        run["data"]["steps"]["go_decision"]["note"], "The announcement copy is not approved",
        "{run}"
    );
    for (client, branch) in [
        (&support, "support_ready"),
        (&marketing, "marketing_ready"),
        (&engineering, "engineering_ready"),
    ] {
        decide(client, &run_id, branch, "completed", branch_completion(branch, 2)).await;
    }
    let run = get_run(&launch_lead, &run_id).await;
    for branch in ["engineering_ready", "marketing_ready", "support_ready"] {
        let history = run["data"]["steps"][branch]["history"].as_array().unwrap();
        assert_eq!(history.len(), 1, "{branch}: {run}");
        assert_eq!(
            run["data"]["steps"][branch]["summary"],
            format!("{branch} round 2")
        );
    }
    assert_eq!(
        run["data"]["steps"]["marketing_ready"]["by"],
        "marketing-lead@acme.test"
    );

    decide(&launch_lead, &run_id, "go_decision", "approved", json!({})).await;
    let run = get_run(&agent, &run_id).await;
    assert_eq!(run["run"]["state"], "ended", "{run}");
    assert_eq!(run["run"]["outcome"], "launched", "{run}");
    assert_eq!(step_state(&run, "done"), "done", "{run}");
}

/// Core §3 without the profile: the section-2-only example runs the teams one after another;
/// only the current team's lead has an item.
pub async fn service_restoration_runs_the_leads_in_sequence_to_the_finish(server: &impl Deployment) {
    server.publish_example("service-restoration");
    let agent = server.client(&Who::Agent("a_outage")).await;
    let leads = [
        (server.client(&SRE_LEAD).await, "recover"),
        (server.client(&DATA_LEAD).await, "protect_data"),
        (server.client(&CUSTOMER_LEAD).await, "inform_customers"),
    ];
    let coordinator = server.client(&COORDINATOR).await;

    let run_id = start_run(
        &agent,
        "service-restoration",
        json!({ "outageId": "OUT-10", "coordinator": "coordinator@acme.test" }),
    )
    .await;
    claim_and_submit(
        &agent,
        &run_id,
        "open_channel",
        json!({
            "output": { "channel": "outage-10", "pageReceipt": "PG-10" },
            "evidence": [{ "kind": "link", "ref": "https://status.test/10" }],
            "summary": "Channel open",
        }),
    )
    .await;
    for (index, (client, step)) in leads.iter().enumerate() {
        for (other, other_step) in leads.iter().skip(index + 1) {
            assert!(
                person_items(other, &run_id).await.is_empty(),
                "{other_step} is not open while {step} is"
            );
        }
        decide(client, &run_id, step, "completed", branch_completion(step, 1)).await;
    }
    decide(&coordinator, &run_id, "close_outage", "approved", json!({})).await;
    let run = get_run(&agent, &run_id).await;
    assert_eq!(run["run"]["state"], "ended", "{run}");
    assert_eq!(run["run"]["outcome"], "restored", "{run}");
    assert_eq!(
        run["data"]["steps"]["inform_customers"]["by"],
        "customer-lead@acme.test"
    );
    assert_eq!(
        run["data"]["steps"]["close_outage"]["by"],
        "coordinator@acme.test"
    );
}

// ----------------------------------------------------------------------------------------------
// venue-booking: files as evidence, signed urls, rework, organizations kept apart.

const PLANNER: Who = Who::Person("planner@acme.test", &["event-planner"]);
const EVENTS_MANAGER: Who = Who::Person("events@acme.test", &["events-manager"]);

/// Spec §3.7 `upload` and §4 evidence: the planner uploads three offers and cites them as file
/// evidence; run data carries a url per file item that serves the exact bytes; a link where the
/// step requires a file is not accepted; the manager's rejection reworks the gathering; another
/// organization sees neither the run nor the uploads.
pub async fn venue_booking_offers_are_uploaded_files_with_urls_and_stay_in_their_organization(
    server: &impl Deployment,
) {
    server.publish_example("venue-booking");
    let planner = server.client(&PLANNER).await;
    let agent = server.client(&Who::Agent("a_events")).await;
    let manager = server.client(&EVENTS_MANAGER).await;

    let run_id = start_run(
        &planner,
        "venue-booking",
        json!({ "eventId": "EVT-3", "needs": "200 seats, catering", "venueOne": "North Hall",
                "venueTwo": "East Hall", "venueThree": "West Hall" }),
    )
    .await;

    let offers: Vec<Vec<u8>> = (0..3u8)
        .map(|i| {
            let mut bytes = format!("%PDF-1.7 offer {i}\n").into_bytes();
            bytes.extend((0..=255u8).map(|b| b.wrapping_add(i)));
            bytes
        })
        .collect();
    let mut ids = Vec::new();
    for (i, bytes) in offers.iter().enumerate() {
        let uploaded = upload(&planner, &format!("offer-{i}.pdf"), "application/pdf", bytes).await;
        assert_eq!(uploaded["bytes"], bytes.len() as u64, "{uploaded}");
        assert_eq!(uploaded["sha256"].as_str().unwrap().len(), 64, "{uploaded}");
        ids.push(uploaded["id"].as_str().unwrap().to_owned());
    }
    let output =
        json!({ "offerOne": "North 1000 EUR", "offerTwo": "East 980 EUR", "offerThree": "West 1010 EUR" });

    // A link where the step requires file evidence is not accepted.
    let item = person_item(&planner, &run_id, "gather_offers").await;
    let refused = decide_call(
        &planner,
        &run_id,
        &item,
        "completed",
        json!({ "output": output, "summary": "Three offers",
                "evidence": [{ "kind": "link", "ref": "https://mail.test/offers" }] }),
    )
    .await;
    assert_eq!(
        refused["error"]["issues"],
        json!(["evidence: file required"]),
        "{refused}"
    );

    let file_evidence: Vec<Value> = ids
        .iter()
        .map(|id| json!({ "kind": "file", "ref": id }))
        .collect();
    decide(
        &planner,
        &run_id,
        "gather_offers",
        "completed",
        json!({ "output": output, "summary": "Three offers", "evidence": file_evidence }),
    )
    .await;

    let run = get_run(&agent, &run_id).await;
    let evidence = run["data"]["steps"]["gather_offers"]["evidence"]
        .as_array()
        .unwrap();
    assert_eq!(evidence.len(), 3, "{run}");
    for (i, item) in evidence.iter().enumerate() {
        assert_eq!(item["kind"], "file");
        assert_eq!(item["ref"], ids[i].as_str());
        let url = item["url"].as_str().unwrap_or_else(|| panic!("no url: {item}"));
        let (status, body) = fetch(url).await;
        assert_eq!(status, 200, "{url}");
        assert_eq!(body, offers[i], "the bytes of offer {i}");
    }

    // Another organization: no run, no use of these uploads.
    server.publish_example_in("globex", "venue-booking");
    let outsider = server.client_in("globex", &PLANNER).await;
    outsider
        .refused("get_run", json!({ "runId": run_id }), "not_found")
        .await;
    let listed = outsider.ok("list_runs", json!({})).await;
    assert_eq!(listed["items"], json!([]), "{listed}");
    let their_run = start_run(
        &outsider,
        "venue-booking",
        json!({ "eventId": "EVT-X", "needs": "a meeting room", "venueOne": "A",
                "venueTwo": "B", "venueThree": "C" }),
    )
    .await;
    let item = person_item(&outsider, &their_run, "gather_offers").await;
    let borrowed = decide_call(
        &outsider,
        &their_run,
        &item,
        "completed",
        json!({ "output": output, "summary": "Borrowed", "evidence": file_evidence }),
    )
    .await;
    assert_eq!(borrowed["ok"], false, "{borrowed}");
    assert_eq!(borrowed["error"]["code"], "not_accepted", "{borrowed}");
    let not_found: Vec<String> = ids.iter().map(|id| format!("evidence {id}: not found")).collect();
    assert_eq!(borrowed["error"]["issues"], json!(not_found), "{borrowed}");
    outsider.close().await;

    // The ranking, a rejection back to gathering, and the second round.
    let ranking = json!({
        "output": { "ranking": "East cheapest", "pickedVenue": "East Hall", "reasoning": "Price" },
        "summary": "Recommend East Hall",
    });
    claim_and_submit(&agent, &run_id, "rank_offers", ranking.clone()).await;
    let reworked = decide(
        &manager,
        &run_id,
        "choose",
        "rejected",
        json!({ "note": "West Hall's offer has expired" }),
    )
    .await;
    assert_eq!(step_state(&reworked, "gather_offers"), "waiting", "{reworked}");
    let fresh = upload(
        &planner,
        "offer-2b.pdf",
        "application/pdf",
        b"%PDF-1.7 West renewed",
    )
    .await;
    let mut evidence = file_evidence.clone();
    evidence[2] = json!({ "kind": "file", "ref": fresh["id"] });
    decide(
        &planner,
        &run_id,
        "gather_offers",
        "completed",
        json!({ "output": output, "summary": "West renewed", "evidence": evidence }),
    )
    .await;
    claim_and_submit(&agent, &run_id, "rank_offers", ranking).await;
    decide(&manager, &run_id, "choose", "approved", json!({})).await;
    claim_and_submit(
        &agent,
        &run_id,
        "book_venue",
        json!({
            "output": { "bookingRecord": "BKG-3" },
            "evidence": [{ "kind": "link", "ref": "https://events.test/BKG-3" }],
            "summary": "Booked",
        }),
    )
    .await;
    let run = get_run(&planner, &run_id).await;
    assert_eq!(run["run"]["state"], "ended", "{run}");
    assert_eq!(run["run"]["outcome"], "booked", "{run}");
    // Spec §3.1: the ranking made after the returned-to step went to history too.
    assert_eq!(
        run["data"]["steps"]["rank_offers"]["history"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "{run}"
    );
    let history = run["data"]["steps"]["gather_offers"]["history"]
        .as_array()
        .unwrap();
    assert_eq!(history.len(), 1, "{run}");
    let current = &run["data"]["steps"]["gather_offers"]["evidence"][2];
    let (_, body) = fetch(current["url"].as_str().unwrap()).await;
    assert_eq!(body, b"%PDF-1.7 West renewed");
}

// ----------------------------------------------------------------------------------------------
// partner-screening: check-1 against the fake evaluator.

pub const SCREENER: Who = Who::Agent("a_screen");
const PARTNERSHIPS: Who = Who::Person("partners@acme.test", &["partnerships-manager"]);
/// The screening report every submission attaches.
const REPORT: &[u8] = b"Sanctions: no match. Adverse media: no match.";

/// A screening submission citing an uploaded report; `marker` drives the fake's verdict.
async fn screening(agent: &Mcp, marker: &str, cleared: bool) -> Value {
    let report = upload(agent, "screening.txt", "text/plain", REPORT).await;
    json!({
        "output": { "cleared": cleared,
                    "summary": format!("Cleared against the sanctions and adverse-media lists {marker}") },
        "evidence": [{ "kind": "file", "ref": report["id"] }],
        "summary": format!("Screened {marker}"),
        "next": if cleared { "partner_approval" } else { "turned_down" },
        "reason": "Both lists clear",
    })
}

/// check-1 §3: "pass, unsure and advisory verdicts are recorded at `steps.<id>.check`". When a
/// person completes an escalated checked step with their own output (not checked again), the
/// unsure verdict that sent it to them stays recorded beside that output.
pub async fn check_3_the_unsure_verdict_stays_when_a_person_completes_with_their_own_output(
    server: &impl Deployment,
) {
    server.publish_example("partner-screening");
    let agent = server.client(&SCREENER).await;
    let desk = server.client(&ESCALATION_DESK).await;
    let run_id = start_run(
        &agent,
        "partner-screening",
        json!({ "partnerName": "Initech", "dealSize": 9000 }),
    )
    .await;
    let submission = screening(&agent, "[check:unsure]", true).await;
    let held = claim_and_submit(&agent, &run_id, "screen_partner", submission.clone()).await;
    let verdict = held["data"]["steps"]["screen_partner"]["check"].clone();
    assert_eq!(verdict["verdict"], "unsure", "{held}");

    // The person's own screening, with their own report.
    let own = screening(&desk, "", false).await;
    let item = person_item(&desk, &run_id, "screen_partner").await;
    let done = decide_call(&desk, &run_id, &item, "completed", own.clone()).await;
    assert_eq!(done["ok"], true, "{done}");
    let step = &done["data"]["data"]["steps"]["screen_partner"];
    assert_eq!(step["output"], own["output"], "{done}");
    assert_eq!(step["by"], "desk@acme.test", "{done}");
    assert_eq!(step["check"], verdict, "the unsure verdict is kept: {done}");
    assert_eq!(step_state(&done["data"], "turned_down"), "done", "{done}");
}

/// check-1 §3: a passing verdict completes the step and is recorded at `steps.<id>.check`;
/// the partnerships manager approves and the outcome is `partnered`. A partner that is not
/// cleared routes to `declined`.
pub async fn partner_screening_pass_is_recorded_and_the_partner_is_accepted(server: &impl Deployment) {
    server.publish_example("partner-screening");
    let agent = server.client(&SCREENER).await;
    let manager = server.client(&PARTNERSHIPS).await;

    let run_id = start_run(
        &agent,
        "partner-screening",
        json!({ "partnerName": "Initech", "dealSize": 50000 }),
    )
    .await;
    let submission = screening(&agent, "", true).await;
    let done = claim_and_submit(&agent, &run_id, "screen_partner", submission).await;
    let check = &done["data"]["steps"]["screen_partner"]["check"];
    assert_eq!(check["verdict"], "pass", "{done}");
    assert_eq!(check["advisory"], false);
    assert_eq!(check["questions"].as_array().unwrap().len(), 3, "{check}");
    for question in check["questions"].as_array().unwrap() {
        assert_eq!(question["result"], "pass", "{check}");
    }
    assert_eq!(check["questions"][0]["kind"], "yes_no");
    assert_eq!(check["questions"][1]["kind"], "choice");
    assert_eq!(check["questions"][1]["answer"], "decisive");
    assert_eq!(check["questions"][2]["kind"], "rubric");
    assert_eq!(check["questions"][2]["answer"], 2);

    // The approver sees the file with a url.
    let evidence = &done["data"]["steps"]["screen_partner"]["evidence"][0];
    let (_, body) = fetch(evidence["url"].as_str().unwrap()).await;
    assert_eq!(body, REPORT);

    decide(&manager, &run_id, "partner_approval", "approved", json!({})).await;
    let run = get_run(&agent, &run_id).await;
    assert_eq!(run["run"]["state"], "ended", "{run}");
    assert_eq!(run["run"]["outcome"], "partnered", "{run}");
    assert_eq!(step_state(&run, "accepted"), "done", "{run}");
    assert_eq!(step_state(&run, "turned_down"), Value::Null, "{run}");

    let declined = start_run(
        &agent,
        "partner-screening",
        json!({ "partnerName": "Sanctioned Co", "dealSize": 10 }),
    )
    .await;
    let submission = screening(&agent, "", false).await;
    let done = claim_and_submit(&agent, &declined, "screen_partner", submission).await;
    assert_eq!(done["run"]["state"], "ended", "{done}");
    assert_eq!(done["run"]["outcome"], "declined", "{done}");
    assert_eq!(step_state(&done, "turned_down"), "done", "{done}");
}

/// check-1 §3 fail: `not_accepted` with one `check: <ask> → <answer>` issue per failed question,
/// run data unchanged; once the lease lapses the next claim carries the verdict in
/// `handoff.check` and the same issues, and a clean resubmission passes.
pub async fn partner_screening_fail_is_refused_and_handed_to_the_next_attempt(server: &impl Deployment) {
    server.publish_example("partner-screening");
    let agent = server.client(&SCREENER).await;

    let run_id = start_run(
        &agent,
        "partner-screening",
        json!({ "partnerName": "Hooli", "dealSize": 900 }),
    )
    .await;
    let claimed = claim(&agent, &run_id, "screen_partner").await;
    let mut submission = screening(&agent, "[check:fail]", true).await;
    submission["token"] = claimed["token"].clone();
    submission["requestId"] = json!(request_id());
    let refused = agent.refused("submit", submission, "not_accepted").await;
    let issues: Vec<&str> = refused["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap())
        .collect();
    assert_eq!(issues.len(), 3, "{refused}");
    assert!(
        issues[0].starts_with("check: Does the cleared value agree with the attached report? → no (0.02"),
        "{issues:?}"
    );
    assert!(
        issues[1].starts_with("check: How does the summary read? → vague (0.9"),
        "{issues:?}"
    );
    assert!(
        issues[2]
            .starts_with("check: How thorough is the screening? → level 0: No list is clearly searched. ("),
        "{issues:?}"
    );
    let run = get_run(&agent, &run_id).await;
    assert!(run["data"]["steps"]["screen_partner"].is_null(), "{run}");
    assert_eq!(step_state(&run, "screen_partner"), "claimed");

    let lease = agent.ok("describe", json!({})).await["leaseSeconds"]
        .as_u64()
        .unwrap();
    server.advance(lease + 1).await;
    run_once(&agent, &run_id, "the lease lapsing", |run| {
        step_state(run, "screen_partner") == "ready"
    })
    .await;
    let item = agent_item(&agent, &run_id, "screen_partner").await;
    let handoff = &item["handoff"];
    assert_eq!(handoff["check"]["verdict"], "fail", "{item}");
    assert_eq!(handoff["check"]["model"], FakeEvaluator::MODEL, "{item}");
    let handed: Vec<&str> = handoff["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap())
        .collect();
    assert_eq!(handed, issues);
    let claimed = claim(&agent, &run_id, "screen_partner").await;
    assert_eq!(claimed["handoff"]["check"]["verdict"], "fail", "{claimed}");

    let mut submission = screening(&agent, "", true).await;
    submission["token"] = claimed["token"].clone();
    submission["requestId"] = json!(request_id());
    let done = agent.ok("submit", submission).await;
    assert_eq!(
        done["data"]["steps"]["screen_partner"]["check"]["verdict"], "pass",
        "{done}"
    );
}

/// check-1 §3 unsure and error: an unsure verdict holds the submission as the candidate and
/// escalates; a person completes with the candidate (not checked again) and the run goes on to
/// the finish. An evaluator error gives the agent `retry` and changes nothing.
pub async fn partner_screening_unsure_escalates_with_the_candidate_and_an_error_asks_for_retry(
    server: &impl Deployment,
    evaluator: &FakeEvaluator,
) {
    server.publish_example("partner-screening");
    let agent = server.client(&SCREENER).await;
    let desk = server.client(&ESCALATION_DESK).await;
    let manager = server.client(&PARTNERSHIPS).await;

    // Error: retry, nothing recorded, still claimed.
    let run_id = start_run(
        &agent,
        "partner-screening",
        json!({ "partnerName": "Umbrella", "dealSize": 7000 }),
    )
    .await;
    let claimed = claim(&agent, &run_id, "screen_partner").await;
    let mut submission = screening(&agent, "[check:error]", true).await;
    submission["token"] = claimed["token"].clone();
    submission["requestId"] = json!(request_id());
    let before = evaluator.requests();
    agent.refused("submit", submission, "retry").await;
    let after = evaluator.requests();
    // Two attempts at most (the first and one retry); each asks the three questions at once and
    // gives up at the first error, so it reaches the evaluator one to three times.
    assert!((2..=6).contains(&(after - before)), "{} requests", after - before);
    let received = evaluator.received();
    assert!(received.iter().all(|r| r.body["model"] == "fake"), "{received:?}");
    let run = get_run(&agent, &run_id).await;
    assert_eq!(step_state(&run, "screen_partner"), "claimed", "{run}");
    assert!(run["data"]["steps"]["screen_partner"].is_null(), "{run}");

    // Unsure: ok, held as the candidate, escalated.
    let mut submission = screening(&agent, "[check:unsure]", true).await;
    submission["token"] = claimed["token"].clone();
    submission["requestId"] = json!(request_id());
    let held = agent.ok("submit", submission.clone()).await;
    assert_eq!(step_state(&held, "screen_partner"), "waiting", "{held}");
    assert_eq!(held["run"]["state"], "waiting", "{held}");
    assert_eq!(
        held["data"]["steps"]["screen_partner"]["check"]["verdict"], "unsure",
        "{held}"
    );
    assert!(agent_steps_ready(&agent, &run_id).await.is_empty());

    let item = person_item(&desk, &run_id, "screen_partner").await;
    let escalation = &item["escalation"];
    assert_eq!(escalation["check"]["verdict"], "unsure", "{item}");
    let results: Vec<&str> = escalation["check"]["questions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["result"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["unsure", "unsure", "unsure"], "{item}");
    assert_eq!(escalation["candidate"]["output"], submission["output"], "{item}");
    let file = &escalation["candidate"]["evidence"][0];
    let (_, body) = fetch(file["url"].as_str().unwrap()).await;
    assert_eq!(body, REPORT);

    // The person completes with the candidate; the marker is not checked again.
    decide(&desk, &run_id, "screen_partner", "completed", json!({})).await;
    let run = get_run(&agent, &run_id).await;
    let step = &run["data"]["steps"]["screen_partner"];
    assert_eq!(step["summary"], "Screened [check:unsure]", "{run}");
    assert_eq!(step["next"], "partner_approval", "{run}");
    assert_eq!(
        step["evidence"][0]["ref"], submission["evidence"][0]["ref"],
        "{run}"
    );
    assert_eq!(step["check"]["verdict"], "unsure", "{run}");
    assert_eq!(step_state(&run, "partner_approval"), "waiting", "{run}");
    assert_eq!(step_state(&run, "screen_partner"), "done", "{run}");
    assert_eq!(
        run["data"]["steps"]["screen_partner"]["by"], "desk@acme.test",
        "{run}"
    );
    assert_eq!(
        run["data"]["steps"]["screen_partner"]["output"],
        submission["output"]
    );

    // The manager rejects once: the screening is reworked, then approved.
    decide(
        &manager,
        &run_id,
        "partner_approval",
        "rejected",
        json!({ "note": "Attach the adverse-media search terms" }),
    )
    .await;
    let redo = screening(&agent, "", true).await;
    claim_and_submit(&agent, &run_id, "screen_partner", redo).await;
    decide(&manager, &run_id, "partner_approval", "approved", json!({})).await;
    let run = get_run(&agent, &run_id).await;
    assert_eq!(run["run"]["state"], "ended", "{run}");
    assert_eq!(run["run"]["outcome"], "partnered", "{run}");
    assert_eq!(
        run["data"]["steps"]["partner_approval"]["by"],
        "partners@acme.test"
    );
    assert_eq!(
        run["data"]["steps"]["screen_partner"]["history"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "{run}"
    );
}

// ----------------------------------------------------------------------------------------------
// Events and timers, on a small process of their own (no example waits on an event and a date).

const PAYMENT_WATCH: &str = "---
name: payment-watch
description: Wait for two payments on an invoice, chase one that does not come, and close at the agreed time.
inputs:
  invoiceId: string
  closeAt: datetime
steps:
  - id: prepare
    agent: Send the invoice to the customer.
    output: { sentTo: string }
  - id: first_payment
    wait_for: payment-received
    timeout: 2d
    on_timeout: chase
    next: second_payment
  - id: second_payment
    wait_for: payment-received
    timeout: 1d
    on_timeout: chase
    next: closing_time
  - id: chase
    agent: Chase the missing payment.
    output: { note: string }
    next: closing_time
  - id: closing_time
    wait_until: inputs.closeAt
  - id: done
    finish: closed
---

# Payment watch

Two instalments are expected; a missing one is chased.
";

/// Spec §3.6 `send_event` and the wait steps: events sent before the wait is reached are held
/// and consumed oldest first; an event sent while waiting is consumed at once; a person who is
/// no operator is refused; `wait_for` times out to `on_timeout` when the clock passes it;
/// `wait_until` waits for its date, or passes at once when the date is behind.
pub async fn events_are_held_oldest_first_waits_time_out_and_wait_until_holds_to_its_date(
    server: &impl Deployment,
) {
    let data = tempfile::tempdir().unwrap();
    let folder = data.path().join("payment-watch");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("PROCESS.md"), PAYMENT_WATCH).unwrap();
    let (code, out, err) = server.import(&folder.join("PROCESS.md"), &[], true);
    assert_eq!(code, 0, "{out}\n{err}");
    let agent = server.client(&Who::Agent("a_ar")).await;
    let operator = server.client(&OPERATOR).await;
    let clerk = server.client(&Who::Person("clerk@acme.test", &["finance"])).await;

    // Run A: two events held before the waits, consumed oldest first. It closes a year after the
    // server's time, in whole seconds.
    let now = server.advance(0).await;
    let close_at = Timestamp::from_millis(now.as_millis() / 1000 * 1000).plus_seconds(YEAR_SECONDS);
    let held_run = start_run(
        &agent,
        "payment-watch",
        json!({ "invoiceId": "INV-A", "closeAt": close_at.to_rfc3339() }),
    )
    .await;
    let event = |run_id: &str, amount: u32| {
        json!({ "runId": run_id, "name": "payment-received", "data": { "amount": amount },
                "requestId": request_id() })
    };
    clerk
        .refused("send_event", event(&held_run, 1), "forbidden")
        .await;
    // An operator sends the first, an agent the second.
    for (sender, amount) in [(&operator, 100), (&agent, 200)] {
        let sent = sender.ok("send_event", event(&held_run, amount)).await;
        assert_eq!(sent["consumedBy"], Value::Null, "{sent}");
    }
    let done = claim_and_submit(
        &agent,
        &held_run,
        "prepare",
        json!({ "output": { "sentTo": "billing@customer.test" }, "summary": "Sent" }),
    )
    .await;
    assert_eq!(
        done["data"]["steps"]["first_payment"]["output"],
        json!({ "amount": 100 }),
        "{done}"
    );
    assert_eq!(
        done["data"]["steps"]["second_payment"]["output"],
        json!({ "amount": 200 }),
        "{done}"
    );
    assert_eq!(done["data"]["steps"]["first_payment"]["by"], "ops@acme.test");
    assert_eq!(done["data"]["steps"]["second_payment"]["by"], "a_ar");
    assert_eq!(step_state(&done, "closing_time"), "waiting", "{done}");
    assert_eq!(step_state(&done, "chase"), Value::Null, "{done}");
    assert_eq!(done["run"]["state"], "waiting");

    // Run B: an event while waiting is consumed at once; the second wait times out.
    let timed_run = start_run(
        &agent,
        "payment-watch",
        json!({ "invoiceId": "INV-B", "closeAt": "2020-01-01T00:00:00Z" }),
    )
    .await;
    claim_and_submit(
        &agent,
        &timed_run,
        "prepare",
        json!({ "output": { "sentTo": "billing@other.test" }, "summary": "Sent" }),
    )
    .await;
    let sent = operator.ok("send_event", event(&timed_run, 300)).await;
    assert_eq!(sent["consumedBy"], "first_payment", "{sent}");
    let run = get_run(&agent, &timed_run).await;
    assert_eq!(step_state(&run, "second_payment"), "waiting", "{run}");
    server.advance(12 * 3600).await;
    assert!(agent_steps_ready(&agent, &timed_run).await.is_empty());
    server.advance(12 * 3600 + 1).await;
    let run = run_once(&agent, &timed_run, "the timeout", |run| {
        step_state(run, "chase") == "ready"
    })
    .await;
    assert_eq!(step_state(&run, "second_payment"), "done", "{run}");
    assert_eq!(agent_steps_ready(&agent, &timed_run).await, ["chase"]);
    let done = claim_and_submit(
        &agent,
        &timed_run,
        "chase",
        json!({ "output": { "note": "Called the customer" }, "summary": "Chased" }),
    )
    .await;
    // The close date is behind: the wait passes at once and the run finishes.
    assert_eq!(done["run"]["state"], "ended", "{done}");
    assert_eq!(done["run"]["outcome"], "closed", "{done}");
    assert!(
        done["data"]["steps"]["second_payment"]["output"].is_null(),
        "{done}"
    );
    // Spec §3.1: a wait records `by: "server"`.
    assert_eq!(done["data"]["steps"]["closing_time"]["by"], "server", "{done}");
    // The timed-out wait is done by the server, with no event data.
    let timed_out = &done["data"]["steps"]["second_payment"];
    assert_eq!(timed_out["by"], "server", "{done}");
    assert!(timed_out.get("output").is_none(), "{done}");

    // An ended run takes no more events.
    let ended = operator
        .refused("send_event", event(&timed_run, 400), "conflict")
        .await;
    assert_eq!(ended["issues"], json!(["run_ended"]), "{ended}");

    // Run A still waits for its date, then finishes when the clock passes it.
    let run = get_run(&agent, &held_run).await;
    assert_eq!(run["run"]["state"], "waiting", "{run}");
    let now = server.advance(0).await;
    let to_close = u64::try_from(close_at.as_millis() - now.as_millis()).expect("ahead") / 1000;
    server.advance(to_close + 3600).await;
    let run = run_once(&agent, &held_run, "the close date", |run| {
        run["run"]["state"] == "ended"
    })
    .await;
    assert_eq!(run["run"]["outcome"], "closed", "{run}");
    assert_eq!(step_state(&run, "done"), "done", "{run}");
}

// ----------------------------------------------------------------------------------------------
// parallel-1 with agent branches and branch-local rework, on a small process of its own (the
// example with a fork, product-launch, has person branches only).

const LAUNCH_REVIEW: &str = "---
name: launch-review
description: Review a launch from two sides at once, with a legal sign-off that can send its own draft back.
inputs:
  launchId: string
steps:
  - id: prepare
    agent: Collect the launch plan.
    output: { plan: string }
  - id: reviews
    parallel: [security_scan, legal_draft]
    next: publish
  - id: security_scan
    agent: Scan the launch for security issues.
    output: { findings: string }
    next: join
  - id: legal_draft
    agent: Draft the legal notice.
    output: { notice: string }
    next: legal_signoff
  - id: legal_signoff
    person: legal
    approve: Approve the legal notice.
    on_reject: legal_draft
    next: join
  - id: publish
    agent: Publish the launch.
    output: { url: string }
  - id: done
    finish: launched
---

# Launch review

Security and legal review at the same time; the launch is published when both are done.
";

/// parallel-1 §3: agent branches are ready together and claimed by different agents; a claimed
/// branch is not offered to the other; a branch completion stales an open snapshot; `on_reject`
/// inside a branch reworks that branch only; the join waits for the sign-off.
pub async fn agent_branches_are_claimed_by_different_agents_and_rework_stays_in_its_branch(
    server: &impl Deployment,
) {
    let data = tempfile::tempdir().unwrap();
    let folder = data.path().join("launch-review");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("PROCESS.md"), LAUNCH_REVIEW).unwrap();
    let (code, out, err) = server.import(&folder.join("PROCESS.md"), &[("legal", "legal")], true);
    assert_eq!(code, 0, "{out}\n{err}");
    let scanner = server.client(&Who::Agent("a_scanner")).await;
    let writer = server.client(&Who::Agent("a_writer")).await;
    let legal = server.client(&Who::Person("counsel@acme.test", &["legal"])).await;

    let run_id = start_run(&scanner, "launch-review", json!({ "launchId": "L-1" })).await;
    let forked = claim_and_submit(
        &scanner,
        &run_id,
        "prepare",
        json!({ "output": { "plan": "Plan 1" }, "summary": "Plan collected" }),
    )
    .await;
    assert_eq!(step_state(&forked, "reviews"), "waiting", "{forked}");
    assert_eq!(step_state(&forked, "security_scan"), "ready", "{forked}");
    assert_eq!(step_state(&forked, "legal_draft"), "ready", "{forked}");
    assert_eq!(step_state(&forked, "legal_signoff"), Value::Null, "{forked}");
    let mut offered = agent_steps_ready(&writer, &run_id).await;
    offered.sort();
    assert_eq!(offered, ["legal_draft", "security_scan"]);

    // Two agents hold the two branches at once.
    let scan = claim(&scanner, &run_id, "security_scan").await;
    let draft = claim(&writer, &run_id, "legal_draft").await;
    assert_eq!(agent_steps_ready(&scanner, &run_id).await, Vec::<String>::new());
    let taken = scanner
        .refused(
            "claim",
            json!({ "runId": run_id, "stepId": "legal_draft", "requestId": request_id() }),
            "conflict",
        )
        .await;
    assert_eq!(taken["issues"], json!(["claimed_by_other"]), "{taken}");
    let run = get_run(&legal, &run_id).await;
    assert_eq!(step_state(&run, "security_scan"), "claimed", "{run}");
    assert_eq!(step_state(&run, "legal_draft"), "claimed", "{run}");

    writer
        .ok(
            "submit",
            json!({ "token": draft["token"], "requestId": request_id(),
                    "output": { "notice": "Notice v1" }, "summary": "Draft 1" }),
        )
        .await;
    let signoff = person_item(&legal, &run_id, "legal_signoff").await;
    // The sibling branch joins: the counsel's snapshot is now stale.
    let scanned = scanner
        .ok(
            "submit",
            json!({ "token": scan["token"], "requestId": request_id(),
                    "output": { "findings": "None" }, "summary": "Clean scan" }),
        )
        .await;
    assert_eq!(step_state(&scanned, "reviews"), "waiting", "{scanned}");
    let stale = decide_call(&legal, &run_id, &signoff, "approved", json!({})).await;
    assert_eq!(stale["error"]["code"], "stale", "{stale}");

    // Rework inside the branch: only the legal draft comes back.
    let reworked = decide(
        &legal,
        &run_id,
        "legal_signoff",
        "rejected",
        json!({ "note": "Name the data processor" }),
    )
    .await;
    assert_eq!(step_state(&reworked, "legal_draft"), "ready", "{reworked}");
    assert_eq!(step_state(&reworked, "security_scan"), "done", "{reworked}");
    assert_eq!(step_state(&reworked, "reviews"), "waiting", "{reworked}");
    assert_eq!(agent_steps_ready(&scanner, &run_id).await, ["legal_draft"]);
    claim_and_submit(
        &writer,
        &run_id,
        "legal_draft",
        json!({ "output": { "notice": "Notice v2" }, "summary": "Draft 2" }),
    )
    .await;
    let joined = decide(&legal, &run_id, "legal_signoff", "approved", json!({})).await;
    assert_eq!(step_state(&joined, "reviews"), "done", "{joined}");
    assert_eq!(step_state(&joined, "publish"), "ready", "{joined}");
    let steps = &joined["data"]["steps"];
    assert_eq!(
        steps["legal_draft"]["history"].as_array().unwrap().len(),
        1,
        "{joined}"
    );
    assert_eq!(
        steps["legal_draft"]["history"][0]["output"]["notice"],
        "Notice v1"
    );
    assert_eq!(steps["legal_draft"]["by"], "a_writer");
    assert_eq!(steps["security_scan"]["history"], json!([]), "{joined}");
    assert_eq!(steps["security_scan"]["by"], "a_scanner");

    let done = claim_and_submit(
        &scanner,
        &run_id,
        "publish",
        json!({ "output": { "url": "https://launch.test/L-1" }, "summary": "Published" }),
    )
    .await;
    assert_eq!(done["run"]["state"], "ended", "{done}");
    assert_eq!(done["run"]["outcome"], "launched", "{done}");
}
