//! A run's timeline, pure: every record of every step (earlier attempts included), the open
//! escalations and returns, and the run's start and end, read from a run view in time order.

use serde_json::Value;

/// What happened, in the words the page shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Started,
    Submitted,
    Completed,
    Approved,
    Rejected,
    Returned,
    Failed,
    EventReceived,
    Escalated,
    Cancelled,
    Ended,
}

impl EntryKind {
    /// The verb the timeline shows.
    pub fn label(self) -> &'static str {
        match self {
            EntryKind::Started => "started the run",
            EntryKind::Submitted => "submitted",
            EntryKind::Completed => "completed",
            EntryKind::Approved => "approved",
            EntryKind::Rejected => "rejected",
            EntryKind::Returned => "returned",
            EntryKind::Failed => "failed",
            EntryKind::EventReceived => "sent the event",
            EntryKind::Escalated => "escalated",
            EntryKind::Cancelled => "cancelled the run",
            EntryKind::Ended => "ended the run",
        }
    }

    /// The record's decision as the timeline names it; a record without one is a submission
    /// (or, on a `wait_for` step, the event that completed it).
    fn of_record(record: &Value, step_kind: &str) -> EntryKind {
        match record["decision"].as_str() {
            Some("approved") => EntryKind::Approved,
            Some("rejected") => EntryKind::Rejected,
            Some("returned") => EntryKind::Returned,
            Some("failed") => EntryKind::Failed,
            Some(_) => EntryKind::Completed,
            None if step_kind == "wait_for" => EntryKind::EventReceived,
            None => EntryKind::Submitted,
        }
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
    /// Which attempt of the step this record is (1 = first), when the step has more than one.
    pub attempt: Option<usize>,
    /// A record that a later one of the same step replaced (sent back by a rejection or a
    /// return, or reworked after a check).
    pub superseded: bool,
    /// The summary, note, reason or check verdict, as text.
    pub details: Vec<(&'static str, String)>,
}

/// Every step record of `view` (history first, then the current record), each open work
/// item's escalation and returned handoff, the run's start and its end, oldest first. Records
/// with the same time keep the order above.
pub fn timeline(view: &Value) -> Vec<Entry> {
    let run = &view["run"];
    let mut entries = vec![Entry {
        at: text(&run["startedAt"]),
        by: text(&run["startedBy"]),
        kind: EntryKind::Started,
        step: None,
        attempt: None,
        superseded: false,
        details: Vec::new(),
    }];
    for step in view["steps"].as_array().into_iter().flatten() {
        let id = text(&step["id"]);
        entries.extend(step_entries(
            &id,
            text(&step["kind"]).as_str(),
            &view["data"]["steps"][&id],
        ));
    }
    for item in view["workItems"].as_array().into_iter().flatten() {
        entries.extend(work_item_entries(item));
    }
    if let Some(ended) = run["ended"].as_object() {
        let cancelled = run["state"] == "cancelled";
        let mut details = Vec::new();
        if let Some(note) = ended.get("note").and_then(Value::as_str) {
            details.push((if cancelled { "Reason" } else { "Note" }, note.to_owned()));
        }
        if let Some(outcome) = run["outcome"].as_str() {
            details.push(("Outcome", outcome.to_owned()));
        }
        entries.push(Entry {
            at: ended.get("at").map(text).unwrap_or_default(),
            by: ended.get("by").map(text).unwrap_or_default(),
            kind: if cancelled {
                EntryKind::Cancelled
            } else {
                EntryKind::Ended
            },
            step: None,
            attempt: None,
            superseded: false,
            details,
        });
    }
    entries.sort_by(|a, b| a.at.cmp(&b.at));
    entries
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

fn step_entries(id: &str, kind: &str, entry: &Value) -> Vec<Entry> {
    let records = attempts(entry);
    let count = records.len();
    let current = entry.get("by").is_some();
    records
        .into_iter()
        .enumerate()
        .map(|(index, record)| Entry {
            at: text(&record["at"]),
            by: text(&record["by"]),
            kind: EntryKind::of_record(record, kind),
            step: Some(id.to_owned()),
            attempt: (count > 1).then_some(index + 1),
            superseded: index + 1 < count || !current,
            details: record_details(record),
        })
        .collect()
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

fn work_item_entries(item: &Value) -> Vec<Entry> {
    let step = text(&item["stepId"]);
    let mut entries = Vec::new();
    if let Some(escalation) = item["escalation"].as_object() {
        let mut details = Vec::new();
        if let Some(note) = escalation.get("note").and_then(Value::as_str) {
            details.push(("Reason", note.to_owned()));
        }
        if let Some(verdict) = escalation
            .get("check")
            .and_then(|check| check["verdict"].as_str())
        {
            details.push(("Check", verdict.to_owned()));
        }
        entries.push(Entry {
            at: escalation.get("at").map(text).unwrap_or_default(),
            by: escalation.get("by").map(text).unwrap_or_default(),
            kind: EntryKind::Escalated,
            step: Some(step.clone()),
            attempt: None,
            superseded: false,
            details,
        });
    }
    if let Some(returned) = item["handoff"]["returned"].as_object() {
        entries.push(Entry {
            at: returned.get("at").map(text).unwrap_or_default(),
            by: returned.get("by").map(text).unwrap_or_default(),
            kind: EntryKind::Returned,
            step: Some(step),
            attempt: None,
            superseded: false,
            details: returned
                .get("note")
                .and_then(Value::as_str)
                .map(|note| vec![("Note", note.to_owned())])
                .unwrap_or_default(),
        });
    }
    entries
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

    /// A run whose approval rejected the first screening (spec §5, `on_reject`): the rework and
    /// its approval follow; the first attempts stay in the timeline, marked superseded.
    fn reworked_view() -> Value {
        json!({
            "run": { "id": "r_1", "state": "cancelled", "outcome": null, "startedBy": "a_screener",
                     "startedAt": "2026-10-06T09:00:00+00:00",
                     "ended": { "by": "ops@acme.test", "at": "2026-10-06T12:00:00+00:00", "note": "duplicate" } },
            "data": { "inputs": {}, "steps": {
                "screen": { "summary": "second", "by": "a_screener", "at": "2026-10-06T10:30:00+00:00",
                            "check": { "verdict": "pass" },
                            "history": [ { "summary": "first", "by": "a_screener", "at": "2026-10-06T09:10:00+00:00",
                                           "check": { "verdict": "fail" } } ] },
                "sign_off": { "history": [ { "decision": "rejected", "note": "policy missing",
                                             "by": "boss@acme.test", "at": "2026-10-06T10:00:00+00:00" } ] } } },
            "steps": [ { "id": "screen", "kind": "agent", "state": "done" },
                       { "id": "sign_off", "kind": "approve", "state": "cancelled" } ],
            "workItems": [ { "stepId": "sign_off", "escalation": null, "handoff": null } ]
        })
    }

    #[test]
    fn every_attempt_of_a_reworked_step_is_in_time_order() {
        let entries = timeline(&reworked_view());
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
        assert!(entries[1].details.contains(&("Check", "fail".to_owned())));
        assert!(
            entries[2]
                .details
                .contains(&("Note", "policy missing".to_owned()))
        );
        assert_eq!(entries[4].details, vec![("Reason", "duplicate".to_owned())]);
        assert_eq!(entries[4].by, "ops@acme.test");
    }

    #[test]
    fn escalations_and_returns_of_open_work_items_are_listed() {
        let view = json!({
            "run": { "startedBy": "a", "startedAt": "2026-10-06T09:00:00+00:00", "ended": null },
            "data": { "inputs": {}, "steps": {} },
            "steps": [ { "id": "screen", "kind": "agent", "state": "waiting" } ],
            "workItems": [ { "stepId": "screen",
                             "escalation": { "note": "the policy is unclear", "by": "a_screener", "at": "2026-10-06T09:05:00+00:00" },
                             "handoff": { "returned": { "note": "try again", "by": "ops@acme.test", "at": "2026-10-06T09:03:00+00:00" } } } ]
        });
        let entries = timeline(&view);
        let kinds: Vec<EntryKind> = entries.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            vec![EntryKind::Started, EntryKind::Returned, EntryKind::Escalated]
        );
        assert_eq!(
            entries[2].details,
            vec![("Reason", "the policy is unclear".to_owned())]
        );
    }

    #[test]
    fn a_wait_step_record_is_the_event_that_completed_it() {
        assert_eq!(
            EntryKind::of_record(&json!({ "output": {}, "by": "a", "at": "t" }), "wait_for"),
            EntryKind::EventReceived
        );
        assert_eq!(
            EntryKind::of_record(&json!({ "decision": "completed" }), "task"),
            EntryKind::Completed
        );
    }
}
