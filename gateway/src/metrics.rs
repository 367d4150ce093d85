//! The gateway's metric names, each defined once, and the instruments that record them.

use crate::tool::ToolResult;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter};
use std::sync::LazyLock;
use std::time::Duration;

/// The meter the gateway's instruments come from.
pub const METER: &str = "agentprocess-gateway";
/// Tool calls answered, by `tool` and `outcome`: `ok`, the refusal's code, or `error` when the
/// server failed.
pub const TOOL_CALLS: &str = "agentprocess.gateway.tool_calls";
/// How long a tool call took, in seconds, by `tool`.
pub const TOOL_CALL_DURATION: &str = "agentprocess.gateway.tool_call.duration";
/// Tool calls answered `retry` at once because they were past an admission limit, by `limit`
/// (its setting: `max_in_flight_calls`, `calls_per_second_per_identity`, ...).
pub const ADMISSION_REFUSALS: &str = "agentprocess.gateway.admission_refusals";
/// The attribute naming the admission limit a call was past.
pub const ATTRIBUTE_LIMIT: &str = "limit";

/// The attribute naming the tool of a call.
pub const ATTRIBUTE_TOOL: &str = "tool";
/// The attribute naming how a call ended.
pub const ATTRIBUTE_OUTCOME: &str = "outcome";
/// The outcome of a call answered with `data`.
pub const OUTCOME_OK: &str = "ok";
/// The outcome of a call the server could not complete (answered with `retry`).
pub const OUTCOME_ERROR: &str = "error";

/// The gateway's instruments. Cheap to clone.
#[derive(Debug, Clone)]
pub struct GatewayMetrics {
    tool_calls: Counter<u64>,
    tool_call_duration: Histogram<f64>,
    admission_refusals: Counter<u64>,
}

impl GatewayMetrics {
    /// The instruments, from `meter`.
    pub fn new(meter: &Meter) -> Self {
        GatewayMetrics {
            tool_calls: meter
                .u64_counter(TOOL_CALLS)
                .with_description("Tool calls answered, by tool and outcome.")
                .build(),
            tool_call_duration: meter
                .f64_histogram(TOOL_CALL_DURATION)
                .with_description("How long a tool call took.")
                .with_unit("s")
                .build(),
            admission_refusals: meter
                .u64_counter(ADMISSION_REFUSALS)
                .with_description("Tool calls answered retry at once, past an admission limit, by limit.")
                .build(),
        }
    }

    /// The instruments of the process-wide meter provider (none installed: they record nothing).
    pub fn global() -> Self {
        static GLOBAL: LazyLock<GatewayMetrics> =
            LazyLock::new(|| GatewayMetrics::new(&opentelemetry::global::meter(METER)));
        GLOBAL.clone()
    }

    /// Records one call refused for being past admission limit `limit`.
    pub(crate) fn record_admission_refusal(&self, limit: &'static str) {
        self.admission_refusals
            .add(1, &[KeyValue::new(ATTRIBUTE_LIMIT, limit)]);
    }

    /// Records one answered call of `tool`.
    pub(crate) fn record_tool_call(&self, tool: &'static str, result: &ToolResult, took: Duration) {
        let outcome = match result {
            Ok(_) => OUTCOME_OK,
            Err(error) if error.is_server_failure() => OUTCOME_ERROR,
            Err(error) => error.code.as_str(),
        };
        self.tool_calls.add(
            1,
            &[
                KeyValue::new(ATTRIBUTE_TOOL, tool),
                KeyValue::new(ATTRIBUTE_OUTCOME, outcome),
            ],
        );
        self.tool_call_duration
            .record(took.as_secs_f64(), &[KeyValue::new(ATTRIBUTE_TOOL, tool)]);
    }
}
