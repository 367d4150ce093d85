//! People (spec §3.4), rework through `on_reject` (§3.1), states and run end (§3.5).

mod common;

use agentprocess_ids::StepId;
use agentprocess_process::{EvidenceKind, FieldType, PersonRef};
use agentprocess_run_actor::machine::{
    Command, Decision, Effect, ErrorCode, Notification, StepState, TimerKind, render,
};
use common::*;
use serde_json::json;

/// Started and screened: the approval waits on finance.
fn at_approval() -> World {
    let mut world = World::new(supplier_onboarding());
    world
        .start(mira(), json!({ "vendorName": "Acme", "amount": 48000 }))
        .unwrap();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    world
        .submit(agent("a_screener"), &token, screening("approve"))
        .unwrap();
    world
}

fn escalated() -> (World, String) {
    let mut world = World::new(supplier_onboarding());
    world
        .start(mira(), json!({ "vendorName": "Acme", "amount": 48000 }))
        .unwrap();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    world
        .apply(Command::Escalate {
            caller: agent("a_screener"),
            token,
            note: "EU list is down.".into(),
        })
        .unwrap();
    let item = world.work_item_on("check_vendor");
    (world, item)
}

#[test]
fn spec_3_4_approved_continues_at_next() {
    let mut world = at_approval();
    let item = world.work_item_on("approve");
    world.advance(60);
    let view = world
        .decide(finance(), &item, Decision::Approved)
        .send()
        .unwrap()
        .reply
        .data()
        .clone();
    assert_eq!(view["run"]["state"], "ended");
    assert_eq!(view["run"]["outcome"], "onboarded");
    assert_eq!(
        view["data"]["steps"]["approve"],
        json!({ "decision": "approved", "by": "fin@acme.example", "at": "2026-10-06T09:01:00Z", "history": [] })
    );
    assert_eq!(view["workItems"], json!([]));
}

#[test]
fn spec_3_4_already_decided_is_checked_before_stale() {
    let mut world = at_approval();
    let item = world.work_item_on("approve");
    let old_snapshot = render::snapshot(world.run());
    world.decide(finance(), &item, Decision::Approved).send().unwrap();
    // The run ended with that approval; take a run that goes on to see already_decided.
    let (code, issues) = refused(
        world
            .decide(finance(), &item, Decision::Approved)
            .snapshot(&old_snapshot)
            .send(),
    );
    assert_eq!(
        (code, issues),
        (ErrorCode::Conflict, vec!["run_ended".to_string()])
    );

    let (mut world, item) = escalated();
    let old_snapshot = render::snapshot(world.run());
    world
        .decide(operator(), &item, Decision::Returned)
        .note("Try again, the list is back.")
        .send()
        .unwrap();
    let (code, issues) = refused(
        world
            .decide(operator(), &item, Decision::Returned)
            .note("Again.")
            .snapshot(&old_snapshot)
            .send(),
    );
    assert_eq!(
        (code, issues),
        (ErrorCode::Conflict, vec!["already_decided".to_string()])
    );
}

#[test]
fn tools_decide_errors_come_in_the_contract_order() {
    let mut world = at_approval();
    let item = world.work_item_on("approve");
    // not_found before stale.
    let (code, _) = refused(
        world
            .decide(finance(), "w_999", Decision::Approved)
            .snapshot("old")
            .send(),
    );
    assert_eq!(code, ErrorCode::NotFound);
    // stale before forbidden.
    let (code, _) = refused(
        world
            .decide(agent("a_bot"), &item, Decision::Approved)
            .snapshot("old")
            .send(),
    );
    assert_eq!(code, ErrorCode::Stale);
    // Agents can never decide; people outside the assignment neither.
    assert_eq!(
        refused(world.decide(agent("a_bot"), &item, Decision::Approved).send()).0,
        ErrorCode::Forbidden
    );
    assert_eq!(
        refused(world.decide(mira(), &item, Decision::Approved).send()).0,
        ErrorCode::Forbidden
    );
    // A decision this item does not take.
    assert_eq!(
        refused(world.decide(finance(), &item, Decision::Completed).send()).0,
        ErrorCode::Invalid
    );
    // run_ended before everything.
    world
        .apply(Command::Cancel {
            caller: operator(),
            reason: "Duplicate.".into(),
        })
        .unwrap();
    let (code, issues) = refused(
        world
            .decide(agent("a_bot"), "w_999", Decision::Approved)
            .snapshot("x")
            .send(),
    );
    assert_eq!(
        (code, issues),
        (ErrorCode::Conflict, vec!["run_ended".to_string()])
    );
}

#[test]
fn tools_decide_invalid_argument_combinations() {
    let mut world = at_approval();
    let item = world.work_item_on("approve");
    let (code, issues) = refused(
        world
            .decide(finance(), &item, Decision::Approved)
            .next("done", "why")
            .send(),
    );
    assert_eq!(code, ErrorCode::Invalid);
    assert_eq!(
        issues,
        vec![
            "next: not allowed with decision approved",
            "reason: not allowed with decision approved"
        ]
    );
    let (code, issues) = refused(world.decide(finance(), &item, Decision::Rejected).send());
    assert_eq!(
        (code, issues),
        (
            ErrorCode::Invalid,
            vec!["note: required with decision rejected".to_string()]
        )
    );
    let (code, _) = refused(
        world
            .decide(finance(), &item, Decision::Approved)
            .output(json!({}))
            .send(),
    );
    assert_eq!(code, ErrorCode::Invalid);

    let (mut world, item) = escalated();
    let (code, issues) = refused(
        world
            .decide(operator(), &item, Decision::Completed)
            .note("n")
            .send(),
    );
    assert_eq!(
        (code, issues),
        (
            ErrorCode::Invalid,
            vec!["note: not allowed with decision completed".to_string()]
        )
    );
    let (code, _) = refused(world.decide(operator(), &item, Decision::Failed).send());
    assert_eq!(code, ErrorCode::Invalid);
}

#[test]
fn spec_3_4_returned_makes_the_step_ready_with_the_note_and_keeps_due() {
    let process = pinned(
        "due",
        fields(&[]),
        vec![
            agent_step("one", work("One.", &[], &[], Some(hours(4))), None),
            finish_step("done", "done"),
        ],
    );
    let mut world = World::new(process);
    world.start(mira(), json!({})).unwrap();
    let due = world.view()["steps"][0]["due"].clone();
    assert_eq!(due, "2026-10-06T13:00:00Z");
    let token = world.claim_token(agent("a"), "one");
    world
        .apply(Command::Escalate {
            caller: agent("a"),
            token,
            note: "Stuck.".into(),
        })
        .unwrap();
    let item = world.work_item_on("one");
    let due_timers = world
        .run()
        .step(&StepId::from_wire("one"))
        .unwrap()
        .timers
        .clone();
    assert!(
        matches!(&due_timers[..], [t] if t.kind == TimerKind::Due && t.fire_at.to_rfc3339() == "2026-10-06T13:00:00Z"),
        "{due_timers:?}"
    );
    world.advance(600);
    let transition = world
        .decide(operator(), &item, Decision::Returned)
        .note("Use the backup list.")
        .send()
        .unwrap();
    let run_step = transition.state.step(&StepId::from_wire("one")).unwrap();
    assert_eq!(run_step.state, Some(StepState::Ready));
    assert_eq!(
        run_step.ready_since.map(|t| t.to_rfc3339()).as_deref(),
        Some("2026-10-06T09:00:00Z"),
        "the same attempt keeps its place in the queue"
    );
    assert_eq!(run_step.timers, due_timers, "due does not restart");
    assert_eq!(world.step_state("one"), "ready");
    assert_eq!(world.view()["steps"][0]["due"], due);
    let handoff = json!({ "returned": { "note": "Use the backup list.", "by": "ops@acme.example", "at": "2026-10-06T09:10:00Z" } });
    let item = render::agent_work_item(world.run(), &StepId::from_wire("one")).unwrap();
    assert_eq!(item["handoff"], handoff);
    let claim = world.claim(agent("b"), "one").unwrap();
    assert_eq!(claim.reply.data()["handoff"], handoff);
}

#[test]
fn spec_3_4_a_person_completes_an_escalated_step_under_the_same_acceptance() {
    let (mut world, item) = escalated();
    let (code, issues) = refused(
        world
            .decide(operator(), &item, Decision::Completed)
            .output(json!({ "cleared": true }))
            .send(),
    );
    assert_eq!(code, ErrorCode::NotAccepted);
    assert_eq!(
        issues,
        vec![
            "output.summary: missing",
            "evidence: file required",
            "next: required, one of approve, decline",
            "reason: required"
        ]
    );
    let view = world
        .decide(operator(), &item, Decision::Completed)
        .output(json!({ "cleared": true, "summary": "Checked by hand." }))
        .evidence(vec![file("f_91a")])
        .next("approve", "Cleared by hand.")
        .send()
        .unwrap()
        .reply
        .data()
        .clone();
    let record = &view["data"]["steps"]["check_vendor"];
    assert_eq!(record["by"], "ops@acme.example");
    assert!(record.get("summary").is_none(), "summary is optional from people");
    assert_eq!(view["steps"][1]["state"], "waiting");
}

#[test]
fn spec_3_5_failed_ends_the_run_and_marks_the_step() {
    let (mut world, item) = escalated();
    let view = world
        .decide(operator(), &item, Decision::Failed)
        .note("Vendor withdrew.")
        .send()
        .unwrap()
        .reply
        .data()
        .clone();
    assert_eq!(view["run"]["state"], "ended");
    assert_eq!(view["run"]["outcome"], "failed");
    assert_eq!(
        view["run"]["ended"],
        json!({ "by": "ops@acme.example", "at": "2026-10-06T09:00:00Z", "note": "Vendor withdrew." })
    );
    assert_eq!(view["steps"][0]["state"], "failed");
    assert_eq!(
        view["data"]["steps"]["check_vendor"],
        json!({ "decision": "failed", "note": "Vendor withdrew.", "by": "ops@acme.example", "at": "2026-10-06T09:00:00Z", "history": [] })
    );
}

#[test]
fn spec_3_1_rejection_into_on_reject_moves_later_steps_into_history() {
    let mut world = at_approval();
    let item = world.work_item_on("approve");
    world.advance(3600);
    let transition = world
        .decide(finance(), &item, Decision::Rejected)
        .note("Check the aliases too.")
        .send()
        .unwrap();
    let view = transition.reply.data();
    assert_eq!(view["steps"][0]["state"], "ready");
    assert_eq!(
        view["steps"][1]["state"],
        json!(null),
        "the rejecting approval is not reached"
    );
    assert_eq!(
        view["data"]["steps"]["approve"],
        json!({ "decision": "rejected", "note": "Check the aliases too.", "by": "fin@acme.example", "at": "2026-10-06T10:00:00Z", "history": [] })
    );
    // The returned-to step keeps its record until it completes again.
    assert_eq!(view["data"]["steps"]["check_vendor"]["by"], "a_screener");
    assert_eq!(view["workItems"], json!([]));

    world.advance(3600);
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    let view = world
        .submit(agent("a_screener"), &token, screening("approve"))
        .unwrap()
        .reply
        .data()
        .clone();
    let record = &view["data"]["steps"]["check_vendor"];
    assert_eq!(record["at"], "2026-10-06T11:00:00Z");
    assert_eq!(record["history"].as_array().unwrap().len(), 1);
    assert_eq!(record["history"][0]["at"], "2026-10-06T09:00:00Z");
    // The approval is waiting again with its rejection still current; due restarted.
    assert_eq!(view["steps"][1]["state"], "waiting");
    assert_eq!(view["steps"][1]["due"], "2026-10-08T11:00:00Z");
    assert_eq!(view["data"]["steps"]["approve"]["decision"], "rejected");

    let item = world.work_item_on("approve");
    let view = world
        .decide(finance(), &item, Decision::Approved)
        .send()
        .unwrap()
        .reply
        .data()
        .clone();
    let approval = &view["data"]["steps"]["approve"];
    assert_eq!(approval["decision"], "approved");
    assert_eq!(approval["history"][0]["decision"], "rejected");
    assert_eq!(approval["history"][0]["note"], "Check the aliases too.");
}

#[test]
fn spec_3_1_steps_between_the_returned_to_step_and_the_approval_are_rewound() {
    let process = pinned(
        "three",
        fields(&[]),
        vec![
            agent_step(
                "draft",
                work("Draft.", &[("text", FieldType::String)], &[], None),
                None,
            ),
            agent_step(
                "polish",
                work("Polish.", &[("text", FieldType::String)], &[], None),
                None,
            ),
            approve_step("review", "finance-approver", Some("draft"), None, to("done")),
            finish_step("done", "published"),
        ],
    );
    let mut world = World::new(process);
    world.start(mira(), json!({})).unwrap();
    for step in ["draft", "polish"] {
        let token = world.claim_token(agent("a"), step);
        world
            .submit(
                agent("a"),
                &token,
                agentprocess_run_actor::machine::Submission {
                    output: Some(obj(json!({ "text": step }))),
                    summary: Some("Done.".into()),
                    ..Default::default()
                },
            )
            .unwrap();
    }
    let item = world.work_item_on("review");
    let view = world
        .decide(finance(), &item, Decision::Rejected)
        .note("Too long.")
        .send()
        .unwrap()
        .reply
        .data()
        .clone();
    assert_eq!(view["steps"][0]["state"], "ready");
    assert_eq!(view["steps"][1]["state"], json!(null));
    let polish = &view["data"]["steps"]["polish"];
    assert_eq!(polish.get("output"), None, "no current value");
    assert_eq!(polish["history"][0]["output"], json!({ "text": "polish" }));
    assert_eq!(
        view["data"]["steps"]["draft"]["output"],
        json!({ "text": "draft" })
    );
}

#[test]
fn spec_3_2_rejection_without_on_reject_ends_the_run_rejected() {
    let process = pinned(
        "plain",
        fields(&[]),
        vec![
            approve_step("ok", "finance-approver", None, None, to("done")),
            finish_step("done", "done"),
        ],
    );
    let mut world = World::new(process);
    world.start(mira(), json!({})).unwrap();
    let item = world.work_item_on("ok");
    let transition = world
        .decide(finance(), &item, Decision::Rejected)
        .note("No budget.")
        .send()
        .unwrap();
    let view = transition.reply.data();
    assert_eq!(view["run"]["state"], "ended");
    assert_eq!(view["run"]["outcome"], "rejected");
    assert_eq!(view["run"]["ended"]["note"], "No budget.");
    assert_eq!(view["steps"][1]["state"], json!(null));
    assert!(
        transition
            .effects
            .iter()
            .any(|e| matches!(e, Effect::Notify(Notification::RunEnded { .. })))
    );
}

#[test]
fn spec_3_4_a_task_is_completed_with_output_and_routes() {
    let process = pinned(
        "triage",
        fields(&[("owner", FieldType::Person)]),
        vec![
            task_step(
                "triage",
                PersonRef::Path(agentprocess_process::DataPath::Input {
                    field: "owner".into(),
                }),
                work(
                    "Triage it.",
                    &[("severity", FieldType::String)],
                    &[EvidenceKind::Link],
                    None,
                ),
                routes(&[("fix", "A bug"), ("done", "Not a bug")]),
            ),
            agent_step("fix", work("Fix it.", &[], &[], None), to("done")),
            finish_step("done", "closed"),
        ],
    );
    let mut world = World::new(process);
    world
        .start(agent("a_intake"), json!({ "owner": "lee@acme.example" }))
        .unwrap();
    let item = world.work_item_on("triage");
    let work_item = &world.view()["workItems"][0];
    assert_eq!(work_item["assignedTo"], json!({ "person": "lee@acme.example" }));
    assert_eq!(work_item["decide"]["decisions"], json!(["completed", "failed"]));
    assert_eq!(
        work_item["next"],
        json!([{ "to": "fix", "when": "A bug" }, { "to": "done", "when": "Not a bug" }])
    );
    let lee = person("lee@acme.example", &[]);
    let view = world
        .decide(lee, &item, Decision::Completed)
        .output(json!({ "severity": "high" }))
        .evidence(vec![link("BUG-1")])
        .next("fix", "Reproduced.")
        .send()
        .unwrap()
        .reply
        .data()
        .clone();
    assert_eq!(view["steps"][1]["state"], "ready");
    assert_eq!(view["data"]["steps"]["triage"]["next"], "fix");
}

#[test]
fn spec_3_4_a_person_path_that_resolves_to_nothing_fails_the_run() {
    let process = pinned(
        "nobody",
        fields(&[]),
        vec![
            task_step(
                "act",
                PersonRef::Path(agentprocess_process::DataPath::Input {
                    field: "owner".into(),
                }),
                work("Act.", &[], &[], None),
                to("done"),
            ),
            finish_step("done", "done"),
        ],
    );
    let mut world = World::new(process);
    let view = world.start(mira(), json!({})).unwrap().reply.data().clone();
    assert_eq!(view["run"]["state"], "ended");
    assert_eq!(view["run"]["outcome"], "failed");
    assert_eq!(view["run"]["ended"]["by"], "server");
    assert_eq!(view["steps"][0]["state"], "failed");
    assert_eq!(view["steps"][1]["state"], json!(null));
    assert_eq!(
        view["data"]["steps"]["act"]["note"],
        "inputs.owner resolves to no person"
    );
    assert_eq!(view["data"]["steps"]["act"]["decision"], "failed");
}

#[test]
fn spec_3_5_cancel_ends_everything_and_later_writes_conflict() {
    let mut world = World::new(supplier_onboarding());
    world
        .start(mira(), json!({ "vendorName": "Acme", "amount": 1 }))
        .unwrap();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    assert_eq!(
        refused(world.apply(Command::Cancel {
            caller: mira(),
            reason: "Mine.".into()
        }))
        .0,
        ErrorCode::Forbidden
    );
    world.advance(30);
    let transition = world
        .apply(Command::Cancel {
            caller: operator(),
            reason: "Duplicate run.".into(),
        })
        .unwrap();
    let view = transition.reply.data();
    assert_eq!(view["run"]["state"], "cancelled");
    assert_eq!(view["run"]["outcome"], json!(null));
    assert_eq!(
        view["run"]["ended"],
        json!({ "by": "ops@acme.example", "at": "2026-10-06T09:00:30Z", "note": "Duplicate run." })
    );
    assert_eq!(view["steps"][0]["state"], "cancelled");
    assert_eq!(view["steps"][1]["state"], json!(null));
    assert_eq!(
        transition
            .state
            .step(&StepId::from_wire("check_vendor"))
            .unwrap()
            .claim,
        None,
        "the claim lease is revoked"
    );
    let run_ended = (ErrorCode::Conflict, vec!["run_ended".to_string()]);
    assert_eq!(
        refused(world.submit(agent("a_screener"), "garbage", screening("approve"))),
        run_ended
    );
    assert_eq!(
        refused(world.submit(agent("a_screener"), &token, screening("approve"))),
        run_ended
    );
    assert_eq!(refused(world.claim(agent("a"), "check_vendor")), run_ended);
    assert_eq!(
        refused(world.apply(Command::Cancel {
            caller: operator(),
            reason: "Again.".into()
        })),
        run_ended
    );
    assert_eq!(
        refused(world.apply(Command::SendEvent {
            caller: agent("a"),
            name: "x".into(),
            data: None
        })),
        run_ended
    );
}

#[test]
fn spec_3_5_a_run_with_people_ends_with_work_items_removed() {
    let mut world = at_approval();
    let item = world.work_item_on("approve");
    assert!(
        world
            .run()
            .step(&StepId::from_wire("approve"))
            .unwrap()
            .timers
            .iter()
            .any(|t| t.kind == TimerKind::Due)
    );
    let transition = world
        .apply(Command::Cancel {
            caller: operator(),
            reason: "Stop.".into(),
        })
        .unwrap();
    assert_eq!(transition.state.work_item(&item), None);
    let approve = transition.state.step(&StepId::from_wire("approve")).unwrap();
    assert_eq!(approve.work_item, None, "the work item is closed");
    assert!(approve.timers.is_empty(), "the due timer goes");
    assert_eq!(transition.reply.data()["workItems"], json!([]));
    assert_eq!(world.step_state("approve"), "cancelled");
}

#[test]
fn spec_3_3_any_operator_may_take_an_escalation_from_the_queue() {
    let (mut world, item) = escalated();
    // A person in neither the escalation group nor the operators is refused.
    let (code, _) = refused(
        world
            .decide(
                person("pat@acme.example", &["g_staff"]),
                &item,
                Decision::Returned,
            )
            .note("Go on.")
            .send(),
    );
    assert_eq!(code, ErrorCode::Forbidden);
    assert_eq!(world.work_item_on("check_vendor"), item, "still in the queue");
    // An operator outside the escalation group takes it.
    let mut outsider = operator();
    let agentprocess_run_actor::machine::CallerKind::Person { groups, .. } = &mut outsider.kind else {
        panic!("an operator is a person");
    };
    groups.clear();
    world
        .decide(outsider, &item, Decision::Returned)
        .note("Go on.")
        .send()
        .unwrap();
    assert_eq!(world.step_state("check_vendor"), "ready");
}

#[test]
fn spec_3_1_repeated_rework_keeps_every_earlier_completion_in_order() {
    let mut world = at_approval();
    for round in 1..=2 {
        let item = world.work_item_on("approve");
        world
            .decide(finance(), &item, Decision::Rejected)
            .note(&format!("Round {round}."))
            .send()
            .unwrap();
        world.advance(60);
        let token = world.claim_token(agent("a_screener"), "check_vendor");
        world
            .submit(agent("a_screener"), &token, screening("approve"))
            .unwrap();
    }
    let item = world.work_item_on("approve");
    let view = world
        .decide(finance(), &item, Decision::Approved)
        .send()
        .unwrap()
        .reply
        .data()
        .clone();
    let screening = &view["data"]["steps"]["check_vendor"];
    assert_eq!(screening["history"].as_array().unwrap().len(), 2);
    assert_eq!(screening["history"][0]["at"], "2026-10-06T09:00:00Z");
    assert_eq!(screening["history"][1]["at"], "2026-10-06T09:01:00Z");
    let approval = &view["data"]["steps"]["approve"];
    let notes: Vec<&str> = approval["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["note"].as_str().unwrap())
        .collect();
    assert_eq!(notes, vec!["Round 1.", "Round 2."]);
}

#[test]
fn spec_6_3_decision_notes_count_against_the_run_data_cap() {
    let mut world = World::new(supplier_onboarding());
    world
        .start(mira(), json!({ "vendorName": "Acme", "amount": 48000 }))
        .unwrap();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    world
        .submit(agent("a_screener"), &token, screening("approve"))
        .unwrap();
    let bytes = serde_json::to_vec(&world.view()["data"]).unwrap().len();
    world.limits.run_data_bytes = bytes + 300;
    let item = world.work_item_on("approve");
    for decision in [Decision::Rejected, Decision::Failed, Decision::Approved] {
        let (code, issues) = refused(
            world
                .decide(finance(), &item, decision)
                .note(&"n".repeat(400))
                .send(),
        );
        assert_eq!(code, ErrorCode::NotAccepted, "{decision:?}");
        assert!(issues[0].starts_with("note: run data would be"), "{issues:?}");
    }
    // A short note fits.
    world
        .decide(finance(), &item, Decision::Rejected)
        .note("Re-check the EU list.")
        .send()
        .unwrap();
    // A cancel reason lands in run.ended, outside run data: it is not capped.
    world
        .apply(Command::Cancel {
            caller: operator(),
            reason: "r".repeat(400),
        })
        .unwrap();
}
