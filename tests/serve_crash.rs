//! `agentprocess serve` killed with SIGKILL under load, then restarted on the same data: every
//! acknowledged write survives (spec §4: a write that returned ok is durable), claims and their
//! tokens stand and their leases still expire, timers armed before the crash fire after it, a held
//! event is consumed after it, and requests retried with the same `requestId` give one result
//! (tools.md: all writes take `requestId`; a replay returns the original result).

mod common;

use agentprocess_testkit::run_view::{step_of, step_state};
use common::{Mcp, Server, Who, request_id};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const PROCESS: &str = r#"---
name: crash-load
description: Work an item, wait for its settlement event, then have a reviewer approve it.
inputs:
  item: string
steps:
  - id: work
    agent: Do the work for the item.
    output:
      result: string
  - id: settle
    wait_for: settled
    timeout: 1h
    on_timeout: late
    next: review
  - id: late
    agent: Follow up on the missing settlement.
    output:
      note: string
    next: review
  - id: review
    person: reviewers
    approve: Approve the result.
    due: 2h
    next: done
  - id: done
    finish: approved
---

# Crash load

One item per run.
"#;

const LEASE_SECONDS: u64 = 300;
const CLIENTS: usize = 4;
/// Acknowledged writes of the load before the kill.
const ACKED_BEFORE_KILL: usize = 80;
const OPERATOR: Who = Who::Operator("ops@acme.test", &["ops"]);

/// A write the load made, with its arguments (to retry it) and, once acknowledged, its data.
#[derive(Debug, Clone)]
struct Write {
    tool: &'static str,
    arguments: Value,
}

/// What one load client saw: its acknowledged writes and the one in flight when the server died.
#[derive(Debug, Default)]
struct Seen {
    acknowledged: Vec<(Write, Value)>,
    in_flight: Option<Write>,
}

fn agent_of(client: usize) -> Who {
    const AGENTS: [&str; CLIENTS] = ["a_load0", "a_load1", "a_load2", "a_load3"];
    Who::Agent(AGENTS[client])
}

/// One load client: start a run, claim `work`, submit it, send its `settled` event; again, until
/// a call gets no answer (the server is gone) or `rounds` are done.
async fn load(url: String, token: String, client: usize, acked: Arc<AtomicUsize>, rounds: usize) -> Seen {
    let mcp = Mcp::connect(&url, &token).await;
    let mut seen = Seen::default();
    for round in 0..rounds {
        let item = format!("c{client}-{round}");
        let write = |tool: &'static str, arguments: Value| Write { tool, arguments };
        let start = write(
            "start_run",
            json!({ "process": "crash-load", "inputs": { "item": item }, "requestId": request_id() }),
        );
        let Some(started) = attempt(&mcp, &start, &mut seen, &acked).await else {
            break;
        };
        let run_id = started["run"]["id"].as_str().unwrap().to_owned();
        let claim = write(
            "claim",
            json!({ "runId": run_id, "stepId": "work", "requestId": request_id() }),
        );
        let Some(claimed) = attempt(&mcp, &claim, &mut seen, &acked).await else {
            break;
        };
        let submit = write(
            "submit",
            json!({ "token": claimed["token"], "output": { "result": format!("done {item}") },
                    "summary": format!("Worked {item}"), "requestId": request_id() }),
        );
        if attempt(&mcp, &submit, &mut seen, &acked).await.is_none() {
            break;
        }
        let event = write(
            "send_event",
            json!({ "runId": run_id, "name": "settled", "data": { "item": item },
                    "requestId": request_id() }),
        );
        if attempt(&mcp, &event, &mut seen, &acked).await.is_none() {
            break;
        }
    }
    seen
}

/// Makes the call; `Some(data)` when acknowledged, `None` (and the write kept as in flight) when
/// the server gave no answer. A refusal during the load is a failure of the test.
async fn attempt(mcp: &Mcp, write: &Write, seen: &mut Seen, acked: &AtomicUsize) -> Option<Value> {
    match mcp.try_call(write.tool, write.arguments.clone()).await {
        Ok(envelope) => {
            assert_eq!(
                envelope["ok"], true,
                "{} refused under load: {envelope}",
                write.tool
            );
            seen.acknowledged.push((write.clone(), envelope["data"].clone()));
            acked.fetch_add(1, Ordering::SeqCst);
            Some(envelope["data"].clone())
        }
        Err(_) => {
            seen.in_flight = Some(write.clone());
            None
        }
    }
}

async fn start(agent: &Mcp, item: &str) -> String {
    let started = agent
        .ok(
            "start_run",
            json!({ "process": "crash-load", "inputs": { "item": item }, "requestId": request_id() }),
        )
        .await;
    started["run"]["id"].as_str().unwrap().to_owned()
}

async fn claim(agent: &Mcp, run_id: &str, step: &str) -> String {
    let claimed = agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": step, "requestId": request_id() }),
        )
        .await;
    claimed["token"].as_str().unwrap().to_owned()
}

/// `get_run` of `run_id`, read again until `settled` holds of it: timers fire on the scheduler's
/// next turn after the clock moves, not within the `advance` call. Panics after 20 s.
async fn run_once(agent: &Mcp, run_id: &str, settled: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let run = agent.ok("get_run", json!({ "runId": run_id })).await;
        if settled(&run) {
            return run;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{run_id} never got there: {run}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn submission(token: &str, output: Value) -> Value {
    json!({ "token": token, "output": output, "summary": "Worked it", "requestId": request_id() })
}

#[tokio::test(flavor = "multi_thread")]
async fn acknowledged_writes_claims_timers_and_held_events_survive_kill_9() {
    let data = tempfile::tempdir().unwrap();
    let lease = LEASE_SECONDS.to_string();
    let mut server = Server::start(data.path(), &["--lease-seconds", &lease]);
    let source = data.path().join("crash-load.md");
    std::fs::write(&source, PROCESS).unwrap();
    let (code, out, err) = server.import(&source, &[("reviewers", "reviewers")], true);
    assert_eq!(code, 0, "{out}\n{err}");
    let agent = server.client(&Who::Agent("a_fixed")).await;

    // Before the crash, one run in each situation to check after it.
    // A: a claim that will still be held, its token used after the restart.
    let held = start(&agent, "held").await;
    let held_token = claim(&agent, &held, "work").await;
    // B: a claim whose lease will expire after the restart, with progress left by `renew`.
    let expiring = start(&agent, "expiring").await;
    let expiring_token = claim(&agent, &expiring, "work").await;
    let renewed = agent
        .ok(
            "renew",
            json!({ "token": expiring_token, "progress": "half the ledger read", "requestId": request_id() }),
        )
        .await;
    let expiring_token = renewed["token"].as_str().unwrap().to_owned();
    // C: waiting for `settled`, whose 1h timeout is armed.
    let waiting = start(&agent, "waiting").await;
    let token = claim(&agent, &waiting, "work").await;
    agent
        .ok("submit", submission(&token, json!({ "result": "waiting" })))
        .await;
    // D: its `settled` event sent while `work` is not done, so held.
    let early = start(&agent, "early").await;
    let sent = agent
        .ok(
            "send_event",
            json!({ "runId": early, "name": "settled", "data": { "ref": "early-1" }, "requestId": request_id() }),
        )
        .await;
    assert_eq!(sent["consumedBy"], Value::Null, "held: {sent}");
    // E: waiting on the review, whose 2h due date is armed.
    let reviewing = start(&agent, "reviewing").await;
    let token = claim(&agent, &reviewing, "work").await;
    agent
        .ok("submit", submission(&token, json!({ "result": "reviewing" })))
        .await;
    agent
        .ok(
            "send_event",
            json!({ "runId": reviewing, "name": "settled", "data": { "ref": "r-1" }, "requestId": request_id() }),
        )
        .await;
    agent.close().await;

    // The load, and a kill -9 in the middle of it.
    let acked = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            tokio::spawn(load(
                server.mcp_url(),
                server.token(&agent_of(client)),
                client,
                acked.clone(),
                1000,
            ))
        })
        .collect();
    while acked.load(Ordering::SeqCst) < ACKED_BEFORE_KILL {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::task::block_in_place(|| server.kill_and_restart());
    let mut seen = Vec::new();
    for client in clients {
        seen.push(client.await.unwrap());
    }
    assert!(
        seen.iter().all(|s| s.in_flight.is_some()),
        "every client saw the server die: {seen:?}"
    );

    let agent = server.client(&Who::Agent("a_fixed")).await;
    let operator = server.client(&OPERATOR).await;

    // Unacknowledged requests retried with the same requestId: each succeeds (whether or not it
    // landed before the kill), with one result, the same each time.
    let mut retried_runs = BTreeSet::new();
    for (client, seen) in seen.iter_mut().enumerate() {
        let write = seen.in_flight.clone().unwrap();
        let mcp = server.client(&agent_of(client)).await;
        let first = mcp.call(write.tool, write.arguments.clone()).await;
        assert_eq!(first["ok"], true, "{} retried: {first}", write.tool);
        let again = mcp.call(write.tool, write.arguments.clone()).await;
        assert_eq!(first, again, "{} retried: {first} then {again}", write.tool);
        if write.tool == "start_run" {
            retried_runs.insert(first["data"]["run"]["id"].as_str().unwrap().to_owned());
        }
        seen.acknowledged.push((write, first["data"].clone()));
        mcp.close().await;
    }

    // Every acknowledged write is there.
    let mut started = BTreeSet::new();
    let mut open_claims: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for (client, seen) in seen.iter().enumerate() {
        for (write, data) in &seen.acknowledged {
            match write.tool {
                "start_run" => {
                    let run_id = data["run"]["id"].as_str().unwrap().to_owned();
                    let run = agent.ok("get_run", json!({ "runId": run_id })).await;
                    assert_eq!(run["data"]["inputs"], write.arguments["inputs"], "{run}");
                    started.insert(run_id);
                }
                "claim" => {
                    let run_id = write.arguments["runId"].as_str().unwrap().to_owned();
                    open_claims.insert(run_id, (client, data["token"].as_str().unwrap().to_owned()));
                }
                "submit" => {
                    let run_id = data["run"]["id"].as_str().unwrap().to_owned();
                    open_claims.remove(&run_id);
                    let run = agent.ok("get_run", json!({ "runId": run_id })).await;
                    let work = &run["data"]["steps"]["work"];
                    assert_eq!(work["output"], write.arguments["output"], "{run}");
                    assert_eq!(work["summary"], write.arguments["summary"], "{run}");
                    assert_eq!(work["by"], ["a_load0", "a_load1", "a_load2", "a_load3"][client]);
                    assert_eq!(step_state(&run, "work"), "done");
                }
                "send_event" => {
                    assert_eq!(data["consumedBy"], "settle", "{data}");
                    let run = agent
                        .ok("get_run", json!({ "runId": write.arguments["runId"] }))
                        .await;
                    assert_eq!(run["data"]["steps"]["settle"]["output"], write.arguments["data"]);
                    assert_eq!(step_state(&run, "settle"), "done");
                    assert_eq!(step_state(&run, "review"), "waiting");
                }
                other => panic!("unexpected write {other}"),
            }
        }
    }
    let acknowledged: usize = seen.iter().map(|s| s.acknowledged.len()).sum();
    assert!(
        acknowledged > ACKED_BEFORE_KILL,
        "{acknowledged} writes acknowledged"
    );
    assert!(started.len() >= CLIENTS, "the load started runs: {started:?}");
    eprintln!(
        "{acknowledged} acknowledged writes, {} runs started by the load, {} claims open at the kill, in flight: {:?}",
        started.len(),
        open_claims.len(),
        seen.iter()
            .map(|s| s.in_flight.as_ref().unwrap().tool)
            .collect::<Vec<_>>()
    );

    // No run twice: the runs are the five fixed ones and those whose start was acknowledged.
    let listed = operator
        .ok("list_runs", json!({ "process": "crash-load", "limit": 100 }))
        .await;
    let listed: BTreeSet<String> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_str().unwrap().to_owned())
        .collect();
    let mut expected: BTreeSet<String> = started.union(&retried_runs).cloned().collect();
    expected.extend([&held, &expiring, &waiting, &early, &reviewing].map(|id| id.to_string()));
    assert_eq!(listed, expected);

    // Claims made by the load before the crash are still held: their tokens submit.
    for (run_id, (client, token)) in &open_claims {
        let mcp = server.client(&agent_of(*client)).await;
        let done = mcp
            .ok(
                "submit",
                submission(token, json!({ "result": "after the crash" })),
            )
            .await;
        assert_eq!(step_state(&done, "work"), "done", "{run_id}: {done}");
        mcp.close().await;
    }

    // A: the claim is held, by a_fixed, and its token works.
    let run = agent.ok("get_run", json!({ "runId": held })).await;
    assert_eq!(step_state(&run, "work"), "claimed", "{run}");
    let done = agent
        .ok("submit", submission(&held_token, json!({ "result": "held" })))
        .await;
    assert_eq!(done["data"]["steps"]["work"]["by"], "a_fixed");
    assert_eq!(step_state(&done, "settle"), "waiting");

    // D: finishing `work` consumes the event held before the crash.
    let token = claim(&agent, &early, "work").await;
    let done = agent
        .ok("submit", submission(&token, json!({ "result": "early" })))
        .await;
    assert_eq!(step_state(&done, "settle"), "done", "{done}");
    assert_eq!(
        done["data"]["steps"]["settle"]["output"],
        json!({ "ref": "early-1" })
    );
    assert_eq!(step_state(&done, "review"), "waiting");

    // The clock of the new process: past B's lease and C's wait_for timeout.
    server.advance(3600 + 60).await;

    // B: the lease expired on schedule; `work` is ready again with the progress handed off, and
    // the old token is stale.
    run_once(&agent, &expiring, |run| step_state(run, "work") == "ready").await;
    let work = agent.ok("get_work", json!({ "process": "crash-load" })).await;
    let item = work["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["runId"] == expiring.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("B's work is not offered again: {work}"));
    assert_eq!(item["stepId"], "work");
    assert_eq!(item["handoff"]["progress"], "half the ledger read", "{item}");
    agent
        .refused(
            "submit",
            submission(&expiring_token, json!({ "result": "too late" })),
            "stale",
        )
        .await;

    // C: the wait_for timeout armed before the crash fired: on to `late`.
    let run = run_once(&agent, &waiting, |run| step_state(run, "late") == "ready").await;
    assert_eq!(step_state(&run, "settle"), "done", "{run}");

    // E: the review's due date (2h after it opened, before the crash) passes.
    let run = agent.ok("get_run", json!({ "runId": reviewing })).await;
    let review = step_of(&run, "review").clone();
    assert_eq!(review["overdue"], false, "{review}");
    server.advance(3600).await;
    let overdue = |run: &Value| {
        run["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["overdue"] == true)
    };
    let run = run_once(&agent, &reviewing, overdue).await;
    let review = step_of(&run, "review").clone();
    assert_eq!(review["state"], "waiting", "{review}");
    assert_eq!(review["overdue"], true, "{review}");
    assert_eq!(run["workItems"][0]["stepId"], "review");

    agent.close().await;
    operator.close().await;
}
