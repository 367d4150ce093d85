//! What leaves a loopback cluster's processes: every role's Prometheus metrics, checked against
//! what was done, and one trace per tool call over OTLP, received here by a collector's trace
//! service: a `submit` sent with the client's `traceparent` yields the gateway's span under it,
//! the actor host's gRPC span under the gateway's, the command and its store commit under that.
//! And what an operator asks a gateway of the cluster with the CLI: `runs list`, `runs show`,
//! `runs history`.

mod cluster_support;
mod common;

use cluster_support::{Cluster, Role, Shape};
use common::scrape::{scrape, value};
use common::{Who, request_id};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const AGENT: Who = Who::Agent("a_ap");
const PROCESS: (&str, &str) = ("process", "purchase-request");
/// The client's trace and its span, as it sends them in `traceparent`.
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
/// The trace and span a client sends in the request's `_meta` instead of a header.
const META_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const META_SPAN: &str = "b7ad6b7169203331";

/// One span as the collector received it.
#[derive(Debug, Clone)]
struct ReceivedSpan {
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    attributes: Vec<(String, String)>,
}

/// The collector's trace service: keeps every span it is sent.
#[derive(Debug, Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.spans.lock().unwrap();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .iter()
                .flat_map(|resource| &resource.attributes)
                .find(|attribute| attribute.key == "service.name")
                .map(|attribute| text(attribute.value.as_ref()))
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    spans.push(ReceivedSpan {
                        service: service.clone(),
                        name: span.name,
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        attributes: span
                            .attributes
                            .iter()
                            .map(|a| (a.key.clone(), text(a.value.as_ref())))
                            .collect(),
                    });
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

fn text(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        _ => String::new(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Starts the collector on a free loopback port; answers its endpoint and what it received.
async fn start_collector() -> (String, Collector) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let collector = Collector::default();
    let service = TraceServiceServer::new(collector.clone());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    (endpoint, collector)
}

/// Where a client puts its W3C `traceparent`.
#[derive(Debug, Clone, Copy)]
enum TraceIn {
    /// The HTTP header, with the client's trace [`CLIENT_TRACE`].
    Header,
    /// The request's `_meta`, with the trace [`META_TRACE`].
    Meta,
}

/// A `tools/call` as a plain HTTP client sends it, with its own `traceparent`.
async fn call_with_traceparent(
    cluster: &Cluster,
    gateway: usize,
    token: &str,
    (tool, arguments): (&str, Value),
    trace_in: TraceIn,
) -> Value {
    let mut params = json!({ "name": tool, "arguments": arguments });
    let mut request = reqwest::Client::new()
        .post(cluster.mcp_url(gateway))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25");
    match trace_in {
        TraceIn::Header => {
            request = request.header("traceparent", format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"));
        }
        TraceIn::Meta => {
            params["_meta"] = json!({ "traceparent": format!("00-{META_TRACE}-{META_SPAN}-01") })
        }
    }
    let response = request
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    serde_json::from_str(body["result"]["content"][0]["text"].as_str().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_role_is_scraped_and_a_tool_call_is_one_trace_across_processes() {
    let (endpoint, collector) = start_collector().await;
    let env = [
        ("AGENTPROCESS_METRICS_LISTEN", "127.0.0.1:0"),
        ("AGENTPROCESS_METRICS__BACKLOG_SAMPLE_SECONDS", "1"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        // Export each batch at once, so the test need not wait the default 5 s.
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        // A cancelled run is archived a second later: a timer fires within the test.
        ("AGENTPROCESS_ARCHIVE_ENDED_RUNS_AFTER_SECONDS", "1"),
    ];
    let cluster = Cluster::start(Shape {
        actors: 2,
        schedulers: 1,
        gateways: 2,
        env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    })
    .await;
    cluster.publish_example_in(common::ORG, "purchase-request");
    let agent = cluster.client(1, &AGENT).await;
    let started = agent.start_purchase_request("PR-T1").await;
    let run_id = started["run"]["id"].as_str().unwrap().to_owned();
    let claimed = agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": "assess", "requestId": request_id() }),
        )
        .await;
    let token = cluster.token_in(common::ORG, &AGENT);
    let submit = json!({
        "token": claimed["token"],
        "output": { "amountUsd": 420.0, "vendor": "Acme", "justification": "Quote matches the request" },
        "evidence": [{ "kind": "link", "ref": "https://erp.test/m/1" }],
        "summary": "Assessed", "next": "team_lead_approval", "reason": "under 5000",
        "requestId": request_id(),
    });
    let submitted = call_with_traceparent(&cluster, 1, &token, ("submit", submit), TraceIn::Header).await;
    assert_eq!(submitted["ok"], true, "{submitted}");
    // The same context in the request's `_meta` (how MCP 2026-07-28 carries it per request).
    let read = call_with_traceparent(
        &cluster,
        0,
        &token,
        ("get_run", json!({ "runId": run_id })),
        TraceIn::Meta,
    )
    .await;
    assert_eq!(read["ok"], true, "{read}");

    // The trace: gateway → gRPC hop on an actor host → command → store commit.
    let deadline = Instant::now() + Duration::from_secs(30);
    let spans = loop {
        let spans: Vec<ReceivedSpan> = collector
            .spans
            .lock()
            .unwrap()
            .iter()
            .filter(|span| span.trace_id == CLIENT_TRACE)
            .cloned()
            .collect();
        let names = ["tool_call", "run_service", "run_command", "store_commit"];
        if names
            .iter()
            .all(|name| spans.iter().any(|span| span.name == *name))
        {
            break spans;
        }
        assert!(
            Instant::now() < deadline,
            "not every span of the call in the client's trace; received: {spans:#?}\n{}",
            cluster.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let named = |name: &str| {
        spans
            .iter()
            .find(|span| span.name == name)
            .unwrap_or_else(|| panic!("no {name} span in {spans:#?}"))
    };
    let tool_call = named("tool_call");
    assert_eq!(tool_call.service, "agentprocess-gateway");
    assert_eq!(
        tool_call.parent_span_id, CLIENT_SPAN,
        "the client's span is the parent"
    );
    assert!(tool_call.attributes.contains(&("tool".into(), "submit".into())));
    let deadline = Instant::now() + Duration::from_secs(30);
    let read_call = loop {
        let found = collector
            .spans
            .lock()
            .unwrap()
            .iter()
            .find(|span| span.trace_id == META_TRACE && span.name == "tool_call")
            .cloned();
        if let Some(span) = found {
            break span;
        }
        assert!(
            Instant::now() < deadline,
            "no tool_call span in the trace the request's _meta named\n{}",
            cluster.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        read_call.parent_span_id, META_SPAN,
        "the _meta span is the parent"
    );
    assert!(read_call.attributes.contains(&("tool".into(), "get_run".into())));
    let hop = named("run_service");
    assert_eq!(
        hop.service, "agentprocess-actor",
        "the gRPC hop is the actor host's"
    );
    assert_eq!(hop.parent_span_id, tool_call.span_id);
    let command = named("run_command");
    assert_eq!(command.service, "agentprocess-actor");
    assert_eq!(command.parent_span_id, hop.span_id);
    assert!(command.attributes.contains(&("command".into(), "submit".into())));
    let commit = named("store_commit");
    assert_eq!(commit.parent_span_id, command.span_id);
    assert!(
        commit.attributes.iter().any(|(key, _)| key == "commands"),
        "the commit says its batch size: {commit:?}"
    );

    // Every role's metrics.
    let gateway = cluster.metrics_url(Role::Gateway, 1);
    let samples = scrape(&gateway).await;
    assert_eq!(
        value(
            &samples,
            "agentprocess_gateway_tool_calls_total",
            &[("tool", "submit"), ("outcome", "ok")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&samples, "agentprocess_build_info", &[("role", "gateway")]),
        Some(1.0)
    );
    // The team lead's approval is the only open work: every gateway's backlog says so.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let samples = scrape(&cluster.metrics_url(Role::Gateway, 0)).await;
        if value(&samples, "agentprocess_backlog_work_items", &[PROCESS]) == Some(1.0)
            && value(&samples, "agentprocess_backlog_ready_steps", &[PROCESS]).unwrap_or(0.0) == 0.0
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the backlog never showed the approval: {samples:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut started_runs = 0.0;
    let mut shards = 0.0;
    for actor in 0..2 {
        let samples = scrape(&cluster.metrics_url(Role::Actor, actor)).await;
        assert_eq!(
            value(&samples, "agentprocess_build_info", &[("role", "actor")]),
            Some(1.0)
        );
        started_runs +=
            value(&samples, "agentprocess_run_actor_runs_started_total", &[PROCESS]).unwrap_or(0.0);
        shards += value(&samples, "agentprocess_cluster_shards_owned", &[]).unwrap_or(0.0);
        if value(&samples, "agentprocess_run_actor_runs_started_total", &[PROCESS]).is_some() {
            let commits = value(
                &samples,
                "agentprocess_store_commit_batch_size_count",
                &[("store", "etcd")],
            );
            assert!(
                commits.is_some_and(|c| c >= 1.0),
                "the actor host's etcd commits: {commits:?}"
            );
        }
    }
    assert_eq!(started_runs, 1.0, "one run started, on one of the hosts");
    assert_eq!(shards, 256.0, "the hosts own every shard between them");
    let samples = scrape(&cluster.metrics_url(Role::Scheduler, 0)).await;
    assert_eq!(
        value(&samples, "agentprocess_build_info", &[("role", "scheduler")]),
        Some(1.0)
    );

    // A run cancelled and archived: ended runs and a fired timer are counted too. Then every
    // metric the dashboard queries is in a scrape of some role.
    let cancelled = agent.start_purchase_request("PR-T2").await;
    let ops = cluster.client(0, &Who::Operator("ops@acme.test", &["ops"])).await;
    ops.ok(
        "cancel",
        json!({ "runId": cancelled["run"]["id"], "reason": "Duplicate.", "requestId": request_id() }),
    )
    .await;
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/grafana/agentprocess.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let queried = dashboard_metrics(&dashboard);
    assert!(queried.len() >= 25, "the dashboard's metrics: {queried:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut scraped = std::collections::BTreeSet::new();
        for (role, count) in [(Role::Gateway, 2), (Role::Actor, 2), (Role::Scheduler, 1)] {
            for index in 0..count {
                for sample in scrape(&cluster.metrics_url(role, index)).await {
                    scraped.insert(sample.name);
                }
            }
        }
        let missing: Vec<&String> = queried.iter().filter(|name| !scraped.contains(*name)).collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the dashboard queries metrics no role exports: {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The operator CLI against the cluster's second gateway: runs list, runs show, runs history.
    let ops_token = cluster.token_in(common::ORG, &Who::Operator("ops@acme.test", &["ops"]));
    let listed = cli(
        &cluster,
        1,
        &ops_token,
        &["runs", "list", "--process", "purchase-request", "--json"],
    );
    let listed: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_str().unwrap())
        .collect();
    assert!(listed.contains(&run_id.as_str()), "{listed:?}");
    let shown = cli(&cluster, 1, &ops_token, &["runs", "show", &run_id, "--json"]);
    assert_eq!(shown["run"]["state"], "waiting", "{shown}");
    assert_eq!(shown["workItems"][0]["step"], "team_lead_approval", "{shown}");
    let history = cli(&cluster, 1, &ops_token, &["runs", "history", &run_id, "--json"]);
    let kinds: Vec<&str> = history["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["started", "claimed", "submitted"], "{history}");
    agent.close().await;
    ops.close().await;
}

/// `agentprocess ARGS --server <gateway> --token TOKEN`, its standard output read as JSON.
fn cli(cluster: &Cluster, gateway: usize, token: &str, args: &[&str]) -> Value {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_agentprocess"))
        .args(args)
        .args(["--server", cluster.gateway_url(gateway), "--token", token])
        .env_remove("AGENTPROCESS_URL")
        .env_remove("AGENTPROCESS_TOKEN")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "agentprocess {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Every metric name the dashboard's panels query.
fn dashboard_metrics(dashboard: &Value) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(at) = rest.find("agentprocess_") {
                let name: String = rest[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                rest = &rest[at + name.len()..];
                names.insert(name);
            }
        }
    }
    names
}
