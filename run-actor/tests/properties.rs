//! Properties over arbitrary command sequences: the state invariants hold after every command,
//! work appears only along declared steps, nothing changes after a run ends, and `apply` is
//! deterministic (checked by the harness on every command).

mod common;

use agentprocess_ids::StepId;
use agentprocess_process::StepKind;
use agentprocess_run_actor::machine::{
    Command, Decision, ErrorCode, EvaluatorAnswer, EvaluatorOutcome, EvaluatorQuestion, EvaluatorRequest,
    RunState, StepState, TimerKind, WorkItemKind, render,
};
use common::*;
use proptest::prelude::*;
use serde_json::json;

fn check_invariants(world: &World) {
    let run = world.run();
    // Spec §6.3: what callers bring in (inputs, submissions, decisions, held events) keeps run
    // data within limits.runDataBytes. Records the server writes itself (a wait's `by: "server"`,
    // the note of a step the server failed) are bookkeeping outside any caller's acceptance.
    let mut run_data = render::run_data(run);
    if let Some(steps) = run_data
        .get_mut("steps")
        .and_then(serde_json::Value::as_object_mut)
    {
        steps.retain(|_, record| record.get("by").and_then(serde_json::Value::as_str) != Some("server"));
    }
    let run_data_bytes = serde_json::to_vec(&run_data).unwrap().len();
    assert!(
        run_data_bytes <= world.limits.run_data_bytes,
        "run data is {run_data_bytes} bytes, over the cap of {}",
        world.limits.run_data_bytes
    );
    let process = &world.process.process;
    for step in &run.steps {
        let declared = process
            .step(&id(step.id.as_str()))
            .expect("run steps are declared steps");
        assert_eq!(
            step.claim.is_some(),
            step.state == Some(StepState::Claimed),
            "{}: claim iff claimed",
            step.id
        );
        if step.state == Some(StepState::Ready) || step.state == Some(StepState::Claimed) {
            assert!(
                matches!(declared.kind, StepKind::Agent { .. }),
                "only agent steps are claimable"
            );
        }
        if let Some(item) = &step.work_item {
            assert_eq!(step.state, Some(StepState::Waiting));
            assert!(run.work_item(item).is_some());
        }
        // check-1: while the run is live, a held candidate waits on an escalation work item,
        // with its verdict. (Ending the run removes every work item; the record stays.)
        if let Some(escalation) = step
            .escalation
            .as_ref()
            .filter(|e| e.candidate.is_some() && !run.has_ended())
        {
            assert!(
                escalation.check.is_some(),
                "{}: a candidate comes with its verdict",
                step.id
            );
            let item = step.work_item.as_ref().and_then(|id| run.work_item(id));
            assert!(
                item.is_some_and(|item| item.kind == WorkItemKind::Escalation),
                "{}: a candidate waits on an escalation",
                step.id
            );
        }
    }
    for item in &run.work_items {
        let step = run.step(&item.step).unwrap();
        assert_eq!(step.work_item.as_deref(), Some(item.id.as_str()));
        let declared = process.step(&id(item.step.as_str())).unwrap();
        let fits = match item.kind {
            WorkItemKind::Task => matches!(declared.kind, StepKind::Task { .. }),
            WorkItemKind::Approve => matches!(declared.kind, StepKind::Approve { .. }),
            // check-1 escalates a person's task the check was unsure of, too.
            WorkItemKind::Escalation => {
                matches!(declared.kind, StepKind::Agent { .. } | StepKind::Task { .. })
            }
        };
        assert!(fits, "work appears only along declared steps");
    }
    if run.has_ended() {
        assert!(run.work_items.is_empty());
        assert!(run.held_events.is_empty());
        for step in &run.steps {
            assert!(
                !step.state.is_some_and(StepState::is_open),
                "{} still open",
                step.id
            );
            assert!(step.claim.is_none() && step.timers.is_empty());
        }
    }
}

fn last_token(world: &World, tokens: &[String]) -> String {
    tokens
        .last()
        .cloned()
        .unwrap_or_else(|| format!("apt1.{}.{}", world.run().id, "00".repeat(32)))
}

fn act(world: &mut World, tokens: &mut Vec<String>, action: u8) {
    let ended_before = world.run().has_ended();
    let before: RunState = world.run().clone();
    let item = world.run().work_items.first().cloned();
    let protocol_write = !matches!(action, 9);
    let result = match action {
        0 | 1 => {
            let who = if action == 0 { "a_one" } else { "a_two" };
            let result = world.claim(agent(who), "check_vendor");
            if let Ok(t) = &result {
                tokens.push(t.reply.data()["token"].as_str().unwrap().to_string());
            }
            result
        }
        2 => world.submit(agent("a_one"), &last_token(world, tokens), screening("approve")),
        3 => world.submit(agent("a_two"), &last_token(world, tokens), screening("decline")),
        4 => {
            let mut bad = screening("approve");
            bad.summary = None;
            let result = world.submit(agent("a_one"), &last_token(world, tokens), bad);
            if let Err(refusal) = &result
                && let Some(remembered) = refusal.remember.clone()
            {
                assert_eq!(render::run_data(&remembered), render::run_data(world.run()));
                world.run = Some(*remembered);
            }
            result
        }
        5 => {
            let caller = agent("a_one");
            let result = world.apply(Command::Renew {
                caller,
                token: last_token(world, tokens),
                progress: Some("half way".into()),
            });
            if let Ok(t) = &result {
                tokens.push(t.reply.data()["token"].as_str().unwrap().to_string());
            }
            result
        }
        6 => world.apply(Command::Escalate {
            caller: agent("a_two"),
            token: last_token(world, tokens),
            note: "stuck".into(),
        }),
        7 | 8 | 10 => {
            let id = item.as_ref().map_or("w_0".to_string(), |i| i.id.clone());
            let caller = match item.as_ref().map(|i| i.kind) {
                Some(WorkItemKind::Escalation) => operator(),
                _ => finance(),
            };
            match (action, item.as_ref().map(|i| i.kind)) {
                (7, Some(WorkItemKind::Escalation)) => {
                    world.decide(caller, &id, Decision::Returned).note("again").send()
                }
                (8, Some(WorkItemKind::Escalation)) => {
                    world.decide(caller, &id, Decision::Failed).note("no").send()
                }
                (7, _) => world.decide(caller, &id, Decision::Approved).send(),
                (8, _) => world.decide(caller, &id, Decision::Rejected).note("redo").send(),
                _ => world
                    .decide(caller, &id, Decision::Approved)
                    .snapshot("stale")
                    .send(),
            }
        }
        9 => {
            world.advance(400);
            let leases: Vec<(StepId, u64)> = world
                .run()
                .steps
                .iter()
                .filter_map(|s| s.claim.as_ref().map(|c| (s.id.clone(), c.lease)))
                .collect();
            for (step, lease) in leases {
                world.apply(Command::ClaimExpired { step, lease }).unwrap();
            }
            world.fire_due_timers();
            let fired = world.run().clone();
            let ignored = world
                .apply(Command::TimerFired {
                    step: StepId::from_wire("approve"),
                    kind: TimerKind::Due,
                    generation: 9999,
                })
                .unwrap();
            assert!(ignored.effects.is_empty());
            assert_eq!(&ignored.state, &fired, "a stale firing changes nothing");
            Ok(ignored)
        }
        11 => world.apply(Command::Cancel {
            caller: operator(),
            reason: "stop".into(),
        }),
        _ => world.apply(Command::SendEvent {
            caller: agent("a_one"),
            name: "noise".into(),
            data: Some(obj(json!({}))),
        }),
    };
    if ended_before {
        if protocol_write {
            let refusal = result.expect_err("every write to an ended run is refused");
            assert_eq!(refusal.code, ErrorCode::Conflict);
            assert_eq!(refusal.issues, vec!["run_ended".to_string()]);
        }
        assert_eq!(world.run(), &before, "nothing changes after a run ends");
    }
    check_invariants(world);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_along_any_command_sequence(actions in proptest::collection::vec(0u8..13, 1..40)) {
        let mut world = World::new(supplier_onboarding());
        world.start(mira(), json!({ "vendorName": "Acme", "amount": 1 })).unwrap();
        let mut tokens = Vec::new();
        for action in actions {
            act(&mut world, &mut tokens, action);
        }
    }
}

/// How much room above the inputs a property case leaves under the run-data cap, in 40-byte units.
fn pick_cap(which: usize) -> u8 {
    (which % 32) as u8
}

/// Every example process, by name: with check-1, the server runs them all.
fn runnable_examples() -> Vec<String> {
    let names: Vec<String> = agentprocess_testkit::examples()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert!(
        names.len() >= 12,
        "at least twelve examples, found {}",
        names.len()
    );
    names
}

/// A deterministic fake evaluator: its answers make the verdicts pass, fail, unsure and error
/// in turn, starting where `start` says.
fn fake_evaluator(start: u8) -> Evaluator {
    let mut turn = usize::from(start);
    Box::new(move |request: &EvaluatorRequest| {
        turn += 1;
        let mode = turn % 4;
        if mode == 3 {
            return EvaluatorOutcome::Failed;
        }
        let answers = request
            .questions
            .iter()
            .map(|question| match (question, mode) {
                (EvaluatorQuestion::YesNo { .. }, 0) => EvaluatorAnswer::YesNo { yes: 1.0 },
                (EvaluatorQuestion::YesNo { fail: Some(fail), .. }, 2) => {
                    EvaluatorAnswer::YesNo { yes: fail.get() }
                }
                (EvaluatorQuestion::YesNo { .. }, _) => EvaluatorAnswer::YesNo { yes: 0.0 },
                (EvaluatorQuestion::Choice { one_of, pass, .. }, _) => {
                    let name = match mode {
                        0 => pass[0].clone(),
                        _ => one_of
                            .iter()
                            .map(|(name, _)| name.clone())
                            .find(|name| !pass.contains(name))
                            .unwrap_or_else(|| pass[0].clone()),
                    };
                    // Unsure by confidence: below every floor but zero.
                    let confidence = if mode == 2 { 0.0 } else { 1.0 };
                    EvaluatorAnswer::Choice { name, confidence }
                }
                (EvaluatorQuestion::Rubric { levels, .. }, _) => EvaluatorAnswer::Rubric {
                    level: if mode == 0 { levels.len() - 1 } else { 0 },
                    confidence: if mode == 2 { 0.0 } else { 1.0 },
                },
            })
            .collect();
        EvaluatorOutcome::Answered {
            model: "fake-evaluator".to_string(),
            answers,
        }
    })
}

fn route(world: &World, step: &str, pick: u8) -> Option<String> {
    match &world.process.process.step(&id(step))?.next {
        Some(agentprocess_process::Next::Routes(routes)) => {
            Some(routes[pick as usize % routes.len()].to.to_string())
        }
        _ => None,
    }
}

fn random_act(world: &mut World, tokens: &mut Vec<(StepId, String)>, action: u8, pick: u8) {
    let before = world.run().clone();
    let ended_before = before.has_ended();
    let pick_of = |n: usize| pick as usize % n.max(1);
    let ready: Vec<StepId> = before
        .steps
        .iter()
        .filter(|s| s.state == Some(StepState::Ready))
        .map(|s| s.id.clone())
        .collect();
    let item =
        (!before.work_items.is_empty()).then(|| before.work_items[pick_of(before.work_items.len())].clone());
    let token = (!tokens.is_empty()).then(|| tokens[pick_of(tokens.len())].clone());
    let result = match action {
        0 | 11 => {
            let step = ready
                .get(pick_of(ready.len()))
                .cloned()
                .unwrap_or_else(|| StepId::from_wire("nope"));
            let who = if action == 0 { "a_one" } else { "a_two" };
            let result = world.claim(agent(who), step.as_str());
            if let Ok(t) = &result {
                tokens.push((step, t.reply.data()["token"].as_str().unwrap().to_string()));
            }
            result
        }
        1 | 2 => {
            let (step, token) = token.unwrap_or_else(|| (StepId::from_wire("nope"), "apt1.x.y".into()));
            let mut submission = if world
                .process
                .process
                .step(&id(step.as_str()))
                .is_some_and(|s| s.work().is_some())
            {
                let next = route(world, step.as_str(), pick);
                good_submission(world, step.as_str(), next.as_deref())
            } else {
                agentprocess_run_actor::machine::Submission::default()
            };
            if action == 2 {
                submission.summary = None;
            }
            let holder = before
                .step(&step)
                .and_then(|s| s.claim.as_ref())
                .map_or("a_one".to_string(), |c| c.holder.clone());
            world.submit(agent(&holder), &token, submission)
        }
        3 | 4 => {
            let (step, token) = token.unwrap_or_else(|| (StepId::from_wire("nope"), "apt1.x.y".into()));
            let holder = before
                .step(&step)
                .and_then(|s| s.claim.as_ref())
                .map_or("a_one".to_string(), |c| c.holder.clone());
            if action == 3 {
                let result = world.apply(Command::Renew {
                    caller: agent(&holder),
                    token,
                    progress: Some("note".into()),
                });
                if let Ok(t) = &result {
                    tokens.push((step, t.reply.data()["token"].as_str().unwrap().to_string()));
                }
                result
            } else {
                world.apply(Command::Escalate {
                    caller: agent(&holder),
                    token,
                    note: "stuck".into(),
                })
            }
        }
        5..=7 => {
            let Some(item) = item else { return };
            let caller = assignee(&item.assigned_to);
            let decision = match (action, item.kind) {
                (5, WorkItemKind::Approve) => Decision::Approved,
                (5, _) => Decision::Completed,
                (6, WorkItemKind::Approve) => Decision::Rejected,
                (6, WorkItemKind::Escalation) => Decision::Returned,
                (6, WorkItemKind::Task) => Decision::Completed,
                _ if pick < 48 => Decision::Failed,
                (_, WorkItemKind::Approve) => Decision::Approved,
                _ => Decision::Completed,
            };
            let submission = if decision == Decision::Completed {
                let next = route(world, item.step.as_str(), pick);
                Some(good_submission(world, item.step.as_str(), next.as_deref()))
            } else {
                None
            };
            let mut decide = world.decide(caller, &item.id, decision);
            if let Some(submission) = submission {
                decide.decide.output = submission.output;
                decide.decide.evidence = Some(submission.evidence);
                decide.decide.next = submission.next;
                decide.decide.reason = submission.reason;
            } else if decision != Decision::Approved {
                decide.decide.note = Some("note".into());
            }
            decide.send()
        }
        8 => {
            world.advance(i64::from(pick) * 600);
            let lapsed: Vec<(StepId, u64)> = world
                .run()
                .steps
                .iter()
                .filter_map(|s| s.claim.as_ref().map(|c| (s.id.clone(), c.lease)))
                .collect();
            for (step, lease) in lapsed {
                world.apply(Command::ClaimExpired { step, lease }).unwrap();
            }
            world.fire_due_timers();
            return check_invariants(world);
        }
        9 => {
            let events: Vec<String> = world
                .process
                .process
                .steps
                .iter()
                .filter_map(|s| match &s.kind {
                    StepKind::WaitFor { event, .. } => Some(event.clone()),
                    _ => None,
                })
                .collect();
            let name = events
                .get(pick_of(events.len()))
                .cloned()
                .unwrap_or_else(|| "noise".into());
            world.apply(Command::SendEvent {
                caller: agent("a_sys"),
                name,
                data: Some(obj(json!({ "n": pick }))),
            })
        }
        10 if pick < 16 => world.apply(Command::Cancel {
            caller: operator(),
            reason: "stop".into(),
        }),
        10 => return,
        // Progress: the natural next move, so that walks go deep.
        _ => {
            let live = before.steps.iter().find_map(|s| {
                let claim = s.claim.as_ref()?;
                let (step, token) = tokens.iter().rev().find(|(step, _)| *step == s.id)?;
                Some((step.clone(), token.clone(), claim.holder.clone()))
            });
            if let Some((step, token, holder)) = live {
                let next = route(world, step.as_str(), pick);
                let submission = good_submission(world, step.as_str(), next.as_deref());
                world.submit(agent(&holder), &token, submission)
            } else if !ready.is_empty() {
                return random_act(world, tokens, 0, pick);
            } else if item.is_some() {
                return random_act(world, tokens, 5, pick);
            } else if before.steps.iter().any(|s| !s.timers.is_empty()) && pick.is_multiple_of(2) {
                return random_act(world, tokens, 8, 255);
            } else {
                return random_act(world, tokens, 9, pick);
            }
        }
    };
    if let Err(refusal) = &result
        && let Some(remembered) = refusal.remember.clone()
    {
        assert_eq!(render::run_data(&remembered), render::run_data(world.run()));
        world.run = Some(*remembered);
    }
    if ended_before {
        let refusal = result.expect_err("every write to an ended run is refused");
        assert_eq!(
            (refusal.code, refusal.issues),
            (ErrorCode::Conflict, vec!["run_ended".to_string()])
        );
        assert_eq!(world.run(), &before, "nothing changes after a run ends");
    }
    check_invariants(world);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_on_every_example_under_random_commands(
        which in 0usize..64,
        actions in proptest::collection::vec((0u8..20, any::<u8>()), 1..80),
    ) {
        let names = runnable_examples();
        let name = &names[which % names.len()];
        let mut world = World::new(example(name));
        world.evaluator = Some(fake_evaluator(which as u8));
        let inputs = serde_json::Value::Object(sample_map(&world.process.process.inputs));
        world.start(mira(), inputs).unwrap();
        // A cap just above the inputs, so that later submissions and events run into it.
        let started_bytes = serde_json::to_vec(&render::run_data(world.run())).unwrap().len();
        world.limits.run_data_bytes = started_bytes + 600 + 40 * usize::from(pick_cap(which));
        let mut tokens = Vec::new();
        for (action, pick) in actions {
            random_act(&mut world, &mut tokens, action, pick);
        }
    }
}
