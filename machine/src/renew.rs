//! `renew`: extend a live claim, rotate its token (the old one stops working at once) and keep
//! the latest `progress` note.

use super::Answer;
use super::advance::Tx;
use super::ctx::Caller;
use super::history::HistoryKind;
use super::refusal::Refusal;

pub(crate) fn renew(
    tx: &mut Tx<'_>,
    caller: &Caller,
    token: &str,
    progress: Option<String>,
) -> Result<Answer, Refusal> {
    tx.refuse_if_ended()?;
    let step = tx.verify_token(token)?;
    tx.check_holder(&step, caller)?;
    let claim = tx
        .step_run(&step)
        .claim
        .take()
        .expect("verified tokens belong to a claim");
    tx.retire_token(&claim);
    let sent = progress.clone();
    let progress = progress.or(claim.progress);
    let (token, expires_at) = tx.grant_claim(&step, &claim.holder, progress, Some(claim.lease));
    tx.record(
        caller.name(),
        HistoryKind::Renewed {
            step,
            expires_at,
            progress: sent,
        },
    );
    Ok(Answer::Renew { token, expires_at })
}
