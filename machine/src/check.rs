//! `check-1` (profiles/check.md): a model answers a step's fixed questions about a submission
//! once the objective rules passed, and the worst answer decides: pass completes the step, fail
//! is `not_accepted`, unsure holds the submission for a person.
//!
//! The evaluator is a model call and the machine never waits on IO, so a checked submission
//! goes through [`apply`](super::apply) twice. The first time the command carries no
//! [`EvaluatorOutcome`]: the machine answers [`Reply::NeedsEvaluation`](super::Reply) with the
//! [`EvaluatorRequest`] and changes nothing. The runtime asks the evaluator (retrying once on
//! error) and applies the SAME command again with the outcome attached
//! ([`Command::with_evaluation`](super::Command::with_evaluation)); everything is checked again
//! then, since the run may have moved meanwhile, and the verdict is computed here, purely.

use super::Answer;
use super::acceptance::{Accepted, over_cap_with};
use super::advance::Tx;
use super::command::EvidenceItem;
use super::ctx::Limits;
use super::effect::Notification;
use super::history::{self, CheckAction, HistoryEvent, HistoryKind};
use super::refusal::Refusal;
use super::render;
use super::state::{Escalation, RunState, StepRecord, StepState, WorkItemKind};
use crate::Timestamp;
use agentprocess_ids::StepId;
use agentprocess_process::{Check, Next, Question, Step, Target};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::fmt;

/// A number in [0, 1]: a yes-probability, a confidence, or a threshold.
///
/// INVARIANT: finite and within [0, 1]. That is why equality is total ([`Eq`]): no NaN gets in.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Probability(f64);

impl Eq for Probability {}

impl Probability {
    /// `checkPass`: the server's default yes/no pass threshold (check.md §5).
    pub const DEFAULT_PASS: Probability = Probability(0.9);
    /// `checkConfidence`: the server's default confidence floor for choices and rubrics.
    pub const DEFAULT_CONFIDENCE: Probability = Probability(0.8);

    /// `None` unless `value` is a finite number within [0, 1].
    pub fn new(value: f64) -> Option<Probability> {
        (value.is_finite() && (0.0..=1.0).contains(&value)).then_some(Probability(value))
    }

    pub fn get(self) -> f64 {
        self.0
    }
}

impl TryFrom<f64> for Probability {
    type Error = String;

    fn try_from(value: f64) -> Result<Self, Self::Error> {
        Probability::new(value).ok_or_else(|| format!("{value} is not within [0, 1]"))
    }
}

impl From<Probability> for f64 {
    fn from(value: Probability) -> f64 {
        value.0
    }
}

/// The shortest decimal that reads back as the same number: `0.12`, `0.9`, `1`. Issue lines use
/// it, so a line shows exactly the number the verdict records.
impl fmt::Display for Probability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

// ---------------------------------------------------------------- what the evaluator is asked

/// Everything the evaluator is shown for one submission (check.md §2): the step's instructions,
/// the body, the run data, the submission's output, summary and evidence references, and each
/// question with its thresholds resolved. The evaluator does not open files.
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluatorRequest {
    pub step: String,
    pub instructions: String,
    pub body: String,
    /// Run data as it stands before this submission, cut to `limits.checkStateBytes`.
    pub run_data: Value,
    /// What was cut from `run_data`, in the order it was cut: `steps.<id>` entries, oldest
    /// completed step first, and `inputs` last if the inputs alone were still too large.
    pub truncated: Vec<String>,
    pub output: Map<String, Value>,
    pub summary: Option<String>,
    pub evidence: Vec<EvidenceItem>,
    pub questions: Vec<EvaluatorQuestion>,
}

/// One question as the evaluator gets it, with every threshold resolved (the question's own,
/// else the server's default from [`Limits`]).
#[derive(Debug, Clone, PartialEq)]
pub enum EvaluatorQuestion {
    /// Answer with a yes-probability.
    YesNo {
        ask: String,
        pass: Probability,
        fail: Option<Probability>,
    },
    /// Answer with one of the names in `one_of` and a confidence.
    Choice {
        ask: String,
        /// Answer name and its description, in declared order.
        one_of: Vec<(String, String)>,
        pass: Vec<String>,
        unsure: Vec<String>,
        confidence: Probability,
    },
    /// Answer with a level index (0-based, worst first) and a confidence.
    Rubric {
        ask: String,
        levels: Vec<String>,
        pass: usize,
        confidence: Probability,
    },
}

impl EvaluatorQuestion {
    pub fn ask(&self) -> &str {
        match self {
            EvaluatorQuestion::YesNo { ask, .. }
            | EvaluatorQuestion::Choice { ask, .. }
            | EvaluatorQuestion::Rubric { ask, .. } => ask,
        }
    }

    /// `yes_no`, `choice` or `rubric`, as a verdict names the kind.
    pub fn kind(&self) -> &'static str {
        match self {
            EvaluatorQuestion::YesNo { .. } => "yes_no",
            EvaluatorQuestion::Choice { .. } => "choice",
            EvaluatorQuestion::Rubric { .. } => "rubric",
        }
    }
}

/// What the evaluator said, as the runtime attaches it to the command it applies again.
#[derive(Debug, Clone, PartialEq)]
pub enum EvaluatorOutcome {
    /// One answer per question, in question order, and the model that gave them.
    Answered {
        model: String,
        answers: Vec<EvaluatorAnswer>,
    },
    /// The evaluator did not answer, also after the runtime's one retry.
    Failed,
}

/// One answer, raw from the evaluator. An answer that does not fit its question (another kind,
/// an unknown choice name, a level out of range, a number outside [0, 1]) counts as an
/// evaluator error.
#[derive(Debug, Clone, PartialEq)]
pub enum EvaluatorAnswer {
    YesNo { yes: f64 },
    Choice { name: String, confidence: f64 },
    Rubric { level: usize, confidence: f64 },
}

// ---------------------------------------------------------------- the verdict

/// A check's overall verdict (`check-verdict.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    Unsure,
    /// The evaluator did not answer; recorded only on `advisory` steps.
    Error,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Unsure => "unsure",
            Verdict::Error => "error",
        }
    }
}

/// One question's result. The order is the verdict's: the worst question decides, and unsure
/// outranks fail outranks pass (check.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuestionResult {
    Pass,
    Fail,
    Unsure,
}

impl QuestionResult {
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionResult::Pass => "pass",
            QuestionResult::Fail => "fail",
            QuestionResult::Unsure => "unsure",
        }
    }
}

/// A validated answer as a verdict records it.
///
/// Stored externally tagged: an internally tagged enum would buffer its numbers, which
/// arbitrary-precision JSON numbers do not survive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckAnswer {
    YesNo { yes: Probability },
    Choice { name: String, confidence: Probability },
    Rubric { level: usize, confidence: Probability },
}

/// One question of a verdict: `{ ask, kind, answer, confidence?, result }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionVerdict {
    pub ask: String,
    pub answer: CheckAnswer,
    pub result: QuestionResult,
    /// The issue line's answer part: `no (0.12)`, `hedges (0.9)`, `level 1: One list is
    /// covered. (0.85)`.
    pub said: String,
}

/// A check verdict as run data, `handoff.check` and `escalation.check` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckVerdict {
    pub verdict: Verdict,
    pub advisory: bool,
    /// What answered; empty when nothing did (`verdict: error`).
    pub model: String,
    /// Empty on `verdict: error`.
    pub questions: Vec<QuestionVerdict>,
    /// Whether the run data shown to the evaluator was cut to `limits.checkStateBytes`.
    pub truncated: bool,
    pub at: Timestamp,
}

impl CheckVerdict {
    /// The verdict object of `check-verdict.json`.
    pub fn to_json(&self) -> Value {
        let questions: Vec<Value> = self
            .questions
            .iter()
            .map(|q| {
                let (kind, answer, confidence) = match &q.answer {
                    CheckAnswer::YesNo { yes } => ("yes_no", json!(yes.get()), None),
                    CheckAnswer::Choice { name, confidence } => ("choice", json!(name), Some(*confidence)),
                    CheckAnswer::Rubric { level, confidence } => ("rubric", json!(level), Some(*confidence)),
                };
                let mut item =
                    json!({ "ask": q.ask, "kind": kind, "answer": answer, "result": q.result.as_str() });
                if let Some(confidence) = confidence {
                    item["confidence"] = json!(confidence.get());
                }
                item
            })
            .collect();
        let mut out = json!({
            "verdict": self.verdict.as_str(),
            "advisory": self.advisory,
            "model": self.model,
            "questions": questions,
            "at": self.at.to_rfc3339(),
        });
        if self.truncated {
            out["truncated"] = json!(true);
        }
        out
    }

    /// `check: <ask> → <answer>` for every question with this result, in question order.
    pub fn lines(&self, result: QuestionResult) -> Vec<String> {
        self.questions
            .iter()
            .filter(|q| q.result == result)
            .map(|q| format!("check: {} → {}", q.ask, q.said))
            .collect()
    }

    /// The lines of every question that did not pass: what a person or the next attempt reads.
    pub fn open_lines(&self) -> Vec<String> {
        self.questions
            .iter()
            .filter(|q| q.result != QuestionResult::Pass)
            .map(|q| format!("check: {} → {}", q.ask, q.said))
            .collect()
    }
}

/// The step's questions with their thresholds resolved against the server's defaults.
pub fn resolve(check: &Check, limits: &Limits) -> Vec<EvaluatorQuestion> {
    let threshold =
        |value: Option<f64>, default: Probability| value.and_then(Probability::new).unwrap_or(default);
    check
        .questions
        .iter()
        .map(|question| match question {
            Question::YesNo { ask, pass, fail } => EvaluatorQuestion::YesNo {
                ask: ask.clone(),
                pass: threshold(*pass, limits.check_pass),
                fail: match fail {
                    Some(fail) => Probability::new(*fail),
                    None => limits.check_fail,
                },
            },
            Question::Choice {
                ask,
                one_of,
                pass,
                unsure,
                confidence,
            } => EvaluatorQuestion::Choice {
                ask: ask.clone(),
                one_of: one_of.clone(),
                pass: pass.clone(),
                unsure: unsure.clone(),
                confidence: threshold(*confidence, limits.check_confidence),
            },
            Question::Rubric {
                ask,
                levels,
                pass,
                confidence,
            } => EvaluatorQuestion::Rubric {
                ask: ask.clone(),
                levels: levels.clone(),
                pass: *pass,
                confidence: threshold(*confidence, limits.check_confidence),
            },
        })
        .collect()
}

/// The verdict on `answers`, or `None` when the outcome is an evaluator error: it did not
/// answer, answered another number of questions, or gave an answer that does not fit.
pub fn judge(
    questions: &[EvaluatorQuestion],
    outcome: &EvaluatorOutcome,
    advisory: bool,
    truncated: bool,
    at: Timestamp,
) -> Option<CheckVerdict> {
    let EvaluatorOutcome::Answered { model, answers } = outcome else {
        return None;
    };
    if answers.len() != questions.len() || questions.is_empty() {
        return None;
    }
    let judged = questions
        .iter()
        .zip(answers)
        .map(|(question, answer)| judge_one(question, answer))
        .collect::<Option<Vec<QuestionVerdict>>>()?;
    let worst = judged
        .iter()
        .map(|q| q.result)
        .max()
        .expect("at least one question");
    Some(CheckVerdict {
        verdict: match worst {
            QuestionResult::Pass => Verdict::Pass,
            QuestionResult::Fail => Verdict::Fail,
            QuestionResult::Unsure => Verdict::Unsure,
        },
        advisory,
        model: model.clone(),
        questions: judged,
        truncated,
        at,
    })
}

/// The verdict recorded on an `advisory` step when the evaluator did not answer.
pub fn error_verdict(advisory: bool, truncated: bool, at: Timestamp) -> CheckVerdict {
    CheckVerdict {
        verdict: Verdict::Error,
        advisory,
        model: String::new(),
        questions: Vec::new(),
        truncated,
        at,
    }
}

fn judge_one(question: &EvaluatorQuestion, answer: &EvaluatorAnswer) -> Option<QuestionVerdict> {
    let ask = question.ask().to_string();
    let (answer, result, said) = match (question, answer) {
        (EvaluatorQuestion::YesNo { pass, fail, .. }, EvaluatorAnswer::YesNo { yes }) => {
            let yes = Probability::new(*yes)?;
            let result = if yes >= *pass {
                QuestionResult::Pass
            } else if fail.is_some_and(|fail| yes >= fail) {
                QuestionResult::Unsure
            } else {
                QuestionResult::Fail
            };
            let word = if yes < *pass { "no" } else { "yes" };
            (CheckAnswer::YesNo { yes }, result, format!("{word} ({yes})"))
        }
        (
            EvaluatorQuestion::Choice {
                one_of,
                pass,
                unsure,
                confidence: floor,
                ..
            },
            EvaluatorAnswer::Choice { name, confidence },
        ) => {
            let confidence = Probability::new(*confidence)?;
            if !one_of.iter().any(|(option, _)| option == name) {
                return None;
            }
            let result = if confidence < *floor || unsure.contains(name) {
                QuestionResult::Unsure
            } else if pass.contains(name) {
                QuestionResult::Pass
            } else {
                QuestionResult::Fail
            };
            let said = format!("{name} ({confidence})");
            (
                CheckAnswer::Choice {
                    name: name.clone(),
                    confidence,
                },
                result,
                said,
            )
        }
        (
            EvaluatorQuestion::Rubric {
                levels,
                pass,
                confidence: floor,
                ..
            },
            EvaluatorAnswer::Rubric { level, confidence },
        ) => {
            let confidence = Probability::new(*confidence)?;
            let text = levels.get(*level)?;
            let result = if confidence < *floor {
                QuestionResult::Unsure
            } else if level >= pass {
                QuestionResult::Pass
            } else {
                QuestionResult::Fail
            };
            let said = format!("level {level}: {text} ({confidence})");
            (
                CheckAnswer::Rubric {
                    level: *level,
                    confidence,
                },
                result,
                said,
            )
        }
        _ => return None,
    };
    Some(QuestionVerdict {
        ask,
        answer,
        result,
        said,
    })
}

/// Run data as the evaluator sees it: whole when it fits in `max_bytes`, else with `steps.<id>`
/// entries removed oldest completed step first (by their latest completion), and the inputs
/// emptied last if they alone are still too large. Returns what was removed, in order.
pub fn shown_run_data(run: &RunState, max_bytes: usize) -> (Value, Vec<String>) {
    let mut data = render::run_data(run);
    let mut truncated = Vec::new();
    let size = |data: &Value| serde_json::to_vec(data).map_or(usize::MAX, |b| b.len());
    if size(&data) <= max_bytes {
        return (data, truncated);
    }
    let mut by_age: Vec<(u64, &StepId)> = run
        .steps
        .iter()
        .filter(|s| s.current.is_some() || !s.history.is_empty())
        .map(|s| {
            let latest = s
                .current
                .iter()
                .chain(&s.history)
                .map(|r| r.seq)
                .max()
                .unwrap_or(0);
            (latest, &s.id)
        })
        .collect();
    by_age.sort();
    for (_, step) in by_age {
        if size(&data) <= max_bytes {
            break;
        }
        if let Some(steps) = data["steps"].as_object_mut()
            && steps.remove(step.as_str()).is_some()
        {
            truncated.push(format!("steps.{step}"));
        }
    }
    if size(&data) > max_bytes {
        data["inputs"] = json!({});
        truncated.push("inputs".to_string());
    }
    (data, truncated)
}

/// The request for a submission that passed the objective rules on `step`.
fn request(
    tx: &Tx<'_>,
    step: &Step,
    record: &StepRecord,
    questions: Vec<EvaluatorQuestion>,
) -> EvaluatorRequest {
    let work = step.work().expect("checks are on agent and task steps");
    let (run_data, truncated) = shown_run_data(&tx.run, tx.ctx.limits.check_state_bytes);
    EvaluatorRequest {
        step: step.id.to_string(),
        instructions: work.instructions.clone(),
        body: tx.pinned.body.clone(),
        run_data,
        truncated,
        output: record.output.clone().unwrap_or_default(),
        summary: record.summary.clone(),
        evidence: record
            .evidence
            .iter()
            .flatten()
            .map(|e| EvidenceItem {
                kind: e.kind.clone(),
                reference: e.reference.clone(),
            })
            .collect(),
        questions,
    }
}

/// Where the run goes after `record` completes `step`: the route it chose, else the default.
pub(crate) fn next_of(tx: &Tx<'_>, step: &Step, record: &StepRecord) -> Option<Target> {
    match &step.next {
        Some(Next::Routes(routes)) => record
            .next
            .as_ref()
            .and_then(|chosen| routes.iter().find(|r| &r.to.to_string() == chosen))
            .map(|r| r.to.clone()),
        _ => tx.process().default_next(step),
    }
}

/// Completes `step` with an accepted submission, running its check first when it has one.
///
/// `evaluation: None` on a checked step answers [`Answer::NeedsEvaluation`] and changes nothing.
/// Otherwise: pass (or any verdict on an advisory step) completes with the verdict at
/// `steps.<id>.check`; fail is `not_accepted` with the failed questions' lines, remembering the
/// verdict and the lines in the handoff; unsure holds the submission as the step's candidate and
/// escalates the step; an evaluator error is `retry` (recorded as `verdict: error` and completed
/// on an advisory step).
pub(crate) fn complete_checked(
    tx: &mut Tx<'_>,
    step: &Step,
    accepted: Accepted,
    evaluation: Option<EvaluatorOutcome>,
) -> Result<Answer, Refusal> {
    let work = step.work().expect("only agent and task steps take submissions");
    let step_id = &step.id;
    let Some(check) = &work.check else {
        tx.complete(step_id, accepted.record, accepted.next);
        return Ok(Answer::RunView);
    };
    let questions = resolve(check, &tx.ctx.limits);
    let Some(outcome) = evaluation else {
        return Ok(Answer::NeedsEvaluation(Box::new(request(
            tx,
            step,
            &accepted.record,
            questions,
        ))));
    };
    let (_, cut) = shown_run_data(&tx.run, tx.ctx.limits.check_state_bytes);
    let truncated = !cut.is_empty();
    let verdict = match judge(&questions, &outcome, work.advisory, truncated, tx.now()) {
        Some(verdict) => verdict,
        None if work.advisory => error_verdict(true, truncated, tx.now()),
        None => {
            return Err(Refusal::retry(
                "the check's evaluator did not answer; submit again with the same requestId",
            ));
        }
    };
    let by = accepted.record.by.clone();
    let verdict_event = |action: CheckAction, work_item: Option<String>| HistoryKind::CheckVerdict {
        step: step_id.clone(),
        verdict: verdict.verdict,
        action,
        work_item,
    };
    if work.advisory || verdict.verdict == Verdict::Pass {
        let event = verdict_event(CheckAction::Accepted, None);
        let mut record = accepted.record;
        record.check = Some(verdict);
        if let Some(issue) = over_cap_with(tx, step_id, &record, "output") {
            return Err(Refusal::not_accepted(vec![issue]));
        }
        tx.record(&by, event);
        tx.complete(step_id, record, accepted.next);
        return Ok(Answer::RunView);
    }
    match verdict.verdict {
        Verdict::Fail => {
            let issues = verdict.lines(QuestionResult::Fail);
            let mut remembered = tx.run.clone();
            // The refusal changes nothing for the caller, but the handoff it leaves is written:
            // so is the verdict that left it, in the same record.
            let sent_back = HistoryEvent {
                at: tx.now(),
                by,
                kind: verdict_event(CheckAction::SentBack, None),
            };
            history::append(&mut remembered, vec![sent_back], tx.ctx.limits.history_events);
            if let Some(run_step) = remembered.step_mut(step_id) {
                run_step.handoff.issues = Some(issues.clone());
                run_step.handoff.check = Some(verdict);
            }
            let mut refusal = Refusal::not_accepted(issues);
            refusal.remember = Some(Box::new(remembered));
            Err(refusal)
        }
        _ => {
            let unsure = verdict.verdict;
            let work_item = hold(tx, step, accepted.record, verdict)?;
            let event = HistoryKind::CheckVerdict {
                step: step_id.clone(),
                verdict: unsure,
                action: CheckAction::ToPerson,
                work_item: Some(work_item),
            };
            tx.record(&by, event);
            Ok(Answer::RunView)
        }
    }
}

/// Unsure: the submission becomes the step's candidate and the step is escalated exactly as
/// `escalate` does, with the verdict and the candidate on the escalation. Run data shows the
/// verdict at `steps.<id>.check` while it waits. Returns the escalation's work item.
fn hold(
    tx: &mut Tx<'_>,
    step: &Step,
    candidate: StepRecord,
    verdict: CheckVerdict,
) -> Result<String, Refusal> {
    let step_id = &step.id;
    let by = candidate.by.clone();
    let note = verdict.open_lines().join("\n");
    let escalation = Escalation {
        note: note.clone(),
        by,
        at: tx.now(),
        check: Some(verdict),
        candidate: Some(candidate),
    };
    let mut trial = tx.run.clone();
    if let Some(run_step) = trial.step_mut(step_id) {
        run_step.escalation = Some(escalation.clone());
    }
    let bytes = serde_json::to_vec(&render::run_data(&trial)).map_or(usize::MAX, |b| b.len());
    let cap = tx.ctx.limits.run_data_bytes;
    if bytes > cap {
        return Err(Refusal::not_accepted(vec![format!(
            "check: run data would be {bytes} bytes, over limits.runDataBytes ({cap})"
        )]));
    }
    tx.release_claim(step_id);
    // A person's task: their work item was decided; the escalation takes its place.
    tx.close_work_item(step_id, true);
    let run_step = tx.step_run(step_id);
    run_step.state = Some(StepState::Waiting);
    run_step.escalation = Some(escalation);
    let to = tx.ctx.escalate_to.clone();
    let work_item = tx.open_work_item(step_id, WorkItemKind::Escalation, to.clone());
    tx.notify(Notification::Escalated {
        work_item: work_item.clone(),
        step: step_id.clone(),
        to,
        note,
    });
    Ok(work_item)
}
