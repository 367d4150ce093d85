//! `cancel`: an operator ends an active or waiting run with a reason. The reason lands in
//! `run.ended.note`, outside run data, so it does not count against `limits.runDataBytes`.

use super::Answer;
use super::advance::Tx;
use super::ctx::Caller;
use super::history::HistoryKind;
use super::refusal::Refusal;
use super::state::RunEnd;

pub(crate) fn cancel(tx: &mut Tx<'_>, caller: &Caller, reason: String) -> Result<Answer, Refusal> {
    tx.refuse_if_ended()?;
    // Agents never decide or cancel, whatever rights their identity carries (spec §4.1).
    if caller.is_agent() {
        return Err(Refusal::forbidden(
            "an agent may never cancel a run; an operator (a person) may",
        ));
    }
    if !caller.operator {
        return Err(Refusal::forbidden("only an operator may cancel a run"));
    }
    if reason.trim().is_empty() {
        return Err(Refusal::invalid("a cancel needs a reason").with_issues(vec!["reason: required".into()]));
    }
    tx.record(
        caller.name(),
        HistoryKind::Cancelled {
            reason: reason.clone(),
        },
    );
    tx.end_run(RunEnd {
        cancelled: true,
        outcome: None,
        by: caller.name().to_string(),
        at: tx.now(),
        note: Some(reason),
    });
    Ok(Answer::RunView)
}
