//! An operator's inspection of a run, rendered from its state: who holds each claim until when,
//! how often a step's leases lapsed, what each open work item waits on. The protocol's run view
//! does not say these; the admin API does (`GET /admin/v1/runs/{runId}`).

use super::state::{Assignment, RunState, StepState, WorkItemKind};
use serde_json::{Value, json};

/// `{ run, steps, workItems }`: the run's header, every step (claim, lease expiries, `due`) and
/// every open work item (its assignment and, for an escalation, the agent's note).
pub fn inspection(run: &RunState) -> Value {
    let end = run.end.as_ref().map(|end| {
        json!({
            "cancelled": end.cancelled,
            "outcome": end.outcome,
            "by": end.by,
            "at": end.at.to_rfc3339(),
            "note": end.note,
        })
    });
    let mut header = json!({
        "id": run.id,
        "process": run.process,
        "version": run.version,
        "state": run.state_name(),
        "mode": run.mode.as_str(),
        "startedAt": run.started_at.to_rfc3339(),
        "startedBy": run.started_by,
        "updatedAt": run.updated_at.to_rfc3339(),
    });
    if let Some(end) = end {
        header["end"] = end;
    }
    let steps: Vec<Value> = run
        .steps
        .iter()
        .map(|step| {
            let mut value = json!({
                "id": step.id,
                "state": step.state.map(StepState::as_str),
                "leaseExpiries": step.lease_expiries,
            });
            if let Some(ready_since) = step
                .ready_since
                .filter(|_| step.state.is_some_and(StepState::is_open))
            {
                value["readySince"] = json!(ready_since.to_rfc3339());
            }
            if let Some(claim) = &step.claim {
                value["claim"] =
                    json!({ "holder": claim.holder, "expiresAt": claim.expires_at.to_rfc3339() });
            }
            if let Some(due) = step.due_at.filter(|_| step.state.is_some_and(StepState::is_open)) {
                value["due"] = json!(due.to_rfc3339());
            }
            value
        })
        .collect();
    let work_items: Vec<Value> = run
        .work_items
        .iter()
        .map(|item| {
            let kind = match item.kind {
                WorkItemKind::Task => "task",
                WorkItemKind::Approve => "approve",
                WorkItemKind::Escalation => "escalation",
            };
            let assigned_to = match &item.assigned_to {
                Assignment::Group(group) => json!({ "group": group }),
                Assignment::Person(person) => json!({ "person": person }),
                Assignment::Operators { also: None } => json!({ "operators": true }),
                Assignment::Operators { also: Some(group) } => json!({ "operators": true, "group": group }),
            };
            let mut value = json!({
                "id": item.id,
                "kind": kind,
                "step": item.step,
                "assignedTo": assigned_to,
                "openedAt": item.opened_at.to_rfc3339(),
            });
            let note = run
                .step(&item.step)
                .and_then(|step| step.escalation.as_ref())
                .filter(|_| item.kind == WorkItemKind::Escalation)
                .map(|escalation| escalation.note.clone());
            if let Some(note) = note {
                value["note"] = json!(note);
            }
            value
        })
        .collect();
    json!({ "run": header, "steps": steps, "workItems": work_items })
}
