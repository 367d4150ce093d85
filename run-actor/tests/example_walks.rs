//! Walks of our example processes through their main paths: happy paths, routes, rejection
//! with `on_reject` and history, escalation, lease expiry with handoff, cancel, held events and
//! `wait_for` timeouts. Every rendered result is checked against the core-2 schemas on the way.

mod common;

use agentprocess_process::StepKind;
use agentprocess_run_actor::machine::{Command, Decision, StepState, WorkItemKind};
use common::*;
use serde_json::{Value, json};

/// What the walk does at a step; `None` from a script takes the default.
#[derive(Debug, Clone)]
enum Act {
    Submit(Option<&'static str>),
    Escalate(&'static str),
    Approve,
    Reject(&'static str),
    Complete(Option<&'static str>),
    Return(&'static str),
    Fail(&'static str),
    Event,
    Timers,
}

/// Drives the run until it ends, taking `script`'s act where it gives one.
fn walk(world: &mut World, script: &mut dyn FnMut(&World, &str) -> Option<Act>) {
    for _ in 0..200 {
        if world.run().has_ended() {
            return;
        }
        let run = world.run().clone();
        if let Some(step) = run.steps.iter().find(|s| s.state == Some(StepState::Ready)) {
            let act = script(world, step.id.as_str()).unwrap_or(Act::Submit(None));
            let token = world.claim_token(agent("a_walker"), step.id.as_str());
            match act {
                Act::Submit(next) => {
                    let submission = good_submission(world, step.id.as_str(), next);
                    world
                        .submit(agent("a_walker"), &token, submission)
                        .expect("a good submission is accepted");
                }
                Act::Escalate(note) => {
                    world
                        .apply(Command::Escalate {
                            caller: agent("a_walker"),
                            token,
                            note: note.into(),
                        })
                        .unwrap();
                }
                other => panic!("{other:?} on a ready agent step"),
            }
            continue;
        }
        if let Some(item) = run.work_items.first() {
            let caller = assignee(&item.assigned_to);
            let default = match item.kind {
                WorkItemKind::Approve => Act::Approve,
                WorkItemKind::Task | WorkItemKind::Escalation => Act::Complete(None),
            };
            let act = script(world, item.step.as_str()).unwrap_or(default);
            let result = match act {
                Act::Approve => world.decide(caller, &item.id, Decision::Approved).send(),
                Act::Reject(note) => world
                    .decide(caller, &item.id, Decision::Rejected)
                    .note(note)
                    .send(),
                Act::Return(note) => world
                    .decide(caller, &item.id, Decision::Returned)
                    .note(note)
                    .send(),
                Act::Fail(note) => world.decide(caller, &item.id, Decision::Failed).note(note).send(),
                Act::Complete(next) => {
                    let submission = good_submission(world, item.step.as_str(), next);
                    let mut decide = world.decide(caller, &item.id, Decision::Completed);
                    decide.decide.output = submission.output;
                    decide.decide.evidence = Some(submission.evidence);
                    decide.decide.next = submission.next;
                    decide.decide.reason = submission.reason;
                    decide.send()
                }
                other => panic!("{other:?} on a work item"),
            };
            result.expect("the decision is accepted");
            continue;
        }
        let waiting = run
            .steps
            .iter()
            .find(|s| s.state == Some(StepState::Waiting))
            .expect("a run that has not ended waits on something")
            .id
            .clone();
        let kind = &world.process.process.step(&id(waiting.as_str())).unwrap().kind;
        let default = match kind {
            StepKind::WaitFor { .. } => Act::Event,
            _ => Act::Timers,
        };
        match script(world, waiting.as_str()).unwrap_or(default) {
            Act::Event => {
                let StepKind::WaitFor { event, .. } = kind else {
                    unreachable!()
                };
                let consumed = world
                    .apply(Command::SendEvent {
                        caller: agent("a_system"),
                        name: event.clone(),
                        data: Some(obj(json!({ "reference": "EVT-1" }))),
                    })
                    .unwrap();
                assert_eq!(consumed.reply.data()["consumedBy"], waiting.as_str());
            }
            Act::Timers => {
                let next = world
                    .run()
                    .steps
                    .iter()
                    .flat_map(|s| s.timers.iter())
                    .map(|t| t.fire_at)
                    .min();
                let next = next.expect("a waiting step has a timer");
                world.now = world.now.max(next.as_millis());
                world.fire_due_timers();
            }
            other => panic!("{other:?} on a waiting step"),
        }
    }
    panic!("the walk did not end");
}

fn start(name: &str, inputs: &[(&str, Value)]) -> World {
    let process = example(name);
    let mut values = sample_map(&process.process.inputs);
    for (key, value) in inputs {
        values.insert(key.to_string(), value.clone());
    }
    let mut world = World::new(process);
    world
        .start(mira(), Value::Object(values))
        .expect("the run starts");
    world
}

fn outcome(world: &World) -> Value {
    world.view()["run"]["outcome"].clone()
}

#[test]
fn every_example_walks_its_main_path_to_a_finish() {
    let examples = agentprocess_testkit::examples();
    assert!(
        examples.len() >= 12,
        "at least twelve examples, found {}",
        examples.len()
    );
    let mut walked = 0;
    for (name, _) in &examples {
        let process = example(name);
        let finishes: Vec<Value> = process
            .process
            .steps
            .iter()
            .filter_map(|s| match &s.kind {
                StepKind::Finish { outcome } => Some(json!(outcome)),
                _ => None,
            })
            .collect();
        let mut world = start(name, &[]);
        world.evaluator = Some(passing_evaluator());
        walk(&mut world, &mut |_, _| None);
        assert!(
            finishes.contains(&outcome(&world)),
            "{name} ended {}",
            outcome(&world)
        );
        assert!(world.run().work_items.is_empty());
        walked += 1;
    }
    assert_eq!(walked, examples.len(), "walked {walked} examples");
}

#[test]
fn training_request_rejection_returns_to_the_course_details_with_history() {
    let mut world = start("training-request", &[]);
    assert_eq!(
        world.view()["workItems"][0]["assignedTo"],
        json!({ "person": "mira@acme.example" })
    );
    let mut rejected = false;
    walk(&mut world, &mut |world, step| match step {
        "supervisor_approval" if !rejected => {
            rejected = true;
            Some(Act::Reject("The travel cost line is missing."))
        }
        "course_details" if rejected => {
            let view = world.view();
            assert_eq!(
                view["data"]["steps"]["supervisor_approval"]["note"],
                "The travel cost line is missing."
            );
            assert_eq!(view["steps"][1]["state"], Value::Null, "policy_check was rewound");
            assert_eq!(
                view["data"]["steps"]["policy_check"]["history"]
                    .as_array()
                    .unwrap()
                    .len(),
                1
            );
            None
        }
        _ => None,
    });
    assert_eq!(outcome(&world), "booked");
    let data = &world.view()["data"]["steps"];
    assert_eq!(data["course_details"]["history"].as_array().unwrap().len(), 1);
    assert_eq!(data["policy_check"]["history"].as_array().unwrap().len(), 1);
    assert_eq!(data["supervisor_approval"]["decision"], "approved");
    assert_eq!(data["supervisor_approval"]["history"][0]["decision"], "rejected");
}

#[test]
fn defect_triage_routes_and_escalations() {
    // Route to QA reproduction; the closing agent escalates, is returned, then completes.
    let mut world = start("defect-triage", &[]);
    let mut escalated = 0;
    walk(&mut world, &mut |world, step| match step {
        "triage" => Some(Act::Submit(Some("qa_reproduce"))),
        "close_report" if escalated == 0 && world.step_state("close_report") == "ready" => {
            escalated += 1;
            Some(Act::Escalate("The defect tracker refuses the close."))
        }
        "close_report" if escalated == 1 && world.step_state("close_report") == "waiting" => {
            escalated += 1;
            Some(Act::Return("Retry, the defect tracker is back."))
        }
        _ => None,
    });
    assert_eq!(outcome(&world), "fixed");
    assert_eq!(escalated, 2);
    assert_eq!(world.view()["data"]["steps"]["triage"]["next"], "qa_reproduce");

    // An escalation completed by the operator in the agent's place.
    let mut world = start("defect-triage", &[]);
    walk(&mut world, &mut |world, step| match step {
        "triage" if world.step_state("triage") == "ready" => Some(Act::Escalate("Cannot reproduce.")),
        "triage" => Some(Act::Complete(Some("verify_fix"))),
        _ => None,
    });
    assert_eq!(outcome(&world), "fixed");
    assert_eq!(
        world.view()["data"]["steps"]["triage"]["by"],
        "member@acme.example"
    );

    // An escalation failed by the operator ends the run.
    let mut world = start("defect-triage", &[]);
    walk(&mut world, &mut |world, step| match step {
        "triage" if world.step_state("triage") == "ready" => Some(Act::Escalate("Reporter unreachable.")),
        "triage" => Some(Act::Fail("Reporter withdrew the report.")),
        _ => None,
    });
    assert_eq!(outcome(&world), "failed");
    assert_eq!(world.step_state("triage"), "failed");
}

#[test]
fn account_closure_waits_for_payment_with_held_events_and_timeouts() {
    // The payment arrives while the wait is waiting; then, in a second run, before it is.
    let mut world = start("account-closure", &[]);
    walk(&mut world, &mut |_, step| match step {
        "final_statement" => Some(Act::Submit(Some("payment_event"))),
        "check_payment" => Some(Act::Submit(Some("data_review"))),
        _ => None,
    });
    assert_eq!(outcome(&world), "closed");
    assert_eq!(world.view()["data"]["steps"]["payment_event"]["by"], "a_system");

    let mut world = start("account-closure", &[]);
    world
        .apply(Command::SendEvent {
            caller: agent("a_billing"),
            name: "statement-paid".into(),
            data: Some(obj(json!({ "paid": true }))),
        })
        .unwrap();
    walk(&mut world, &mut |_, step| match step {
        "final_statement" => Some(Act::Submit(Some("payment_event"))),
        "check_payment" => Some(Act::Submit(Some("data_review"))),
        "payment_event" => panic!("the held event is consumed when the wait becomes ready"),
        _ => None,
    });
    assert_eq!(
        world.view()["data"]["steps"]["payment_event"]["output"],
        json!({ "paid": true })
    );

    // No payment within 30 days: on_timeout sends it to collections.
    let mut world = start("account-closure", &[]);
    walk(&mut world, &mut |_, step| match step {
        "final_statement" => Some(Act::Submit(Some("payment_event"))),
        "payment_event" => Some(Act::Timers),
        _ => None,
    });
    assert_eq!(outcome(&world), "closed");
    let data = &world.view()["data"]["steps"];
    assert_eq!(data["payment_event"]["by"], "server");
    assert!(data.get("check_payment").is_none());
    assert_eq!(data["collections"]["by"], "member@acme.example");
}

#[test]
fn release_notes_wait_until_release_time_and_survive_a_lost_lease() {
    let mut world = start("release-notes", &[("releaseAt", json!("2026-10-20T08:00:00Z"))]);
    // The first writer renews with a note and disappears; the lease ends.
    let token = world.claim_token(agent("a_writer"), "write_notes");
    world
        .apply(Command::Renew {
            caller: agent("a_writer"),
            token,
            progress: Some("Outline done.".into()),
        })
        .unwrap();
    world.advance(601);
    let claim = world.claim(agent("a_second"), "write_notes").unwrap();
    assert_eq!(
        claim.reply.data()["handoff"],
        json!({ "progress": "Outline done." })
    );
    let token = claim.reply.data()["token"].as_str().unwrap().to_string();
    let submission = good_submission(&world, "write_notes", None);
    world.submit(agent("a_second"), &token, submission).unwrap();
    let item = world.work_item_on("product_review");
    world
        .decide(
            person("pm@acme.example", &["g_product-manager"]),
            &item,
            Decision::Approved,
        )
        .send()
        .unwrap();
    assert_eq!(world.step_state("release_time"), "waiting");
    world.advance(86_400);
    world.fire_due_timers();
    assert_eq!(world.step_state("release_time"), "waiting", "not yet");
    walk(&mut world, &mut |_, _| None);
    assert_eq!(outcome(&world), "released");
    assert_eq!(
        world.view()["data"]["steps"]["release_time"]["at"],
        "2026-10-20T08:00:00Z"
    );
}

#[test]
fn venue_booking_is_cancelled_by_an_operator_while_people_work() {
    let mut world = start("venue-booking", &[]);
    assert_eq!(world.run_state(), "waiting");
    world
        .apply(Command::Cancel {
            caller: operator(),
            reason: "Event called off.".into(),
        })
        .unwrap();
    let view = world.view();
    assert_eq!(view["run"]["state"], "cancelled");
    assert_eq!(view["steps"][0]["state"], "cancelled");
    assert_eq!(view["workItems"], json!([]));
    let (code, issues) = refused(
        world
            .decide(
                person("b@acme.example", &["g_event-planner"]),
                "w_1",
                Decision::Failed,
            )
            .note("x")
            .send(),
    );
    assert_eq!(
        (code, issues),
        (
            agentprocess_run_actor::machine::ErrorCode::Conflict,
            vec!["run_ended".to_string()]
        )
    );
}
