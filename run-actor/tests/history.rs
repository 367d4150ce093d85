//! A run's history through the actor host: a committed write carries its events in the very
//! record it commits, a refused one adds none, the bound holds, the stored (packed) record and
//! the archive give the history back whole, and `inspect_run` is for operators.

mod runtime_support;

use agentprocess_run_actor::machine::{
    Caller, ErrorCode, HistoryEvent, HistoryKind, Limits, OrgId, RunId, RunState, StepId,
};
use agentprocess_run_actor::packed;
use agentprocess_run_actor::runtime::{
    Clock, LocalBlobs, Runtime, RuntimeConfig, Submission, ToolOutcome, Write,
};
use agentprocess_store::{RangeRequest, Store};
use runtime_support::*;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const ARCHIVE_AFTER: Duration = Duration::from_secs(60);

fn history_runtime(store: Arc<dyn Store>, dir: &Path, limits: Limits) -> Runtime {
    Runtime::new(
        store,
        Arc::new(LocalBlobs::new(dir.join("blobs"))),
        RuntimeConfig {
            archive_ended_runs_after: ARCHIVE_AFTER,
            limits,
            ..RuntimeConfig::default()
        },
        Clock::starting_at(START),
    )
}

fn operator() -> Caller {
    let mut caller = person("ops@acme.test", &["ops"]);
    caller.operator = true;
    caller
}

/// The run's record as the hot store holds it, unpacked and parsed, with its store version.
async fn stored(runtime: &Runtime, run: &RunId) -> (RunState, i64, Vec<u8>) {
    let (record, _) = runtime
        .store()
        .get(&runtime.keys().run(&OrgId::from(ORG), run))
        .await
        .unwrap();
    let record = record.expect("the run is hot");
    let json = packed::unpack(&record.value).unwrap().into_owned();
    let state: RunState = serde_json::from_slice(&json).unwrap();
    (state, record.version, record.value)
}

async fn execute(runtime: &Runtime, caller: &Caller, write: Write, request: &str) -> ToolOutcome {
    runtime.execute(caller, write, request).await.unwrap()
}

/// A defect-triage run with `triage` claimed by `a1`; the run and the claim's token.
async fn claimed_run(runtime: &Runtime) -> (RunId, String) {
    publish_example(runtime, ORG, "defect-triage").await;
    let view = start(
        runtime,
        &agent("starter"),
        "defect-triage",
        json!({ "reportId": "T-1" }),
        "s-1",
    )
    .await;
    let run = run_id(&view);
    let claimed = ok(claim(runtime, &agent("a1"), &run, "triage", "c-1").await);
    (run, claimed["token"].as_str().unwrap().to_string())
}

fn types(history: &Value) -> Vec<String> {
    history["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_committed_write_carries_its_events_in_the_record_it_commits() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir.path().join("store")).await;
    let runtime = history_runtime(store, dir.path(), Limits::default());
    let (run, token) = claimed_run(&runtime).await;
    let (_, version_before, _) = stored(&runtime, &run).await;

    let escalated = execute(
        &runtime,
        &agent("a1"),
        Write::Escalate {
            token,
            note: "The logs are gone.".into(),
        },
        "e-1",
    )
    .await;
    ok(escalated);

    // One commit: the record that opened the escalation's work item holds its event too.
    let (state, version, bytes) = stored(&runtime, &run).await;
    assert!(version > version_before);
    assert_eq!(state.work_items.len(), 1);
    let last = state.history.last().unwrap();
    assert_eq!(last.by, "a1");
    assert_eq!(
        last.kind,
        HistoryKind::Escalated {
            step: StepId::from_wire("triage"),
            work_item: state.work_items[0].id.clone(),
            note: "The logs are gone.".into(),
        }
    );
    // The stored form is packed, and the history round-trips through it.
    assert_eq!(bytes[0], 0x01, "the record is stored LZ4-packed");
    let history = ok(runtime.run_history(&agent("reader"), &run).await.unwrap());
    let read_back: Vec<HistoryEvent> = serde_json::from_value(history["events"].clone()).unwrap();
    assert_eq!(read_back, state.history);
    assert_eq!(types(&history), ["started", "claimed", "escalated"]);
    assert_eq!(history["runId"], run.as_str());
    assert_eq!(history["dropped"], 0);
}

#[tokio::test]
async fn a_refused_write_adds_nothing_to_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir.path().join("store")).await;
    let runtime = history_runtime(store, dir.path(), Limits::default());
    let (run, _) = claimed_run(&runtime).await;
    let (before, version_before, _) = stored(&runtime, &run).await;

    // Another agent's claim on the claimed step, and an agent's cancel: both refused.
    let conflict = refused(claim(&runtime, &agent("a2"), &run, "triage", "c-2").await);
    assert_eq!(conflict.code, ErrorCode::Conflict);
    let cancel = Write::Cancel {
        run_id: run.clone(),
        reason: "no".into(),
    };
    let forbidden = refused(execute(&runtime, &agent("a2"), cancel, "x-1").await);
    assert_eq!(forbidden.code, ErrorCode::Forbidden);

    let (after, version, _) = stored(&runtime, &run).await;
    assert_eq!(version, version_before, "nothing was written");
    assert_eq!(after.history, before.history);
}

#[tokio::test]
async fn the_history_keeps_the_bound_and_counts_what_it_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir.path().join("store")).await;
    let limits = Limits {
        history_events: 3,
        ..Limits::default()
    };
    let runtime = history_runtime(store, dir.path(), limits);
    let (run, mut token) = claimed_run(&runtime).await;
    for i in 0..3 {
        let renew = Write::Renew {
            token: token.clone(),
            progress: Some(format!("part {i}")),
        };
        let renewed = ok(execute(&runtime, &agent("a1"), renew, &format!("r-{i}")).await);
        token = renewed["token"].as_str().unwrap().to_string();
    }
    // started, claimed and three renewals: the three newest stay, two were dropped.
    let history = ok(runtime.run_history(&agent("reader"), &run).await.unwrap());
    assert_eq!(types(&history), ["renewed", "renewed", "renewed"]);
    assert_eq!(history["events"][0]["progress"], "part 0");
    assert_eq!(history["dropped"], 2);
    let (state, _, _) = stored(&runtime, &run).await;
    assert_eq!(state.history_dropped, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archived_runs_history_reads_back_whole_from_the_archive() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir.path().join("store")).await;
    let runtime = history_runtime(store.clone(), dir.path(), Limits::default());
    let (run, token) = claimed_run(&runtime).await;
    let escalate = Write::Escalate {
        token,
        note: "Cannot reproduce.".into(),
    };
    ok(execute(&runtime, &agent("a1"), escalate, "e-1").await);
    let view = ok(runtime.get_run(&operator(), &run).await.unwrap());
    let work_item = view["workItems"][0]["id"].as_str().unwrap().to_string();
    let snapshot = view["workItems"][0]["snapshot"].as_str().unwrap().to_string();
    let returned = Write::Decide {
        run_id: run.clone(),
        work_item,
        snapshot,
        decision: agentprocess_run_actor::runtime::Decision::Returned,
        output: None,
        evidence: None,
        summary: None,
        next: None,
        reason: None,
        note: Some("Try the staging logs.".into()),
    };
    ok(execute(&runtime, &operator(), returned, "d-1").await);
    let claimed = ok(claim(&runtime, &agent("a2"), &run, "triage", "c-2").await);
    let submit = Write::Submit {
        token: claimed["token"].as_str().unwrap().to_string(),
        submission: Submission {
            next: Some("qa_reproduce".into()),
            ..triage_findings()
        },
    };
    ok(execute(&runtime, &agent("a2"), submit, "s-2").await);
    let cancel = Write::Cancel {
        run_id: run.clone(),
        reason: "Duplicate report.".into(),
    };
    ok(execute(&runtime, &operator(), cancel, "x-1").await);
    let before = ok(runtime.run_history(&agent("reader"), &run).await.unwrap());
    assert_eq!(
        types(&before),
        [
            "started",
            "claimed",
            "escalated",
            "returned",
            "claimed",
            "submitted",
            "cancelled",
            "ended"
        ]
    );

    runtime.clock().advance(ARCHIVE_AFTER);
    runtime.fire_timer(&ORG.into(), &run, "archive").await.unwrap();
    let (hot, _) = store
        .get(&runtime.keys().run(&OrgId::from(ORG), &run))
        .await
        .unwrap();
    assert!(hot.is_none(), "the run left the hot store");
    let idle = store
        .range(RangeRequest::new(
            runtime.keys().run_claims(&OrgId::from(ORG), &run),
        ))
        .await
        .unwrap();
    assert!(idle.kvs.is_empty());

    let after = ok(runtime.run_history(&agent("reader"), &run).await.unwrap());
    assert_eq!(after, before);
    let notes: Vec<&str> = after["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["note"].as_str())
        .collect();
    assert_eq!(notes, ["Cannot reproduce.", "Try the staging logs."]);
    let inspected = ok(runtime.inspect_run(&operator(), &run).await.unwrap());
    assert_eq!(inspected["run"]["state"], "cancelled");
    assert_eq!(inspected["run"]["end"]["note"], "Duplicate report.");
}

#[tokio::test]
async fn an_inspection_names_the_claim_holder_for_operators_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir.path().join("store")).await;
    let runtime = history_runtime(store, dir.path(), Limits::default());
    let (run, _) = claimed_run(&runtime).await;

    let inspected = ok(runtime.inspect_run(&operator(), &run).await.unwrap());
    let triage = &inspected["steps"][0];
    assert_eq!(triage["state"], "claimed");
    assert_eq!(triage["claim"]["holder"], "a1");
    let (state, _, _) = stored(&runtime, &run).await;
    let claim = state.steps[0].claim.as_ref().unwrap();
    assert_eq!(triage["claim"]["expiresAt"], claim.expires_at.to_rfc3339());
    assert_eq!(triage["leaseExpiries"], 0);

    for caller in [agent("a1"), person("mira@acme.test", &["g_qa-lead"])] {
        let refusal = refused(runtime.inspect_run(&caller, &run).await.unwrap());
        assert_eq!(refusal.code, ErrorCode::Forbidden);
    }
    let unknown = refused(
        runtime
            .inspect_run(&operator(), &RunId::from("r_none"))
            .await
            .unwrap(),
    );
    assert_eq!(unknown.code, ErrorCode::NotFound);
    let unknown = refused(
        runtime
            .run_history(&agent("a1"), &RunId::from("r_none"))
            .await
            .unwrap(),
    );
    assert_eq!(unknown.code, ErrorCode::NotFound);
    // Another organization's caller finds no such run.
    let elsewhere = refused(
        runtime
            .run_history(&in_org(agent("a1"), "globex"), &run)
            .await
            .unwrap(),
    );
    assert_eq!(elsewhere.code, ErrorCode::NotFound);
}

/// The load generator's one-step process, as `agentprocess load` publishes it.
const LOAD_AGENT_STEP: &str = "---
name: load-agent-step
description: One agent step with a small output, then finish. Published by the load generator.
inputs:
  n: number
steps:
  - id: work
    agent: Return the number n from the inputs as the result.
    output:
      result: number
  - id: done
    finish: done
---

# Load: one agent step

The load generator starts this process, claims the step and submits it, as fast as the server
takes it.
";

/// LZ4 with the size prepended, as the run record is stored (see `packed`).
fn packed_len(json: &[u8]) -> usize {
    1 + lz4_flex::block::compress_prepend_size(json).len()
}

/// What the history adds to the stored record of a finished run of the load generator's
/// process (start, claim, submit, end): printed with `--nocapture`, and bounded here so that a
/// change that bloats it fails.
#[tokio::test]
async fn the_history_of_a_finished_load_run_costs_a_few_hundred_bytes_of_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir.path().join("store")).await;
    let runtime = history_runtime(store, dir.path(), Limits::default());
    runtime
        .publish(&OrgId::from(ORG), LOAD_AGENT_STEP.as_bytes(), Default::default())
        .await
        .unwrap();
    let agent = agent("load-agent-1");
    let view = start(&runtime, &agent, "load-agent-step", json!({ "n": 1 }), "s-1").await;
    let run = run_id(&view);
    let claimed = ok(claim(&runtime, &agent, &run, "work", "c-1").await);
    let submit = Write::Submit {
        token: claimed["token"].as_str().unwrap().to_string(),
        submission: Submission {
            output: Some(object(json!({ "result": 1 }))),
            summary: Some("Returned the input number as the result.".into()),
            ..Submission::default()
        },
    };
    let done = ok(execute(&runtime, &agent, submit, "u-1").await);
    assert_eq!(done["run"]["state"], "ended");

    let (state, _, stored_bytes) = stored(&runtime, &run).await;
    assert_eq!(state.history.len(), 4, "started, claimed, submitted, ended");
    let with = serde_json::to_vec(&state).unwrap();
    let mut without_history = state.clone();
    without_history.history.clear();
    let without = serde_json::to_vec(&without_history).unwrap();
    println!(
        "load-agent-step, finished: record JSON {} B without history, {} B with (+{}); \
         stored (LZ4) {} B without, {} B with (+{})",
        without.len(),
        with.len(),
        with.len() - without.len(),
        packed_len(&without),
        stored_bytes.len(),
        stored_bytes.len() - packed_len(&without),
    );
    assert_eq!(stored_bytes.len(), packed_len(&with));
    assert!(
        with.len() - without.len() < 512,
        "{} B of history",
        with.len() - without.len()
    );
}
