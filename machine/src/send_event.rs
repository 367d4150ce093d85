//! `send_event`: delivers an event to one run (spec §3.6). A waiting `wait_for` step with that
//! event name consumes it at once; otherwise it is held, oldest first, until a wait consumes it
//! or the run ends.

use super::Answer;
use super::acceptance::over_cap_with;
use super::advance::Tx;
use super::ctx::Caller;
use super::history::HistoryKind;
use super::refusal::Refusal;
use super::state::{HeldEvent, StepRecord, StepState};
use agentprocess_process::StepKind;
use agentprocess_process::names::is_step_id;
use serde_json::{Map, Value};

pub(crate) fn send_event(
    tx: &mut Tx<'_>,
    caller: &Caller,
    name: &str,
    data: Option<Map<String, Value>>,
) -> Result<Answer, Refusal> {
    tx.refuse_if_ended()?;
    if !caller.is_agent() && !caller.operator {
        return Err(Refusal::forbidden(
            "events are accepted from agents and operators only",
        ));
    }
    if !is_step_id(name) {
        return Err(Refusal::invalid("bad event name").with_issues(vec![format!(
            "name: must match ^[a-z][a-z0-9_-]{{0,63}}$, got {name:?}"
        )]));
    }
    let process = tx.process();
    let waiting = process.steps.iter().find(|step| {
        matches!(&step.kind, StepKind::WaitFor { event, .. } if event == name)
            && tx.run.step(&step.id).and_then(|s| s.state) == Some(StepState::Waiting)
    });
    match waiting {
        Some(step) => {
            let record = StepRecord {
                output: data,
                by: caller.name().to_string(),
                at: tx.now(),
                ..StepRecord::default()
            };
            // Consumed at once: the record itself must fit (spec §6 rule 3).
            if let Some(issue) = over_cap_with(tx, &step.id, &record, "data") {
                return Err(Refusal::not_accepted(vec![issue]));
            }
            tx.record(
                caller.name(),
                HistoryKind::EventReceived {
                    name: name.to_string(),
                    consumed_by: Some(step.id.clone()),
                },
            );
            tx.complete(&step.id, record, process.default_next(step));
            Ok(Answer::SendEvent {
                consumed_by: Some(step.id.to_string()),
            })
        }
        None => {
            // "The same cap bounds ... event data when held" (spec §6 rule 3): run data with
            // this event's data added must fit. Should run data grow before a wait consumes it,
            // the wait fails instead of going over the cap (see `Tx::enter`).
            let event_bytes = data
                .as_ref()
                .map_or(0, |d| serde_json::to_vec(d).map_or(usize::MAX, |b| b.len()));
            let cap = tx.ctx.limits.run_data_bytes;
            let total = tx.run_data_bytes().saturating_add(event_bytes);
            if total > cap {
                return Err(Refusal::not_accepted(vec![format!(
                    "data: run data would be {total} bytes, over limits.runDataBytes ({cap})"
                )]));
            }
            tx.record(
                caller.name(),
                HistoryKind::EventReceived {
                    name: name.to_string(),
                    consumed_by: None,
                },
            );
            tx.run.held_events.push(HeldEvent {
                name: name.to_string(),
                data,
                by: caller.name().to_string(),
                at: tx.now(),
            });
            Ok(Answer::SendEvent { consumed_by: None })
        }
    }
}
