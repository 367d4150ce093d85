//! Spec §4 for every kind of write: a retry with the same `requestId` and arguments is answered
//! the first result byte for byte (the claim's token included), also by a runtime that starts
//! cold over the same store, and other arguments under that `requestId` are a `conflict`.

mod runtime_support;

use agentprocess_run_actor::machine::{Caller, ErrorCode, RunId, StepId};
use agentprocess_run_actor::runtime::{Clock, LocalBlobs, Runtime, RuntimeConfig, ToolOutcome, Upload};
use agentprocess_run_actor::runtime::{Decision, Mode, Submission, Write};
use indexmap::IndexMap;
use runtime_support::*;
use serde_json::{Value, json};
use std::sync::Arc;

/// A wait for an event, an agent step and an approval: every kind of write has a place.
const SOURCE: &str = "---
name: replays
description: Every kind of write, for the replay tests.
inputs:
  ticket: string
steps:
  - id: signal
    wait_for: go
  - id: work
    agent: Read the ticket and report what was done.
    output:
      result: string
      hours: number
  - id: review
    person: desk
    approve: Check the result against the ticket.
  - id: done
    finish: done
---

# Replays

Every run view and claim result carries this body. A replay must carry it too, in its place.
";

/// One write as it was first made, with its first answer.
struct Made {
    kind: &'static str,
    caller: Caller,
    call: Call,
    request_id: String,
    /// The first answer, serialized.
    first: String,
}

#[derive(Clone)]
enum Call {
    Write(Write),
    Upload(Upload),
}

async fn call(runtime: &Runtime, caller: &Caller, call: Call, request_id: &str) -> ToolOutcome {
    match call {
        Call::Write(write) => runtime.execute(caller, write, request_id).await,
        Call::Upload(upload) => runtime.upload(caller, upload, request_id).await,
    }
    .expect("no infrastructure error")
}

/// Makes `call` and keeps its first answer.
async fn make(
    runtime: &Runtime,
    made: &mut Vec<Made>,
    kind: &'static str,
    caller: &Caller,
    what: Call,
    request_id: &str,
) -> Value {
    let answer = ok(call(runtime, caller, what.clone(), request_id).await);
    made.push(Made {
        kind,
        caller: caller.clone(),
        call: what,
        request_id: request_id.into(),
        first: serde_json::to_string(&answer).unwrap(),
    });
    answer
}

fn operator() -> Caller {
    let mut caller = person("op@acme.example", &[]);
    caller.operator = true;
    caller
}

fn start(ticket: &str) -> Call {
    Call::Write(Write::StartRun {
        process: "replays".into(),
        version: None,
        inputs: json!({ "ticket": ticket }),
        mode: Mode::Live,
    })
}

fn go(run: &RunId) -> Call {
    Call::Write(Write::SendEvent {
        run_id: run.clone(),
        name: "go".into(),
        data: Some(object(json!({ "by": "the test" }))),
    })
}

fn claim_work(run: &RunId) -> Call {
    Call::Write(Write::Claim {
        run_id: run.clone(),
        step: StepId::from_wire("work"),
    })
}

/// Every kind of write, made once on `runtime`, each with its first answer.
async fn every_kind_of_write(runtime: &Runtime) -> Vec<Made> {
    let mut made = Vec::new();
    let worker = agent("a1");
    let reviewer = person("rae@acme.example", &["g_desk"]);

    let run = run_id(&make(runtime, &mut made, "start_run", &worker, start("T-1"), "s-1").await);
    make(runtime, &mut made, "send_event", &worker, go(&run), "e-1").await;
    let claimed = make(runtime, &mut made, "claim", &worker, claim_work(&run), "c-1").await;
    let renew = Call::Write(Write::Renew {
        token: claimed["token"].as_str().expect("a token").into(),
        progress: Some("Half way.".into()),
    });
    let renewed = make(runtime, &mut made, "renew", &worker, renew, "r-1").await;
    let submit = Call::Write(Write::Submit {
        token: renewed["token"].as_str().expect("a new token").into(),
        submission: Submission {
            // A number whose text is not the shortest: the replay keeps it as written.
            output: Some(object(
                serde_json::from_str(r#"{ "result": "restarted the worker", "hours": 1.50 }"#).unwrap(),
            )),
            summary: Some("Restarted it.".into()),
            ..Submission::default()
        },
    });
    let view = make(runtime, &mut made, "submit", &worker, submit, "u-1").await;
    assert_eq!(step_state(&view, "review"), "waiting", "on the desk's approval");
    let item = &view["workItems"][0];
    let decide = Call::Write(Write::Decide {
        run_id: run.clone(),
        work_item: item["id"].as_str().expect("the review's work item").into(),
        snapshot: item["snapshot"].as_str().expect("a snapshot").into(),
        decision: Decision::Approved,
        output: None,
        evidence: None,
        summary: None,
        next: None,
        reason: None,
        note: Some("Looks right.".into()),
    });
    make(runtime, &mut made, "decide", &reviewer, decide, "d-1").await;

    let other = run_id(&make(runtime, &mut made, "start_run", &worker, start("T-2"), "s-2").await);
    make(runtime, &mut made, "send_event", &worker, go(&other), "e-2").await;
    let claimed = make(runtime, &mut made, "claim", &worker, claim_work(&other), "c-2").await;
    let escalate = Call::Write(Write::Escalate {
        token: claimed["token"].as_str().expect("a token").into(),
        note: "The ticket names no customer.".into(),
    });
    make(runtime, &mut made, "escalate", &worker, escalate, "x-2").await;
    let cancel = Call::Write(Write::Cancel {
        run_id: other,
        reason: "A duplicate of T-1.".into(),
    });
    make(runtime, &mut made, "cancel", &operator(), cancel, "k-2").await;

    let upload = Call::Upload(Upload {
        file_name: "notes.txt".into(),
        content_type: "text/plain".into(),
        bytes: b"restarted at 12:00".to_vec(),
    });
    make(runtime, &mut made, "upload", &worker, upload, "f-1").await;
    made
}

async fn replays_byte_for_byte(runtime: &Runtime, made: &[Made]) {
    for write in made {
        let again = match call(runtime, &write.caller, write.call.clone(), &write.request_id).await {
            ToolOutcome::Ok(data) => data,
            ToolOutcome::Refused(refusal) => {
                panic!("{} {}: refused: {refusal}", write.kind, write.request_id)
            }
        };
        assert_eq!(
            serde_json::to_string(&again).unwrap(),
            write.first,
            "{} {}: the replay is the first answer",
            write.kind,
            write.request_id
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_write_replays_its_first_answer_byte_for_byte_and_conflicts_on_other_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    let roles: IndexMap<String, String> = [("desk".to_string(), "g_desk".to_string())].into();
    runtime
        .publish(&ORG.into(), SOURCE.as_bytes(), roles)
        .await
        .unwrap();
    let made = every_kind_of_write(&runtime).await;
    let kinds: Vec<&str> = made.iter().map(|m| m.kind).collect();
    for kind in [
        "start_run",
        "claim",
        "renew",
        "submit",
        "escalate",
        "decide",
        "cancel",
        "send_event",
        "upload",
    ] {
        assert!(kinds.contains(&kind), "{kind} is made");
    }
    replays_byte_for_byte(&runtime, &made).await;

    // A runtime that starts cold over the same store, a minute and a half later: no process
    // cached, no run in memory, and a retried start names another run id (its time part moved).
    let cold = Runtime::new(
        runtime.store().clone(),
        Arc::new(LocalBlobs::new(dir.path().join("blobs"))),
        RuntimeConfig::default(),
        Clock::starting_at(START.plus_seconds(90)),
    );
    replays_byte_for_byte(&cold, &made).await;

    // Another caller is other arguments: the fingerprint names the caller.
    for write in &made {
        let other = match &write.call {
            Call::Upload(upload) => Call::Upload(Upload {
                file_name: "other.txt".into(),
                ..upload.clone()
            }),
            call => call.clone(),
        };
        let mut caller = write.caller.clone();
        caller.operator = !caller.operator;
        let refusal = refused(call(&cold, &caller, other, &write.request_id).await);
        assert_eq!(
            (refusal.code, refusal.issues.clone()),
            (ErrorCode::Conflict, vec!["request_id_reused".to_string()]),
            "{} {}: {refusal}",
            write.kind,
            write.request_id
        );
    }
}

/// A run id begins with its start time, so retries of one start made at different moments
/// name different run ids, and may reach different actors: racing each other on one store, they
/// must still start ONE run and all answer it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_retries_of_one_start_at_different_moments_start_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path()).await;
    // Four runtimes over the one store, each with its own actors and a clock a second apart.
    let runtimes: Vec<Runtime> = (0..4)
        .map(|i| {
            runtime(
                store.clone(),
                &dir.path().join("blobs"),
                Clock::starting_at(START.plus_seconds(i)),
            )
        })
        .collect();
    let roles: IndexMap<String, String> = [("desk".to_string(), "g_desk".to_string())].into();
    runtimes[0]
        .publish(&ORG.into(), SOURCE.as_bytes(), roles)
        .await
        .unwrap();
    let starter = agent("a1");
    let barrier = Arc::new(tokio::sync::Barrier::new(runtimes.len()));
    let mut retries = Vec::new();
    for runtime in &runtimes {
        let (runtime, starter, barrier) = (runtime.clone(), starter.clone(), barrier.clone());
        retries.push(tokio::spawn(async move {
            barrier.wait().await;
            call(&runtime, &starter, start("T-race"), "start-race").await
        }));
    }
    let mut answers = Vec::new();
    for retry in retries {
        answers.push(serde_json::to_string(&ok(retry.await.unwrap())).unwrap());
    }
    assert!(answers.windows(2).all(|pair| pair[0] == pair[1]), "{answers:#?}");
    let listed = ok(runtimes[3]
        .list_runs(&starter, agentprocess_run_actor::runtime::ListRuns::default())
        .await
        .unwrap());
    assert_eq!(listed["items"].as_array().unwrap().len(), 1, "{listed}");
}
