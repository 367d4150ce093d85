//! The agent loop of spec §3.3 and §6.2–§6.3: start, claim, renew, submit, lease expiry and
//! tokens.

mod common;

use agentprocess_ids::StepId;
use agentprocess_process::{EvidenceKind, FieldType, PersonRef};
use agentprocess_run_actor::machine::{
    Command, Effect, ErrorCode, Mode, Notification, Refusal, StepState, Submission, token,
};
use common::*;
use serde_json::json;

fn started() -> World {
    let mut world = World::new(supplier_onboarding());
    world
        .start(mira(), json!({ "vendorName": "Acme", "amount": 48000 }))
        .expect("starts");
    world
}

#[test]
fn spec_3_2_start_makes_the_first_step_ready() {
    let mut world = World::new(supplier_onboarding());
    let transition = world
        .start(mira(), json!({ "vendorName": "Acme", "amount": 48000 }))
        .unwrap();
    let view = transition.reply.data();
    assert_eq!(view["run"]["state"], "active");
    assert_eq!(view["run"]["startedBy"], "mira@acme.example");
    assert_eq!(view["run"]["startedAt"], "2026-10-06T09:00:00Z");
    assert_eq!(view["run"]["version"], 3);
    assert_eq!(view["steps"][0]["state"], "ready");
    assert_eq!(view["steps"][1]["state"], json!(null));
    assert_eq!(
        view["data"],
        json!({ "inputs": { "vendorName": "Acme", "amount": 48000 }, "steps": {} })
    );
    assert!(transition.effects.is_empty(), "an agent step notifies no one");
    let ready: Vec<_> = transition
        .state
        .steps
        .iter()
        .filter(|s| s.state == Some(StepState::Ready))
        .collect();
    assert_eq!(ready.len(), 1, "only the first step is ready");
    assert_eq!(ready[0].id, "check_vendor");
    assert_eq!(
        ready[0].ready_since.map(|t| t.to_rfc3339()).as_deref(),
        Some("2026-10-06T09:00:00Z")
    );
    assert_eq!(ready[0].due_at, None);
    assert!(ready[0].timers.is_empty(), "no due clock runs");
    let item = agentprocess_run_actor::machine::render::agent_work_item(
        world.run(),
        &StepId::from_wire("check_vendor"),
    )
    .unwrap();
    assert_eq!(item["claim"]["arguments"]["stepId"], "check_vendor");
    assert_eq!(item["readySince"], "2026-10-06T09:00:00Z");
    assert_eq!(item["handoff"], json!(null));
}

#[test]
fn spec_4_3_numbers_are_kept_exactly_as_sent() {
    let mut world = World::new(supplier_onboarding());
    let inputs: serde_json::Value =
        serde_json::from_str(r#"{ "vendorName": "Acme", "amount": 48000.10000000000000000001 }"#).unwrap();
    world.start(mira(), inputs).unwrap();
    let view = serde_json::to_string(&world.view()["data"]["inputs"]).unwrap();
    assert!(view.contains("48000.10000000000000000001"), "{view}");
}

#[test]
fn spec_3_4_a_step_assigned_to_initiator_is_refused_when_an_agent_starts() {
    let process = pinned(
        "expenses",
        fields(&[]),
        vec![
            task_step(
                "receipts",
                PersonRef::Initiator,
                work("Attach receipts.", &[], &[], None),
                None,
            ),
            finish_step("done", "paid"),
        ],
    );
    let mut world = World::new(process.clone());
    let (code, issues) = refused(world.start(agent("a_bot"), json!({})));
    assert_eq!(code, ErrorCode::Invalid);
    assert_eq!(issues.len(), 1);
    assert!(issues[0].starts_with("steps[0].person:"), "{issues:?}");

    let mut world = World::new(process);
    let view = world.start(mira(), json!({})).unwrap().reply.data().clone();
    assert_eq!(
        view["workItems"][0]["assignedTo"],
        json!({ "person": "mira@acme.example" })
    );
    assert_eq!(view["run"]["state"], "waiting");
}

#[test]
fn spec_6_3_the_run_data_cap_bounds_inputs_at_start() {
    let mut world = World::new(supplier_onboarding());
    world.limits.run_data_bytes = 64;
    let (code, issues) = refused(world.start(mira(), json!({ "vendorName": "A".repeat(100), "amount": 1 })));
    assert_eq!(code, ErrorCode::Invalid);
    assert!(issues[0].starts_with("inputs: run data would be"), "{issues:?}");
    assert!(world.run.is_none());
}

#[test]
fn spec_3_3_test_mode_is_marked_everywhere_and_sends_no_notifications() {
    let mut world = World::new(supplier_onboarding());
    world
        .start_mode(mira(), json!({ "vendorName": "Acme", "amount": 1 }), Mode::Test)
        .unwrap();
    let item = agentprocess_run_actor::machine::render::agent_work_item(
        world.run(),
        &StepId::from_wire("check_vendor"),
    )
    .unwrap();
    assert_eq!(item["mode"], "test");
    let claim = world.claim(agent("a_screener"), "check_vendor").unwrap();
    assert_eq!(claim.reply.data()["mode"], "test");
    let token = claim.reply.data()["token"].as_str().unwrap().to_string();
    let submitted = world
        .submit(agent("a_screener"), &token, screening("approve"))
        .unwrap();
    assert_eq!(submitted.reply.data()["workItems"][0]["mode"], "test");
    assert!(!submitted.effects.iter().any(|e| matches!(e, Effect::Notify(_))));
    world.advance(3 * 86_400);
    world.fire_due_timers();
    assert_eq!(
        world.view()["steps"][1]["overdue"],
        true,
        "due still marks overdue in test runs"
    );
    assert!(
        !world
            .last
            .as_ref()
            .unwrap()
            .effects
            .iter()
            .any(|e| matches!(e, Effect::Notify(_)))
    );
}

#[test]
fn tools_claim_returns_token_step_body_data_and_handoff() {
    let mut world = started();
    let transition = world.claim(agent("a_screener"), "check_vendor").unwrap();
    let data = transition.reply.data();
    assert_eq!(data["expiresAt"], "2026-10-06T09:10:00Z");
    assert_eq!(data["step"]["id"], "check_vendor");
    assert_eq!(
        data["step"]["output"],
        json!({ "cleared": "boolean", "summary": "string" })
    );
    assert_eq!(data["step"]["evidence"], json!(["file"]));
    assert_eq!(
        data["step"]["next"][1],
        json!({ "to": "decline", "when": "Any sanctions hit" })
    );
    assert_eq!(data["handoff"], json!(null));
    assert_eq!(data["body"], world.process.body.as_str());
    assert_eq!(world.step_state("check_vendor"), "claimed");
    let run_step = transition.state.step(&StepId::from_wire("check_vendor")).unwrap();
    assert_eq!(run_step.state, Some(StepState::Claimed), "no longer ready");
    let claim = run_step.claim.as_ref().expect("a claim lease is granted");
    assert_eq!(claim.lease, 1);
    assert_eq!(claim.holder, "a_screener");
    assert_eq!(claim.expires_at.to_rfc3339(), "2026-10-06T09:10:00Z");
}

#[test]
fn tools_claim_errors() {
    let mut world = started();
    world.claim(agent("a_screener"), "check_vendor").unwrap();
    let (code, issues) = refused(world.claim(agent("a_screener"), "check_vendor"));
    assert_eq!(
        (code, issues),
        (ErrorCode::Conflict, vec!["claimed_by_you".to_string()])
    );
    let (code, issues) = refused(world.claim(agent("a_other"), "check_vendor"));
    assert_eq!(
        (code, issues),
        (ErrorCode::Conflict, vec!["claimed_by_other".to_string()])
    );
    let (code, issues) = refused(world.claim(agent("a_other"), "done"));
    assert_eq!(code, ErrorCode::Forbidden, "a finish is not an agent step");
    assert!(issues.is_empty());
    assert_eq!(
        issues_code(world.claim(agent("a_other"), "nope")),
        ErrorCode::NotFound
    );
    assert_eq!(
        issues_code(world.claim(mira(), "check_vendor")),
        ErrorCode::Forbidden
    );

    let process = pinned(
        "two",
        fields(&[]),
        vec![
            agent_step("one", work("One.", &[], &[], None), None),
            agent_step("two", work("Two.", &[], &[], None), None),
            finish_step("done", "done"),
        ],
    );
    let mut world = World::new(process);
    world.start(mira(), json!({})).unwrap();
    let (code, issues) = refused(world.claim(agent("a"), "two"));
    assert_eq!(
        (code, issues),
        (ErrorCode::Conflict, vec!["not_ready".to_string()])
    );
}

fn issues_code(result: Result<agentprocess_run_actor::machine::Transition, Refusal>) -> ErrorCode {
    result.expect_err("refused").code
}

#[test]
fn spec_6_2_tokens_are_opaque_hashed_and_never_in_a_run_view() {
    let mut world = started();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    assert_eq!(token::run_id(&token), Some(world.run().id.as_str()));
    let secret = token.rsplit('.').next().unwrap();
    let stored = serde_json::to_string(world.run()).unwrap();
    assert!(!stored.contains(secret), "the state keeps only the hash");
    let view = world.view().to_string();
    assert!(!view.contains(secret), "a run view never carries a token");

    let (code, _) = refused(world.submit(agent("a_screener"), "garbage", screening("approve")));
    assert_eq!(code, ErrorCode::Invalid);
    let forged = format!("apt1.{}.{}", world.run().id, "ab".repeat(32));
    assert_eq!(
        refused(world.submit(agent("a_screener"), &forged, screening("approve"))).0,
        ErrorCode::Invalid
    );
    let other_run = token.replacen(world.run().id.as_str(), "r_other", 1);
    assert_eq!(
        refused(world.submit(agent("a_screener"), &other_run, screening("approve"))).0,
        ErrorCode::Invalid
    );
    assert_eq!(
        refused(world.submit(agent("a_thief"), &token, screening("approve"))).0,
        ErrorCode::Forbidden
    );
}

#[test]
fn spec_3_3_renew_rotates_the_token_and_keeps_progress() {
    let mut world = started();
    let old = world.claim_token(agent("a_screener"), "check_vendor");
    world.advance(300);
    let renewed = world
        .apply(Command::Renew {
            caller: agent("a_screener"),
            token: old.clone(),
            progress: Some("OFAC done".into()),
        })
        .unwrap();
    assert_eq!(renewed.reply.data()["expiresAt"], "2026-10-06T09:15:00Z");
    let new = renewed.reply.data()["token"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    let claim = renewed
        .state
        .step(&StepId::from_wire("check_vendor"))
        .unwrap()
        .claim
        .as_ref()
        .expect("the claim is still held");
    assert_eq!(claim.lease, 1, "the same lease is extended");
    assert_eq!(claim.expires_at.to_rfc3339(), "2026-10-06T09:15:00Z");
    assert_eq!(
        refused(world.submit(agent("a_screener"), &old, screening("approve"))).0,
        ErrorCode::Stale
    );
    // A renew without progress keeps the last note.
    let again = world
        .apply(Command::Renew {
            caller: agent("a_screener"),
            token: new,
            progress: None,
        })
        .unwrap();
    let newest = again.reply.data()["token"].as_str().unwrap().to_string();
    assert_eq!(
        world
            .run()
            .step(&StepId::from_wire("check_vendor"))
            .unwrap()
            .claim
            .as_ref()
            .unwrap()
            .progress
            .as_deref(),
        Some("OFAC done")
    );
    world.advance(601);
    let (code, _) = refused(world.apply(Command::Renew {
        caller: agent("a_screener"),
        token: newest,
        progress: None,
    }));
    assert_eq!(code, ErrorCode::Stale, "after the lease ended");
}

#[test]
fn spec_3_3_an_expired_lease_hands_the_last_progress_note_to_the_next_claim() {
    let mut world = started();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    world
        .apply(Command::Renew {
            caller: agent("a_screener"),
            token,
            progress: Some("OFAC list checked, EU list next".into()),
        })
        .unwrap();
    world.advance(599);
    let before = world.run().clone();
    let early = world
        .apply(Command::ClaimExpired {
            step: StepId::from_wire("check_vendor"),
            lease: 1,
        })
        .unwrap();
    assert!(early.effects.is_empty());
    assert_eq!(early.state, before, "a lease that has not lapsed is not expired");
    world.advance(2);
    let expired = world
        .apply(Command::ClaimExpired {
            step: StepId::from_wire("check_vendor"),
            lease: 1,
        })
        .unwrap();
    let run_step = expired.state.step(&StepId::from_wire("check_vendor")).unwrap();
    assert_eq!(run_step.state, Some(StepState::Ready));
    assert_eq!(run_step.claim, None, "the lease is gone");
    assert_eq!(
        run_step.ready_since.map(|t| t.to_rfc3339()).as_deref(),
        Some("2026-10-06T09:00:00Z"),
        "the same attempt keeps its place in the queue"
    );
    assert_eq!(world.step_state("check_vendor"), "ready");
    let item = agentprocess_run_actor::machine::render::agent_work_item(
        world.run(),
        &StepId::from_wire("check_vendor"),
    )
    .unwrap();
    assert_eq!(
        item["handoff"],
        json!({ "progress": "OFAC list checked, EU list next" })
    );
    let claim = world.claim(agent("a_second"), "check_vendor").unwrap();
    assert_eq!(
        claim.reply.data()["handoff"],
        json!({ "progress": "OFAC list checked, EU list next" })
    );
}

#[test]
fn spec_3_3_a_lapsed_lease_is_claimable_at_once_even_before_the_expiry_arrives() {
    let mut world = started();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    world.advance(600);
    let claim = world.claim(agent("a_second"), "check_vendor").unwrap();
    let held = claim
        .state
        .step(&StepId::from_wire("check_vendor"))
        .unwrap()
        .claim
        .as_ref()
        .expect("the step is claimed again");
    assert_eq!(
        (held.holder.as_str(), held.lease),
        ("a_second", 2),
        "the lapsed lease 1 is gone, a new lease holds the step"
    );
    assert_eq!(
        refused(world.submit(agent("a_screener"), &token, screening("approve"))).0,
        ErrorCode::Stale
    );
}

/// Spec §4.3 and §6 rule 2 (`stale` for a token whose lease ended): the refusal names the claim
/// (its token's generation) and step, says when the lease ran out (RFC 3339) and to read the work
/// again and claim the step again; the same whether the expiry was noticed at the call, by the
/// lease timer, or by another agent's claim.
#[test]
fn spec_4_3_an_expired_claims_token_is_stale_with_the_claim_its_expiry_and_what_to_do() {
    let expected = "claim 1 on step check_vendor (the generation in your token) expired at \
                    2026-10-06T09:10:00Z: its lease ran out before this call; call `get_work` or \
                    `get_run`, then claim the step again with `claim`";
    let message = |result: Result<_, Refusal>| {
        let refusal = result.expect_err("refused");
        assert_eq!(refusal.code, ErrorCode::Stale);
        refusal.message
    };

    // Noticed at the call: the claim is still recorded, its lease over.
    let mut world = started();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    world.advance(600);
    assert_eq!(
        message(world.submit(agent("a_screener"), &token, screening("approve"))),
        expected
    );

    // Noticed by the lease timer first, a minute late.
    world.advance(60);
    world
        .apply(Command::ClaimExpired {
            step: StepId::from_wire("check_vendor"),
            lease: 1,
        })
        .unwrap();
    let renew = |world: &mut World| {
        world.apply(Command::Renew {
            caller: agent("a_screener"),
            token: token.clone(),
            progress: None,
        })
    };
    assert_eq!(message(renew(&mut world)), expected);

    // Noticed by another agent's claim, which replaces the lapsed one.
    let mut world = started();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    world.advance(700);
    world.claim_token(agent("a_second"), "check_vendor");
    assert_eq!(
        message(world.submit(agent("a_screener"), &token, screening("approve"))),
        expected
    );
}

#[test]
fn spec_6_3_a_submission_gets_every_issue_at_once() {
    let mut world = started();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    let (code, issues) = refused(world.submit(
        agent("a_screener"),
        &token,
        Submission {
            output: Some(obj(json!({ "cleared": true, "summary": "ok" }))),
            evidence: vec![link("https://example.com/report")],
            summary: None,
            next: None,
            reason: Some("  ".into()),
        },
    ));
    assert_eq!(code, ErrorCode::NotAccepted);
    assert_eq!(
        issues,
        vec![
            "evidence: file required",
            "summary: missing",
            "next: required, one of approve, decline",
            "reason: required",
        ]
    );
    assert_eq!(world.step_state("check_vendor"), "claimed", "the claim stands");
}

#[test]
fn spec_3_2_next_on_a_step_whose_next_is_not_a_list_is_not_accepted() {
    let process = pinned(
        "single",
        fields(&[]),
        vec![
            agent_step("one", work("One.", &[], &[], None), None),
            finish_step("done", "done"),
        ],
    );
    let mut world = World::new(process);
    world.start(mira(), json!({})).unwrap();
    let token = world.claim_token(agent("a"), "one");
    let (code, issues) = refused(world.submit(
        agent("a"),
        &token,
        Submission {
            output: None,
            evidence: vec![],
            summary: Some("Did it.".into()),
            next: Some("done".into()),
            reason: Some("because".into()),
        },
    ));
    assert_eq!(code, ErrorCode::NotAccepted);
    assert_eq!(issues.len(), 2, "{issues:?}");
    assert!(issues[0].starts_with("next: not allowed"));
    assert!(issues[1].starts_with("reason: not allowed"));
}

#[test]
fn tools_submit_summary_is_1_to_2000_characters() {
    let mut world = started();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    let mut submission = screening("approve");
    submission.summary = Some("x".repeat(2001));
    let (code, issues) = refused(world.submit(agent("a_screener"), &token, submission));
    assert_eq!(code, ErrorCode::NotAccepted);
    assert_eq!(issues, vec!["summary: must be 1–2000 characters"]);
    let mut submission = screening("approve");
    submission.summary = Some("é".repeat(2000));
    world
        .submit(agent("a_screener"), &token, submission)
        .expect("2000 characters is fine");
}

/// The machine's side of spec §5: file evidence is taken only when the upload lookup verifies
/// it, and recorded with the SHA-256 the lookup reports. (The lookup here is a table; hashing the
/// stored bytes is checked over a real store by the runtime test
/// `spec_5_file_evidence_is_verified_and_recorded_with_its_hash`.)
#[test]
fn spec_5_file_evidence_is_taken_only_verified_and_recorded_with_the_hash_looked_up() {
    let mut world = started();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    let mut submission = screening("approve");
    submission.evidence = vec![file("f_000"), file("f_bad")];
    let (code, issues) = refused(world.submit(agent("a_screener"), &token, submission));
    assert_eq!(code, ErrorCode::NotAccepted);
    assert_eq!(
        issues,
        [
            "evidence f_000: not found",
            "evidence f_bad: stored bytes no longer match the upload's hash"
        ]
    );

    let mut submission = screening("approve");
    submission.evidence = vec![file("f_91a"), link("DOC-7")];
    world.submit(agent("a_screener"), &token, submission).unwrap();
    let evidence = &world.view()["data"]["steps"]["check_vendor"]["evidence"];
    assert_eq!(
        evidence,
        &json!([{ "kind": "file", "ref": "f_91a", "sha256": "4f1c".repeat(16) }, { "kind": "link", "ref": "DOC-7" }])
    );
}

#[test]
fn spec_6_3_the_run_data_cap_bounds_submissions() {
    let mut world = started();
    world.limits.run_data_bytes = 300;
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    let mut submission = screening("approve");
    submission.summary = Some("x".repeat(400));
    let (code, issues) = refused(world.submit(agent("a_screener"), &token, submission));
    assert_eq!(code, ErrorCode::NotAccepted);
    assert!(issues[0].starts_with("output: run data would be"), "{issues:?}");
}

#[test]
fn spec_3_3_issues_of_a_refused_submission_travel_in_the_handoff() {
    let mut world = started();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    let mut submission = screening("approve");
    submission.summary = None;
    let refusal = world.submit(agent("a_screener"), &token, submission).unwrap_err();
    let remembered = refusal.remember.expect("the issues are remembered");
    assert_eq!(
        agentprocess_run_actor::machine::render::run_data(&remembered),
        agentprocess_run_actor::machine::render::run_data(world.run()),
        "run data is unchanged"
    );
    world.run = Some(*remembered);
    world.advance(600);
    let claim = world.claim(agent("a_second"), "check_vendor").unwrap();
    assert_eq!(
        claim.reply.data()["handoff"],
        json!({ "issues": ["summary: missing"] })
    );
}

#[test]
fn spec_3_2_an_accepted_submission_records_everything_and_follows_the_chosen_route() {
    let mut world = started();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    world.advance(252);
    let transition = world
        .submit(agent("a_screener"), &token, screening("approve"))
        .unwrap();
    let view = transition.reply.data();
    let record = &view["data"]["steps"]["check_vendor"];
    assert_eq!(record["next"], "approve");
    assert_eq!(record["reason"], "Vendor is cleared.");
    assert_eq!(record["by"], "a_screener");
    assert_eq!(record["at"], "2026-10-06T09:04:12Z");
    assert_eq!(record["history"], json!([]));
    assert_eq!(view["run"]["state"], "waiting");
    assert_eq!(view["steps"][0]["state"], "done");
    assert_eq!(
        view["steps"][1],
        json!({ "id": "approve", "kind": "approve", "state": "waiting", "due": "2026-10-08T09:04:12Z", "overdue": false })
    );
    let item = &view["workItems"][0];
    assert_eq!(item["assignedTo"], json!({ "group": "g_finance" }));
    assert_eq!(
        item["decide"]["decisions"],
        json!(["approved", "rejected", "failed"])
    );
    assert_eq!(item["decide"]["arguments"]["snapshot"], item["snapshot"]);
    assert_eq!(item["output"], json!(null));
    assert_eq!(item["due"], "2026-10-08T09:04:12Z");
    assert!(
        transition
            .effects
            .iter()
            .any(|e| matches!(e, Effect::Notify(Notification::WorkOpened { .. })))
    );
    assert_eq!(
        transition
            .state
            .step(&StepId::from_wire("check_vendor"))
            .unwrap()
            .claim,
        None,
        "the claim lease is revoked"
    );
    assert_eq!(
        refused(world.submit(agent("a_screener"), &token, screening("approve"))).0,
        ErrorCode::Stale
    );

    let mut world = started();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    let mut submission = screening("decline");
    submission.output = Some(obj(json!({ "cleared": false, "summary": "Hit." })));
    let view = world
        .submit(agent("a_screener"), &token, submission)
        .unwrap()
        .reply
        .data()
        .clone();
    assert_eq!(view["run"]["state"], "ended");
    assert_eq!(view["run"]["outcome"], "declined");
    assert_eq!(
        view["run"]["ended"],
        json!({ "by": "server", "at": "2026-10-06T09:00:00Z", "note": null })
    );
    assert_eq!(view["steps"][2]["state"], "done");
    assert_eq!(view["steps"][1]["state"], json!(null));
}

#[test]
fn spec_3_3_escalate_hands_the_step_to_a_person() {
    let mut world = started();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    let transition = world
        .apply(Command::Escalate {
            caller: agent("a_screener"),
            token: token.clone(),
            note: "The EU list is down.".into(),
        })
        .unwrap();
    let view = transition.reply.data();
    assert_eq!(view["steps"][0]["state"], "waiting");
    assert_eq!(view["run"]["state"], "waiting");
    let item = &view["workItems"][0];
    assert_eq!(item["kind"], "agent");
    assert_eq!(item["assignedTo"], json!({ "group": OPERATORS }));
    assert_eq!(
        item["escalation"],
        json!({ "note": "The EU list is down.", "by": "a_screener", "at": "2026-10-06T09:00:00Z" })
    );
    assert_eq!(
        item["decide"]["decisions"],
        json!(["returned", "completed", "failed"])
    );
    assert_eq!(item["evidence"], json!(["file"]));
    assert!(
        transition
            .effects
            .iter()
            .any(|e| matches!(e, Effect::Notify(Notification::Escalated { .. })))
    );
    assert_eq!(
        refused(world.submit(agent("a_screener"), &token, screening("approve"))).0,
        ErrorCode::Stale
    );
    let _ = (EvidenceKind::File, FieldType::String);
}

#[test]
fn spec_4_3_old_tokens_are_stale_and_made_up_ones_invalid_even_on_an_issued_generation() {
    let mut world = World::new(supplier_onboarding());
    world
        .start(mira(), json!({ "vendorName": "Acme", "amount": 48000 }))
        .unwrap();
    let mut token = world.claim_token(agent("a_screener"), "check_vendor");
    let first = token.clone();
    for _ in 0..20 {
        let renewed = world
            .apply(Command::Renew {
                caller: agent("a_screener"),
                token: token.clone(),
                progress: None,
            })
            .unwrap();
        token = renewed.reply.data()["token"].as_str().unwrap().to_string();
    }
    assert_eq!(
        world.run().replaced_tokens.len(),
        20,
        "eight bytes are kept per replaced token"
    );
    let renew = |world: &mut World, token: &str| {
        world
            .apply(Command::Renew {
                caller: agent("a_screener"),
                token: token.to_string(),
                progress: None,
            })
            .unwrap_err()
            .code
    };
    assert_eq!(renew(&mut world, &first), ErrorCode::Stale, "an old token");
    let parsed = token::take_apart(&token).unwrap();
    let run = world.run().id.clone();
    let forged = |generation: u64| format!("apt1.{run}.{generation}.{}", "ab".repeat(32));
    assert_eq!(
        renew(&mut world, &forged(1)),
        ErrorCode::Invalid,
        "a made-up secret on a generation the run issued and replaced"
    );
    assert_eq!(
        renew(&mut world, &forged(parsed.generation)),
        ErrorCode::Invalid,
        "the current generation verifies only with its secret"
    );
    assert_eq!(
        renew(&mut world, &forged(parsed.generation + 1)),
        ErrorCode::Invalid,
        "a generation never issued"
    );
    assert_eq!(renew(&mut world, &forged(0)), ErrorCode::Invalid);
    assert_eq!(
        renew(&mut world, &format!("apt1.r_other.1.{}", "ab".repeat(32))),
        ErrorCode::Invalid,
        "another run's token"
    );
    // The current token still works; once submitted it is stale, and run end forgets them all.
    world
        .submit(agent("a_screener"), &token, screening("approve"))
        .unwrap();
    assert_eq!(
        renew(&mut world, &token),
        ErrorCode::Stale,
        "a submitted claim's token"
    );
}
