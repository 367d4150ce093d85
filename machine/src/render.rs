//! Rendering from run state, in the shapes of the tool contracts: the run view, run data,
//! `snapshot`, work items with their exact `decide` call, agent `get_work` items with their exact
//! `claim` call, the claim result and `handoff`. Tokens are never rendered here except in the
//! claim result that mints them.

use super::ctx::PinnedProcess;
use super::state::*;
use crate::hex;
use agentprocess_ids::StepId;
use agentprocess_process::hash::canonical_json;
use agentprocess_process::{Next, Step, StepKind, field_map_as_written};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// The placeholder the caller replaces with a fresh request id in the exact calls we hand out.
pub const NEW_REQUEST_ID: &str = "<new UUID>";

/// `data`: `{ inputs, steps }`, with a `steps.<id>` entry for every step that has a current
/// record or history. File evidence carries `sha256`; the short-lived `url` is added by the
/// gateway, which signs it. `check-1`: while an unsure verdict waits on a person, the entry
/// shows it as `check`, even over the check of an earlier completion (check.md §3).
pub fn run_data(run: &RunState) -> Value {
    let mut steps = Map::new();
    for step in &run.steps {
        let pending = step.escalation.as_ref().and_then(|e| e.check.as_ref());
        if step.current.is_none() && step.history.is_empty() && pending.is_none() {
            continue;
        }
        let mut entry = match &step.current {
            Some(record) => record_json(record),
            None => Map::new(),
        };
        if let Some(check) = pending {
            entry.insert("check".into(), check.to_json());
        }
        entry.insert(
            "history".to_string(),
            Value::Array(
                step.history
                    .iter()
                    .map(|r| Value::Object(record_json(r)))
                    .collect(),
            ),
        );
        steps.insert(step.id.to_string(), Value::Object(entry));
    }
    object([
        ("inputs", Value::Object(run.inputs.clone())),
        ("steps", Value::Object(steps)),
    ])
}

/// An object of `entries` in their order, each value moved in: the `json!` macro renders every
/// value it is given into a new one, a copy of a whole run's data where that is the value.
fn object<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Object(
        entries
            .into_iter()
            .map(|(key, value)| (key.to_owned(), value))
            .collect(),
    )
}

fn record_json(record: &StepRecord) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(output) = &record.output {
        out.insert("output".into(), Value::Object(output.clone()));
    }
    if let Some(evidence) = &record.evidence {
        let items = evidence
            .iter()
            .map(|e| {
                let mut item = json!({ "kind": e.kind, "ref": e.reference });
                if let Some(sha256) = &e.sha256 {
                    item["sha256"] = json!(sha256);
                }
                item
            })
            .collect();
        out.insert("evidence".into(), Value::Array(items));
    }
    for (key, value) in [
        ("summary", &record.summary),
        ("next", &record.next),
        ("reason", &record.reason),
        ("decision", &record.decision),
        ("note", &record.note),
    ] {
        if let Some(value) = value {
            out.insert(key.into(), json!(value));
        }
    }
    if let Some(check) = &record.check {
        out.insert("check".into(), check.to_json());
    }
    out.insert("by".into(), json!(record.by));
    out.insert("at".into(), json!(record.at.to_rfc3339()));
    out
}

/// `snapshot`: hex SHA-256 of the RFC 8785 canonical JSON of the run data as rendered now.
/// Equal data, equal snapshot, whatever the key order.
pub fn snapshot(run: &RunState) -> String {
    snapshot_of(&run_data(run))
}

/// [`snapshot`] of run data already rendered.
fn snapshot_of(data: &Value) -> String {
    hex(&Sha256::digest(canonical_json(data)))
}

/// The run view returned by `get_run` and every write that returns one. Never carries a token.
pub fn run_view(pinned: &PinnedProcess, run: &RunState) -> Value {
    let data = run_data(run);
    let snapshot = snapshot_of(&data);
    let ended = run.end.as_ref().map_or(
        Value::Null,
        |end| json!({ "by": end.by, "at": end.at.to_rfc3339(), "note": end.note }),
    );
    let outcome = run.end.as_ref().and_then(|e| e.outcome.clone());
    let steps: Vec<Value> = pinned
        .process
        .steps
        .iter()
        .map(|step| {
            let run_step = run.step(&step.id);
            let state = run_step.and_then(|s| s.state);
            let mut item = json!({
                "id": step.id.as_str(),
                "kind": step.kind_name(),
                "state": state.map(StepState::as_str),
            });
            if let Some(run_step) = run_step
                && let (Some(due), true) = (run_step.due_at, state.is_some_and(StepState::is_open))
            {
                item["due"] = json!(due.to_rfc3339());
                item["overdue"] = json!(run_step.overdue);
            }
            item
        })
        .collect();
    let work_items: Vec<Value> = run
        .work_items
        .iter()
        .map(|item| work_item_with(pinned, run, item, &snapshot))
        .collect();
    let header = json!({
        "id": run.id,
        "process": run.process,
        "version": run.version,
        "mode": run.mode.as_str(),
        "state": run.state_name(),
        "outcome": outcome,
        "ended": ended,
        "startedBy": run.started_by,
        "startedAt": run.started_at.to_rfc3339(),
        "updatedAt": run.updated_at.to_rfc3339(),
    });
    object([
        ("run", header),
        ("data", data),
        ("steps", Value::Array(steps)),
        ("workItems", Value::Array(work_items)),
        ("body", Value::String(pinned.body.clone())),
    ])
}

/// One work item as `get_run` and a person's `get_work` show it, with a snapshot taken now.
pub fn work_item(pinned: &PinnedProcess, run: &RunState, item: &WorkItem) -> Value {
    work_item_with(pinned, run, item, &snapshot(run))
}

fn work_item_with(pinned: &PinnedProcess, run: &RunState, item: &WorkItem, snapshot: &str) -> Value {
    let step = pinned
        .process
        .steps
        .iter()
        .find(|s| s.id.as_str() == item.step)
        .expect("work items name process steps");
    let run_step = run.step(&item.step);
    let (kind, decisions): (&str, &[&str]) = match item.kind {
        WorkItemKind::Task => ("task", &["completed", "failed"]),
        WorkItemKind::Approve => ("approve", &["approved", "rejected", "failed"]),
        // check-1: a person's task a check was unsure of is escalated too; it stays a task.
        WorkItemKind::Escalation if matches!(step.kind, StepKind::Task { .. }) => {
            ("task", &["returned", "completed", "failed"])
        }
        WorkItemKind::Escalation => ("agent", &["returned", "completed", "failed"]),
    };
    let (output, evidence, next) = requirements(step);
    let assigned_to = match &item.assigned_to {
        Assignment::Group(group) => json!({ "group": group }),
        Assignment::Person(person) => json!({ "person": person }),
        Assignment::Operators { also: Some(group) } => json!({ "group": group }),
        Assignment::Operators { also: None } => json!({ "group": Assignment::OPERATOR_QUEUE }),
    };
    let escalation = run_step
        .and_then(|s| s.escalation.as_ref())
        .filter(|_| item.kind == WorkItemKind::Escalation)
        .map_or(Value::Null, escalation);
    let handoff = match item.kind {
        WorkItemKind::Approve => Value::Null,
        _ => run_step.map_or(Value::Null, |s| handoff(&s.handoff)),
    };
    let mut value = json!({
        "id": item.id,
        "stepId": item.step,
        "kind": kind,
        "text": step_text(step),
        "output": output,
        "evidence": evidence,
        "next": next,
        "handoff": handoff,
        "assignedTo": assigned_to,
        "snapshot": snapshot,
        "due": run_step.and_then(|s| s.due_at).map(|d| d.to_rfc3339()),
        "escalation": escalation,
        "decide": {
            "tool": "decide",
            "arguments": {
                "runId": run.id,
                "workItemId": item.id,
                "snapshot": snapshot,
                "requestId": NEW_REQUEST_ID,
            },
            "decisions": decisions,
        },
    });
    if run.mode == Mode::Test {
        value["mode"] = json!("test");
    }
    value
}

/// A person's `get_work` item for one work item.
pub fn person_work_item(pinned: &PinnedProcess, run: &RunState, item: &WorkItem) -> Value {
    json!({
        "runId": run.id,
        "process": run.process,
        "version": run.version,
        "mode": run.mode.as_str(),
        "workItem": work_item(pinned, run, item),
    })
}

/// An agent's `get_work` item for a ready agent step, with the exact `claim` call; `None` when
/// the step is not claimable.
pub fn agent_work_item(run: &RunState, step: &StepId) -> Option<Value> {
    let run_step = run.step(step)?;
    if run_step.state != Some(StepState::Ready) || run.has_ended() {
        return None;
    }
    Some(json!({
        "runId": run.id,
        "stepId": step,
        "process": run.process,
        "version": run.version,
        "mode": run.mode.as_str(),
        "readySince": run_step.ready_since.map(|t| t.to_rfc3339()),
        "due": run_step.due_at.map(|t| t.to_rfc3339()),
        "overdue": run_step.overdue,
        "handoff": handoff(&run_step.handoff),
        "claim": {
            "tool": "claim",
            "arguments": { "runId": run.id, "stepId": step, "requestId": NEW_REQUEST_ID },
        },
    }))
}

/// The `claim` result for the token just minted on `step`.
pub fn claim_result(pinned: &PinnedProcess, run: &RunState, step_id: &StepId, token: &str) -> Value {
    let step = pinned
        .process
        .steps
        .iter()
        .find(|s| s.id == *step_id)
        .expect("claims name process steps");
    let run_step = run.step(step_id).expect("claims name run steps");
    let expires_at = run_step.claim.as_ref().map(|c| c.expires_at.to_rfc3339());
    let (output, evidence, next) = requirements(step);
    let step_part = object([
        ("id", json!(step_id)),
        ("instructions", json!(step_text(step))),
        ("output", output),
        ("evidence", evidence),
        ("next", next),
    ]);
    object([
        ("token", json!(token)),
        ("expiresAt", json!(expires_at)),
        ("mode", json!(run.mode.as_str())),
        ("step", step_part),
        ("handoff", handoff(&run_step.handoff)),
        ("body", Value::String(pinned.body.clone())),
        ("data", run_data(run)),
    ])
}

/// A work item's `escalation`: note, by, at, and (`check-1`) the verdict and the candidate.
fn escalation(escalation: &Escalation) -> Value {
    let mut out = json!({ "note": escalation.note, "by": escalation.by, "at": escalation.at.to_rfc3339() });
    if let Some(check) = &escalation.check {
        out["check"] = check.to_json();
    }
    if let Some(candidate) = &escalation.candidate {
        out["candidate"] = Value::Object(record_json(candidate));
    }
    out
}

/// `handoff`: what the previous attempt left, or `null` on a first attempt.
pub fn handoff(handoff: &Handoff) -> Value {
    if handoff.is_empty() {
        return Value::Null;
    }
    let mut out = Map::new();
    if let Some(progress) = &handoff.progress {
        out.insert("progress".into(), json!(progress));
    }
    if let Some(returned) = &handoff.returned {
        out.insert(
            "returned".into(),
            json!({ "note": returned.note, "by": returned.by, "at": returned.at.to_rfc3339() }),
        );
    }
    if let Some(issues) = &handoff.issues {
        out.insert("issues".into(), json!(issues));
    }
    if let Some(check) = &handoff.check {
        out.insert("check".into(), check.to_json());
    }
    Value::Object(out)
}

fn step_text(step: &Step) -> &str {
    match &step.kind {
        StepKind::Agent { work } | StepKind::Task { work, .. } => &work.instructions,
        StepKind::Approve { text, .. } => text,
        _ => "",
    }
}

/// A step's `output`, `evidence` and `next` as `claim.step` gives them; `null` on an approval.
fn requirements(step: &Step) -> (Value, Value, Value) {
    let Some(work) = step.work() else {
        return (Value::Null, Value::Null, Value::Null);
    };
    let evidence: Vec<&str> = work.evidence.iter().map(|k| k.name()).collect();
    let next = match &step.next {
        Some(Next::Routes(routes)) => Value::Array(
            routes
                .iter()
                .map(|route| {
                    let mut item = json!({ "to": route.to.to_string() });
                    if let Some(when) = &route.when {
                        item["when"] = json!(when);
                    }
                    item
                })
                .collect(),
        ),
        _ => Value::Null,
    };
    (field_map_as_written(&work.output), json!(evidence), next)
}
