//! Acceptance of a submission or a `completed` decision (spec §6.3): output fields and types,
//! `one_of`, undeclared fields, evidence kinds with file lookup, `summary`, the chosen `next`
//! with its `reason`, and the run-data cap. Every issue at once.

use super::advance::Tx;
use super::command::Submission;
use super::state::{EvidenceRecord, StepRecord};
use crate::UploadStatus;
use agentprocess_ids::StepId;
use agentprocess_process::{EvidenceKind, Next, Step, Target, check_values};
use serde_json::Value;

/// Most characters a `summary` may have.
pub const SUMMARY_MAX_CHARS: usize = 2000;

/// An accepted submission: the record to store and where the run goes next.
#[derive(Debug)]
pub(crate) struct Accepted {
    pub record: StepRecord,
    pub next: Option<Target>,
}

/// Checks `submission` against `step`'s declaration. `summary_required` is true for agents.
/// On success the record is built with `by` and the current time; the run-data cap is checked
/// with the record in place.
pub(crate) fn accept(
    tx: &Tx<'_>,
    step: &Step,
    submission: Submission,
    by: &str,
    summary_required: bool,
) -> Result<Accepted, Vec<String>> {
    let work = step.work().expect("only agent and task steps take submissions");
    let mut issues = Vec::new();

    let output = submission.output.unwrap_or_default();
    let output_value = Value::Object(output);
    issues.extend(
        check_values(&work.output, &output_value, "output", tx.ctx.person_format)
            .into_iter()
            .map(|issue| issue.to_string()),
    );
    let Value::Object(output) = output_value else {
        unreachable!("built as an object above")
    };

    let mut evidence = Vec::new();
    for item in &submission.evidence {
        match EvidenceKind::from_name(&item.kind) {
            Some(EvidenceKind::File) => match tx.ctx.uploads.lookup(&tx.run.organization, &item.reference) {
                UploadStatus::Verified { sha256 } => evidence.push(EvidenceRecord {
                    kind: item.kind.clone(),
                    reference: item.reference.clone(),
                    sha256: Some(sha256),
                }),
                UploadStatus::NotFound => issues.push(format!("evidence {}: not found", item.reference)),
                UploadStatus::HashMismatch => issues.push(format!(
                    "evidence {}: stored bytes no longer match the upload's hash",
                    item.reference
                )),
            },
            Some(EvidenceKind::Link) => evidence.push(EvidenceRecord {
                kind: item.kind.clone(),
                reference: item.reference.clone(),
                sha256: None,
            }),
            None => issues.push(format!("evidence {}: unknown kind {}", item.reference, item.kind)),
        }
    }
    for kind in &work.evidence {
        let attempted = submission.evidence.iter().any(|e| e.kind == kind.name());
        if !attempted {
            issues.push(format!("evidence: {} required", kind.name()));
        }
    }

    match &submission.summary {
        None if summary_required => issues.push("summary: missing".to_string()),
        Some(summary) if summary.trim().is_empty() && summary_required => {
            issues.push("summary: missing".to_string())
        }
        Some(summary) if summary.is_empty() || summary.chars().count() > SUMMARY_MAX_CHARS => {
            issues.push(format!("summary: must be 1–{SUMMARY_MAX_CHARS} characters"))
        }
        _ => {}
    }

    let next = match &step.next {
        Some(Next::Routes(routes)) => {
            let names: Vec<String> = routes.iter().map(|r| r.to.to_string()).collect();
            let chosen = match &submission.next {
                None => {
                    issues.push(format!("next: required, one of {}", names.join(", ")));
                    None
                }
                Some(next) => match routes.iter().find(|r| &r.to.to_string() == next) {
                    Some(route) => Some(route.to.clone()),
                    None => {
                        issues.push(format!("next: {next} is not one of {}", names.join(", ")));
                        None
                    }
                },
            };
            if submission.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
                issues.push("reason: required".to_string());
            }
            chosen
        }
        _ => {
            if submission.next.is_some() {
                issues.push("next: not allowed, this step's next is not a list".to_string());
            }
            if submission.reason.is_some() {
                issues.push("reason: not allowed, this step's next is not a list".to_string());
            }
            tx.process().default_next(step)
        }
    };

    let record = StepRecord {
        output: Some(output),
        evidence: Some(evidence),
        summary: submission.summary,
        next: submission
            .next
            .filter(|_| matches!(step.next, Some(Next::Routes(_)))),
        reason: submission
            .reason
            .filter(|_| matches!(step.next, Some(Next::Routes(_)))),
        by: by.to_string(),
        at: tx.now(),
        ..StepRecord::default()
    };

    if issues.is_empty()
        && let Some(issue) = over_cap_with(tx, &step.id, &record, "output")
    {
        issues.push(issue);
    }
    if issues.is_empty() {
        Ok(Accepted { record, next })
    } else {
        Err(issues)
    }
}

/// The cap issue, on `path`, if `record` became the step's current record.
pub(crate) fn over_cap_with(tx: &Tx<'_>, step: &StepId, record: &StepRecord, path: &str) -> Option<String> {
    let mut trial = tx.run.clone();
    let run_step = trial.step_mut(step)?;
    if let Some(previous) = run_step.current.take() {
        run_step.history.push(previous);
    }
    run_step.current = Some(record.clone());
    let bytes = serde_json::to_vec(&super::render::run_data(&trial)).map_or(usize::MAX, |b| b.len());
    let cap = tx.ctx.limits.run_data_bytes;
    (bytes > cap)
        .then(|| format!("{path}: run data would be {bytes} bytes, over limits.runDataBytes ({cap})"))
}
