//! A run's history: every change of a run as an event (when, who, what, with its notes), the
//! operator's audit trail beside the protocol's run view.
//!
//! The machine appends the events of a command to the run state it returns, so they are in the
//! very record the write commits: never lost, and never written for a refusal (a refusal changes
//! nothing). Automatic transitions a write triggers (a held event consumed, a wait already past,
//! the run's end) record their events in the same write. A run keeps at most
//! [`Limits::history_events`](super::Limits::history_events) events: past that the oldest go and
//! [`RunState::history_dropped`] counts them.
//!
//! The serde form is what operators read (`GET /admin/v1/runs/{runId}/history`), and also what
//! the run record stores: `{"at": "2026-…Z", "by": "a1", "type": "claimed", "step": "screen",
//! "expiresAt": "2026-…Z"}`.

use super::check::Verdict;
use super::command::Decision;
use super::state::{Mode, RunState, TimerKind};
use crate::Timestamp;
use agentprocess_ids::StepId;
use serde::{Deserialize, Serialize};

/// Who a scheduler command acts as: timers firing and claim leases lapsing.
pub const SCHEDULER: &str = "scheduler";

/// One change of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEvent {
    #[serde(with = "rfc3339")]
    pub at: Timestamp,
    /// The agent id or person value that made the change; [`SCHEDULER`] for timers and lease
    /// expiry; `server` for what the server itself decided (a finish reached, a run failed
    /// because a step could not be assigned).
    pub by: String,
    #[serde(flatten)]
    pub kind: HistoryKind,
}

/// What happened, with its data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum HistoryKind {
    /// `start_run` (spec §3.2).
    Started { mode: Mode },
    /// `claim`: the step is held until `expires_at`.
    Claimed {
        step: StepId,
        #[serde(with = "rfc3339")]
        expires_at: Timestamp,
    },
    /// `renew`: the claim now lasts until `expires_at`; `progress` is the note this renewal sent.
    Renewed {
        step: StepId,
        #[serde(with = "rfc3339")]
        expires_at: Timestamp,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        progress: Option<String>,
    },
    /// A claim's lease ended before it was submitted or escalated: the step is claimable again.
    LeaseExpired { step: StepId, holder: String },
    /// An agent's submission passed the step's rules (a checked one is judged next).
    Submitted {
        step: StepId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        next: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// `check-1`: the evaluator's verdict on a submission and what it did; `work_item` is the
    /// escalation a person now decides, when it went to one.
    CheckVerdict {
        step: StepId,
        verdict: Verdict,
        action: CheckAction,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        work_item: Option<String>,
    },
    /// `escalate`: the agent handed the step to a person with a note (spec §3.3).
    Escalated {
        step: StepId,
        work_item: String,
        note: String,
    },
    /// A person returned an escalated step to agents (or a task to its assignee) with a note.
    Returned {
        step: StepId,
        work_item: String,
        note: String,
    },
    /// A person completed an escalated agent step in the agent's place.
    CompletedForAgent {
        step: StepId,
        work_item: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
    },
    /// A person decided a task or an approval, or failed any work item.
    Decided {
        step: StepId,
        work_item: String,
        decision: Decision,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// A timer fired: a wait ended, a `wait_for` timed out, or a step became overdue.
    TimerFired { step: StepId, timer: TimerKind },
    /// `send_event`: consumed at once by a waiting step, or held (`consumed_by` absent).
    EventReceived {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        consumed_by: Option<StepId>,
    },
    /// An event held earlier was consumed by a `wait_for` step that became ready.
    HeldEventConsumed { name: String, step: StepId },
    /// `cancel`: an operator ended the run with a reason.
    Cancelled { reason: String },
    /// The run ended: `state` is `ended` or `cancelled`; `outcome` the finish outcome,
    /// `rejected` or `failed`; `note` why, when a person or the server ended it.
    Ended {
        state: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
}

/// What a check verdict did to the submission (check.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckAction {
    /// Pass (or any verdict on an advisory step): the step was completed.
    Accepted,
    /// Fail: `not_accepted`, the issues wait in the handoff.
    SentBack,
    /// Unsure: the submission waits for a person on an escalation work item.
    ToPerson,
}

impl CheckAction {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckAction::Accepted => "accepted",
            CheckAction::SentBack => "sent back",
            CheckAction::ToPerson => "to a person",
        }
    }
}

impl HistoryKind {
    /// The name of the event's `type`.
    pub fn name(&self) -> &'static str {
        match self {
            HistoryKind::Started { .. } => "started",
            HistoryKind::Claimed { .. } => "claimed",
            HistoryKind::Renewed { .. } => "renewed",
            HistoryKind::LeaseExpired { .. } => "leaseExpired",
            HistoryKind::Submitted { .. } => "submitted",
            HistoryKind::CheckVerdict { .. } => "checkVerdict",
            HistoryKind::Escalated { .. } => "escalated",
            HistoryKind::Returned { .. } => "returned",
            HistoryKind::CompletedForAgent { .. } => "completedForAgent",
            HistoryKind::Decided { .. } => "decided",
            HistoryKind::TimerFired { .. } => "timerFired",
            HistoryKind::EventReceived { .. } => "eventReceived",
            HistoryKind::HeldEventConsumed { .. } => "heldEventConsumed",
            HistoryKind::Cancelled { .. } => "cancelled",
            HistoryKind::Ended { .. } => "ended",
        }
    }

    /// The step the event is about, if it is about one.
    pub fn step(&self) -> Option<&StepId> {
        match self {
            HistoryKind::Claimed { step, .. }
            | HistoryKind::Renewed { step, .. }
            | HistoryKind::LeaseExpired { step, .. }
            | HistoryKind::Submitted { step, .. }
            | HistoryKind::CheckVerdict { step, .. }
            | HistoryKind::Escalated { step, .. }
            | HistoryKind::Returned { step, .. }
            | HistoryKind::CompletedForAgent { step, .. }
            | HistoryKind::Decided { step, .. }
            | HistoryKind::TimerFired { step, .. }
            | HistoryKind::HeldEventConsumed { step, .. } => Some(step),
            HistoryKind::EventReceived { consumed_by, .. } => consumed_by.as_ref(),
            HistoryKind::Started { .. } | HistoryKind::Cancelled { .. } | HistoryKind::Ended { .. } => None,
        }
    }
}

/// A timer kind as the history names it: `wait`, `wait_for_timeout`, `due`.
pub fn timer_name(kind: TimerKind) -> &'static str {
    match kind {
        TimerKind::Wait => "wait",
        TimerKind::WaitForTimeout => "wait_for_timeout",
        TimerKind::Due => "due",
    }
}

impl RunState {
    /// How many history events this run ever recorded: those it keeps and those dropped.
    pub fn history_recorded(&self) -> u64 {
        self.history_dropped
            .saturating_add(u64::try_from(self.history.len()).unwrap_or(u64::MAX))
    }
}

/// The events `after` recorded since `before` (`None`: the run did not exist), oldest first: what
/// one command, or one batch, appended. Events already dropped again are not among them.
pub fn appended<'a>(before: Option<&RunState>, after: &'a RunState) -> &'a [HistoryEvent] {
    let earlier = before.map_or(0, RunState::history_recorded);
    let new = after.history_recorded().saturating_sub(earlier);
    let kept = usize::try_from(new)
        .unwrap_or(usize::MAX)
        .min(after.history.len());
    &after.history[after.history.len() - kept..]
}

/// What `run_history` answers: `{ runId, events, dropped }`, every kept event oldest first and
/// how many older ones the bound dropped.
pub fn history_view(run: &RunState) -> serde_json::Value {
    serde_json::json!({
        "runId": run.id,
        "events": run.history,
        "dropped": run.history_dropped,
    })
}

/// Appends `events` to the run's history, dropping the oldest past `bound` and counting them.
pub(crate) fn append(run: &mut RunState, events: Vec<HistoryEvent>, bound: usize) {
    run.history.extend(events);
    let over = run.history.len().saturating_sub(bound);
    if over > 0 {
        run.history.drain(..over);
        run.history_dropped = run
            .history_dropped
            .saturating_add(u64::try_from(over).unwrap_or(u64::MAX));
    }
}

/// Timestamps in the history as RFC 3339 text, the form operators read.
mod rfc3339 {
    use super::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(at: &Timestamp, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&at.to_rfc3339())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Timestamp, D::Error> {
        let text = String::deserialize(deserializer)?;
        Timestamp::parse_rfc3339(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("{text:?} is not an RFC 3339 date-time")))
    }
}

#[cfg(test)]
mod tests;
