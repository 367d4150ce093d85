//! Admission of tool calls through `serve`: an identity or an organization over its rate is
//! answered `retry` at once (spec §4.3: transient, repeat with the same `requestId`), the refusal
//! naming the limit and when to come back; other identities and organizations go on.

mod common;

use common::scrape::{scrape, value};
use common::{Server, Who};
use serde_json::{Value, json};
use std::time::Duration;

/// The `retry_after_ms` a refusal names.
fn retry_after(refused: &Value) -> Duration {
    let ms = refused["issues"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|issue| issue.as_str()?.strip_prefix("retry_after_ms: "))
        .unwrap_or_else(|| panic!("no retry_after_ms in {refused}"));
    Duration::from_millis(ms.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_identity_over_its_rate_is_told_to_retry_and_others_are_not() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        data.path(),
        &["--metrics-listen", "127.0.0.1:0"],
        &[
            // One call in five seconds: slow enough that no test machine refills it between calls.
            ("AGENTPROCESS_ADMISSION__CALLS_PER_SECOND_PER_IDENTITY", "0.2"),
            ("AGENTPROCESS_ADMISSION__BURST_PER_IDENTITY", "2"),
        ],
    );
    server.publish_example("defect-triage");
    let busy = server.client(&Who::Agent("a_busy")).await;
    let calm = server.client(&Who::Agent("a_calm")).await;
    busy.ok("get_work", json!({})).await;
    busy.ok("get_work", json!({})).await;
    let refused = busy.refused("get_work", json!({}), "retry").await;
    assert_eq!(
        refused["issues"][0], "limit: admission.calls_per_second_per_identity",
        "{refused}"
    );
    let wait = retry_after(&refused);
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_secs(5),
        "{refused}"
    );
    assert!(
        refused["message"].as_str().unwrap().contains("same requestId"),
        "{refused}"
    );
    calm.ok("get_work", json!({})).await;
    // Operators see it: the refusal counted by the limit it hit, and as a `retry` answer.
    let samples = scrape(server.metrics_url.as_deref().expect("a metrics endpoint")).await;
    let refusals = [("limit", "calls_per_second_per_identity")];
    assert_eq!(
        value(
            &samples,
            "agentprocess_gateway_admission_refusals_total",
            &refusals
        ),
        Some(1.0)
    );
    let retried = [("tool", "get_work"), ("outcome", "retry")];
    assert_eq!(
        value(&samples, "agentprocess_gateway_tool_calls_total", &retried),
        Some(1.0)
    );
    tokio::time::sleep(wait).await;
    busy.ok("get_work", json!({})).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_organization_over_its_rate_holds_back_its_own_callers_only() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        data.path(),
        &[],
        &[
            ("AGENTPROCESS_ADMISSION__CALLS_PER_SECOND_PER_ORGANIZATION", "0.2"),
            ("AGENTPROCESS_ADMISSION__BURST_PER_ORGANIZATION", "3"),
        ],
    );
    let mut flooding = Vec::new();
    for agent in ["a_1", "a_2", "a_3", "a_4"] {
        flooding.push(server.client_in("flood", &Who::Agent(agent)).await);
    }
    for client in &flooding[..3] {
        client.ok("get_work", json!({})).await;
    }
    let refused = flooding[3].refused("get_work", json!({}), "retry").await;
    assert_eq!(
        refused["issues"][0], "limit: admission.calls_per_second_per_organization",
        "{refused}"
    );
    let quiet = server.client_in("quiet", &Who::Agent("a_1")).await;
    quiet.ok("get_work", json!({})).await;
    tokio::time::sleep(retry_after(&refused)).await;
    flooding[3].ok("get_work", json!({})).await;
}
