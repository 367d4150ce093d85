//! `agentprocess serve` keeps every change of a run in the run's history: an agent escalates with
//! a note, an operator returns it with a note, the agent submits, the run ends, and
//! `GET /admin/v1/runs/{runId}/history` lists every event with who and the notes, before and
//! after the run moved to the archive. `GET /admin/v1/runs/{runId}` names who holds a claim
//! until when. Both are for operators only.

mod common;

use agentprocess_gateway::admin_model::{HistoryKind, RunHistory, RunInspection};
use common::browser::drive_browser_script;
use common::quick::QUICK_PROCESS;
use common::{Mcp, Server, Who, archived_runs, request_id, status_and_json};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const AGENT: Who = Who::Agent("a_worker");
const OPS: Who = Who::Operator("ops@acme.test", &["ops"]);
const MIRA: Who = Who::Person("mira@acme.test", &["finance"]);

fn publish(server: &Server, data: &Path) {
    let source = data.join("quick.md");
    std::fs::write(&source, QUICK_PROCESS).unwrap();
    let (code, out, err) = server.import(&source, &[], true);
    assert_eq!(code, 0, "{out}\n{err}");
}

/// `GET {path}` on the server as `who`: status and body.
async fn admin_get(server: &Server, who: &Who, path: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .get(format!("{}{path}", server.url))
        .bearer_auth(server.token(who))
        .send()
        .await
        .unwrap();
    status_and_json(response).await
}

async fn history(server: &Server, run_id: &str) -> RunHistory {
    let (status, body) = admin_get(server, &OPS, &format!("/admin/v1/runs/{run_id}/history")).await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_value(body).unwrap()
}

async fn claim(agent: &Mcp, run_id: &str) -> Value {
    agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": "work", "requestId": request_id() }),
        )
        .await
}

async fn start(agent: &Mcp, item: &str) -> String {
    let started = agent
        .ok(
            "start_run",
            json!({ "process": "quick", "inputs": { "item": item }, "requestId": request_id() }),
        )
        .await;
    started["run"]["id"].as_str().unwrap().to_owned()
}

const ESCALATION_NOTE: &str = "The item has no owner.";
const RETURN_NOTE: &str = "Finance owns it; go on.";

/// A server that archives ended runs a minute after they end.
fn archiving_server(data: &Path) -> Server {
    Server::start_with_env(
        data,
        &[],
        &[("AGENTPROCESS_ARCHIVE_ENDED_RUNS_AFTER_SECONDS", "60")],
    )
}

/// A run of `quick` escalated with [`ESCALATION_NOTE`], returned by an operator with
/// [`RETURN_NOTE`], then submitted by the agent, so it ended. Its id and the escalation's work
/// item.
async fn escalated_returned_and_done(agent: &Mcp, ops: &Mcp) -> (String, String) {
    let run_id = start(agent, "invoice 7").await;
    let claimed = claim(agent, &run_id).await;
    agent
        .ok(
            "escalate",
            json!({ "token": claimed["token"], "note": ESCALATION_NOTE, "requestId": request_id() }),
        )
        .await;
    let view = ops.ok("get_run", json!({ "runId": run_id })).await;
    let item = &view["workItems"][0];
    ops.ok(
        "decide",
        json!({ "runId": run_id, "workItemId": item["id"], "snapshot": item["snapshot"],
                "decision": "returned", "note": RETURN_NOTE, "requestId": request_id() }),
    )
    .await;
    let claimed = claim(agent, &run_id).await;
    let ended = agent
        .ok(
            "submit",
            json!({ "token": claimed["token"], "output": { "result": "paid" },
                    "summary": "Paid with finance's approval.", "requestId": request_id() }),
        )
        .await;
    assert_eq!(ended["run"]["state"], "ended");
    (run_id, item["id"].as_str().unwrap().to_owned())
}

/// Moves the clock past the archiving delay and waits until `runs` runs are archived.
async fn archive(server: &Server, data: &Path, runs: usize) {
    server.advance(61).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while archived_runs(data) < runs {
        assert!(Instant::now() < deadline, "the run was not archived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escalation_and_its_return_stay_in_the_history_after_the_run_is_archived() {
    let data = tempfile::tempdir().unwrap();
    let server = archiving_server(data.path());
    publish(&server, data.path());
    let agent = server.client(&AGENT).await;
    let ops = server.client(&OPS).await;
    let (run_id, work_item) = escalated_returned_and_done(&agent, &ops).await;

    let before = history(&server, &run_id).await;
    assert_eq!(before.run_id, run_id);
    assert_eq!(before.dropped, 0);
    let seen: Vec<(&str, HistoryKind)> = before
        .events
        .iter()
        .map(|e| (e.by.as_str(), e.kind.clone()))
        .collect();
    let work = || "work".to_owned();
    assert_eq!(seen.len(), 7, "{seen:#?}");
    assert_eq!(
        seen[0],
        ("a_worker", HistoryKind::Started { mode: "live".into() })
    );
    assert!(matches!(&seen[1], ("a_worker", HistoryKind::Claimed { step, .. }) if *step == work()));
    assert_eq!(
        seen[2],
        (
            "a_worker",
            HistoryKind::Escalated {
                step: work(),
                work_item: work_item.clone(),
                note: ESCALATION_NOTE.into(),
            }
        )
    );
    assert_eq!(
        seen[3],
        (
            "ops@acme.test",
            HistoryKind::Returned {
                step: work(),
                work_item,
                note: RETURN_NOTE.into(),
            }
        )
    );
    assert!(matches!(&seen[4], ("a_worker", HistoryKind::Claimed { .. })));
    assert_eq!(
        seen[5],
        (
            "a_worker",
            HistoryKind::Submitted {
                step: work(),
                summary: Some("Paid with finance's approval.".into()),
                next: None,
                reason: None,
            }
        )
    );
    assert_eq!(
        seen[6],
        (
            "server",
            HistoryKind::Ended {
                state: "ended".into(),
                outcome: Some("done".into()),
                note: None,
            }
        )
    );
    // The protocol's run view keeps neither note once the escalation is decided.
    let view = ops.ok("get_run", json!({ "runId": run_id })).await;
    assert!(!view.to_string().contains(ESCALATION_NOTE));

    // Archived: the history is the archived record's, whole.
    archive(&server, data.path(), 1).await;
    assert_eq!(history(&server, &run_id).await, before);
    let (status, inspected) = admin_get(&server, &OPS, &format!("/admin/v1/runs/{run_id}")).await;
    assert_eq!(status, 200, "{inspected}");
    assert_eq!(inspected["run"]["state"], "ended");
    agent.close().await;
    ops.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inspection_names_the_claim_holder_and_is_for_operators_only() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    publish(&server, data.path());
    let agent = server.client(&AGENT).await;
    let run_id = start(&agent, "invoice 8").await;
    let claimed = claim(&agent, &run_id).await;

    let (status, body) = admin_get(&server, &OPS, &format!("/admin/v1/runs/{run_id}")).await;
    assert_eq!(status, 200, "{body}");
    let inspection: RunInspection = serde_json::from_value(body).unwrap();
    assert_eq!(inspection.run.id, run_id);
    assert_eq!(inspection.run.state, "active");
    assert_eq!(inspection.run.started_by, "a_worker");
    let work = &inspection.steps[0];
    assert_eq!(work.state.as_deref(), Some("claimed"));
    let claim = work.claim.as_ref().expect("the claim is shown");
    assert_eq!(claim.holder, "a_worker");
    assert_eq!(claim.expires_at, claimed["expiresAt"].as_str().unwrap());
    assert_eq!(work.lease_expiries, 0);
    assert!(inspection.work_items.is_empty());

    // Not an operator: 403 on both, whoever asks; an unknown run: 404.
    for who in [&AGENT, &MIRA] {
        for path in [
            format!("/admin/v1/runs/{run_id}"),
            format!("/admin/v1/runs/{run_id}/history"),
        ] {
            let (status, body) = admin_get(&server, who, &path).await;
            assert_eq!(status, 403, "{path}: {body}");
            assert_eq!(body["error"]["code"], "forbidden");
        }
    }
    for path in ["/admin/v1/runs/r_none", "/admin/v1/runs/r_none/history"] {
        let (status, body) = admin_get(&server, &OPS, path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(body["error"]["code"], "not_found");
    }
    // Another organization's operator does not find the run.
    let elsewhere = reqwest::Client::new()
        .get(format!("{}/admin/v1/runs/{run_id}/history", server.url))
        .bearer_auth(server.token_in("globex", &OPS))
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status().as_u16(), 404);
    agent.close().await;
}

/// The web UI's run page builds its timeline from the history: in a real browser, an archived
/// run's page still shows the escalation note and the return note, each with who wrote it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_page_shows_the_escalation_and_return_notes_after_the_run_is_archived() {
    let data = tempfile::tempdir().unwrap();
    let server = archiving_server(data.path());
    publish(&server, data.path());
    let agent = server.client(&AGENT).await;
    let ops = server.client(&OPS).await;
    let (run_id, _) = escalated_returned_and_done(&agent, &ops).await;
    archive(&server, data.path(), 1).await;
    let ids = json!({ "run": run_id, "escalation": ESCALATION_NOTE, "returned": RETURN_NOTE });
    let summary = drive_browser_script(&server, "ui_history_browser.py", &[&ids.to_string()], &[]).await;
    assert_eq!(summary["pages"], json!(["run-history-archived"]), "{summary}");
    agent.close().await;
    ops.close().await;
}
