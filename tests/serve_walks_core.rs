//! `agentprocess serve` end to end over MCP: six fixtures imported and published with the CLI,
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
async fn support_escalation_routes_by_reason_refused_route_changes_nothing_and_overdue_task_stays_open() {
    let data = tempfile::tempdir().unwrap();
    core_walks::support_escalation_routes_by_reason_refused_route_changes_nothing_and_overdue_task_stays_open(&Server::start(data.path(), &[])).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn contract_review_rejection_rewinds_both_reviews_into_history_then_signs() {
    let data = tempfile::tempdir().unwrap();
    core_walks::contract_review_rejection_rewinds_both_reviews_into_history_then_signs(&Server::start(
        data.path(),
        &[],
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn expense_reimbursement_replays_lost_responses_and_lists_runs_by_filter() {
    let data = tempfile::tempdir().unwrap();
    core_walks::expense_reimbursement_replays_lost_responses_and_lists_runs_by_filter(&Server::start(
        data.path(),
        &[],
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn employee_onboarding_in_test_mode_hands_progress_over_an_expired_lease_and_reworks_a_rejection() {
    let data = tempfile::tempdir().unwrap();
    core_walks::employee_onboarding_in_test_mode_hands_progress_over_an_expired_lease_and_reworks_a_rejection(&Server::start(data.path(), &[])).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn blog_publication_reworks_a_rejected_draft_waits_for_publish_time_and_gets_an_escalation_returned() {
    let data = tempfile::tempdir().unwrap();
    core_walks::blog_publication_reworks_a_rejected_draft_waits_for_publish_time_and_gets_an_escalation_returned(&Server::start(data.path(), &[])).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn customer_offboarding_escalations_complete_and_fail_and_an_operator_cancels() {
    let data = tempfile::tempdir().unwrap();
    core_walks::customer_offboarding_escalations_complete_and_fail_and_an_operator_cancels(&Server::start(
        data.path(),
        &[],
    ))
    .await;
}
