//! The info lines operators follow a run by: started, ended, escalated, claim lapsed. Read from a
//! transition before its commit, logged only once the commit succeeded.

use super::RunAddress;
use crate::machine::{Command, Effect, RunState, WorkItemKind};

/// One thing that happened to a run, worth a line in the server's log.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RunEvent {
    Started {
        process: String,
        version: u64,
        mode: &'static str,
        by: String,
    },
    /// The run ended: finished, failed, rejected or cancelled.
    Ended {
        state: &'static str,
        outcome: Option<String>,
        by: String,
    },
    /// A step waits on a person's escalation work item: an agent escalated it, or a check was unsure.
    Escalated {
        step: String,
        work_item: String,
        /// Who the work item is assigned to, as the run state names them.
        to: String,
    },
    /// A claim's lease ran out: the step is claimable again.
    ClaimLapsed { step: String, holder: String },
}

/// What `command` did to the run, going from `before` (`None`: no run yet) to `after` with
/// `effects`.
pub(crate) fn events_of(
    command: &Command,
    before: Option<&RunState>,
    after: &RunState,
    effects: &[Effect],
) -> Vec<RunEvent> {
    let mut events = Vec::new();
    if before.is_none() {
        events.push(RunEvent::Started {
            process: after.process.clone(),
            version: after.version,
            mode: after.mode.as_str(),
            by: after.started_by.clone(),
        });
    }
    for effect in effects {
        if let Effect::OpenWorkItem { id, step, .. } = effect
            && let Some(item) = after.work_item(id)
            && item.kind == WorkItemKind::Escalation
        {
            events.push(RunEvent::Escalated {
                step: step.clone(),
                work_item: id.clone(),
                to: format!("{:?}", item.assigned_to),
            });
        }
    }
    if let Command::ClaimExpired { step, lease } = command
        && effects.iter().any(
            |effect| matches!(effect, Effect::RevokeClaimLease { step: s, lease: l } if s == step && l == lease),
        )
    {
        let holder = before
            .and_then(|run| run.step(step))
            .and_then(|run_step| run_step.claim.as_ref())
            .map(|claim| claim.holder.clone())
            .unwrap_or_default();
        events.push(RunEvent::ClaimLapsed {
            step: step.clone(),
            holder,
        });
    }
    if let Some(end) = &after.end
        && before.is_none_or(|run| run.end.is_none())
    {
        events.push(RunEvent::Ended {
            state: after.state_name(),
            outcome: end.outcome.clone(),
            by: end.by.clone(),
        });
    }
    events
}

/// Logs committed events at info level.
pub(crate) fn log(address: &RunAddress, events: &[RunEvent]) {
    let RunAddress { organization, run_id } = address;
    for event in events {
        match event {
            RunEvent::Started {
                process,
                version,
                mode,
                by,
            } => tracing::info!(%organization, %run_id, %process, version, %mode, %by, "run started"),
            RunEvent::Ended { state, outcome, by } => {
                tracing::info!(%organization, %run_id, %state, outcome = outcome.as_deref(), %by, "run ended")
            }
            RunEvent::Escalated { step, work_item, to } => {
                tracing::info!(%organization, %run_id, %step, %work_item, %to, "step escalated to a person")
            }
            RunEvent::ClaimLapsed { step, holder } => {
                tracing::info!(%organization, %run_id, %step, %holder, "claim lease expired; the step is claimable again")
            }
        }
    }
}
