//! Protocol rules through MCP over HTTP against `agentprocess serve`, one test per rule and named
//! by the section it checks: who escalations reach, who may cancel, `requires` in the catalog,
//! the order of `decide`'s errors, tokens that do not verify, the handoff after a refused
//! completion, and what the specification accepts that a stricter reading refused.

mod common;

use agentprocess_testkit::run_view::step_state;
use common::{Mcp, Server, Who, request_id, status_and_json};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const TRIAGER: Who = Who::Agent("a_triage");
/// An operator who is in no group named `operators` (as the README's own OPS token).
const OPS: Who = Who::Operator("ops@acme.test", &["ops"]);
/// A person in a group that happens to be called `operators`, without operator rights.
const NOT_AN_OPERATOR: Who = Who::Person("desk@acme.test", &["operators"]);
const MANAGER_A: Who = Who::Person("manager-a@acme.test", &["account-manager"]);
const MANAGER_B: Who = Who::Person("manager-b@acme.test", &["account-manager"]);
const PROCUREMENT_A: Who = Who::Person("proc-a@acme.test", &["procurement-ops"]);
const PROCUREMENT_B: Who = Who::Person("proc-b@acme.test", &["procurement-ops"]);

/// A defect-triage run whose first step, the agent step `triage`, is ready.
async fn start_report(client: &Mcp, report: &str) -> String {
    let view = client
        .ok(
            "start_run",
            json!({ "process": "defect-triage", "inputs": { "reportId": report },
                    "requestId": request_id() }),
        )
        .await;
    view["run"]["id"].as_str().unwrap().to_owned()
}

async fn claim(agent: &Mcp, run_id: &str, step: &str) -> Value {
    agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": step, "requestId": request_id() }),
        )
        .await
}

/// Claims `triage` and escalates it with a note; returns the escalate result.
async fn escalate_triage(agent: &Mcp, run_id: &str) -> Value {
    let claimed = claim(agent, run_id, "triage").await;
    agent
        .ok(
            "escalate",
            json!({ "token": claimed["token"], "note": "The logs are not readable.",
                    "requestId": request_id() }),
        )
        .await
}

/// The person's open work items of `run_id`, from `get_work`.
async fn work_items(person: &Mcp, run_id: &str) -> Vec<Value> {
    let work = person.ok("get_work", json!({ "limit": 100 })).await;
    work["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["runId"] == run_id)
        .map(|item| item["workItem"].clone())
        .collect()
}

/// The one open work item of `run_id` the person sees.
async fn only_item(person: &Mcp, run_id: &str) -> Value {
    let items = work_items(person, run_id).await;
    assert_eq!(items.len(), 1, "{items:?}");
    items[0].clone()
}

/// A `decide` call on `item` with `decision` and the fields of `extra`; returns the envelope.
async fn decide(person: &Mcp, run_id: &str, item: &Value, decision: &str, extra: Value) -> Value {
    let mut arguments = json!({
        "runId": run_id, "workItemId": item["id"], "snapshot": item["snapshot"],
        "decision": decision, "requestId": request_id(),
    });
    for (key, value) in extra.as_object().unwrap() {
        arguments[key] = value.clone();
    }
    person.call("decide", arguments).await
}

/// The `PROCESS.md` of an accepted case of the process crate's corpus.
fn accepted_case(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("process/tests/corpus/accepted")
        .join(name)
        .join("PROCESS.md")
}

/// Imports `path` as a draft through the admin API as `OPS`; returns the 201 answer.
async fn import_draft(server: &Server, path: &Path) -> Value {
    let imported = reqwest::Client::new()
        .post(format!("{}/admin/v1/processes", server.url))
        .bearer_auth(server.token(&OPS))
        .body(std::fs::read(path).unwrap())
        .send()
        .await
        .unwrap();
    let (status, answer) = status_and_json(imported).await;
    assert_eq!(status, 201, "{answer}");
    answer
}

fn code(envelope: &Value) -> &str {
    envelope["error"]["code"].as_str().unwrap_or("ok")
}

fn issues(envelope: &Value) -> Value {
    envelope["error"]["issues"].clone()
}

/// Spec §3.3: an escalated step "waits on a person in the organization's operator queue". By
/// default every operator gets it, whatever their groups, and decides it; a person in a group
/// that is merely called `operators` neither sees nor decides it.
#[tokio::test(flavor = "multi_thread")]
async fn spec_3_3_escalations_reach_every_operator_by_default() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("defect-triage");
    let agent = server.client(&TRIAGER).await;
    let ops = server.client(&OPS).await;
    let outsider = server.client(&NOT_AN_OPERATOR).await;

    let run_id = start_report(&agent, "BUG-1").await;
    let escalated = escalate_triage(&agent, &run_id).await;
    assert_eq!(step_state(&escalated, "triage"), "waiting");

    let item = only_item(&ops, &run_id).await;
    assert_eq!(item["stepId"], "triage");
    assert_eq!(item["escalation"]["note"], "The logs are not readable.");
    assert_eq!(item["assignedTo"], json!({ "group": "operators" }));
    assert!(work_items(&outsider, &run_id).await.is_empty());
    let refused = decide(
        &outsider,
        &run_id,
        &item,
        "returned",
        json!({ "note": "Try again" }),
    )
    .await;
    assert_eq!(code(&refused), "forbidden", "{refused}");

    let returned = decide(&ops, &run_id, &item, "returned", json!({ "note": "Logs fixed" })).await;
    assert_eq!(returned["ok"], true, "{returned}");
    assert_eq!(step_state(&returned["data"], "triage"), "ready");
    assert!(work_items(&ops, &run_id).await.is_empty());
}

/// Spec §3.3 "or wherever the server is configured to send escalations": `escalation_group`
/// adds its members to the operator queue. An operator who is also in that group sees the item
/// once; a member without operator rights sees and decides it.
#[tokio::test(flavor = "multi_thread")]
async fn spec_3_3_a_named_escalation_group_joins_the_operator_queue() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(data.path(), &[], &[("AGENTPROCESS_ESCALATION_GROUP", "tier2")]);
    server.publish_example("defect-triage");
    let agent = server.client(&TRIAGER).await;
    let operator_in_group = server.client(&Who::Operator("lead@acme.test", &["tier2"])).await;
    let member = server.client(&Who::Person("t2@acme.test", &["tier2"])).await;

    let run_id = start_report(&agent, "BUG-2").await;
    escalate_triage(&agent, &run_id).await;
    let seen = only_item(&operator_in_group, &run_id).await;
    assert_eq!(seen["assignedTo"], json!({ "group": "tier2" }));
    let item = only_item(&member, &run_id).await;
    let returned = decide(&member, &run_id, &item, "returned", json!({ "note": "Retry" })).await;
    assert_eq!(returned["ok"], true, "{returned}");
}

/// Spec §3.3, configured the other way: `escalate_to_operators = false` makes the named group
/// the only place escalations go, so an operator outside it neither sees nor decides them.
#[tokio::test(flavor = "multi_thread")]
async fn spec_3_3_an_escalation_group_can_replace_the_operator_queue() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        data.path(),
        &[],
        &[
            ("AGENTPROCESS_ESCALATION_GROUP", "tier2"),
            ("AGENTPROCESS_ESCALATE_TO_OPERATORS", "false"),
        ],
    );
    server.publish_example("defect-triage");
    let agent = server.client(&TRIAGER).await;
    let ops = server.client(&OPS).await;
    let member = server.client(&Who::Person("t2@acme.test", &["tier2"])).await;

    let run_id = start_report(&agent, "BUG-3").await;
    escalate_triage(&agent, &run_id).await;
    assert!(work_items(&ops, &run_id).await.is_empty());
    let item = only_item(&member, &run_id).await;
    let refused = decide(&ops, &run_id, &item, "returned", json!({ "note": "Retry" })).await;
    assert_eq!(code(&refused), "forbidden", "{refused}");
    let returned = decide(&member, &run_id, &item, "returned", json!({ "note": "Retry" })).await;
    assert_eq!(returned["ok"], true, "{returned}");
}

/// Spec §4.1 and §6 rule 4: an agent "can never call decide or cancel"; operator rights on an
/// agent identity change nothing there, while a person operator cancels.
#[tokio::test(flavor = "multi_thread")]
async fn spec_4_1_an_agent_never_cancels_or_decides_even_with_operator_rights() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("defect-triage");
    let agent = server.client(&TRIAGER).await;
    let operator_agent = server.client(&Who::AgentOperator("a_ops")).await;
    let ops = server.client(&OPS).await;

    let run_id = start_report(&agent, "BUG-4").await;
    escalate_triage(&agent, &run_id).await;
    let item = only_item(&ops, &run_id).await;
    let by_agent = decide(
        &operator_agent,
        &run_id,
        &item,
        "returned",
        json!({ "note": "Retry" }),
    )
    .await;
    assert_eq!(code(&by_agent), "forbidden", "{by_agent}");
    let cancel = json!({ "runId": run_id, "reason": "Duplicate report", "requestId": request_id() });
    let refused = operator_agent.call("cancel", cancel.clone()).await;
    assert_eq!(code(&refused), "forbidden", "{refused}");
    assert_eq!(
        agent.ok("get_run", json!({ "runId": run_id })).await["run"]["state"],
        "waiting"
    );
    let cancelled = ops.ok("cancel", cancel).await;
    assert_eq!(cancelled["run"]["state"], "cancelled");
}

/// tools.md `decide`: errors "in the order checked": `run_ended`, `already_decided`,
/// `not_found`, `stale`, `forbidden`, then the arguments and `not_accepted`. A second group
/// member rejecting without a note learns the item was decided.
#[tokio::test(flavor = "multi_thread")]
async fn tools_decide_errors_come_in_the_order_of_the_contract() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("account-closure");
    let manager_a = server.client(&MANAGER_A).await;
    let manager_b = server.client(&MANAGER_B).await;
    let stranger = server
        .client(&Who::Person("stranger@acme.test", &["sales"]))
        .await;
    let ops = server.client(&OPS).await;
    let start = |account: &str| {
        json!({ "process": "account-closure", "requestId": request_id(),
                "inputs": { "accountId": account, "closeAt": "2031-01-01T00:00:00Z" } })
    };
    let no_note = json!({});

    // already_decided before the missing note.
    let run_id = manager_a.ok("start_run", start("A-1")).await["run"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let item = only_item(&manager_b, &run_id).await;
    let approved = decide(&manager_a, &run_id, &item, "approved", json!({})).await;
    assert_eq!(approved["ok"], true, "{approved}");
    let late = decide(&manager_b, &run_id, &item, "rejected", no_note.clone()).await;
    assert_eq!(code(&late), "conflict", "{late}");
    assert_eq!(issues(&late), json!(["already_decided"]));

    // not_found before the arguments.
    let mut unknown = item.clone();
    unknown["id"] = json!("w_999");
    let missing = decide(&manager_b, &run_id, &unknown, "rejected", no_note.clone()).await;
    assert_eq!(code(&missing), "not_found", "{missing}");

    // On an open item: stale, then forbidden, then the arguments.
    let run_id = manager_a.ok("start_run", start("A-2")).await["run"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let item = only_item(&manager_b, &run_id).await;
    let mut old = item.clone();
    old["snapshot"] = json!("0".repeat(64));
    let stale = decide(&manager_b, &run_id, &old, "rejected", no_note.clone()).await;
    assert_eq!(code(&stale), "stale", "{stale}");
    let outside = decide(&stranger, &run_id, &item, "rejected", no_note.clone()).await;
    assert_eq!(code(&outside), "forbidden", "{outside}");
    let bad = decide(&manager_b, &run_id, &item, "rejected", no_note.clone()).await;
    assert_eq!(code(&bad), "invalid", "{bad}");
    assert_eq!(issues(&bad), json!(["note: required with decision rejected"]));

    // run_ended before everything.
    ops.ok(
        "cancel",
        json!({ "runId": run_id, "reason": "The customer stays", "requestId": request_id() }),
    )
    .await;
    let ended = decide(&stranger, &run_id, &old, "rejected", no_note).await;
    assert_eq!(code(&ended), "conflict", "{ended}");
    assert_eq!(issues(&ended), json!(["run_ended"]));
}

/// A token this server issued and replaced, with its last 64 hex digits changed.
fn with_made_up_secret(token: &str) -> String {
    let (head, _) = token.rsplit_once('.').unwrap();
    format!("{head}.{}", "ab".repeat(32))
}

/// tools.md `claim` and spec §4.3: "`invalid` for a token that does not verify, on any tool that
/// takes one"; `stale` only for a token this server issued and has since replaced. Covers a
/// token naming a run that does not exist, another organization's run, and a made-up secret on
/// a generation the run issued.
#[tokio::test(flavor = "multi_thread")]
async fn spec_4_3_a_token_that_does_not_verify_is_invalid_on_every_tool() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("defect-triage");
    server.publish_example_in("globex", "defect-triage");
    let agent = server.client(&TRIAGER).await;
    let other_org_agent = server.client_in("globex", &TRIAGER).await;

    let run_id = start_report(&agent, "BUG-5").await;
    let first = claim(&agent, &run_id, "triage").await["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let renewed = agent
        .ok("renew", json!({ "token": first, "requestId": request_id() }))
        .await;
    let current = renewed["token"].as_str().unwrap().to_owned();
    let other_run = start_report(&other_org_agent, "G-1").await;
    let other_token = claim(&other_org_agent, &other_run, "triage").await["token"]
        .as_str()
        .unwrap()
        .to_owned();

    let calls = |token: &str| {
        [
            ("renew", json!({ "token": token, "requestId": request_id() })),
            (
                "submit",
                json!({ "token": token, "output": {}, "summary": "Done", "requestId": request_id() }),
            ),
            (
                "escalate",
                json!({ "token": token, "note": "Stuck", "requestId": request_id() }),
            ),
        ]
    };
    let nowhere = format!("apt1.r_nowhere.1.{}", "cd".repeat(32));
    for (what, token) in [
        ("a run that does not exist", nowhere.as_str()),
        ("another organization's run", other_token.as_str()),
        (
            "a made-up secret on a replaced generation",
            &with_made_up_secret(&first),
        ),
        (
            "a made-up secret on the current generation",
            &with_made_up_secret(&current),
        ),
        ("not a token at all", "eyJhbGciOi.x.y"),
    ] {
        for (tool, arguments) in calls(token) {
            let refused = agent.call(tool, arguments).await;
            assert_eq!(code(&refused), "invalid", "{tool} with {what}: {refused}");
        }
    }
    for (tool, arguments) in calls(&first) {
        let refused = agent.call(tool, arguments).await;
        assert_eq!(
            code(&refused),
            "stale",
            "{tool} with the replaced token: {refused}"
        );
    }
    // The other organization's claim and this run's current claim are untouched.
    other_org_agent
        .ok(
            "renew",
            json!({ "token": other_token, "requestId": request_id() }),
        )
        .await;
    agent
        .ok("renew", json!({ "token": current, "requestId": request_id() }))
        .await;
}

/// Spec §3.3: a work item's `handoff` holds "the issues if the last submission was not
/// accepted". A person's refused `completed` leaves them for the next member of the group, and
/// changes nothing else (the snapshot still decides).
#[tokio::test(flavor = "multi_thread")]
async fn spec_3_3_a_refused_completion_leaves_its_issues_for_the_next_group_member() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("contractor-setup");
    let procurement_a = server.client(&PROCUREMENT_A).await;
    let procurement_b = server.client(&PROCUREMENT_B).await;
    let started = procurement_a
        .ok(
            "start_run",
            json!({ "process": "contractor-setup", "requestId": request_id(),
                    "inputs": { "contractorId": "K-1", "contractorName": "Ana", "firstDay": "2031-02-03",
                                "sponsor": "boss@acme.test" } }),
        )
        .await;
    let run_id = started["run"]["id"].as_str().unwrap().to_owned();
    let item = only_item(&procurement_a, &run_id).await;
    assert_eq!(item["handoff"], Value::Null);

    let refused = decide(
        &procurement_a,
        &run_id,
        &item,
        "completed",
        json!({ "output": { "vendorRecord": "V-1" }, "summary": "Created" }),
    )
    .await;
    assert_eq!(code(&refused), "not_accepted", "{refused}");
    let expected = issues(&refused);
    assert!(expected.as_array().unwrap().len() >= 3, "{refused}");

    let seen = only_item(&procurement_b, &run_id).await;
    assert_eq!(seen["handoff"], json!({ "issues": expected }), "{seen}");
    assert_eq!(seen["snapshot"], item["snapshot"], "run data did not change");
    let done = decide(
        &procurement_b,
        &run_id,
        &seen,
        "completed",
        json!({ "output": { "vendorRecord": "V-1", "site": "Lisbon", "engagementTitle": "Engineer" },
                "evidence": [{ "kind": "link", "ref": "https://vendors.test/V-1" }],
                "summary": "Created the vendor record" }),
    )
    .await;
    assert_eq!(done["ok"], true, "{done}");
}

/// tools.md `list_processes`: an item carries `requires` when the process declares it (§2.1),
/// and only then; spec §7: the import answer shows what `requires` names.
#[tokio::test(flavor = "multi_thread")]
async fn tools_list_processes_carries_requires_when_the_process_declares_it() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("defect-triage");
    let case = accepted_case("requires-and-every-duration-unit");
    let answer = import_draft(&server, &case).await;
    let systems = json!({ "systems": ["sanctions-screening", "erp"] });
    assert_eq!(answer["draft"]["requires"], systems, "{answer}");
    let (code, out, err) = server.import(&case, &[("finance-approver", "finance")], true);
    assert_eq!(code, 0, "{out}\n{err}");

    let agent = server.client(&TRIAGER).await;
    let listed = agent.ok("list_processes", json!({})).await;
    let items = listed["items"].as_array().unwrap();
    let item = |name: &str| {
        items
            .iter()
            .find(|item| item["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not in {listed}"))
    };
    assert_eq!(item("supplier-onboarding")["requires"], systems);
    assert!(item("defect-triage").get("requires").is_none());
}

/// Spec §2.2 allows `on_timeout` without `timeout` (the schema too): it imports and publishes,
/// and the import answer carries the warning that the route can never be taken.
#[tokio::test(flavor = "multi_thread")]
async fn spec_2_2_on_timeout_without_timeout_publishes_with_a_warning() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let case = accepted_case("on-timeout-without-timeout");
    let answer = import_draft(&server, &case).await;
    assert_eq!(
        answer["draft"]["warnings"],
        json!(["steps[2].on_timeout: never taken: the step has no timeout"])
    );
    let (code, out, err) = server.import(&case, &[("finance-approver", "finance")], true);
    assert_eq!(code, 0, "{out}\n{err}");
}

/// Spec §7 ("publishes only on request") told to a caller: `start_run` of a process that was
/// imported but never published is `not_found` saying so, and a version that does not exist
/// names the latest one.
#[tokio::test(flavor = "multi_thread")]
async fn spec_7_start_run_of_an_unpublished_draft_says_it_is_not_published() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let example = agentprocess_testkit::example("defect-triage");
    let (code, out, err) = server.import(&example, &[], false);
    assert_eq!(code, 0, "{out}\n{err}");
    let agent = server.client(&TRIAGER).await;
    let start = json!({ "process": "defect-triage", "inputs": { "reportId": "BUG-6" },
                        "requestId": request_id() });
    let refused = agent.refused("start_run", start, "not_found").await;
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("draft") && message.contains("not published"),
        "{message}"
    );

    server.publish_example("defect-triage");
    let start = json!({ "process": "defect-triage", "version": 7,
                        "inputs": { "reportId": "BUG-6" }, "requestId": request_id() });
    let refused = agent.refused("start_run", start, "not_found").await;
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("no version 7; its latest published version is 1"),
        "{refused}"
    );
}

/// tools.md `claim` ("Replay with the same requestId: the original result"): an agent that lost
/// its token and claims again is told `claimed_by_you`, how to get the token back and until when
/// the claim holds; the original `requestId` does return the token.
#[tokio::test(flavor = "multi_thread")]
async fn tools_claim_claimed_by_you_says_how_to_recover_the_token() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("defect-triage");
    let agent = server.client(&TRIAGER).await;
    let run_id = start_report(&agent, "BUG-7").await;
    let original = json!({ "runId": run_id, "stepId": "triage", "requestId": request_id() });
    let claimed = agent.ok("claim", original.clone()).await;
    let again = json!({ "runId": run_id, "stepId": "triage", "requestId": request_id() });
    let refused = agent.refused("claim", again, "conflict").await;
    assert_eq!(refused["issues"], json!(["claimed_by_you"]));
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("requestId"), "{message}");
    assert!(
        message.contains(claimed["expiresAt"].as_str().unwrap()),
        "{message}"
    );
    assert_eq!(agent.ok("claim", original).await["token"], claimed["token"]);
}
