//! Scheduler commands: a timer fired (wait, `wait_until`, `wait_for` timeout, `due`) or a claim
//! lease lapsed. Firings that no longer apply are ignored and change nothing.

use super::Answer;
use super::advance::Tx;
use super::effect::{Notification, Recipient};
use super::history::{self, HistoryKind};
use super::state::{StepState, TimerKind};
use agentprocess_ids::StepId;
use agentprocess_process::StepKind;

pub(crate) fn timer_fired(tx: &mut Tx<'_>, step_id: &StepId, kind: TimerKind, generation: u64) -> Answer {
    if tx.run.has_ended() {
        return Answer::Ignored;
    }
    let Some(run_step) = tx.run.step(step_id) else {
        return Answer::Ignored;
    };
    if !run_step
        .timers
        .iter()
        .any(|t| t.kind == kind && t.generation == generation)
    {
        return Answer::Ignored;
    }
    tx.step_run(step_id)
        .timers
        .retain(|t| !(t.kind == kind && t.generation == generation));
    tx.record(
        history::SCHEDULER,
        HistoryKind::TimerFired {
            step: step_id.clone(),
            timer: kind,
        },
    );
    let process = tx.process();
    let step = process
        .steps
        .iter()
        .find(|s| s.id == *step_id)
        .expect("timers are on process steps");
    match kind {
        TimerKind::Wait => {
            let record = tx.server_record();
            tx.complete(step_id, record, process.default_next(step));
        }
        TimerKind::WaitForTimeout => {
            let next = match &step.kind {
                StepKind::WaitFor {
                    on_timeout: Some(target),
                    ..
                } => Some(target.clone()),
                _ => process.default_next(step),
            };
            let record = tx.server_record();
            tx.complete(step_id, record, next);
        }
        TimerKind::Due => {
            let run_step = tx.step_run(step_id);
            run_step.overdue = true;
            let (work_item, holder) = (
                run_step.work_item.clone(),
                run_step.claim.as_ref().map(|c| c.holder.clone()),
            );
            let assignee = match (work_item, holder) {
                (Some(item), _) => tx
                    .run
                    .work_item(&item)
                    .map(|w| Recipient::Assignment(w.assigned_to.clone())),
                (None, Some(holder)) => Some(Recipient::Agent(holder)),
                (None, None) => None,
            };
            if let Some(to) = assignee {
                tx.notify(Notification::Overdue {
                    step: step_id.clone(),
                    to,
                });
            }
            tx.notify(Notification::Overdue {
                step: step_id.clone(),
                to: Recipient::Operators,
            });
        }
    }
    Answer::Applied
}

pub(crate) fn claim_expired(tx: &mut Tx<'_>, step_id: &StepId, lease: u64) -> Answer {
    if tx.run.has_ended() {
        return Answer::Ignored;
    }
    let lapsed = tx
        .run
        .step(step_id)
        .filter(|s| s.state == Some(StepState::Claimed))
        .and_then(|s| s.claim.as_ref())
        .is_some_and(|c| c.lease == lease && c.expires_at <= tx.now());
    if !lapsed {
        return Answer::Ignored;
    }
    tx.expire_claim(step_id);
    Answer::Applied
}
