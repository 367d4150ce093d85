//! What the writes of the benchmark processes store as idempotency records, per kind of write:
//! the stored bytes against the JSON record older builds wrote for the same answer. Printed with
//! `--nocapture` for BENCHMARKS.md; the stored record must stay the smaller.

use super::processes::{
    AGENT_STEP, AGENT_STEP_TEXT, APPROVAL, APPROVAL_TEXT, APPROVER_ROLE, APPROVERS_GROUP,
};
use agentprocess_run_actor::machine::{Caller, OrgId, StepId, hex, token};
use agentprocess_run_actor::runtime::{
    Clock, Decision, LocalBlobs, Mode, Runtime, RuntimeConfig, Submission, ToolOutcome, Upload, Write,
};
use agentprocess_store::{EmbeddedOptions, EmbeddedStore, Store};
use serde_json::{Map, Value, json};
use std::sync::Arc;

const ORG: &str = "acme";

/// One write and what it stored.
struct Measured {
    process: &'static str,
    kind: &'static str,
    /// The stored record: both of its values.
    stored: usize,
    /// The record as older builds wrote it: `{fingerprint (hex), runId, at, data}` as JSON.
    json: usize,
}

struct Bench {
    runtime: Runtime,
    measured: Vec<Measured>,
}

impl Bench {
    /// Makes one write and measures the record it stored under `request_id`.
    async fn write(
        &mut self,
        process: &'static str,
        kind: &'static str,
        caller: &Caller,
        write: Write,
        request_id: &str,
    ) -> Value {
        let run_id = match &write {
            Write::StartRun { .. } => None,
            Write::Renew { token, .. } | Write::Submit { token, .. } | Write::Escalate { token, .. } => {
                token::run_id(token).map(str::to_string)
            }
            Write::Claim { run_id, .. }
            | Write::Decide { run_id, .. }
            | Write::Cancel { run_id, .. }
            | Write::SendEvent { run_id, .. } => Some(run_id.to_string()),
        };
        let data = ok(self.runtime.execute(caller, write, request_id).await.unwrap());
        let run_id = run_id.or_else(|| data["run"]["id"].as_str().map(str::to_string));
        self.measure(process, kind, run_id, &data, request_id).await;
        data
    }

    async fn measure(
        &mut self,
        process: &'static str,
        kind: &'static str,
        run_id: Option<String>,
        data: &Value,
        request_id: &str,
    ) {
        let keys = self.runtime.keys();
        let key = keys.idempotency(&ORG.into(), request_id);
        let (record, _) = self.runtime.store().get(&key).await.unwrap();
        let stored = record.expect("a record for every write").value;
        // Under the requestId: the format byte, the fingerprint's 32 bytes and the expiry (ms,
        // big-endian), which names the entry that holds the payload.
        assert_eq!(stored.len(), 41);
        let fingerprint = hex(&stored[1..33]);
        let expires_at_ms = u64::from_be_bytes(stored[33..41].try_into().unwrap());
        let expiry = keys.idempotency_expiry(expires_at_ms, &ORG.into(), request_id);
        let (payload, _) = self.runtime.store().get(&expiry).await.unwrap();
        let payload = payload.expect("a payload for every record").value;
        let mut older = Map::new();
        older.insert("fingerprint".into(), json!(fingerprint));
        if let Some(run_id) = run_id {
            older.insert("runId".into(), json!(run_id));
        }
        older.insert("at".into(), json!(self.runtime.clock().now().to_rfc3339()));
        older.insert("data".into(), data.clone());
        self.measured.push(Measured {
            process,
            kind,
            stored: stored.len() + payload.len(),
            json: serde_json::to_vec(&older).unwrap().len(),
        });
    }
}

fn ok(outcome: ToolOutcome) -> Value {
    match outcome {
        ToolOutcome::Ok(data) => data,
        ToolOutcome::Refused(refusal) => panic!("refused: {refusal}"),
    }
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("not an object"),
    }
}

fn start(process: &str, n: u64) -> Write {
    Write::StartRun {
        process: process.into(),
        version: None,
        inputs: json!({ "n": n }),
        mode: Mode::Live,
    }
}

fn claim(run: &str) -> Write {
    Write::Claim {
        run_id: run.into(),
        step: StepId::from_wire("work"),
    }
}

/// The load generator's submission.
fn submit(token: &str, n: u64) -> Write {
    Write::Submit {
        token: token.into(),
        submission: Submission {
            output: Some(object(json!({ "result": n }))),
            summary: Some("Returned the input number as the result.".into()),
            ..Submission::default()
        },
    }
}

fn token(claimed: &Value) -> String {
    claimed["token"].as_str().expect("a token").to_string()
}

fn run_id(view: &Value) -> String {
    view["run"]["id"].as_str().expect("a run view").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_records_of_the_benchmark_processes_are_smaller_than_the_json_records_before() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::in_memory(EmbeddedOptions::default()));
    let runtime = Runtime::new(
        store,
        Arc::new(LocalBlobs::new(dir.path())),
        RuntimeConfig::default(),
        Clock::system(),
    );
    runtime
        .publish(&OrgId::from(ORG), AGENT_STEP_TEXT.as_bytes(), Default::default())
        .await
        .unwrap();
    let roles = [(APPROVER_ROLE.to_string(), APPROVERS_GROUP.to_string())].into();
    runtime
        .publish(&OrgId::from(ORG), APPROVAL_TEXT.as_bytes(), roles)
        .await
        .unwrap();
    let mut bench = Bench {
        runtime,
        measured: Vec::new(),
    };
    let agent = Caller::agent(ORG, "load-agent-1");
    let person = Caller::person(ORG, "load-person-1@load.example", &[APPROVERS_GROUP]);
    let mut operator = Caller::person(ORG, "load-operator@load.example", &[]);
    operator.operator = true;

    // load-agent-step, as the load generator runs it, and every other write it allows.
    let run = run_id(
        &bench
            .write(AGENT_STEP, "start_run", &agent, start(AGENT_STEP, 1), "s-1")
            .await,
    );
    let event = Write::SendEvent {
        run_id: run.clone().into(),
        name: "ping".into(),
        data: None,
    };
    bench.write(AGENT_STEP, "send_event", &agent, event, "e-1").await;
    let claimed = bench.write(AGENT_STEP, "claim", &agent, claim(&run), "c-1").await;
    let renew = Write::Renew {
        token: token(&claimed),
        progress: Some("half way".into()),
    };
    let renewed = bench.write(AGENT_STEP, "renew", &agent, renew, "r-1").await;
    bench
        .write(AGENT_STEP, "submit", &agent, submit(&token(&renewed), 1), "u-1")
        .await;
    let run = run_id(
        &bench
            .write(AGENT_STEP, "start_run", &agent, start(AGENT_STEP, 2), "s-2")
            .await,
    );
    let claimed = bench.write(AGENT_STEP, "claim", &agent, claim(&run), "c-2").await;
    let escalate = Write::Escalate {
        token: token(&claimed),
        note: "the input is not a number I can use".into(),
    };
    bench.write(AGENT_STEP, "escalate", &agent, escalate, "x-2").await;
    let cancel = Write::Cancel {
        run_id: run.into(),
        reason: "started twice".into(),
    };
    bench.write(AGENT_STEP, "cancel", &operator, cancel, "k-2").await;

    // load-approval: the agent's step, then a person's approval.
    let run = run_id(
        &bench
            .write(APPROVAL, "start_run", &agent, start(APPROVAL, 3), "s-3")
            .await,
    );
    let claimed = bench.write(APPROVAL, "claim", &agent, claim(&run), "c-3").await;
    let view = bench
        .write(APPROVAL, "submit", &agent, submit(&token(&claimed), 3), "u-3")
        .await;
    let item = &view["workItems"][0];
    let decide = Write::Decide {
        run_id: run.into(),
        work_item: item["id"].as_str().unwrap().into(),
        snapshot: item["snapshot"].as_str().unwrap().into(),
        decision: Decision::Approved,
        output: None,
        evidence: None,
        summary: None,
        next: None,
        reason: None,
        note: None,
    };
    bench.write(APPROVAL, "decide", &person, decide, "d-3").await;

    let upload = Upload {
        file_name: "result.txt".into(),
        content_type: "text/plain".into(),
        bytes: b"3".to_vec(),
    };
    let data = ok(bench.runtime.upload(&agent, upload, "f-1").await.unwrap());
    bench.measure("(none)", "upload", None, &data, "f-1").await;

    println!("| process | write | JSON record before (B) | compact record after (B) | after / before |");
    println!("|---|---|---:|---:|---:|");
    for m in &bench.measured {
        println!(
            "| {} | {} | {} | {} | {:.0}% |",
            m.process,
            m.kind,
            m.json,
            m.stored,
            100.0 * m.stored as f64 / m.json as f64
        );
        assert!(
            m.stored < m.json,
            "{} {}: {} stored bytes, {} as JSON",
            m.process,
            m.kind,
            m.stored,
            m.json
        );
    }
    let stored: usize = bench.measured.iter().map(|m| m.stored).sum();
    let json: usize = bench.measured.iter().map(|m| m.json).sum();
    println!(
        "| all {} writes | | {json} | {stored} | {:.0}% |",
        bench.measured.len(),
        100.0 * stored as f64 / json as f64
    );
}
