//! The Prometheus side of metrics: the process-wide meter provider every crate's instruments
//! record into, its registry served as `GET /metrics` on a listener of its own (never the public
//! MCP port), the build info, and the buckets of duration histograms.

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use opentelemetry::KeyValue;
use opentelemetry::metrics::MeterProvider;
use opentelemetry_sdk::metrics::{Aggregation, Instrument, InstrumentKind, SdkMeterProvider, Stream};
use std::net::SocketAddr;

/// Bucket bounds of every duration histogram, in seconds: from half a millisecond (a commit on
/// a quiet embedded store) to ten seconds (a call that waited out a shard move).
pub const SECONDS_BUCKETS: [f64; 15] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The meter of what belongs to the process rather than to a crate: its build.
const METER: &str = "agentprocess";
/// `1`, with the version and role as labels: `agentprocess_build_info`.
pub const BUILD_INFO: &str = "agentprocess.build_info";

/// The installed meter provider and the registry it exports to.
#[derive(Debug)]
pub(super) struct Metrics {
    provider: SdkMeterProvider,
    registry: prometheus::Registry,
}

/// Where the metrics are served.
#[derive(Debug, Clone, Copy)]
pub struct MetricsEndpoint {
    pub local_addr: SocketAddr,
}

impl Metrics {
    /// Installs the process-wide meter provider, exporting to a new Prometheus registry.
    pub(super) fn install(role: &'static str) -> anyhow::Result<Metrics> {
        let registry = prometheus::Registry::new();
        let exporter = opentelemetry_prometheus::exporter()
            .with_registry(registry.clone())
            .without_target_info()
            .scope_info_enabled(false)
            .build()
            .context("the Prometheus exporter cannot be set up")?;
        let provider = SdkMeterProvider::builder()
            .with_reader(exporter)
            .with_view(seconds_buckets)
            .build();
        opentelemetry::global::set_meter_provider(provider.clone());
        provider
            .meter(METER)
            .u64_observable_gauge(BUILD_INFO)
            .with_description("The running build: 1, with its version and role.")
            .with_callback(move |gauge| {
                gauge.observe(
                    1,
                    &[
                        KeyValue::new("version", env!("CARGO_PKG_VERSION")),
                        KeyValue::new("role", role),
                    ],
                )
            })
            .build();
        Ok(Metrics { provider, registry })
    }

    /// Binds `listen` and serves `GET /metrics` there, in a task of its own.
    pub(super) async fn serve(&self, listen: SocketAddr) -> anyhow::Result<MetricsEndpoint> {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen for metrics on {listen}"))?;
        let local_addr = listener
            .local_addr()
            .context("the metrics listener has no address")?;
        let app = Router::new()
            .route("/metrics", get(scrape))
            .with_state(self.registry.clone());
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::error!(%error, "the metrics listener failed");
            }
        });
        Ok(MetricsEndpoint { local_addr })
    }

    pub(super) fn shutdown(self) {
        // Nothing is pushed anywhere: the registry is only read when scraped.
        let _ = self.provider.shutdown();
    }
}

/// `GET /metrics`: every instrument in Prometheus' text format.
async fn scrape(State(registry): State<prometheus::Registry>) -> Response {
    use prometheus::Encoder;
    let encoder = prometheus::TextEncoder::new();
    let mut body = Vec::new();
    match encoder.encode(&registry.gather(), &mut body) {
        Ok(()) => ([(header::CONTENT_TYPE, encoder.format_type().to_owned())], body).into_response(),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the metrics cannot be encoded: {error}"),
        )
            .into_response(),
    }
}

/// Every histogram measured in seconds gets [`SECONDS_BUCKETS`] (the SDK's default bounds run
/// to 10,000, for milliseconds).
fn seconds_buckets(instrument: &Instrument) -> Option<Stream> {
    if instrument.kind() != InstrumentKind::Histogram || instrument.unit() != "s" {
        return None;
    }
    Stream::builder()
        .with_aggregation(Aggregation::ExplicitBucketHistogram {
            boundaries: SECONDS_BUCKETS.to_vec(),
            record_min_max: false,
        })
        .build()
        .ok()
}
