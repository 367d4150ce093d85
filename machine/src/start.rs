//! `start_run`: check the inputs (every issue at once), refuse `initiator` steps for agent
//! starters, apply the run-data cap, and make the first step ready.

use super::advance::Tx;
use super::command::StartRun;
use super::ctx::{CallerKind, Ctx, PinnedProcess};
use super::history::HistoryKind;
use super::refusal::Refusal;
use super::state::*;
use super::{Answer, Transition};
use agentprocess_process::{PersonRef, check_values};
use serde_json::Value;

pub(crate) fn start(pinned: &PinnedProcess, command: StartRun, ctx: &Ctx<'_>) -> Result<Transition, Refusal> {
    let process = &pinned.process;
    let mut issues: Vec<String> = Vec::new();
    let inputs = match command.inputs {
        Value::Object(inputs) => inputs,
        _ => {
            return Err(Refusal::invalid("inputs must be an object")
                .with_issues(vec!["inputs: expected object".into()]));
        }
    };
    issues.extend(
        check_values(
            &process.inputs,
            &Value::Object(inputs.clone()),
            "inputs",
            ctx.person_format,
        )
        .into_iter()
        .map(|issue| issue.to_string()),
    );
    if command.caller.is_agent() {
        for (position, step) in process.steps.iter().enumerate() {
            if step.person() == Some(&PersonRef::Initiator) {
                issues.push(format!(
                    "steps[{position}].person: step {} is assigned to initiator, and a run started by an agent has no initiator",
                    step.id
                ));
            }
        }
    }
    let initiator = match &command.caller.kind {
        CallerKind::Person { email, .. } => Some(email.clone()),
        CallerKind::Agent { .. } => None,
    };
    let run = RunState {
        id: command.run_id,
        organization: command.caller.organization.clone(),
        process: process.name.to_string(),
        version: pinned.version,
        mode: command.mode,
        started_by: command.caller.name().to_string(),
        initiator,
        started_at: ctx.now,
        updated_at: ctx.now,
        end: None,
        inputs,
        steps: process.steps.iter().map(|s| StepRun::new(s.id.clone())).collect(),
        work_items: Vec::new(),
        decided_work_items: Vec::new(),
        held_events: Vec::new(),
        retired_tokens: Vec::new(),
        replaced_tokens: Vec::new(),
        expired_claims: Vec::new(),
        counters: Counters::default(),
        history: Vec::new(),
        history_dropped: 0,
    };
    let mut tx = Tx::new(pinned, ctx, run);
    tx.record(command.caller.name(), HistoryKind::Started { mode: command.mode });
    if let Some(issue) = tx.over_cap_issue("inputs") {
        issues.push(issue);
    }
    if !issues.is_empty() {
        return Err(Refusal::invalid("the run cannot start with these inputs").with_issues(issues));
    }
    let first = process
        .steps
        .first()
        .expect("a valid process has steps")
        .id
        .clone();
    tx.advance_to(&first);
    Ok(tx.finish(Answer::RunView))
}
