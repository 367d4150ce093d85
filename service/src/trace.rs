//! W3C trace context between roles: the `traceparent` of the tool call being served, carried
//! from the gateway over gRPC to the actor host it calls, so the log lines of one call carry one
//! trace id in every process (W3C Trace Context, level 1).

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing_subscriber::registry::{LookupSpan, SpanData};

use crate::exported_spans::ExportedSpan;

tokio::task_local! {
    static CURRENT: TraceParent;
}

/// A `traceparent`: the trace this call belongs to, the span that called, and whether the trace
/// is sampled. Only version `00` is written; a later version is read by its first four fields,
/// as the W3C text says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    trace_id: [u8; 16],
    parent_id: [u8; 8],
    sampled: bool,
}

impl TraceParent {
    /// Reads a `traceparent` header; `None` when it is not a valid one (then a new trace
    /// starts, as the W3C text says).
    pub fn parse(text: &str) -> Option<TraceParent> {
        let mut parts = text.trim().split('-');
        let version = parts.next()?;
        let trace_id = parts.next()?;
        let parent_id = parts.next()?;
        let flags = parts.next()?;
        let extra = parts.next();
        if version.len() != 2 || version.eq_ignore_ascii_case("ff") || (version == "00" && extra.is_some()) {
            return None;
        }
        u8::from_str_radix(version, 16).ok()?;
        let trace_id: [u8; 16] = unhex(trace_id)?;
        let parent_id: [u8; 8] = unhex(parent_id)?;
        let [flags]: [u8; 1] = unhex(flags)?;
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return None;
        }
        Some(TraceParent {
            trace_id,
            parent_id,
            sampled: flags & 1 == 1,
        })
    }

    /// A new trace, sampled, whose first span is `random[16..]`.
    pub fn new(random: [u8; 24]) -> TraceParent {
        let mut trace_id = [0u8; 16];
        let mut parent_id = [0u8; 8];
        trace_id.copy_from_slice(&random[..16]);
        parent_id.copy_from_slice(&random[16..]);
        // All-zero ids are invalid; random ones are all zero once in 2^64.
        trace_id[15] |= u8::from(trace_id == [0; 16]);
        parent_id[7] |= u8::from(parent_id == [0; 8]);
        TraceParent {
            trace_id,
            parent_id,
            sampled: true,
        }
    }

    /// The same trace, with `span_id` as the calling span: what this role passes on.
    pub fn child(&self, span_id: [u8; 8]) -> TraceParent {
        TraceParent {
            parent_id: if span_id == [0; 8] {
                self.parent_id
            } else {
                span_id
            },
            ..*self
        }
    }

    /// A context from its parts: the trace, the span passing it on, whether it is sampled.
    pub(crate) fn from_parts(trace_id: [u8; 16], parent_id: [u8; 8], sampled: bool) -> TraceParent {
        TraceParent {
            trace_id,
            parent_id,
            sampled,
        }
    }

    pub(crate) fn trace_id_bytes(&self) -> [u8; 16] {
        self.trace_id
    }

    pub(crate) fn parent_id_bytes(&self) -> [u8; 8] {
        self.parent_id
    }

    /// The trace id in hex, as log lines carry it.
    pub fn trace_id(&self) -> String {
        hex(&self.trace_id)
    }
}

impl fmt::Display for TraceParent {
    /// The header value: `00-<trace id>-<parent id>-<flags>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            hex(&self.trace_id),
            hex(&self.parent_id),
            u8::from(self.sampled)
        )
    }
}

impl TraceParent {
    /// The id of the span that passes this context on, in hex, as log lines carry it.
    pub fn span_id(&self) -> String {
        hex(&self.parent_id)
    }

    /// Whether the trace is sampled (its `sampled` flag).
    pub fn sampled(&self) -> bool {
        self.sampled
    }

    /// This context as OpenTelemetry's remote span context: what a span of this role takes as
    /// its parent.
    pub fn remote_context(&self) -> opentelemetry::Context {
        use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
        let flags = if self.sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        let remote = SpanContext::new(
            TraceId::from_bytes(self.trace_id),
            SpanId::from_bytes(self.parent_id),
            flags,
            true,
            TraceState::default(),
        );
        opentelemetry::Context::new().with_remote_span_context(remote)
    }
}

/// Makes `span` this role's span of a trace, and answers the context to pass on from it.
///
/// `parent` (a caller's `traceparent`, or the context a call arrived in) becomes the span's
/// parent. When traces are exported (the [`SpanExport`](crate::exported_spans::SpanExport)
/// layer is installed and made the span), the context passed on names the exported span, so
/// what this role calls hangs under it; otherwise it is `parent` with a span id from `random`,
/// or a new trace from `random`, as without an exporter. Either way the span keeps the trace in
/// its extensions ([`of_span`]) and, unless the log reads it from there
/// ([`record_trace_in_span_fields`]), in its `traceId` and `spanId` fields when it declares
/// them, so log lines in it carry both. Call it before the span is first entered.
pub fn join(span: &tracing::Span, parent: Option<TraceParent>, random: [u8; 24]) -> TraceParent {
    let without_exporter = || {
        let mut span_id = [0u8; 8];
        span_id.copy_from_slice(&random[16..]);
        match parent {
            Some(parent) => parent.child(span_id),
            None => TraceParent::new(random),
        }
    };
    let mut trace = None;
    span.with_subscriber(|(id, dispatch)| {
        if let Some(data) = dispatch
            .downcast_ref::<tracing_subscriber::Registry>()
            .and_then(|registry| registry.span_data(id))
        {
            let mut extensions = data.extensions_mut();
            let joined = match extensions.get_mut::<ExportedSpan>() {
                Some(exported) => {
                    if let Some(parent) = parent {
                        exported.join_remote(parent);
                    }
                    exported.trace()
                }
                None => without_exporter(),
            };
            extensions.replace(joined);
            trace = Some(joined);
        }
    });
    let trace = trace.unwrap_or_else(without_exporter);
    if RECORD_FIELDS.load(Ordering::Relaxed) {
        span.record("traceId", trace.trace_id());
        span.record("spanId", trace.span_id());
    }
    trace
}

/// Whether [`join`] records the trace in the span's `traceId` and `spanId` fields as well as
/// keeping it in the span's extensions. The text log shows span fields, so it needs them; the
/// JSON log reads the extension ([`of_span`]), and leaving the fields out spares each span two
/// recordings (and the exported span two attributes repeating its own ids).
static RECORD_FIELDS: AtomicBool = AtomicBool::new(true);

/// Says whether [`join`] records the trace in span fields: set once, as the log is set up.
pub fn record_trace_in_span_fields(record: bool) {
    RECORD_FIELDS.store(record, Ordering::Relaxed);
}

/// The trace [`join`] gave a span, from the span's extensions (a log formatter's view of it).
pub fn of_span(extensions: &tracing_subscriber::registry::Extensions<'_>) -> Option<TraceParent> {
    extensions.get::<TraceParent>().copied()
}

/// The trace context of the call this task serves, if one was set.
pub fn current() -> Option<TraceParent> {
    CURRENT.try_with(|trace| *trace).ok()
}

/// Runs `call` with `trace` as its trace context ([`current`] inside it).
pub async fn scope<F: Future>(trace: TraceParent, call: F) -> F::Output {
    CURRENT.scope(trace, call).await
}

/// Random bytes for new trace and span ids when no exporter makes them: a thread-local
/// generator seeded once per thread (W3C Trace Context asks for ids unlikely to repeat, not for
/// secrets), so a tool call makes no system call for them.
pub fn random_ids() -> [u8; 24] {
    let mut random = [0u8; 24];
    fastrand::fill(&mut random);
    random
}

/// Lower-case hex, as W3C Trace Context writes ids.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(2 * bytes.len());
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N || !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn the_w3c_example_reads_and_writes_back() {
        let trace = TraceParent::parse(EXAMPLE).unwrap();
        assert_eq!(trace.trace_id(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(trace.to_string(), EXAMPLE);
        let child = trace.child([1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            child.to_string(),
            "00-0af7651916cd43dd8448eb211c80319c-0102030405060708-01"
        );
    }

    #[test]
    fn invalid_headers_are_refused() {
        for bad in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "0-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
        // A later version with more fields is read by its first four.
        let later = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00-more";
        assert!(TraceParent::parse(later).is_some());
    }

    #[tokio::test]
    async fn the_current_trace_is_the_one_in_scope() {
        assert_eq!(current(), None);
        let trace = TraceParent::new([7; 24]);
        let seen = scope(trace, async { current() }).await;
        assert_eq!(seen, Some(trace));
        assert_eq!(current(), None);
    }
}
