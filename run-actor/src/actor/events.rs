//! The info lines operators follow a run by: started, ended, escalated, claim lapsed. Read from a
//! transition before its commit, logged only once the commit succeeded.

use super::RunAddress;
use crate::machine::{Command, RunState, StepId, WorkItemKind};

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
        step: StepId,
        work_item: String,
        /// Who the work item is assigned to, as the run state names them.
        to: String,
    },
    /// A claim's lease ran out: the step is claimable again.
    ClaimLapsed { step: StepId, holder: String },
}

/// What `command` did to the run, going from `before` (`None`: no run yet) to `after`. Read off
/// the two states, as everything else the host derives.
pub(crate) fn events_of(command: &Command, before: Option<&RunState>, after: &RunState) -> Vec<RunEvent> {
    let mut events = Vec::new();
    if before.is_none() {
        events.push(RunEvent::Started {
            process: after.process.clone(),
            version: after.version,
            mode: after.mode.as_str(),
            by: after.started_by.clone(),
        });
    }
    // Work item ids are never reused, so an escalation item `before` does not hold is new.
    let opened = after.work_items.iter().filter(|item| {
        item.kind == WorkItemKind::Escalation && before.is_none_or(|run| run.work_item(&item.id).is_none())
    });
    for item in opened {
        events.push(RunEvent::Escalated {
            step: item.step.clone(),
            work_item: item.id.clone(),
            to: format!("{:?}", item.assigned_to),
        });
    }
    if let Command::ClaimExpired { step, lease } = command {
        let claim_of = |run: &RunState| {
            run.step(step)
                .and_then(|run_step| run_step.claim.clone())
                .filter(|claim| claim.lease == *lease)
        };
        if let Some(lapsed) = before.and_then(claim_of)
            && claim_of(after).is_none()
        {
            events.push(RunEvent::ClaimLapsed {
                step: step.clone(),
                holder: lapsed.holder,
            });
        }
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

/// Counts committed events in the run metrics: runs started and ended (by the run's process)
/// and lapsed leases.
pub(crate) fn count(metrics: &crate::metrics::RunActorMetrics, run: Option<&RunState>, events: &[RunEvent]) {
    let process = run.map_or("", |run| run.process.as_str());
    for event in events {
        match event {
            RunEvent::Started { process, .. } => metrics.record_run_started(process),
            RunEvent::Ended { outcome, .. } => metrics.record_run_ended(process, outcome.as_deref()),
            RunEvent::ClaimLapsed { .. } => metrics.record_lease_expired(),
            RunEvent::Escalated { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{
        self, Assignment, Caller, Ctx, Limits, Mode, NoUploads, PinnedProcess, StartRun, Timestamp,
    };
    use agentprocess_process::{Offer, PersonFormat, load};
    use serde_json::json;

    const SOURCE: &str = "---\nname: p\ndescription: d\nsteps:\n  - id: screen\n    agent: Screen.\n  - id: done\n    finish: done\n---\n\nbody\n";

    /// Applies commands in turn from a fresh run, returning each command's events.
    fn events_along(commands: Vec<(i64, Command)>) -> Vec<Vec<RunEvent>> {
        let loaded = load(SOURCE.as_bytes(), &Offer::EVERYTHING).unwrap();
        let pinned = PinnedProcess {
            process: loaded.process,
            version: 1,
            body: loaded.body,
            roles: Default::default(),
        };
        let escalate_to = Assignment::Operators { also: None };
        let mut run: Option<RunState> = None;
        let mut token = String::new();
        let mut events = Vec::new();
        for (seconds, mut command) in commands {
            if let Command::Escalate { token: t, .. } = &mut command {
                t.clone_from(&token);
            }
            let ctx = Ctx {
                now: Timestamp::from_millis(1_790_812_800_000 + seconds * 1000),
                seed: [7; 32],
                limits: Limits::default(),
                person_format: PersonFormat::Email,
                escalate_to: &escalate_to,
                uploads: &NoUploads,
            };
            let transition = machine::apply(&pinned, run.as_ref(), command.clone(), &ctx).unwrap();
            if let Some(t) = transition.reply.data()["token"].as_str() {
                token = t.to_string();
            }
            events.push(events_of(&command, run.as_ref(), &transition.state));
            run = Some(transition.state);
        }
        events
    }

    fn start() -> (i64, Command) {
        let command = Command::StartRun(StartRun {
            run_id: machine::RunId::from("r_events"),
            caller: Caller::agent("acme", "a1"),
            inputs: json!({}),
            mode: Mode::Live,
        });
        (0, command)
    }

    fn claim() -> (i64, Command) {
        let caller = Caller::agent("acme", "a1");
        let step = "screen".to_string();
        (
            0,
            Command::Claim {
                caller,
                step: StepId::from_wire(step),
            },
        )
    }

    fn expired(seconds: i64, lease: u64) -> (i64, Command) {
        let step = "screen".to_string();
        (
            seconds,
            Command::ClaimExpired {
                step: StepId::from_wire(step),
                lease,
            },
        )
    }

    #[test]
    fn a_lapsed_lease_is_logged_with_its_holder_and_an_early_or_unknown_one_is_not() {
        let lapsed = RunEvent::ClaimLapsed {
            step: StepId::from_wire("screen"),
            holder: "a1".into(),
        };
        let events = events_along(vec![
            start(),
            claim(),
            expired(1, 1),
            expired(3600, 2),
            expired(3600, 1),
        ]);
        assert_eq!(events[2], vec![], "the lease has not lapsed yet");
        assert_eq!(events[3], vec![], "lease 2 was never granted");
        assert_eq!(events[4], vec![lapsed]);
    }

    #[test]
    fn an_escalation_is_logged_once_with_its_new_work_item() {
        let escalate = Command::Escalate {
            caller: Caller::agent("acme", "a1"),
            token: String::new(),
            note: "Stuck.".into(),
        };
        let events = events_along(vec![start(), claim(), (0, escalate)]);
        assert!(matches!(&events[0][..], [RunEvent::Started { .. }]));
        assert_eq!(events[1], vec![]);
        assert_eq!(
            events[2],
            vec![RunEvent::Escalated {
                step: StepId::from_wire("screen"),
                work_item: "w_1".into(),
                to: format!("{:?}", Assignment::Operators { also: None }),
            }]
        );
    }
}
