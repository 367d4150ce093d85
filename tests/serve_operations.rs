//! What whoever runs `agentprocess serve` watches: `/healthz` and `/readyz`, answered without a
//! token, and the log: info lines for publishes, runs started and ended, escalations, lapsed
//! claims and failed webhook deliveries, and tool refusals by code; as text or as JSON lines that
//! carry the call's trace.

mod common;

use common::{Server, Who, request_id, status_and_json};
use serde_json::json;
use std::time::{Duration, Instant};

const AGENT: Who = Who::Agent("a_ap");
const OPS: Who = Who::Operator("ops@acme.test", &["ops"]);

#[tokio::test(flavor = "multi_thread")]
async fn health_and_readiness_answer_without_a_token() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let (status, body) =
        status_and_json(reqwest::get(format!("{}/healthz", server.url)).await.unwrap()).await;
    assert_eq!((status, body), (200, json!({ "status": "alive" })));
    let (status, body) = status_and_json(reqwest::get(format!("{}/readyz", server.url)).await.unwrap()).await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({ "status": "ready", "store": "open", "scheduler": "running" })
        )
    );
}

/// Waits until the server's log has a line holding every one of `parts`; returns that line.
async fn logged(server: &Server, parts: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = server.stderr();
        if let Some(line) = log
            .lines()
            .find(|line| parts.iter().all(|part| line.contains(part)))
        {
            return line.to_owned();
        }
        assert!(Instant::now() < deadline, "no log line with {parts:?} in:\n{log}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_log_says_what_happened_and_what_was_refused_at_info() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        data.path(),
        &["--lease-seconds", "60"],
        &[("RUST_LOG", "info,rmcp=warn")],
    );
    server.publish_example("purchase-request");
    logged(
        &server,
        &[
            " INFO ",
            "process published",
            "process=purchase-request",
            "version=1",
            "by=ops@acme.test",
        ],
    )
    .await;
    // Port 9 (discard) refuses connections on a test machine: every delivery fails.
    let (status, body) = status_and_json(
        reqwest::Client::new()
            .put(format!("{}/admin/v1/webhooks/unreachable", server.url))
            .bearer_auth(server.token(&OPS))
            .json(&json!({ "url": "http://127.0.0.1:9/hook", "secret": "s3cret" }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    let agent = server.client(&AGENT).await;
    let lapsing = agent.start_purchase_request("PR-LAPSE").await;
    let lapsing = lapsing["run"]["id"].as_str().unwrap().to_owned();
    logged(
        &server,
        &[
            " INFO ",
            "run started",
            &lapsing,
            "process=purchase-request",
            "by=a_ap",
        ],
    )
    .await;
    agent
        .ok(
            "claim",
            json!({ "runId": lapsing, "stepId": "assess", "requestId": request_id() }),
        )
        .await;
    server.advance(61).await;
    logged(
        &server,
        &[
            " INFO ",
            "claim lease expired",
            &lapsing,
            "step=assess",
            "holder=a_ap",
        ],
    )
    .await;

    agent
        .refused(
            "claim",
            json!({ "runId": lapsing, "stepId": "place_order", "requestId": request_id() }),
            "conflict",
        )
        .await;
    logged(
        &server,
        &[
            " INFO ",
            "tool call refused",
            "code=\"conflict\"",
            "tool=\"claim\"",
        ],
    )
    .await;

    let escalated = agent.start_purchase_request("PR-ESCALATE").await;
    let escalated = escalated["run"]["id"].as_str().unwrap().to_owned();
    let claimed = agent
        .ok(
            "claim",
            json!({ "runId": escalated, "stepId": "assess", "requestId": request_id() }),
        )
        .await;
    agent
        .ok(
            "escalate",
            json!({ "token": claimed["token"], "note": "The quote is in EUR.", "requestId": request_id() }),
        )
        .await;
    logged(&server, &[" INFO ", "step escalated", &escalated, "step=assess"]).await;
    // A token-only tool's span names the run its token routes to.
    agent
        .refused(
            "submit",
            json!({ "token": claimed["token"], "output": {}, "summary": "Late", "requestId": request_id() }),
            "stale",
        )
        .await;
    let run_field = format!("runId=\"{escalated}\"");
    logged(
        &server,
        &[" INFO ", "tool call refused", "tool=\"submit\"", &run_field],
    )
    .await;
    logged(
        &server,
        &[
            " INFO ",
            "webhook delivery failed",
            "kind=escalation",
            "attempt=1",
            "Connection refused",
        ],
    )
    .await;

    let ops = server.client(&OPS).await;
    ops.ok(
        "cancel",
        json!({ "runId": escalated, "reason": "Duplicate request.", "requestId": request_id() }),
    )
    .await;
    logged(
        &server,
        &[
            " INFO ",
            "run ended",
            &escalated,
            "state=cancelled",
            "by=ops@acme.test",
        ],
    )
    .await;
    agent.close().await;
    ops.close().await;
}

/// The client's trace, as it sends it in `traceparent`.
const CLIENT_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

#[tokio::test(flavor = "multi_thread")]
async fn json_log_lines_parse_and_a_calls_lines_carry_its_trace() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        data.path(),
        &["--log-format", "json"],
        &[("RUST_LOG", "info,rmcp=warn")],
    );
    server.publish_example("purchase-request");
    let agent = server.client(&AGENT).await;
    let started = agent.start_purchase_request("PR-JSON").await;
    let run_id = started["run"]["id"].as_str().unwrap().to_owned();
    // A claim of a step that is not ready, sent with the client's own trace.
    let response = reqwest::Client::new()
        .post(server.mcp_url())
        .bearer_auth(server.token(&AGENT))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25")
        .header("traceparent", format!("00-{CLIENT_TRACE}-b7ad6b7169203331-01"))
        .json(&json!({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": { "name": "claim", "arguments": { "runId": run_id, "stepId": "place_order", "requestId": request_id() } },
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let refused = logged(&server, &["tool call refused", CLIENT_TRACE]).await;
    let line: serde_json::Value = serde_json::from_str(&refused).expect("a JSON line");
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["traceId"], CLIENT_TRACE, "{line}");
    assert_eq!(line["runId"], run_id.as_str(), "{line}");
    assert_eq!(line["organization"], "acme", "{line}");
    assert_eq!(line["tool"], "claim", "{line}");
    assert_eq!(line["code"], "conflict", "{line}");
    let span_id = line["spanId"].as_str().expect("a span id");
    assert!(
        span_id.len() == 16 && span_id != "b7ad6b7169203331",
        "the gateway's own span, a child of the client's: {line}"
    );
    logged(&server, &["run started", &run_id]).await;
    for text in server.stderr().lines() {
        let line: serde_json::Value =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        for key in ["timestamp", "level", "target", "message"] {
            assert!(line[key].is_string(), "{key} in {text}");
        }
        assert!(
            !text.contains(" {") && !text.contains("Some("),
            "a Debug dump in {text}"
        );
    }
    agent.close().await;
}
