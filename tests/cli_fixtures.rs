//! `agentprocess fixtures` and `agentprocess store stats` run as real processes on a data folder,
//! then `agentprocess serve` on it: the fixture runs are ordinary runs to every tool.

mod common;

use common::{Server, Who, request_id};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const OPEN: usize = 3;
const WAITING: usize = 2;
const ENDED: usize = 4;
const TIMERS: usize = 5;
const RUNS: usize = OPEN + WAITING + ENDED + TIMERS;

fn agentprocess(args: &[&str], data: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentprocess"))
        .args(args)
        .arg("--data")
        .arg(data)
        .env_remove("AGENTPROCESS_CONFIG")
        .output()
        .expect("the binary runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Writes the small fixture set of these tests into `data`, in organization `acme`.
fn populate(data: &Path) {
    let counts = [OPEN, WAITING, ENDED, TIMERS].map(|n| n.to_string());
    let output = agentprocess(
        &[
            "fixtures",
            "--open",
            &counts[0],
            "--waiting-on-people",
            &counts[1],
            "--ended",
            &counts[2],
            "--timers",
            &counts[3],
            "--timers-within",
            "1h",
            "--org",
            common::ORG,
        ],
        data,
    );
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains(&format!("wrote {RUNS} runs")),
        "{}",
        text(&output)
    );
}

fn ids(listed: &Value) -> Vec<String> {
    listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Fixture runs served by `serve`: `get_work` shows the open agent steps and the people's work
/// items, `list_runs` the ended runs, `get_run` renders a fixture run that the result schema
/// accepts (the client checks every result), an agent claims and finishes an open one, and the
/// timers fire when their time comes. While the server runs, `fixtures` refuses its store.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_started_on_fixtures_serves_them_as_ordinary_runs() {
    let data = tempfile::tempdir().unwrap();
    populate(data.path());
    let server = Server::start(data.path(), &[]);

    let busy = agentprocess(&["fixtures", "--open", "1"], data.path());
    assert!(!busy.status.success());
    assert!(
        text(&busy).contains("in use by another process"),
        "{}",
        text(&busy)
    );

    let agent = server.client_in("acme", &Who::Agent("a1")).await;
    let work = agent.ok("get_work", json!({})).await;
    let items = work["items"].as_array().unwrap();
    assert_eq!(items.len(), OPEN, "{work}");
    assert!(
        items.iter().all(|item| item["process"] == "load-agent-step"),
        "{work}"
    );

    let approver = server
        .client(&Who::Person("pat@load.example", &["load-approvers"]))
        .await;
    let inbox = approver.ok("get_work", json!({})).await;
    assert_eq!(inbox["items"].as_array().unwrap().len(), WAITING, "{inbox}");

    let ended = agent.ok("list_runs", json!({ "state": "ended" })).await;
    assert_eq!(ids(&ended).len(), ENDED, "{ended}");
    let all = agent.ok("list_runs", json!({ "limit": 100 })).await;
    assert_eq!(ids(&all).len(), RUNS, "{all}");
    let view = agent.ok("get_run", json!({ "runId": ids(&ended)[0] })).await;
    assert_eq!(view["run"]["state"], "ended", "{view}");
    let open_run = items[0]["runId"].as_str().unwrap().to_owned();
    let view = agent.ok("get_run", json!({ "runId": open_run })).await;
    assert_eq!(view["run"]["state"], "active", "{view}");

    let claim = agent
        .ok(
            "claim",
            json!({ "runId": open_run, "stepId": "work", "requestId": request_id() }),
        )
        .await;
    let finished = agent
        .ok(
            "submit",
            json!({
                "token": claim["token"], "requestId": request_id(),
                "output": { "result": 7 }, "summary": "Returned n.",
            }),
        )
        .await;
    assert_eq!(finished["run"]["state"], "ended", "{finished}");
    let ended = agent.ok("list_runs", json!({ "state": "ended" })).await;
    assert_eq!(ids(&ended).len(), ENDED + 1, "{ended}");

    // The timers are spread over the next hour: past it, every timer run has finished.
    server.advance(3600).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let waited = agent
            .ok(
                "list_runs",
                json!({ "process": "fixture-wait", "state": "ended" }),
            )
            .await;
        if ids(&waited).len() == TIMERS {
            break;
        }
        assert!(Instant::now() < deadline, "timers did not fire: {waited}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `store stats --json` of the store in `data`.
fn store_stats(data: &Path) -> Value {
    let output = agentprocess(&["store", "stats", "--json"], data);
    assert!(output.status.success(), "{}", text(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The keys of family `name` in a `store stats` report; 0 when it has none.
fn keys_of(report: &Value, name: &str) -> u64 {
    report["families"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["family"] == name)
        .map_or(0, |row| row["keys"].as_u64().unwrap())
}

/// `store stats` counts the keys of each family a fixture set implies: a record, a per-process
/// entry and a filing under its one input per run, a ready entry per open run, a group work entry per waiting run, a
/// timer per timer run and per ended run (its move to the archive), and the three processes'
/// catalog entries, drafts and versions.
#[test]
fn store_stats_counts_the_keys_of_every_family() {
    let data = tempfile::tempdir().unwrap();
    populate(data.path());
    let report = store_stats(data.path());
    let family = |name: &str| keys_of(&report, name);
    let runs = RUNS as u64;
    assert_eq!(family("run"), runs, "{report}");
    assert_eq!(family("process-runs"), runs, "{report}");
    assert_eq!(
        family("process-inputs"),
        runs,
        "each fixture run has one input: {report}"
    );
    assert_eq!(family("ready"), OPEN as u64, "{report}");
    assert_eq!(family("work"), WAITING as u64, "{report}");
    // A timer per timer run, and the archive timer of each ended run.
    assert_eq!(family("timer"), (TIMERS + ENDED) as u64, "{report}");
    for name in ["catalog", "draft", "published"] {
        assert_eq!(family(name), 3, "{name}: {report}");
    }
    assert_eq!(
        family("idem"),
        0,
        "fixtures make no idempotency records: {report}"
    );
    assert_eq!(family("other"), 0, "{report}");
    // The new store says its runs were all filed by input as they were written.
    assert_eq!(family("meta"), 1, "{report}");
    let total = report["total"]["keys"].as_u64().unwrap();
    let of_acme = runs * 3 + (OPEN + WAITING + TIMERS + ENDED) as u64 + 9;
    assert_eq!(total, of_acme + 1, "{report}");
    let organizations = report["organizations"].as_array().unwrap();
    assert_eq!(organizations.len(), 2, "{report}");
    assert_eq!(organizations[0]["organization"], "(cluster)");
    assert_eq!(organizations[1]["organization"], "acme");
    assert_eq!(organizations[1]["keys"].as_u64(), Some(of_acme));
    assert!(report["diskBytes"].as_u64().unwrap() > 0);

    let table = agentprocess(&["store", "stats"], data.path());
    assert!(table.status.success(), "{}", text(&table));
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    assert!(
        table.contains("process-runs") && table.contains("acme"),
        "{table}"
    );

    let empty = tempfile::tempdir().unwrap();
    let missing = agentprocess(&["store", "stats"], empty.path());
    assert!(!missing.status.success());
    assert!(text(&missing).contains("no store in"), "{}", text(&missing));
}

/// `--idempotency-records`: each ended run of the default process also leaves the records of
/// the three calls that made it (start, claim, submit) and their expiry entries, as a server that
/// ran them holds them for the retention.
#[test]
fn fixtures_with_idempotency_records_leave_one_per_call_that_made_a_run() {
    let data = tempfile::tempdir().unwrap();
    let output = agentprocess(
        &[
            "fixtures",
            "--ended",
            "4",
            "--idempotency-records",
            "--org",
            common::ORG,
        ],
        data.path(),
    );
    assert!(output.status.success(), "{}", text(&output));
    let report = store_stats(data.path());
    let family = |name: &str| keys_of(&report, name);
    assert_eq!(family("run"), 4, "{report}");
    assert_eq!(family("idem"), 12, "{report}");
    assert_eq!(family("idemexpiry"), 12, "{report}");
}
