//! The example walks of `serve_walks_core` and `serve_walks_advanced`, through a cluster: one
//! cluster on loopback (3 etcd members, 3 actor hosts, 2 schedulers, 2 gateways), started once,
//! with every walk in an organization of its own and its clients taking turns between the two
//! gateways. The roles follow the cluster's shared test clock (`testing.clock_control`), so the
//! walks that move the clock (due dates, lease expiry, waits) move every process at once; the
//! partner-screening walks use the fake evaluator every role is given. One walk (release-notes)
//! needs `serve`'s default escalation target, which the shared cluster's settings replace; it
//! runs on a second cluster of those defaults, started after the first is gone.
//!
//! Left to `serve` (they need servers of other settings than the one shared cluster's): the upload
//! limit, a server without an evaluator, and a strict check limit (`serve_walks_advanced`).

#[path = "walks/advanced.rs"]
mod advanced_walks;
mod cluster_support;
mod common;
#[path = "walks/core.rs"]
mod core_walks;

use agentprocess_store::keys::Keys;
use agentprocess_store::{RangeRequest, Store};
use agentprocess_testkit::fake_evaluator::FakeEvaluator;
use cluster_support::{Cluster, ClusterOrg, Shape};
use common::{Deployment, Who, status_and_json};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// Settings every role of the walks' cluster gets: clock control, the fake evaluator (check-1),
/// and escalations reaching the escalation desk, as `serve_walks_advanced` starts `serve`.
fn walk_settings(evaluator: &FakeEvaluator) -> Vec<(String, String)> {
    [
        ("AGENTPROCESS_TESTING__CLOCK_CONTROL", "true"),
        ("AGENTPROCESS_EVALUATOR__URL", evaluator.base_url.as_str()),
        ("AGENTPROCESS_EVALUATOR__MODEL", "fake"),
        ("AGENTPROCESS_ESCALATION_GROUP", "escalation-desk"),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect()
}

/// Runs one walk in its own organization of the shared cluster, in a task of its own so that a
/// failing walk is reported and the next one still runs; the walk's name when it failed.
macro_rules! walk {
    ($failed:ident, $cluster:ident, $organization:literal, $walk:path $(, $evaluator:ident)?) => {{
        let deployment = ClusterOrg::new($cluster.clone(), $organization);
        $(let $evaluator = $evaluator.clone();)?
        let name = stringify!($walk);
        let started = Instant::now();
        let outcome = tokio::spawn(async move {
            $walk(&deployment $(, &$evaluator)?).await;
        })
        .await;
        match outcome {
            Ok(()) => eprintln!("walked through the cluster in {:?}: {name}", started.elapsed()),
            Err(error) => {
                eprintln!("FAILED through the cluster: {name}: {error}");
                $failed.push(name);
            }
        }
    }};
}

/// Every example walk that `serve` runs, through one cluster: the same calls, the same
/// assertions, every tool result checked against the schemas by `Mcp`.
#[tokio::test(flavor = "multi_thread")]
async fn every_example_walk_passes_through_one_cluster_with_a_shared_test_clock() {
    let evaluator = Arc::new(FakeEvaluator::spawn_on_thread(None));
    let shape = Shape {
        env: walk_settings(&evaluator),
        ..Shape::default()
    };
    let cluster = Arc::new(Cluster::start(shape).await);
    let mut failed: Vec<&str> = Vec::new();

    // The shared clock: a move through one gateway shows on the other, and every role (3 actor
    // hosts, 2 schedulers, 2 gateways) has applied it before the move is answered.
    let clock = ClusterOrg::new(cluster.clone(), "clock");
    // A settled cluster has a scheduler leading; the standby may still be starting, and only a
    // role that has joined the clock is waited for. So the move waits until all seven have.
    let keys = Keys::new("default");
    let joined_by = Instant::now() + std::time::Duration::from_secs(60);
    let clock_acks = async || {
        cluster
            .store
            .range(RangeRequest::new(keys.test_clock_acks()))
            .await
            .unwrap()
            .kvs
    };
    loop {
        let acks = clock_acks().await;
        if acks.len() == 7 {
            break;
        }
        assert!(
            Instant::now() < joined_by,
            "every role joins the test clock within a minute: {} of 7 did",
            acks.len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let before = clock.advance(0).await;
    let moved = clock.advance(3600).await;
    let after = clock.advance(0).await;
    assert!(
        moved.as_millis() - before.as_millis() >= 3_600_000,
        "{before:?} then {moved:?}"
    );
    assert!(after.as_millis() >= moved.as_millis(), "{moved:?} then {after:?}");
    let applied: Vec<String> = clock_acks()
        .await
        .iter()
        .map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
        .collect();
    assert_eq!(applied, vec!["3600"; 7], "one acknowledgement per role");
    // As `serve`: operators only, a whole number of seconds; neither refusal moves the clock.
    let http = reqwest::Client::new();
    for gateway in 0..2 {
        let url = format!("{}/admin/v1/clock", cluster.gateway_url(gateway));
        let person = clock.token(&Who::Person("clerk@acme.test", &["staff"]));
        let response = http
            .post(&url)
            .bearer_auth(person)
            .json(&json!({ "advanceSeconds": 60 }))
            .send()
            .await
            .unwrap();
        let (status, body) = status_and_json(response).await;
        assert_eq!(status, 403, "{body}");
        let operator = clock.token(&Who::Operator("ops@acme.test", &["ops"]));
        let response = http
            .post(&url)
            .bearer_auth(operator)
            .json(&json!({ "advanceSeconds": -5 }))
            .send()
            .await
            .unwrap();
        let (status, body) = status_and_json(response).await;
        assert_eq!(status, 400, "{body}");
    }
    let (total, _) = cluster.store.get(&keys.test_clock()).await.unwrap();
    assert_eq!(total.unwrap().value, b"3600");

    walk!(
        failed,
        cluster,
        "defect-triage",
        core_walks::defect_triage_routes_by_reason_refused_route_changes_nothing_and_overdue_task_stays_open
    );
    walk!(
        failed,
        cluster,
        "policy-update",
        core_walks::policy_update_rejection_rewinds_both_reviews_into_history_then_publishes
    );
    walk!(
        failed,
        cluster,
        "training-request",
        core_walks::training_request_replays_lost_responses_and_lists_runs_by_filter
    );
    walk!(failed, cluster, "contractor-setup", core_walks::contractor_setup_in_test_mode_hands_progress_over_an_expired_lease_and_reworks_a_rejection);
    walk!(
        failed,
        cluster,
        "account-closure",
        core_walks::account_closure_escalations_complete_and_fail_and_an_operator_cancels
    );
    walk!(
        failed,
        cluster,
        "purchase-tiers",
        advanced_walks::purchase_request_tiers_route_to_budget_and_executive_and_each_approval_records
    );
    walk!(
        failed,
        cluster,
        "purchase-rejected",
        advanced_walks::purchase_request_rejected_by_the_executive_ends_the_run_rejected
    );
    walk!(
        failed,
        cluster,
        "audit-remediation",
        advanced_walks::audit_remediation_rejected_report_is_reworked_then_follow_up_finishes
    );
    walk!(
        failed,
        cluster,
        "product-launch",
        advanced_walks::product_launch_forks_three_branches_joins_after_all_and_reruns_on_rejection
    );
    walk!(
        failed,
        cluster,
        "service-restoration",
        advanced_walks::service_restoration_runs_the_leads_in_sequence_to_the_finish
    );
    walk!(
        failed,
        cluster,
        "venue-booking",
        advanced_walks::venue_booking_offers_are_uploaded_files_with_urls_and_stay_in_their_organization
    );
    walk!(
        failed,
        cluster,
        "partner-screening-3",
        advanced_walks::check_3_the_unsure_verdict_stays_when_a_person_completes_with_their_own_output
    );
    walk!(
        failed,
        cluster,
        "partner-screening-pass",
        advanced_walks::partner_screening_pass_is_recorded_and_the_partner_is_accepted
    );
    walk!(
        failed,
        cluster,
        "partner-screening-fail",
        advanced_walks::partner_screening_fail_is_refused_and_handed_to_the_next_attempt
    );
    walk!(
        failed,
        cluster,
        "partner-screening-unsure",
        advanced_walks::partner_screening_unsure_escalates_with_the_candidate_and_an_error_asks_for_retry,
        evaluator
    );
    walk!(
        failed,
        cluster,
        "launch-review",
        advanced_walks::agent_branches_are_claimed_by_different_agents_and_rework_stays_in_its_branch
    );
    // Last: it moves the clock a year on.
    walk!(
        failed,
        cluster,
        "payment-watch",
        advanced_walks::events_are_held_oldest_first_waits_time_out_and_wait_until_holds_to_its_date
    );

    let logs = cluster.logs();
    // The clusters of this binary start one at a time: this one must be gone, not merely unused,
    // before the next starts.
    drop(clock);
    let cluster =
        Arc::try_unwrap(cluster).unwrap_or_else(|_| panic!("something still holds the walks' cluster"));
    drop(cluster);

    // release-notes asserts that an escalation goes to the operators, as `serve` sends it by
    // default, where the cluster above sends escalations to the escalation desk (as the
    // partner-screening walks need, like their `serve`): it gets a cluster of `serve`'s defaults.
    let cluster = Arc::new(
        Cluster::start(Shape {
            env: vec![(
                "AGENTPROCESS_TESTING__CLOCK_CONTROL".to_owned(),
                "true".to_owned(),
            )],
            ..Shape::default()
        })
        .await,
    );
    walk!(failed, cluster, "release-notes", core_walks::release_notes_reworks_a_rejected_draft_waits_for_release_time_and_gets_an_escalation_returned);

    assert!(
        failed.is_empty(),
        "{} walks failed through the cluster: {failed:?}\n{logs}\n{}",
        failed.len(),
        cluster.logs()
    );
}
