//! `agentprocess serve` end to end over MCP on the examples that go beyond one straight line:
//! approval tiers and rejections, rework through `on_reject`, fork and join (parallel-1), model
//! checks (check-1) against a fake evaluator, uploaded files as evidence, held events, `wait_for`
//! timeouts and `wait_until`, and organizations kept apart.
//!
//! The walks themselves are in `walks/advanced.rs`, shared with `cluster_walks`.

#[path = "walks/advanced.rs"]
mod advanced_walks;
mod common;

use advanced_walks::{SCREENER, upload};
use agentprocess_run_actor::machine::Limits;
use agentprocess_testkit::assert_matches_schema;
use agentprocess_testkit::fake_evaluator::FakeEvaluator;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::{Server, Who, request_id};
use serde_json::json;

/// `serve` with the fake evaluator, and escalations reaching the escalation desk.
fn start_with_evaluator(data: &std::path::Path, evaluator: &FakeEvaluator) -> Server {
    Server::start_with_env(
        data,
        &[],
        &[
            ("AGENTPROCESS_EVALUATOR__URL", evaluator.base_url.as_str()),
            ("AGENTPROCESS_EVALUATOR__MODEL", "fake"),
            // Escalations reach this group's members as well as every operator.
            ("AGENTPROCESS_ESCALATION_GROUP", "escalation-desk"),
        ],
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn purchase_request_tiers_route_to_budget_and_executive_and_each_approval_records() {
    let data = tempfile::tempdir().unwrap();
    advanced_walks::purchase_request_tiers_route_to_budget_and_executive_and_each_approval_records(
        &Server::start(data.path(), &[]),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn purchase_request_rejected_by_the_executive_ends_the_run_rejected() {
    let data = tempfile::tempdir().unwrap();
    advanced_walks::purchase_request_rejected_by_the_executive_ends_the_run_rejected(&Server::start(
        data.path(),
        &[],
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn audit_remediation_rejected_report_is_reworked_then_follow_up_finishes() {
    let data = tempfile::tempdir().unwrap();
    advanced_walks::audit_remediation_rejected_report_is_reworked_then_follow_up_finishes(&Server::start(
        data.path(),
        &[],
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn product_launch_forks_three_branches_joins_after_all_and_reruns_on_rejection() {
    let data = tempfile::tempdir().unwrap();
    advanced_walks::product_launch_forks_three_branches_joins_after_all_and_reruns_on_rejection(
        &Server::start(data.path(), &[]),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn service_restoration_runs_the_leads_in_sequence_to_the_finish() {
    let data = tempfile::tempdir().unwrap();
    advanced_walks::service_restoration_runs_the_leads_in_sequence_to_the_finish(&Server::start(
        data.path(),
        &[],
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn venue_booking_offers_are_uploaded_files_with_urls_and_stay_in_their_organization() {
    let data = tempfile::tempdir().unwrap();
    advanced_walks::venue_booking_offers_are_uploaded_files_with_urls_and_stay_in_their_organization(
        &Server::start(data.path(), &[]),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn check_3_the_unsure_verdict_stays_when_a_person_completes_with_their_own_output() {
    let evaluator = FakeEvaluator::spawn_on_thread(None);
    let data = tempfile::tempdir().unwrap();
    advanced_walks::check_3_the_unsure_verdict_stays_when_a_person_completes_with_their_own_output(
        &start_with_evaluator(data.path(), &evaluator),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn partner_screening_pass_is_recorded_and_the_partner_is_accepted() {
    let evaluator = FakeEvaluator::spawn_on_thread(None);
    let data = tempfile::tempdir().unwrap();
    advanced_walks::partner_screening_pass_is_recorded_and_the_partner_is_accepted(&start_with_evaluator(
        data.path(),
        &evaluator,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn partner_screening_fail_is_refused_and_handed_to_the_next_attempt() {
    let evaluator = FakeEvaluator::spawn_on_thread(None);
    let data = tempfile::tempdir().unwrap();
    advanced_walks::partner_screening_fail_is_refused_and_handed_to_the_next_attempt(&start_with_evaluator(
        data.path(),
        &evaluator,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn partner_screening_unsure_escalates_with_the_candidate_and_an_error_asks_for_retry() {
    let evaluator = FakeEvaluator::spawn_on_thread(None);
    let data = tempfile::tempdir().unwrap();
    advanced_walks::partner_screening_unsure_escalates_with_the_candidate_and_an_error_asks_for_retry(
        &start_with_evaluator(data.path(), &evaluator),
        &evaluator,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn events_are_held_oldest_first_waits_time_out_and_wait_until_holds_to_its_date() {
    let data = tempfile::tempdir().unwrap();
    advanced_walks::events_are_held_oldest_first_waits_time_out_and_wait_until_holds_to_its_date(
        &Server::start(data.path(), &[]),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_branches_are_claimed_by_different_agents_and_rework_stays_in_its_branch() {
    let data = tempfile::tempdir().unwrap();
    advanced_walks::agent_branches_are_claimed_by_different_agents_and_rework_stays_in_its_branch(
        &Server::start(data.path(), &[]),
    )
    .await;
}

// ----------------------------------------------------------------------------------------------
// Serve only: these start servers of their own settings (a small upload limit, no evaluator, a
// strict check limit), which the one shared cluster of `cluster_walks` cannot also be.

/// Spec §3.7: `describe.maxUploadBytes` is the configured limit; a file of exactly that size is
/// taken and one byte more is refused as `invalid`.
#[tokio::test(flavor = "multi_thread")]
async fn an_upload_over_max_upload_bytes_is_refused_as_invalid() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        data.path(),
        &[],
        &[("AGENTPROCESS_LIMITS__MAX_UPLOAD_BYTES", "1024")],
    );
    let agent = server.client(&Who::Agent("a_files")).await;
    let describe = agent.ok("describe", json!({})).await;
    assert_eq!(describe["maxUploadBytes"], 1024, "{describe}");
    let fits = upload(&agent, "fits.bin", "application/octet-stream", &[7u8; 1024]).await;
    assert_eq!(fits["bytes"], 1024);
    let refused = agent
        .refused(
            "upload",
            json!({ "fileName": "big.bin", "contentType": "application/octet-stream",
                    "contentBase64": BASE64.encode([7u8; 1025]), "requestId": request_id() }),
            "invalid",
        )
        .await;
    assert!(
        refused["message"].as_str().unwrap().contains("maxUploadBytes"),
        "{refused}"
    );
}

/// check-1 §1/§5: `check-1` is listed only while an evaluator is configured, and a server without
/// one refuses a process with `check:` at publication.
#[tokio::test(flavor = "multi_thread")]
async fn check_profile_is_offered_only_with_an_evaluator() {
    let plain_data = tempfile::tempdir().unwrap();
    let plain = Server::start(plain_data.path(), &[]);
    let agent = plain.client(&SCREENER).await;
    let describe = agent.ok("describe", json!({})).await;
    assert!(
        !describe["profiles"]
            .as_array()
            .unwrap()
            .contains(&json!("check-1")),
        "{describe}"
    );
    let path = agentprocess_testkit::example("partner-screening");
    let (code, out, err) = plain.import(&path, &[("partnerships-manager", "partnerships-manager")], true);
    assert_ne!(code, 0, "published without an evaluator:\n{out}\n{err}");

    let evaluator = FakeEvaluator::spawn_on_thread(None);
    let data = tempfile::tempdir().unwrap();
    let server = start_with_evaluator(data.path(), &evaluator);
    let agent = server.client(&SCREENER).await;
    let describe = agent.ok("describe", json!({})).await;
    assert!(
        describe["profiles"]
            .as_array()
            .unwrap()
            .contains(&json!("check-1")),
        "{describe}"
    );
    server.publish_example("partner-screening");
}

/// check-1 §5: `describe` carries the check limits: the server's defaults (the runtime's), or
/// what the operator configured.
#[tokio::test(flavor = "multi_thread")]
async fn check_5_describe_carries_the_check_limits_with_the_server_defaults() {
    let evaluator = FakeEvaluator::spawn_on_thread(None);
    let data = tempfile::tempdir().unwrap();
    let server = start_with_evaluator(data.path(), &evaluator);
    let agent = server.client(&SCREENER).await;
    let describe = agent.ok("describe", json!({})).await;
    assert_matches_schema("tools/describe.result.json", &describe);
    assert_eq!(
        describe["limits"],
        json!({ "runDataBytes": 524288, "checkPass": 0.9, "checkFail": null,
                "checkConfidence": 0.8, "checkStateBytes": 65536 }),
        "{describe}"
    );
    assert_eq!(describe["limits"], Limits::default().to_json());
    agent.close().await;

    let strict_data = tempfile::tempdir().unwrap();
    let strict = Server::start_with_env(
        strict_data.path(),
        &[],
        &[
            ("AGENTPROCESS_EVALUATOR__URL", evaluator.base_url.as_str()),
            ("AGENTPROCESS_EVALUATOR__MODEL", "fake"),
            ("AGENTPROCESS_LIMITS__CHECK_FAIL", "0.4"),
        ],
    );
    let agent = strict.client(&SCREENER).await;
    let describe = agent.ok("describe", json!({})).await;
    assert_matches_schema("tools/describe.result.json", &describe);
    assert_eq!(describe["limits"]["checkFail"], 0.4, "{describe}");
    assert_eq!(describe["limits"]["checkPass"], 0.9, "{describe}");
}
