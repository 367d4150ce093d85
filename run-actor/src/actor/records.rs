//! What a run's state looks like in the store besides its record: index entries, timer entries,
//! claim keys, outbox entries and idempotency records, with their encodings.
//!
//! Index and timer entries are DERIVED from the run state ([`index_of`]), and a commit writes
//! the difference between the entries of the state before and after. The machine's effects name
//! the same changes; deriving them from the state instead lets one transaction carry a whole
//! batch of commands, where a step may become ready and be claimed again before the commit,
//! and it makes "an entry exists if and only if the state says so" true by construction.

use crate::machine::{
    Assignment, Command, Notification, PinnedProcess, Recipient, RunState, TimerKind, Timestamp, render,
};
use agentprocess_store::keys::{Assignee, Keys};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Key → value of every index and timer entry a run state implies (claim keys aside: they
/// carry store leases and are written by the actor itself).
pub(crate) type IndexEntries = BTreeMap<Vec<u8>, Vec<u8>>;

pub(crate) fn millis(at: Timestamp) -> u64 {
    u64::try_from(at.as_millis()).unwrap_or(0)
}

pub(crate) fn index_of(keys: &Keys, pinned: &PinnedProcess, run: &RunState) -> IndexEntries {
    let org = run.organization.as_str();
    let mut entries = IndexEntries::new();
    entries.insert(
        keys.process_run(org, &run.process, millis(run.started_at), &run.id),
        run_summary(run).to_string().into_bytes(),
    );
    for step in &run.steps {
        if let (Some(ready_since), Some(item)) = (step.ready_since, render::agent_work_item(run, &step.id)) {
            entries.insert(
                keys.ready_step(org, millis(ready_since), &run.id, &step.id),
                item.to_string().into_bytes(),
            );
        }
        for timer in &step.timers {
            let id = timer_id(timer.kind, timer.generation, &step.id);
            entries.insert(keys.timer(millis(timer.fire_at), org, &run.id, &id), Vec::new());
        }
        if let Some(claim) = &step.claim {
            let id = claim_timer_id(claim.lease, &step.id);
            entries.insert(
                keys.timer(millis(claim.expires_at), org, &run.id, &id),
                Vec::new(),
            );
        }
    }
    for item in &run.work_items {
        let assignees = match &item.assigned_to {
            Assignment::Group(group) => vec![Assignee::Group(group.clone())],
            Assignment::Person(person) => vec![Assignee::Person(person.clone())],
            // The operator queue, and the escalation group's inbox when one is named.
            Assignment::Operators { also } => std::iter::once(Assignee::Operators)
                .chain(also.iter().map(|group| Assignee::Group(group.clone())))
                .collect(),
        };
        let value = render::person_work_item(pinned, run, item)
            .to_string()
            .into_bytes();
        for assignee in assignees {
            entries.insert(
                keys.work_item(org, &assignee, millis(item.opened_at), &run.id, &item.id),
                value.clone(),
            );
        }
    }
    entries
}

/// A `list_runs` item: exactly the fields tools.md names (no `mode`; the run view has it).
pub(crate) fn run_summary(run: &RunState) -> Value {
    json!({
        "id": run.id,
        "process": run.process,
        "version": run.version,
        "state": run.state_name(),
        "outcome": run.end.as_ref().and_then(|end| end.outcome.clone()),
        "startedAt": run.started_at.to_rfc3339(),
        "updatedAt": run.updated_at.to_rfc3339(),
        "inputs": run.inputs,
    })
}

fn kind_name(kind: TimerKind) -> &'static str {
    match kind {
        TimerKind::Wait => "wait",
        TimerKind::WaitForTimeout => "wait_for_timeout",
        TimerKind::Due => "due",
    }
}

fn timer_id(kind: TimerKind, generation: u64, step: &str) -> String {
    format!("{}.{generation}.{step}", kind_name(kind))
}

fn claim_timer_id(lease: u64, step: &str) -> String {
    format!("claim.{lease}.{step}")
}

/// The command a timer entry fires, from its timer id; `None` for an id this runtime did not
/// write.
pub fn timer_command(timer_id: &str) -> Option<Command> {
    let mut parts = timer_id.splitn(3, '.');
    let (kind, number, step) = (parts.next()?, parts.next()?, parts.next()?);
    let number: u64 = number.parse().ok()?;
    let step = step.to_string();
    let kind = match kind {
        "claim" => return Some(Command::ClaimExpired { step, lease: number }),
        "wait" => TimerKind::Wait,
        "wait_for_timeout" => TimerKind::WaitForTimeout,
        "due" => TimerKind::Due,
        _ => return None,
    };
    Some(Command::TimerFired {
        step,
        kind,
        generation: number,
    })
}

fn assignment(to: &Assignment) -> Value {
    match to {
        Assignment::Group(group) => json!({ "group": group }),
        Assignment::Person(person) => json!({ "person": person }),
        Assignment::Operators { also: None } => json!({ "operators": true }),
        Assignment::Operators { also: Some(group) } => json!({ "operators": true, "group": group }),
    }
}

/// An outbox entry: the notification as webhooks receive it.
pub(crate) fn outbox_entry(run: &RunState, id: &str, at: Timestamp, notification: &Notification) -> Value {
    let mut entry = json!({
        "id": id,
        "organization": run.organization,
        "runId": run.id,
        "process": run.process,
        "version": run.version,
        "mode": run.mode.as_str(),
        "at": at.to_rfc3339(),
    });
    let fields = match notification {
        Notification::WorkOpened { work_item, step, to } => json!({
            "type": "work_item_opened", "workItemId": work_item, "stepId": step, "to": assignment(to),
        }),
        Notification::Overdue { step, to } => json!({
            "type": "overdue",
            "stepId": step,
            "to": match to {
                Recipient::Assignment(to) => assignment(to),
                Recipient::Agent(agent) => json!({ "agent": agent }),
                Recipient::Operators => json!({ "operators": true }),
            },
        }),
        Notification::Escalated {
            work_item,
            step,
            to,
            note,
        } => json!({
            "type": "escalation", "workItemId": work_item, "stepId": step, "to": assignment(to), "note": note,
        }),
        Notification::RunEnded { state, outcome } => json!({
            "type": "run_ended", "state": state, "outcome": outcome,
        }),
    };
    if let (Value::Object(entry), Value::Object(fields)) = (&mut entry, fields) {
        entry.extend(fields);
    }
    entry
}

/// An idempotency record: the fingerprint of the arguments and the original result's `data`.
pub(crate) fn idempotency_record(fingerprint: &str, run_id: &str, at: Timestamp, data: &Value) -> Vec<u8> {
    json!({ "fingerprint": fingerprint, "runId": run_id, "at": at.to_rfc3339(), "data": data })
        .to_string()
        .into_bytes()
}

/// A claim key's value: which claim, which store lease, until when.
pub(crate) fn claim_value(lease: u64, store_lease: i64, holder: &str, expires_at: Timestamp) -> Vec<u8> {
    json!({ "lease": lease, "storeLease": store_lease, "holder": holder, "expiresAt": expires_at.as_millis() })
        .to_string()
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_ids_round_trip_to_their_commands() {
        for kind in [TimerKind::Wait, TimerKind::WaitForTimeout, TimerKind::Due] {
            assert_eq!(
                timer_command(&timer_id(kind, 7, "step.with.dots")),
                Some(Command::TimerFired {
                    step: "step.with.dots".into(),
                    kind,
                    generation: 7
                })
            );
        }
        assert_eq!(
            timer_command(&claim_timer_id(3, "s")),
            Some(Command::ClaimExpired {
                step: "s".into(),
                lease: 3
            })
        );
        assert_eq!(timer_command("other.1.s"), None);
        assert_eq!(timer_command("due.x.s"), None);
    }
}
