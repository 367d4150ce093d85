//! Properties over arbitrary command sequences: the state invariants hold after every command,
//! work appears only along declared steps, nothing changes after a run ends, and `apply` is
//! deterministic (checked by the harness on every command).

mod common;

use agentprocess_process::StepKind;
use agentprocess_run_actor::machine::{
    Code, Command, Decision, RunState, StepState, TimerKind, WorkItemKind, render,
};
use common::*;
use proptest::prelude::*;
use serde_json::json;

fn check_invariants(world: &World) {
    let run = world.run();
    let process = &world.process.process;
    for step in &run.steps {
        let declared = process.step(&id(&step.id)).expect("run steps are declared steps");
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
    }
    for item in &run.work_items {
        let step = run.step(&item.step).unwrap();
        assert_eq!(step.work_item.as_deref(), Some(item.id.as_str()));
        let declared = process.step(&id(&item.step)).unwrap();
        let fits = match item.kind {
            WorkItemKind::Task => matches!(declared.kind, StepKind::Task { .. }),
            WorkItemKind::Approve => matches!(declared.kind, StepKind::Approve { .. }),
            WorkItemKind::Escalation => matches!(declared.kind, StepKind::Agent { .. }),
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
            let leases: Vec<(String, u64)> = world
                .run()
                .steps
                .iter()
                .filter_map(|s| s.claim.as_ref().map(|c| (s.id.clone(), c.lease)))
                .collect();
            for (step, lease) in leases {
                world.apply(Command::ClaimExpired { step, lease }).unwrap();
            }
            world.fire_due_timers();
            let ignored = world
                .apply(Command::TimerFired {
                    step: "approve".into(),
                    kind: TimerKind::Due,
                    generation: 9999,
                })
                .unwrap();
            assert!(ignored.effects.is_empty());
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
            assert_eq!(refusal.code, Code::Conflict);
            assert_eq!(refusal.issues, vec!["run_ended".to_string()]);
        }
        assert_eq!(world.run(), &before, "nothing changes after a run ends");
    }
    check_invariants(world);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

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
