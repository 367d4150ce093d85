//! `get_work` that waits for work (`x-wait-1`, docs/profiles/wait.md) through a cluster: agents
//! wait through one gateway, runs start through the other, and every waiting call hears of the
//! new work whichever actor host holds it and whichever made it ready.

mod cluster_support;
mod common;

use cluster_support::{Cluster, Shape};
use common::listener::Listener;
use common::{Who, request_id};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread")]
async fn agents_waiting_on_one_gateway_hear_of_runs_started_through_the_other() {
    let cluster = Cluster::start(Shape {
        schedulers: 1,
        ..Shape::default()
    })
    .await;
    cluster.publish_example_in("acme", "defect-triage");
    const AGENTS: usize = 6;
    let mut waiting = Vec::new();
    for n in 0..AGENTS {
        let agent = cluster.client_in(1, "acme", &Who::Agent("a_waiting")).await;
        waiting.push(tokio::spawn(async move {
            let started = Instant::now();
            let page = agent.ok("get_work", json!({ "waitSeconds": 15 })).await;
            (n, page, started.elapsed())
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(
        waiting.iter().all(|call| !call.is_finished()),
        "nothing was ready: every call waits"
    );
    let starter = cluster.client_in(0, "acme", &Who::Agent("a_starter")).await;
    let mut runs = Vec::new();
    for n in 0..AGENTS {
        let started = starter
            .ok(
                "start_run",
                json!({ "process": "defect-triage", "inputs": { "reportId": format!("T-{n}") },
                        "requestId": request_id() }),
            )
            .await;
        runs.push(started["run"]["id"].as_str().unwrap().to_string());
    }
    for call in waiting {
        let (n, page, took) = call.await.unwrap();
        let items = page["items"].as_array().unwrap();
        assert!(
            !items.is_empty(),
            "waiter {n} answered an empty page after {took:?}"
        );
        for item in items {
            let run = item["runId"].as_str().unwrap();
            assert!(runs.iter().any(|started| started == run), "{item}");
        }
        assert!(
            took < Duration::from_secs(10),
            "waiter {n} answered {took:?} after its call"
        );
    }
}

/// A `subscriptions/listen` stream (MCP 2026-07-28, the Python SDK) through one gateway hears of
/// a step made ready by a start through the other, whichever actor hosts hold the stream's wait
/// and the run.
#[tokio::test(flavor = "multi_thread")]
async fn a_listener_on_one_gateway_hears_of_a_run_started_through_the_other() {
    let cluster = Cluster::start(Shape {
        schedulers: 1,
        ..Shape::default()
    })
    .await;
    cluster.publish_example_in("acme", "defect-triage");
    let listener = Listener::start(
        &cluster.mcp_url(1),
        &cluster.token_in("acme", &Who::Agent("a_listener")),
        "defect-triage",
    )
    .await;
    let starter = cluster.client_in(0, "acme", &Who::Agent("a_starter")).await;
    let started = starter
        .ok(
            "start_run",
            json!({ "process": "defect-triage", "inputs": { "reportId": "L-1" }, "requestId": request_id() }),
        )
        .await;
    listener.hears(started["run"]["id"].as_str().unwrap()).await;
}
