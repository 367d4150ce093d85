//! Spans exported over OpenTelemetry, made by a `tracing` layer of our own: each exported span
//! keeps its ids, start, attributes and events in the span, and is handed to the SDK's span
//! processor as it closes, with no OpenTelemetry span, context or builder made on the way.

use opentelemetry::trace::{Event, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_sdk::trace::{
    SamplingDecision, ShouldSample, SpanData, SpanEvents, SpanLinks, SpanProcessor,
};
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event as TracingEvent, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::trace::TraceParent;

/// Events kept per span (OpenTelemetry's default limit); later ones are counted as dropped.
const MAX_EVENTS_PER_SPAN: usize = 128;

/// The fields a span declares for the text log's sake ([`crate::trace::join`] records its own
/// ids in them): an exported span carries its ids itself, so they are not attributes.
const OWN_ID_FIELDS: [&str; 2] = ["traceId", "spanId"];

/// The layer: makes an [`ExportedSpan`] for every span its filter lets through and hands the
/// sampled ones to `processor` as they close.
pub struct SpanExport {
    sampler: Arc<dyn ShouldSample>,
    processor: Arc<dyn SpanProcessor>,
    scope: InstrumentationScope,
}

impl SpanExport {
    /// Spans sampled by `sampler` go to `processor`, under the instrumentation scope `scope`.
    pub fn new(
        sampler: Box<dyn ShouldSample>,
        processor: Arc<dyn SpanProcessor>,
        scope: &'static str,
    ) -> Self {
        SpanExport {
            sampler: Arc::from(sampler),
            processor,
            scope: InstrumentationScope::builder(scope).build(),
        }
    }
}

impl fmt::Debug for SpanExport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpanExport")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// What an exported span holds while it is open, in its extensions.
pub(crate) struct ExportedSpan {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    /// All zero for the first span of a trace.
    parent_span_id: [u8; 8],
    parent_is_remote: bool,
    sampled: bool,
    start: SystemTime,
    attributes: Vec<KeyValue>,
    events: Vec<Event>,
    dropped_events: u32,
    status: Status,
    /// What decides whether the span is sampled once [`crate::trace::join`] gives it a parent
    /// from another process.
    sampler: Arc<dyn ShouldSample>,
    name: &'static str,
}

impl ExportedSpan {
    /// The context this span passes on to what it calls.
    pub(crate) fn trace(&self) -> TraceParent {
        TraceParent::from_parts(self.trace_id, self.span_id, self.sampled)
    }

    /// Makes `parent` (a context from another process) this span's parent: its trace, its
    /// span as the parent span, and a sampling decision taken again with it.
    pub(crate) fn join_remote(&mut self, parent: TraceParent) {
        self.trace_id = parent.trace_id_bytes();
        self.parent_span_id = parent.parent_id_bytes();
        self.parent_is_remote = true;
        self.sampled = sampled(
            self.sampler.as_ref(),
            Some(&parent.remote_context()),
            self.trace_id,
            self.name,
        );
    }
}

/// Whether `sampler` keeps a span named `name` of trace `trace_id` under `parent`.
fn sampled(
    sampler: &dyn ShouldSample,
    parent: Option<&opentelemetry::Context>,
    trace_id: [u8; 16],
    name: &str,
) -> bool {
    let result = sampler.should_sample(
        parent,
        TraceId::from_bytes(trace_id),
        name,
        &SpanKind::Internal,
        &[],
        &[],
    );
    result.decision == SamplingDecision::RecordAndSample
}

impl<S> Layer<S> for SpanExport
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attributes: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = span.parent().and_then(|parent| {
            parent
                .extensions()
                .get::<ExportedSpan>()
                .map(|parent| (parent.trace_id, parent.span_id, parent.sampled))
        });
        let mut random = [0u8; 24];
        fastrand::fill(&mut random);
        let mut span_id = [0u8; 8];
        span_id.copy_from_slice(&random[16..]);
        span_id[7] |= u8::from(span_id == [0; 8]);
        let name = span.metadata().name();
        let (trace_id, parent_span_id, sampled) = match parent {
            Some((trace_id, parent_span_id, sampled)) => (trace_id, parent_span_id, sampled),
            None => {
                let mut trace_id = [0u8; 16];
                trace_id.copy_from_slice(&random[..16]);
                trace_id[15] |= u8::from(trace_id == [0; 16]);
                let sampled = sampled(self.sampler.as_ref(), None, trace_id, name);
                (trace_id, [0; 8], sampled)
            }
        };
        let mut fields = Fields::default();
        attributes.record(&mut fields);
        span.extensions_mut().insert(ExportedSpan {
            trace_id,
            span_id,
            parent_span_id,
            parent_is_remote: false,
            sampled,
            start: SystemTime::now(),
            attributes: fields.attributes,
            events: Vec::new(),
            dropped_events: 0,
            status: Status::Unset,
            sampler: Arc::clone(&self.sampler),
            name,
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        let Some(exported) = extensions.get_mut::<ExportedSpan>() else {
            return;
        };
        let mut fields = Fields {
            attributes: std::mem::take(&mut exported.attributes),
            message: None,
        };
        values.record(&mut fields);
        exported.attributes = fields.attributes;
    }

    fn on_event(&self, event: &TracingEvent<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event) else { return };
        let mut extensions = span.extensions_mut();
        let Some(exported) = extensions.get_mut::<ExportedSpan>() else {
            return;
        };
        if !exported.sampled {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let message = fields.message.unwrap_or_default();
        if *event.metadata().level() == tracing::Level::ERROR {
            exported.status = Status::error(message.clone());
        }
        if exported.events.len() < MAX_EVENTS_PER_SPAN {
            let mut attributes = fields.attributes;
            attributes.push(KeyValue::new("level", event.metadata().level().as_str()));
            exported
                .events
                .push(Event::new(message, SystemTime::now(), attributes, 0));
        } else {
            exported.dropped_events += 1;
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(exported) = span.extensions_mut().remove::<ExportedSpan>() else {
            return;
        };
        if !exported.sampled {
            return;
        }
        let span_context = SpanContext::new(
            TraceId::from_bytes(exported.trace_id),
            SpanId::from_bytes(exported.span_id),
            TraceFlags::SAMPLED,
            false,
            TraceState::NONE,
        );
        self.processor.on_end(SpanData {
            span_context,
            parent_span_id: SpanId::from_bytes(exported.parent_span_id),
            parent_span_is_remote: exported.parent_is_remote,
            span_kind: SpanKind::Internal,
            name: exported.name.into(),
            start_time: exported.start,
            end_time: SystemTime::now(),
            attributes: exported.attributes,
            dropped_attributes_count: 0,
            events: span_events(exported.events, exported.dropped_events),
            links: SpanLinks::default(),
            status: exported.status,
            instrumentation_scope: self.scope.clone(),
        });
    }
}

fn span_events(events: Vec<Event>, dropped_count: u32) -> SpanEvents {
    let mut span_events = SpanEvents::default();
    span_events.events = events;
    span_events.dropped_count = dropped_count;
    span_events
}

/// A span's or an event's fields as attributes; an event's `message` apart, as its name.
#[derive(Default)]
struct Fields {
    attributes: Vec<KeyValue>,
    message: Option<String>,
}

impl Fields {
    fn push(&mut self, field: &Field, value: impl Into<Value>) {
        if !OWN_ID_FIELDS.contains(&field.name()) {
            self.attributes.push(KeyValue::new(field.name(), value));
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = Some(value.to_owned());
        } else {
            self.push(field, value.to_owned());
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match i64::try_from(value) {
            Ok(value) => self.push(field, value),
            Err(_) => self.push(field, value.to_string()),
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.message = Some(format!("{value:?}"));
        } else {
            self.push(field, format!("{value:?}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::Sampler;
    use std::sync::Mutex;
    use tracing_subscriber::layer::SubscriberExt;

    /// A processor that keeps what it is handed.
    #[derive(Debug, Default)]
    struct Kept(Mutex<Vec<SpanData>>);

    impl SpanProcessor for Kept {
        fn on_start(&self, _: &mut opentelemetry_sdk::trace::Span, _: &opentelemetry::Context) {}
        fn on_end(&self, span: SpanData) {
            self.0.lock().unwrap().push(span);
        }
        fn force_flush(&self) -> OTelSdkResult {
            Ok(())
        }
        fn shutdown_with_timeout(&self, _: std::time::Duration) -> OTelSdkResult {
            Ok(())
        }
    }

    fn spans_of(sampler: Sampler, work: impl FnOnce()) -> Vec<SpanData> {
        let kept = Arc::new(Kept::default());
        let layer = SpanExport::new(Box::new(sampler), kept.clone(), "agentprocess");
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, work);
        std::mem::take(&mut *kept.0.lock().unwrap())
    }

    #[test]
    fn a_child_span_shares_its_parents_trace_and_names_it_as_parent() {
        let spans = spans_of(Sampler::AlwaysOn, || {
            let outer = tracing::info_span!("tool_call", tool = "submit", attempts = 2_u64);
            let inner = tracing::info_span!(parent: &outer, "run_command", command = %"submit");
            drop(inner);
            drop(outer);
        });
        let [inner, outer] = spans.as_slice() else {
            panic!("two spans, inner first: {spans:?}")
        };
        assert_eq!(inner.name, "run_command");
        assert_eq!(outer.name, "tool_call");
        assert_eq!(inner.span_context.trace_id(), outer.span_context.trace_id());
        assert_eq!(inner.parent_span_id, outer.span_context.span_id());
        assert_eq!(outer.parent_span_id, SpanId::INVALID);
        assert!(outer.attributes.contains(&KeyValue::new("tool", "submit")));
        assert!(outer.attributes.contains(&KeyValue::new("attempts", 2_i64)));
        assert!(inner.attributes.contains(&KeyValue::new("command", "submit")));
        assert!(outer.start_time <= outer.end_time);
    }

    #[test]
    fn a_joined_span_takes_the_callers_trace_and_passes_its_own_span_on() {
        let caller = TraceParent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").unwrap();
        let mut passed_on = None;
        let spans = spans_of(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)), || {
            let span = tracing::info_span!("tool_call", traceId = tracing::field::Empty);
            passed_on = Some(crate::trace::join(&span, Some(caller), [9; 24]));
        });
        let [span] = spans.as_slice() else {
            panic!("{spans:?}")
        };
        assert_eq!(
            span.span_context.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(span.parent_span_id.to_string(), "b7ad6b7169203331");
        assert!(span.parent_span_is_remote);
        let passed_on = passed_on.unwrap();
        assert_eq!(passed_on.trace_id(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(passed_on.span_id(), span.span_context.span_id().to_string());
        assert!(
            span.attributes.iter().all(|kv| kv.key.as_str() != "traceId"),
            "its own ids are not attributes: {:?}",
            span.attributes
        );
    }

    #[test]
    fn a_caller_that_did_not_sample_is_followed_under_the_parent_based_sampler() {
        let unsampled =
            TraceParent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00").unwrap();
        let mut passed_on = None;
        let spans = spans_of(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)), || {
            let span = tracing::info_span!("tool_call");
            passed_on = Some(crate::trace::join(&span, Some(unsampled), [9; 24]));
            let child = tracing::info_span!(parent: &span, "run_command");
            drop(child);
        });
        assert!(spans.is_empty(), "{spans:?}");
        assert!(!passed_on.unwrap().sampled());
    }

    #[test]
    fn nothing_is_exported_under_always_off() {
        let spans = spans_of(Sampler::AlwaysOff, || {
            let span = tracing::info_span!("tool_call");
            span.in_scope(|| tracing::warn!("kept nowhere"));
        });
        assert!(spans.is_empty());
    }

    #[test]
    fn warnings_become_events_and_an_error_the_spans_status() {
        let spans = spans_of(Sampler::AlwaysOn, || {
            let span = tracing::info_span!("webhook_delivery", runId = "r-1");
            span.in_scope(|| {
                tracing::warn!(attempt = 1_u64, "delivery failed");
                tracing::error!("gave up");
            });
        });
        let [span] = spans.as_slice() else {
            panic!("{spans:?}")
        };
        let names: Vec<&str> = span.events.events.iter().map(|e| e.name.as_ref()).collect();
        assert_eq!(names, ["delivery failed", "gave up"]);
        assert!(
            span.events.events[0]
                .attributes
                .contains(&KeyValue::new("attempt", 1_i64))
        );
        assert_eq!(span.status, Status::error("gave up"));
    }

    #[test]
    fn a_field_recorded_later_becomes_an_attribute() {
        let spans = spans_of(Sampler::AlwaysOn, || {
            let span = tracing::info_span!("tool_call", runId = tracing::field::Empty);
            span.record("runId", "r-7");
        });
        let [span] = spans.as_slice() else {
            panic!("{spans:?}")
        };
        assert!(span.attributes.contains(&KeyValue::new("runId", "r-7")));
    }
}
