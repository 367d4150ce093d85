//! The info lines operators follow a run by: one per history event a commit appended (see
//! [`crate::machine::history`]), logged only once the commit succeeded, each in the trace of the
//! call that made it; and the run metrics counted off the same events.

use super::RunAddress;
use crate::machine::history::timer_name;
use crate::machine::{HistoryEvent, HistoryKind};
use crate::metrics::RunActorMetrics;
use agentprocess_service::trace::TraceParent;

/// A history event a command appended, with the trace of the call that sent the command.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub event: HistoryEvent,
    pub trace: Option<TraceParent>,
}

/// Logs the history events of a committed write at info level: the organization, the run and its
/// process, the step when there is one, who, the trace and span of the call that made it, and the
/// event's own fields as text.
pub(crate) fn log(address: &RunAddress, process: &str, changes: &[Change]) {
    let RunAddress { organization, run_id } = address;
    for Change { event, trace } in changes {
        let by = event.by.as_str();
        let trace_id = trace.map(|trace| trace.trace_id());
        let span_id = trace.map(|trace| trace.span_id());
        let (trace_id, span_id) = (trace_id.as_deref(), span_id.as_deref());
        match &event.kind {
            HistoryKind::Started { mode } => {
                tracing::info!(%organization, %run_id, traceId = trace_id, spanId = span_id, %process, by = %by, mode = mode.as_str(), "run started")
            }
            HistoryKind::Claimed { step, expires_at } => {
                tracing::info!(%organization, %run_id, traceId = trace_id, spanId = span_id, %process, %step, by = %by, %expires_at, "step claimed")
            }
            HistoryKind::Renewed {
                step,
                expires_at,
                progress,
            } => tracing::info!(
                %organization, %run_id, traceId = trace_id, spanId = span_id, %process, %step, by = %by, %expires_at, progress = progress.as_deref(),
                "claim renewed"
            ),
            HistoryKind::LeaseExpired { step, holder } => tracing::info!(
                %organization, %run_id, traceId = trace_id, spanId = span_id, %process, %step, by = %by, %holder,
                "claim lease expired; the step is claimable again"
            ),
            HistoryKind::Submitted {
                step,
                summary,
                next,
                reason,
            } => tracing::info!(
                %organization, %run_id, traceId = trace_id, spanId = span_id, %process, %step, by = %by, summary = summary.as_deref(),
                next = next.as_deref(), reason = reason.as_deref(), "step submitted"
            ),
            HistoryKind::CheckVerdict {
                step,
                verdict,
                action,
                work_item,
            } => tracing::info!(
                %organization, %run_id, traceId = trace_id, spanId = span_id, %process, %step, by = %by, verdict = verdict.as_str(),
                action = action.as_str(), work_item = work_item.as_deref(), "check verdict"
            ),
            HistoryKind::Escalated {
                step,
                work_item,
                note,
            } => tracing::info!(
                %organization, %run_id, traceId = trace_id, spanId = span_id, %process, %step, by = %by, %work_item, %note, "step escalated to a person"
            ),
            HistoryKind::Returned {
                step,
                work_item,
                note,
            } => tracing::info!(
                %organization, %run_id, traceId = trace_id, spanId = span_id, %process, %step, by = %by, %work_item, %note,
                "escalation returned with a note"
            ),
            HistoryKind::CompletedForAgent {
                step,
                work_item,
                summary,
            } => tracing::info!(
                %organization, %run_id, traceId = trace_id, spanId = span_id, %process, %step, by = %by, %work_item, summary = summary.as_deref(),
                "escalated step completed in the agent's place"
            ),
            HistoryKind::Decided {
                step,
                work_item,
                decision,
                note,
            } => tracing::info!(
                %organization, %run_id, traceId = trace_id, spanId = span_id, %process, %step, by = %by, %work_item, decision = decision.as_str(),
                note = note.as_deref(), "work item decided"
            ),
            HistoryKind::TimerFired { step, timer } => tracing::info!(
                %organization, %run_id, traceId = trace_id, spanId = span_id, %process, %step, by = %by, timer = timer_name(*timer), "timer fired"
            ),
            HistoryKind::EventReceived { name, consumed_by } => match consumed_by {
                Some(step) => tracing::info!(
                    %organization, %run_id, traceId = trace_id, spanId = span_id, %process, %step, by = %by, event = %name, "event received and consumed"
                ),
                None => {
                    tracing::info!(%organization, %run_id, traceId = trace_id, spanId = span_id, %process, by = %by, event = %name, "event received and held")
                }
            },
            HistoryKind::HeldEventConsumed { name, step } => tracing::info!(
                %organization, %run_id, traceId = trace_id, spanId = span_id, %process, %step, by = %by, event = %name, "held event consumed"
            ),
            HistoryKind::Cancelled { reason } => {
                tracing::info!(%organization, %run_id, traceId = trace_id, spanId = span_id, %process, by = %by, %reason, "run cancelled")
            }
            HistoryKind::Ended { state, outcome, note } => tracing::info!(
                %organization, %run_id, traceId = trace_id, spanId = span_id, %process, by = %by, %state, outcome = outcome.as_deref(),
                note = note.as_deref(), "run ended"
            ),
        }
    }
}

/// Counts committed changes in the run metrics: runs started and ended (by the run's process),
/// claims granted and renewed, and lapsed leases.
pub(crate) fn count(metrics: &RunActorMetrics, process: &str, changes: &[Change]) {
    for Change { event, .. } in changes {
        match &event.kind {
            HistoryKind::Started { .. } => metrics.record_run_started(process),
            HistoryKind::Ended { outcome, .. } => metrics.record_run_ended(process, outcome.as_deref()),
            HistoryKind::Claimed { .. } => metrics.record_claim_granted(),
            HistoryKind::Renewed { .. } => metrics.record_claim_renewed(),
            HistoryKind::LeaseExpired { .. } => metrics.record_lease_expired(),
            _ => {}
        }
    }
}
