//! Six fixture walks over MCP, each against any [`Deployment`]: `serve_walks_core` runs them
//! against `agentprocess serve`, `cluster_walks` against a cluster. Every walk acts in the
//! deployment's organization.

use crate::common::{Deployment, Mcp, Who, request_id};
use agentprocess_run_actor::machine::Timestamp;
use agentprocess_testkit::run_view::{step_of, step_state};
use serde_json::{Value, json};

/// A small file to upload as `file` evidence: base64 of "receipt".
const FILE_BASE64: &str = "cmVjZWlwdA==";

const OPS: Who = Who::Operator("ops@acme.test", &["operators"]);

/// `base` with the fields of `extra` added (both JSON objects).
fn with(mut base: Value, extra: Value) -> Value {
    let base_map = base.as_object_mut().expect("an object");
    for (key, value) in extra.as_object().expect("an object") {
        base_map.insert(key.clone(), value.clone());
    }
    base
}

/// `now + seconds` as RFC 3339, in whole seconds, on the deployment's clock (which a shared
/// cluster may have moved on before this walk).
async fn clock_plus(server: &impl Deployment, seconds: u64) -> String {
    let now = server.advance(0).await;
    Timestamp::from_millis(now.as_millis() / 1000 * 1000)
        .plus_seconds(seconds)
        .to_rfc3339()
}

/// `at + seconds` as the server renders it.
fn plus(at: &Value, seconds: u64) -> String {
    Timestamp::parse_rfc3339(at.as_str().expect("a timestamp"))
        .expect("RFC 3339")
        .plus_seconds(seconds)
        .to_rfc3339()
}

async fn start(client: &Mcp, process: &str, inputs: Value) -> Value {
    client
        .ok(
            "start_run",
            json!({ "process": process, "inputs": inputs, "requestId": request_id() }),
        )
        .await
}

fn run_id(view: &Value) -> String {
    view["run"]["id"].as_str().unwrap().to_owned()
}

async fn get_run(client: &Mcp, run_id: &str) -> Value {
    client.ok("get_run", json!({ "runId": run_id })).await
}

/// The run view once `step`'s `steps[]` entry has `field` equal to `value`. The scheduler fires
/// what a clock advance made due right after the advance returns; this waits for that, at most
/// ten seconds.
async fn view_when(client: &Mcp, run_id: &str, step: &str, field: &str, value: Value) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let view = get_run(client, run_id).await;
        if step_of(&view, step)[field] == value {
            return view;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{step}.{field} never became {value}: {}",
            view["steps"]
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The agent's `get_work` item for `step` of `run_id`, if listed.
async fn find_agent_item(agent: &Mcp, run_id: &str, step: &str) -> Option<Value> {
    let work = agent.ok("get_work", json!({ "limit": 100 })).await;
    work["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["runId"] == run_id && item["stepId"] == step)
        .cloned()
}

async fn agent_item(agent: &Mcp, run_id: &str, step: &str) -> Value {
    let Some(item) = find_agent_item(agent, run_id, step).await else {
        let work = agent.ok("get_work", json!({ "limit": 100 })).await;
        let run = get_run(agent, run_id).await;
        panic!(
            "the agent has no item {step} of {run_id}: {work}\n{}",
            run["steps"]
        );
    };
    assert_eq!(
        item["claim"],
        json!({ "tool": "claim", "arguments": { "runId": run_id, "stepId": step, "requestId": "<new UUID>" } })
    );
    item
}

/// Claims `step` of `run_id` the way `get_work` says to.
async fn claim(agent: &Mcp, run_id: &str, step: &str) -> Value {
    agent_item(agent, run_id, step).await;
    agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": step, "requestId": request_id() }),
        )
        .await
}

async fn submit(agent: &Mcp, token: &Value, body: Value) -> Value {
    agent
        .ok(
            "submit",
            with(json!({ "token": token, "requestId": request_id() }), body),
        )
        .await
}

/// The person's open work item for `step` of `run_id`, if listed.
async fn find_work_item(person: &Mcp, run_id: &str, step: &str) -> Option<Value> {
    let work = person.ok("get_work", json!({ "limit": 100 })).await;
    work["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["runId"] == run_id && item["workItem"]["stepId"] == step)
        .cloned()
}

/// The person's `get_work` item (with `workItem`) for `step` of `run_id`.
async fn person_item(person: &Mcp, run_id: &str, step: &str) -> Value {
    find_work_item(person, run_id, step)
        .await
        .unwrap_or_else(|| panic!("no work item {step} of {run_id} for this person"))
}

/// Makes the `decide` call the work item hands out, with `body` added.
async fn decide_call(person: &Mcp, run_id: &str, step: &str, body: Value) -> Value {
    let item = person_item(person, run_id, step).await;
    let arguments = item["workItem"]["decide"]["arguments"].clone();
    assert_eq!(arguments["runId"], run_id);
    person
        .call(
            "decide",
            with(with(arguments, json!({ "requestId": request_id() })), body),
        )
        .await
}

async fn decide(person: &Mcp, run_id: &str, step: &str, body: Value) -> Value {
    let envelope = decide_call(person, run_id, step, body).await;
    assert_eq!(envelope["ok"], true, "decide on {step} refused: {envelope}");
    envelope["data"].clone()
}

async fn upload(client: &Mcp, name: &str) -> String {
    let uploaded = client
        .ok(
            "upload",
            json!({ "fileName": name, "contentType": "application/pdf",
                    "contentBase64": FILE_BASE64, "requestId": request_id() }),
        )
        .await;
    uploaded["id"].as_str().unwrap().to_owned()
}

fn assert_finished(view: &Value, outcome: &str) {
    assert_eq!(view["run"]["state"], "ended", "{view}");
    assert_eq!(view["run"]["outcome"], outcome, "{view}");
    assert_eq!(view["run"]["ended"]["by"], "server", "{view}");
    assert_eq!(view["run"]["ended"]["note"], Value::Null, "{view}");
    assert_eq!(view["workItems"], json!([]), "{view}");
}

/// §3.2 routes with reasons; tools.md `submit`: a route outside `next` is `not_accepted` with
/// every issue and nothing changes; §2.2 `due`: a task past its due date is overdue and stays
/// open; §3.4: a task completed by a person under the same acceptance.
pub async fn support_escalation_routes_by_reason_refused_route_changes_nothing_and_overdue_task_stays_open(
    server: &impl Deployment,
) {
    server.publish_fixture("support-escalation");
    let agent = server.client(&Who::Agent("a_support")).await;
    let lead = server
        .client(&Who::Person("lead@acme.test", &["tier1-lead"]))
        .await;
    let oncall = server
        .client(&Who::Person("oncall@acme.test", &["engineering-oncall"]))
        .await;

    let started = start(&agent, "support-escalation", json!({ "ticketId": "T-100" })).await;
    let run = run_id(&started);
    assert_eq!(started["run"]["state"], "active");
    assert_eq!(started["run"]["startedBy"], "a_support");
    assert_eq!(step_state(&started, "diagnose"), "ready");

    let claimed = claim(&agent, &run, "diagnose").await;
    let routes: Vec<&Value> = claimed["step"]["next"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["to"])
        .collect();
    assert_eq!(routes, [&json!("confirm"), &json!("tier1_handoff")]);
    assert!(
        find_agent_item(&agent, &run, "diagnose").await.is_none(),
        "a claimed step is not listed"
    );

    // A route outside the step's list and no reason: refused with both issues, nothing changed.
    let before = get_run(&agent, &run).await;
    let refused = agent
        .refused(
            "submit",
            json!({
                "token": claimed["token"], "requestId": request_id(),
                "output": { "diagnosis": "Login loop on SSO", "attemptedFixes": "Cleared sessions" },
                "evidence": [{ "kind": "link", "ref": "https://support.test/T-100" }],
                "summary": "Reproduced the loop; runbook fix did not help.", "next": "engineering",
            }),
            "not_accepted",
        )
        .await;
    assert_eq!(
        refused["issues"],
        json!([
            "next: engineering is not one of confirm, tier1_handoff",
            "reason: required"
        ])
    );
    assert_eq!(get_run(&agent, &run).await, before);

    let routed = submit(
        &agent,
        &claimed["token"],
        json!({
            "output": { "diagnosis": "Login loop on SSO", "attemptedFixes": "Cleared sessions" },
            "evidence": [{ "kind": "link", "ref": "https://support.test/T-100" }],
            "summary": "Reproduced the loop; runbook fix did not help.",
            "next": "tier1_handoff", "reason": "The runbook fix did not resolve the loop",
        }),
    )
    .await;
    assert_eq!(routed["run"]["state"], "waiting");
    let diagnose = &routed["data"]["steps"]["diagnose"];
    assert_eq!(diagnose["next"], "tier1_handoff");
    assert_eq!(diagnose["reason"], "The runbook fix did not resolve the loop");
    assert_eq!(diagnose["by"], "a_support");
    assert_eq!(step_state(&routed, "diagnose"), "done");
    assert_eq!(step_state(&routed, "tier1_handoff"), "waiting");
    assert_eq!(step_state(&routed, "confirm"), Value::Null);

    // The task is due 4h after it became ready; past that it is overdue and still open.
    let handoff = step_of(&routed, "tier1_handoff").clone();
    assert_eq!(handoff["overdue"], false);
    let item = person_item(&lead, &run, "tier1_handoff").await;
    let work_item = &item["workItem"];
    assert_eq!(work_item["kind"], "task");
    assert_eq!(work_item["assignedTo"], json!({ "group": "tier1-lead" }));
    assert_eq!(work_item["decide"]["decisions"], json!(["completed", "failed"]));
    assert_eq!(work_item["due"], handoff["due"]);
    assert_eq!(handoff["due"].as_str().unwrap(), plus(&diagnose["at"], 4 * 3600));
    server.advance(3 * 3600).await;
    assert_eq!(
        step_of(&get_run(&lead, &run).await, "tier1_handoff")["overdue"],
        false
    );
    server.advance(3600 + 60).await;
    let overdue = view_when(&lead, &run, "tier1_handoff", "overdue", json!(true)).await;
    assert_eq!(step_state(&overdue, "tier1_handoff"), "waiting");
    person_item(&lead, &run, "tier1_handoff").await;

    // A value outside `one_of` is refused like an agent's submission would be.
    let refused = decide_call(
        &lead,
        &run,
        "tier1_handoff",
        json!({ "decision": "completed",
                "output": { "reproduction": "SSO login", "impact": "All EU users", "severity": "urgent" },
                "evidence": [{ "kind": "link", "ref": "https://support.test/T-100#repro" }] }),
    )
    .await;
    assert_eq!(refused["error"]["code"], "not_accepted", "{refused}");
    assert!(
        refused["error"]["issues"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i.as_str().unwrap().starts_with("output.severity")),
        "{refused}"
    );
    let handed = decide(
        &lead,
        &run,
        "tier1_handoff",
        json!({ "decision": "completed",
                "output": { "reproduction": "SSO login", "impact": "All EU users", "severity": "high" },
                "evidence": [{ "kind": "link", "ref": "https://support.test/T-100#repro" }] }),
    )
    .await;
    assert_eq!(handed["data"]["steps"]["tier1_handoff"]["by"], "lead@acme.test");
    assert_eq!(step_state(&handed, "engineering"), "waiting");
    assert!(find_work_item(&lead, &run, "tier1_handoff").await.is_none());

    decide(
        &oncall,
        &run,
        "engineering",
        json!({ "decision": "completed",
                "output": { "resolution": "Deployed fix 2.4.1", "issue": "ENG-77" },
                "evidence": [{ "kind": "link", "ref": "https://eng.test/ENG-77" }] }),
    )
    .await;
    let confirmed = decide(&lead, &run, "confirm", json!({ "decision": "approved" })).await;
    assert_eq!(confirmed["data"]["steps"]["confirm"]["decision"], "approved");
    assert_eq!(step_state(&confirmed, "close_ticket"), "ready");

    let claimed = claim(&agent, &run, "close_ticket").await;
    let finished = submit(
        &agent,
        &claimed["token"],
        json!({ "output": { "ticket": "T-100" },
                "evidence": [{ "kind": "link", "ref": "https://support.test/T-100" }],
                "summary": "Closed the ticket with the ENG-77 resolution." }),
    )
    .await;
    assert_finished(&finished, "resolved");
    assert_eq!(step_state(&finished, "done"), "done");
    for client in [agent, lead, oncall] {
        client.close().await;
    }
}

/// §3.1 and §3.4: a rejected approval returns the run to `on_reject`; every step completed after
/// the returned-to step moves into `history`, the rejecting approval keeps its note current, and
/// both reviews are repeated before the contract is signed.
pub async fn contract_review_rejection_rewinds_both_reviews_into_history_then_signs(
    server: &impl Deployment,
) {
    server.publish_fixture("contract-review");
    let owner = server.client(&Who::Person("owner@acme.test", &["sales"])).await;
    let legal = server
        .client(&Who::Person("legal@acme.test", &["legal-reviewer"]))
        .await;
    let finance = server
        .client(&Who::Person("finance@acme.test", &["finance-reviewer"]))
        .await;
    let signer = server
        .client(&Who::Person("signer@acme.test", &["authorized-signatory"]))
        .await;

    let started = start(
        &owner,
        "contract-review",
        json!({ "contractId": "K-9", "document": "DMS-9", "owner": "owner@acme.test" }),
    )
    .await;
    let run = run_id(&started);
    let first = person_item(&owner, &run, "prepare").await;
    assert_eq!(
        first["workItem"]["assignedTo"],
        json!({ "person": "owner@acme.test" })
    );
    assert_eq!(first["workItem"]["handoff"], Value::Null);

    let revision_1 = upload(&owner, "k9-rev1.pdf").await;
    let prepared = decide(
        &owner,
        &run,
        "prepare",
        json!({ "decision": "completed",
                "output": { "revision": "DMS-9@1", "summary": "EUR, liability cap 1x fees" },
                "evidence": [{ "kind": "file", "ref": revision_1 }] }),
    )
    .await;
    let evidence = &prepared["data"]["steps"]["prepare"]["evidence"][0];
    assert_eq!(evidence["ref"], revision_1.as_str());
    assert!(evidence["sha256"].is_string(), "{evidence}");

    decide(&legal, &run, "legal_review", json!({ "decision": "approved" })).await;
    // Rejecting needs a note.
    let refused = decide_call(
        &finance,
        &run,
        "finance_review",
        json!({ "decision": "rejected" }),
    )
    .await;
    assert_eq!(refused["ok"], false);
    let rejected = decide(
        &finance,
        &run,
        "finance_review",
        json!({ "decision": "rejected", "note": "Payment terms must be net 30" }),
    )
    .await;
    assert_eq!(rejected["run"]["state"], "waiting");
    assert_eq!(step_state(&rejected, "prepare"), "waiting");
    assert_eq!(step_state(&rejected, "legal_review"), Value::Null);
    let steps = &rejected["data"]["steps"];
    // The returned-to step keeps its record until it completes again; the steps after it move
    // into history.
    assert_eq!(steps["prepare"]["output"]["revision"], "DMS-9@1");
    assert_eq!(steps["prepare"]["history"], json!([]));
    assert!(steps["legal_review"].get("decision").is_none(), "{steps}");
    assert_eq!(steps["legal_review"]["history"][0]["decision"], "approved");
    assert_eq!(steps["legal_review"]["history"][0]["by"], "legal@acme.test");
    assert_eq!(steps["finance_review"]["decision"], "rejected");
    assert_eq!(steps["finance_review"]["note"], "Payment terms must be net 30");
    assert_eq!(steps["finance_review"]["by"], "finance@acme.test");
    assert_eq!(steps["finance_review"]["history"], json!([]));

    // The owner gets the preparation again: a new work item, the note in run data.
    let again = person_item(&owner, &run, "prepare").await;
    assert_ne!(again["workItem"]["id"], first["workItem"]["id"]);
    assert_eq!(again["workItem"]["handoff"], Value::Null);
    assert!(find_work_item(&legal, &run, "legal_review").await.is_none());

    let revision_2 = upload(&owner, "k9-rev2.pdf").await;
    decide(
        &owner,
        &run,
        "prepare",
        json!({ "decision": "completed",
                "output": { "revision": "DMS-9@2", "summary": "EUR, net 30, liability cap 1x fees" },
                "evidence": [{ "kind": "file", "ref": revision_2 }] }),
    )
    .await;
    decide(&legal, &run, "legal_review", json!({ "decision": "approved" })).await;
    decide(
        &finance,
        &run,
        "finance_review",
        json!({ "decision": "approved" }),
    )
    .await;
    let executed = upload(&signer, "k9-signed.pdf").await;
    let signed = decide(
        &signer,
        &run,
        "sign",
        json!({ "decision": "completed",
                "output": { "signedRevision": "DMS-9@2", "signedAt": "2026-12-01T10:00:00Z" },
                "evidence": [{ "kind": "file", "ref": executed }] }),
    )
    .await;
    assert_finished(&signed, "signed");
    let steps = &signed["data"]["steps"];
    assert_eq!(steps["prepare"]["output"]["revision"], "DMS-9@2");
    assert_eq!(steps["prepare"]["history"][0]["output"]["revision"], "DMS-9@1");
    assert_eq!(steps["prepare"]["history"][0]["by"], "owner@acme.test");
    assert_eq!(steps["legal_review"]["decision"], "approved");
    assert_eq!(steps["legal_review"]["history"].as_array().unwrap().len(), 1);
    assert_eq!(steps["finance_review"]["decision"], "approved");
    assert!(steps["finance_review"].get("note").is_none(), "{steps}");
    assert_eq!(steps["finance_review"]["history"][0]["decision"], "rejected");
    assert_eq!(
        steps["finance_review"]["history"][0]["note"],
        "Payment terms must be net 30"
    );
    for client in [owner, legal, finance, signer] {
        client.close().await;
    }
}

/// §4: every write is idempotent on `requestId`; a lost response of `start_run`, `claim`,
/// `submit` and `decide` is retried with the same id and returns the original result, the same
/// id with other arguments is a `conflict`. tools.md `start_run`: a process with an `initiator`
/// step cannot be started by an agent. tools.md `list_runs` filters, and `get_run` of a finished
/// run.
pub async fn expense_reimbursement_replays_lost_responses_and_lists_runs_by_filter(server: &impl Deployment) {
    server.publish_fixture("expense-reimbursement");
    let employee = server.client(&Who::Person("emp@acme.test", &["staff"])).await;
    let manager = server.client(&Who::Person("mgr@acme.test", &["staff"])).await;
    let payables = server
        .client(&Who::Person("ap@acme.test", &["accounts-payable"]))
        .await;
    let agent = server.client(&Who::Agent("a_expenses")).await;

    let refused = agent
        .refused(
            "start_run",
            json!({ "process": "expense-reimbursement", "requestId": request_id(),
                    "inputs": { "claimId": "C-0", "manager": "mgr@acme.test" } }),
            "invalid",
        )
        .await;
    assert!(refused["message"].as_str().is_some());

    // start_run: the same request twice is one run; other arguments under that id conflict.
    let start_id = request_id();
    let start_args = json!({ "process": "expense-reimbursement", "requestId": start_id,
                             "inputs": { "claimId": "C-1", "manager": "mgr@acme.test" } });
    let started = employee.ok("start_run", start_args.clone()).await;
    let replayed = employee.ok("start_run", start_args).await;
    assert_eq!(replayed, started);
    let run = run_id(&started);
    employee
        .refused(
            "start_run",
            json!({ "process": "expense-reimbursement", "requestId": start_id,
                    "inputs": { "claimId": "C-2", "manager": "mgr@acme.test" } }),
            "conflict",
        )
        .await;
    let other = start(
        &employee,
        "expense-reimbursement",
        json!({ "claimId": "C-2", "manager": "mgr@acme.test" }),
    )
    .await;
    let other_run = run_id(&other);
    assert_ne!(other_run, run);

    let receipt = upload(&employee, "taxi.pdf").await;
    decide(
        &employee,
        &run,
        "receipts",
        json!({ "decision": "completed",
                "output": { "purpose": "Client visit", "totalUsd": 42.5,
                            "lines": [{ "merchant": "Taxi Co", "date": "2026-11-20", "amountUsd": 42.5 }] },
                "evidence": [{ "kind": "file", "ref": receipt }] }),
    )
    .await;

    // claim: the replay returns the same token; the id reused for another step conflicts.
    let claim_args = json!({ "runId": run, "stepId": "check", "requestId": request_id() });
    let claimed = agent.ok("claim", claim_args.clone()).await;
    assert_eq!(agent.ok("claim", claim_args.clone()).await, claimed);
    agent
        .refused(
            "claim",
            with(claim_args, json!({ "stepId": "receipts" })),
            "conflict",
        )
        .await;

    // submit: the replay returns the original run view; other arguments conflict.
    let submit_args = json!({
        "token": claimed["token"], "requestId": request_id(),
        "output": { "checkedTotalUsd": 42.5, "checks": "One receipt, one line, within policy" },
        "evidence": [{ "kind": "link", "ref": "https://expenses.test/C-1/checks" }],
        "summary": "Matched the taxi receipt to its line; no duplicates found.",
    });
    let submitted = agent.ok("submit", submit_args.clone()).await;
    assert_eq!(step_state(&submitted, "manager_review"), "waiting");
    assert_eq!(agent.ok("submit", submit_args.clone()).await, submitted);
    let conflict = agent
        .refused(
            "submit",
            with(submit_args, json!({ "summary": "Something else" })),
            "conflict",
        )
        .await;
    assert!(conflict["message"].as_str().is_some());

    // decide: the same.
    let item = person_item(&manager, &run, "manager_review").await;
    let decide_args = with(
        item["workItem"]["decide"]["arguments"].clone(),
        json!({ "requestId": request_id(), "decision": "approved" }),
    );
    let approved = manager.ok("decide", decide_args.clone()).await;
    assert_eq!(approved["data"]["steps"]["manager_review"]["by"], "mgr@acme.test");
    assert_eq!(manager.ok("decide", decide_args.clone()).await, approved);
    manager
        .refused(
            "decide",
            with(decide_args, json!({ "decision": "rejected", "note": "No" })),
            "conflict",
        )
        .await;

    let paid = decide(
        &payables,
        &run,
        "reimburse",
        json!({ "decision": "completed",
                "output": { "paymentReference": "PAY-1", "paidUsd": 42.5 },
                "evidence": [{ "kind": "link", "ref": "https://erp.test/pay/1" }] }),
    )
    .await;
    assert_finished(&paid, "reimbursed");

    // get_run of the finished run: everything done, the record complete, nothing open.
    let finished = get_run(&payables, &run).await;
    assert_eq!(finished["run"], paid["run"]);
    assert_eq!(finished["data"], paid["data"]);
    for step in ["receipts", "check", "manager_review", "reimburse"] {
        assert_eq!(step_state(&finished, step), "done", "{step}");
    }
    assert_eq!(finished["data"]["steps"]["check"]["by"], "a_expenses");
    assert_eq!(finished["data"]["steps"]["reimburse"]["output"]["paidUsd"], 42.5);

    // list_runs: by process, state and inputs.
    let ids = |listed: &Value| -> Vec<String> {
        let mut ids: Vec<String> = listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    let mut both = vec![run.clone(), other_run.clone()];
    both.sort();
    let all = agent
        .ok("list_runs", json!({ "process": "expense-reimbursement" }))
        .await;
    assert_eq!(ids(&all), both);
    let ended = agent
        .ok(
            "list_runs",
            json!({ "process": "expense-reimbursement", "state": "ended" }),
        )
        .await;
    assert_eq!(ids(&ended), [run.as_str()]);
    assert_eq!(ended["items"][0]["outcome"], "reimbursed");
    assert_eq!(
        ended["items"][0]["inputs"],
        json!({ "claimId": "C-1", "manager": "mgr@acme.test" })
    );
    let waiting = agent.ok("list_runs", json!({ "state": "waiting" })).await;
    assert_eq!(ids(&waiting), [other_run.as_str()]);
    let by_input = agent
        .ok("list_runs", json!({ "inputs": { "claimId": "C-2" } }))
        .await;
    assert_eq!(ids(&by_input), [other_run.as_str()]);
    let none = agent
        .ok(
            "list_runs",
            json!({ "inputs": { "claimId": "C-2", "manager": "someone@acme.test" } }),
        )
        .await;
    assert_eq!(none["items"], json!([]));
    let other_process = agent
        .ok("list_runs", json!({ "process": "contract-review" }))
        .await;
    assert_eq!(other_process["items"], json!([]));
    for client in [employee, manager, payables, agent] {
        client.close().await;
    }
}

/// §3.3 handoff: a claim renewed with `progress` whose lease then expires is ready again at
/// once with `handoff.progress`, and its token is `stale`; §3.3 test mode: every run view,
/// work item, `get_work` item and claim of a test run says `mode: "test"`; §3.1 a rejection
/// rewinds the later steps into `history` and the reclaimed agent step starts a fresh attempt.
pub async fn employee_onboarding_in_test_mode_hands_progress_over_an_expired_lease_and_reworks_a_rejection(
    server: &impl Deployment,
) {
    server.publish_fixture("employee-onboarding");
    let hr = server
        .client(&Who::Person("hr@acme.test", &["hr-operations"]))
        .await;
    let manager = server.client(&Who::Person("mgr@acme.test", &["staff"])).await;
    let it = server
        .client(&Who::Person("it@acme.test", &["it-operations"]))
        .await;
    let agent = server.client(&Who::Agent("a_onboard")).await;
    let other_agent = server.client(&Who::Agent("a_onboard_2")).await;
    let lease = agent.ok("describe", json!({})).await["leaseSeconds"]
        .as_u64()
        .unwrap();

    let inputs = json!({ "employeeId": "E-7", "employeeName": "Ada", "startDate": "2027-01-04",
                         "hiringManager": "mgr@acme.test" });
    let live = start(&hr, "employee-onboarding", inputs.clone()).await;
    assert_eq!(live["run"]["mode"], "live");
    let test = hr
        .ok(
            "start_run",
            json!({ "process": "employee-onboarding", "inputs": inputs, "mode": "test",
                    "requestId": request_id() }),
        )
        .await;
    let run = run_id(&test);
    assert_eq!(test["run"]["mode"], "test");
    assert_eq!(test["workItems"][0]["mode"], "test", "{test}");
    assert_ne!(live["workItems"][0]["mode"], "test", "{live}");
    let hr_item = person_item(&hr, &run, "hr_setup").await;
    assert_eq!(hr_item["mode"], "test");
    assert_eq!(hr_item["workItem"]["mode"], "test");
    assert_eq!(person_item(&hr, &run_id(&live), "hr_setup").await["mode"], "live");

    decide(
        &hr,
        &run,
        "hr_setup",
        json!({ "decision": "completed",
                "output": { "hrisRecord": "HR-7", "location": "Berlin", "jobTitle": "Engineer" },
                "evidence": [{ "kind": "link", "ref": "https://hris.test/HR-7" }] }),
    )
    .await;
    let access_plan = json!({ "decision": "completed",
        "output": { "accessRequests": ["github", "jira"], "equipment": "Laptop", "buddy": "bo@acme.test" } });
    decide(&manager, &run, "access_plan", access_plan.clone()).await;
    let it_setup = json!({ "decision": "completed",
        "output": { "assetTag": "LT-1", "accounts": ["ada@github"], "handoverPlan": "Desk 4, day one" },
        "evidence": [{ "kind": "link", "ref": "https://it.test/TICKET-1" }] });
    decide(&it, &run, "it_setup", it_setup.clone()).await;

    // The welcome step: claimed, renewed with progress, then the lease runs out.
    let item = agent_item(&agent, &run, "welcome").await;
    assert_eq!(item["mode"], "test");
    assert_eq!(item["handoff"], Value::Null);
    let first_claim = json!({ "runId": run, "stepId": "welcome", "requestId": request_id() });
    let claimed = agent.ok("claim", first_claim.clone()).await;
    assert_eq!(claimed["mode"], "test");
    assert_eq!(claimed["handoff"], Value::Null);
    let renewed = agent
        .ok(
            "renew",
            json!({ "token": claimed["token"], "progress": "Checklist drafted; manager mail not sent",
                    "requestId": request_id() }),
        )
        .await;
    assert_ne!(renewed["token"], claimed["token"]);
    let checklist = json!({ "output": { "checklist": "Day 1: laptop, accounts, buddy lunch" },
                            "evidence": [{ "kind": "link", "ref": "https://docs.test/checklist/E-7" }],
                            "summary": "Created the checklist and mailed the manager." });
    agent
        .refused(
            "submit",
            with(
                json!({ "token": claimed["token"], "requestId": request_id() }),
                checklist.clone(),
            ),
            "stale",
        )
        .await;
    assert!(find_agent_item(&other_agent, &run, "welcome").await.is_none());

    server.advance(lease + 1).await;
    view_when(&agent, &run, "welcome", "state", json!("ready")).await;
    let ready = agent_item(&other_agent, &run, "welcome").await;
    assert_eq!(
        ready["handoff"],
        json!({ "progress": "Checklist drafted; manager mail not sent" })
    );
    agent
        .refused(
            "submit",
            with(
                json!({ "token": renewed["token"], "requestId": request_id() }),
                checklist.clone(),
            ),
            "stale",
        )
        .await;
    agent
        .refused(
            "renew",
            json!({ "token": renewed["token"], "requestId": request_id() }),
            "stale",
        )
        .await;
    // §3.3: a lost claim response retried after the lease ended returns the original result.
    assert_eq!(agent.ok("claim", first_claim).await, claimed);
    let reclaimed = claim(&other_agent, &run, "welcome").await;
    assert_eq!(
        reclaimed["handoff"],
        json!({ "progress": "Checklist drafted; manager mail not sent" })
    );
    let welcomed = submit(&other_agent, &reclaimed["token"], checklist.clone()).await;
    assert_eq!(welcomed["data"]["steps"]["welcome"]["by"], "a_onboard_2");
    assert_eq!(welcomed["workItems"][0]["mode"], "test");

    // The manager rejects: access plan, IT setup and checklist are redone.
    let rejected = decide(
        &manager,
        &run,
        "confirm_ready",
        json!({ "decision": "rejected", "note": "Buddy is on leave; use Cy" }),
    )
    .await;
    assert_eq!(step_state(&rejected, "access_plan"), "waiting");
    for step in ["it_setup", "welcome", "confirm_ready"] {
        assert_eq!(step_state(&rejected, step), Value::Null, "{step}");
    }
    let steps = &rejected["data"]["steps"];
    assert_eq!(steps["hr_setup"]["history"], json!([]));
    assert_eq!(steps["hr_setup"]["by"], "hr@acme.test");
    assert_eq!(steps["access_plan"]["output"]["buddy"], "bo@acme.test");
    assert_eq!(steps["access_plan"]["history"], json!([]));
    for step in ["it_setup", "welcome"] {
        assert!(steps[step].get("output").is_none(), "{step}: {steps}");
        assert_eq!(steps[step]["history"].as_array().unwrap().len(), 1, "{step}");
    }
    assert_eq!(steps["welcome"]["history"][0]["by"], "a_onboard_2");
    assert_eq!(steps["confirm_ready"]["note"], "Buddy is on leave; use Cy");

    decide(&manager, &run, "access_plan", access_plan).await;
    decide(&it, &run, "it_setup", it_setup).await;
    let item = agent_item(&agent, &run, "welcome").await;
    assert_eq!(item["handoff"], Value::Null, "a rework is a fresh attempt");
    let claimed = claim(&agent, &run, "welcome").await;
    assert_eq!(claimed["mode"], "test");
    assert_eq!(claimed["handoff"], Value::Null);
    assert_eq!(
        claimed["data"]["steps"]["confirm_ready"]["note"],
        "Buddy is on leave; use Cy"
    );
    assert_eq!(
        claimed["data"]["steps"]["welcome"]["history"][0]["output"]["checklist"],
        "Day 1: laptop, accounts, buddy lunch"
    );
    submit(&agent, &claimed["token"], checklist).await;
    let ready = decide(&manager, &run, "confirm_ready", json!({ "decision": "approved" })).await;
    assert_finished(&ready, "ready");
    assert_eq!(ready["run"]["mode"], "test");
    assert_eq!(ready["data"]["steps"]["welcome"]["by"], "a_onboard");
    assert_eq!(
        ready["data"]["steps"]["welcome"]["history"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    for client in [hr, manager, it, agent, other_agent] {
        client.close().await;
    }
}

/// §3.4: an escalated agent step `returned` by a person is ready again with `handoff.returned`;
/// §3.1 an editor's rejection sends the draft back to the agent with the note in run data;
/// §2.2 `wait_until` holds the run until `publishAt`.
pub async fn blog_publication_reworks_a_rejected_draft_waits_for_publish_time_and_gets_an_escalation_returned(
    server: &impl Deployment,
) {
    server.publish_fixture("blog-publication");
    let agent = server.client(&Who::Agent("a_writer")).await;
    let editor = server.client(&Who::Person("ed@acme.test", &["editor"])).await;
    let ops = server.client(&OPS).await;

    let publish_at = clock_plus(server, 2 * 86_400).await;
    let started = start(
        &agent,
        "blog-publication",
        json!({ "brief": "Launch post", "slug": "launch", "publishAt": publish_at }),
    )
    .await;
    let run = run_id(&started);

    let claimed = claim(&agent, &run, "draft").await;
    let draft = |revision: &str| {
        json!({ "output": { "revision": revision, "title": "We launched", "summary": "What is new" },
                "evidence": [{ "kind": "link", "ref": format!("https://cms.test/preview/{revision}") }],
                "summary": format!("Drafted {revision} from the brief.") })
    };
    submit(&agent, &claimed["token"], draft("rev-1")).await;
    let item = person_item(&editor, &run, "editor_review").await;
    assert_eq!(
        item["workItem"]["decide"]["decisions"],
        json!(["approved", "rejected", "failed"])
    );
    let rejected = decide(
        &editor,
        &run,
        "editor_review",
        json!({ "decision": "rejected", "note": "Cite the benchmark source" }),
    )
    .await;
    assert_eq!(rejected["run"]["state"], "active");
    assert_eq!(step_state(&rejected, "draft"), "ready");
    assert_eq!(step_state(&rejected, "editor_review"), Value::Null);

    let item = agent_item(&agent, &run, "draft").await;
    assert_eq!(item["handoff"], Value::Null);
    let reclaimed = claim(&agent, &run, "draft").await;
    let steps = &reclaimed["data"]["steps"];
    assert_eq!(steps["editor_review"]["note"], "Cite the benchmark source");
    assert_eq!(steps["editor_review"]["decision"], "rejected");
    assert_eq!(steps["draft"]["output"]["revision"], "rev-1");
    assert_eq!(steps["draft"]["history"], json!([]));
    let redrafted = submit(&agent, &reclaimed["token"], draft("rev-2")).await;
    let draft_record = &redrafted["data"]["steps"]["draft"];
    assert_eq!(draft_record["output"]["revision"], "rev-2");
    assert_eq!(draft_record["history"][0]["output"]["revision"], "rev-1");
    assert_eq!(draft_record["history"][0]["by"], "a_writer");
    // The rejection stays current until the approval completes again.
    assert_eq!(
        redrafted["data"]["steps"]["editor_review"]["decision"],
        "rejected"
    );
    let approved = decide(&editor, &run, "editor_review", json!({ "decision": "approved" })).await;
    let review = &approved["data"]["steps"]["editor_review"];
    assert_eq!(review["decision"], "approved");
    assert_eq!(review["history"][0]["decision"], "rejected");
    assert_eq!(review["history"][0]["note"], "Cite the benchmark source");
    assert_eq!(approved["run"]["state"], "waiting");
    assert_eq!(step_state(&approved, "publication_time"), "waiting");
    assert!(find_agent_item(&agent, &run, "publish").await.is_none());

    server.advance(2 * 86_400 + 60).await;
    let published_time = view_when(&agent, &run, "publication_time", "state", json!("done")).await;
    assert_eq!(step_state(&published_time, "publish"), "ready");
    assert_eq!(
        published_time["data"]["steps"]["publication_time"]["by"],
        "server"
    );

    // The agent escalates; an operator returns it with a note.
    let claimed = claim(&agent, &run, "publish").await;
    let escalated = agent
        .ok(
            "escalate",
            json!({ "token": claimed["token"], "note": "CMS shows rev-3, not the approved rev-2",
                    "requestId": request_id() }),
        )
        .await;
    assert_eq!(step_state(&escalated, "publish"), "waiting");
    let work_item = &escalated["workItems"][0];
    assert_eq!(work_item["stepId"], "publish");
    assert_eq!(work_item["assignedTo"], json!({ "group": "operators" }));
    assert_eq!(
        work_item["escalation"]["note"],
        "CMS shows rev-3, not the approved rev-2"
    );
    assert_eq!(work_item["escalation"]["by"], "a_writer");
    assert_eq!(
        work_item["decide"]["decisions"],
        json!(["returned", "completed", "failed"])
    );
    agent
        .refused(
            "submit",
            with(
                json!({ "token": claimed["token"], "requestId": request_id() }),
                json!({ "output": { "url": "https://blog.test/launch", "publishedRevision": "rev-2" },
                        "evidence": [{ "kind": "link", "ref": "https://blog.test/launch" }],
                        "summary": "Published." }),
            ),
            "stale",
        )
        .await;
    assert!(find_agent_item(&agent, &run, "publish").await.is_none());
    let returned = decide(
        &ops,
        &run,
        "publish",
        json!({ "decision": "returned", "note": "rev-3 is a cache artifact; publish rev-2" }),
    )
    .await;
    assert_eq!(step_state(&returned, "publish"), "ready");
    assert_eq!(returned["workItems"], json!([]));
    let item = agent_item(&agent, &run, "publish").await;
    let handoff_returned = &item["handoff"]["returned"];
    assert_eq!(
        handoff_returned["note"],
        "rev-3 is a cache artifact; publish rev-2"
    );
    assert_eq!(handoff_returned["by"], "ops@acme.test");
    let claimed = claim(&agent, &run, "publish").await;
    assert_eq!(claimed["handoff"], item["handoff"]);
    let finished = submit(
        &agent,
        &claimed["token"],
        json!({ "output": { "url": "https://blog.test/launch", "publishedRevision": "rev-2" },
                "evidence": [{ "kind": "link", "ref": "https://blog.test/launch" }],
                "summary": "Published rev-2 and checked the public URL." }),
    )
    .await;
    assert_finished(&finished, "published");
    assert_eq!(finished["data"]["steps"]["publish"]["by"], "a_writer");
    assert_eq!(finished["data"]["steps"]["draft"]["output"]["revision"], "rev-2");
    // The run's history keeps the escalation's note and the return's, which the run view no
    // longer shows: served by whichever gateway is asked, from the run's actor.
    let base = server.mcp_url().trim_end_matches("/mcp").to_owned();
    let history = reqwest::Client::new()
        .get(format!("{base}/admin/v1/runs/{run}/history"))
        .bearer_auth(server.token(&OPS))
        .send()
        .await
        .unwrap();
    let (status, history) = crate::common::status_and_json(history).await;
    assert_eq!(status, 200, "{history}");
    let noted: Vec<(&str, &str, &str)> = history["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["step"] == "publish" && e.get("note").is_some())
        .map(|e| {
            let field = |name: &str| e[name].as_str().unwrap();
            (field("type"), field("by"), field("note"))
        })
        .collect();
    assert_eq!(
        noted,
        [
            ("escalated", "a_writer", "CMS shows rev-3, not the approved rev-2"),
            (
                "returned",
                "ops@acme.test",
                "rev-3 is a cache artifact; publish rev-2"
            ),
        ]
    );
    for client in [agent, editor, ops] {
        client.close().await;
    }
}

/// §3.4: an escalated agent step `completed` by a person with the output, and one `failed`,
/// which ends the run `failed`; §3.5: an operator cancels a run (a non-operator cannot), its
/// open work disappears and every later write is `conflict` with `run_ended`; §3.6 an event
/// satisfies a `wait_for`.
pub async fn customer_offboarding_escalations_complete_and_fail_and_an_operator_cancels(
    server: &impl Deployment,
) {
    server.publish_fixture("customer-offboarding");
    let owner = server
        .client(&Who::Person("owner@acme.test", &["account-owner"]))
        .await;
    let steward = server
        .client(&Who::Person("steward@acme.test", &["data-steward"]))
        .await;
    let agent = server.client(&Who::Agent("a_offboard")).await;
    let ops = server.client(&OPS).await;

    // The happy path, with the service cancellation escalated and completed by an operator.
    let started = start(
        &owner,
        "customer-offboarding",
        json!({ "customerId": "CU-1", "effectiveAt": clock_plus(server, 86_400).await }),
    )
    .await;
    let run = run_id(&started);
    let authorized = decide(&owner, &run, "authorize", json!({ "decision": "approved" })).await;
    assert_eq!(step_state(&authorized, "effective_time"), "waiting");
    server.advance(86_400 + 60).await;
    view_when(&agent, &run, "cancel_services", "state", json!("ready")).await;
    let claimed = claim(&agent, &run, "cancel_services").await;
    let escalated = agent
        .ok(
            "escalate",
            json!({ "token": claimed["token"], "note": "Export handover not confirmed",
                    "requestId": request_id() }),
        )
        .await;
    assert_eq!(escalated["run"]["state"], "waiting");
    let completed = decide(
        &ops,
        &run,
        "cancel_services",
        json!({ "decision": "completed", "output": { "cancellationIds": ["CX-1", "CX-2"] },
                "evidence": [{ "kind": "link", "ref": "https://billing.test/CU-1" }],
                "summary": "Confirmed the export by phone and cancelled both services." }),
    )
    .await;
    let cancel_services = &completed["data"]["steps"]["cancel_services"];
    assert_eq!(cancel_services["by"], "ops@acme.test");
    assert_eq!(
        cancel_services["output"]["cancellationIds"],
        json!(["CX-1", "CX-2"])
    );
    assert_eq!(step_state(&completed, "final_invoice"), "ready");

    let claimed = claim(&agent, &run, "final_invoice").await;
    let invoiced = submit(
        &agent,
        &claimed["token"],
        json!({ "output": { "invoiceId": "INV-9", "balance": 120.25, "currency": "EUR" },
                "evidence": [{ "kind": "link", "ref": "https://billing.test/INV-9" }],
                "summary": "Final invoice created with an open balance.",
                "next": "settlement_event", "reason": "120.25 EUR is still open" }),
    )
    .await;
    assert_eq!(step_state(&invoiced, "settlement_event"), "waiting");
    let consumed = agent
        .ok(
            "send_event",
            json!({ "runId": run, "name": "final-invoice-settled", "data": { "payment": "PAY-9" },
                    "requestId": request_id() }),
        )
        .await;
    assert_eq!(consumed, json!({ "consumedBy": "settlement_event" }));
    let claimed = claim(&agent, &run, "verify_settlement").await;
    assert_eq!(
        claimed["data"]["steps"]["settlement_event"]["output"],
        json!({ "payment": "PAY-9" })
    );
    assert_eq!(claimed["data"]["steps"]["settlement_event"]["by"], "a_offboard");
    submit(
        &agent,
        &claimed["token"],
        json!({ "output": { "ledgerSummary": "INV-9 settled by PAY-9" },
                "evidence": [{ "kind": "link", "ref": "https://ledger.test/INV-9" }],
                "summary": "The ledger shows INV-9 settled.",
                "next": "deletion_clearance", "reason": "Ledger shows a zero balance" }),
    )
    .await;
    decide(
        &steward,
        &run,
        "deletion_clearance",
        json!({ "decision": "completed",
                "output": { "deletionScope": "All CRM and billing data", "retentionExceptions": "Invoices, 10y" },
                "evidence": [{ "kind": "link", "ref": "https://inventory.test/CU-1" }] }),
    )
    .await;
    let claimed = claim(&agent, &run, "delete_data").await;
    submit(
        &agent,
        &claimed["token"],
        json!({ "output": { "deletionReceipts": ["crm:DEL-1", "billing:DEL-2"] },
                "evidence": [{ "kind": "link", "ref": "https://inventory.test/CU-1/jobs" }],
                "summary": "Deleted CRM and billing data in scope." }),
    )
    .await;
    let offboarded = decide(
        &steward,
        &run,
        "verify_deletion",
        json!({ "decision": "completed", "output": { "completionStatement": "All data in scope deleted" },
                "evidence": [{ "kind": "link", "ref": "https://inventory.test/CU-1/done" }] }),
    )
    .await;
    assert_finished(&offboarded, "offboarded");
    assert_eq!(step_state(&offboarded, "finance_followup"), Value::Null);

    // An escalation decided `failed`: the run ends failed with the note.
    let started = start(
        &owner,
        "customer-offboarding",
        json!({ "customerId": "CU-2", "effectiveAt": "2020-01-01T00:00:00Z" }),
    )
    .await;
    let failing = run_id(&started);
    let authorized = decide(&owner, &failing, "authorize", json!({ "decision": "approved" })).await;
    assert_eq!(
        step_state(&authorized, "effective_time"),
        "done",
        "a past time goes on at once"
    );
    let claimed = claim(&agent, &failing, "cancel_services").await;
    agent
        .ok(
            "escalate",
            json!({ "token": claimed["token"], "note": "Service S-3 cannot be cancelled",
                    "requestId": request_id() }),
        )
        .await;
    let failed = decide(
        &ops,
        &failing,
        "cancel_services",
        json!({ "decision": "failed", "note": "Contract forbids cancelling S-3 this year" }),
    )
    .await;
    assert_eq!(failed["run"]["state"], "ended");
    assert_eq!(failed["run"]["outcome"], "failed");
    assert_eq!(failed["run"]["ended"]["by"], "ops@acme.test");
    assert_eq!(
        failed["run"]["ended"]["note"],
        "Contract forbids cancelling S-3 this year"
    );
    assert_eq!(step_state(&failed, "cancel_services"), "failed");
    assert_eq!(step_state(&failed, "final_invoice"), Value::Null);
    let record = &failed["data"]["steps"]["cancel_services"];
    assert_eq!(record["decision"], "failed");
    assert_eq!(record["note"], "Contract forbids cancelling S-3 this year");
    assert_eq!(record["by"], "ops@acme.test");
    assert_eq!(failed["workItems"], json!([]));

    // Cancellation: only an operator; then the run's open work is gone and writes are refused.
    let started = start(
        &owner,
        "customer-offboarding",
        json!({ "customerId": "CU-3", "effectiveAt": "2020-01-01T00:00:00Z" }),
    )
    .await;
    let cancelled_run = run_id(&started);
    let stale_item = person_item(&owner, &cancelled_run, "authorize").await;
    for not_operator in [&owner, &agent] {
        not_operator
            .refused(
                "cancel",
                json!({ "runId": cancelled_run, "reason": "Customer stays", "requestId": request_id() }),
                "forbidden",
            )
            .await;
    }
    assert_eq!(get_run(&owner, &cancelled_run).await["run"]["state"], "waiting");
    let cancelled = ops
        .ok(
            "cancel",
            json!({ "runId": cancelled_run, "reason": "Customer renewed instead", "requestId": request_id() }),
        )
        .await;
    assert_eq!(cancelled["run"]["state"], "cancelled");
    assert_eq!(cancelled["run"]["ended"]["by"], "ops@acme.test");
    assert_eq!(cancelled["run"]["ended"]["note"], "Customer renewed instead");
    assert_eq!(cancelled["workItems"], json!([]));
    assert_eq!(step_state(&cancelled, "authorize"), "cancelled");
    assert!(
        find_work_item(&owner, &cancelled_run, "authorize")
            .await
            .is_none()
    );
    assert_eq!(get_run(&owner, &cancelled_run).await, cancelled);

    let mut decide_args = stale_item["workItem"]["decide"]["arguments"].clone();
    decide_args = with(
        decide_args,
        json!({ "requestId": request_id(), "decision": "approved" }),
    );
    let refusals = [
        owner.refused("decide", decide_args, "conflict").await,
        agent
            .refused(
                "send_event",
                json!({ "runId": cancelled_run, "name": "final-invoice-settled", "requestId": request_id() }),
                "conflict",
            )
            .await,
        ops.refused(
            "cancel",
            json!({ "runId": cancelled_run, "reason": "Again", "requestId": request_id() }),
            "conflict",
        )
        .await,
    ];
    for refusal in refusals {
        assert_eq!(refusal["issues"], json!(["run_ended"]), "{refusal}");
    }
    assert_eq!(get_run(&owner, &cancelled_run).await, cancelled);

    // A claimed step of a cancelled run: its token stops working, a replay still answers.
    let started = start(
        &owner,
        "customer-offboarding",
        json!({ "customerId": "CU-4", "effectiveAt": "2020-01-01T00:00:00Z" }),
    )
    .await;
    let claimed_run = run_id(&started);
    decide(
        &owner,
        &claimed_run,
        "authorize",
        json!({ "decision": "approved" }),
    )
    .await;
    agent_item(&agent, &claimed_run, "cancel_services").await;
    let claim_args = json!({ "runId": claimed_run, "stepId": "cancel_services", "requestId": request_id() });
    let claimed = agent.ok("claim", claim_args.clone()).await;
    let cancelled = ops
        .ok(
            "cancel",
            json!({ "runId": claimed_run, "reason": "Duplicate request", "requestId": request_id() }),
        )
        .await;
    assert_eq!(step_state(&cancelled, "cancel_services"), "cancelled");
    let refusals = [
        agent
            .refused(
                "submit",
                json!({ "token": claimed["token"], "requestId": request_id(),
                        "output": { "cancellationIds": ["CX-4"] },
                        "evidence": [{ "kind": "link", "ref": "https://billing.test/CU-4" }],
                        "summary": "Cancelled." }),
                "conflict",
            )
            .await,
        agent
            .refused(
                "escalate",
                json!({ "token": claimed["token"], "note": "Stuck", "requestId": request_id() }),
                "conflict",
            )
            .await,
        agent
            .refused(
                "renew",
                json!({ "token": claimed["token"], "requestId": request_id() }),
                "conflict",
            )
            .await,
        agent
            .refused(
                "claim",
                with(claim_args.clone(), json!({ "requestId": request_id() })),
                "conflict",
            )
            .await,
    ];
    for refusal in refusals {
        assert_eq!(refusal["issues"], json!(["run_ended"]), "{refusal}");
    }
    assert_eq!(agent.ok("claim", claim_args).await, claimed);
    assert_eq!(get_run(&owner, &claimed_run).await, cancelled);
    for client in [owner, steward, agent, ops] {
        client.close().await;
    }
}
