//! The `parallel-1` profile: fork, join, rework inside a branch and from after the join, and
//! ending the run from a branch (profiles/parallel.md §3–§4).

mod common;

use agentprocess_ids::StepId;
use agentprocess_process::{FieldType, StepKind, Target};
use agentprocess_run_actor::machine::{Decision, ErrorCode, StepState, Submission, Timestamp, render};
use common::*;
use serde_json::{Value, json};

/// A product-launch run (our parallel-1 example) started, with `kickoff` submitted: the fork is open.
fn launch() -> World {
    let bytes = std::fs::read(agentprocess_testkit::example("product-launch")).unwrap();
    let loaded = agentprocess_process::load(&bytes, &agentprocess_process::Offer::EVERYTHING).unwrap();
    let mut process = pinned("product-launch", fields(&[]), Vec::new());
    process.process = loaded.process;
    process.body = loaded.body;
    for role in ["engineering-lead", "marketing-lead", "support-lead"] {
        process.roles.insert(role.to_string(), format!("g_{role}"));
    }
    let mut world = World::new(process);
    world
        .start(
            mira(),
            json!({ "launchId": "L-7", "launchLead": "cmd@acme.example" }),
        )
        .unwrap();
    let token = world.claim_token(agent("a_planner"), "kickoff");
    world
        .submit(
            agent("a_planner"),
            &token,
            Submission {
                output: Some(obj(json!({ "plan": "PLAN-1" }))),
                summary: Some("Plan page up, leads notified.".into()),
                ..Default::default()
            },
        )
        .unwrap();
    world
}

fn complete_lead(world: &mut World, step: &str, field: &str) -> Value {
    let item = world.work_item_on(step);
    let group = format!("g_{}-lead", step.trim_end_matches("_ready"));
    let mut decide = world.decide(
        person("lead@acme.example", &[group.as_str()]),
        &item,
        Decision::Completed,
    );
    decide.decide.output = Some(obj(json!({ field: "Done." })));
    decide.decide.evidence = Some(vec![link("https://status.example.com/L-7")]);
    decide.send().unwrap().reply.data().clone()
}

fn states(view: &Value) -> Vec<Value> {
    view["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["state"].clone())
        .collect()
}

#[test]
fn parallel_1_fork_makes_every_branch_entry_ready_in_one_write() {
    let world = launch();
    let view = world.view();
    assert_eq!(
        states(&view),
        vec![
            json!("done"),
            json!("waiting"),
            json!("waiting"),
            json!("waiting"),
            json!("waiting"),
            Value::Null,
            Value::Null
        ]
    );
    assert_eq!(view["steps"][1]["kind"], "parallel");
    assert_eq!(
        view["workItems"].as_array().unwrap().len(),
        3,
        "three work items open at once"
    );
    assert_eq!(
        view["steps"][2]["due"], "2026-10-06T10:00:00Z",
        "each branch step has its own due clock"
    );
    assert_eq!(view["run"]["state"], "waiting");
    assert!(
        view["data"]["steps"].get("prepare").is_none(),
        "the parallel step records nothing"
    );
}

#[test]
fn parallel_1_the_last_branch_to_join_continues_at_next() {
    let mut world = launch();
    complete_lead(&mut world, "engineering_ready", "engineeringNote");
    let view = complete_lead(&mut world, "marketing_ready", "marketingNote");
    assert_eq!(
        view["steps"][1]["state"], "waiting",
        "a branch that joined early waits for the others"
    );
    assert_eq!(view["steps"][5]["state"], Value::Null);
    let view = complete_lead(&mut world, "support_ready", "supportNote");
    assert_eq!(view["steps"][1]["state"], "done");
    assert_eq!(view["steps"][5]["state"], "waiting");
    assert_eq!(
        view["workItems"][0]["assignedTo"],
        json!({ "person": "cmd@acme.example" })
    );
    let item = world.work_item_on("go_decision");
    let view = world
        .decide(person("cmd@acme.example", &[]), &item, Decision::Approved)
        .send()
        .unwrap()
        .reply
        .data()
        .clone();
    assert_eq!(view["run"]["outcome"], "launched");
}

#[test]
fn parallel_1_a_sibling_completion_stales_an_open_snapshot() {
    let mut world = launch();
    let snapshot = render::snapshot(world.run());
    complete_lead(&mut world, "engineering_ready", "engineeringNote");
    let item = world.work_item_on("marketing_ready");
    let mut decide = world
        .decide(
            person("lead@acme.example", &["g_marketing-lead"]),
            &item,
            Decision::Completed,
        )
        .snapshot(&snapshot);
    decide.decide.output = Some(obj(json!({ "marketingNote": "Done." })));
    decide.decide.evidence = Some(vec![link("x")]);
    assert_eq!(refused(decide.send()).0, ErrorCode::Stale);
}

#[test]
fn parallel_1_rework_from_after_the_join_to_the_parallel_step_forks_again() {
    let mut world = launch();
    complete_lead(&mut world, "engineering_ready", "engineeringNote");
    complete_lead(&mut world, "marketing_ready", "marketingNote");
    complete_lead(&mut world, "support_ready", "supportNote");
    world.advance(7200);
    let item = world.work_item_on("go_decision");
    let view = world
        .decide(person("cmd@acme.example", &[]), &item, Decision::Rejected)
        .note("Security evidence is missing.")
        .send()
        .unwrap()
        .reply
        .data()
        .clone();
    assert_eq!(
        states(&view),
        vec![
            json!("done"),
            json!("waiting"),
            json!("waiting"),
            json!("waiting"),
            json!("waiting"),
            Value::Null,
            Value::Null
        ]
    );
    for step in ["engineering_ready", "marketing_ready", "support_ready"] {
        let record = &view["data"]["steps"][step];
        assert!(record.get("output").is_none(), "{step} has no current value");
        assert_eq!(record["history"].as_array().unwrap().len(), 1);
    }
    assert_eq!(
        view["data"]["steps"]["go_decision"]["note"],
        "Security evidence is missing."
    );
    assert_eq!(
        view["data"]["steps"]["kickoff"]["history"],
        json!([]),
        "steps before the fork keep their record"
    );
    assert_eq!(view["steps"][2]["due"], "2026-10-06T12:00:00Z", "a fresh due");
    complete_lead(&mut world, "engineering_ready", "engineeringNote");
    complete_lead(&mut world, "marketing_ready", "marketingNote");
    let view = complete_lead(&mut world, "support_ready", "supportNote");
    assert_eq!(view["steps"][5]["state"], "waiting");
}

fn two_agent_branches() -> World {
    let process = pinned(
        "two-branches",
        fields(&[]),
        vec![
            step_of(
                "fork",
                StepKind::Parallel {
                    branches: vec![id("a1"), id("b1")],
                },
                to("done"),
            ),
            agent_step(
                "a1",
                work("A one.", &[("text", FieldType::String)], &[], None),
                to("a2"),
            ),
            approve_step(
                "a2",
                "finance-approver",
                Some("a1"),
                None,
                Some(agentprocess_process::Next::Step(Target::Join)),
            ),
            agent_step(
                "b1",
                work("B one.", &[], &[], None),
                Some(agentprocess_process::Next::Step(Target::Join)),
            ),
            finish_step("done", "done"),
        ],
    );
    let mut world = World::new(process);
    world.start(mira(), json!({})).unwrap();
    world
}

fn submit_step(world: &mut World, step: &str, output: Value) {
    let token = world.claim_token(agent("a"), step);
    world
        .submit(
            agent("a"),
            &token,
            Submission {
                output: Some(obj(output)),
                summary: Some("Done.".into()),
                ..Default::default()
            },
        )
        .unwrap();
}

#[test]
fn parallel_1_several_agent_steps_are_ready_at_once() {
    let mut world = two_agent_branches();
    let transition = world.last.clone().unwrap();
    let started_at = Timestamp::from_millis(world.now);
    let ready: Vec<&str> = transition
        .state
        .steps
        .iter()
        .filter(|s| s.state == Some(StepState::Ready) && s.ready_since == Some(started_at))
        .map(|s| s.id.as_str())
        .collect();
    assert_eq!(ready, vec!["a1", "b1"]);
    assert_eq!(world.run_state(), "active");
    assert!(render::agent_work_item(world.run(), &StepId::from_wire("a1")).is_some());
    assert!(render::agent_work_item(world.run(), &StepId::from_wire("b1")).is_some());
    world.claim(agent("x"), "a1").unwrap();
    world.claim(agent("y"), "b1").unwrap();
    assert_eq!(world.step_state("a1"), "claimed");
    assert_eq!(world.step_state("b1"), "claimed");
}

#[test]
fn parallel_1_rework_inside_a_branch_touches_no_sibling() {
    let mut world = two_agent_branches();
    submit_step(&mut world, "b1", json!({}));
    submit_step(&mut world, "a1", json!({ "text": "first" }));
    let item = world.work_item_on("a2");
    let view = world
        .decide(finance(), &item, Decision::Rejected)
        .note("Shorter.")
        .send()
        .unwrap()
        .reply
        .data()
        .clone();
    assert_eq!(view["steps"][0]["state"], "waiting");
    assert_eq!(view["steps"][1]["state"], "ready");
    assert_eq!(view["steps"][2]["state"], Value::Null);
    assert_eq!(
        view["steps"][3]["state"], "done",
        "the sibling branch is untouched"
    );
    assert_eq!(view["data"]["steps"]["b1"]["history"], json!([]));
    submit_step(&mut world, "a1", json!({ "text": "second" }));
    let item = world.work_item_on("a2");
    let view = world
        .decide(finance(), &item, Decision::Approved)
        .send()
        .unwrap()
        .reply
        .data()
        .clone();
    assert_eq!(view["run"]["outcome"], "done");
    assert_eq!(view["steps"][0]["state"], "done");
    assert_eq!(
        view["data"]["steps"]["a1"]["history"][0]["output"],
        json!({ "text": "first" })
    );
}

#[test]
fn parallel_1_a_failed_branch_ends_the_run_and_cancels_its_siblings() {
    let mut world = two_agent_branches();
    let token = world.claim_token(agent("b"), "b1");
    submit_step(&mut world, "a1", json!({ "text": "t" }));
    let item = world.work_item_on("a2");
    let view = world
        .decide(finance(), &item, Decision::Failed)
        .note("Abandon.")
        .send()
        .unwrap()
        .reply
        .data()
        .clone();
    assert_eq!(view["run"]["outcome"], "failed");
    assert_eq!(view["steps"][0]["state"], "cancelled");
    assert_eq!(view["steps"][2]["state"], "failed");
    assert_eq!(view["steps"][3]["state"], "cancelled");
    let (code, issues) = refused(world.submit(agent("b"), &token, Submission::default()));
    assert_eq!(
        (code, issues),
        (ErrorCode::Conflict, vec!["run_ended".to_string()])
    );
}
