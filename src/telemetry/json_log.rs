//! One JSON object per log line: its time, level, target and message, its own fields, and the
//! context it was logged in (trace and span ids, run, organization, step), read from the line's
//! fields first and then from its spans, innermost first.

use serde_json::{Map, Value};
use std::fmt;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The context keys a line carries at its top level, each under one name whatever a span or an
/// event calls it.
const CONTEXT: [(&str, &str); 7] = [
    ("traceId", "traceId"),
    ("spanId", "spanId"),
    ("runId", "runId"),
    ("run_id", "runId"),
    ("organization", "organization"),
    ("step", "step"),
    ("tool", "tool"),
];

/// The event formatter of `--log-format json`. Span fields must be recorded with
/// `JsonFields`, so that each span's fields read back as one JSON object.
#[derive(Debug, Clone, Copy)]
pub(super) struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let metadata = event.metadata();
        let mut own = Map::new();
        event.record(&mut FieldsToJson(&mut own));
        let mut spans = Vec::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope {
                let extensions = span.extensions();
                let fields = extensions
                    .get::<FormattedFields<N>>()
                    .and_then(|formatted| serde_json::from_str::<Map<String, Value>>(formatted).ok())
                    .unwrap_or_default();
                spans.push((span.name(), fields));
            }
        }
        let line = line(
            &humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            metadata.level().as_str(),
            metadata.target(),
            own,
            &spans,
        );
        let text = serde_json::to_string(&line).map_err(|_| fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

/// The line's object: `timestamp`, `level`, `target`, `message`, the context keys (from the
/// event's own fields, else from the innermost span that has them), `span` (the innermost span's
/// name), then the event's other fields.
fn line(
    timestamp: &str,
    level: &str,
    target: &str,
    mut own: Map<String, Value>,
    spans: &[(&str, Map<String, Value>)],
) -> Map<String, Value> {
    let mut line = Map::new();
    line.insert("timestamp".into(), timestamp.into());
    line.insert("level".into(), level.into());
    line.insert("target".into(), target.into());
    line.insert("message".into(), own.remove("message").unwrap_or_default());
    for (name, key) in CONTEXT {
        if let Some(value) = own.remove(name)
            && !line.contains_key(key)
        {
            line.insert(key.into(), value);
        }
    }
    for (_, fields) in spans {
        for (name, key) in CONTEXT {
            if let Some(value) = fields.get(name)
                && !line.contains_key(key)
            {
                line.insert(key.into(), value.clone());
            }
        }
    }
    if let Some((name, _)) = spans.first() {
        line.insert("span".into(), (*name).into());
    }
    for (name, value) in own {
        line.entry(name).or_insert(value);
    }
    line
}

/// Records an event's fields as JSON values: numbers and booleans as themselves, everything
/// else (`%` Display and `?` Debug fields included) as the text it formats to.
struct FieldsToJson<'a>(&'a mut Map<String, Value>);

impl Visit for FieldsToJson<'_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        let value = serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number);
        self.0.insert(field.name().into(), value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.insert(field.name().into(), value.to_string().into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn a_line_takes_its_context_from_its_own_fields_then_the_innermost_span() {
        let own = object(json!({"message": "run started", "run_id": "r_1", "process": "p"}));
        let spans = [
            (
                "run_command",
                object(json!({"runId": "r_other", "command": "start_run"})),
            ),
            (
                "tool_call",
                object(json!({"tool": "start_run", "organization": "acme", "traceId": "ab", "spanId": "cd"})),
            ),
        ];
        let line = line(
            "2026-01-01T00:00:00.000Z",
            "INFO",
            "agentprocess_run_actor",
            own,
            &spans,
        );
        assert_eq!(
            Value::Object(line),
            json!({
                "timestamp": "2026-01-01T00:00:00.000Z",
                "level": "INFO",
                "target": "agentprocess_run_actor",
                "message": "run started",
                "runId": "r_1",
                "traceId": "ab",
                "spanId": "cd",
                "organization": "acme",
                "tool": "start_run",
                "span": "run_command",
                "process": "p",
            })
        );
    }

    #[test]
    fn a_line_outside_any_span_has_only_its_own_fields() {
        let own = object(json!({"message": "store opened", "recovered": 3}));
        let line = line("t", "INFO", "agentprocess", own, &[]);
        assert_eq!(
            Value::Object(line),
            json!({"timestamp": "t", "level": "INFO", "target": "agentprocess", "message": "store opened", "recovered": 3})
        );
    }
}
