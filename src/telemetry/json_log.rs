//! One JSON object per log line: its time, level, target and message, its own fields, and the
//! context it was logged in (trace and span ids, run, organization, step), read from the line's
//! fields first and then from its spans, innermost first.

use serde_json::Value;
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
        let mut own = OwnFields::default();
        event.record(&mut own);
        let mut spans = Vec::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope {
                let extensions = span.extensions();
                let mut fields = extensions
                    .get::<FormattedFields<N>>()
                    .map(|formatted| ContextFields::read(formatted))
                    .unwrap_or_default();
                if let Some(trace) = agentprocess_service::trace::of_span(&extensions) {
                    fields.push(("traceId".into(), format!("\"{}\"", trace.trace_id())));
                    fields.push(("spanId".into(), format!("\"{}\"", trace.span_id())));
                }
                spans.push((span.name(), fields));
            }
        }
        let line = line(
            &humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            metadata.level().as_str(),
            metadata.target(),
            own.0,
            &spans,
        );
        writeln!(writer, "{line}")
    }
}

/// A span's context fields: each name with its value as JSON text, in the order recorded (a
/// later one of a name replaces an earlier one).
type SpanFields = Vec<(String, String)>;

/// The line's object, as JSON text: `timestamp`, `level`, `target`, `message`, the context keys
/// (from the event's own fields, else from the innermost span that has them), `span` (the
/// innermost span's name), then the event's other fields.
fn line(
    timestamp: &str,
    level: &str,
    target: &str,
    own: Vec<(&str, Value)>,
    spans: &[(&str, SpanFields)],
) -> String {
    let mut line = JsonObject::default();
    line.member("timestamp", &Value::from(timestamp).to_string());
    line.member("level", &Value::from(level).to_string());
    line.member("target", &Value::from(target).to_string());
    let message = own.iter().find(|(name, _)| *name == "message");
    line.member(
        "message",
        &message
            .map_or(Value::Null, |(_, value)| value.clone())
            .to_string(),
    );
    let is_context = |name: &str| CONTEXT.iter().any(|(context, _)| *context == name);
    for (name, key) in CONTEXT {
        if let Some((_, value)) = own.iter().find(|(own_name, _)| *own_name == name) {
            line.member_once(key, &value.to_string());
        }
    }
    for (_, fields) in spans {
        for (name, key) in CONTEXT {
            if let Some((_, value)) = fields.iter().rev().find(|(field, _)| field == name) {
                line.member_once(key, value);
            }
        }
    }
    if let Some((name, _)) = spans.first() {
        line.member_once("span", &Value::from(*name).to_string());
    }
    for (name, value) in &own {
        if *name != "message" && !is_context(name) {
            line.member_once(name, &value.to_string());
        }
    }
    line.close()
}

/// A JSON object written member by member, each key at most once.
#[derive(Default)]
struct JsonObject {
    text: String,
    keys: Vec<String>,
}

impl JsonObject {
    /// Adds `key` with `value` (JSON text).
    fn member(&mut self, key: &str, value: &str) {
        self.text.push(if self.keys.is_empty() { '{' } else { ',' });
        self.text.push_str(&Value::from(key).to_string());
        self.text.push(':');
        self.text.push_str(value);
        self.keys.push(key.to_owned());
    }

    /// Adds `key` with `value` unless the object has that key already.
    fn member_once(&mut self, key: &str, value: &str) {
        if !self.keys.iter().any(|written| written == key) {
            self.member(key, value);
        }
    }

    /// The object's text.
    fn close(mut self) -> String {
        if self.keys.is_empty() {
            self.text.push('{');
        }
        self.text.push('}');
        self.text
    }
}

/// How `--log-format json` keeps a span's fields: only those a line takes its context from (the
/// names of [`CONTEXT`]), a `name<TAB>JSON value` line each. A field recorded after the span was
/// made is appended (the last line of a name wins), so recording one costs an append, not a
/// reading and rewriting of the span's fields.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ContextFields;

impl ContextFields {
    /// The fields `formatted` holds, each with its value as JSON text, in the order recorded.
    fn read(formatted: &str) -> SpanFields {
        formatted
            .lines()
            .filter_map(|line| line.split_once('\t'))
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
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

/// An event's fields in the order recorded, as JSON values: numbers and booleans as themselves,
/// everything else (`%` Display and `?` Debug fields included) as the text it formats to.
#[derive(Default)]
struct OwnFields(Vec<(&'static str, Value)>);

impl Visit for OwnFields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        let value = serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number);
        self.0.push((field.name(), value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.push((field.name(), value.into()));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.push((field.name(), value.into()));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.push((field.name(), value.into()));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name(), value.into()));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.push((field.name(), value.to_string().into()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let mut text = String::new();
        let _ = write!(text, "{value:?}");
        self.0.push((field.name(), text.into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A span's context fields as [`ContextFields`] keeps them, from a JSON object.
    fn span_fields(value: Value) -> SpanFields {
        match value {
            Value::Object(map) => map
                .into_iter()
                .map(|(name, value)| (name, value.to_string()))
                .collect(),
            _ => panic!("not an object"),
        }
    }

    /// The keys of a line, in the order written, and the line parsed.
    fn parsed(line: &str) -> (Vec<String>, Value) {
        let value: Value = serde_json::from_str(line).unwrap();
        let keys = value.as_object().unwrap().keys().cloned().collect();
        (keys, value)
    }

    #[test]
    fn a_line_takes_its_context_from_its_own_fields_then_the_innermost_span() {
        let own = vec![
            ("message", json!("run started")),
            ("run_id", json!("r_1")),
            ("process", json!("p")),
        ];
        let spans = [
            (
                "run_command",
                span_fields(json!({"runId": "r_other", "command": "start_run"})),
            ),
            (
                "tool_call",
                span_fields(
                    json!({"tool": "start_run", "organization": "acme", "traceId": "ab", "spanId": "cd"}),
                ),
            ),
        ];
        let (keys, line) = parsed(&line(
            "2026-01-01T00:00:00.000Z",
            "INFO",
            "agentprocess_run_actor",
            own,
            &spans,
        ));
        assert_eq!(
            line,
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
        assert_eq!(
            keys,
            [
                "timestamp",
                "level",
                "target",
                "message",
                "runId",
                "traceId",
                "spanId",
                "organization",
                "tool",
                "span",
                "process"
            ]
        );
    }

    #[test]
    fn a_line_outside_any_span_has_only_its_own_fields() {
        let own = vec![("message", json!("store opened")), ("recovered", json!(3))];
        let (keys, line) = parsed(&line("t", "INFO", "agentprocess", own, &[]));
        assert_eq!(
            line,
            json!({"timestamp": "t", "level": "INFO", "target": "agentprocess", "message": "store opened", "recovered": 3})
        );
        assert_eq!(keys, ["timestamp", "level", "target", "message", "recovered"]);
    }

    #[test]
    fn an_own_field_cannot_replace_what_the_line_already_says() {
        let own = vec![("level", json!("made up")), ("message", json!("m"))];
        let (_, line) = parsed(&line("t", "WARN", "agentprocess", own, &[]));
        assert_eq!(line["level"], "WARN");
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
