//! `agentprocess serve` moves ended runs to the archive once `archive_ended_runs_after_seconds`
//! passed: over MCP, `get_run` and `list_runs` answer the same content (schema-valid) before and
//! after, and a `kill -9` in the middle of archiving loses no run and shows none twice.

mod common;

use agentprocess_store::{EmbeddedOptions, EmbeddedStore, KeyRange, RangeRequest, Store};
use common::quick::{self, QUICK_PROCESS, ended_quick, list_all, start_quick};
use common::{Mcp, Server, Who, archived_runs, request_id};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

const ARCHIVE_AFTER: &str = "60";

fn start_server(data: &Path) -> Server {
    Server::start_with_env(
        data,
        &[],
        &[("AGENTPROCESS_ARCHIVE_ENDED_RUNS_AFTER_SECONDS", ARCHIVE_AFTER)],
    )
}

fn publish(server: &Server, data: &Path) {
    let source = data.join("quick.md");
    std::fs::write(&source, QUICK_PROCESS).unwrap();
    let (code, out, err) = server.import(&source, &[], true);
    assert_eq!(code, 0, "{out}\n{err}");
}

/// Starts a run of `quick`; finishes it when `finish`. Returns its id.
async fn run(agent: &Mcp, item: &str, finish: bool) -> String {
    match finish {
        true => ended_quick(agent, item).await,
        false => start_quick(agent, item).await,
    }
}

async fn wait_for_archived(data: &Path, wanted: usize) {
    quick::wait_for_archived(|| archived_runs(data), wanted, Duration::from_secs(30)).await;
}

/// Kills the server and counts the run records its store still holds, once archiving settled:
/// a run whose archive copy is written may still wait for the transaction that deletes its hot
/// copy, so while more than `expected` are left the server goes on (restarted, its clock moved
/// past the window again) and is counted again. Twenty rounds at most.
async fn hot_runs_once_settled(server: &mut Server, data: &Path, expected: usize) -> usize {
    let mut hot = usize::MAX;
    for _ in 0..20 {
        server.kill9();
        hot = hot_runs(data).await;
        if hot <= expected {
            break;
        }
        server.kill_and_restart();
        server.advance(61).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    hot
}

/// The run records the stopped server's store still holds.
async fn hot_runs(data: &Path) -> usize {
    let (store, _) = EmbeddedStore::open(&data.join("store"), EmbeddedOptions::default())
        .await
        .unwrap();
    let all = store
        .range(RangeRequest::new(KeyRange::from(Vec::new())))
        .await
        .unwrap();
    all.kvs
        .iter()
        .filter(|kv| String::from_utf8_lossy(&kv.key).contains("/run/"))
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn archived_runs_read_the_same_over_mcp() {
    let data = tempfile::tempdir().unwrap();
    let mut server = start_server(data.path());
    publish(&server, data.path());
    let agent = server.client(&Who::Agent("a_worker")).await;
    let mut runs = Vec::new();
    for i in 0..6 {
        runs.push(run(&agent, &format!("item-{i}"), i % 3 != 0).await);
    }
    let mut views = Vec::new();
    for run in &runs {
        views.push(agent.ok("get_run", json!({ "runId": run })).await);
    }
    let listed = list_all(&agent, json!({}), 100).await;
    let done = list_all(&agent, json!({ "state": "ended" }), 100).await;
    assert_eq!((listed.len(), done.len()), (6, 4));

    let item_4 = json!({ "inputs": { "item": "item-4" } });
    let filtered = list_all(&agent, item_4.clone(), 100).await;
    assert_eq!(filtered.len(), 1);
    server.advance(61).await;
    wait_for_archived(data.path(), 4).await;
    for (run, view) in runs.iter().zip(&views) {
        assert_eq!(&agent.ok("get_run", json!({ "runId": run })).await, view);
    }
    assert_eq!(
        list_all(&agent, item_4, 100).await,
        filtered,
        "filtered by input, archived"
    );
    for page in [1, 4, 100] {
        assert_eq!(list_all(&agent, json!({}), page).await, listed, "pages of {page}");
    }
    assert_eq!(list_all(&agent, json!({ "state": "ended" }), 100).await, done);
    agent
        .refused(
            "claim",
            json!({ "runId": runs[1], "stepId": "work", "requestId": request_id() }),
            "conflict",
        )
        .await;
    agent.close().await;
    assert_eq!(
        hot_runs_once_settled(&mut server, data.path(), 2).await,
        2,
        "only the open runs stay in the store"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_while_archiving_loses_no_run_and_shows_none_twice() {
    const RUNS: usize = 400;
    const CLIENTS: usize = 8;
    let data = tempfile::tempdir().unwrap();
    let mut server = start_server(data.path());
    publish(&server, data.path());
    let mut clients = Vec::new();
    for client in 0..CLIENTS {
        let agent = server.client(&Who::Agent("a_worker")).await;
        clients.push(tokio::spawn(async move {
            let mut runs = Vec::new();
            for i in 0..RUNS / CLIENTS {
                runs.push(run(&agent, &format!("c{client}-{i}"), true).await);
            }
            agent.close().await;
            runs
        }));
    }
    let mut runs = Vec::new();
    for client in clients {
        runs.extend(client.await.unwrap());
    }
    let agent = server.client(&Who::Agent("a_reader")).await;
    let listed = list_all(&agent, json!({}), 100).await;
    assert_eq!(listed.len(), RUNS);
    let mut views = Vec::new();
    for run in &runs {
        views.push(agent.ok("get_run", json!({ "runId": run })).await);
    }
    agent.close().await;

    // Archiving starts on the scheduler's next pass; kill the server as soon as it has begun.
    server.advance(61).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while archived_runs(data.path()) == 0 {
        assert!(Instant::now() < deadline, "archiving never began");
        std::thread::sleep(Duration::from_millis(1));
    }
    server.kill9();
    // What the dead server left: archiving was under way, some runs in the archive already and
    // some only in the hot store still.
    let archived_at_kill = archived_runs(data.path());
    let hot_at_kill = hot_runs(data.path()).await;
    eprintln!("when killed: {archived_at_kill} of {RUNS} runs archived, {hot_at_kill} still hot");
    assert!(
        archived_at_kill > 0 && archived_at_kill < RUNS,
        "the kill came while archiving was under way: {archived_at_kill} of {RUNS} archived"
    );
    assert!(
        hot_at_kill > 0,
        "runs were left in the hot store at the kill ({archived_at_kill} archived)"
    );
    assert!(
        archived_at_kill + hot_at_kill >= RUNS,
        "every run is in one tier at least at the kill: {archived_at_kill} archived, {hot_at_kill} hot"
    );
    server.kill_and_restart();

    // Right after the restart, whatever tier each run is in: every run once, as before.
    let agent = server.client(&Who::Agent("a_reader")).await;
    assert_eq!(list_all(&agent, json!({}), 37).await, listed);
    // The rest is archived after the restart, from the timers still in the store (the moved
    // clock starts again from the wall clock: move it once more).
    server.advance(61).await;
    wait_for_archived(data.path(), RUNS).await;
    assert_eq!(list_all(&agent, json!({}), 100).await, listed);
    // Filtered by an input, an archived run is on the first page, behind all the others
    // (tools.md `list_runs`: `inputs` matches on equality).
    let last = &listed[RUNS - 1];
    let page = agent
        .ok(
            "list_runs",
            json!({ "inputs": { "item": last["inputs"]["item"] } }),
        )
        .await;
    assert_eq!(page["items"], json!([last]), "{page}");
    assert_eq!(page["nextCursor"], json!(null));
    for (run, view) in runs.iter().zip(&views) {
        assert_eq!(&agent.ok("get_run", json!({ "runId": run })).await, view);
    }
    agent.close().await;
    assert_eq!(
        hot_runs_once_settled(&mut server, data.path(), 0).await,
        0,
        "every ended run left the store"
    );
}
