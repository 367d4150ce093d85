//! `agentprocess serve` end to end over MCP: six of our examples imported and published with the CLI,
//! walked to their finish by agent and person identities, through routes with reasons, refused
//! submissions, rejections, escalations, lease expiry, idempotent replays, due dates, operator
//! cancellation, test mode and `list_runs` (spec §3, §4, tools.md).
//!
//! The walks themselves are in `walks/core.rs`, shared with `cluster_walks`.

mod common;
#[path = "walks/core.rs"]
mod core_walks;

use common::Server;

#[tokio::test(flavor = "multi_thread")]
async fn defect_triage_routes_by_reason_refused_route_changes_nothing_and_overdue_task_stays_open() {
    let data = tempfile::tempdir().unwrap();
    core_walks::defect_triage_routes_by_reason_refused_route_changes_nothing_and_overdue_task_stays_open(
        &Server::start(data.path(), &[]),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn policy_update_rejection_rewinds_both_reviews_into_history_then_publishes() {
    let data = tempfile::tempdir().unwrap();
    core_walks::policy_update_rejection_rewinds_both_reviews_into_history_then_publishes(&Server::start(
        data.path(),
        &[],
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn training_request_replays_lost_responses_and_lists_runs_by_filter() {
    let data = tempfile::tempdir().unwrap();
    core_walks::training_request_replays_lost_responses_and_lists_runs_by_filter(&Server::start(
        data.path(),
        &[],
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn contractor_setup_in_test_mode_hands_progress_over_an_expired_lease_and_reworks_a_rejection() {
    let data = tempfile::tempdir().unwrap();
    core_walks::contractor_setup_in_test_mode_hands_progress_over_an_expired_lease_and_reworks_a_rejection(
        &Server::start(data.path(), &[]),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn release_notes_reworks_a_rejected_draft_waits_for_release_time_and_gets_an_escalation_returned() {
    let data = tempfile::tempdir().unwrap();
    core_walks::release_notes_reworks_a_rejected_draft_waits_for_release_time_and_gets_an_escalation_returned(&Server::start(data.path(), &[])).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn account_closure_escalations_complete_and_fail_and_an_operator_cancels() {
    let data = tempfile::tempdir().unwrap();
    core_walks::account_closure_escalations_complete_and_fail_and_an_operator_cancels(&Server::start(
        data.path(),
        &[],
    ))
    .await;
}
