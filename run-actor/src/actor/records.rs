//! What a run's state looks like in the store besides its record: index entries, timer entries,
//! claim keys, outbox entries and idempotency records, with their encodings.
//!
//! Index and timer entries are DERIVED from the run state ([`index_of`]), and a commit writes
//! the difference between the entries of the state before and after. The machine's effects name
//! the same changes; deriving them from the state instead lets one transaction carry a whole
//! batch of commands, where a step may become ready and be claimed again before the commit,
//! and it makes "an entry exists if and only if the state says so" true by construction.

use crate::machine::{
    Assignment, Command, Mode, Notification, OrgId, PinnedProcess, Recipient, RunId, RunState, StepId,
    TimerKind, Timestamp, render,
};
use crate::packed;
use agentprocess_store::keys::{Assignee, Keys};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Key → value of every index and timer entry a run state implies (claim keys aside: they
/// carry store leases and are written by the actor itself).
pub(crate) type IndexEntries = BTreeMap<Vec<u8>, Vec<u8>>;

pub(crate) fn millis(at: Timestamp) -> u64 {
    u64::try_from(at.as_millis()).unwrap_or(0)
}

/// The timer id under which an ended run waits to move to the archive.
pub(crate) const ARCHIVE_TIMER: &str = "archive";

/// Every index and timer entry `run` implies. An ended run keeps its `list_runs` entry and one
/// timer, [`ARCHIVE_TIMER`], `archive_after_ms` after it ended.
pub(crate) fn index_of(
    keys: &Keys,
    pinned: &PinnedProcess,
    run: &RunState,
    archive_after_ms: u64,
) -> IndexEntries {
    let org = &run.organization;
    let mut entries = IndexEntries::new();
    let started_at_ms = millis(run.started_at);
    entries.insert(
        keys.process_run(org, &run.process, started_at_ms, &run.id),
        packed::pack(run_summary(run).to_string().into_bytes()),
    );
    // Filed again under each input's value, for `list_runs` filtered by inputs. The entries
    // hold nothing: a run's inputs never change, so they are written once, with the run.
    for (input, digest) in input_digests(run) {
        entries.insert(
            keys.process_run_input(org, &run.process, &input, &digest, started_at_ms, &run.id),
            Vec::new(),
        );
    }
    if let Some(end) = &run.end {
        let fire_at = millis(end.at).saturating_add(archive_after_ms);
        entries.insert(keys.timer(fire_at, org, &run.id, ARCHIVE_TIMER), Vec::new());
    }
    for step in &run.steps {
        if let (Some(ready_since), Some(item)) = (step.ready_since, render::agent_work_item(run, &step.id)) {
            entries.insert(
                keys.ready_step(org, millis(ready_since), &run.id, &step.id),
                packed::pack(item.to_string().into_bytes()),
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
        let value = packed::pack(
            render::person_work_item(pinned, run, item)
                .to_string()
                .into_bytes(),
        );
        for assignee in assignees {
            entries.insert(
                keys.work_item(org, &assignee, millis(item.opened_at), &run.id, &item.id),
                value.clone(),
            );
        }
    }
    entries
}

/// The digest an input's value is filed under: hex of the first 16 bytes of the SHA-256 of
/// its canonical JSON (RFC 8785). Values equal as `list_runs` compares them have equal
/// digests; values that share a digest are told apart by comparing the values themselves.
pub(crate) fn input_digest(value: &Value) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(agentprocess_process::hash::canonical_json(value));
    crate::machine::hex(&digest[..16])
}

/// Most inputs a run is filed under. A run with more is filed under none (its index entries
/// would crowd etcd's 128 operations per transaction), and a process with a version declaring
/// more is listed by scanning.
pub(crate) const MAX_INDEXED_INPUTS: usize = 32;

/// Each input `run` is filed under with the digest of its value: every one, or none past
/// [`MAX_INDEXED_INPUTS`].
pub(crate) fn input_digests(run: &RunState) -> Vec<(String, String)> {
    digests_of(&run.inputs)
}

/// Each input a `list_runs` item's run is filed under, as [`input_digests`] gives them.
pub(crate) fn item_input_digests(item: &Value) -> Vec<(String, String)> {
    item["inputs"].as_object().map(digests_of).unwrap_or_default()
}

fn digests_of(inputs: &serde_json::Map<String, Value>) -> Vec<(String, String)> {
    if inputs.len() > MAX_INDEXED_INPUTS {
        return Vec::new();
    }
    inputs
        .iter()
        .map(|(input, value)| (input.clone(), input_digest(value)))
        .collect()
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

fn timer_id(kind: TimerKind, generation: u64, step: &StepId) -> String {
    format!("{}.{generation}.{step}", kind_name(kind))
}

fn claim_timer_id(lease: u64, step: &StepId) -> String {
    format!("claim.{lease}.{step}")
}

/// The command a timer entry fires, from its timer id; `None` for an id this runtime did not
/// write.
pub fn timer_command(timer_id: &str) -> Option<Command> {
    let mut parts = timer_id.splitn(3, '.');
    let (kind, number, step) = (parts.next()?, parts.next()?, parts.next()?);
    let number: u64 = number.parse().ok()?;
    let step = StepId::from_wire(step);
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

/// An outbox entry: one notification, written in the run's transaction and POSTed to the
/// organization's webhooks exactly as stored. The field names are the webhook payload's: NEVER
/// rename them, receivers and stored entries depend on them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxEntry {
    /// `{runId}.{number}`, unique per notification: receivers deduplicate on it.
    pub id: String,
    pub organization: OrgId,
    pub run_id: RunId,
    pub process: String,
    pub version: u64,
    /// Notifications of `test` runs are never delivered.
    pub mode: Mode,
    /// When the notification was written, RFC 3339.
    #[serde(with = "crate::rfc3339")]
    pub at: Timestamp,
    /// What happened: `type` and its fields, next to the fields above.
    #[serde(flatten)]
    pub event: OutboxEvent,
}

/// What an outbox entry tells, by its `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum OutboxEvent {
    /// A work item was opened for its assignees.
    WorkItemOpened {
        work_item_id: String,
        step_id: StepId,
        to: Recipients,
    },
    /// A step's `due` passed: to its assignee, or the agent holding it, or the operators.
    Overdue { step_id: StepId, to: Recipients },
    /// An agent escalated a step to the operator queue.
    Escalation {
        work_item_id: String,
        step_id: StepId,
        to: Recipients,
        note: String,
    },
    /// The run ended or was cancelled.
    RunEnded { state: String, outcome: Option<String> },
}

/// Who a notification is for: `{ group }`, `{ person }`, `{ agent }`, `{ operators: true }`, or
/// `{ operators: true, group }` for an operator queue that an escalation group shares.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recipients {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub operators: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

impl Recipients {
    fn of(to: &Assignment) -> Self {
        match to {
            Assignment::Group(group) => Recipients {
                group: Some(group.clone()),
                ..Recipients::default()
            },
            Assignment::Person(person) => Recipients {
                person: Some(person.clone()),
                ..Recipients::default()
            },
            Assignment::Operators { also } => Recipients {
                operators: true,
                group: also.clone(),
                ..Recipients::default()
            },
        }
    }
}

impl OutboxEntry {
    /// The entry of `notification`, written at `at` for `run`.
    pub(crate) fn new(run: &RunState, id: String, at: Timestamp, notification: &Notification) -> Self {
        let event = match notification {
            Notification::WorkOpened { work_item, step, to } => OutboxEvent::WorkItemOpened {
                work_item_id: work_item.clone(),
                step_id: step.clone(),
                to: Recipients::of(to),
            },
            Notification::Overdue { step, to } => OutboxEvent::Overdue {
                step_id: step.clone(),
                to: match to {
                    Recipient::Assignment(to) => Recipients::of(to),
                    Recipient::Agent(agent) => Recipients {
                        agent: Some(agent.clone()),
                        ..Recipients::default()
                    },
                    Recipient::Operators => Recipients {
                        operators: true,
                        ..Recipients::default()
                    },
                },
            },
            Notification::Escalated {
                work_item,
                step,
                to,
                note,
            } => OutboxEvent::Escalation {
                work_item_id: work_item.clone(),
                step_id: step.clone(),
                to: Recipients::of(to),
                note: note.clone(),
            },
            Notification::RunEnded { state, outcome } => OutboxEvent::RunEnded {
                state: state.clone(),
                outcome: outcome.clone(),
            },
        };
        OutboxEntry {
            id,
            organization: run.organization.clone(),
            run_id: run.id.clone(),
            process: run.process.clone(),
            version: run.version,
            mode: run.mode,
            at,
            event,
        }
    }

    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("strings and numbers always serialize")
    }
}

/// A claim key's value. The key is attached to the store lease `store_lease`, so the store
/// removes it even if no transaction ever deletes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClaimRecord<'a> {
    /// The claim's number on its step: a lapse fires `ClaimExpired` with it.
    pub lease: u64,
    /// The store lease the key is attached to: shared by the claims whose expiries fall in one
    /// window, so it outlives this claim; the key is deleted when the claim ends.
    pub store_lease: i64,
    /// The agent holding the claim.
    pub holder: Cow<'a, str>,
    /// When the claim lapses, in milliseconds since the epoch: the actor's truth, since the
    /// store may keep a lease alive past its TTL.
    pub expires_at: Timestamp,
}

impl ClaimRecord<'_> {
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("strings and numbers always serialize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_ids_round_trip_to_their_commands() {
        for kind in [TimerKind::Wait, TimerKind::WaitForTimeout, TimerKind::Due] {
            assert_eq!(
                timer_command(&timer_id(kind, 7, &StepId::from_wire("step.with.dots"))),
                Some(Command::TimerFired {
                    step: StepId::from_wire("step.with.dots"),
                    kind,
                    generation: 7
                })
            );
        }
        assert_eq!(
            timer_command(&claim_timer_id(3, &StepId::from_wire("s"))),
            Some(Command::ClaimExpired {
                step: StepId::from_wire("s"),
                lease: 3
            })
        );
        assert_eq!(timer_command("other.1.s"), None);
        assert_eq!(timer_command("due.x.s"), None);
    }

    /// Entries as older builds wrote them, field for field and in this order.
    const OLDER_OUTBOX_ENTRIES: [&str; 6] = [
        r#"{"id":"r_1.65536","organization":"acme","runId":"r_1","process":"invoice","version":2,"mode":"live","at":"2030-01-01T00:00:00Z","type":"work_item_opened","workItemId":"w_1","stepId":"approve","to":{"group":"finance"}}"#,
        r#"{"id":"r_1.65537","organization":"acme","runId":"r_1","process":"invoice","version":2,"mode":"test","at":"2030-01-01T00:00:00.250Z","type":"work_item_opened","workItemId":"w_2","stepId":"sign","to":{"person":"ana@acme.test"}}"#,
        r#"{"id":"r_1.65538","organization":"acme","runId":"r_1","process":"invoice","version":2,"mode":"live","at":"2030-01-01T00:00:00Z","type":"overdue","stepId":"prepare","to":{"agent":"a1"}}"#,
        r#"{"id":"r_1.65539","organization":"acme","runId":"r_1","process":"invoice","version":2,"mode":"live","at":"2030-01-01T00:00:00Z","type":"overdue","stepId":"prepare","to":{"operators":true}}"#,
        r#"{"id":"r_1.65540","organization":"acme","runId":"r_1","process":"invoice","version":2,"mode":"live","at":"2030-01-01T00:00:00Z","type":"escalation","workItemId":"w_3","stepId":"prepare","to":{"operators":true,"group":"leads"},"note":"stuck"}"#,
        r#"{"id":"r_1.131072","organization":"acme","runId":"r_1","process":"invoice","version":2,"mode":"live","at":"2030-01-01T00:00:00Z","type":"run_ended","state":"cancelled","outcome":null}"#,
    ];

    #[test]
    fn outbox_entries_read_and_write_the_bytes_older_builds_wrote() {
        for older in OLDER_OUTBOX_ENTRIES {
            let entry: OutboxEntry = serde_json::from_str(older).unwrap_or_else(|e| panic!("{older}: {e}"));
            assert_eq!(String::from_utf8(entry.to_bytes()).unwrap(), older);
        }
        let escalation: OutboxEntry = serde_json::from_str(OLDER_OUTBOX_ENTRIES[4]).unwrap();
        assert_eq!(escalation.mode, Mode::Live);
        assert_eq!(
            escalation.at,
            Timestamp::parse_rfc3339("2030-01-01T00:00:00Z").unwrap()
        );
        assert_eq!(
            escalation.event,
            OutboxEvent::Escalation {
                work_item_id: "w_3".into(),
                step_id: StepId::from_wire("prepare"),
                to: Recipients::of(&Assignment::Operators {
                    also: Some("leads".into())
                }),
                note: "stuck".into(),
            }
        );
    }

    #[test]
    fn claim_values_keep_their_older_form() {
        let older = r#"{"lease":3,"storeLease":7340032,"holder":"a1","expiresAt":1893456600000}"#;
        let claim: ClaimRecord = serde_json::from_str(older).unwrap();
        assert_eq!(
            (claim.lease, claim.store_lease, claim.expires_at.to_rfc3339()),
            (3, 7340032, "2030-01-01T00:10:00Z".to_owned())
        );
        assert_eq!(String::from_utf8(claim.to_bytes()).unwrap(), older);
    }
}
