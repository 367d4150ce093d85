//! `decide`: a person completes a work item (spec §3.4, tools.md `decide`). Errors in the order
//! the contract gives: `run_ended`, `already_decided`, `not_found`, `stale`, `forbidden`,
//! `not_accepted`. Argument combinations the contract calls `invalid` come after `forbidden`, so
//! a second group member learns the item was decided whatever they sent.

use super::Answer;
use super::acceptance::{accept, over_cap_with};
use super::advance::Tx;
use super::check::{complete_checked, next_of};
use super::command::{Decide, Decision, Submission};
use super::ctx::CallerKind;
use super::history::HistoryKind;
use super::refusal::Refusal;
use super::render;
use super::state::{RunEnd, StepRecord, StepState, WorkItemKind};
use agentprocess_ids::StepId;
use agentprocess_process::{Step, StepKind};

pub(crate) fn decide(tx: &mut Tx<'_>, decide: Decide) -> Result<Answer, Refusal> {
    tx.refuse_if_ended()?;
    if tx.run.decided_work_items.contains(&decide.work_item) {
        return Err(Refusal::conflict(
            "already_decided",
            "this work item was already decided",
        ));
    }
    let item = tx
        .run
        .work_item(&decide.work_item)
        .cloned()
        .ok_or_else(|| Refusal::not_found(format!("no work item {} on this run", decide.work_item)))?;
    if decide.snapshot != render::snapshot(&tx.run) {
        return Err(Refusal::stale(
            "run data changed since this snapshot; read the run again",
        ));
    }
    let CallerKind::Person { email, groups } = &decide.caller.kind else {
        return Err(Refusal::forbidden("only a person may decide"));
    };
    if !item.assigned_to.admits(email, groups, decide.caller.operator) {
        return Err(Refusal::forbidden("you are not in this work item's assignment"));
    }
    let issues = argument_issues(&decide);
    if !issues.is_empty() {
        return Err(Refusal::invalid("these arguments do not fit this decision").with_issues(issues));
    }
    let allowed: &[Decision] = match item.kind {
        WorkItemKind::Task => &[Decision::Completed, Decision::Failed],
        WorkItemKind::Approve => &[Decision::Approved, Decision::Rejected, Decision::Failed],
        WorkItemKind::Escalation => &[Decision::Returned, Decision::Completed, Decision::Failed],
    };
    if !allowed.contains(&decide.decision) {
        let names: Vec<&str> = allowed.iter().map(|d| d.as_str()).collect();
        return Err(Refusal::invalid(format!(
            "decision {} is not allowed on this work item; allowed: {}",
            decide.decision.as_str(),
            names.join(", ")
        ))
        .with_issues(vec![format!("decision: one of {}", names.join(", "))]));
    }

    let process = tx.process();
    let step = process
        .steps
        .iter()
        .find(|s| s.id.as_str() == item.step)
        .expect("work items are on process steps");
    let by = email.clone();
    let now = tx.now();
    match decide.decision {
        Decision::Completed => {
            let held = tx
                .run
                .step(&item.step)
                .and_then(|s| s.escalation.as_ref())
                .filter(|_| item.kind == WorkItemKind::Escalation && decide.output.is_none())
                .and_then(|e| Some((e.candidate.clone()?, e.check.clone())));
            if let Some((candidate, check)) = held {
                // check-1: the person completes with the submission the check was unsure of.
                let extra: Vec<String> = [
                    ("evidence", decide.evidence.is_some()),
                    ("summary", decide.summary.is_some()),
                    ("next", decide.next.is_some()),
                    ("reason", decide.reason.is_some()),
                ]
                .into_iter()
                .filter(|(_, present)| *present)
                .map(|(field, _)| {
                    format!("{field}: not taken when completing with the candidate; send output to complete with your own")
                })
                .collect();
                if !extra.is_empty() {
                    return Err(tx.not_accepted_remembered(&item.step, extra));
                }
                // The unsure verdict stays recorded with the submission it was about.
                let record = StepRecord {
                    check,
                    by: by.clone(),
                    at: now,
                    ..candidate
                };
                if let Some(issue) = over_cap_with(tx, &item.step, &record, "output") {
                    return Err(tx.not_accepted_remembered(&item.step, vec![issue]));
                }
                let next = next_of(tx, step, &record);
                record_completed_escalation(tx, step, &item.id, &by, record.summary.clone());
                tx.complete(&item.step, record, next);
                return Ok(Answer::RunView);
            }
            let submission = Submission {
                output: decide.output,
                evidence: decide.evidence.unwrap_or_default(),
                summary: decide.summary,
                next: decide.next,
                reason: decide.reason,
            };
            // Refused, the issues wait in the handoff for the next member of the assignment.
            let accepted = accept(tx, step, submission, &by, false)
                .map_err(|issues| tx.not_accepted_remembered(&item.step, issues))?;
            if item.kind == WorkItemKind::Escalation {
                // A person completing an escalated step is not checked again (check.md §3); the
                // unsure verdict that sent it to them stays recorded at `steps.<id>.check`.
                let mut record = accepted.record;
                record.check = tx
                    .run
                    .step(&item.step)
                    .and_then(|s| s.escalation.as_ref())
                    .and_then(|e| e.check.clone());
                if let Some(issue) = over_cap_with(tx, &item.step, &record, "output") {
                    return Err(tx.not_accepted_remembered(&item.step, vec![issue]));
                }
                record_completed_escalation(tx, step, &item.id, &by, record.summary.clone());
                tx.complete(&item.step, record, accepted.next);
            } else {
                tx.record(&by, decided(step, &item.id, Decision::Completed, None));
                return complete_checked(tx, step, accepted, decide.evaluation);
            }
        }
        Decision::Approved => {
            let record = StepRecord {
                decision: Some("approved".to_string()),
                note: decide.note,
                by: by.clone(),
                at: now,
                ..StepRecord::default()
            };
            refuse_over_cap(tx, &item.step, &record)?;
            tx.record(
                &by,
                decided(step, &item.id, Decision::Approved, record.note.clone()),
            );
            tx.complete(&item.step, record, process.default_next(step));
        }
        Decision::Rejected => {
            let note = decide.note.expect("checked with the arguments");
            let record = StepRecord {
                decision: Some("rejected".to_string()),
                note: Some(note.clone()),
                by: by.clone(),
                at: now,
                ..StepRecord::default()
            };
            refuse_over_cap(tx, &item.step, &record)?;
            tx.record(
                &by,
                decided(step, &item.id, Decision::Rejected, Some(note.clone())),
            );
            match &step.kind {
                StepKind::Approve {
                    on_reject: Some(to), ..
                } => tx.rewind(&item.step, record, to),
                _ => {
                    tx.record_completion(&item.step, record, StepState::Done);
                    tx.end_run(RunEnd {
                        cancelled: false,
                        outcome: Some("rejected".to_string()),
                        by,
                        at: now,
                        note: Some(note),
                    });
                }
            }
        }
        Decision::Returned => {
            let note = decide.note.expect("checked with the arguments");
            tx.record(
                &by,
                HistoryKind::Returned {
                    step: item.step.clone(),
                    work_item: item.id.clone(),
                    note: note.clone(),
                },
            );
            tx.close_work_item(&item.step, true);
            let run_step = tx.step_run(&item.step);
            let escalation = run_step.escalation.take();
            run_step.handoff.returned = Some(super::state::Returned { note, by, at: now });
            // check-1: the same attempt continues, so the check that held it travels along.
            if let Some(check) = escalation.and_then(|e| e.check) {
                run_step.handoff.issues = Some(check.open_lines());
                run_step.handoff.check = Some(check);
            }
            if matches!(step.kind, StepKind::Task { .. }) {
                tx.reopen_task(step);
            } else {
                tx.make_claimable_again(&item.step);
            }
        }
        Decision::Failed => {
            let note = decide.note.expect("checked with the arguments");
            let record = StepRecord {
                decision: Some("failed".to_string()),
                note: Some(note.clone()),
                by: by.clone(),
                at: now,
                ..StepRecord::default()
            };
            refuse_over_cap(tx, &item.step, &record)?;
            tx.record(&by, decided(step, &item.id, Decision::Failed, Some(note.clone())));
            tx.fail_run_at(&item.step, &by, note);
        }
    }
    Ok(Answer::RunView)
}

/// The history event of a decision on a task or an approval (or a failure of any work item).
fn decided(step: &Step, work_item: &str, decision: Decision, note: Option<String>) -> HistoryKind {
    HistoryKind::Decided {
        step: step.id.clone(),
        work_item: work_item.to_string(),
        decision,
        note,
    }
}

/// Records a `completed` decision on an escalation: an agent step completed in the agent's
/// place, or (`check-1`) a person's task a check was unsure of, decided after all.
fn record_completed_escalation(
    tx: &mut Tx<'_>,
    step: &Step,
    work_item: &str,
    by: &str,
    summary: Option<String>,
) {
    let kind = if matches!(step.kind, StepKind::Agent { .. }) {
        HistoryKind::CompletedForAgent {
            step: step.id.clone(),
            work_item: work_item.to_string(),
            summary,
        }
    } else {
        decided(step, work_item, Decision::Completed, None)
    };
    tx.record(by, kind);
}

/// A decision note lands in run data (`steps.<id>.note`), so it counts against
/// `limits.runDataBytes` like any submission (spec §6 rule 3): over the cap is `not_accepted`.
fn refuse_over_cap(tx: &Tx<'_>, step: &StepId, record: &StepRecord) -> Result<(), Refusal> {
    match over_cap_with(tx, step, record, "note") {
        Some(issue) => Err(Refusal::not_accepted(vec![issue])),
        None => Ok(()),
    }
}

/// The `invalid` combinations of tools.md `decide`, independent of the item.
fn argument_issues(decide: &Decide) -> Vec<String> {
    let mut issues = Vec::new();
    let completed = decide.decision == Decision::Completed;
    let name = decide.decision.as_str();
    if !completed {
        for (field, present) in [
            ("next", decide.next.is_some()),
            ("reason", decide.reason.is_some()),
            ("output", decide.output.is_some()),
            ("evidence", decide.evidence.is_some()),
            ("summary", decide.summary.is_some()),
        ] {
            if present {
                issues.push(format!("{field}: not allowed with decision {name}"));
            }
        }
    }
    if completed && decide.note.is_some() {
        issues.push("note: not allowed with decision completed".to_string());
    }
    let needs_note = matches!(
        decide.decision,
        Decision::Rejected | Decision::Returned | Decision::Failed
    );
    if needs_note && decide.note.as_deref().is_none_or(|n| n.trim().is_empty()) {
        issues.push(format!("note: required with decision {name}"));
    }
    issues
}
