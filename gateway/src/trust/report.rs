//! The trust report, pure: each checked step's verdicts paired with the approver's later
//! decision, counted per process version, per day and listed where they disagree.
//!
//! The check profile's "earn trust first" pattern (check-1 §4) starts a check as `advisory`,
//! compares its recorded verdicts against the approvals for a few weeks, then lets the check
//! block. This module makes that comparison from run views (what `get_run` answers, so archived
//! runs count too) and the published process of each run's version:
//!
//! - a **verdict** is a step record's `check` (check-1 §3: pass, unsure and advisory verdicts
//!   are recorded on the step; a blocking fail never completes the step, so it never reaches an
//!   approver and is not counted here);
//! - its **decision** is the first `approved` or `rejected` record, at or after the verdict, of
//!   an `approve` step the checked step leads to; a step's later verdict never pairs with a
//!   decision an earlier verdict of the same step already took, so a rework loop pairs each
//!   attempt with its own approval even when both carry the same time;
//! - they **agree** when pass meets approved or fail meets rejected, and **disagree** when pass
//!   meets rejected or fail meets approved. Unsure and error verdicts are counted apart (a person
//!   decided those anyway), and a verdict with no decision yet is `undecided`.
//!
//! Test runs (`mode: test`) are left out: they say nothing about live work.

use agentprocess_process::{Next, Process, Step, StepId, StepKind, Target};
use agentprocess_service::Timestamp;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet, VecDeque};

/// How each checked step of each version fared.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustReport {
    pub process: String,
    /// Live runs read.
    pub runs: u64,
    /// One row per (version, checked step), newest version first, steps in process order.
    pub steps: Vec<StepTrust>,
}

/// One checked step of one process version.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepTrust {
    pub version: u64,
    pub step: String,
    /// Whether the step's check is advisory in this version.
    pub advisory: bool,
    pub counts: Counts,
    /// The share of decided pass/fail verdicts the approver agreed with; `None` before any.
    pub agreement: Option<f64>,
    /// Counts per UTC day of the verdict (`YYYY-MM-DD`), oldest first.
    pub days: Vec<DayCounts>,
    /// Every disagreement, newest verdict first.
    pub disagreements: Vec<Disagreement>,
}

/// How many verdicts ended each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub agreed: u64,
    pub disagreed: u64,
    /// Unsure verdicts (a person decided the step itself), with or without a later approval.
    pub unsure: u64,
    /// The evaluator did not answer (recorded only on advisory checks).
    pub error: u64,
    /// Pass or fail verdicts no approval has decided yet.
    pub undecided: u64,
}

impl Counts {
    fn add(&mut self, pairing: Pairing) {
        match pairing {
            Pairing::Agreed => self.agreed += 1,
            Pairing::Disagreed => self.disagreed += 1,
            Pairing::Unsure => self.unsure += 1,
            Pairing::Error => self.error += 1,
            Pairing::Undecided => self.undecided += 1,
        }
    }

    /// `agreed / (agreed + disagreed)`; `None` when neither happened.
    pub fn agreement(&self) -> Option<f64> {
        let decided = self.agreed + self.disagreed;
        (decided > 0).then(|| self.agreed as f64 / decided as f64)
    }
}

/// The counts of one day.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DayCounts {
    pub day: String,
    pub counts: Counts,
}

/// A verdict the approver decided the other way.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Disagreement {
    pub run_id: String,
    pub verdict: String,
    pub verdict_at: String,
    pub approval_step: String,
    pub decision: String,
    pub decided_by: String,
    pub decided_at: String,
    pub note: Option<String>,
}

/// How one verdict fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pairing {
    Agreed,
    Disagreed,
    Unsure,
    Error,
    Undecided,
}

/// A run view that could not be read as one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("run view {run}: {reason}")]
pub struct UnreadableRun {
    pub run: String,
    pub reason: String,
}

/// The parts of a run view the report reads.
#[derive(Debug, Deserialize)]
struct RunView {
    run: RunHead,
    data: RunData,
}

#[derive(Debug, Deserialize)]
struct RunHead {
    id: String,
    version: u64,
    mode: String,
}

#[derive(Debug, Deserialize)]
struct RunData {
    #[serde(default)]
    steps: IndexMap<String, StepData>,
}

#[derive(Debug, Deserialize)]
struct StepData {
    #[serde(flatten)]
    current: Record,
    #[serde(default)]
    history: Vec<Record>,
}

#[derive(Debug, Clone, Deserialize)]
struct Record {
    at: Option<String>,
    by: Option<String>,
    check: Option<CheckRecord>,
    decision: Option<String>,
    note: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
struct CheckRecord {
    verdict: String,
    at: String,
}

/// One approval decision of a run, in the order they were made.
#[derive(Debug)]
struct Decision<'r> {
    step: &'r str,
    decision: &'r str,
    by: &'r str,
    at: &'r str,
    /// `at` read as a time: compared as text, a whole second ("…:05Z", written without
    /// milliseconds) would sort after the milliseconds that follow it ("…:05.120Z").
    when: Option<Timestamp>,
    note: Option<&'r str>,
}

/// Builds the report of `process` from run views of it. `version_of` gives the published
/// process of a version (`None`: unknown, and that version's runs are skipped).
pub fn trust_report<'p>(
    process: &str,
    runs: &[Value],
    version_of: impl Fn(u64) -> Option<&'p Process>,
) -> Result<TrustReport, UnreadableRun> {
    let mut rows: BTreeMap<(std::cmp::Reverse<u64>, usize), Row> = BTreeMap::new();
    let mut read = 0;
    for value in runs {
        let view: RunView = serde_json::from_value(value.clone()).map_err(|error| UnreadableRun {
            run: value["run"]["id"].as_str().unwrap_or("?").to_owned(),
            reason: error.to_string(),
        })?;
        if view.run.mode == "test" {
            continue;
        }
        let Some(definition) = version_of(view.run.version) else {
            continue;
        };
        read += 1;
        let decisions = decisions_of(&view, definition);
        for (index, step) in definition.steps.iter().enumerate() {
            let Some(work) = step.work().filter(|work| work.check.is_some()) else {
                continue;
            };
            let row = rows
                .entry((std::cmp::Reverse(view.run.version), index))
                .or_insert_with(|| Row::new(view.run.version, step.id.as_str(), work.advisory));
            let Some(data) = view.data.steps.get(step.id.as_str()) else {
                continue;
            };
            let approvals = approvals_after(definition, &step.id);
            let mut taken: HashSet<usize> = HashSet::new();
            for record in data.history.iter().chain(std::iter::once(&data.current)) {
                let Some(verdict) = &record.check else { continue };
                let verdict_when = Timestamp::parse_rfc3339(&verdict.at);
                let partner = decisions.iter().enumerate().find(|(i, d)| {
                    approvals.contains(d.step) && d.when >= verdict_when && !taken.contains(i)
                });
                if let Some((i, _)) = partner {
                    taken.insert(i);
                }
                row.add(&view.run.id, verdict, partner.map(|(_, d)| d));
            }
        }
    }
    Ok(TrustReport {
        process: process.to_owned(),
        runs: read,
        steps: rows.into_values().map(Row::finish).collect(),
    })
}

/// Every approval decision of the run, oldest first (equal times: process order, then history
/// order).
fn decisions_of<'r>(view: &'r RunView, definition: &Process) -> Vec<Decision<'r>> {
    let mut decisions = Vec::new();
    for step in &definition.steps {
        if !matches!(step.kind, StepKind::Approve { .. }) {
            continue;
        }
        let Some((step_id, data)) = view.data.steps.get_key_value(step.id.as_str()) else {
            continue;
        };
        for record in data.history.iter().chain(std::iter::once(&data.current)) {
            if let (Some(decision @ ("approved" | "rejected")), Some(at)) =
                (record.decision.as_deref(), record.at.as_deref())
            {
                decisions.push(Decision {
                    step: step_id.as_str(),
                    decision,
                    by: record.by.as_deref().unwrap_or(""),
                    at,
                    when: Timestamp::parse_rfc3339(at),
                    note: record.note.as_deref(),
                });
            }
        }
    }
    // A stable sort keeps process and history order among equal times.
    decisions.sort_by_key(|decision| decision.when);
    decisions
}

/// The `approve` steps reachable from `from` along the process's edges.
fn approvals_after(definition: &Process, from: &StepId) -> HashSet<String> {
    let mut seen: HashSet<&StepId> = HashSet::new();
    let mut queue: VecDeque<&StepId> = successors(definition, from).into_iter().collect();
    let mut approvals = HashSet::new();
    while let Some(id) = queue.pop_front() {
        if !seen.insert(id) {
            continue;
        }
        let Some(step) = definition.step(id) else { continue };
        if matches!(step.kind, StepKind::Approve { .. }) {
            approvals.insert(id.as_str().to_owned());
        }
        queue.extend(successors(definition, id));
    }
    approvals
}

/// The steps a step leads to: its `next` (or the following step), every route, an approval's
/// `on_reject`, a wait's `on_timeout`, a parallel step's branches, and for a branch's `join` the
/// step after the parallel step that holds the branch.
fn successors<'p>(definition: &'p Process, id: &StepId) -> Vec<&'p StepId> {
    let (mut next, joins) = edges(definition, id);
    if joins
        && let Some(parallel) = enclosing_parallel(definition, id)
        && let Some(Target::Step(after)) = definition.default_next(parallel)
        && let Some(after) = definition.step(&after)
    {
        next.push(&after.id);
    }
    next
}

/// The steps `id` leads to directly, and whether it also ends its branch (`join`).
fn edges<'p>(definition: &'p Process, id: &StepId) -> (Vec<&'p StepId>, bool) {
    let Some(step) = definition.step(id) else {
        return (Vec::new(), false);
    };
    let mut targets: Vec<&'p Target> = Vec::new();
    let mut next: Vec<&'p StepId> = Vec::new();
    match &step.next {
        Some(Next::Step(target)) => targets.push(target),
        Some(Next::Routes(routes)) => targets.extend(routes.iter().map(|route| &route.to)),
        None if !matches!(step.kind, StepKind::Finish { .. }) => {
            if let Some(following) = definition
                .step_index(id)
                .and_then(|i| definition.steps.get(i + 1))
            {
                next.push(&following.id);
            }
        }
        None => {}
    }
    match &step.kind {
        StepKind::Approve {
            on_reject: Some(target),
            ..
        } => next.push(target),
        StepKind::WaitFor {
            on_timeout: Some(target),
            ..
        } => targets.push(target),
        StepKind::Parallel { branches } => next.extend(branches.iter()),
        _ => {}
    }
    let joins = targets.iter().any(|target| matches!(target, Target::Join));
    next.extend(targets.into_iter().filter_map(Target::step));
    (next, joins)
}

/// The parallel step one of whose branches holds `id` (parallel-1: a branch runs from its entry
/// until a `join`).
fn enclosing_parallel<'p>(definition: &'p Process, id: &StepId) -> Option<&'p Step> {
    definition.steps.iter().find(|parallel| {
        let StepKind::Parallel { branches } = &parallel.kind else {
            return false;
        };
        let mut seen: HashSet<&StepId> = HashSet::new();
        let mut queue: VecDeque<&StepId> = branches.iter().collect();
        while let Some(step) = queue.pop_front() {
            if step == id {
                return true;
            }
            if seen.insert(step) {
                queue.extend(edges(definition, step).0);
            }
        }
        false
    })
}

/// A row while runs are read.
struct Row {
    version: u64,
    step: String,
    advisory: bool,
    counts: Counts,
    days: BTreeMap<String, Counts>,
    disagreements: Vec<Disagreement>,
}

impl Row {
    fn new(version: u64, step: &str, advisory: bool) -> Row {
        Row {
            version,
            step: step.to_owned(),
            advisory,
            counts: Counts::default(),
            days: BTreeMap::new(),
            disagreements: Vec::new(),
        }
    }

    fn add(&mut self, run_id: &str, verdict: &CheckRecord, decision: Option<&Decision<'_>>) {
        let pairing = match (verdict.verdict.as_str(), decision.map(|d| d.decision)) {
            ("unsure", _) => Pairing::Unsure,
            ("error", _) => Pairing::Error,
            (_, None) => Pairing::Undecided,
            ("pass", Some("approved")) | ("fail", Some("rejected")) => Pairing::Agreed,
            _ => Pairing::Disagreed,
        };
        self.counts.add(pairing);
        let day = verdict.at.get(..10).unwrap_or(&verdict.at).to_owned();
        self.days.entry(day).or_default().add(pairing);
        if let (Pairing::Disagreed, Some(decision)) = (pairing, decision) {
            self.disagreements.push(Disagreement {
                run_id: run_id.to_owned(),
                verdict: verdict.verdict.clone(),
                verdict_at: verdict.at.clone(),
                approval_step: decision.step.to_owned(),
                decision: decision.decision.to_owned(),
                decided_by: decision.by.to_owned(),
                decided_at: decision.at.to_owned(),
                note: decision.note.map(str::to_owned),
            });
        }
    }

    fn finish(mut self) -> StepTrust {
        self.disagreements.sort_by_cached_key(|d| {
            (
                std::cmp::Reverse(Timestamp::parse_rfc3339(&d.verdict_at)),
                d.run_id.clone(),
            )
        });
        StepTrust {
            version: self.version,
            agreement: self.counts.agreement(),
            step: self.step,
            advisory: self.advisory,
            counts: self.counts,
            days: self
                .days
                .into_iter()
                .map(|(day, counts)| DayCounts { day, counts })
                .collect(),
            disagreements: self.disagreements,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentprocess_process::{Offer, load};
    use serde_json::json;

    /// A pre-screened approval (check-1 §4): an advisory check on `screen`, then `sign_off`,
    /// which sends rejections back to `screen`.
    const PRE_SCREENED: &str = "---
name: pre-screened
description: A checked step before an approval.
steps:
  - id: screen
    agent: Screen the request.
    output: { cleared: boolean }
    check: The cleared verdict is justified.
    advisory: true
  - id: sign_off
    person: approvers
    approve: Approve the screened request.
    on_reject: screen
  - id: done
    finish: approved
---
Body.
";

    /// A checked step in one parallel branch, an approval in another branch, and one after the
    /// join.
    const BRANCHES: &str = "---
name: branches
description: Two branches, then a closing approval.
steps:
  - id: split
    parallel: [checked, other_approval]
    next: close
  - id: checked
    agent: Do the checked work.
    output: { ok: boolean }
    check: The work is done.
    advisory: true
    next: join
  - id: other_approval
    person: approvers
    approve: Approve the other branch.
    next: join
  - id: close
    person: approvers
    approve: Close.
  - id: done
    finish: closed
---
Body.
";

    fn process(source: &str) -> Process {
        load(source.as_bytes(), &Offer::EVERYTHING)
            .unwrap_or_else(|issues| panic!("{issues:?}"))
            .process
    }

    fn verdict(verdict: &str, at: &str) -> Value {
        json!({ "output": { "cleared": true }, "by": "agent", "at": at,
                "check": { "verdict": verdict, "advisory": true, "model": "m", "questions": [], "at": at } })
    }

    fn decision(decision: &str, at: &str, note: Option<&str>) -> Value {
        let mut record = json!({ "decision": decision, "by": "boss@acme.test", "at": at });
        if let Some(note) = note {
            record["note"] = json!(note);
        }
        record
    }

    /// A step's data: the last record, with the earlier ones as its history.
    fn step(mut records: Vec<Value>) -> Value {
        let mut current = records.pop().expect("a record");
        if !records.is_empty() {
            current["history"] = json!(records);
        }
        current
    }

    fn run(id: &str, mode: &str, steps: Value) -> Value {
        json!({ "run": { "id": id, "process": "pre-screened", "version": 1, "mode": mode,
                          "state": "active", "outcome": null, "ended": null, "startedBy": "a",
                          "startedAt": "2026-11-30T10:00:00Z", "updatedAt": "2026-11-30T10:00:00Z" },
                "data": { "inputs": {}, "steps": steps } })
    }

    fn only_row(report: &TrustReport) -> &StepTrust {
        assert_eq!(report.steps.len(), 1, "{report:#?}");
        &report.steps[0]
    }

    #[test]
    fn times_are_compared_as_times_not_as_text() {
        // A time on a whole second is written without milliseconds ("…:05Z"), which sorts after
        // "…:05.120Z" as text though it is earlier: the verdict must still pair with the
        // decision made 120 ms after it, and the rework's two decisions keep their order.
        let definition = process(PRE_SCREENED);
        let runs = [run(
            "r1",
            "live",
            json!({
                "screen": step(vec![verdict("fail", "2026-11-30T10:00:05Z"), verdict("pass", "2026-11-30T10:00:05.500Z")]),
                "sign_off": step(vec![
                    decision("rejected", "2026-11-30T10:00:05.120Z", Some("missing the report")),
                    decision("approved", "2026-11-30T10:00:06Z", None),
                ]),
            }),
        )];
        let report = trust_report("pre-screened", &runs, |_| Some(&definition)).unwrap();
        let row = only_row(&report);
        assert_eq!((row.counts.agreed, row.counts.disagreed), (2, 0), "{row:#?}");
    }

    #[test]
    fn each_attempt_of_a_rework_loop_pairs_with_its_own_approval_even_at_one_instant() {
        // check-1 §4 "earn trust first": pass then rejected (a disagreement), reworked, pass
        // then approved (an agreement); the clock did not move in between.
        let definition = process(PRE_SCREENED);
        let at = "2026-11-30T10:00:00Z";
        let runs = [run(
            "r1",
            "live",
            json!({
                "screen": step(vec![verdict("pass", at), verdict("pass", at)]),
                "sign_off": step(vec![decision("rejected", at, Some("missing the report")), decision("approved", at, None)]),
            }),
        )];
        let report = trust_report("pre-screened", &runs, |_| Some(&definition)).unwrap();
        let row = only_row(&report);
        assert_eq!(
            (row.version, row.step.as_str(), row.advisory),
            (1, "screen", true)
        );
        assert_eq!(row.counts.agreed, 1);
        assert_eq!(row.counts.disagreed, 1);
        assert_eq!(row.agreement, Some(0.5));
        assert_eq!(row.disagreements.len(), 1);
        let disagreement = &row.disagreements[0];
        assert_eq!(disagreement.run_id, "r1");
        assert_eq!(disagreement.verdict, "pass");
        assert_eq!(disagreement.decision, "rejected");
        assert_eq!(disagreement.approval_step, "sign_off");
        assert_eq!(disagreement.note.as_deref(), Some("missing the report"));
    }

    #[test]
    fn advisory_fails_unsure_errors_and_undecided_verdicts_are_told_apart() {
        // check-1 §3: advisory verdicts of every kind are recorded on the step.
        let definition = process(PRE_SCREENED);
        let runs = [
            // An advisory fail the approver rejected too: agreement.
            run(
                "agree-fail",
                "live",
                json!({
                    "screen": step(vec![verdict("fail", "2026-11-28T09:00:00Z"), verdict("pass", "2026-11-28T11:00:00Z")]),
                    "sign_off": step(vec![decision("rejected", "2026-11-28T10:00:00Z", None)]),
                }),
            ),
            // An advisory fail the approver approved: disagreement.
            run(
                "approved-fail",
                "live",
                json!({
                    "screen": step(vec![verdict("fail", "2026-11-29T09:00:00Z")]),
                    "sign_off": step(vec![decision("approved", "2026-11-29T10:00:00Z", None)]),
                }),
            ),
            run(
                "unsure",
                "live",
                json!({
                    "screen": step(vec![verdict("unsure", "2026-11-29T09:00:00Z")]),
                    "sign_off": step(vec![decision("approved", "2026-11-29T10:00:00Z", None)]),
                }),
            ),
            run(
                "error",
                "live",
                json!({ "screen": step(vec![verdict("error", "2026-11-29T09:00:00Z")]) }),
            ),
            // A test run says nothing about live work.
            run(
                "test",
                "test",
                json!({
                    "screen": step(vec![verdict("pass", "2026-11-29T09:00:00Z")]),
                    "sign_off": step(vec![decision("rejected", "2026-11-29T10:00:00Z", None)]),
                }),
            ),
        ];
        let report = trust_report("pre-screened", &runs, |_| Some(&definition)).unwrap();
        assert_eq!(report.runs, 4, "the test run is left out");
        let row = only_row(&report);
        assert_eq!(
            row.counts,
            Counts {
                agreed: 1,
                disagreed: 1,
                unsure: 1,
                error: 1,
                undecided: 1
            },
            "the reworked pass of agree-fail waits for its approval"
        );
        assert_eq!(row.agreement, Some(0.5));
        assert_eq!(
            row.days
                .iter()
                .map(|d| (d.day.as_str(), d.counts.agreed + d.counts.undecided))
                .collect::<Vec<_>>(),
            [("2026-11-28", 2), ("2026-11-29", 0)]
        );
        assert_eq!(row.disagreements[0].run_id, "approved-fail");
    }

    #[test]
    fn a_verdict_pairs_only_with_approvals_its_step_leads_to() {
        // parallel-1: the other branch's approval runs beside the checked step, not after it;
        // the approval after the join does judge it.
        let definition = process(BRANCHES);
        let runs = [run(
            "r",
            "live",
            json!({
                "checked": step(vec![verdict("pass", "2026-11-30T10:00:00Z")]),
                "other_approval": step(vec![decision("rejected", "2026-11-30T10:01:00Z", None)]),
                "close": step(vec![decision("approved", "2026-11-30T10:02:00Z", None)]),
            }),
        )];
        let report = trust_report("branches", &runs, |_| Some(&definition)).unwrap();
        let row = only_row(&report);
        assert_eq!(row.step, "checked");
        assert_eq!(row.counts.agreed, 1, "{row:#?}");
        assert_eq!(row.counts.disagreed, 0);
    }

    #[test]
    fn versions_are_reported_apart_newest_first_and_unknown_ones_skipped() {
        let definition = process(PRE_SCREENED);
        let mut second = run(
            "v2",
            "live",
            json!({ "screen": step(vec![verdict("pass", "2026-11-30T10:00:00Z")]) }),
        );
        second["run"]["version"] = json!(2);
        let mut unknown = second.clone();
        unknown["run"]["version"] = json!(3);
        let first = run(
            "v1",
            "live",
            json!({ "screen": step(vec![verdict("pass", "2026-11-30T10:00:00Z")]) }),
        );
        let report = trust_report("pre-screened", &[first, second, unknown], |version| {
            (version < 3).then_some(&definition)
        })
        .unwrap();
        assert_eq!(report.runs, 2);
        let versions: Vec<u64> = report.steps.iter().map(|row| row.version).collect();
        assert_eq!(versions, [2, 1]);
    }

    #[test]
    fn a_run_view_without_its_run_head_is_reported_by_id() {
        let definition = process(PRE_SCREENED);
        let broken = json!({ "run": { "id": "broken" }, "data": {} });
        let error = trust_report("pre-screened", &[broken], |_| Some(&definition)).unwrap_err();
        assert_eq!(error.run, "broken");
    }
}
