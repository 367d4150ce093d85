//! `escalate`: an agent that cannot finish hands the step to a person with a note. It loses the
//! claim; the step waits on the escalation queue's work item.

use super::Answer;
use super::advance::Tx;
use super::ctx::Caller;
use super::effect::Notification;
use super::history::HistoryKind;
use super::refusal::Refusal;
use super::state::{Escalation, StepState, WorkItemKind};

pub(crate) fn escalate(
    tx: &mut Tx<'_>,
    caller: &Caller,
    token: &str,
    note: String,
) -> Result<Answer, Refusal> {
    tx.refuse_if_ended()?;
    let step = tx.verify_token(token)?;
    tx.check_holder(&step, caller)?;
    if note.trim().is_empty() {
        return Err(Refusal::invalid("an escalation needs a note").with_issues(vec!["note: required".into()]));
    }
    tx.release_claim(&step);
    let now = tx.now();
    let run_step = tx.step_run(&step);
    run_step.state = Some(StepState::Waiting);
    run_step.escalation = Some(Escalation {
        note: note.clone(),
        by: caller.name().to_string(),
        at: now,
        check: None,
        candidate: None,
    });
    let to = tx.ctx.escalate_to.clone();
    let work_item = tx.open_work_item(&step, WorkItemKind::Escalation, to.clone());
    tx.record(
        caller.name(),
        HistoryKind::Escalated {
            step: step.clone(),
            work_item: work_item.clone(),
            note: note.clone(),
        },
    );
    tx.notify(Notification::Escalated {
        work_item,
        step,
        to,
        note,
    });
    Ok(Answer::RunView)
}
