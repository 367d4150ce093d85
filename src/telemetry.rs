//! Telemetry for every role, set up in one place: the log (text or JSON lines), traces over OTLP
//! when the standard `OTEL_*` variables ask for them, and the Prometheus metrics listener.
//!
//! ```text
//! telemetry.rs          Telemetry::start: the subscriber, the span exporter, the meter provider
//! telemetry/json_log.rs one JSON object per log line, with the trace and the run it concerns
//! telemetry/traces.rs   whether and how traces are exported (OTEL_* variables)
//! telemetry/metrics.rs  the Prometheus registry, its listener, build info, histogram buckets
//! ```

mod json_log;
mod metrics;
mod traces;

pub use metrics::MetricsEndpoint;

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines, coloured on a terminal.
    #[default]
    Text,
    /// One JSON object per line: time, level, message, fields, and the trace, span, run,
    /// organization and step the line concerns.
    Json,
}

/// The telemetry flags every role takes.
#[derive(Debug, Clone, clap::Args)]
pub struct TelemetryArgs {
    /// Serve Prometheus metrics at http://ADDR/metrics, off the public port [setting: metrics_listen].
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// How log lines are written [setting: log_format, AGENTPROCESS_LOG_FORMAT; default: text].
    #[arg(long, value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,
}

/// What a role's telemetry is set up from.
#[derive(Debug, Clone)]
pub struct TelemetryOptions {
    /// The role: `serve`, `gateway`, `actor` or `scheduler`; the default service name of its
    /// traces and the `role` label of its build info.
    pub role: &'static str,
    pub log_format: LogFormat,
    /// Where the Prometheus metrics are served; `None`: no meter provider at all.
    pub metrics_listen: Option<SocketAddr>,
}

/// A role's telemetry while it runs. Dropping it (or [`Telemetry::shutdown`]) exports the spans
/// still buffered and writes the log lines still queued.
#[derive(Debug)]
pub struct Telemetry {
    spans: Option<std::sync::Arc<opentelemetry_sdk::trace::BatchSpanProcessor>>,
    metrics: Option<metrics::Metrics>,
    _flush_logs: tracing_appender::non_blocking::WorkerGuard,
}

/// Says where metrics are served, on the role's banner.
pub fn print_metrics_endpoint(metrics: Option<MetricsEndpoint>) {
    if let Some(metrics) = metrics {
        println!("metrics: http://{}/metrics", metrics.local_addr);
    }
}

/// The log filter when `RUST_LOG` sets none: every info line of ours, warnings of rmcp (whose
/// info lines describe each MCP session's setup) and of OpenTelemetry (whose info lines say
/// which providers were installed).
pub const DEFAULT_LOG_FILTER: &str = "info,rmcp=warn,opentelemetry=warn,opentelemetry_sdk=warn";

impl Telemetry {
    /// Installs the process's subscriber and, when asked for, the span exporter and the meter provider.
    /// Call it once, inside the async runtime (the OTLP gRPC exporter needs one) and before
    /// any instrument is made: instruments bind to the meter provider installed when they are
    /// made.
    pub fn start(options: &TelemetryOptions) -> anyhow::Result<Telemetry> {
        let (log_writer, flush_logs) = tracing_appender::non_blocking::NonBlockingBuilder::default()
            .lossy(false)
            .finish(std::io::stderr());
        let log_filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
        let log_layer = match options.log_format {
            LogFormat::Text => tracing_subscriber::fmt::layer()
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .with_writer(log_writer)
                .with_filter(log_filter)
                .boxed(),
            LogFormat::Json => {
                agentprocess_service::trace::record_trace_in_span_fields(false);
                tracing_subscriber::fmt::layer()
                    .fmt_fields(json_log::ContextFields)
                    .event_format(json_log::JsonLines)
                    .with_writer(log_writer)
                    .with_filter(log_filter)
                    .boxed()
            }
        };
        let (trace_layer, spans) = match traces::span_export(options.role)? {
            Some((layer, processor)) => (
                Some(layer.with_filter(tracing_subscriber::filter::filter_fn(traces::exported))),
                Some(processor),
            ),
            None => (None, None),
        };
        tracing_subscriber::registry()
            .with(log_layer)
            .with(trace_layer)
            .try_init()
            .map_err(|e| anyhow::anyhow!("the log cannot be set up: {e}"))?;
        let metrics = options
            .metrics_listen
            .map(|_| metrics::Metrics::install(options.role))
            .transpose()?;
        Ok(Telemetry {
            spans,
            metrics,
            _flush_logs: flush_logs,
        })
    }

    /// Serves `GET /metrics` on `listen` (the address the options named) until the process
    /// ends; answers the address it bound (port 0 picks one). `None` when metrics are off.
    pub async fn serve_metrics(&self, listen: Option<SocketAddr>) -> anyhow::Result<Option<MetricsEndpoint>> {
        match (&self.metrics, listen) {
            (Some(metrics), Some(listen)) => metrics.serve(listen).await.map(Some),
            _ => Ok(None),
        }
    }

    /// Exports the spans still buffered and stops the exporters.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(spans) = self.spans.take()
            && let Err(error) = opentelemetry_sdk::trace::SpanProcessor::shutdown(spans.as_ref())
        {
            eprintln!("warning: the last spans were not all exported: {error}");
        }
        if let Some(metrics) = self.metrics.take() {
            metrics.shutdown();
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        self.stop();
    }
}
