//! Whether and how traces leave the process: over OTLP when the standard `OTEL_*` variables ask
//! for it, with their endpoint, headers, protocol, sampler and service name; nothing otherwise.

use agentprocess_service::exported_spans::SpanExport;
use anyhow::Context;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SpanProcessor};
use std::sync::Arc;
use tracing::Metadata;

/// The variables that ask for traces: an OTLP endpoint, or `OTEL_TRACES_EXPORTER=otlp`.
const ENDPOINT_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
];

/// Whether the environment asks for traces, read from `variable`: `Ok(false)` when nothing
/// asks or they are turned off (`OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`), an error
/// for an exporter this server does not have.
pub(crate) fn wanted(variable: impl Fn(&str) -> Option<String>) -> anyhow::Result<bool> {
    if variable("OTEL_SDK_DISABLED").is_some_and(|value| value.trim().eq_ignore_ascii_case("true")) {
        return Ok(false);
    }
    let endpoint_set = ENDPOINT_VARIABLES
        .iter()
        .any(|name| variable(name).is_some_and(|value| !value.trim().is_empty()));
    match variable("OTEL_TRACES_EXPORTER").as_deref().map(str::trim) {
        None | Some("") => Ok(endpoint_set),
        Some("otlp") => Ok(true),
        Some("none") => Ok(false),
        Some(other) => anyhow::bail!(
            "OTEL_TRACES_EXPORTER={other:?} is not an exporter this server has: use \"otlp\" (or \"none\")"
        ),
    }
}

/// Spans exported over OTLP, when the environment asks for traces: the layer that makes them
/// and the batch processor that sends them. The service name is `OTEL_SERVICE_NAME` (or
/// `service.name` in `OTEL_RESOURCE_ATTRIBUTES`), else `agentprocess-<role>`; the sampler
/// `OTEL_TRACES_SAMPLER` (default: parent-based, always on); the batching `OTEL_BSP_*`.
pub(crate) fn span_export(role: &str) -> anyhow::Result<Option<(SpanExport, Arc<BatchSpanProcessor>)>> {
    let variable = |name: &str| std::env::var(name).ok();
    if !wanted(variable)? {
        return Ok(None);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .build()
        .context("the OTLP trace exporter cannot be set up from the OTEL_EXPORTER_OTLP_* variables")?;
    let named_by_environment = variable("OTEL_SERVICE_NAME").is_some()
        || variable("OTEL_RESOURCE_ATTRIBUTES")
            .is_some_and(|attributes| attributes.contains("service.name="));
    let mut resource = Resource::builder();
    if !named_by_environment {
        resource = resource.with_service_name(format!("agentprocess-{role}"));
    }
    let mut processor = BatchSpanProcessor::builder(exporter).build();
    processor.set_resource(&resource.build());
    let processor = Arc::new(processor);
    // The SDK's configuration read from the environment, for its sampler alone.
    let sampler = opentelemetry_sdk::trace::Config::default().sampler;
    let layer = SpanExport::new(sampler, processor.clone(), "agentprocess");
    Ok(Some((layer, processor)))
}

/// What becomes an exported span (or span event): our own spans, and our warnings and errors
/// inside them. Decided once per call site, so a span nobody exports costs nothing.
pub(crate) fn exported(metadata: &Metadata<'_>) -> bool {
    metadata.target().starts_with("agentprocess")
        && (metadata.is_span() || *metadata.level() <= tracing::Level::WARN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn wanted_with(pairs: &[(&str, &str)]) -> anyhow::Result<bool> {
        let variables: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        wanted(|name| variables.get(name).cloned())
    }

    #[test]
    fn traces_are_exported_only_when_an_endpoint_or_the_exporter_asks() {
        assert!(!wanted_with(&[]).unwrap());
        assert!(wanted_with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")]).unwrap());
        assert!(wanted_with(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/v1/traces")]).unwrap());
        assert!(wanted_with(&[("OTEL_TRACES_EXPORTER", "otlp")]).unwrap());
        assert!(!wanted_with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "  ")]).unwrap());
    }

    #[test]
    fn turning_traces_off_wins_over_an_endpoint() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317");
        assert!(!wanted_with(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")]).unwrap());
        assert!(!wanted_with(&[endpoint, ("OTEL_SDK_DISABLED", "true")]).unwrap());
        assert!(wanted_with(&[endpoint, ("OTEL_SDK_DISABLED", "false")]).unwrap());
    }

    #[test]
    fn an_exporter_this_server_lacks_is_refused_by_name() {
        let error = wanted_with(&[("OTEL_TRACES_EXPORTER", "zipkin")]).unwrap_err();
        assert!(error.to_string().contains("\"zipkin\""), "{error}");
    }
}
