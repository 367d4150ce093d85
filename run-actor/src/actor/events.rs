//! The info lines operators follow a run by: one per history event a commit appended (see
//! [`crate::machine::history`]), logged only once the commit succeeded.

use super::RunAddress;
use crate::machine::history::timer_name;
use crate::machine::{HistoryEvent, HistoryKind};

/// Logs the history events of a committed write at info level: the organization, the run, the
/// step when there is one, who, and the event's own fields as text.
pub(crate) fn log(address: &RunAddress, events: &[HistoryEvent]) {
    let RunAddress { organization, run_id } = address;
    for event in events {
        let by = event.by.as_str();
        match &event.kind {
            HistoryKind::Started { mode } => {
                tracing::info!(%organization, %run_id, by, mode = mode.as_str(), "run started")
            }
            HistoryKind::Claimed { step, expires_at } => {
                tracing::info!(%organization, %run_id, %step, by, %expires_at, "step claimed")
            }
            HistoryKind::Renewed {
                step,
                expires_at,
                progress,
            } => tracing::info!(
                %organization, %run_id, %step, by, %expires_at, progress = progress.as_deref(),
                "claim renewed"
            ),
            HistoryKind::LeaseExpired { step, holder } => tracing::info!(
                %organization, %run_id, %step, by, %holder,
                "claim lease expired; the step is claimable again"
            ),
            HistoryKind::Submitted {
                step,
                summary,
                next,
                reason,
            } => tracing::info!(
                %organization, %run_id, %step, by, summary = summary.as_deref(),
                next = next.as_deref(), reason = reason.as_deref(), "step submitted"
            ),
            HistoryKind::CheckVerdict {
                step,
                verdict,
                action,
                work_item,
            } => tracing::info!(
                %organization, %run_id, %step, by, verdict = verdict.as_str(),
                action = action.as_str(), work_item = work_item.as_deref(), "check verdict"
            ),
            HistoryKind::Escalated {
                step,
                work_item,
                note,
            } => tracing::info!(
                %organization, %run_id, %step, by, %work_item, %note, "step escalated to a person"
            ),
            HistoryKind::Returned {
                step,
                work_item,
                note,
            } => tracing::info!(
                %organization, %run_id, %step, by, %work_item, %note,
                "escalation returned with a note"
            ),
            HistoryKind::CompletedForAgent {
                step,
                work_item,
                summary,
            } => tracing::info!(
                %organization, %run_id, %step, by, %work_item, summary = summary.as_deref(),
                "escalated step completed in the agent's place"
            ),
            HistoryKind::Decided {
                step,
                work_item,
                decision,
                note,
            } => tracing::info!(
                %organization, %run_id, %step, by, %work_item, decision = decision.as_str(),
                note = note.as_deref(), "work item decided"
            ),
            HistoryKind::TimerFired { step, timer } => tracing::info!(
                %organization, %run_id, %step, by, timer = timer_name(*timer), "timer fired"
            ),
            HistoryKind::EventReceived { name, consumed_by } => match consumed_by {
                Some(step) => tracing::info!(
                    %organization, %run_id, %step, by, event = %name, "event received and consumed"
                ),
                None => tracing::info!(%organization, %run_id, by, event = %name, "event received and held"),
            },
            HistoryKind::HeldEventConsumed { name, step } => tracing::info!(
                %organization, %run_id, %step, by, event = %name, "held event consumed"
            ),
            HistoryKind::Cancelled { reason } => {
                tracing::info!(%organization, %run_id, by, %reason, "run cancelled")
            }
            HistoryKind::Ended { state, outcome, note } => tracing::info!(
                %organization, %run_id, by, %state, outcome = outcome.as_deref(),
                note = note.as_deref(), "run ended"
            ),
        }
    }
}
