//! A run's timeline, pure: the run's history (every change, with who and the notes, kept once
//! escalations are decided and after the run is archived), read with the run view for which
//! records are still current.

use serde_json::Value;

/// What happened, in the words the page shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Started,
    Claimed,
    Renewed,
    LeaseExpired,
    Submitted,
    Checked,
    Completed,
    CompletedForAgent,
    Approved,
    Rejected,
    Returned,
    Failed,
    TimerFired,
    EventReceived,
    HeldEventConsumed,
    Escalated,
    Cancelled,
    Ended,
}

impl EntryKind {
    /// The verb the timeline shows.
    pub fn label(self) -> &'static str {
        match self {
            EntryKind::Started => "started the run",
            EntryKind::Claimed => "claimed",
            EntryKind::Renewed => "renewed the claim on",
            EntryKind::LeaseExpired => "ended the lapsed claim on",
            EntryKind::Submitted => "submitted",
            EntryKind::Checked => "checked the submission of",
            EntryKind::Completed => "completed",
            EntryKind::CompletedForAgent => "completed in the agent's place",
            EntryKind::Approved => "approved",
            EntryKind::Rejected => "rejected",
            EntryKind::Returned => "returned",
            EntryKind::Failed => "failed",
            EntryKind::TimerFired => "fired the timer of",
            EntryKind::EventReceived => "sent the event",
            EntryKind::HeldEventConsumed => "had a held event taken by",
            EntryKind::Escalated => "escalated",
            EntryKind::Cancelled => "cancelled the run",
            EntryKind::Ended => "ended the run",
        }
    }

    /// A history event's `type` (and, for a decision, its `decision`) as the timeline names it;
    /// `None` for an `ended` event of a cancelled run, which its `cancelled` event already says.
    fn of_event(event: &Value) -> Option<EntryKind> {
        Some(match event["type"].as_str()? {
            "started" => EntryKind::Started,
            "claimed" => EntryKind::Claimed,
            "renewed" => EntryKind::Renewed,
            "leaseExpired" => EntryKind::LeaseExpired,
            "submitted" => EntryKind::Submitted,
            "checkVerdict" => EntryKind::Checked,
            "escalated" => EntryKind::Escalated,
            "returned" => EntryKind::Returned,
            "completedForAgent" => EntryKind::CompletedForAgent,
            "decided" => match event["decision"].as_str() {
                Some("approved") => EntryKind::Approved,
                Some("rejected") => EntryKind::Rejected,
                Some("failed") => EntryKind::Failed,
                _ => EntryKind::Completed,
            },
            "timerFired" => EntryKind::TimerFired,
            "eventReceived" => EntryKind::EventReceived,
            "heldEventConsumed" => EntryKind::HeldEventConsumed,
            "cancelled" => EntryKind::Cancelled,
            "ended" if event["state"] == "cancelled" => return None,
            "ended" => EntryKind::Ended,
            _ => return None,
        })
    }

    /// Whether the event completed its step: it may be an attempt a later one replaced.
    fn completes_a_step(self) -> bool {
        matches!(
            self,
            EntryKind::Submitted
                | EntryKind::Completed
                | EntryKind::CompletedForAgent
                | EntryKind::Approved
                | EntryKind::Rejected
        )
    }
}

/// One line of the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub at: String,
    pub by: String,
    pub kind: EntryKind,
    /// The step it happened on; `None` for the run's start and end.
    pub step: Option<String>,
    /// Which attempt of the step this completion is (1 = first), when the step has more than one.
    pub attempt: Option<usize>,
    /// A completion that a later one of the same step replaced (sent back by a rejection or a
    /// return, or reworked after a check), or that a rewind left without a current record.
    pub superseded: bool,
    /// The summary, note, reason or check verdict, as text.
    pub details: Vec<(&'static str, String)>,
}

/// The run's `history` (`{ runId, events, dropped }`) as timeline entries, oldest first. `view`
/// (the run view) says which completions are still their step's current record.
pub fn timeline(history: &Value, view: &Value) -> Vec<Entry> {
    let events: Vec<&Value> = history["events"].as_array().into_iter().flatten().collect();
    let mut entries: Vec<Entry> = events
        .iter()
        .filter_map(|event| {
            let kind = EntryKind::of_event(event)?;
            Some(Entry {
                at: text(&event["at"]),
                by: text(&event["by"]),
                kind,
                step: event_step(event),
                attempt: None,
                superseded: false,
                details: event_details(event),
            })
        })
        .collect();
    let steps: Vec<String> = entries.iter().filter_map(|e| e.step.clone()).collect();
    for step in steps {
        let completions: Vec<usize> = (0..entries.len())
            .filter(|&i| {
                entries[i].kind.completes_a_step() && entries[i].step.as_deref() == Some(step.as_str())
            })
            .collect();
        let current = &view["data"]["steps"][&step];
        for (attempt, &index) in completions.iter().enumerate() {
            let entry = &mut entries[index];
            entry.attempt = (completions.len() > 1).then_some(attempt + 1);
            let is_current = current.get("by").is_some()
                && text(&current["by"]) == entry.by
                && text(&current["at"]) == entry.at;
            entry.superseded = !is_current;
        }
    }
    entries
}

/// The step an event is about: its `step`, or the step that consumed an event.
fn event_step(event: &Value) -> Option<String> {
    event["step"]
        .as_str()
        .or_else(|| event["consumedBy"].as_str())
        .map(str::to_owned)
}

/// What an event says besides who, when and which step.
fn event_details(event: &Value) -> Vec<(&'static str, String)> {
    let mut details = Vec::new();
    let note_label = match event["type"].as_str() {
        Some("escalated") => "Reason",
        _ => "Note",
    };
    for (key, label) in [
        ("summary", "Summary"),
        ("note", note_label),
        ("reason", "Reason"),
        ("next", "Next"),
        ("progress", "Progress"),
        ("expiresAt", "Until"),
        ("holder", "Holder"),
        ("verdict", "Check"),
        ("action", "Result"),
        ("workItem", "Work item"),
        ("timer", "Timer"),
        ("name", "Event"),
        ("outcome", "Outcome"),
    ] {
        if let Some(value) = event[key].as_str() {
            details.push((label, value.to_owned()));
        }
    }
    if event["type"] == "eventReceived" && event.get("consumedBy").is_none() {
        details.push(("Held", "until a wait takes it".to_owned()));
    }
    if event["type"] == "started" && event["mode"] == "test" {
        details.push(("Mode", "test".to_owned()));
    }
    details
}

/// The attempts of a step, oldest first: its `history`, then its current record (a step a
/// rejection rewound has none).
pub fn attempts(entry: &Value) -> Vec<&Value> {
    let mut records: Vec<&Value> = entry["history"].as_array().into_iter().flatten().collect();
    if entry.get("by").is_some() {
        records.push(entry);
    }
    records
}

/// What a record says besides who and when.
pub fn record_details(record: &Value) -> Vec<(&'static str, String)> {
    let mut details = Vec::new();
    for (key, label) in [
        ("summary", "Summary"),
        ("note", "Note"),
        ("next", "Next"),
        ("reason", "Reason"),
    ] {
        if let Some(value) = record[key].as_str() {
            details.push((label, value.to_owned()));
        }
    }
    if let Some(verdict) = record["check"]["verdict"].as_str() {
        details.push(("Check", verdict.to_owned()));
    }
    details
}

/// A JSON value as plain text: a string as it is, anything else as JSON.
pub fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A run whose approval rejected the first screening (spec §3.1, `on_reject`): the rework
    /// and its approval follow; the first attempts stay in the timeline, marked superseded.
    #[test]
    fn every_attempt_of_a_reworked_step_is_in_time_order() {
        let history = json!({ "runId": "r_1", "dropped": 0, "events": [
            { "at": "2026-10-06T09:00:00Z", "by": "a_screener", "type": "started", "mode": "live" },
            { "at": "2026-10-06T09:10:00Z", "by": "a_screener", "type": "submitted", "step": "screen", "summary": "first" },
            { "at": "2026-10-06T10:00:00Z", "by": "boss@acme.test", "type": "decided", "step": "sign_off",
              "workItem": "w_1", "decision": "rejected", "note": "policy missing" },
            { "at": "2026-10-06T10:30:00Z", "by": "a_screener", "type": "submitted", "step": "screen", "summary": "second" },
            { "at": "2026-10-06T12:00:00Z", "by": "ops@acme.test", "type": "cancelled", "reason": "duplicate" },
            { "at": "2026-10-06T12:00:00Z", "by": "ops@acme.test", "type": "ended", "state": "cancelled" }
        ]});
        let view = json!({ "data": { "inputs": {}, "steps": {
            "screen": { "summary": "second", "by": "a_screener", "at": "2026-10-06T10:30:00Z",
                        "history": [ { "summary": "first", "by": "a_screener", "at": "2026-10-06T09:10:00Z" } ] },
            "sign_off": { "history": [ { "decision": "rejected", "note": "policy missing",
                                         "by": "boss@acme.test", "at": "2026-10-06T10:00:00Z" } ] } } } });
        let entries = timeline(&history, &view);
        let seen: Vec<(EntryKind, Option<&str>, Option<usize>, bool)> = entries
            .iter()
            .map(|e| (e.kind, e.step.as_deref(), e.attempt, e.superseded))
            .collect();
        assert_eq!(
            seen,
            vec![
                (EntryKind::Started, None, None, false),
                (EntryKind::Submitted, Some("screen"), Some(1), true),
                (EntryKind::Rejected, Some("sign_off"), None, true),
                (EntryKind::Submitted, Some("screen"), Some(2), false),
                (EntryKind::Cancelled, None, None, false),
            ]
        );
        assert!(
            entries[2]
                .details
                .contains(&("Note", "policy missing".to_owned()))
        );
        assert_eq!(entries[4].details, vec![("Reason", "duplicate".to_owned())]);
        assert_eq!(entries[4].by, "ops@acme.test");
    }

    /// Spec §3.3/§3.4: an escalation and its return stay listed after they are decided, with
    /// their notes, though the run view no longer holds either.
    #[test]
    fn escalations_and_returns_stay_with_their_notes_once_decided() {
        let history = json!({ "runId": "r_1", "dropped": 0, "events": [
            { "at": "2026-10-06T09:00:00Z", "by": "a", "type": "started", "mode": "live" },
            { "at": "2026-10-06T09:01:00Z", "by": "a", "type": "claimed", "step": "screen",
              "expiresAt": "2026-10-06T09:11:00Z" },
            { "at": "2026-10-06T09:03:00Z", "by": "a", "type": "escalated", "step": "screen",
              "workItem": "w_1", "note": "the policy is unclear" },
            { "at": "2026-10-06T09:05:00Z", "by": "ops@acme.test", "type": "returned", "step": "screen",
              "workItem": "w_1", "note": "try again" },
            { "at": "2026-10-06T09:09:00Z", "by": "a", "type": "submitted", "step": "screen", "summary": "done" },
            { "at": "2026-10-06T09:09:00Z", "by": "server", "type": "ended", "state": "ended", "outcome": "done" }
        ]});
        let view = json!({ "data": { "inputs": {}, "steps": {
            "screen": { "summary": "done", "by": "a", "at": "2026-10-06T09:09:00Z" } } },
            "workItems": [] });
        let entries = timeline(&history, &view);
        let kinds: Vec<EntryKind> = entries.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            vec![
                EntryKind::Started,
                EntryKind::Claimed,
                EntryKind::Escalated,
                EntryKind::Returned,
                EntryKind::Submitted,
                EntryKind::Ended,
            ]
        );
        assert!(
            entries[2]
                .details
                .contains(&("Reason", "the policy is unclear".to_owned()))
        );
        assert!(entries[3].details.contains(&("Note", "try again".to_owned())));
        assert_eq!(entries[3].by, "ops@acme.test");
        assert!(!entries[4].superseded);
        assert_eq!(entries[5].details, vec![("Outcome", "done".to_owned())]);
    }

    #[test]
    fn a_held_event_says_it_waits_and_names_no_step() {
        let history = json!({ "events": [
            { "at": "t", "by": "a", "type": "eventReceived", "name": "paid" } ] });
        let entries = timeline(&history, &json!({}));
        assert_eq!(entries[0].kind, EntryKind::EventReceived);
        assert_eq!(entries[0].step, None);
        assert!(entries[0].details.contains(&("Event", "paid".to_owned())));
        assert!(entries[0].details.iter().any(|(label, _)| *label == "Held"));
    }
}
