//! One JSON object per log line: its time, level, target and message, its own fields, and the
//! context it was logged in (trace and span ids, run, organization, step), read from the line's
//! fields first and then from its spans, innermost first.

use serde_json::{Map, Value};
use std::fmt::{self, Write as _};
use tracing::field::{Field, Visit};
use tracing::span::Record;
use tracing::{Event, Subscriber};
use tracing_subscriber::field::RecordFields;
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
/// [`ContextFields`], whose form it reads back; a span's trace is read from its extensions
/// (`agentprocess_service::trace::join` keeps it there).
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
                let mut fields = extensions
                    .get::<FormattedFields<N>>()
                    .map(|formatted| ContextFields::read(formatted))
                    .unwrap_or_default();
                if let Some(trace) = agentprocess_service::trace::of_span(&extensions) {
                    fields.insert("traceId".into(), trace.trace_id().into());
                    fields.insert("spanId".into(), trace.span_id().into());
                }
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

/// How `--log-format json` keeps a span's fields: only those a line takes its context from (the
/// names of [`CONTEXT`]), a `name<TAB>JSON value` line each. A field recorded after the span was
/// made is appended (the last line of a name wins), so recording one costs an append, not a
/// reading and rewriting of the span's fields.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ContextFields;

impl ContextFields {
    /// The fields `formatted` holds, by name.
    fn read(formatted: &str) -> Map<String, Value> {
        formatted
            .lines()
            .filter_map(|line| line.split_once('\t'))
            .filter_map(|(name, value)| Some((name.to_owned(), serde_json::from_str(value).ok()?)))
            .collect()
    }
}

impl<'writer> FormatFields<'writer> for ContextFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        let mut visitor = ContextVisitor {
            writer,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }

    fn add_fields(&self, current: &'writer mut FormattedFields<Self>, fields: &Record<'_>) -> fmt::Result {
        self.format_fields(current.as_writer(), fields)
    }
}

/// Writes the context fields it visits in [`ContextFields`]' form.
struct ContextVisitor<'writer> {
    writer: Writer<'writer>,
    result: fmt::Result,
}

impl ContextVisitor<'_> {
    fn write(&mut self, field: &Field, value: Value) {
        if self.result.is_ok() && CONTEXT.iter().any(|(name, _)| *name == field.name()) {
            self.result = writeln!(self.writer, "{}\t{value}", field.name());
        }
    }
}

impl Visit for ContextVisitor<'_> {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.write(field, value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.write(field, value.into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.write(field, value.into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if CONTEXT.iter().any(|(name, _)| *name == field.name()) {
            let mut text = String::new();
            let _ = write!(text, "{value:?}");
            self.write(field, text.into());
        }
    }
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

    /// A buffer the log writes into, read back by the test.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The one line `log` writes through the JSON log's layer, parsed, and what `log` answered.
    fn one_line_logged<T>(log: impl FnOnce() -> T) -> (Value, T) {
        use tracing_subscriber::layer::SubscriberExt;
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .fmt_fields(ContextFields)
                .event_format(JsonLines)
                .with_writer(move || writer.clone()),
        );
        let answer = tracing::subscriber::with_default(subscriber, log);
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        (serde_json::from_str(text.trim()).unwrap(), answer)
    }

    #[test]
    fn a_line_carries_what_its_spans_recorded_after_they_were_made() {
        let (line, ()) = one_line_logged(|| {
            let call = tracing::info_span!(
                "tool_call",
                tool = "claim",
                organization = %"acme \"east\"",
                detail = "not context",
                traceId = tracing::field::Empty,
            );
            call.record("traceId", "ab");
            call.record("traceId", "cd");
            let command = tracing::info_span!(parent: &call, "run_command", runId = "r_1", spanId = tracing::field::Empty);
            command.record("spanId", "ef");
            command.in_scope(|| tracing::info!(step = "review", "step claimed"));
        });
        assert_eq!(line["message"], "step claimed");
        assert_eq!(line["traceId"], "cd", "the last value recorded wins: {line}");
        assert_eq!(line["spanId"], "ef");
        assert_eq!(line["runId"], "r_1");
        assert_eq!(line["organization"], "acme \"east\"");
        assert_eq!(line["tool"], "claim");
        assert_eq!(line["step"], "review");
        assert_eq!(line["span"], "run_command");
        assert!(
            line.get("detail").is_none(),
            "a span's other fields stay out: {line}"
        );
    }

    #[test]
    fn a_line_carries_the_trace_its_span_joined_without_a_field_for_it() {
        let caller = agentprocess_service::trace::TraceParent::parse(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .unwrap();
        let (line, joined) = one_line_logged(|| {
            // No traceId or spanId field: the line can take them only from the span's extensions.
            let call = tracing::info_span!("tool_call", tool = "submit");
            let joined = agentprocess_service::trace::join(&call, Some(caller), [7; 24]);
            call.in_scope(|| tracing::info!("step submitted"));
            joined
        });
        assert_eq!(line["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736", "{line}");
        assert_eq!(line["spanId"], joined.span_id(), "{line}");
        assert_ne!(
            joined.span_id(),
            "00f067aa0ba902b7",
            "the span's own id, not its parent's"
        );
    }
}
