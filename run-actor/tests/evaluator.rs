//! The `check-1` evaluator client over real HTTP against the fake evaluator: every question kind
//! reaches pass, fail, unsure and error, and a run through the runtime gets each verdict.

use agentprocess_ids::{OrgId, RunId, StepId};
use agentprocess_run_actor::machine::check::judge;
use agentprocess_run_actor::machine::{
    Caller, CallerKind, ErrorCode, EvaluatorAnswer, EvaluatorOutcome, EvaluatorQuestion, EvaluatorRequest,
    EvidenceItem, Probability, QuestionResult, Timestamp,
};
use agentprocess_run_actor::runtime::{
    self, Clock, Evaluator, LocalBlobs, Runtime, RuntimeConfig, ToolOutcome, Upload, Write,
};
use agentprocess_run_actor::{EvaluatorConfig, OpenAiEvaluator};
use agentprocess_store::{EmbeddedOptions, EmbeddedStore, Store};
use agentprocess_testkit::run_view::step_state;
use agentprocess_testkit::{FakeEvaluator, assert_matches_schema};
use serde_json::{Map, Value, json};
use std::sync::Arc;

const Q_CLEARED: &str = "Does the cleared value agree with the attached report?";
const Q_SUMMARY: &str = "How does the summary read?";
const Q_SCREENING: &str = "How thorough is the screening?";

/// 2026-10-01T00:00:00Z.
const START: Timestamp = Timestamp::from_millis(1_790_812_800_000);

/// The `partner-screening` example's questions, thresholds resolved.
fn partner_questions() -> Vec<EvaluatorQuestion> {
    let p = |value| Probability::new(value).unwrap();
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
            confidence: Probability::DEFAULT_CONFIDENCE,
        },
        EvaluatorQuestion::Rubric {
            ask: Q_SCREENING.into(),
            levels: vec![
                "No list is clearly searched.".into(),
                "One list is searched.".into(),
                "Both lists are searched, with the search terms given.".into(),
            ],
            pass: 2,
            confidence: Probability::new(0.8).unwrap(),
        },
    ]
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("not an object"),
    }
}

/// A request about a screening whose summary is `summary`.
fn screening(summary: &str) -> EvaluatorRequest {
    EvaluatorRequest {
        step: "screen_partner".into(),
        instructions: "Search partnerName on the sanctions list and the adverse-media list.".into(),
        body: "# Partner screening".into(),
        run_data: json!({ "inputs": { "partnerName": "Acme", "dealSize": 48000 }, "steps": {} }),
        truncated: Vec::new(),
        output: object(json!({ "cleared": true, "summary": summary })),
        summary: Some(summary.into()),
        evidence: vec![EvidenceItem {
            kind: "file".into(),
            reference: "upl_report".into(),
        }],
        questions: partner_questions(),
    }
}

fn evaluator_for(fake: &FakeEvaluator) -> OpenAiEvaluator {
    OpenAiEvaluator::new(&EvaluatorConfig::new(&fake.base_url, "judge-small")).expect("a valid configuration")
}

/// Each question's result as the run machine judges `answers`.
fn results(
    questions: &[EvaluatorQuestion],
    model: &str,
    answers: Vec<EvaluatorAnswer>,
) -> Vec<QuestionResult> {
    let outcome = EvaluatorOutcome::Answered {
        model: model.into(),
        answers,
    };
    let verdict = judge(questions, &outcome, false, false, START).expect("the answers fit their questions");
    verdict.questions.iter().map(|q| q.result).collect()
}

#[tokio::test]
async fn every_question_kind_passes_on_an_unmarked_submission() {
    let fake = FakeEvaluator::spawn().await;
    let request = screening("Searched the sanctions and adverse-media lists by legal name; no hits.");
    let (model, answers) = evaluator_for(&fake).evaluate(&request).await.unwrap();
    assert_eq!(
        model,
        FakeEvaluator::MODEL,
        "the model the response names, not the configured one"
    );
    assert_eq!(
        answers,
        [
            EvaluatorAnswer::YesNo { yes: 0.98 },
            EvaluatorAnswer::Choice {
                name: "decisive".into(),
                confidence: 0.95
            },
            EvaluatorAnswer::Rubric {
                level: 2,
                confidence: 0.95
            },
        ]
    );
    assert_eq!(
        results(&request.questions, &model, answers),
        [QuestionResult::Pass; 3]
    );
    assert_eq!(fake.requests(), 3, "one request per question");
    let received = fake.received();
    assert_eq!(received.len(), 3, "every request recorded");
    for received in received {
        assert_eq!(received.authorization, None, "no key configured, none sent");
        assert_eq!(received.body["model"], "judge-small");
        assert_eq!(received.body["max_tokens"], 1);
        assert_eq!(received.body["logprobs"], true);
    }
}

#[tokio::test]
async fn every_question_kind_fails_on_a_fail_marker() {
    let fake = FakeEvaluator::spawn().await;
    let request = screening("Cleared. [check:fail]");
    let (model, answers) = evaluator_for(&fake).evaluate(&request).await.unwrap();
    assert_eq!(
        answers,
        [
            EvaluatorAnswer::YesNo { yes: 0.02 },
            EvaluatorAnswer::Choice {
                name: "vague".into(),
                confidence: 0.95
            },
            EvaluatorAnswer::Rubric {
                level: 0,
                confidence: 0.95
            },
        ]
    );
    assert_eq!(
        results(&request.questions, &model, answers),
        [QuestionResult::Fail; 3]
    );
}

#[tokio::test]
async fn every_question_kind_is_unsure_on_an_unsure_marker() {
    let fake = FakeEvaluator::spawn().await;
    let request = screening("Probably cleared. [check:unsure]");
    let (model, answers) = evaluator_for(&fake).evaluate(&request).await.unwrap();
    assert_eq!(
        answers,
        [
            EvaluatorAnswer::YesNo { yes: 0.7 },
            EvaluatorAnswer::Choice {
                name: "decisive".into(),
                confidence: 0.3
            },
            EvaluatorAnswer::Rubric {
                level: 2,
                confidence: 0.3
            },
        ]
    );
    assert_eq!(
        results(&request.questions, &model, answers),
        [QuestionResult::Unsure; 3]
    );
}

#[tokio::test]
async fn a_server_error_is_an_evaluator_error_for_every_question_kind() {
    let fake = FakeEvaluator::spawn().await;
    let evaluator = evaluator_for(&fake);
    for question in partner_questions() {
        let mut request = screening("[check:error]");
        request.questions = vec![question.clone()];
        let error = evaluator.evaluate(&request).await.unwrap_err();
        assert!(error.contains("HTTP 500"), "{error}");
        assert!(error.contains("The server had an error"), "{error}");
        assert!(error.contains(question.ask()), "names the question: {error}");
    }
}

#[tokio::test]
async fn an_answer_without_logprobs_or_that_is_not_json_is_an_error() {
    let fake = FakeEvaluator::spawn().await;
    let evaluator = evaluator_for(&fake);
    let error = evaluator
        .evaluate(&screening("[check:no-logprobs]"))
        .await
        .unwrap_err();
    assert!(error.contains("without logprobs"), "{error}");
    let error = evaluator
        .evaluate(&screening("[check:garbage]"))
        .await
        .unwrap_err();
    assert!(error.contains("not a chat completion"), "{error}");
}

#[tokio::test]
async fn the_api_key_goes_as_a_bearer_token() {
    let fake = FakeEvaluator::spawn_with(Some("sk-test-1")).await;
    let error = evaluator_for(&fake)
        .evaluate(&screening("fine"))
        .await
        .unwrap_err();
    assert!(error.contains("HTTP 401"), "{error}");
    assert!(error.contains("Incorrect API key"), "{error}");
    let mut config = EvaluatorConfig::new(&fake.base_url, "judge-small");
    config.api_key = Some("sk-test-1".into());
    let evaluator = OpenAiEvaluator::new(&config).unwrap();
    let before = fake.received().len();
    let (_, answers) = evaluator.evaluate(&screening("fine")).await.unwrap();
    assert_eq!(answers.len(), 3);
    let received = fake.received();
    let keyed = &received[before..];
    assert_eq!(keyed.len(), 3, "one request per question");
    for received in keyed {
        assert_eq!(received.authorization.as_deref(), Some("Bearer sk-test-1"));
    }
}

#[tokio::test]
async fn an_evaluator_that_does_not_answer_in_time_is_an_error() {
    let fake = FakeEvaluator::spawn().await;
    let mut config = EvaluatorConfig::new(&fake.base_url, "judge-small");
    config.timeout_seconds = 1;
    let evaluator = OpenAiEvaluator::new(&config).unwrap();
    let started = std::time::Instant::now();
    let error = evaluator.evaluate(&screening("[check:slow]")).await.unwrap_err();
    assert!(error.contains("no answer within 1s"), "{error}");
    assert!(started.elapsed() < FakeEvaluator::SLOW);
}

#[tokio::test]
async fn an_evaluator_nobody_listens_at_is_an_error() {
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let evaluator = OpenAiEvaluator::new(&EvaluatorConfig::new(url, "judge-small")).unwrap();
    let error = evaluator.evaluate(&screening("fine")).await.unwrap_err();
    assert!(error.contains("request failed"), "{error}");
}

#[test]
fn the_fake_runs_on_a_thread_of_its_own_for_tests_without_a_runtime() {
    let fake = FakeEvaluator::spawn_on_thread(None);
    let evaluator = evaluator_for(&fake);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (model, answers) = runtime.block_on(evaluator.evaluate(&screening("fine"))).unwrap();
    assert_eq!(model, FakeEvaluator::MODEL);
    assert_eq!(answers[0], EvaluatorAnswer::YesNo { yes: 0.98 });
    assert_eq!(fake.requests(), 3);
}

// ---------------------------------------------------------------- through the runtime

const ORG: &str = "acme";

fn screener() -> Caller {
    Caller {
        organization: ORG.into(),
        kind: CallerKind::Agent {
            id: "screener".into(),
        },
        operator: false,
    }
}

fn ok(outcome: ToolOutcome) -> Value {
    match outcome {
        ToolOutcome::Ok(data) => data,
        ToolOutcome::Refused(refusal) => panic!("refused: {refusal}"),
    }
}

/// A runtime over an in-memory store whose checks are answered by `fake` over HTTP, with the
/// `partner-screening` example published.
async fn partner_screening_runtime(fake: &FakeEvaluator, blobs: &std::path::Path) -> Runtime {
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::in_memory(EmbeddedOptions::default()));
    let config = RuntimeConfig {
        evaluator: Some(Arc::new(evaluator_for(fake))),
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(
        store,
        Arc::new(LocalBlobs::new(blobs)),
        config,
        Clock::starting_at(START),
    );
    let source = std::fs::read(agentprocess_testkit::example("partner-screening")).unwrap();
    let roles = [("partnerships-manager".to_owned(), "g_partnerships".to_owned())]
        .into_iter()
        .collect();
    runtime
        .publish(&OrgId::from(ORG), &source, roles)
        .await
        .expect("publishes");
    runtime
}

/// Starts a run, claims its screening step and submits a screening whose summary is `summary`.
async fn screen(runtime: &Runtime, summary: &str, key: &str) -> ToolOutcome {
    let caller = screener();
    let execute = |write: Write, request: String| async move {
        runtime
            .execute(&screener(), write, &request)
            .await
            .expect("no infrastructure error")
    };
    let started = ok(execute(
        Write::StartRun {
            process: "partner-screening".into(),
            version: None,
            inputs: json!({ "partnerName": "Acme", "dealSize": 48000 }),
            mode: runtime::Mode::Live,
        },
        format!("start-{key}"),
    )
    .await);
    let run = started["run"]["id"].as_str().unwrap().to_owned();
    let report = ok(runtime
        .upload(
            &caller,
            Upload {
                file_name: "report.pdf".into(),
                content_type: "application/pdf".into(),
                bytes: b"Sanctions: no matches. Adverse media: no matches.".to_vec(),
            },
            &format!("upload-{key}"),
        )
        .await
        .unwrap());
    let claimed = ok(execute(
        Write::Claim {
            run_id: RunId::from(run),
            step: StepId::from_wire("screen_partner"),
        },
        format!("claim-{key}"),
    )
    .await);
    let submission = runtime::Submission {
        output: Some(object(json!({ "cleared": true, "summary": summary }))),
        evidence: vec![runtime::EvidenceItem {
            kind: "file".into(),
            reference: report["id"].as_str().unwrap().into(),
        }],
        summary: Some(summary.into()),
        next: Some("partner_approval".into()),
        reason: Some("Partner is cleared.".into()),
    };
    execute(
        Write::Submit {
            token: claimed["token"].as_str().unwrap().into(),
            submission,
        },
        format!("submit-{key}"),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_3_a_passing_screening_completes_the_step_with_the_verdict_in_run_data() {
    let fake = FakeEvaluator::spawn().await;
    let blobs = tempfile::tempdir().unwrap();
    let runtime = partner_screening_runtime(&fake, blobs.path()).await;
    let view = ok(screen(
        &runtime,
        "Searched both watch lists by legal name; no hits.",
        "pass",
    )
    .await);
    assert_eq!(step_state(&view, "screen_partner"), "done");
    assert_eq!(step_state(&view, "partner_approval"), "waiting");
    let check = &view["data"]["steps"]["screen_partner"]["check"];
    assert_eq!(check["verdict"], "pass");
    assert_eq!(check["model"], FakeEvaluator::MODEL);
    assert_eq!(check["questions"][0]["answer"], 0.98);
    assert_eq!(check["questions"][1]["answer"], "decisive");
    assert_eq!(check["questions"][2]["answer"], 2);
    assert_matches_schema("check-verdict.json", check);
    assert_eq!(fake.requests(), 3);
    let asked = &fake.received()[0].body["messages"][1]["content"];
    let shown: Value = serde_json::from_str(asked.as_str().unwrap()).unwrap();
    assert_eq!(shown["step"], "screen_partner");
    assert!(
        shown["instructions"]
            .as_str()
            .unwrap()
            .contains("sanctions list and the adverse-media list")
    );
    assert!(
        shown["process"]
            .as_str()
            .unwrap()
            .contains("Business development starts this for every prospective partner")
    );
    assert_eq!(shown["runData"]["inputs"]["partnerName"], "Acme");
    assert_eq!(shown["submission"]["output"]["cleared"], true);
    assert_eq!(shown["submission"]["evidence"][0]["kind"], "file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_3_a_failing_screening_is_not_accepted_with_one_issue_per_failed_question() {
    let fake = FakeEvaluator::spawn().await;
    let blobs = tempfile::tempdir().unwrap();
    let runtime = partner_screening_runtime(&fake, blobs.path()).await;
    let ToolOutcome::Refused(refusal) = screen(&runtime, "Cleared, I think. [check:fail]", "fail").await
    else {
        panic!("a failing check is refused");
    };
    assert_eq!(refusal.code, ErrorCode::NotAccepted);
    assert_eq!(
        refusal.issues,
        [
            format!("check: {Q_CLEARED} → no (0.02)"),
            format!("check: {Q_SUMMARY} → vague (0.95)"),
            format!("check: {Q_SCREENING} → level 0: No list is clearly searched. (0.95)"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_3_an_unsure_screening_is_held_and_escalated() {
    let fake = FakeEvaluator::spawn().await;
    let blobs = tempfile::tempdir().unwrap();
    let runtime = partner_screening_runtime(&fake, blobs.path()).await;
    let view = ok(screen(&runtime, "Mostly cleared. [check:unsure]", "unsure").await);
    assert_eq!(step_state(&view, "screen_partner"), "waiting");
    assert_eq!(
        step_state(&view, "partner_approval"),
        Value::Null,
        "approval has not started"
    );
    let check = &view["data"]["steps"]["screen_partner"]["check"];
    assert_eq!(check["verdict"], "unsure");
    let results: Vec<&Value> = check["questions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| &q["result"])
        .collect();
    assert_eq!(results, [&json!("unsure"); 3]);
    assert_matches_schema("check-verdict.json", check);
    let escalation = view["workItems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["stepId"] == "screen_partner" && item["escalation"].is_object())
        .map(|item| item["escalation"].clone())
        .expect("an escalation work item");
    assert_eq!(&escalation["check"], check);
    assert_eq!(
        escalation["candidate"]["output"]["summary"],
        "Mostly cleared. [check:unsure]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_3_an_evaluator_error_is_retry_and_changes_nothing() {
    let fake = FakeEvaluator::spawn().await;
    let blobs = tempfile::tempdir().unwrap();
    let runtime = partner_screening_runtime(&fake, blobs.path()).await;
    let ToolOutcome::Refused(refusal) = screen(&runtime, "Cleared. [check:error]", "error").await else {
        panic!("an evaluator error is refused");
    };
    assert_eq!(refusal.code, ErrorCode::Retry);
    assert!(
        refusal.issues.is_empty(),
        "no check verdict: {:?}",
        refusal.issues
    );
}
