//! `check-1` through the runtime: a submission on a checked step asks the evaluator (retrying
//! once) and is applied again with its outcome.

mod runtime_support;

use agentprocess_run_actor::machine::{EvaluatorAnswer, EvaluatorQuestion, EvaluatorRequest};
use agentprocess_run_actor::runtime::{
    Clock, Evaluator, EvidenceItem, LocalBlobs, Runtime, RuntimeConfig, Submission, Upload, Write,
};
use async_trait::async_trait;
use runtime_support::*;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Fails its first call, then gives every question a passing answer.
#[derive(Debug, Default)]
struct FlakyButPassing {
    calls: AtomicUsize,
}

#[async_trait]
impl Evaluator for FlakyButPassing {
    async fn evaluate(&self, request: &EvaluatorRequest) -> Result<(String, Vec<EvaluatorAnswer>), String> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err("timed out".into());
        }
        let answers = request
            .questions
            .iter()
            .map(|question| match question {
                EvaluatorQuestion::YesNo { .. } => EvaluatorAnswer::YesNo { yes: 0.99 },
                EvaluatorQuestion::Choice { pass, .. } => EvaluatorAnswer::Choice {
                    name: pass[0].clone(),
                    confidence: 0.99,
                },
                EvaluatorQuestion::Rubric { levels, .. } => EvaluatorAnswer::Rubric {
                    level: levels.len() - 1,
                    confidence: 0.99,
                },
            })
            .collect();
        Ok(("test-model".into(), answers))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checked_submission_is_judged_by_the_evaluator_after_one_retry() {
    let dir = tempfile::tempdir().unwrap();
    let evaluator = Arc::new(FlakyButPassing::default());
    let config = RuntimeConfig {
        evaluator: Some(evaluator.clone()),
        ..RuntimeConfig::default()
    };
    let store = open_store(&dir.path().join("store")).await;
    let runtime = Runtime::new(
        store,
        Arc::new(LocalBlobs::new(dir.path().join("blobs"))),
        config,
        Clock::starting_at(START),
    );
    publish_example(&runtime, ORG, "partner-screening").await;
    let screener = agent("screener");
    let run = run_id(
        &start(
            &runtime,
            &screener,
            "partner-screening",
            json!({ "partnerName": "Acme", "dealSize": 48000 }),
            "s-1",
        )
        .await,
    );
    let report = ok(runtime
        .upload(
            &screener,
            Upload {
                file_name: "report.pdf".into(),
                content_type: "application/pdf".into(),
                bytes: b"no matches".to_vec(),
            },
            "f-1",
        )
        .await
        .unwrap());
    let claimed = ok(claim(&runtime, &screener, &run, "screen_partner", "c-1").await);
    let submission = Submission {
        output: Some(object(
            json!({ "cleared": true, "summary": "Cleared on the sanctions and adverse-media lists." }),
        )),
        evidence: vec![EvidenceItem {
            kind: "file".into(),
            reference: report["id"].as_str().unwrap().into(),
        }],
        summary: Some("Searched both lists by legal name; no hits.".into()),
        next: Some("partner_approval".into()),
        reason: Some("Partner is cleared.".into()),
    };
    let view = ok(runtime
        .execute(
            &screener,
            Write::Submit {
                token: claimed["token"].as_str().unwrap().into(),
                submission,
            },
            "u-1",
        )
        .await
        .unwrap());
    assert_eq!(
        evaluator.calls.load(Ordering::SeqCst),
        2,
        "one failure, one retry"
    );
    assert_eq!(step_state(&view, "screen_partner"), "done");
    assert_eq!(step_state(&view, "partner_approval"), "waiting");
}
