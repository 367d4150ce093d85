//! Six walks of our examples over MCP, each against any [`Deployment`]: `serve_walks_core` runs them
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
pub async fn defect_triage_routes_by_reason_refused_route_changes_nothing_and_overdue_task_stays_open(
    server: &impl Deployment,
) {
    server.publish_example("defect-triage");
    let agent = server.client(&Who::Agent("a_triage")).await;
    let lead = server.client(&Who::Person("lead@acme.test", &["qa-lead"])).await;
    let developer = server
        .client(&Who::Person("oncall@acme.test", &["developer-oncall"]))
        .await;

    let started = start(&agent, "defect-triage", json!({ "reportId": "BUG-100" })).await;
    let run = run_id(&started);
    assert_eq!(started["run"]["state"], "active");
    assert_eq!(started["run"]["startedBy"], "a_triage");
    assert_eq!(step_state(&started, "triage"), "ready");

    let claimed = claim(&agent, &run, "triage").await;
    let routes: Vec<&Value> = claimed["step"]["next"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["to"])
        .collect();
    assert_eq!(routes, [&json!("verify_fix"), &json!("qa_reproduce")]);
    assert!(
        find_agent_item(&agent, &run, "triage").await.is_none(),
        "a claimed step is not listed"
    );

    // A route outside the step's list and no reason: refused with both issues, nothing changed.
    let before = get_run(&agent, &run).await;
    let refused = agent
        .refused(
            "submit",
            json!({
                "token": claimed["token"], "requestId": request_id(),
                "output": { "findings": "Login loop after SSO redirect", "workaround": "Cleared sessions" },
                "evidence": [{ "kind": "link", "ref": "https://bugs.test/BUG-100" }],
                "summary": "Reproduced the loop; runbook fix did not help.", "next": "develop_fix",
            }),
            "not_accepted",
        )
        .await;
    assert_eq!(
        refused["issues"],
        json!([
            "next: develop_fix is not one of verify_fix, qa_reproduce",
            "reason: required"
        ])
    );
    assert_eq!(get_run(&agent, &run).await, before);

    let routed = submit(
        &agent,
        &claimed["token"],
        json!({
            "output": { "findings": "Login loop after SSO redirect", "workaround": "Cleared sessions" },
            "evidence": [{ "kind": "link", "ref": "https://bugs.test/BUG-100" }],
            "summary": "Reproduced the loop; runbook fix did not help.",
            "next": "qa_reproduce", "reason": "The runbook fix did not resolve the loop",
        }),
    )
    .await;
    assert_eq!(routed["run"]["state"], "waiting");
    let triage = &routed["data"]["steps"]["triage"];
    assert_eq!(triage["next"], "qa_reproduce");
    assert_eq!(triage["reason"], "The runbook fix did not resolve the loop");
    assert_eq!(triage["by"], "a_triage");
    assert_eq!(step_state(&routed, "triage"), "done");
    assert_eq!(step_state(&routed, "qa_reproduce"), "waiting");
    assert_eq!(step_state(&routed, "verify_fix"), Value::Null);

    // The reproduction task is due 4h after it became ready; past that it is overdue and still open.
    let repro = step_of(&routed, "qa_reproduce").clone();
    assert_eq!(repro["overdue"], false);
    let item = person_item(&lead, &run, "qa_reproduce").await;
    let work_item = &item["workItem"];
    assert_eq!(work_item["kind"], "task");
    assert_eq!(work_item["assignedTo"], json!({ "group": "qa-lead" }));
    assert_eq!(work_item["decide"]["decisions"], json!(["completed", "failed"]));
    assert_eq!(work_item["due"], repro["due"]);
    assert_eq!(repro["due"].as_str().unwrap(), plus(&triage["at"], 4 * 3600));
    server.advance(3 * 3600).await;
    assert_eq!(
        step_of(&get_run(&lead, &run).await, "qa_reproduce")["overdue"],
        false
    );
    server.advance(3600 + 60).await;
    let overdue = view_when(&lead, &run, "qa_reproduce", "overdue", json!(true)).await;
    assert_eq!(step_state(&overdue, "qa_reproduce"), "waiting");
    person_item(&lead, &run, "qa_reproduce").await;

    // A value outside `one_of` is refused like an agent's submission would be.
    let refused = decide_call(
        &lead,
        &run,
        "qa_reproduce",
        json!({ "decision": "completed",
                "output": { "reproSteps": "SSO login", "affectedUsers": "All EU users", "priority": "urgent" },
                "evidence": [{ "kind": "link", "ref": "https://bugs.test/BUG-100#repro" }] }),
    )
    .await;
    assert_eq!(refused["error"]["code"], "not_accepted", "{refused}");
    assert!(
        refused["error"]["issues"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i.as_str().unwrap().starts_with("output.priority")),
        "{refused}"
    );
    let reproduced = decide(
        &lead,
        &run,
        "qa_reproduce",
        json!({ "decision": "completed",
                "output": { "reproSteps": "SSO login", "affectedUsers": "All EU users", "priority": "major" },
                "evidence": [{ "kind": "link", "ref": "https://bugs.test/BUG-100#repro" }] }),
    )
    .await;
    assert_eq!(
        reproduced["data"]["steps"]["qa_reproduce"]["by"],
        "lead@acme.test"
    );
    assert_eq!(step_state(&reproduced, "develop_fix"), "waiting");
    assert!(find_work_item(&lead, &run, "qa_reproduce").await.is_none());

    decide(
        &developer,
        &run,
        "develop_fix",
        json!({ "decision": "completed",
                "output": { "fixSummary": "Fixed the redirect in 2.4.1", "changeRef": "ENG-77" },
                "evidence": [{ "kind": "link", "ref": "https://eng.test/ENG-77" }] }),
    )
    .await;
    let verified = decide(&lead, &run, "verify_fix", json!({ "decision": "approved" })).await;
    assert_eq!(verified["data"]["steps"]["verify_fix"]["decision"], "approved");
    assert_eq!(step_state(&verified, "close_report"), "ready");

    let claimed = claim(&agent, &run, "close_report").await;
    let finished = submit(
        &agent,
        &claimed["token"],
        json!({ "output": { "closedRef": "BUG-100" },
                "evidence": [{ "kind": "link", "ref": "https://bugs.test/BUG-100" }],
                "summary": "Closed the report with the ENG-77 fix." }),
    )
    .await;
    assert_finished(&finished, "fixed");
    assert_eq!(step_state(&finished, "done"), "done");
    for client in [agent, lead, developer] {
        client.close().await;
    }
}

/// §3.1 and §3.4: a rejected approval returns the run to `on_reject`; every step completed after
/// the returned-to step moves into `history`, the rejecting approval keeps its note current, and
/// both reviews are repeated before the policy is published.
pub async fn policy_update_rejection_rewinds_both_reviews_into_history_then_publishes(
    server: &impl Deployment,
) {
    server.publish_example("policy-update");
    let author = server.client(&Who::Person("author@acme.test", &["sales"])).await;
    let compliance = server
        .client(&Who::Person("compliance@acme.test", &["compliance-reviewer"]))
        .await;
    let security = server
        .client(&Who::Person("security@acme.test", &["security-reviewer"]))
        .await;
    let publisher = server
        .client(&Who::Person("policy-owner@acme.test", &["policy-owner"]))
        .await;

    let started = start(
        &author,
        "policy-update",
        json!({ "policyId": "POL-9", "draftDocument": "DMS-9", "author": "author@acme.test" }),
    )
    .await;
    let run = run_id(&started);
    let first = person_item(&author, &run, "write_draft").await;
    assert_eq!(
        first["workItem"]["assignedTo"],
        json!({ "person": "author@acme.test" })
    );
    assert_eq!(first["workItem"]["handoff"], Value::Null);

    let version_1 = upload(&author, "pol9-v1.pdf").await;
    let drafted = decide(
        &author,
        &run,
        "write_draft",
        json!({ "decision": "completed",
                "output": { "version": "DMS-9@1", "changeSummary": "MFA for every administrator" },
                "evidence": [{ "kind": "file", "ref": version_1 }] }),
    )
    .await;
    let evidence = &drafted["data"]["steps"]["write_draft"]["evidence"][0];
    assert_eq!(evidence["ref"], version_1.as_str());
    assert!(evidence["sha256"].is_string(), "{evidence}");

    decide(
        &compliance,
        &run,
        "compliance_review",
        json!({ "decision": "approved" }),
    )
    .await;
    // Rejecting needs a note.
    let refused = decide_call(
        &security,
        &run,
        "security_review",
        json!({ "decision": "rejected" }),
    )
    .await;
    assert_eq!(refused["ok"], false);
    let rejected = decide(
        &security,
        &run,
        "security_review",
        json!({ "decision": "rejected", "note": "Keys must be rotated every 90 days" }),
    )
    .await;
    assert_eq!(rejected["run"]["state"], "waiting");
    assert_eq!(step_state(&rejected, "write_draft"), "waiting");
    assert_eq!(step_state(&rejected, "compliance_review"), Value::Null);
    let steps = &rejected["data"]["steps"];
    // The returned-to step keeps its record until it completes again; the steps after it move
    // into history.
    assert_eq!(steps["write_draft"]["output"]["version"], "DMS-9@1");
    assert_eq!(steps["write_draft"]["history"], json!([]));
    assert!(steps["compliance_review"].get("decision").is_none(), "{steps}");
    assert_eq!(steps["compliance_review"]["history"][0]["decision"], "approved");
    assert_eq!(
        steps["compliance_review"]["history"][0]["by"],
        "compliance@acme.test"
    );
    assert_eq!(steps["security_review"]["decision"], "rejected");
    assert_eq!(
        steps["security_review"]["note"],
        "Keys must be rotated every 90 days"
    );
    assert_eq!(steps["security_review"]["by"], "security@acme.test");
    assert_eq!(steps["security_review"]["history"], json!([]));

    // The author gets the draft again: a new work item, the note in run data.
    let again = person_item(&author, &run, "write_draft").await;
    assert_ne!(again["workItem"]["id"], first["workItem"]["id"]);
    assert_eq!(again["workItem"]["handoff"], Value::Null);
    assert!(
        find_work_item(&compliance, &run, "compliance_review")
            .await
            .is_none()
    );

    let version_2 = upload(&author, "pol9-v2.pdf").await;
    decide(
        &author,
        &run,
        "write_draft",
        json!({ "decision": "completed",
                "output": { "version": "DMS-9@2", "changeSummary": "MFA for every administrator, keys rotated every 90 days" },
                "evidence": [{ "kind": "file", "ref": version_2 }] }),
    )
    .await;
    decide(
        &compliance,
        &run,
        "compliance_review",
        json!({ "decision": "approved" }),
    )
    .await;
    decide(
        &security,
        &run,
        "security_review",
        json!({ "decision": "approved" }),
    )
    .await;
    let published_file = upload(&publisher, "pol9-published.pdf").await;
    let published = decide(
        &publisher,
        &run,
        "publish_policy",
        json!({ "decision": "completed",
                "output": { "publishedVersion": "DMS-9@2", "effectiveAt": "2026-12-01T10:00:00Z" },
                "evidence": [{ "kind": "file", "ref": published_file }] }),
    )
    .await;
    assert_finished(&published, "published");
    let steps = &published["data"]["steps"];
    assert_eq!(steps["write_draft"]["output"]["version"], "DMS-9@2");
    assert_eq!(steps["write_draft"]["history"][0]["output"]["version"], "DMS-9@1");
    assert_eq!(steps["write_draft"]["history"][0]["by"], "author@acme.test");
    assert_eq!(steps["compliance_review"]["decision"], "approved");
    assert_eq!(steps["compliance_review"]["history"].as_array().unwrap().len(), 1);
    assert_eq!(steps["security_review"]["decision"], "approved");
    assert!(steps["security_review"].get("note").is_none(), "{steps}");
    assert_eq!(steps["security_review"]["history"][0]["decision"], "rejected");
    assert_eq!(
        steps["security_review"]["history"][0]["note"],
        "Keys must be rotated every 90 days"
    );
    for client in [author, compliance, security, publisher] {
        client.close().await;
    }
}

/// §4: every write is idempotent on `requestId`; a lost response of `start_run`, `claim`,
/// `submit` and `decide` is retried with the same id and returns the original result, the same
/// id with other arguments is a `conflict`. tools.md `start_run`: a process with an `initiator`
/// step cannot be started by an agent. tools.md `list_runs` filters, and `get_run` of a finished
/// run.
pub async fn training_request_replays_lost_responses_and_lists_runs_by_filter(server: &impl Deployment) {
    server.publish_example("training-request");
    let employee = server.client(&Who::Person("emp@acme.test", &["staff"])).await;
    let supervisor = server.client(&Who::Person("sup@acme.test", &["staff"])).await;
    let learning = server
        .client(&Who::Person("learning@acme.test", &["learning-team"]))
        .await;
    let agent = server.client(&Who::Agent("a_training")).await;

    let refused = agent
        .refused(
            "start_run",
            json!({ "process": "training-request", "requestId": request_id(),
                    "inputs": { "requestRef": "C-0", "supervisor": "sup@acme.test" } }),
            "invalid",
        )
        .await;
    assert!(refused["message"].as_str().is_some());

    // start_run: the same request twice is one run; other arguments under that id conflict.
    let start_id = request_id();
    let start_args = json!({ "process": "training-request", "requestId": start_id,
                             "inputs": { "requestRef": "C-1", "supervisor": "sup@acme.test" } });
    let started = employee.ok("start_run", start_args.clone()).await;
    let replayed = employee.ok("start_run", start_args).await;
    assert_eq!(replayed, started);
    let run = run_id(&started);
    employee
        .refused(
            "start_run",
            json!({ "process": "training-request", "requestId": start_id,
                    "inputs": { "requestRef": "C-2", "supervisor": "sup@acme.test" } }),
            "conflict",
        )
        .await;
    let other = start(
        &employee,
        "training-request",
        json!({ "requestRef": "C-2", "supervisor": "sup@acme.test" }),
    )
    .await;
    let other_run = run_id(&other);
    assert_ne!(other_run, run);

    let offer = upload(&employee, "offer.pdf").await;
    decide(
        &employee,
        &run,
        "course_details",
        json!({ "decision": "completed",
                "output": { "goal": "Learn Rust for the sync service", "costUsd": 42.5,
                            "items": [{ "item": "Course fee", "date": "2026-11-20", "amountUsd": 42.5 }] },
                "evidence": [{ "kind": "file", "ref": offer }] }),
    )
    .await;

    // claim: the replay returns the same token; the id reused for another step conflicts.
    let claim_args = json!({ "runId": run, "stepId": "policy_check", "requestId": request_id() });
    let claimed = agent.ok("claim", claim_args.clone()).await;
    assert_eq!(agent.ok("claim", claim_args.clone()).await, claimed);
    agent
        .refused(
            "claim",
            with(claim_args, json!({ "stepId": "course_details" })),
            "conflict",
        )
        .await;

    // submit: the replay returns the original run view; other arguments conflict.
    let submit_args = json!({
        "token": claimed["token"], "requestId": request_id(),
        "output": { "verifiedCostUsd": 42.5, "notes": "One fee line, matches the offer, within policy" },
        "evidence": [{ "kind": "link", "ref": "https://training.test/C-1/checks" }],
        "summary": "Matched the fee to the offer; no other request for the course.",
    });
    let submitted = agent.ok("submit", submit_args.clone()).await;
    assert_eq!(step_state(&submitted, "supervisor_approval"), "waiting");
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
    let item = person_item(&supervisor, &run, "supervisor_approval").await;
    let decide_args = with(
        item["workItem"]["decide"]["arguments"].clone(),
        json!({ "requestId": request_id(), "decision": "approved" }),
    );
    let approved = supervisor.ok("decide", decide_args.clone()).await;
    assert_eq!(
        approved["data"]["steps"]["supervisor_approval"]["by"],
        "sup@acme.test"
    );
    assert_eq!(supervisor.ok("decide", decide_args.clone()).await, approved);
    supervisor
        .refused(
            "decide",
            with(decide_args, json!({ "decision": "rejected", "note": "No" })),
            "conflict",
        )
        .await;

    let booked = decide(
        &learning,
        &run,
        "book_course",
        json!({ "decision": "completed",
                "output": { "bookingRef": "BK-1", "chargedUsd": 42.5 },
                "evidence": [{ "kind": "link", "ref": "https://lms.test/bookings/1" }] }),
    )
    .await;
    assert_finished(&booked, "booked");

    // get_run of the finished run: everything done, the record complete, nothing open.
    let finished = get_run(&learning, &run).await;
    assert_eq!(finished["run"], booked["run"]);
    assert_eq!(finished["data"], booked["data"]);
    for step in [
        "course_details",
        "policy_check",
        "supervisor_approval",
        "book_course",
    ] {
        assert_eq!(step_state(&finished, step), "done", "{step}");
    }
    assert_eq!(finished["data"]["steps"]["policy_check"]["by"], "a_training");
    assert_eq!(
        finished["data"]["steps"]["book_course"]["output"]["chargedUsd"],
        42.5
    );

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
        .ok("list_runs", json!({ "process": "training-request" }))
        .await;
    assert_eq!(ids(&all), both);
    let ended = agent
        .ok(
            "list_runs",
            json!({ "process": "training-request", "state": "ended" }),
        )
        .await;
    assert_eq!(ids(&ended), [run.as_str()]);
    assert_eq!(ended["items"][0]["outcome"], "booked");
    assert_eq!(
        ended["items"][0]["inputs"],
        json!({ "requestRef": "C-1", "supervisor": "sup@acme.test" })
    );
    let waiting = agent.ok("list_runs", json!({ "state": "waiting" })).await;
    assert_eq!(ids(&waiting), [other_run.as_str()]);
    let by_input = agent
        .ok("list_runs", json!({ "inputs": { "requestRef": "C-2" } }))
        .await;
    assert_eq!(ids(&by_input), [other_run.as_str()]);
    let none = agent
        .ok(
            "list_runs",
            json!({ "inputs": { "requestRef": "C-2", "supervisor": "someone@acme.test" } }),
        )
        .await;
    assert_eq!(none["items"], json!([]));
    let other_process = agent.ok("list_runs", json!({ "process": "policy-update" })).await;
    assert_eq!(other_process["items"], json!([]));
    for client in [employee, supervisor, learning, agent] {
        client.close().await;
    }
}

/// §3.3 handoff: a claim renewed with `progress` whose lease then expires is ready again at
/// once with `handoff.progress`, and its token is `stale`; §3.3 test mode: every run view,
/// work item, `get_work` item and claim of a test run says `mode: "test"`; §3.1 a rejection
/// rewinds the later steps into `history` and the reclaimed agent step starts a fresh attempt.
pub async fn contractor_setup_in_test_mode_hands_progress_over_an_expired_lease_and_reworks_a_rejection(
    server: &impl Deployment,
) {
    server.publish_example("contractor-setup");
    let procurement = server
        .client(&Who::Person("procurement@acme.test", &["procurement-ops"]))
        .await;
    let sponsor = server.client(&Who::Person("sponsor@acme.test", &["staff"])).await;
    let desk = server
        .client(&Who::Person("desk@acme.test", &["service-desk"]))
        .await;
    let agent = server.client(&Who::Agent("a_setup")).await;
    let other_agent = server.client(&Who::Agent("a_setup_2")).await;
    let lease = agent.ok("describe", json!({})).await["leaseSeconds"]
        .as_u64()
        .unwrap();

    let inputs = json!({ "contractorId": "CT-7", "contractorName": "Ada", "firstDay": "2027-01-04",
                         "sponsor": "sponsor@acme.test" });
    let live = start(&procurement, "contractor-setup", inputs.clone()).await;
    assert_eq!(live["run"]["mode"], "live");
    let test = procurement
        .ok(
            "start_run",
            json!({ "process": "contractor-setup", "inputs": inputs, "mode": "test",
                    "requestId": request_id() }),
        )
        .await;
    let run = run_id(&test);
    assert_eq!(test["run"]["mode"], "test");
    assert_eq!(test["workItems"][0]["mode"], "test", "{test}");
    assert_ne!(live["workItems"][0]["mode"], "test", "{live}");
    let procurement_item = person_item(&procurement, &run, "vendor_record").await;
    assert_eq!(procurement_item["mode"], "test");
    assert_eq!(procurement_item["workItem"]["mode"], "test");
    assert_eq!(
        person_item(&procurement, &run_id(&live), "vendor_record").await["mode"],
        "live"
    );

    decide(
        &procurement,
        &run,
        "vendor_record",
        json!({ "decision": "completed",
                "output": { "vendorRecord": "V-7", "site": "Berlin", "engagementTitle": "Data engineer" },
                "evidence": [{ "kind": "link", "ref": "https://vendors.test/V-7" }] }),
    )
    .await;
    let access_needs = json!({ "decision": "completed",
        "output": { "systems": ["github", "jira"], "hardware": "Laptop and badge", "mentor": "bo@acme.test" } });
    decide(&sponsor, &run, "access_needs", access_needs.clone()).await;
    let provision = json!({ "decision": "completed",
        "output": { "laptopTag": "LT-1", "logins": ["ada@github"], "pickupPlan": "Front desk, day one" },
        "evidence": [{ "kind": "link", "ref": "https://desk.test/TICKET-1" }] });
    decide(&desk, &run, "provision", provision.clone()).await;

    // The orientation step: claimed, renewed with progress, then the lease runs out.
    let item = agent_item(&agent, &run, "orientation").await;
    assert_eq!(item["mode"], "test");
    assert_eq!(item["handoff"], Value::Null);
    let first_claim = json!({ "runId": run, "stepId": "orientation", "requestId": request_id() });
    let claimed = agent.ok("claim", first_claim.clone()).await;
    assert_eq!(claimed["mode"], "test");
    assert_eq!(claimed["handoff"], Value::Null);
    let renewed = agent
        .ok(
            "renew",
            json!({ "token": claimed["token"], "progress": "Agenda drafted; sponsor mail not sent",
                    "requestId": request_id() }),
        )
        .await;
    assert_ne!(renewed["token"], claimed["token"]);
    let agenda = json!({ "output": { "agenda": "Day 1: laptop pickup, logins, mentor lunch" },
                            "evidence": [{ "kind": "link", "ref": "https://docs.test/agenda/CT-7" }],
                            "summary": "Wrote the agenda and mailed the sponsor its pickup plan." });
    agent
        .refused(
            "submit",
            with(
                json!({ "token": claimed["token"], "requestId": request_id() }),
                agenda.clone(),
            ),
            "stale",
        )
        .await;
    assert!(find_agent_item(&other_agent, &run, "orientation").await.is_none());

    server.advance(lease + 1).await;
    view_when(&agent, &run, "orientation", "state", json!("ready")).await;
    let ready = agent_item(&other_agent, &run, "orientation").await;
    assert_eq!(
        ready["handoff"],
        json!({ "progress": "Agenda drafted; sponsor mail not sent" })
    );
    agent
        .refused(
            "submit",
            with(
                json!({ "token": renewed["token"], "requestId": request_id() }),
                agenda.clone(),
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
    let reclaimed = claim(&other_agent, &run, "orientation").await;
    assert_eq!(
        reclaimed["handoff"],
        json!({ "progress": "Agenda drafted; sponsor mail not sent" })
    );
    let oriented = submit(&other_agent, &reclaimed["token"], agenda.clone()).await;
    assert_eq!(oriented["data"]["steps"]["orientation"]["by"], "a_setup_2");
    assert_eq!(oriented["workItems"][0]["mode"], "test");

    // The sponsor rejects: access needs, provisioning and agenda are redone.
    let rejected = decide(
        &sponsor,
        &run,
        "sponsor_signoff",
        json!({ "decision": "rejected", "note": "Mentor is on leave; use Cy" }),
    )
    .await;
    assert_eq!(step_state(&rejected, "access_needs"), "waiting");
    for step in ["provision", "orientation", "sponsor_signoff"] {
        assert_eq!(step_state(&rejected, step), Value::Null, "{step}");
    }
    let steps = &rejected["data"]["steps"];
    assert_eq!(steps["vendor_record"]["history"], json!([]));
    assert_eq!(steps["vendor_record"]["by"], "procurement@acme.test");
    assert_eq!(steps["access_needs"]["output"]["mentor"], "bo@acme.test");
    assert_eq!(steps["access_needs"]["history"], json!([]));
    for step in ["provision", "orientation"] {
        assert!(steps[step].get("output").is_none(), "{step}: {steps}");
        assert_eq!(steps[step]["history"].as_array().unwrap().len(), 1, "{step}");
    }
    assert_eq!(steps["orientation"]["history"][0]["by"], "a_setup_2");
    assert_eq!(steps["sponsor_signoff"]["note"], "Mentor is on leave; use Cy");

    decide(&sponsor, &run, "access_needs", access_needs).await;
    decide(&desk, &run, "provision", provision).await;
    let item = agent_item(&agent, &run, "orientation").await;
    assert_eq!(item["handoff"], Value::Null, "a rework is a fresh attempt");
    let claimed = claim(&agent, &run, "orientation").await;
    assert_eq!(claimed["mode"], "test");
    assert_eq!(claimed["handoff"], Value::Null);
    assert_eq!(
        claimed["data"]["steps"]["sponsor_signoff"]["note"],
        "Mentor is on leave; use Cy"
    );
    assert_eq!(
        claimed["data"]["steps"]["orientation"]["history"][0]["output"]["agenda"],
        "Day 1: laptop pickup, logins, mentor lunch"
    );
    submit(&agent, &claimed["token"], agenda).await;
    let prepared = decide(
        &sponsor,
        &run,
        "sponsor_signoff",
        json!({ "decision": "approved" }),
    )
    .await;
    assert_finished(&prepared, "prepared");
    assert_eq!(prepared["run"]["mode"], "test");
    assert_eq!(prepared["data"]["steps"]["orientation"]["by"], "a_setup");
    assert_eq!(
        prepared["data"]["steps"]["orientation"]["history"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    for client in [procurement, sponsor, desk, agent, other_agent] {
        client.close().await;
    }
}

/// §3.4: an escalated agent step `returned` by a person is ready again with `handoff.returned`;
/// §3.1 a product manager's rejection sends the draft back to the agent with the note in run data;
/// §2.2 `wait_until` holds the run until `releaseAt`.
pub async fn release_notes_reworks_a_rejected_draft_waits_for_release_time_and_gets_an_escalation_returned(
    server: &impl Deployment,
) {
    server.publish_example("release-notes");
    let agent = server.client(&Who::Agent("a_writer")).await;
    let product = server
        .client(&Who::Person("pm@acme.test", &["product-manager"]))
        .await;
    let ops = server.client(&OPS).await;

    let release_at = clock_plus(server, 2 * 86_400).await;
    let started = start(
        &agent,
        "release-notes",
        json!({ "changes": "Faster sync, CSV export", "version": "2.4.0", "releaseAt": release_at }),
    )
    .await;
    let run = run_id(&started);

    let claimed = claim(&agent, &run, "write_notes").await;
    let notes = |revision: &str| {
        json!({ "output": { "draftRef": revision, "headline": "2.4: faster sync", "highlights": "Sync is twice as fast; export to CSV" },
                "evidence": [{ "kind": "link", "ref": format!("https://docs.test/preview/{revision}") }],
                "summary": format!("Wrote {revision} from the change list.") })
    };
    submit(&agent, &claimed["token"], notes("rev-1")).await;
    let item = person_item(&product, &run, "product_review").await;
    assert_eq!(
        item["workItem"]["decide"]["decisions"],
        json!(["approved", "rejected", "failed"])
    );
    let rejected = decide(
        &product,
        &run,
        "product_review",
        json!({ "decision": "rejected", "note": "Cite the benchmark source" }),
    )
    .await;
    assert_eq!(rejected["run"]["state"], "active");
    assert_eq!(step_state(&rejected, "write_notes"), "ready");
    assert_eq!(step_state(&rejected, "product_review"), Value::Null);

    let item = agent_item(&agent, &run, "write_notes").await;
    assert_eq!(item["handoff"], Value::Null);
    let reclaimed = claim(&agent, &run, "write_notes").await;
    let steps = &reclaimed["data"]["steps"];
    assert_eq!(steps["product_review"]["note"], "Cite the benchmark source");
    assert_eq!(steps["product_review"]["decision"], "rejected");
    assert_eq!(steps["write_notes"]["output"]["draftRef"], "rev-1");
    assert_eq!(steps["write_notes"]["history"], json!([]));
    let redrafted = submit(&agent, &reclaimed["token"], notes("rev-2")).await;
    let notes_record = &redrafted["data"]["steps"]["write_notes"];
    assert_eq!(notes_record["output"]["draftRef"], "rev-2");
    assert_eq!(notes_record["history"][0]["output"]["draftRef"], "rev-1");
    assert_eq!(notes_record["history"][0]["by"], "a_writer");
    // The rejection stays current until the approval completes again.
    assert_eq!(
        redrafted["data"]["steps"]["product_review"]["decision"],
        "rejected"
    );
    let approved = decide(
        &product,
        &run,
        "product_review",
        json!({ "decision": "approved" }),
    )
    .await;
    let review = &approved["data"]["steps"]["product_review"];
    assert_eq!(review["decision"], "approved");
    assert_eq!(review["history"][0]["decision"], "rejected");
    assert_eq!(review["history"][0]["note"], "Cite the benchmark source");
    assert_eq!(approved["run"]["state"], "waiting");
    assert_eq!(step_state(&approved, "release_time"), "waiting");
    assert!(find_agent_item(&agent, &run, "post_notes").await.is_none());

    server.advance(2 * 86_400 + 60).await;
    let release_time = view_when(&agent, &run, "release_time", "state", json!("done")).await;
    assert_eq!(step_state(&release_time, "post_notes"), "ready");
    assert_eq!(release_time["data"]["steps"]["release_time"]["by"], "server");

    // The agent escalates; an operator returns it with a note.
    let claimed = claim(&agent, &run, "post_notes").await;
    let escalated = agent
        .ok(
            "escalate",
            json!({ "token": claimed["token"], "note": "The docs system shows rev-3, not the approved rev-2",
                    "requestId": request_id() }),
        )
        .await;
    assert_eq!(step_state(&escalated, "post_notes"), "waiting");
    let work_item = &escalated["workItems"][0];
    assert_eq!(work_item["stepId"], "post_notes");
    assert_eq!(work_item["assignedTo"], json!({ "group": "operators" }));
    assert_eq!(
        work_item["escalation"]["note"],
        "The docs system shows rev-3, not the approved rev-2"
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
                json!({ "output": { "pageUrl": "https://docs.test/releases/2.4.0", "postedRef": "rev-2" },
                        "evidence": [{ "kind": "link", "ref": "https://docs.test/releases/2.4.0" }],
                        "summary": "Posted." }),
            ),
            "stale",
        )
        .await;
    assert!(find_agent_item(&agent, &run, "post_notes").await.is_none());
    let returned = decide(
        &ops,
        &run,
        "post_notes",
        json!({ "decision": "returned", "note": "rev-3 is a cache artifact; post rev-2" }),
    )
    .await;
    assert_eq!(step_state(&returned, "post_notes"), "ready");
    assert_eq!(returned["workItems"], json!([]));
    let item = agent_item(&agent, &run, "post_notes").await;
    let handoff_returned = &item["handoff"]["returned"];
    assert_eq!(handoff_returned["note"], "rev-3 is a cache artifact; post rev-2");
    assert_eq!(handoff_returned["by"], "ops@acme.test");
    let claimed = claim(&agent, &run, "post_notes").await;
    assert_eq!(claimed["handoff"], item["handoff"]);
    let finished = submit(
        &agent,
        &claimed["token"],
        json!({ "output": { "pageUrl": "https://docs.test/releases/2.4.0", "postedRef": "rev-2" },
                "evidence": [{ "kind": "link", "ref": "https://docs.test/releases/2.4.0" }],
                "summary": "Posted rev-2 and checked that the page loads." }),
    )
    .await;
    assert_finished(&finished, "released");
    assert_eq!(finished["data"]["steps"]["post_notes"]["by"], "a_writer");
    assert_eq!(
        finished["data"]["steps"]["write_notes"]["output"]["draftRef"],
        "rev-2"
    );
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
        .filter(|e| e["step"] == "post_notes" && e.get("note").is_some())
        .map(|e| {
            let field = |name: &str| e[name].as_str().unwrap();
            (field("type"), field("by"), field("note"))
        })
        .collect();
    assert_eq!(
        noted,
        [
            (
                "escalated",
                "a_writer",
                "The docs system shows rev-3, not the approved rev-2"
            ),
            (
                "returned",
                "ops@acme.test",
                "rev-3 is a cache artifact; post rev-2"
            ),
        ]
    );
    for client in [agent, product, ops] {
        client.close().await;
    }
}

/// §3.4: an escalated agent step `completed` by a person with the output, and one `failed`,
/// which ends the run `failed`; §3.5: an operator cancels a run (a non-operator cannot), its
/// open work disappears and every later write is `conflict` with `run_ended`; §3.6 an event
/// satisfies a `wait_for`.
pub async fn account_closure_escalations_complete_and_fail_and_an_operator_cancels(server: &impl Deployment) {
    server.publish_example("account-closure");
    let manager = server
        .client(&Who::Person("am@acme.test", &["account-manager"]))
        .await;
    let privacy = server
        .client(&Who::Person("privacy@acme.test", &["privacy-officer"]))
        .await;
    let agent = server.client(&Who::Agent("a_closure")).await;
    let ops = server.client(&OPS).await;

    // The happy path, with stopping billing escalated and completed by an operator.
    let started = start(
        &manager,
        "account-closure",
        json!({ "accountId": "AC-1", "closeAt": clock_plus(server, 86_400).await }),
    )
    .await;
    let run = run_id(&started);
    let confirmed = decide(
        &manager,
        &run,
        "confirm_request",
        json!({ "decision": "approved" }),
    )
    .await;
    assert_eq!(step_state(&confirmed, "closing_time"), "waiting");
    server.advance(86_400 + 60).await;
    view_when(&agent, &run, "stop_billing", "state", json!("ready")).await;
    let claimed = claim(&agent, &run, "stop_billing").await;
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
        "stop_billing",
        json!({ "decision": "completed", "output": { "stoppedItems": ["SUB-1", "SUB-2"] },
                "evidence": [{ "kind": "link", "ref": "https://billing.test/AC-1" }],
                "summary": "Confirmed the export by phone and stopped both items." }),
    )
    .await;
    let stop_billing = &completed["data"]["steps"]["stop_billing"];
    assert_eq!(stop_billing["by"], "ops@acme.test");
    assert_eq!(stop_billing["output"]["stoppedItems"], json!(["SUB-1", "SUB-2"]));
    assert_eq!(step_state(&completed, "final_statement"), "ready");

    let claimed = claim(&agent, &run, "final_statement").await;
    let stated = submit(
        &agent,
        &claimed["token"],
        json!({ "output": { "statementId": "ST-9", "amountDue": 120.25, "currency": "EUR" },
                "evidence": [{ "kind": "link", "ref": "https://billing.test/ST-9" }],
                "summary": "Final statement created with an amount due.",
                "next": "payment_event", "reason": "120.25 EUR is still open" }),
    )
    .await;
    assert_eq!(step_state(&stated, "payment_event"), "waiting");
    let consumed = agent
        .ok(
            "send_event",
            json!({ "runId": run, "name": "statement-paid", "data": { "payment": "PAY-9" },
                    "requestId": request_id() }),
        )
        .await;
    assert_eq!(consumed, json!({ "consumedBy": "payment_event" }));
    let claimed = claim(&agent, &run, "check_payment").await;
    assert_eq!(
        claimed["data"]["steps"]["payment_event"]["output"],
        json!({ "payment": "PAY-9" })
    );
    assert_eq!(claimed["data"]["steps"]["payment_event"]["by"], "a_closure");
    submit(
        &agent,
        &claimed["token"],
        json!({ "output": { "ledgerNote": "ST-9 paid by PAY-9" },
                "evidence": [{ "kind": "link", "ref": "https://ledger.test/ST-9" }],
                "summary": "The ledger shows ST-9 paid.",
                "next": "data_review", "reason": "Ledger shows a zero balance" }),
    )
    .await;
    decide(
        &privacy,
        &run,
        "data_review",
        json!({ "decision": "completed",
                "output": { "erasureScope": "All CRM and billing data", "keptRecords": "Statements, 10y" },
                "evidence": [{ "kind": "link", "ref": "https://inventory.test/AC-1" }] }),
    )
    .await;
    let claimed = claim(&agent, &run, "erase_data").await;
    submit(
        &agent,
        &claimed["token"],
        json!({ "output": { "erasureReceipts": ["crm:ER-1", "billing:ER-2"] },
                "evidence": [{ "kind": "link", "ref": "https://inventory.test/AC-1/jobs" }],
                "summary": "Erased CRM and billing data in scope." }),
    )
    .await;
    let closed = decide(
        &privacy,
        &run,
        "confirm_erasure",
        json!({ "decision": "completed", "output": { "closingStatement": "All data in scope erased" },
                "evidence": [{ "kind": "link", "ref": "https://inventory.test/AC-1/done" }] }),
    )
    .await;
    assert_finished(&closed, "closed");
    assert_eq!(step_state(&closed, "collections"), Value::Null);

    // An escalation decided `failed`: the run ends failed with the note.
    let started = start(
        &manager,
        "account-closure",
        json!({ "accountId": "AC-2", "closeAt": "2020-01-01T00:00:00Z" }),
    )
    .await;
    let failing = run_id(&started);
    let confirmed = decide(
        &manager,
        &failing,
        "confirm_request",
        json!({ "decision": "approved" }),
    )
    .await;
    assert_eq!(
        step_state(&confirmed, "closing_time"),
        "done",
        "a past time goes on at once"
    );
    let claimed = claim(&agent, &failing, "stop_billing").await;
    agent
        .ok(
            "escalate",
            json!({ "token": claimed["token"], "note": "Item S-3 cannot be stopped",
                    "requestId": request_id() }),
        )
        .await;
    let failed = decide(
        &ops,
        &failing,
        "stop_billing",
        json!({ "decision": "failed", "note": "Contract forbids stopping S-3 this year" }),
    )
    .await;
    assert_eq!(failed["run"]["state"], "ended");
    assert_eq!(failed["run"]["outcome"], "failed");
    assert_eq!(failed["run"]["ended"]["by"], "ops@acme.test");
    assert_eq!(
        failed["run"]["ended"]["note"],
        "Contract forbids stopping S-3 this year"
    );
    assert_eq!(step_state(&failed, "stop_billing"), "failed");
    assert_eq!(step_state(&failed, "final_statement"), Value::Null);
    let record = &failed["data"]["steps"]["stop_billing"];
    assert_eq!(record["decision"], "failed");
    assert_eq!(record["note"], "Contract forbids stopping S-3 this year");
    assert_eq!(record["by"], "ops@acme.test");
    assert_eq!(failed["workItems"], json!([]));

    // Cancellation: only an operator; then the run's open work is gone and writes are refused.
    let started = start(
        &manager,
        "account-closure",
        json!({ "accountId": "AC-3", "closeAt": "2020-01-01T00:00:00Z" }),
    )
    .await;
    let cancelled_run = run_id(&started);
    let stale_item = person_item(&manager, &cancelled_run, "confirm_request").await;
    for not_operator in [&manager, &agent] {
        not_operator
            .refused(
                "cancel",
                json!({ "runId": cancelled_run, "reason": "Customer stays", "requestId": request_id() }),
                "forbidden",
            )
            .await;
    }
    assert_eq!(get_run(&manager, &cancelled_run).await["run"]["state"], "waiting");
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
    assert_eq!(step_state(&cancelled, "confirm_request"), "cancelled");
    assert!(
        find_work_item(&manager, &cancelled_run, "confirm_request")
            .await
            .is_none()
    );
    assert_eq!(get_run(&manager, &cancelled_run).await, cancelled);

    let mut decide_args = stale_item["workItem"]["decide"]["arguments"].clone();
    decide_args = with(
        decide_args,
        json!({ "requestId": request_id(), "decision": "approved" }),
    );
    let refusals = [
        manager.refused("decide", decide_args, "conflict").await,
        agent
            .refused(
                "send_event",
                json!({ "runId": cancelled_run, "name": "statement-paid", "requestId": request_id() }),
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
    assert_eq!(get_run(&manager, &cancelled_run).await, cancelled);

    // A claimed step of a cancelled run: its token stops working, a replay still answers.
    let started = start(
        &manager,
        "account-closure",
        json!({ "accountId": "AC-4", "closeAt": "2020-01-01T00:00:00Z" }),
    )
    .await;
    let claimed_run = run_id(&started);
    decide(
        &manager,
        &claimed_run,
        "confirm_request",
        json!({ "decision": "approved" }),
    )
    .await;
    agent_item(&agent, &claimed_run, "stop_billing").await;
    let claim_args = json!({ "runId": claimed_run, "stepId": "stop_billing", "requestId": request_id() });
    let claimed = agent.ok("claim", claim_args.clone()).await;
    let cancelled = ops
        .ok(
            "cancel",
            json!({ "runId": claimed_run, "reason": "Duplicate request", "requestId": request_id() }),
        )
        .await;
    assert_eq!(step_state(&cancelled, "stop_billing"), "cancelled");
    let refusals = [
        agent
            .refused(
                "submit",
                json!({ "token": claimed["token"], "requestId": request_id(),
                        "output": { "stoppedItems": ["SUB-4"] },
                        "evidence": [{ "kind": "link", "ref": "https://billing.test/AC-4" }],
                        "summary": "Stopped." }),
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
    assert_eq!(get_run(&manager, &claimed_run).await, cancelled);
    for client in [manager, privacy, agent, ops] {
        client.close().await;
    }
}
