//! Metrics (issue: observability seams): a tool call is counted under the gateway's const name,
//! with its tool and outcome, and timed.

mod common;

use agentprocess_gateway::mcp::ProtocolServer;
use agentprocess_gateway::metrics::{self, GatewayMetrics};
use agentprocess_gateway::{DescribeConfig, Identity, IdentityKind, ToolName};
use common::Recorder;
use opentelemetry::KeyValue;
use opentelemetry::metrics::MeterProvider;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use serde_json::json;
use std::sync::Arc;

/// The attribute sets of every data point of the metric `name`.
fn data_points(exporter: &InMemoryMetricExporter, name: &str) -> Vec<Vec<KeyValue>> {
    let mut points = Vec::new();
    for resource in exporter.get_finished_metrics().unwrap() {
        for scope in resource.scope_metrics() {
            for metric in scope.metrics().filter(|metric| metric.name() == name) {
                match metric.data() {
                    AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                        points.extend(sum.data_points().map(|p| p.attributes().cloned().collect()))
                    }
                    AggregatedMetrics::F64(MetricData::Histogram(histogram)) => {
                        points.extend(histogram.data_points().map(|p| p.attributes().cloned().collect()))
                    }
                    other => panic!("{name} has unexpected data {other:?}"),
                }
            }
        }
    }
    points
}

#[tokio::test]
async fn a_tool_call_is_counted_by_tool_and_outcome_and_timed() {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    let server = ProtocolServer::with_metrics(
        Arc::new(Recorder::default()),
        DescribeConfig::default().result(),
        GatewayMetrics::new(&provider.meter(metrics::METER)),
    );
    let identity = Identity {
        organization: "acme".into(),
        kind: IdentityKind::Agent {
            id: "a_screener".into(),
        },
        operator: false,
    };

    let answered = server
        .call(
            &identity,
            ToolName::ListProcesses,
            Some(json!({}).as_object().unwrap().clone()),
        )
        .await;
    assert!(answered.is_ok());
    // `get_run` without its `runId` breaks the tool's schema: refused `invalid`.
    let refused = server.call(&identity, ToolName::GetRun, None).await;
    assert!(refused.is_err());
    provider.force_flush().unwrap();

    let calls = data_points(&exporter, metrics::TOOL_CALLS);
    let ok = vec![
        KeyValue::new(metrics::ATTRIBUTE_TOOL, "list_processes"),
        KeyValue::new(metrics::ATTRIBUTE_OUTCOME, metrics::OUTCOME_OK),
    ];
    let invalid = vec![
        KeyValue::new(metrics::ATTRIBUTE_TOOL, "get_run"),
        KeyValue::new(metrics::ATTRIBUTE_OUTCOME, "invalid"),
    ];
    assert!(calls.iter().any(|set| set_eq(set, &ok)), "{calls:?}");
    assert!(calls.iter().any(|set| set_eq(set, &invalid)), "{calls:?}");
    let durations = data_points(&exporter, metrics::TOOL_CALL_DURATION);
    assert!(
        durations
            .iter()
            .any(|set| set_eq(set, &[KeyValue::new(metrics::ATTRIBUTE_TOOL, "list_processes")])),
        "{durations:?}"
    );
}

/// Whether two attribute sets hold the same attributes, in any order.
fn set_eq(left: &[KeyValue], right: &[KeyValue]) -> bool {
    left.len() == right.len() && right.iter().all(|kv| left.contains(kv))
}
