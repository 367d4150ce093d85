//! An actor host at `cluster.max_in_flight_calls_per_host`, through a cluster's gateway: a call
//! past the limit is answered `retry` at once (spec §4.3: transient, repeat with the same
//! `requestId`), its issues naming the limit and when to come back; the router does not hold it
//! in a queue of its own, and calls within the limit are served.

mod cluster_support;
mod common;

use cluster_support::{Cluster, Shape};
use common::Who;
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
