//! `submit`: an agent hands in the work of the step it holds. Accepted (the step is done and the
//! run moves on) or `not_accepted` with every issue, leaving the claim standing. On a step with
//! a `check` (`check-1`), the evaluator is asked first and its verdict decides (see
//! [`super::check`]).

use super::Answer;
use super::acceptance::accept;
use super::advance::Tx;
use super::check::{EvaluatorOutcome, complete_checked};
use super::command::Submission;
use super::ctx::Caller;
use super::history::HistoryKind;
use super::refusal::Refusal;

pub(crate) fn submit(
    tx: &mut Tx<'_>,
    caller: &Caller,
    token: &str,
    submission: Submission,
    evaluation: Option<EvaluatorOutcome>,
) -> Result<Answer, Refusal> {
    tx.refuse_if_ended()?;
    let step_id = tx.verify_token(token)?;
    tx.check_holder(&step_id, caller)?;
    let step = tx
        .process()
        .steps
        .iter()
        .find(|s| s.id == step_id)
        .expect("claims are on process steps");
    match accept(tx, step, submission, caller.name(), true) {
        Ok(accepted) => {
            let record = &accepted.record;
            let submitted = HistoryKind::Submitted {
                step: step_id.clone(),
                summary: record.summary.clone(),
                next: record.next.clone(),
                reason: record.reason.clone(),
            };
            tx.record(caller.name(), submitted);
            complete_checked(tx, step, accepted, evaluation)
        }
        // Nothing changes for the caller; the issues wait in the handoff for whoever claims
        // the step next.
        Err(issues) => Err(tx.not_accepted_remembered(&step_id, issues)),
    }
}
