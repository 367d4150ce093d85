//! `agentprocess runs list|cancel`, `work list` and `escalations list` run as real processes
//! against the built `agentprocess serve`, on runs made through MCP: filters, paging, stuck runs
//! found by moving the server's clock (`POST /admin/v1/clock`), cancels and their refusals
//! (spec §3.5, tools.md `cancel`), exit codes, tables and `--json`.

mod common;

use common::{ORG, Server, Who, request_id, status_and_json};
use serde_json::{Value, json};
use std::process::Command;

const OPS: Who = Who::Operator("ops@acme.test", &["ops"]);
const AGENT: Who = Who::Agent("ap-bot");

/// What one run of the command gave.
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn json(&self) -> Value {
        assert_eq!(self.code, 0, "stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {}", self.stdout))
    }

    fn table(&self) -> &str {
        assert_eq!(self.code, 0, "stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        &self.stdout
    }
}

/// Runs `agentprocess ARGS --server URL --token TOKEN`, without the caller's AGENTPROCESS_*
/// environment, off the async workers.
async fn cli(server: &Server, token: &str, args: &[&str]) -> Ran {
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    all.extend([
        "--server".into(),
        server.url.clone(),
        "--token".into(),
        token.to_owned(),
    ]);
    agentprocess(all).await
}

async fn agentprocess(args: Vec<String>) -> Ran {
    tokio::task::spawn_blocking(move || {
        let output = Command::new(env!("CARGO_BIN_EXE_agentprocess"))
            .args(&args)
            .env_remove("AGENTPROCESS_URL")
            .env_remove("AGENTPROCESS_TOKEN")
            .output()
            .expect("run agentprocess");
        Ran {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    })
    .await
    .unwrap()
}

fn ids(page: &Value, field: &str) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item[field].as_str().unwrap().to_owned())
        .collect()
}

fn run_id(view: &Value) -> String {
    view["run"]["id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_list_filters_pages_and_finds_the_stuck_run() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("purchase-request");
    server.publish_example("defect-triage");
    let ops = server.token(&OPS);
    let agent = server.client(&AGENT).await;

    let old = run_id(&agent.start_purchase_request("PR-1").await);
    // Ten minutes pass with PR-1's assess step ready and unclaimed.
    server.advance(600).await;
    let fresh = run_id(&agent.start_purchase_request("PR-2").await);
    let third = run_id(&agent.start_purchase_request("PR-3").await);
    let report = run_id(
        &agent
            .ok(
                "start_run",
                json!({ "process": "defect-triage", "inputs": { "reportId": "BUG-9" },
                        "requestId": request_id() }),
            )
            .await,
    );

    // The process filter: list_runs' own, in start order.
    let requests = cli(
        &server,
        &ops,
        &["runs", "list", "--process", "purchase-request", "--json"],
    )
    .await
    .json();
    assert_eq!(ids(&requests, "id"), [old.clone(), fresh.clone(), third.clone()]);
    assert_eq!(requests["nextCursor"], Value::Null);
    let everything = cli(&server, &ops, &["runs", "list", "--json"]).await.json();
    assert_eq!(everything["items"].as_array().unwrap().len(), 4);
    assert!(ids(&everything, "id").contains(&report));

    // An input filter matches on equality of the given field.
    let second = cli(
        &server,
        &ops,
        &["runs", "list", "--input", "requestId=PR-2", "--json"],
    )
    .await
    .json();
    assert_eq!(ids(&second, "id"), [fresh.as_str()]);
    assert_eq!(second["items"][0]["inputs"]["requestId"], "PR-2");

    // Paging: list_runs' cursor carries the filters' listing on.
    let first_page = cli(
        &server,
        &ops,
        &[
            "runs",
            "list",
            "--process",
            "purchase-request",
            "--limit",
            "2",
            "--json",
        ],
    )
    .await
    .json();
    assert_eq!(ids(&first_page, "id"), [old.clone(), fresh.clone()]);
    let cursor = first_page["nextCursor"]
        .as_str()
        .expect("a second page")
        .to_owned();
    let second_page = cli(
        &server,
        &ops,
        &[
            "runs",
            "list",
            "--process",
            "purchase-request",
            "--limit",
            "2",
            "--cursor",
            &cursor,
            "--json",
        ],
    )
    .await
    .json();
    assert_eq!(ids(&second_page, "id"), [third.as_str()]);
    assert_eq!(second_page["nextCursor"], Value::Null);
    // The table says the same for people, and where the next page is.
    let table = cli(
        &server,
        &ops,
        &["runs", "list", "--process", "purchase-request", "--limit", "2"],
    )
    .await;
    let lines: Vec<&str> = table.table().lines().collect();
    assert!(lines[0].starts_with("RUN "), "{}", table.stdout);
    assert!(
        lines[0].contains("PROCESS") && lines[0].contains("STARTED"),
        "{}",
        table.stdout
    );
    assert!(
        lines[1].starts_with(&old) && lines[1].contains("purchase-request"),
        "{}",
        table.stdout
    );
    assert_eq!(lines[3], format!("more: --cursor {cursor}"));
    // Columns line up: every row's second column starts where the header's does.
    let column = lines[0].find("PROCESS").unwrap();
    assert_eq!(
        lines[1].find("purchase-request"),
        Some(column),
        "{}",
        table.stdout
    );
    // list_runs refuses a limit it does not take, with its own code: exit 1.
    let refused = cli(&server, &ops, &["runs", "list", "--limit", "500"]).await;
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("refused (invalid)"), "{}", refused.stderr);
    assert!(refused.stderr.contains("limit"), "{}", refused.stderr);

    // --stuck: only the run whose ready step waited past the threshold, not the fresh ones.
    let stuck = cli(&server, &ops, &["runs", "list", "--stuck", "5m", "--json"])
        .await
        .json();
    assert_eq!(ids(&stuck, "id"), [old.as_str()]);
    let step = &stuck["items"][0]["stuck"];
    assert_eq!(step["stepId"], "assess");
    assert!(step["ageSeconds"].as_u64().unwrap() >= 600, "{step}");
    let stuck_table = cli(&server, &ops, &["runs", "list", "--stuck", "5m"]).await;
    let lines: Vec<&str> = stuck_table.table().lines().collect();
    assert_eq!(lines.len(), 2, "{}", stuck_table.stdout);
    assert!(
        lines[0].contains("STUCK STEP") && lines[0].contains("WAITING"),
        "{}",
        stuck_table.stdout
    );
    assert!(
        lines[1].starts_with(&old) && lines[1].contains("assess"),
        "{}",
        stuck_table.stdout
    );
    assert!(
        lines[1].contains(" 10m"),
        "the age as minutes and seconds: {}",
        stuck_table.stdout
    );
    // Beyond every step's wait, nothing; with a short threshold, each ready run, longest first.
    let none = cli(&server, &ops, &["runs", "list", "--stuck", "1h", "--json"])
        .await
        .json();
    assert_eq!(none["items"], json!([]));
    server.advance(120).await;
    let all_stuck = cli(
        &server,
        &ops,
        &[
            "runs",
            "list",
            "--stuck",
            "1m",
            "--process",
            "purchase-request",
            "--json",
        ],
    )
    .await
    .json();
    assert_eq!(ids(&all_stuck, "id"), [old.clone(), fresh.clone(), third.clone()]);
    // The stuck listing pages with its own cursor, and filters as list_runs does.
    let stuck_page = cli(
        &server,
        &ops,
        &["runs", "list", "--stuck", "1m", "--limit", "1", "--json"],
    )
    .await
    .json();
    assert_eq!(ids(&stuck_page, "id"), [old.as_str()]);
    let stuck_cursor = stuck_page["nextCursor"].as_str().unwrap().to_owned();
    let stuck_next = cli(
        &server,
        &ops,
        &[
            "runs",
            "list",
            "--stuck",
            "1m",
            "--limit",
            "1",
            "--cursor",
            &stuck_cursor,
            "--json",
        ],
    )
    .await
    .json();
    assert_eq!(ids(&stuck_next, "id"), [fresh.as_str()]);
    let by_input = cli(
        &server,
        &ops,
        &[
            "runs",
            "list",
            "--stuck",
            "1m",
            "--input",
            "reportId=BUG-9",
            "--json",
        ],
    )
    .await
    .json();
    assert_eq!(ids(&by_input, "id"), [report.as_str()]);
    agent.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_cancel_cancels_once_and_is_refused_as_mcp_refuses() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("purchase-request");
    server.publish_example_in("globex", "purchase-request");
    let ops = server.token(&OPS);
    let agent = server.client(&AGENT).await;
    let run = run_id(&agent.start_purchase_request("PR-7").await);

    let cancelled = cli(
        &server,
        &ops,
        &["runs", "cancel", &run, "--reason", "duplicate of PR-6"],
    )
    .await;
    let line = cancelled.table().trim().to_owned();
    assert!(line.starts_with(&format!("{run}: cancelled")), "{line}");
    assert!(
        line.contains("by ops@acme.test") && line.ends_with(": duplicate of PR-6"),
        "{line}"
    );
    // The protocol's run view says the same to an MCP client (spec §3.5).
    let view = agent.ok("get_run", json!({ "runId": run })).await;
    assert_eq!(view["run"]["state"], "cancelled");
    assert_eq!(view["run"]["ended"]["note"], "duplicate of PR-6");
    assert_eq!(view["run"]["ended"]["by"], "ops@acme.test");

    // A second cancel: the run has ended; the protocol's code and issue, exit 1.
    let again = cli(&server, &ops, &["runs", "cancel", &run, "--reason", "again"]).await;
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert!(again.stderr.contains("refused (conflict)"), "{}", again.stderr);
    assert!(
        again.stderr.lines().any(|line| line == "run_ended"),
        "{}",
        again.stderr
    );
    // The same over HTTP: 409 with the tool's error.
    let http = reqwest::Client::new();
    let response = http
        .post(format!("{}/admin/v1/runs/{run}/cancel", server.url))
        .bearer_auth(&ops)
        .json(&json!({ "reason": "again" }))
        .send()
        .await
        .unwrap();
    let (status, body) = status_and_json(response).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "conflict");
    assert_eq!(body["error"]["issues"], json!(["run_ended"]));

    // A missing reason is the protocol's `invalid`, nothing cancelled.
    let open = run_id(&agent.start_purchase_request("PR-8").await);
    let response = http
        .post(format!("{}/admin/v1/runs/{open}/cancel", server.url))
        .bearer_auth(&ops)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let (status, body) = status_and_json(response).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid");
    assert!(body["error"]["issues"].to_string().contains("reason"), "{body}");
    assert_eq!(
        agent.ok("get_run", json!({ "runId": open })).await["run"]["state"],
        "active"
    );

    // Another organization's run is not found there.
    let globex_ops = server.token_in("globex", &OPS);
    let elsewhere = cli(
        &server,
        &globex_ops,
        &["runs", "cancel", &open, "--reason", "not ours"],
    )
    .await;
    assert_eq!(elsewhere.code, 1, "{}", elsewhere.stderr);
    assert!(
        elsewhere.stderr.contains("refused (not_found)"),
        "{}",
        elsewhere.stderr
    );

    // --json prints the run view as the server answered.
    let view = cli(
        &server,
        &ops,
        &["runs", "cancel", &open, "--reason", "test", "--json"],
    )
    .await
    .json();
    assert_eq!(view["run"]["id"], open.as_str());
    assert_eq!(view["run"]["state"], "cancelled");
    assert!(view["steps"].is_array() && view["data"].is_object());

    // Not an operator: 403, exit 2, for every verb.
    let person = server.token(&Who::Person("mira@acme.test", &["finance"]));
    for verb in [
        vec!["runs", "list"],
        vec!["runs", "cancel", &open, "--reason", "x"],
        vec!["work", "list"],
        vec!["escalations", "list"],
    ] {
        let refused = cli(&server, &person, &verb).await;
        assert_eq!(refused.code, 2, "{verb:?}: {}", refused.stderr);
        assert!(
            refused.stderr.contains("operator"),
            "{verb:?}: {}",
            refused.stderr
        );
    }
    let response = http
        .get(format!("{}/admin/v1/runs", server.url))
        .bearer_auth(&person)
        .send()
        .await
        .unwrap();
    let (status, body) = status_and_json(response).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "forbidden");
    // A token the server does not accept, and a server that is not there: exit 2.
    let bad = cli(&server, "not-a-token", &["runs", "list"]).await;
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    let nowhere = agentprocess(
        ["runs", "list", "--server", "http://127.0.0.1:9", "--token", &ops]
            .map(String::from)
            .to_vec(),
    )
    .await;
    assert_eq!(nowhere.code, 2, "{}", nowhere.stderr);
    assert!(nowhere.stderr.contains("cannot reach"), "{}", nowhere.stderr);
    let usage = agentprocess(["runs", "list", "--stuck", "soon"].map(String::from).to_vec()).await;
    assert_eq!(usage.code, 2, "{}", usage.stderr);
    agent.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn work_list_is_oldest_first_and_escalations_list_shows_the_note() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("purchase-request");
    let ops = server.token(&OPS);
    let agent = server.client(&AGENT).await;
    let first = run_id(&agent.start_purchase_request("PR-1").await);
    server.advance(300).await;
    let second = run_id(&agent.start_purchase_request("PR-2").await);
    server.advance(300).await;
    let third = run_id(&agent.start_purchase_request("PR-3").await);

    let work = cli(&server, &ops, &["work", "list", "--json"]).await.json();
    assert_eq!(
        ids(&work, "runId"),
        [first.clone(), second.clone(), third.clone()]
    );
    assert_eq!(work["items"][0]["stepId"], "assess");
    assert_eq!(work["items"][0]["process"], "purchase-request");
    assert!(work["items"][0]["ageSeconds"].as_u64().unwrap() >= 600);
    assert!(work["items"][1]["ageSeconds"].as_u64().unwrap() >= 300);
    let older = cli(&server, &ops, &["work", "list", "--older-than", "4m", "--json"])
        .await
        .json();
    assert_eq!(ids(&older, "runId"), [first.clone(), second.clone()]);
    assert_eq!(older["nextCursor"], Value::Null);
    let oldest = cli(&server, &ops, &["work", "list", "--older-than", "9m", "--json"])
        .await
        .json();
    assert_eq!(ids(&oldest, "runId"), [first.as_str()]);
    let page = cli(&server, &ops, &["work", "list", "--limit", "1", "--json"])
        .await
        .json();
    assert_eq!(ids(&page, "runId"), [first.as_str()]);
    let cursor = page["nextCursor"].as_str().unwrap().to_owned();
    let next = cli(
        &server,
        &ops,
        &["work", "list", "--limit", "1", "--cursor", &cursor, "--json"],
    )
    .await
    .json();
    assert_eq!(ids(&next, "runId"), [second.as_str()]);
    // A token minted with the server's dev key from --data, for the URL it recorded.
    let table = agentprocess(
        [
            "work",
            "list",
            "--older-than",
            "4m",
            "--data",
            data.path().to_str().unwrap(),
            "--org",
            ORG,
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    let lines: Vec<&str> = table.table().lines().collect();
    assert_eq!(lines.len(), 3, "{}", table.stdout);
    assert!(
        lines[0].contains("READY SINCE") && lines[0].contains("WAITING"),
        "{}",
        table.stdout
    );
    assert!(
        lines[1].starts_with(&first) && lines[1].contains(" 10m"),
        "{}",
        table.stdout
    );
    assert!(
        lines[2].starts_with(&second) && lines[2].contains(" 5m"),
        "{}",
        table.stdout
    );

    // PR-2's claim lapses: its step is ready again and says how often it lapsed; the filter
    // keeps only it.
    agent
        .ok(
            "claim",
            json!({ "runId": second, "stepId": "assess", "requestId": request_id() }),
        )
        .await;
    server.advance(601).await;
    // The scheduler lets the lease lapse as the clock passes it, not before advance answers.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let work = loop {
        let work = cli(&server, &ops, &["work", "list", "--json"]).await.json();
        if work["items"].as_array().unwrap().len() == 3 || std::time::Instant::now() > deadline {
            break work;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(
        ids(&work, "runId"),
        [first.clone(), second.clone(), third.clone()],
        "a lapsed claim leaves the step where it waited: {work}"
    );
    assert_eq!(work["items"][0]["leaseExpiries"], 0);
    assert_eq!(work["items"][1]["leaseExpiries"], 1);
    let lapsed = cli(
        &server,
        &ops,
        &["work", "list", "--lease-expired-more-than", "0", "--json"],
    )
    .await
    .json();
    assert_eq!(ids(&lapsed, "runId"), [second.as_str()]);
    let lapsed_twice = cli(
        &server,
        &ops,
        &["work", "list", "--lease-expired-more-than", "1", "--json"],
    )
    .await
    .json();
    assert_eq!(lapsed_twice["items"], json!([]));
    let table = cli(&server, &ops, &["work", "list", "--lease-expired-more-than", "0"]).await;
    let lines: Vec<&str> = table.table().lines().collect();
    assert!(lines[0].contains("LAPSED"), "{}", table.stdout);
    assert!(
        lines[1].starts_with(&second) && lines[1].trim_end().ends_with(" 1"),
        "{}",
        table.stdout
    );

    // The agent escalates PR-3's assess: it leaves the unclaimed work, and is an escalation.
    let claimed = agent
        .ok(
            "claim",
            json!({ "runId": third, "stepId": "assess", "requestId": request_id() }),
        )
        .await;
    let note = "The quote is in EUR; need the treasury's USD amount.";
    agent
        .ok(
            "escalate",
            json!({ "token": claimed["token"], "note": note, "requestId": request_id() }),
        )
        .await;
    let work = cli(&server, &ops, &["work", "list", "--json"]).await.json();
    assert_eq!(ids(&work, "runId"), [first.clone(), second.clone()]);
    let escalations = cli(&server, &ops, &["escalations", "list", "--json"])
        .await
        .json();
    assert_eq!(escalations["items"].as_array().unwrap().len(), 1, "{escalations}");
    let escalation = &escalations["items"][0];
    assert_eq!(escalation["runId"], third.as_str());
    assert_eq!(escalation["stepId"], "assess");
    assert_eq!(escalation["escalatedBy"], "ap-bot");
    assert_eq!(escalation["note"], note);
    assert_eq!(escalations["truncated"], false);
    let table = cli(&server, &ops, &["escalations", "list"]).await;
    let lines: Vec<&str> = table.table().lines().collect();
    assert_eq!(lines.len(), 2, "{}", table.stdout);
    assert!(
        lines[0].starts_with("RUN ") && lines[0].ends_with("NOTE"),
        "{}",
        table.stdout
    );
    assert!(
        lines[1].starts_with(&third) && lines[1].ends_with(note),
        "{}",
        table.stdout
    );
    // Only a person decides an escalation: an agent operator has no queue (403, exit 2).
    let agent_operator = server.token(&Who::AgentOperator("ops-bot"));
    let refused = cli(&server, &agent_operator, &["escalations", "list"]).await;
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("person"), "{}", refused.stderr);
    agent.close().await;
}

/// The escalation path (spec §3.3 escalate, §3.4 decide): escalated with a note, returned with a
/// note, completed. `runs history` lists every event with its notes, as a table and as JSON, also
/// once the run is archived; `runs show` says who holds a claim until when.
#[tokio::test(flavor = "multi_thread")]
async fn runs_show_and_history_follow_an_escalation_to_the_end_and_into_the_archive() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        data.path(),
        &[],
        &[("AGENTPROCESS_ARCHIVE_ENDED_RUNS_AFTER_SECONDS", "60")],
    );
    server.publish_example("purchase-request");
    let ops = server.token(&OPS);
    let agent = server.client(&AGENT).await;
    let operator = server.client(&OPS).await;
    let run = run_id(&agent.start_purchase_request("PR-H1").await);
    let claim = |run: String| json!({ "runId": run, "stepId": "assess", "requestId": request_id() });
    let claimed = agent.ok("claim", claim(run.clone())).await;

    let shown = cli(&server, &ops, &["runs", "show", &run]).await;
    let assess = shown
        .table()
        .lines()
        .find(|line| line.starts_with("assess"))
        .unwrap();
    let expires_at = claimed["expiresAt"].as_str().unwrap();
    assert!(
        assess.contains("claimed") && assess.contains("ap-bot"),
        "{}",
        shown.stdout
    );
    let shown = cli(&server, &ops, &["runs", "show", &run, "--json"]).await.json();
    assert_eq!(shown["steps"][0]["claim"]["holder"], "ap-bot");
    assert_eq!(
        shown["steps"][0]["claim"]["expiresAt"]
            .as_str()
            .map(|at| at[..19].to_owned()),
        Some(expires_at[..19].to_owned())
    );

    agent
        .ok(
            "escalate",
            json!({ "token": claimed["token"], "note": "The quote is in EUR.", "requestId": request_id() }),
        )
        .await;
    let item = operator.ok("get_work", json!({})).await["items"][0].clone();
    operator
        .ok(
            "decide",
            json!({
                "runId": run, "workItemId": item["workItem"]["id"], "snapshot": item["workItem"]["snapshot"],
                "decision": "returned", "note": "Treasury values it at 4350 USD.", "requestId": request_id(),
            }),
        )
        .await;
    operator
        .ok(
            "cancel",
            json!({ "runId": run, "reason": "Paid by card instead.", "requestId": request_id() }),
        )
        .await;

    let history = cli(&server, &ops, &["runs", "history", &run]).await;
    let table = history.table().to_owned();
    for part in [
        "started the run",
        "claimed assess",
        "note: The quote is in EUR.",
        "note: Treasury values it at 4350 USD.",
        "reason: Paid by card instead.",
        "the run cancelled",
    ] {
        assert!(table.contains(part), "{part} in:\n{table}");
    }
    let events = cli(&server, &ops, &["runs", "history", &run, "--json"])
        .await
        .json();
    let kinds: Vec<&str> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "started",
            "claimed",
            "escalated",
            "returned",
            "cancelled",
            "ended"
        ],
        "{events}"
    );

    // Archived: the same history, read through the archive.
    server.advance(61).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while common::archived_runs(data.path()) == 0 {
        assert!(std::time::Instant::now() < deadline, "the run was never archived");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let archived = cli(&server, &ops, &["runs", "history", &run, "--json"])
        .await
        .json();
    assert_eq!(archived, events);
    let table_after = cli(&server, &ops, &["runs", "history", &run]).await;
    assert_eq!(table_after.table(), table);

    let not_found = cli(&server, &ops, &["runs", "history", "r_nothing"]).await;
    assert_eq!(not_found.code, 1, "{}", not_found.stderr);
    let agent_token = server.token(&AGENT);
    let forbidden = cli(&server, &agent_token, &["runs", "show", &run]).await;
    assert_eq!(forbidden.code, 2, "{}", forbidden.stderr);
    agent.close().await;
    operator.close().await;
}
