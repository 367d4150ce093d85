//! The trust report (`GET /admin/v1/trust`) against `agentprocess serve` with the fake
//! evaluator: a scripted set of runs of an advisory check before an approval (check-1 §4 "earn
//! trust first"), driven over MCP, reported with the agreements, disagreements and unsure
//! verdicts the script made; the same after the ended runs moved to the archive; and the
//! refusals (not an operator, no such process, a bad limit).

mod common;

use agentprocess_testkit::fake_evaluator::FakeEvaluator;
use common::checked::{SCREENED_PAYMENT, ScriptedVerdicts, script_verdicts};
use common::{Server, Who, archived_runs, status_and_json};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const ARCHIVE_AFTER_SECONDS: u64 = 60;

async fn trust(server: &Server, token: &str, query: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .get(format!("{}/admin/v1/trust{query}", server.url))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    status_and_json(response).await
}

fn counts(report: &Value) -> Value {
    assert_eq!(report["steps"].as_array().map(Vec::len), Some(1), "{report}");
    report["steps"][0]["counts"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_trust_report_pairs_each_advisory_verdict_with_the_approvers_later_decision() {
    let evaluator = FakeEvaluator::spawn_on_thread(None);
    let data = tempfile::tempdir().unwrap();
    let archive_after = ARCHIVE_AFTER_SECONDS.to_string();
    let server = Server::start_with_env(
        data.path(),
        &[],
        &[
            ("AGENTPROCESS_EVALUATOR__URL", evaluator.base_url.as_str()),
            ("AGENTPROCESS_EVALUATOR__MODEL", "fake"),
            (
                "AGENTPROCESS_ARCHIVE_ENDED_RUNS_AFTER_SECONDS",
                archive_after.as_str(),
            ),
        ],
    );
    let source = data.path().join("screened-payment.md");
    std::fs::write(&source, SCREENED_PAYMENT).unwrap();
    let (code, out, err) = server.import(&source, &[("approvers", "approvers")], true);
    assert_eq!(code, 0, "{out}\n{err}");

    let agent = server.client(&Who::Agent("screener")).await;
    let approver = server
        .client(&Who::Person("boss@acme.test", &["approvers"]))
        .await;
    let operator = server.token(&Who::Operator("ops@acme.test", &["ops"]));

    let ScriptedVerdicts {
        rejected_pass,
        approved_fail,
        ..
    } = script_verdicts(&agent, &approver).await;

    let expected = json!({ "agreed": 3, "disagreed": 2, "unsure": 1, "error": 0, "undecided": 1 });
    let (status, report) = trust(&server, &operator, "?process=screened-payment").await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["process"], "screened-payment");
    assert_eq!(report["runs"], 6);
    assert_eq!(report["truncated"], false);
    assert_eq!(counts(&report), expected);
    let row = &report["steps"][0];
    assert_eq!(
        (
            row["version"].as_u64(),
            row["step"].as_str(),
            row["advisory"].as_bool()
        ),
        (Some(1), Some("screen"), Some(true))
    );
    assert_eq!(row["agreement"].as_f64(), Some(0.6));
    let disagreements = row["disagreements"].as_array().unwrap();
    let mut listed: Vec<(&str, &str, &str)> = disagreements
        .iter()
        .map(|d| {
            (
                d["runId"].as_str().unwrap(),
                d["verdict"].as_str().unwrap(),
                d["decision"].as_str().unwrap(),
            )
        })
        .collect();
    listed.sort();
    let mut wanted = vec![
        (rejected_pass.as_str(), "pass", "rejected"),
        (approved_fail.as_str(), "fail", "approved"),
    ];
    wanted.sort();
    assert_eq!(listed, wanted);
    let with_note = disagreements
        .iter()
        .find(|d| d["runId"] == rejected_pass.as_str())
        .unwrap();
    assert_eq!(with_note["note"], "the amount is over the limit");
    assert_eq!(with_note["decidedBy"], "boss@acme.test");
    assert_eq!(with_note["approvalStep"], "sign_off");

    // A limit reads the first runs only, and says so.
    let (status, first_two) = trust(&server, &operator, "?process=screened-payment&limit=2").await;
    assert_eq!(status, 200, "{first_two}");
    assert_eq!(first_two["runs"], 2);
    assert_eq!(first_two["truncated"], true);

    // The ended runs move to the archive; the report reads them there alike.
    server.advance(ARCHIVE_AFTER_SECONDS + 1).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    // P-1, P-2, P-4 and P-5 ended; P-3 and P-6 are still open.
    while archived_runs(data.path()) < 4 {
        assert!(
            Instant::now() < deadline,
            "the 4 ended runs were not archived within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, after) = trust(&server, &operator, "?process=screened-payment").await;
    assert_eq!(status, 200, "{after}");
    assert_eq!(after["runs"], 6);
    assert_eq!(counts(&after), expected);

    // Refusals: a person without operator rights, a process that does not exist, a bad limit.
    let person = server.token(&Who::Person("boss@acme.test", &["approvers"]));
    let (status, body) = trust(&server, &person, "?process=screened-payment").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("forbidden")),
        "{body}"
    );
    let (status, body) = trust(&server, &operator, "?process=no-such-process").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );
    for query in [
        "?process=screened-payment&limit=0",
        "?process=screened-payment&limit=x",
        "",
        "?process=screened-payment&since=1",
    ] {
        let (status, body) = trust(&server, &operator, query).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("invalid")),
            "{query}: {body}"
        );
    }
    agent.close().await;
    approver.close().await;
}
