//! Shared helpers of the runtime tests: a runtime over an embedded store in a temporary
//! directory, processes published from our example processes, callers.

#![allow(dead_code)]

use agentprocess_run_actor::machine::{Caller, OrgId, RunId, StepId, Timestamp};
use agentprocess_run_actor::runtime::{
    BlobStore, Clock, LocalBlobs, Mode, Runtime, RuntimeConfig, Submission, ToolOutcome, Write,
};
use agentprocess_store::{EmbeddedOptions, EmbeddedStore, Store};
#[allow(unused_imports)]
pub use agentprocess_testkit::run_view::step_state;
use indexmap::IndexMap;
use serde_json::{Map, Value, json};
use std::path::Path;
use std::sync::Arc;

pub const ORG: &str = "acme";

/// 2026-10-01T00:00:00Z.
pub const START: Timestamp = Timestamp::from_millis(1_790_812_800_000);

pub fn agent(id: &str) -> Caller {
    Caller::agent(ORG, id)
}

pub fn person(email: &str, groups: &[&str]) -> Caller {
    Caller::person(ORG, email, groups)
}

pub fn in_org(mut caller: Caller, org: &str) -> Caller {
    caller.organization = org.into();
    caller
}

pub async fn open_store(dir: &Path) -> Arc<dyn Store> {
    let (store, _) = EmbeddedStore::open(dir, EmbeddedOptions::default())
        .await
        .expect("store opens");
    Arc::new(store)
}

pub fn runtime(store: Arc<dyn Store>, blobs: &Path, clock: Clock) -> Runtime {
    Runtime::new(
        store,
        Arc::new(LocalBlobs::new(blobs)),
        RuntimeConfig::default(),
        clock,
    )
}

/// A runtime over a fresh store in `dir`, with time starting at [`START`].
pub async fn fresh(dir: &Path) -> Runtime {
    let store = open_store(&dir.join("store")).await;
    runtime(store, &dir.join("blobs"), Clock::starting_at(START))
}

/// A runtime over a fresh store in `dir` that keeps uploads in `blobs`.
pub async fn fresh_with_blobs(dir: &Path, blobs: Arc<dyn BlobStore>) -> Runtime {
    let store = open_store(&dir.join("store")).await;
    Runtime::new(store, blobs, RuntimeConfig::default(), Clock::starting_at(START))
}

/// Publishes our example process `name` (`examples/NAME`) in `org`, each role bound to `g_<role>`.
pub async fn publish_example(runtime: &Runtime, org: &str, name: &str) {
    let path = agentprocess_testkit::example(name);
    let source = std::fs::read(&path).expect("example reads");
    let loaded =
        agentprocess_process::load(&source, &agentprocess_process::Offer::EVERYTHING).expect("example loads");
    let roles: IndexMap<String, String> = loaded
        .process
        .role_names()
        .into_iter()
        .map(|role| (role.to_string(), format!("g_{role}")))
        .collect();
    runtime
        .publish(&OrgId::from(org), &source, roles)
        .await
        .expect("publishes");
}

pub fn ok(outcome: ToolOutcome) -> Value {
    match outcome {
        ToolOutcome::Ok(data) => data,
        ToolOutcome::Refused(refusal) => panic!("refused: {refusal}"),
    }
}

pub fn refused(outcome: ToolOutcome) -> agentprocess_run_actor::machine::Refusal {
    match outcome {
        ToolOutcome::Ok(data) => panic!("expected a refusal, got {data}"),
        ToolOutcome::Refused(refusal) => refusal,
    }
}

pub async fn start(runtime: &Runtime, caller: &Caller, process: &str, inputs: Value, request: &str) -> Value {
    start_in_mode(runtime, caller, process, inputs, Mode::Live, request).await
}

pub async fn start_in_mode(
    runtime: &Runtime,
    caller: &Caller,
    process: &str,
    inputs: Value,
    mode: Mode,
    request: &str,
) -> Value {
    ok(runtime
        .execute(
            caller,
            Write::StartRun {
                process: process.into(),
                version: None,
                inputs,
                mode,
            },
            request,
        )
        .await
        .expect("no infrastructure error"))
}

pub fn run_id(view: &Value) -> RunId {
    RunId::from(view["run"]["id"].as_str().expect("a run view"))
}

pub async fn claim(
    runtime: &Runtime,
    caller: &Caller,
    run: &RunId,
    step: &str,
    request: &str,
) -> ToolOutcome {
    runtime
        .execute(
            caller,
            Write::Claim {
                run_id: run.clone(),
                step: StepId::from_wire(step),
            },
            request,
        )
        .await
        .expect("no infrastructure error")
}

pub fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("not an object"),
    }
}

/// A `triage` submission for the defect-triage example that routes to `verify_fix`.
pub fn triage_findings() -> Submission {
    Submission {
        output: Some(object(json!({ "findings": "cache", "workaround": "flushed it" }))),
        evidence: vec![agentprocess_run_actor::runtime::EvidenceItem {
            kind: "link".into(),
            reference: "https://tickets.example/1".into(),
        }],
        summary: Some("Flushed the cache; the defect is gone.".into()),
        next: Some("verify_fix".into()),
        reason: Some("Fixed at triage.".into()),
    }
}
