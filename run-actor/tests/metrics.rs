//! Metrics (issue: observability seams): writes through `Runtime::execute` are counted and timed
//! as commits under the crate's const names, live actors are counted, and an ended run moved to
//! the archive is counted.

mod runtime_support;

use agentprocess_run_actor::machine::Caller;
use agentprocess_run_actor::metrics::{self, RunActorMetrics};
use agentprocess_run_actor::runtime::{Clock, LocalBlobs, Runtime, RuntimeConfig, Write};
use opentelemetry::metrics::MeterProvider;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use runtime_support::*;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

const ARCHIVE_AFTER: Duration = Duration::from_secs(60);

/// The value of the metric `name`, summed over its data points: a sum's value, a histogram's
/// count. `None` when nothing was recorded.
fn recorded(exporter: &InMemoryMetricExporter, name: &str) -> Option<f64> {
    let mut total = None;
    // The latest export holds the cumulative value of every instrument.
    let exports = exporter.get_finished_metrics().unwrap();
    for scope in exports.last()?.scope_metrics() {
        for metric in scope.metrics().filter(|metric| metric.name() == name) {
            let value: f64 = match metric.data() {
                AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                    sum.data_points().map(|p| p.value() as f64).sum()
                }
                AggregatedMetrics::I64(MetricData::Sum(sum)) => {
                    sum.data_points().map(|p| p.value() as f64).sum()
                }
                AggregatedMetrics::F64(MetricData::Histogram(histogram)) => {
                    histogram.data_points().map(|p| p.count() as f64).sum()
                }
                other => panic!("{name} has unexpected data {other:?}"),
            };
            *total.get_or_insert(0.0) += value;
        }
    }
    total
}

fn operator() -> Caller {
    let mut caller = person("ops@acme.test", &["ops"]);
    caller.operator = true;
    caller
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_commits_live_actors_and_archiving_are_recorded() {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir.path().join("store")).await;
    let runtime = Runtime::new(
        store,
        Arc::new(LocalBlobs::new(dir.path().join("blobs"))),
        RuntimeConfig {
            archive_ended_runs_after: ARCHIVE_AFTER,
            metrics: RunActorMetrics::new(&provider.meter(metrics::METER)),
            ..RuntimeConfig::default()
        },
        Clock::starting_at(START),
    );
    publish_example(&runtime, ORG, "defect-triage").await;

    let view = start(
        &runtime,
        &agent("starter"),
        "defect-triage",
        json!({ "reportId": "T-1" }),
        "s-1",
    )
    .await;
    let run = run_id(&view);
    provider.force_flush().unwrap();
    assert_eq!(recorded(&exporter, metrics::COMMITS), Some(1.0));
    assert_eq!(recorded(&exporter, metrics::COMMIT_DURATION), Some(1.0));
    assert_eq!(recorded(&exporter, metrics::LIVE_ACTORS), Some(1.0));

    let cancelled = runtime
        .execute(
            &operator(),
            Write::Cancel {
                run_id: run.clone(),
                reason: "no longer needed".into(),
            },
            "c-1",
        )
        .await
        .unwrap();
    ok(cancelled);
    runtime.clock().advance(ARCHIVE_AFTER);
    runtime.fire_timer(&ORG.into(), &run, "archive").await.unwrap();
    provider.force_flush().unwrap();
    assert_eq!(recorded(&exporter, metrics::COMMITS), Some(2.0));
    assert_eq!(recorded(&exporter, metrics::RUNS_ARCHIVED), Some(1.0));
    assert_eq!(
        recorded(&exporter, metrics::RACED_BATCHES),
        None,
        "one writer never races"
    );
}
