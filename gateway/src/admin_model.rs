//! The answers of the admin API's run routes (`GET /admin/v1/runs/{runId}` and
//! `GET /admin/v1/runs/{runId}/history`) as serde types: the handlers read the run service's
//! answer into them and write them out, and an operator CLI reads the HTTP answer back into the
//! same types, so every field is named once. Times are RFC 3339 text, as on the wire.

use serde::{Deserialize, Serialize};
use std::fmt;

/// `/admin/v1/runs/{runId}`, the run id percent-encoded.
pub fn run_path(run_id: &str) -> String {
    let encoded: String = url::form_urlencoded::byte_serialize(run_id.as_bytes()).collect();
    format!("/admin/v1/runs/{}", encoded.replace('+', "%20"))
}

/// `/admin/v1/runs/{runId}/history`, the run id percent-encoded.
pub fn history_path(run_id: &str) -> String {
    format!("{}/history", run_path(run_id))
}

/// `GET /admin/v1/runs/{runId}/history`: every change of the run, oldest first, and how many
/// of the oldest the server's bound (`limits.history_events_per_run`) dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunHistory {
    pub run_id: String,
    pub events: Vec<HistoryEvent>,
    pub dropped: u64,
}

/// One change of a run: when, who (an agent id, a person value, `scheduler` for timers and
/// lease expiry, `server` for what the server decided), and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEvent {
    pub at: String,
    pub by: String,
    #[serde(flatten)]
    pub kind: HistoryKind,
}

/// What happened, with its data; `type` on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum HistoryKind {
    /// `mode`: `live` or `test`.
    Started {
        mode: String,
    },
    Claimed {
        step: String,
        expires_at: String,
    },
    Renewed {
        step: String,
        expires_at: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        progress: Option<String>,
    },
    LeaseExpired {
        step: String,
        holder: String,
    },
    Submitted {
        step: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        next: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// `verdict`: `pass`, `fail`, `unsure` or `error`; `action`: `accepted`, `sent_back` or
    /// `to_person` (then `work_item` is the escalation).
    CheckVerdict {
        step: String,
        verdict: String,
        action: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        work_item: Option<String>,
    },
    Escalated {
        step: String,
        work_item: String,
        note: String,
    },
    Returned {
        step: String,
        work_item: String,
        note: String,
    },
    CompletedForAgent {
        step: String,
        work_item: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
    },
    /// `decision`: `completed`, `approved`, `rejected` or `failed`.
    Decided {
        step: String,
        work_item: String,
        decision: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// `timer`: `wait`, `wait_for_timeout` or `due`.
    TimerFired {
        step: String,
        timer: String,
    },
    EventReceived {
        name: String,
        /// Absent: the event is held until a `wait_for` step takes it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        consumed_by: Option<String>,
    },
    HeldEventConsumed {
        name: String,
        step: String,
    },
    Cancelled {
        reason: String,
    },
    /// `state`: `ended` or `cancelled`.
    Ended {
        state: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
}

/// One line of text per event, for a terminal.
impl fmt::Display for HistoryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let with = |f: &mut fmt::Formatter<'_>, label: &str, text: &Option<String>| match text {
            Some(text) => write!(f, "; {label}: {text}"),
            None => Ok(()),
        };
        match self {
            HistoryKind::Started { mode } => write!(f, "started the run ({mode})"),
            HistoryKind::Claimed { step, expires_at } => write!(f, "claimed {step} until {expires_at}"),
            HistoryKind::Renewed {
                step,
                expires_at,
                progress,
            } => {
                write!(f, "renewed the claim on {step} until {expires_at}")?;
                with(f, "progress", progress)
            }
            HistoryKind::LeaseExpired { step, holder } => {
                write!(f, "the claim of {holder} on {step} expired")
            }
            HistoryKind::Submitted {
                step,
                summary,
                next,
                reason,
            } => {
                write!(f, "submitted {step}")?;
                with(f, "summary", summary)?;
                with(f, "next", next)?;
                with(f, "reason", reason)
            }
            HistoryKind::CheckVerdict {
                step,
                verdict,
                action,
                work_item,
            } => {
                write!(f, "check of {step}: {verdict} ({action})")?;
                with(f, "work item", work_item)
            }
            HistoryKind::Escalated {
                step,
                work_item,
                note,
            } => {
                write!(f, "escalated {step} as {work_item}; note: {note}")
            }
            HistoryKind::Returned {
                step,
                work_item,
                note,
            } => {
                write!(f, "returned {step} from {work_item}; note: {note}")
            }
            HistoryKind::CompletedForAgent {
                step,
                work_item,
                summary,
            } => {
                write!(f, "completed {step} in the agent's place from {work_item}")?;
                with(f, "summary", summary)
            }
            HistoryKind::Decided {
                step,
                work_item,
                decision,
                note,
            } => {
                write!(f, "decided {work_item} on {step}: {decision}")?;
                with(f, "note", note)
            }
            HistoryKind::TimerFired { step, timer } => write!(f, "{timer} timer of {step} fired"),
            HistoryKind::EventReceived { name, consumed_by } => match consumed_by {
                Some(step) => write!(f, "event {name} received, consumed by {step}"),
                None => write!(f, "event {name} received and held"),
            },
            HistoryKind::HeldEventConsumed { name, step } => {
                write!(f, "held event {name} consumed by {step}")
            }
            HistoryKind::Cancelled { reason } => write!(f, "cancelled the run; reason: {reason}"),
            HistoryKind::Ended { state, outcome, note } => {
                write!(f, "the run {state}")?;
                with(f, "outcome", outcome)?;
                with(f, "note", note)
            }
        }
    }
}

/// `GET /admin/v1/runs/{runId}`: an operator's inspection of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunInspection {
    pub run: RunHeader,
    pub steps: Vec<StepInspection>,
    pub work_items: Vec<WorkItemInspection>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunHeader {
    pub id: String,
    pub process: String,
    pub version: u64,
    /// `active`, `waiting`, `ended` or `cancelled`.
    pub state: String,
    /// `live` or `test`.
    pub mode: String,
    pub started_at: String,
    pub started_by: String,
    pub updated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<RunEnd>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunEnd {
    pub cancelled: bool,
    /// The finish outcome, `rejected` or `failed`; `None` when cancelled.
    pub outcome: Option<String>,
    pub by: String,
    pub at: String,
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StepInspection {
    pub id: String,
    /// `ready`, `claimed`, `waiting`, `done`, `failed`, `cancelled`; `None`: not reached.
    pub state: Option<String>,
    /// When the open attempt became ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_since: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<ClaimInspection>,
    /// How many times a claim of this step lapsed.
    pub lease_expiries: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due: Option<String>,
}

/// Who holds a live claim, until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimInspection {
    pub holder: String,
    pub expires_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkItemInspection {
    pub id: String,
    /// `task`, `approve` or `escalation`.
    pub kind: String,
    pub step: String,
    pub assigned_to: Assignee,
    pub opened_at: String,
    /// An escalation's note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Who may decide a work item: a group, one person, or the operator queue (with the escalation
/// group, when the server names one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assignee {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub operators: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentprocess_run_actor::machine::{
        self, CheckAction, Decision, HistoryKind as Machine, Mode, StepId, TimerKind, Timestamp, Verdict,
    };

    /// Every kind of event the machine records reads into the model and writes back the same.
    #[test]
    fn every_machine_event_reads_into_the_model_and_back_unchanged() {
        let step = || StepId::from_wire("screen");
        let kinds = vec![
            Machine::Started { mode: Mode::Live },
            Machine::Claimed {
                step: step(),
                expires_at: Timestamp::from_millis(1_000),
            },
            Machine::Renewed {
                step: step(),
                expires_at: Timestamp::from_millis(2_000),
                progress: Some("half".into()),
            },
            Machine::LeaseExpired {
                step: step(),
                holder: "a1".into(),
            },
            Machine::Submitted {
                step: step(),
                summary: Some("s".into()),
                next: Some("n".into()),
                reason: Some("r".into()),
            },
            Machine::CheckVerdict {
                step: step(),
                verdict: Verdict::Unsure,
                action: CheckAction::ToPerson,
                work_item: Some("w_2".into()),
            },
            Machine::Escalated {
                step: step(),
                work_item: "w_1".into(),
                note: "stuck".into(),
            },
            Machine::Returned {
                step: step(),
                work_item: "w_1".into(),
                note: "try again".into(),
            },
            Machine::CompletedForAgent {
                step: step(),
                work_item: "w_1".into(),
                summary: None,
            },
            Machine::Decided {
                step: step(),
                work_item: "w_3".into(),
                decision: Decision::Rejected,
                note: Some("no".into()),
            },
            Machine::TimerFired {
                step: step(),
                timer: TimerKind::WaitForTimeout,
            },
            Machine::EventReceived {
                name: "paid".into(),
                consumed_by: None,
            },
            Machine::HeldEventConsumed {
                name: "paid".into(),
                step: step(),
            },
            Machine::Cancelled { reason: "dup".into() },
            Machine::Ended {
                state: "ended".into(),
                outcome: Some("failed".into()),
                note: Some("why".into()),
            },
        ];
        for kind in kinds {
            let event = machine::HistoryEvent {
                at: Timestamp::from_millis(0),
                by: "a1".into(),
                kind: kind.clone(),
            };
            let wire = serde_json::to_value(&event).unwrap();
            let model: HistoryEvent = serde_json::from_value(wire.clone()).unwrap();
            assert_eq!(serde_json::to_value(&model).unwrap(), wire, "{}", kind.name());
            assert_eq!(model.at, "1970-01-01T00:00:00Z");
        }
    }
}
