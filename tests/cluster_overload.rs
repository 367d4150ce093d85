//! An actor host at `cluster.max_in_flight_calls_per_host` or at
//! `cluster.max_in_flight_store_requests`, through a cluster's gateway: a call past the limit is
//! answered `retry` at once (spec §4.3: transient, repeat with the same `requestId`), its issues
//! naming the limit and when to come back; the router does not hold it in a queue of its own,
//! calls within the limit are served, and a refused write, made again, happens once.

mod cluster_support;
mod common;

use cluster_support::{Cluster, Shape};
use common::{Who, request_id};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn past_its_limit_an_actor_host_answers_retry_with_the_limit_and_a_hint() {
    let cluster = Cluster::start(Shape {
        actors: 1,
        schedulers: 1,
        gateways: 1,
        env: vec![(
            "AGENTPROCESS_CLUSTER__MAX_IN_FLIGHT_CALLS_PER_HOST".to_owned(),
            "1".to_owned(),
        )],
    })
    .await;
    cluster.publish_example_in("acme", "defect-triage");
    let mut calls = Vec::new();
    for _ in 0..100 {
        let agent = cluster.client_in(0, "acme", &Who::Agent("a_busy")).await;
        calls.push(tokio::spawn(async move {
            agent
                .call("list_runs", json!({ "process": "defect-triage" }))
                .await
        }));
    }
    let (mut served, mut refused) = (0, Vec::new());
    for call in calls {
        let answer = call.await.unwrap();
        if answer["ok"] == true {
            served += 1;
        } else {
            refused.push(answer["error"].clone());
        }
    }
    assert!(served > 0, "calls within the limit are served");
    assert!(
        !refused.is_empty(),
        "100 calls at once on a host that takes one: some are refused"
    );
    for error in &refused {
        assert_eq!(error["code"], "retry", "{error}");
        assert_eq!(
            error["issues"][0], "limit: cluster.max_in_flight_calls_per_host",
            "{error}"
        );
        assert_eq!(error["issues"][1], "retry_after_ms: 100", "{error}");
    }
    // One at a time, every call is served.
    let agent = cluster.client_in(0, "acme", &Who::Agent("a_calm")).await;
    for _ in 0..5 {
        agent.ok("list_runs", json!({ "process": "defect-triage" })).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn past_its_store_bound_a_write_is_refused_with_the_limit_and_made_again_happens_once() {
    let cluster = Cluster::start(Shape {
        actors: 1,
        schedulers: 1,
        gateways: 1,
        env: vec![(
            "AGENTPROCESS_CLUSTER__MAX_IN_FLIGHT_STORE_REQUESTS".to_owned(),
            "1".to_owned(),
        )],
    })
    .await;
    cluster.publish_example_in("acme", "defect-triage");
    const STARTS: usize = 60;
    let start = |n: usize, request: String| json!({ "process": "defect-triage", "inputs": { "reportId": format!("S-{n}") }, "requestId": request });
    let mut calls = Vec::new();
    for n in 0..STARTS {
        let agent = cluster.client_in(0, "acme", &Who::Agent("a_busy")).await;
        let request = request_id();
        let arguments = start(n, request.clone());
        calls.push(tokio::spawn(async move {
            (n, request, agent.call("start_run", arguments).await)
        }));
    }
    let mut refused = Vec::new();
    for call in calls {
        let (n, request, answer) = call.await.unwrap();
        if answer["ok"] != true {
            let error = &answer["error"];
            assert_eq!(error["code"], "retry", "{error}");
            assert_eq!(
                error["issues"][0], "limit: cluster.max_in_flight_store_requests",
                "{error}"
            );
            assert_eq!(error["issues"][1], "retry_after_ms: 100", "{error}");
            refused.push((n, request));
        }
    }
    assert!(
        !refused.is_empty(),
        "{STARTS} starts at once through a store client that takes one request: some are refused"
    );
    // Each refused start made again with its requestId, one at a time, after the hint.
    let agent = cluster.client_in(0, "acme", &Who::Agent("a_busy")).await;
    for (n, request) in refused {
        let mut tries = 0;
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let answer = agent.call("start_run", start(n, request.clone())).await;
            if answer["ok"] == true {
                break;
            }
            tries += 1;
            assert!(tries < 50, "start {n} still refused: {answer}");
        }
    }
    // Every page read the same way: its own reads may meet the bound too.
    let mut runs = Vec::new();
    let mut cursor = serde_json::Value::Null;
    loop {
        let mut arguments = json!({ "process": "defect-triage" });
        if !cursor.is_null() {
            arguments["cursor"] = cursor.clone();
        }
        let page = agent.call("list_runs", arguments).await;
        if page["ok"] != true {
            assert_eq!(page["error"]["code"], "retry", "{page}");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        }
        runs.extend(
            page["data"]["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|run| run["id"].clone()),
        );
        cursor = page["data"]["nextCursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    assert_eq!(runs.len(), STARTS, "every start happened, and once");
}
