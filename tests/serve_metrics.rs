//! What an SRE scrapes from `agentprocess serve --metrics-listen`: every crate's instruments and
//! the backlog gauges, checked against what the test did through MCP: runs started and ended,
//! tool calls per tool and outcome, a lapsed lease, and the backlog equal to what `get_work`
//! answers.

mod common;

use common::scrape::{Sample, scrape, value};
use common::{Server, Who, request_id};
use serde_json::json;
use std::time::{Duration, Instant};

const AGENT: Who = Who::Agent("a_ap");
const MANAGER: Who = Who::Person("manager@acme.test", &["staff"]);
const OPS: Who = Who::Operator("ops@acme.test", &["ops"]);
const PROCESS: (&str, &str) = ("process", "purchase-request");

/// Scrapes until `check` holds for the samples (the backlog is sampled every second), or
/// fails with the last scrape.
async fn scrape_until(url: &str, what: &str, check: impl Fn(&[Sample]) -> bool) -> Vec<Sample> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let samples = scrape(url).await;
        if check(&samples) {
            return samples;
        }
        assert!(
            Instant::now() < deadline,
            "{what} never held; last scrape:\n{samples:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_metrics_count_what_was_done_and_the_backlog_is_what_get_work_answers() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        data.path(),
        &["--metrics-listen", "127.0.0.1:0", "--lease-seconds", "60"],
        &[("AGENTPROCESS_METRICS__BACKLOG_SAMPLE_SECONDS", "1")],
    );
    let metrics = server
        .metrics_url
        .clone()
        .expect("serve prints its metrics endpoint");
    assert!(
        !metrics.contains(&server.listen.to_string()),
        "metrics are served off the MCP port: {metrics}"
    );
    server.publish_example("purchase-request");
    let agent = server.client(&AGENT).await;

    // Three runs: one walked to the team lead's approval, one whose claim lapses, one cancelled.
    let mut runs = Vec::new();
    for request in ["PR-M1", "PR-M2", "PR-M3"] {
        let started = agent.start_purchase_request(request).await;
        runs.push(started["run"]["id"].as_str().unwrap().to_owned());
    }
    let claimed = agent
        .ok(
            "claim",
            json!({ "runId": runs[0], "stepId": "assess", "requestId": request_id() }),
        )
        .await;
    agent
        .ok(
            "submit",
            json!({
                "token": claimed["token"],
                "output": { "amountUsd": 420.0, "vendor": "Acme", "justification": "Quote matches the request" },
                "evidence": [{ "kind": "link", "ref": "https://erp.test/m/1" }],
                "summary": "Assessed", "next": "team_lead_approval", "reason": "under 5000",
                "requestId": request_id(),
            }),
        )
        .await;
    // `place_order` is not ready in any run: a refusal counted by its code.
    agent
        .refused(
            "claim",
            json!({ "runId": runs[1], "stepId": "place_order", "requestId": request_id() }),
            "conflict",
        )
        .await;
    agent
        .ok(
            "claim",
            json!({ "runId": runs[1], "stepId": "assess", "requestId": request_id() }),
        )
        .await;
    let ops = server.client(&OPS).await;
    ops.ok(
        "cancel",
        json!({ "runId": runs[2], "reason": "Duplicate request.", "requestId": request_id() }),
    )
    .await;

    let samples = scrape(&metrics).await;
    let calls = |tool: &str, outcome: &str| {
        value(
            &samples,
            "agentprocess_gateway_tool_calls_total",
            &[("tool", tool), ("outcome", outcome)],
        )
    };
    assert_eq!(calls("start_run", "ok"), Some(3.0));
    assert_eq!(calls("claim", "ok"), Some(2.0));
    assert_eq!(calls("claim", "conflict"), Some(1.0));
    assert_eq!(calls("submit", "ok"), Some(1.0));
    assert_eq!(calls("cancel", "ok"), Some(1.0));
    assert_eq!(
        value(
            &samples,
            "agentprocess_gateway_tool_call_duration_seconds_count",
            &[("tool", "start_run")]
        ),
        Some(3.0)
    );
    assert_eq!(
        value(&samples, "agentprocess_run_actor_runs_started_total", &[PROCESS]),
        Some(3.0)
    );
    assert_eq!(
        value(
            &samples,
            "agentprocess_run_actor_runs_ended_total",
            &[PROCESS, ("outcome", "cancelled")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&samples, "agentprocess_run_actor_claims_granted_total", &[]),
        Some(2.0)
    );
    assert_eq!(
        value(&samples, "agentprocess_build_info", &[("role", "serve")]),
        Some(1.0)
    );
    let commits = value(
        &samples,
        "agentprocess_store_commit_batch_size_count",
        &[("store", "embedded")],
    )
    .expect("store commits are measured");
    assert!(commits >= 1.0, "{commits} commits");
    // No label names a run, a request or a person.
    for sample in &samples {
        for (key, label) in &sample.labels {
            assert!(
                !label.starts_with("r_") && !label.contains('@') && key != "runId",
                "{key}={label} in {}",
                sample.name
            );
        }
    }

    // The backlog: one ready agent step (run 2's lapsed claim comes later), the approver's
    // approval; as get_work says.
    let ready = agent.ok("get_work", json!({})).await["items"]
        .as_array()
        .unwrap()
        .len();
    let manager = server.client(&MANAGER).await;
    let approvals = manager.ok("get_work", json!({})).await["items"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(
        (ready, approvals),
        (0, 1),
        "run 1 waits on its approver, run 2 is claimed"
    );
    scrape_until(&metrics, "the backlog gauges match get_work", |samples| {
        value(samples, "agentprocess_backlog_ready_steps", &[PROCESS]) == Some(ready as f64)
            && value(samples, "agentprocess_backlog_work_items", &[PROCESS]) == Some(approvals as f64)
            && value(samples, "agentprocess_backlog_claims", &[]) == Some(1.0)
    })
    .await;

    // Run 2's claim lapses: counted, and its step is ready again (and has waited since).
    server.advance(61).await;
    scrape_until(&metrics, "the lapsed lease is counted", |samples| {
        value(samples, "agentprocess_run_actor_lease_expiries_total", &[]) == Some(1.0)
    })
    .await;
    let ready = agent.ok("get_work", json!({})).await["items"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(ready, 1, "assess of run 2 is claimable again");
    let samples = scrape_until(&metrics, "the backlog shows the step ready again", |samples| {
        value(samples, "agentprocess_backlog_ready_steps", &[PROCESS]) == Some(1.0)
            && value(samples, "agentprocess_backlog_claims", &[]) == Some(0.0)
    })
    .await;
    let age = value(
        &samples,
        "agentprocess_backlog_work_item_oldest_age_seconds",
        &[PROCESS],
    )
    .expect("the approval's age");
    assert!(
        age >= 61.0,
        "the approval opened before the clock moved 61 s: {age}"
    );
    agent.close().await;
    manager.close().await;
    ops.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_metrics_listener_nothing_is_served() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    assert_eq!(server.metrics_url, None);
    let response = reqwest::get(format!("{}/metrics", server.url)).await.unwrap();
    assert_eq!(response.status(), 404, "the public port serves no metrics");
}
