//! Waits, events and timers: `wait`, `wait_until`, `wait_for` with held events and timeouts
//! (spec §2.2, §3.6), `due` and overdue marking, stale firings.

mod common;

use agentprocess_ids::StepId;
use agentprocess_process::{DataPath, FieldType, StepKind, Target};
use agentprocess_run_actor::machine::{
    Command, Decision, Effect, ErrorCode, Notification, Recipient, Submission, TimerKind,
};
use common::*;
use serde_json::{Value, json};

fn settlement() -> World {
    let process = pinned(
        "settlement",
        fields(&[]),
        vec![
            agent_step("pay", work("Pay.", &[], &[], None), None),
            step_of(
                "settled",
                StepKind::WaitFor {
                    event: "payment_settled".into(),
                    timeout: Some(hours(1)),
                    on_timeout: Some(Target::Step(id("chase"))),
                },
                to("done"),
            ),
            agent_step("chase", work("Chase the bank.", &[], &[], None), to("done")),
            finish_step("done", "paid"),
        ],
    );
    let mut world = World::new(process);
    world.start(mira(), json!({})).unwrap();
    world
}

fn done() -> Submission {
    Submission {
        summary: Some("Done.".into()),
        ..Default::default()
    }
}

fn send(
    world: &mut World,
    caller: agentprocess_run_actor::machine::Caller,
    name: &str,
    data: Value,
) -> Value {
    world
        .apply(Command::SendEvent {
            caller,
            name: name.into(),
            data: Some(obj(data)),
        })
        .unwrap()
        .reply
        .data()
        .clone()
}

#[test]
fn spec_3_6_held_events_are_consumed_oldest_first_when_the_wait_becomes_ready() {
    let mut world = settlement();
    assert_eq!(
        send(&mut world, agent("a_bank"), "payment_settled", json!({ "n": 1 })),
        json!({ "consumedBy": null })
    );
    world.advance(60);
    assert_eq!(
        send(&mut world, operator(), "payment_settled", json!({ "n": 2 })),
        json!({ "consumedBy": null })
    );
    assert_eq!(world.run().held_events.len(), 2);
    let token = world.claim_token(agent("a"), "pay");
    let view = world
        .submit(agent("a"), &token, done())
        .unwrap()
        .reply
        .data()
        .clone();
    assert_eq!(
        view["run"]["state"], "ended",
        "the held event was consumed in the same write"
    );
    assert_eq!(view["run"]["outcome"], "paid");
    let record = &view["data"]["steps"]["settled"];
    assert_eq!(record["output"], json!({ "n": 1 }));
    assert_eq!(record["by"], "a_bank");
    assert!(
        world.run().held_events.is_empty(),
        "the rest is discarded at the end"
    );
}

#[test]
fn spec_3_6_an_event_for_a_waiting_step_is_consumed_at_once() {
    let mut world = settlement();
    let token = world.claim_token(agent("a"), "pay");
    let transition = world.submit(agent("a"), &token, done()).unwrap();
    assert_eq!(world.step_state("settled"), "waiting");
    assert_eq!(world.run_state(), "waiting");
    let timers = &transition
        .state
        .step(&StepId::from_wire("settled"))
        .unwrap()
        .timers;
    assert!(
        matches!(&timers[..], [t] if t.kind == TimerKind::WaitForTimeout && t.fire_at.to_rfc3339() == "2026-10-06T10:00:00Z"),
        "{timers:?}"
    );
    let reply = send(
        &mut world,
        agent("a_bank"),
        "payment_settled",
        json!({ "ref": "SET-1" }),
    );
    assert_eq!(reply, json!({ "consumedBy": "settled" }));
    assert_eq!(world.run_state(), "ended");
    assert_eq!(
        world.run().step(&StepId::from_wire("settled")).unwrap().timers,
        [],
        "the timeout is cancelled"
    );
}

#[test]
fn spec_3_6_send_event_is_for_agents_and_operators_with_step_id_names() {
    let mut world = settlement();
    let refusal = world
        .apply(Command::SendEvent {
            caller: mira(),
            name: "payment_settled".into(),
            data: None,
        })
        .unwrap_err();
    assert_eq!(refusal.code, ErrorCode::Forbidden);
    let refusal = world
        .apply(Command::SendEvent {
            caller: agent("a"),
            name: "Payment.Settled".into(),
            data: None,
        })
        .unwrap_err();
    assert_eq!(refusal.code, ErrorCode::Invalid);
    // An agent and an operator send it under a step-id-style name: held for the wait.
    for sender in [agent("a"), operator()] {
        assert_eq!(
            send(&mut world, sender, "payment_settled", json!({})),
            json!({ "consumedBy": null })
        );
    }
    assert_eq!(world.run().held_events.len(), 2);
    world.limits.run_data_bytes = 100;
    let refusal = world
        .apply(Command::SendEvent {
            caller: agent("a"),
            name: "payment_settled".into(),
            data: Some(obj(json!({ "blob": "x".repeat(200) }))),
        })
        .unwrap_err();
    assert_eq!(
        refusal.code,
        ErrorCode::NotAccepted,
        "the cap bounds event data when held"
    );
}

#[test]
fn spec_2_2_a_wait_for_timeout_continues_at_on_timeout() {
    let mut world = settlement();
    let token = world.claim_token(agent("a"), "pay");
    world.submit(agent("a"), &token, done()).unwrap();
    world.advance(3599);
    world.fire_due_timers();
    assert_eq!(world.step_state("settled"), "waiting");
    world.advance(1);
    world.fire_due_timers();
    assert_eq!(world.step_state("settled"), "done");
    assert_eq!(world.step_state("chase"), "ready");
    assert_eq!(world.view()["data"]["steps"]["settled"]["by"], "server");
    // A late event no longer has a wait: it is held.
    assert_eq!(
        send(&mut world, agent("a_bank"), "payment_settled", json!({})),
        json!({ "consumedBy": null })
    );
}

#[test]
fn spec_2_2_a_wait_continues_after_its_duration_and_stale_firings_are_ignored() {
    let process = pinned(
        "cool-off",
        fields(&[]),
        vec![
            step_of(
                "cool",
                StepKind::Wait {
                    duration: minutes(30),
                },
                None,
            ),
            finish_step("done", "done"),
        ],
    );
    let mut world = World::new(process);
    let transition = world.start(mira(), json!({})).unwrap();
    let [timer] = &transition.state.step(&StepId::from_wire("cool")).unwrap().timers[..] else {
        panic!("a wait arms a timer")
    };
    assert_eq!(timer.kind, TimerKind::Wait);
    assert_eq!(timer.fire_at.to_rfc3339(), "2026-10-06T09:30:00Z");
    let generation = timer.generation;
    assert_eq!(world.run_state(), "waiting");
    let before = world.run().clone();
    let ignored = world
        .apply(Command::TimerFired {
            step: StepId::from_wire("cool"),
            kind: TimerKind::Wait,
            generation: generation + 7,
        })
        .unwrap();
    assert!(ignored.effects.is_empty());
    assert_eq!(&ignored.state, &before, "a stale firing changes nothing");
    world.advance(1800);
    world.fire_due_timers();
    let view = world.view();
    assert_eq!(view["run"]["outcome"], "done");
    assert_eq!(
        view["data"]["steps"]["cool"],
        json!({ "by": "server", "at": "2026-10-06T09:30:00Z", "history": [] })
    );
    let after = world.run().clone();
    let ignored = world
        .apply(Command::TimerFired {
            step: StepId::from_wire("cool"),
            kind: TimerKind::Wait,
            generation,
        })
        .unwrap();
    assert_eq!(ignored.state, after, "firings after the end change nothing");
}

fn start_date_process() -> agentprocess_run_actor::machine::PinnedProcess {
    pinned(
        "start-date",
        fields(&[("startDate", FieldType::Datetime)]),
        vec![
            step_of(
                "until",
                StepKind::WaitUntil {
                    path: DataPath::Input {
                        field: "startDate".into(),
                    },
                },
                None,
            ),
            agent_step("welcome", work("Welcome them.", &[], &[], None), to("done")),
            finish_step("done", "done"),
        ],
    )
}

#[test]
fn spec_2_2_a_wait_until_already_past_continues_at_once() {
    let mut world = World::new(start_date_process());
    let view = world
        .start(mira(), json!({ "startDate": "2026-10-01T00:00:00Z" }))
        .unwrap()
        .reply
        .data()
        .clone();
    assert_eq!(view["steps"][0]["state"], "done");
    assert_eq!(view["steps"][1]["state"], "ready");
    assert_eq!(view["data"]["steps"]["until"]["by"], "server");
}

#[test]
fn spec_2_2_a_wait_until_in_the_future_fires_at_that_time() {
    let mut world = World::new(start_date_process());
    let transition = world
        .start(mira(), json!({ "startDate": "2026-10-06T13:00:00+02:00" }))
        .unwrap();
    assert!(
        transition
            .state
            .steps
            .iter()
            .flat_map(|s| &s.timers)
            .any(|t| t.kind == TimerKind::Wait && t.fire_at.to_rfc3339() == "2026-10-06T11:00:00Z")
    );
    // Exactly now counts as past.
    let mut world = World::new(start_date_process());
    world
        .start(mira(), json!({ "startDate": "2026-10-06T11:00:00+02:00" }))
        .unwrap();
    assert_eq!(world.step_state("welcome"), "ready");
    let mut world = World::new(start_date_process());
    world
        .start(mira(), json!({ "startDate": "2026-10-07T09:00:00Z" }))
        .unwrap();
    assert_eq!(world.step_state("until"), "waiting");
    world.advance(86_400);
    world.fire_due_timers();
    assert_eq!(world.step_state("welcome"), "ready");
}

#[test]
fn spec_3_5_a_missing_wait_until_value_fails_the_run() {
    let mut inputs = fields(&[]);
    let mut optional = agentprocess_process::FieldSpec::of_type(FieldType::Datetime);
    optional.optional = true;
    inputs.insert("startDate".into(), optional);
    let process = pinned(
        "maybe-date",
        inputs,
        vec![
            step_of(
                "until",
                StepKind::WaitUntil {
                    path: DataPath::Input {
                        field: "startDate".into(),
                    },
                },
                None,
            ),
            finish_step("done", "done"),
        ],
    );
    let mut world = World::new(process);
    let view = world.start(mira(), json!({})).unwrap().reply.data().clone();
    assert_eq!(view["run"]["outcome"], "failed");
    assert_eq!(view["run"]["ended"]["by"], "server");
    assert_eq!(view["steps"][0]["state"], "failed");
    assert_eq!(
        view["data"]["steps"]["until"]["note"],
        "inputs.startDate is missing or not a datetime"
    );
}

#[test]
fn spec_2_2_due_marks_the_step_overdue_and_notifies_assignee_and_operators() {
    let mut world = World::new(supplier_onboarding());
    world
        .start(mira(), json!({ "vendorName": "Acme", "amount": 1 }))
        .unwrap();
    let token = world.claim_token(agent("a_screener"), "check_vendor");
    world
        .submit(agent("a_screener"), &token, screening("approve"))
        .unwrap();
    world.advance(2 * 86_400);
    world.fire_due_timers();
    let view = world.view();
    assert_eq!(view["steps"][1]["overdue"], true);
    assert_eq!(view["steps"][1]["state"], "waiting", "the work stays open");
    let effects = &world.last.as_ref().unwrap().effects;
    assert!(effects.iter().any(|e| matches!(
        e,
        Effect::Notify(Notification::Overdue { to: Recipient::Assignment(agentprocess_run_actor::machine::Assignment::Group(g)), .. }) if g == "g_finance"
    )));
    assert!(effects.iter().any(|e| matches!(
        e,
        Effect::Notify(Notification::Overdue {
            to: Recipient::Operators,
            ..
        })
    )));
    let item = world.work_item_on("approve");
    let transition = world.decide(finance(), &item, Decision::Approved).send().unwrap();
    assert_eq!(transition.reply.data()["run"]["outcome"], "onboarded");
}

#[test]
fn spec_2_2_due_is_cancelled_when_the_step_completes() {
    let process = pinned(
        "quick",
        fields(&[]),
        vec![
            agent_step("one", work("One.", &[], &[], Some(hours(1))), None),
            finish_step("done", "done"),
        ],
    );
    let mut world = World::new(process);
    world.start(mira(), json!({})).unwrap();
    let token = world.claim_token(agent("a"), "one");
    assert!(
        world
            .run()
            .step(&StepId::from_wire("one"))
            .unwrap()
            .timers
            .iter()
            .any(|t| t.kind == TimerKind::Due)
    );
    let transition = world.submit(agent("a"), &token, done()).unwrap();
    assert_eq!(
        transition.state.step(&StepId::from_wire("one")).unwrap().timers,
        []
    );
}

#[test]
fn spec_6_3_a_held_event_that_no_longer_fits_fails_its_wait_instead_of_going_over_the_cap() {
    let mut world = settlement();
    world.limits.run_data_bytes = 1500;
    // Held: run data with the event's data fits the cap now.
    send(
        &mut world,
        agent("a_bank"),
        "payment_settled",
        json!({ "ref": "x".repeat(600) }),
    );
    assert_eq!(world.run().held_events.len(), 1);
    // Run data grows before the wait is reached.
    let token = world.claim_token(agent("a"), "pay");
    let submission = Submission {
        summary: Some("y".repeat(1000)),
        ..Default::default()
    };
    world.submit(agent("a"), &token, submission).unwrap();
    let view = world.view();
    assert_eq!(view["run"]["outcome"], "failed");
    assert_eq!(world.step_state("settled"), "failed");
    let record = &view["data"]["steps"]["settled"];
    assert_eq!(record["by"], "server");
    assert!(
        record["note"]
            .as_str()
            .unwrap()
            .starts_with("held event payment_settled could not be consumed: data: run data would be"),
        "{record}"
    );
    assert_eq!(view["run"]["ended"]["by"], "server");
    let bytes = serde_json::to_vec(&view["data"]).unwrap().len();
    assert!(bytes <= 1500, "run data stays within the cap: {bytes}");
}

#[test]
fn spec_6_3_an_event_consumed_at_once_must_fit_with_its_record() {
    let mut world = settlement();
    let token = world.claim_token(agent("a"), "pay");
    world.submit(agent("a"), &token, done()).unwrap();
    let bytes = serde_json::to_vec(&world.view()["data"]).unwrap().len();
    // The data alone fits; with the record's `by`, `at` and `history` it does not.
    let data = json!({ "r": "" });
    let data_bytes = serde_json::to_vec(&data).unwrap().len();
    world.limits.run_data_bytes = bytes + data_bytes + 10;
    let refusal = world
        .apply(Command::SendEvent {
            caller: agent("a_bank"),
            name: "payment_settled".into(),
            data: Some(obj(data)),
        })
        .unwrap_err();
    assert_eq!(refusal.code, ErrorCode::NotAccepted);
    assert!(
        refusal.issues[0].starts_with("data: run data would be"),
        "{:?}",
        refusal.issues
    );
    assert_eq!(world.step_state("settled"), "waiting");
}
