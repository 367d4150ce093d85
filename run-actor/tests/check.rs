//! `check-1` (profiles/check.md): the evaluator is asked with nothing changed, the verdict is
//! computed from its answers, and pass, fail, unsure, advisory and evaluator errors do what §3
//! says. Every rendered result is checked against the core-2 schemas on the way.

mod common;

use agentprocess_process::{Check, FieldType, PersonRef, Question, Work};
use agentprocess_run_actor::machine::check::{judge, resolve};
use agentprocess_run_actor::machine::{
    Decision, ErrorCode, EvaluatorAnswer, EvaluatorOutcome, EvaluatorQuestion, Limits, Probability,
    QuestionResult, Refusal, Reply, Timestamp, Verdict, render,
};
use common::*;
use serde_json::{Value, json};

const MODEL: &str = "example-evaluator-1";
const Q_CLEARED: &str = "Does the cleared value agree with the attached report?";
const Q_SUMMARY: &str = "How does the summary read?";
const Q_COMPLETE: &str = "How thorough is the screening?";

/// Answers to the three partner-screening questions.
fn answers(yes: f64, choice: (&str, f64), rubric: (usize, f64)) -> EvaluatorOutcome {
    EvaluatorOutcome::Answered {
        model: MODEL.to_string(),
        answers: vec![
            EvaluatorAnswer::YesNo { yes },
            EvaluatorAnswer::Choice {
                name: choice.0.to_string(),
                confidence: choice.1,
            },
            EvaluatorAnswer::Rubric {
                level: rubric.0,
                confidence: rubric.1,
            },
        ],
    }
}

fn passing() -> EvaluatorOutcome {
    answers(0.97, ("decisive", 0.95), (2, 0.9))
}

fn failing() -> EvaluatorOutcome {
    answers(0.12, ("vague", 0.9), (1, 0.85))
}

fn unsure() -> EvaluatorOutcome {
    answers(0.62, ("decisive", 0.91), (2, 0.9))
}

fn yes_no(yes: f64) -> EvaluatorOutcome {
    EvaluatorOutcome::Answered {
        model: MODEL.to_string(),
        answers: vec![EvaluatorAnswer::YesNo { yes }],
    }
}

/// A partner-screening run with `screen_partner` claimed by `a_screener`; returns the token.
fn partner_screening() -> (World, String) {
    let mut world = World::new(example("partner-screening"));
    world
        .start(mira(), json!({ "partnerName": "Acme", "dealSize": 48000 }))
        .unwrap();
    let token = world.claim_token(agent("a_screener"), "screen_partner");
    (world, token)
}

fn submit_screening(
    world: &mut World,
    token: &str,
    next: &str,
) -> Result<agentprocess_run_actor::machine::Transition, Refusal> {
    let submission = good_submission(world, "screen_partner", Some(next));
    world.submit(agent("a_screener"), token, submission)
}

fn keep_remembered(world: &mut World, refusal: &Refusal) {
    let remembered = refusal
        .remember
        .clone()
        .expect("the refusal remembers the handoff");
    assert_eq!(
        render::run_data(&remembered),
        render::run_data(world.run()),
        "run data does not change"
    );
    world.run = Some(*remembered);
    world.check_renderings();
}

fn check_of(world: &World, step: &str) -> Value {
    let check = world.view()["data"]["steps"][step]["check"].clone();
    assert_matches_schema("check-verdict.json", &check);
    check
}

/// One agent step with `check`, then a finish.
fn checked_agent(check: Check, advisory: bool) -> PinnedProcess {
    let mut work = work("Write the note.", &[("text", FieldType::String)], &[], None);
    work.check = Some(check);
    work.advisory = advisory;
    pinned(
        "checked",
        fields(&[]),
        vec![
            agent_step("write", work, to("done")),
            finish_step("done", "written"),
        ],
    )
}

fn short_form(ask: &str) -> Check {
    Check {
        questions: vec![Question::YesNo {
            ask: ask.to_string(),
            pass: None,
            fail: None,
        }],
    }
}

fn written(world: &World) -> agentprocess_run_actor::machine::Submission {
    good_submission(world, "write", None)
}

use agentprocess_run_actor::machine::PinnedProcess;

// ---------------------------------------------------------------- §2 what the evaluator sees

#[test]
fn check_2_the_evaluator_is_asked_and_nothing_changes() {
    let (mut world, token) = partner_screening();
    let before = world.run().clone();
    let transition = submit_screening(&mut world, &token, "partner_approval").unwrap();
    assert_eq!(transition.state, before, "the state is unchanged");
    assert!(transition.effects.is_empty());
    let Reply::NeedsEvaluation(request) = &transition.reply else {
        panic!("expected NeedsEvaluation, got {:?}", transition.reply)
    };
    assert_eq!(transition.reply.data(), &Value::Null);
    assert_eq!(request.step, "screen_partner");
    assert!(
        request
            .instructions
            .starts_with("Search partnerName in the watch-list screening system")
    );
    assert!(request.body.contains("# Partner screening"));
    assert_eq!(request.run_data, render::run_data(&before));
    assert!(request.truncated.is_empty());
    assert_eq!(
        Value::Object(request.output.clone()),
        json!({ "cleared": true, "summary": "summary text" })
    );
    assert_eq!(request.summary.as_deref(), Some("Did screen_partner."));
    assert_eq!(request.evidence, vec![file("f_91a")]);
    let p = |v| Probability::new(v).unwrap();
    assert_eq!(
        request.questions,
        vec![
            EvaluatorQuestion::YesNo {
                ask: Q_CLEARED.into(),
                pass: p(0.9),
                fail: Some(p(0.5)),
            },
            EvaluatorQuestion::Choice {
                ask: Q_SUMMARY.into(),
                one_of: vec![
                    ("decisive".into(), "Gives the result and names both lists.".into()),
                    ("vague".into(), "Hedges or leaves the result open.".into()),
                    ("unreadable".into(), "Impossible to tell.".into()),
                ],
                pass: vec!["decisive".into()],
                unsure: vec!["unreadable".into()],
                // No confidence on the question: the server default, limits.checkConfidence.
                confidence: p(0.8),
            },
            EvaluatorQuestion::Rubric {
                ask: Q_COMPLETE.into(),
                levels: vec![
                    "No list is clearly searched.".into(),
                    "One list is searched.".into(),
                    "Both lists are searched, with the search terms given.".into(),
                ],
                pass: 2,
                confidence: p(0.8),
            },
        ]
    );
    // The claim still stands: the same submission with the outcome goes through.
    world.evaluate_with(passing());
    submit_screening(&mut world, &token, "partner_approval").unwrap();
    assert_eq!(world.step_state("screen_partner"), "done");
}

#[test]
fn check_5_run_data_shown_to_the_evaluator_is_cut_oldest_step_first() {
    let mut steps = Vec::new();
    for name in ["first", "second", "third"] {
        let next = match name {
            "first" => "second",
            "second" => "third",
            _ => "write",
        };
        steps.push(agent_step(
            name,
            work("Do it.", &[("text", FieldType::String)], &[], None),
            to(next),
        ));
    }
    let mut checked = work("Write the note.", &[("text", FieldType::String)], &[], None);
    checked.check = Some(short_form("The note is polite."));
    steps.push(agent_step("write", checked, to("done")));
    steps.push(finish_step("done", "written"));
    let mut world = World::new(pinned("long", fields(&[]), steps));
    world.start(mira(), json!({})).unwrap();
    for name in ["first", "second", "third"] {
        let token = world.claim_token(agent("a_one"), name);
        let mut submission = good_submission(&world, name, None);
        submission.output = Some(obj(json!({ "text": "x".repeat(400) })));
        world.submit(agent("a_one"), &token, submission).unwrap();
    }
    let whole = serde_json::to_vec(&render::run_data(world.run())).unwrap().len();
    world.limits.check_state_bytes = whole - 300;
    let token = world.claim_token(agent("a_one"), "write");
    let submission = written(&world);
    world.submit(agent("a_one"), &token, submission.clone()).unwrap();
    let (request, _) = world.last_request.clone().unwrap();
    assert_eq!(request.truncated, vec!["steps.first".to_string()]);
    assert!(request.run_data["steps"].get("first").is_none());
    assert!(request.run_data["steps"].get("second").is_some());
    assert!(serde_json::to_vec(&request.run_data).unwrap().len() <= whole - 300);

    world.limits.check_state_bytes = 10;
    world.submit(agent("a_one"), &token, submission.clone()).unwrap();
    let (request, _) = world.last_request.clone().unwrap();
    assert_eq!(
        request.truncated,
        vec!["steps.first", "steps.second", "steps.third", "inputs"]
    );

    world.evaluate_with(yes_no(0.95));
    world.submit(agent("a_one"), &token, submission).unwrap();
    let check = check_of(&world, "write");
    assert_eq!(
        check["truncated"], true,
        "the truncation is recorded on the verdict"
    );
}

// ---------------------------------------------------------------- §3 each question kind

fn one(question: Question, limits: &Limits, answer: EvaluatorAnswer) -> Option<QuestionResult> {
    let questions = resolve(
        &Check {
            questions: vec![question],
        },
        limits,
    );
    let outcome = EvaluatorOutcome::Answered {
        model: MODEL.into(),
        answers: vec![answer],
    };
    judge(&questions, &outcome, false, false, Timestamp::from_millis(T0)).map(|v| v.questions[0].result)
}

#[test]
fn check_3_yes_no_passes_at_pass_fails_below_fail_and_is_unsure_between() {
    let limits = Limits::default();
    let question = |pass, fail| Question::YesNo {
        ask: "Q".into(),
        pass,
        fail,
    };
    let yes = |yes| EvaluatorAnswer::YesNo { yes };
    use QuestionResult::*;
    // The question's own thresholds.
    assert_eq!(one(question(Some(0.9), Some(0.5)), &limits, yes(0.9)), Some(Pass));
    assert_eq!(
        one(question(Some(0.9), Some(0.5)), &limits, yes(0.89)),
        Some(Unsure)
    );
    assert_eq!(
        one(question(Some(0.9), Some(0.5)), &limits, yes(0.5)),
        Some(Unsure)
    );
    assert_eq!(
        one(question(Some(0.9), Some(0.5)), &limits, yes(0.49)),
        Some(Fail)
    );
    // No fail threshold anywhere: below pass fails.
    assert_eq!(one(question(Some(0.7), None), &limits, yes(0.69)), Some(Fail));
    // The server's defaults: checkPass 0.9, checkFail none.
    assert_eq!(one(question(None, None), &limits, yes(0.9)), Some(Pass));
    assert_eq!(one(question(None, None), &limits, yes(0.89)), Some(Fail));
    let server = Limits {
        check_pass: Probability::new(0.7).unwrap(),
        check_fail: Probability::new(0.3),
        ..Limits::default()
    };
    assert_eq!(one(question(None, None), &server, yes(0.7)), Some(Pass));
    assert_eq!(one(question(None, None), &server, yes(0.5)), Some(Unsure));
    assert_eq!(one(question(None, None), &server, yes(0.29)), Some(Fail));
    // The question's fail wins over the server's.
    assert_eq!(one(question(None, Some(0.6)), &server, yes(0.5)), Some(Fail));
}

#[test]
fn check_3_choice_passes_by_name_unsure_by_name_or_low_confidence() {
    let question = |confidence| Question::Choice {
        ask: Q_SUMMARY.into(),
        one_of: vec![
            ("decisive".into(), "States.".into()),
            ("vague".into(), "Hedges.".into()),
            ("unreadable".into(), "Impossible to tell.".into()),
        ],
        pass: vec!["decisive".into()],
        unsure: vec!["unreadable".into()],
        confidence,
    };
    let pick = |name: &str, confidence| EvaluatorAnswer::Choice {
        name: name.into(),
        confidence,
    };
    let limits = Limits::default();
    use QuestionResult::*;
    assert_eq!(one(question(None), &limits, pick("decisive", 0.8)), Some(Pass));
    assert_eq!(
        one(question(None), &limits, pick("unreadable", 0.99)),
        Some(Unsure)
    );
    assert_eq!(one(question(None), &limits, pick("vague", 0.9)), Some(Fail));
    // Below limits.checkConfidence (0.8) any answer is unsure, even a failing one.
    assert_eq!(one(question(None), &limits, pick("decisive", 0.79)), Some(Unsure));
    assert_eq!(one(question(None), &limits, pick("vague", 0.79)), Some(Unsure));
    // The question's own confidence wins.
    assert_eq!(
        one(question(Some(0.5)), &limits, pick("decisive", 0.6)),
        Some(Pass)
    );
    assert_eq!(
        one(question(Some(0.95)), &limits, pick("decisive", 0.9)),
        Some(Unsure)
    );
}

#[test]
fn check_3_rubric_passes_at_or_above_its_level() {
    let question = |confidence| Question::Rubric {
        ask: Q_COMPLETE.into(),
        levels: vec!["None.".into(), "One.".into(), "Both.".into()],
        pass: 1,
        confidence,
    };
    let level = |level, confidence| EvaluatorAnswer::Rubric { level, confidence };
    let limits = Limits::default();
    use QuestionResult::*;
    assert_eq!(one(question(None), &limits, level(2, 0.9)), Some(Pass));
    assert_eq!(one(question(None), &limits, level(1, 0.8)), Some(Pass));
    assert_eq!(one(question(None), &limits, level(0, 0.9)), Some(Fail));
    assert_eq!(one(question(None), &limits, level(2, 0.7)), Some(Unsure));
    assert_eq!(one(question(Some(0.6)), &limits, level(2, 0.7)), Some(Pass));
}

#[test]
fn check_3_answers_that_do_not_fit_are_evaluator_errors() {
    let limits = Limits::default();
    let yes_no = Question::YesNo {
        ask: "Q".into(),
        pass: None,
        fail: None,
    };
    let choice = Question::Choice {
        ask: "Q".into(),
        one_of: vec![("a".into(), "A.".into()), ("b".into(), "B.".into())],
        pass: vec!["a".into()],
        unsure: vec![],
        confidence: None,
    };
    let rubric = Question::Rubric {
        ask: "Q".into(),
        levels: vec!["Low.".into(), "High.".into()],
        pass: 1,
        confidence: None,
    };
    for (question, answer) in [
        (yes_no.clone(), EvaluatorAnswer::YesNo { yes: 1.2 }),
        (yes_no.clone(), EvaluatorAnswer::YesNo { yes: -0.1 }),
        (yes_no.clone(), EvaluatorAnswer::YesNo { yes: f64::NAN }),
        (
            yes_no,
            EvaluatorAnswer::Choice {
                name: "a".into(),
                confidence: 0.9,
            },
        ),
        (
            choice.clone(),
            EvaluatorAnswer::Choice {
                name: "c".into(),
                confidence: 0.9,
            },
        ),
        (
            choice,
            EvaluatorAnswer::Choice {
                name: "a".into(),
                confidence: 1.5,
            },
        ),
        (
            rubric.clone(),
            EvaluatorAnswer::Rubric {
                level: 2,
                confidence: 0.9,
            },
        ),
        (
            rubric,
            EvaluatorAnswer::Rubric {
                level: 1,
                confidence: f64::INFINITY,
            },
        ),
    ] {
        assert_eq!(one(question, &limits, answer.clone()), None, "{answer:?}");
    }
    // Too few answers for the questions.
    let questions = resolve(&example_check(), &limits);
    let EvaluatorOutcome::Answered { answers, .. } = passing() else {
        unreachable!()
    };
    let short = EvaluatorOutcome::Answered {
        model: MODEL.into(),
        answers: answers[..2].to_vec(),
    };
    assert!(judge(&questions, &short, false, false, Timestamp::from_millis(T0)).is_none());
    assert!(
        judge(
            &questions,
            &EvaluatorOutcome::Failed,
            false,
            false,
            Timestamp::from_millis(T0)
        )
        .is_none()
    );
}

fn example_check() -> Check {
    let process = example("partner-screening");
    let step = process.process.step(&id("screen_partner")).unwrap();
    step.work().unwrap().check.clone().unwrap()
}

fn verdict_of(outcome: EvaluatorOutcome) -> Verdict {
    let questions = resolve(&example_check(), &Limits::default());
    judge(&questions, &outcome, false, false, Timestamp::from_millis(T0))
        .unwrap()
        .verdict
}

#[test]
fn check_3_unsure_outranks_fail() {
    assert_eq!(
        verdict_of(answers(0.2, ("unreadable", 0.9), (2, 0.9))),
        Verdict::Unsure
    );
    assert_eq!(
        verdict_of(answers(0.7, ("vague", 0.9), (0, 0.9))),
        Verdict::Unsure
    );
}

#[test]
fn check_3_fail_outranks_pass() {
    assert_eq!(verdict_of(answers(0.95, ("vague", 0.9), (2, 0.9))), Verdict::Fail);
    assert_eq!(
        verdict_of(answers(0.95, ("decisive", 0.9), (1, 0.9))),
        Verdict::Fail
    );
    assert_eq!(verdict_of(passing()), Verdict::Pass);
}

// ---------------------------------------------------------------- §3 pass, fail, unsure

#[test]
fn check_3_pass_completes_and_records_the_verdict_in_run_data() {
    let (mut world, token) = partner_screening();
    world.advance(260);
    world.evaluate_with(passing());
    submit_screening(&mut world, &token, "partner_approval").unwrap();
    assert_eq!(world.step_state("screen_partner"), "done");
    assert_eq!(world.step_state("partner_approval"), "waiting");
    let check = check_of(&world, "screen_partner");
    assert_eq!(
        check,
        json!({
            "verdict": "pass", "advisory": false, "model": MODEL,
            "questions": [
                { "ask": Q_CLEARED, "kind": "yes_no", "answer": 0.97, "result": "pass" },
                { "ask": Q_SUMMARY, "kind": "choice", "answer": "decisive", "confidence": 0.95, "result": "pass" },
                { "ask": Q_COMPLETE, "kind": "rubric", "answer": 2, "confidence": 0.9, "result": "pass" },
            ],
            "at": "2026-10-06T09:04:20Z",
        })
    );
    // The approver sees it before deciding: the approval's work item comes with run data.
    assert_eq!(
        world.view()["data"]["steps"]["screen_partner"]["output"]["cleared"],
        true
    );
}

#[test]
fn check_3_fail_is_not_accepted_with_each_failed_question_and_goes_to_the_handoff() {
    let (mut world, token) = partner_screening();
    world.evaluate_with(answers(0.12, ("vague", 0.9), (1, 0.85)));
    let refusal = submit_screening(&mut world, &token, "partner_approval").unwrap_err();
    assert_eq!(refusal.code, ErrorCode::NotAccepted);
    let expected = vec![
        format!("check: {Q_CLEARED} → no (0.12)"),
        format!("check: {Q_SUMMARY} → vague (0.9)"),
        format!("check: {Q_COMPLETE} → level 1: One list is searched. (0.85)"),
    ];
    assert_eq!(refusal.issues, expected);
    assert_matches_schema("tool-error.json", &error_object(&refusal));
    keep_remembered(&mut world, &refusal);
    assert_eq!(world.step_state("screen_partner"), "claimed", "the claim stands");
    assert!(world.view()["data"]["steps"].get("screen_partner").is_none());

    // Whoever claims the step next reads the verdict and the same lines.
    world.advance(601);
    let claim = world.claim(agent("a_second"), "screen_partner").unwrap();
    let handoff = &claim.reply.data()["handoff"];
    assert_eq!(handoff["issues"], json!(expected));
    assert_eq!(handoff["check"]["verdict"], "fail");
    assert_eq!(handoff["check"]["questions"][0]["answer"], 0.12);
    assert_matches_schema("check-verdict.json", &handoff["check"]);

    // Only the failed questions are listed; a yes/no above pass reads "yes".
    let token = claim.reply.data()["token"].as_str().unwrap().to_string();
    world.evaluate_with(answers(0.95, ("vague", 0.9), (2, 0.9)));
    let submission = good_submission(&world, "screen_partner", Some("partner_approval"));
    let refusal = world.submit(agent("a_second"), &token, submission).unwrap_err();
    assert_eq!(refusal.issues, vec![format!("check: {Q_SUMMARY} → vague (0.9)")]);
}

#[test]
fn check_3_yes_no_issue_reads_yes_at_or_above_pass() {
    let mut world = World::new(checked_agent(
        Check {
            questions: vec![
                Question::YesNo {
                    ask: "Polite".into(),
                    pass: Some(0.5),
                    fail: None,
                },
                Question::YesNo {
                    ask: "Short".into(),
                    pass: Some(0.9),
                    fail: None,
                },
            ],
        },
        false,
    ));
    world.start(mira(), json!({})).unwrap();
    let token = world.claim_token(agent("a_one"), "write");
    world.evaluate_with(EvaluatorOutcome::Answered {
        model: MODEL.into(),
        answers: vec![
            EvaluatorAnswer::YesNo { yes: 0.6 },
            EvaluatorAnswer::YesNo { yes: 0.3 },
        ],
    });
    let submission = written(&world);
    let refusal = world.submit(agent("a_one"), &token, submission).unwrap_err();
    assert_eq!(refusal.issues, vec!["check: Short → no (0.3)".to_string()]);
}

/// Submits a screening the check is unsure of; returns the escalation work item.
fn unsure_screening() -> (World, String) {
    let (mut world, token) = partner_screening();
    world.evaluate_with(unsure());
    let view = submit_screening(&mut world, &token, "partner_approval").unwrap();
    assert_eq!(view.reply.data()["run"]["state"], "waiting");
    assert_eq!(world.step_state("screen_partner"), "waiting");
    let item = world.work_item_on("screen_partner");
    // The token is gone, as after escalate.
    let (code, _) = refused(submit_screening(&mut world, &token, "partner_approval"));
    assert_eq!(code, ErrorCode::Stale);
    (world, item)
}

#[test]
fn check_3_unsure_holds_the_candidate_and_escalates_the_step() {
    let (world, item) = unsure_screening();
    let view = world.view();
    let work_item = view["workItems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == item.as_str())
        .unwrap()
        .clone();
    assert_eq!(work_item["kind"], "agent");
    assert_eq!(work_item["assignedTo"], json!({ "group": OPERATORS }));
    assert_eq!(
        work_item["decide"]["decisions"],
        json!(["returned", "completed", "failed"])
    );
    let escalation = &work_item["escalation"];
    assert_eq!(escalation["by"], "a_screener");
    assert_eq!(escalation["note"], format!("check: {Q_CLEARED} → no (0.62)"));
    assert_eq!(escalation["check"]["verdict"], "unsure");
    assert_eq!(escalation["check"]["questions"][0]["result"], "unsure");
    assert_matches_schema("check-verdict.json", &escalation["check"]);
    assert_eq!(
        escalation["candidate"]["output"],
        json!({ "cleared": true, "summary": "summary text" })
    );
    assert_eq!(escalation["candidate"]["next"], "partner_approval");
    assert_eq!(escalation["candidate"]["by"], "a_screener");
    // While it waits, run data shows the verdict.
    let check = check_of(&world, "screen_partner");
    assert_eq!(check, escalation["check"]);
    assert!(view["data"]["steps"]["screen_partner"].get("output").is_none());
}

#[test]
fn check_3_unsure_then_returned_continues_the_attempt_with_the_check_in_the_handoff() {
    let (mut world, item) = unsure_screening();
    world
        .decide(operator(), &item, Decision::Returned)
        .note("Attach the EU part of the report.")
        .send()
        .unwrap();
    assert_eq!(world.step_state("screen_partner"), "ready");
    assert!(world.view()["data"]["steps"].get("screen_partner").is_none());
    let claim = world.claim(agent("a_screener"), "screen_partner").unwrap();
    let handoff = &claim.reply.data()["handoff"];
    assert_eq!(handoff["returned"]["note"], "Attach the EU part of the report.");
    assert_eq!(handoff["check"]["verdict"], "unsure");
    assert_eq!(
        handoff["issues"],
        json!([format!("check: {Q_CLEARED} → no (0.62)")])
    );
}

#[test]
fn check_3_unsure_then_completed_with_the_candidate() {
    let (mut world, item) = unsure_screening();
    world.evaluator = Some(Box::new(|_| panic!("an escalated step is not checked again")));
    world.advance(60);
    world
        .decide(operator(), &item, Decision::Completed)
        .send()
        .unwrap();
    assert_eq!(world.step_state("screen_partner"), "done");
    assert_eq!(
        world.step_state("partner_approval"),
        "waiting",
        "the candidate's next"
    );
    let record = &world.view()["data"]["steps"]["screen_partner"];
    assert_eq!(
        record["output"],
        json!({ "cleared": true, "summary": "summary text" })
    );
    assert_eq!(record["by"], "ops@acme.example");
    assert_eq!(record["check"]["verdict"], "unsure", "the verdict stays recorded");
}

#[test]
fn check_3_unsure_then_completed_with_the_persons_own_output() {
    let (mut world, item) = unsure_screening();
    let held = world.view()["data"]["steps"]["screen_partner"]["check"].clone();
    world.evaluator = Some(Box::new(|_| panic!("an escalated step is not checked again")));
    world
        .decide(operator(), &item, Decision::Completed)
        .output(json!({ "cleared": false, "summary": "Adverse-media hit." }))
        .evidence(vec![file("f_91a")])
        .next("turned_down", "Match on the adverse-media list.")
        .send()
        .unwrap();
    assert_eq!(world.run_state(), "ended");
    assert_eq!(world.view()["run"]["outcome"], "declined");
    let record = &world.view()["data"]["steps"]["screen_partner"];
    assert_eq!(record["output"]["cleared"], false);
    // check.md §3: the unsure verdict that sent the step to a person stays recorded; the
    // person's own output was not checked again (the evaluator above would panic).
    assert_eq!(record["check"], held);
    assert_eq!(record["check"]["verdict"], "unsure");
}

#[test]
fn check_3_unsure_then_completed_with_the_candidate_takes_nothing_else() {
    let (mut world, item) = unsure_screening();
    let (code, issues) = refused(
        world
            .decide(operator(), &item, Decision::Completed)
            .next("turned_down", "Changed my mind.")
            .send(),
    );
    assert_eq!(code, ErrorCode::NotAccepted);
    assert_eq!(issues.len(), 2, "{issues:?}");
}

#[test]
fn check_3_unsure_then_failed_ends_the_run() {
    let (mut world, item) = unsure_screening();
    world
        .decide(operator(), &item, Decision::Failed)
        .note("Screening cannot be trusted.")
        .send()
        .unwrap();
    assert_eq!(world.view()["run"]["outcome"], "failed");
    assert_eq!(world.step_state("screen_partner"), "failed");
}

// ---------------------------------------------------------------- §3 errors and advisory

#[test]
fn check_3_an_evaluator_error_is_retry_and_changes_nothing() {
    let (mut world, token) = partner_screening();
    let before = world.run().clone();
    world.evaluate_with(EvaluatorOutcome::Failed);
    let refusal = submit_screening(&mut world, &token, "partner_approval").unwrap_err();
    assert_eq!(refusal.code, ErrorCode::Retry);
    assert!(refusal.remember.is_none());
    assert_eq!(world.run(), &before);
    // An answer that does not fit is an error too.
    world.evaluate_with(answers(0.97, ("maybe", 0.9), (2, 0.9)));
    assert_eq!(
        refused(submit_screening(&mut world, &token, "partner_approval")).0,
        ErrorCode::Retry
    );
    // The agent resubmits; this time the evaluator answers.
    world.evaluate_with(passing());
    submit_screening(&mut world, &token, "partner_approval").unwrap();
    assert_eq!(world.step_state("screen_partner"), "done");
}

#[test]
fn check_3_advisory_records_every_verdict_and_never_blocks() {
    for (outcome, verdict) in [
        (yes_no(0.95), "pass"),
        (yes_no(0.2), "fail"),
        (yes_no(0.5), "unsure"),
        (EvaluatorOutcome::Failed, "error"),
    ] {
        let mut advisory_world = World::new(checked_agent(
            Check {
                questions: vec![Question::YesNo {
                    ask: "The note is polite.".into(),
                    pass: None,
                    fail: Some(0.3),
                }],
            },
            true,
        ));
        let world = &mut advisory_world;
        world.start(mira(), json!({})).unwrap();
        let token = world.claim_token(agent("a_one"), "write");
        world.evaluate_with(outcome);
        let submission = written(world);
        world.submit(agent("a_one"), &token, submission).unwrap();
        assert_eq!(world.run_state(), "ended");
        let check = check_of(world, "write");
        assert_eq!(check["verdict"], verdict);
        assert_eq!(check["advisory"], true);
    }
    // Unsure does not block either.
    let mut world = World::new(checked_agent(
        Check {
            questions: vec![Question::YesNo {
                ask: "The note is polite.".into(),
                pass: None,
                fail: Some(0.3),
            }],
        },
        true,
    ));
    world.start(mira(), json!({})).unwrap();
    let token = world.claim_token(agent("a_one"), "write");
    world.evaluate_with(yes_no(0.5));
    let submission = written(&world);
    world.submit(agent("a_one"), &token, submission).unwrap();
    assert_eq!(world.run_state(), "ended");
    assert_eq!(check_of(&world, "write")["verdict"], "unsure");
    assert!(world.run().work_items.is_empty());
}

#[test]
fn check_2_the_short_form_uses_the_servers_thresholds() {
    let process = checked_agent(short_form("The note is polite."), false);
    let mut world = World::new(process.clone());
    world.start(mira(), json!({})).unwrap();
    let token = world.claim_token(agent("a_one"), "write");
    world.evaluate_with(yes_no(0.8));
    let submission = written(&world);
    let refusal = world
        .submit(agent("a_one"), &token, submission.clone())
        .unwrap_err();
    assert_eq!(
        refusal.issues,
        vec!["check: The note is polite. → no (0.8)".to_string()]
    );

    // A server with a lower checkPass passes the same answer.
    let mut world = World::new(process.clone());
    world.limits.check_pass = Probability::new(0.75).unwrap();
    world.start(mira(), json!({})).unwrap();
    let token = world.claim_token(agent("a_one"), "write");
    world.evaluate_with(yes_no(0.8));
    world.submit(agent("a_one"), &token, submission.clone()).unwrap();
    assert_eq!(world.run_state(), "ended");

    // A server with a checkFail makes it unsure instead.
    let mut world = World::new(process);
    world.limits.check_fail = Probability::new(0.5);
    world.start(mira(), json!({})).unwrap();
    let token = world.claim_token(agent("a_one"), "write");
    world.evaluate_with(yes_no(0.8));
    world.submit(agent("a_one"), &token, submission).unwrap();
    assert_eq!(world.step_state("write"), "waiting");
    assert_eq!(check_of(&world, "write")["verdict"], "unsure");
}

#[test]
fn check_3_the_second_pass_checks_everything_again() {
    let (mut world, token) = partner_screening();
    let transition = submit_screening(&mut world, &token, "partner_approval").unwrap();
    assert!(matches!(transition.reply, Reply::NeedsEvaluation(_)));
    let (_, command) = world.last_request.clone().unwrap();
    // The lease ends while the evaluator thinks.
    world.advance(601);
    let refusal = world.apply(command.with_evaluation(passing())).unwrap_err();
    assert_eq!(refusal.code, ErrorCode::Stale);
}

#[test]
fn check_3_rework_through_on_reject_is_a_fresh_attempt() {
    let (mut world, token) = partner_screening();
    world.evaluate_with(passing());
    submit_screening(&mut world, &token, "partner_approval").unwrap();
    let approval = world.work_item_on("partner_approval");
    world
        .decide(
            assignee(&agentprocess_run_actor::machine::Assignment::Group(
                "g_partnerships-manager".into(),
            )),
            &approval,
            Decision::Rejected,
        )
        .note("Re-check the EU list.")
        .send()
        .unwrap();
    assert_eq!(world.step_state("screen_partner"), "ready");
    let claim = world.claim(agent("a_screener"), "screen_partner").unwrap();
    assert_eq!(
        claim.reply.data()["handoff"],
        Value::Null,
        "the handoff starts empty"
    );
    // The returned-to step keeps its record current until it completes again (spec §3.1).
    assert_eq!(check_of(&world, "screen_partner")["verdict"], "pass");

    // An unsure verdict on the rework shows while it waits, even though the step completed
    // before.
    let token = claim.reply.data()["token"].as_str().unwrap().to_string();
    world.evaluate_with(unsure());
    submit_screening(&mut world, &token, "partner_approval").unwrap();
    assert_eq!(check_of(&world, "screen_partner")["verdict"], "unsure");

    // Completed again: the earlier verdict is in the step's history.
    let item = world.work_item_on("screen_partner");
    world
        .decide(operator(), &item, Decision::Completed)
        .send()
        .unwrap();
    let entry = &world.view()["data"]["steps"]["screen_partner"];
    assert_eq!(entry["check"]["verdict"], "unsure");
    assert_eq!(entry["history"][0]["check"]["verdict"], "pass");
    assert_matches_schema("check-verdict.json", &entry["history"][0]["check"]);
}

// ---------------------------------------------------------------- a person's task

fn checked_task() -> World {
    let mut work: Work = work("Write the summary.", &[("text", FieldType::String)], &[], None);
    work.check = Some(short_form("The summary is complete."));
    let process = pinned(
        "summary",
        fields(&[]),
        vec![
            task_step("write", PersonRef::Role("accounts".into()), work, to("done")),
            finish_step("done", "written"),
        ],
    );
    let mut world = World::new(process);
    world.start(mira(), json!({})).unwrap();
    world
}

fn accountant() -> Caller {
    person("acc@acme.example", &["g_accounts"])
}

use agentprocess_run_actor::machine::Caller;

#[test]
fn check_3_a_persons_task_is_checked_and_bounced_with_the_check_in_the_handoff() {
    let mut world = checked_task();
    let item = world.work_item_on("write");
    let transition = world
        .decide(accountant(), &item, Decision::Completed)
        .output(json!({ "text": "All done." }))
        .send()
        .unwrap();
    assert!(
        matches!(transition.reply, Reply::NeedsEvaluation(_)),
        "a task is checked"
    );
    world.evaluate_with(yes_no(0.3));
    let refusal = world
        .decide(accountant(), &item, Decision::Completed)
        .output(json!({ "text": "All done." }))
        .send()
        .unwrap_err();
    assert_eq!(
        refusal.issues,
        vec!["check: The summary is complete. → no (0.3)".to_string()]
    );
    keep_remembered(&mut world, &refusal);
    let work_item = &world.view()["workItems"][0];
    assert_eq!(work_item["handoff"]["check"]["verdict"], "fail");
    assert_eq!(work_item["kind"], "task");
}

#[test]
fn check_3_a_persons_task_the_check_is_unsure_of_is_escalated_and_returned_to_the_assignee() {
    let mut world = checked_task();
    let item = world.work_item_on("write");
    world.limits.check_fail = Probability::new(0.2);
    world.evaluate_with(yes_no(0.3));
    world
        .decide(accountant(), &item, Decision::Completed)
        .output(json!({ "text": "All done." }))
        .send()
        .unwrap();
    let escalation = world.work_item_on("write");
    assert_ne!(escalation, item);
    let view = world.view();
    let work_item = &view["workItems"][0];
    assert_eq!(work_item["kind"], "task");
    assert_eq!(work_item["assignedTo"], json!({ "group": OPERATORS }));
    assert_eq!(
        work_item["decide"]["decisions"],
        json!(["returned", "completed", "failed"])
    );
    assert_eq!(
        work_item["escalation"]["candidate"]["output"],
        json!({ "text": "All done." })
    );
    assert_eq!(work_item["escalation"]["by"], "acc@acme.example");
    let (code, issues) = refused(world.decide(accountant(), &item, Decision::Completed).send());
    assert_eq!(
        (code, issues),
        (ErrorCode::Conflict, vec!["already_decided".to_string()])
    );

    world
        .decide(operator(), &escalation, Decision::Returned)
        .note("Say what was left out.")
        .send()
        .unwrap();
    let view = world.view();
    let task = &view["workItems"][0];
    assert_eq!(task["kind"], "task");
    assert_eq!(task["assignedTo"], json!({ "group": "g_accounts" }));
    assert_eq!(task["handoff"]["returned"]["note"], "Say what was left out.");
    assert_eq!(task["handoff"]["check"]["verdict"], "unsure");

    // The assignee completes again: checked again, since it is an ordinary task once more.
    let task_id = task["id"].as_str().unwrap().to_string();
    world.evaluate_with(yes_no(0.95));
    world
        .decide(accountant(), &task_id, Decision::Completed)
        .output(json!({ "text": "All done; nothing left out." }))
        .send()
        .unwrap();
    assert_eq!(world.run_state(), "ended");
    assert_eq!(check_of(&world, "write")["verdict"], "pass");
}

// ---------------------------------------------------------------- the example, path by path

#[test]
fn partner_screening_walks_every_check_path_to_its_finish() {
    // pass → partner_approval → accepted
    let (mut world, token) = partner_screening();
    world.evaluate_with(passing());
    submit_screening(&mut world, &token, "partner_approval").unwrap();
    let approval = world.work_item_on("partner_approval");
    world
        .decide(
            person("fin@acme.example", &["g_partnerships-manager"]),
            &approval,
            Decision::Approved,
        )
        .send()
        .unwrap();
    assert_eq!(world.view()["run"]["outcome"], "partnered");

    // fail → fixed → pass → turned_down
    let (mut world, token) = partner_screening();
    world.evaluate_with(failing());
    let refusal = submit_screening(&mut world, &token, "turned_down").unwrap_err();
    keep_remembered(&mut world, &refusal);
    world.evaluate_with(passing());
    submit_screening(&mut world, &token, "turned_down").unwrap();
    assert_eq!(world.view()["run"]["outcome"], "declined");

    // unsure → completed with the candidate → partner_approval → accepted
    let (mut world, item) = unsure_screening();
    world
        .decide(operator(), &item, Decision::Completed)
        .send()
        .unwrap();
    let approval = world.work_item_on("partner_approval");
    world
        .decide(
            person("fin@acme.example", &["g_partnerships-manager"]),
            &approval,
            Decision::Approved,
        )
        .send()
        .unwrap();
    assert_eq!(world.view()["run"]["outcome"], "partnered");

    // error → retry → pass
    let (mut world, token) = partner_screening();
    world.evaluate_with(EvaluatorOutcome::Failed);
    assert_eq!(
        refused(submit_screening(&mut world, &token, "partner_approval")).0,
        ErrorCode::Retry
    );
    world.evaluate_with(passing());
    submit_screening(&mut world, &token, "partner_approval").unwrap();
    assert_eq!(world.step_state("partner_approval"), "waiting");
}

#[test]
fn check_verdicts_survive_a_round_trip_through_stored_state() {
    let (world, _) = unsure_screening();
    let stored = serde_json::to_string(world.run()).unwrap();
    let loaded: agentprocess_run_actor::machine::RunState = serde_json::from_str(&stored).unwrap();
    assert_eq!(&loaded, world.run());
}

/// The limits as `describe.limits` shows them, with the runtime's defaults. That the server's
/// `describe` reports them is checked end to end by
/// `check_5_describe_carries_the_check_limits_with_the_server_defaults`.
#[test]
fn check_5_limits_render_as_describe_limits_with_the_runtime_defaults() {
    let limits = Limits::default();
    assert_eq!(
        limits.to_json(),
        json!({ "runDataBytes": 524288, "checkPass": 0.9, "checkFail": null,
                "checkConfidence": 0.8, "checkStateBytes": 65536 })
    );
    let strict = Limits {
        check_fail: Probability::new(0.4),
        ..limits
    };
    assert_eq!(strict.to_json()["checkFail"], 0.4);
}
