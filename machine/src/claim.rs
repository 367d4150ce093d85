//! `claim`: an agent takes a ready agent step and gets a token, its expiry, the step, the body,
//! the run data and the handoff.

use super::Answer;
use super::advance::Tx;
use super::ctx::Caller;
use super::history::HistoryKind;
use super::refusal::Refusal;
use super::state::StepState;
use agentprocess_ids::StepId;
use agentprocess_process::StepKind;

pub(crate) fn claim(tx: &mut Tx<'_>, caller: &Caller, step_id: &StepId) -> Result<Answer, Refusal> {
    tx.refuse_if_ended()?;
    let step = tx
        .process()
        .steps
        .iter()
        .find(|s| s.id == *step_id)
        .ok_or_else(|| Refusal::not_found(format!("no step {step_id} in this run's process")))?;
    if !matches!(step.kind, StepKind::Agent { .. }) {
        return Err(Refusal::forbidden(format!("step {step_id} is not an agent step")));
    }
    if !caller.is_agent() {
        return Err(Refusal::forbidden("only an agent identity may claim a step"));
    }
    // The actor's own expiry is the truth: a lapsed lease ends before anything else is decided.
    let lapsed = tx
        .run
        .step(step_id)
        .and_then(|s| s.claim.as_ref())
        .is_some_and(|c| c.expires_at <= tx.now());
    if lapsed {
        tx.expire_claim(step_id);
    }
    let run_step = tx.run.step(step_id).expect("every process step has a run record");
    if let Some(claim) = &run_step.claim {
        return Err(if claim.holder == caller.name() {
            Refusal::conflict(
                "claimed_by_you",
                format!(
                    "you already hold a live claim on this step, until {}; if you lost its token, \
                     call claim again with the requestId of the claim that took it to get the \
                     token back, or wait for the claim to expire",
                    claim.expires_at.to_rfc3339()
                ),
            )
        } else {
            Refusal::conflict(
                "claimed_by_other",
                "another caller holds a live claim on this step",
            )
        });
    }
    if run_step.state != Some(StepState::Ready) {
        return Err(Refusal::conflict(
            "not_ready",
            format!("step {step_id} is not ready"),
        ));
    }
    let (token, expires_at) = tx.grant_claim(step_id, caller.name(), None, None);
    tx.record(
        caller.name(),
        HistoryKind::Claimed {
            step: step_id.clone(),
            expires_at,
        },
    );
    Ok(Answer::Claim {
        step: step_id.clone(),
        token,
    })
}
