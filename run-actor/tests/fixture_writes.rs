//! Runs written straight into the store (`fixtures::run_writes`) hold exactly the keys and values
//! their actor writes for the same state, and an actor takes such a run up like any other.

mod runtime_support;

use agentprocess_run_actor::fixtures::{self, FixtureError};
use agentprocess_run_actor::machine::{
    self, Assignment, Caller, Command, Ctx, NoUploads, OrgId, PinnedProcess, Reply, RunId, RunState,
    StartRun, StepId,
};
use agentprocess_run_actor::runtime::{Decision, GetWork, Runtime, RuntimeConfig, Submission, Write};
use agentprocess_store::keys::KeyFamily;
use agentprocess_store::{KeyRange, RangeRequest, Txn, TxnOp};
use indexmap::IndexMap;
use runtime_support::{START, agent, claim, fresh, object, ok, person, run_id, start, step_state};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// An agent step, then an approval with a due date (so the waiting run has a timer), then finish.
const PROCESS: &str = "---
name: write-up
description: An agent writes, a person approves.
inputs:
  topic: string
steps:
  - id: write
    agent: Write about the topic.
    output:
      text: string
  - id: approve
    person: editor
    approve: Approve the text.
    due: 2h
  - id: done
    finish: published
---

# Write-up
";

fn acme() -> OrgId {
    OrgId::from(runtime_support::ORG)
}

async fn published(runtime: &Runtime) -> Arc<PinnedProcess> {
    let roles: IndexMap<String, String> = [("editor".to_string(), "editors".to_string())].into();
    let version = runtime.publish(&acme(), PROCESS.as_bytes(), roles).await.unwrap();
    fixtures::pinned_process(runtime.catalog(), &acme(), "write-up", version)
        .await
        .unwrap()
        .expect("published")
}

fn written_text() -> Submission {
    Submission {
        output: Some(object(json!({ "text": "Done." }))),
        summary: Some("Wrote it.".into()),
        ..Submission::default()
    }
}

/// Every key of the run's state families (record, indexes, timers, claims) with its value.
async fn state_keys(runtime: &Runtime) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let found = runtime
        .store()
        .range(RangeRequest::new(KeyRange::from(Vec::new())))
        .await
        .unwrap();
    found
        .kvs
        .into_iter()
        .filter(|kv| {
            runtime.keys().family_of(&kv.key).is_some_and(|owner| {
                matches!(
                    owner.family,
                    KeyFamily::Run
                        | KeyFamily::ReadyStep
                        | KeyFamily::WorkItem
                        | KeyFamily::ProcessRun
                        | KeyFamily::ProcessRunInput
                        | KeyFamily::Timer
                        | KeyFamily::Claim
                )
            })
        })
        .map(|kv| (kv.key, kv.value))
        .collect()
}

/// The transition of a `start_run` by agent `fixture` of a run of `pinned` (`topic: tides`), at
/// [`START`] with a seed of `seed` bytes.
fn started(pinned: &PinnedProcess, seed: u8) -> machine::Transition {
    let config = RuntimeConfig::default();
    let ctx = Ctx {
        now: START,
        seed: [seed; 32],
        limits: config.limits,
        person_format: config.person_format,
        escalate_to: &Assignment::Operators { also: None },
        uploads: &NoUploads,
    };
    machine::apply(
        pinned,
        None,
        Command::StartRun(StartRun {
            run_id: machine::start_run_id(ctx.seed, START),
            caller: agent("fixture"),
            inputs: json!({ "topic": "tides" }),
            mode: machine::Mode::Live,
        }),
        &ctx,
    )
    .unwrap()
}

/// `fixtures::run_writes` of `run` at [`START`] with the default settings, without records of
/// the calls that made it.
fn writes_without_answers(
    runtime: &Runtime,
    pinned: &PinnedProcess,
    run: &RunState,
) -> Result<fixtures::RunWrites, FixtureError> {
    fixtures::run_writes(
        runtime.keys(),
        &RuntimeConfig::default(),
        pinned,
        run,
        Vec::new(),
        START,
    )
}

fn puts(writes: &fixtures::RunWrites) -> BTreeMap<Vec<u8>, Vec<u8>> {
    writes
        .ops
        .iter()
        .map(|op| match op {
            TxnOp::Put { key, value, .. } => (key.clone(), value.clone()),
            other => panic!("a new run only puts: {other:?}"),
        })
        .collect()
}

/// The writes of a state equal, key for key and byte for byte, what the actor stored for it
/// after `start_run`, `claim` and `submit` (the run now waits on a person, with a due timer).
#[tokio::test]
async fn a_run_written_directly_holds_exactly_what_its_actor_stored() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    let pinned = published(&runtime).await;
    let writer = agent("a1");
    let view = start(&runtime, &writer, "write-up", json!({ "topic": "tides" }), "s-1").await;
    let run = run_id(&view);
    claim_and_submit(&runtime, &writer, &run).await;

    let stored = state_keys(&runtime).await;
    let (record, _) = runtime
        .store()
        .get(&runtime.keys().run(&acme(), &run))
        .await
        .unwrap();
    let record = record.unwrap().value;
    let json = agentprocess_run_actor::packed::unpack(&record)
        .unwrap()
        .into_owned();
    // The run record is stored packed: smaller than its JSON.
    assert!(
        record.len() < json.len(),
        "{} bytes stored for {} of JSON",
        record.len(),
        json.len()
    );
    let state: RunState = serde_json::from_slice(&json).unwrap();
    let writes = writes_without_answers(&runtime, &pinned, &state).unwrap();
    let planned = puts(&writes);
    let families: Vec<KeyFamily> = planned
        .keys()
        .map(|key| runtime.keys().family_of(key).unwrap().family)
        .collect();
    assert!(families.contains(&KeyFamily::WorkItem), "{families:?}");
    assert!(families.contains(&KeyFamily::Timer), "{families:?}");
    assert!(families.contains(&KeyFamily::ProcessRunInput), "{families:?}");
    assert_eq!(planned, stored);
    assert_eq!(writes.compares.len(), 1, "only: no such run yet");
}

/// A run built with the machine and written directly is seen by `get_work`, claimed, submitted
/// and approved through the runtime, and its indexes follow to the end: its record, its
/// `list_runs` entry and the timer that moves it to the archive.
#[tokio::test]
async fn a_run_written_directly_is_taken_up_by_its_actor() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    let pinned = published(&runtime).await;
    let started = started(&pinned, 9).state;
    let writes = writes_without_answers(&runtime, &pinned, &started).unwrap();
    let committed = runtime
        .store()
        .txn(Txn::new().when(writes.compares).and_then(writes.ops))
        .await
        .unwrap();
    assert!(committed.succeeded);

    let writer = agent("a1");
    let work = ok(runtime.get_work(&writer, GetWork::default()).await.unwrap());
    assert_eq!(work["items"][0]["runId"], started.id.as_str(), "{work}");
    let submitted = claim_and_submit(&runtime, &writer, &started.id).await;
    assert_eq!(step_state(&submitted, "approve"), "waiting");
    let editor = person("ed@acme.test", &["editors"]);
    let inbox = ok(runtime.get_work(&editor, GetWork::default()).await.unwrap());
    let item = &inbox["items"][0]["workItem"];
    let view = ok(runtime
        .execute(
            &editor,
            Write::Decide {
                run_id: started.id.clone(),
                work_item: item["id"].as_str().unwrap().to_string(),
                snapshot: item["snapshot"].as_str().unwrap().to_string(),
                decision: Decision::Approved,
                output: None,
                evidence: None,
                summary: None,
                next: None,
                reason: None,
                note: None,
            },
            "d-1",
        )
        .await
        .unwrap());
    assert_eq!(view["run"]["state"], "ended", "{view}");
    let left: Vec<KeyFamily> = state_keys(&runtime)
        .await
        .keys()
        .map(|key| runtime.keys().family_of(key).unwrap().family)
        .collect();
    assert_eq!(
        left,
        [
            KeyFamily::ProcessRunInput,
            KeyFamily::ProcessRun,
            KeyFamily::Run,
            KeyFamily::Timer
        ],
        "no index entry outlives the run but its listing; its archive timer waits"
    );
}

/// A claim key needs a store lease that only a running actor host holds: a claimed state is
/// refused rather than written without one.
#[tokio::test]
async fn a_claimed_run_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    let pinned = published(&runtime).await;
    let config = RuntimeConfig::default();
    let escalate_to = Assignment::Operators { also: None };
    let ctx = |seed: u8| Ctx {
        now: START,
        seed: [seed; 32],
        limits: config.limits,
        person_format: config.person_format,
        escalate_to: &escalate_to,
        uploads: &NoUploads,
    };
    let writer: Caller = agent("fixture");
    let started = machine::apply(
        &pinned,
        None,
        Command::StartRun(StartRun {
            run_id: machine::start_run_id([1; 32], START),
            caller: writer.clone(),
            inputs: json!({ "topic": "tides" }),
            mode: machine::Mode::Live,
        }),
        &ctx(1),
    )
    .unwrap()
    .state;
    let claimed = machine::apply(
        &pinned,
        Some(&started),
        Command::Claim {
            caller: writer,
            step: StepId::from_wire("write"),
        },
        &ctx(2),
    )
    .unwrap();
    assert!(matches!(claimed.reply, Reply::Claim(Value::Object(_))));
    match writes_without_answers(&runtime, &pinned, &claimed.state) {
        Err(FixtureError::Claimed { step, .. }) => assert_eq!(step, "write"),
        other => panic!("expected a refusal of the claimed run, got {other:?}"),
    }
}

/// `writer` claims the `write` step of `run` and submits the written text; the submit's answer.
async fn claim_and_submit(runtime: &Runtime, writer: &Caller, run: &RunId) -> Value {
    let claimed = ok(claim(runtime, writer, run, "write", "c-1").await);
    let token = claimed["token"].as_str().unwrap().to_string();
    ok(runtime
        .execute(
            writer,
            Write::Submit {
                token,
                submission: written_text(),
            },
            "u-1",
        )
        .await
        .unwrap())
}

/// With the answers of the writes that made it, a fixture run also leaves their idempotency
/// records where a server keeps them, with their expiry entries: a call that reuses one of those
/// `requestId`s is a `conflict` (spec §4), as it would be against a record a real call left.
#[tokio::test]
async fn a_run_written_with_its_answers_leaves_their_idempotency_records() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    let pinned = published(&runtime).await;
    let config = RuntimeConfig::default();
    let started = started(&pinned, 4);
    let answered = vec![fixtures::Answered {
        request_id: "fixture-start-1".into(),
        data: started.reply.data().clone(),
    }];
    let writes =
        fixtures::run_writes(runtime.keys(), &config, &pinned, &started.state, answered, START).unwrap();
    let families: Vec<KeyFamily> = puts(&writes)
        .keys()
        .map(|key| runtime.keys().family_of(key).unwrap().family)
        .collect();
    assert!(families.contains(&KeyFamily::Idempotency), "{families:?}");
    assert!(families.contains(&KeyFamily::IdempotencyExpiry), "{families:?}");
    assert_eq!(writes.compares.len(), 2, "no such run yet, no such record yet");
    let committed = runtime
        .store()
        .txn(Txn::new().when(writes.compares).and_then(writes.ops))
        .await
        .unwrap();
    assert!(committed.succeeded);

    let reused = runtime
        .execute(
            &agent("a1"),
            Write::Claim {
                run_id: started.state.id.clone(),
                step: StepId::from_wire("write"),
            },
            "fixture-start-1",
        )
        .await
        .unwrap();
    let refusal = runtime_support::refused(reused);
    assert_eq!(
        (refusal.code, refusal.issues),
        (
            machine::ErrorCode::Conflict,
            vec!["request_id_reused".to_string()]
        )
    );
}
