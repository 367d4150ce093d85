//! Durable commands per second through the runtime on the embedded store, and memory per cached
//! run and per pending timer. Prints figures; asserts nothing about time.
//!
//! Run with `cargo bench -p agentprocess-run-actor --bench runtime`; `RUNTIME_BENCH_SECONDS`
//! sets the time per throughput scenario (default 5), `RUNTIME_BENCH_READY_STEPS` the open runs
//! whose ready steps a host's index copy holds (default 1,000,000).
//!
//! The command is `renew` with a progress note: a real write that changes the run record (the
//! claim's expiry and token hash), the claim key's lease and the claim-expiry timer entry, and
//! records an idempotency entry. Every command is acknowledged only after the log is synced.

use agentprocess_ids::{OrgId, RunId, StepId};
use agentprocess_run_actor::MirrorLimits;
use agentprocess_run_actor::machine::{Caller, CallerKind, Timestamp};
use agentprocess_run_actor::runtime::{Clock, LocalBlobs, Mode, Runtime, RuntimeConfig, ToolOutcome, Write};
use agentprocess_store::keys::Keys;
use agentprocess_store::{EmbeddedOptions, EmbeddedStore, Store, Txn, TxnOp};
use indexmap::IndexMap;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const MEMORY_CHILD_ENV: &str = "RUNTIME_BENCH_MEMORY_CHILD";
const PROCESS: &str = "---\nname: bench\ndescription: A step an agent works on, then the end.\ninputs:\n  ticket: string\nsteps:\n  - id: work\n    agent: Do the work and report.\n    output:\n      result: string\n    due: 2d\n  - id: done\n    finish: done\n---\n\n# Bench\n\nOne agent step.\n";

fn main() {
    if let Ok(spec) = std::env::var(MEMORY_CHILD_ENV) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (what, count) = spec.split_once(',').expect("what,count");
        let count: usize = count.parse().unwrap();
        match what {
            "runs" => runtime.block_on(memory_per_cached_run(count)),
            "timers" => runtime.block_on(memory_per_timer(count)),
            "mirrored" => runtime.block_on(memory_of_index_copies(count, 4 << 30)),
            "mirror-bounded" => {
                runtime.block_on(memory_of_index_copies(count, MirrorLimits::default().max_bytes))
            }
            _ => panic!("unknown memory measure {what}"),
        }
        return;
    }
    let seconds: u64 = std::env::var("RUNTIME_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        println!("durable commands/s through the runtime (renew with progress), {seconds} s per scenario");
        let duration = Duration::from_secs(seconds);
        throughput(1, 1, duration).await;
        throughput(1, BRANCHES, duration).await;
        throughput(1000, 1, duration).await;
    });
    // Memory is measured in fresh processes: this one's allocator holds on to what was freed.
    let ready_steps = std::env::var("RUNTIME_BENCH_READY_STEPS").unwrap_or_else(|_| "1000000".into());
    for spec in [
        "runs,10000".to_owned(),
        "timers,1000000".to_owned(),
        format!("mirrored,{ready_steps}"),
        format!("mirror-bounded,{ready_steps}"),
    ] {
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .env(MEMORY_CHILD_ENV, &spec)
            .output()
            .expect("memory measuring child");
        print!("{}", String::from_utf8_lossy(&output.stdout));
        eprint!("{}", String::from_utf8_lossy(&output.stderr));
    }
}

/// Agents working at once on one run, each on its own parallel branch.
const BRANCHES: usize = 16;

/// One parallel step with [`BRANCHES`] agent branches: that many claims live on one run.
fn fanout_process() -> String {
    let branches: Vec<String> = (0..BRANCHES).map(|b| format!("b{b}")).collect();
    let mut source = format!(
        "---\nname: fanout\ndescription: Agents work side by side.\nsteps:\n  - id: fan\n    parallel: [{}]\n    next: done\n",
        branches.join(", ")
    );
    for branch in &branches {
        source.push_str(&format!(
            "  - id: {branch}\n    agent: Work on your part.\n    next: join\n"
        ));
    }
    source.push_str("  - id: done\n    finish: done\n---\n\n# Fanout\n");
    source
}

fn agent(i: usize) -> Caller {
    Caller {
        organization: "bench".into(),
        kind: CallerKind::Agent { id: format!("a{i}") },
        operator: false,
    }
}

async fn open(dir: &Path) -> (EmbeddedStore, Runtime) {
    let (store, _) = EmbeddedStore::open(dir.join("store"), EmbeddedOptions::default())
        .await
        .unwrap();
    let config = RuntimeConfig {
        idle_eviction: Duration::from_secs(3600),
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(
        Arc::new(store.clone()),
        Arc::new(LocalBlobs::new(dir.join("blobs"))),
        config,
        Clock::system(),
    );
    runtime
        .publish(&OrgId::from("bench"), PROCESS.as_bytes(), IndexMap::new())
        .await
        .unwrap();
    runtime
        .publish(
            &OrgId::from("bench"),
            fanout_process().as_bytes(),
            IndexMap::new(),
        )
        .await
        .unwrap();
    (store, runtime)
}

/// Starts run `i` and claims its step; returns the run id and the token.
async fn start_and_claim(runtime: &Runtime, i: usize) -> (String, String) {
    let caller = agent(i);
    let view = data(
        runtime
            .execute(
                &caller,
                Write::StartRun {
                    process: "bench".into(),
                    version: None,
                    inputs: json!({ "ticket": format!("T-{i}") }),
                    mode: Mode::Live,
                },
                &format!("start-{i}"),
            )
            .await
            .unwrap(),
    );
    let run = view["run"]["id"].as_str().unwrap().to_string();
    let claimed = data(
        runtime
            .execute(
                &caller,
                Write::Claim {
                    run_id: RunId::from(run.clone()),
                    step: StepId::from_wire("work"),
                },
                &format!("claim-{i}"),
            )
            .await
            .unwrap(),
    );
    (run, claimed["token"].as_str().unwrap().to_string())
}

fn data(outcome: ToolOutcome) -> serde_json::Value {
    match outcome {
        ToolOutcome::Ok(data) => data,
        ToolOutcome::Refused(refusal) => panic!("refused: {refusal}"),
    }
}

/// Starts the fanout run and claims every branch, agent `b` on branch `b`; returns the tokens.
async fn start_fanout(runtime: &Runtime) -> Vec<String> {
    let view = data(
        runtime
            .execute(
                &agent(0),
                Write::StartRun {
                    process: "fanout".into(),
                    version: None,
                    inputs: json!({}),
                    mode: Mode::Live,
                },
                "start-fanout",
            )
            .await
            .unwrap(),
    );
    let run = view["run"]["id"].as_str().unwrap().to_string();
    let mut tokens = Vec::new();
    for b in 0..BRANCHES {
        let claimed = data(
            runtime
                .execute(
                    &agent(b),
                    Write::Claim {
                        run_id: RunId::from(run.clone()),
                        step: StepId::from_wire(format!("b{b}")),
                    },
                    &format!("claim-b{b}"),
                )
                .await
                .unwrap(),
        );
        tokens.push(claimed["token"].as_str().unwrap().to_string());
    }
    tokens
}

/// `runs` runs, with `agents` agents renewing their own claims on each, for `duration`.
async fn throughput(runs: usize, agents: usize, duration: Duration) {
    let dir = tempfile::tempdir().unwrap();
    let (store, runtime) = open(dir.path()).await;
    let mut tokens = Vec::new();
    if agents > 1 {
        tokens = start_fanout(&runtime).await;
    } else {
        for i in 0..runs {
            tokens.push(start_and_claim(&runtime, i).await.1);
        }
    }
    let syncs_before = store.stats().syncs;
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::new();
    let started = Instant::now();
    for (i, token) in tokens.into_iter().enumerate() {
        let (runtime, stop, done) = (runtime.clone(), stop.clone(), done.clone());
        clients.push(tokio::spawn(async move {
            let caller = agent(i);
            let mut token = token;
            let mut latencies = Vec::new();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let sent = Instant::now();
                let renewed = data(
                    runtime
                        .execute(
                            &caller,
                            Write::Renew {
                                token,
                                progress: Some(format!("step {n}")),
                            },
                            &format!("renew-{i}-{n}"),
                        )
                        .await
                        .unwrap(),
                );
                latencies.push(sent.elapsed());
                token = renewed["token"].as_str().unwrap().to_string();
                n += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
            latencies
        }));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    for client in clients {
        latencies.extend(client.await.unwrap());
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let count = done.load(Ordering::Relaxed);
    let syncs = store.stats().syncs - syncs_before;
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "{runs:>5} run(s) x {agents:>2} agent(s): {:>8.0} commands/s  ({count} commands, {syncs} log syncs, {:.1} commands per sync; latency p50 {:?}, p99 {:?})",
        count as f64 / elapsed.as_secs_f64(),
        count as f64 / syncs.max(1) as f64,
        at(0.5),
        at(0.99),
    );
    store.close().await;
}

/// Resident set size of this process, in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Runs are written by one runtime, then a fresh runtime loads them into actors with a read-only
/// command (a claim the machine refuses, which writes nothing): the growth is the actors'.
async fn memory_per_cached_run(count: usize) {
    let dir = tempfile::tempdir().unwrap();
    {
        let (store, runtime) = open(dir.path()).await;
        let mut tasks = Vec::new();
        for chunk in 0..count / 1000 {
            let runtime = runtime.clone();
            tasks.push(tokio::spawn(async move {
                for i in chunk * 1000..(chunk + 1) * 1000 {
                    start_and_claim(&runtime, i).await;
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        store.close().await;
    }
    let (store, runtime) = open(dir.path()).await;
    let runs: Vec<String> = {
        let keys = runtime.keys();
        let found = store
            .range(agentprocess_store::RangeRequest::new(
                keys.runs(&OrgId::from("bench")),
            ))
            .await
            .unwrap();
        found
            .kvs
            .iter()
            .map(|kv| String::from_utf8_lossy(kv.key.rsplit(|b| *b == b'/').next().unwrap()).to_string())
            .collect()
    };
    let before = rss();
    for (i, run) in runs.iter().enumerate() {
        let outcome = runtime
            .execute(
                &agent(i),
                Write::Claim {
                    run_id: RunId::from(run.clone()),
                    step: StepId::from_wire("work"),
                },
                &format!("probe-{i}"),
            )
            .await
            .unwrap();
        assert!(matches!(outcome, ToolOutcome::Refused(_)));
    }
    let after = rss();
    println!(
        "memory per cached run: {} bytes ({} runs in actors, RSS {} -> {} MiB)",
        (after.saturating_sub(before)) / runtime.live_actors().max(1) as u64,
        runtime.live_actors(),
        before >> 20,
        after >> 20
    );
    store.close().await;
}

/// Timer entries as the runtime writes them, straight into the store: the store's cost per
/// pending timer. The scheduler keeps only a bounded window of them in memory.
async fn memory_per_timer(count: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = EmbeddedStore::open(dir.path(), EmbeddedOptions::default())
        .await
        .unwrap();
    let keys = Keys::new("default");
    let base = Timestamp::from_millis(1_900_000_000_000);
    let before = rss();
    let per_txn = 100;
    for chunk in 0..count / per_txn {
        let ops = (0..per_txn).map(|j| {
            let i = chunk * per_txn + j;
            TxnOp::put(
                keys.timer(
                    u64::try_from(base.as_millis()).unwrap() + i as u64,
                    &OrgId::from("bench"),
                    &RunId::from(format!("r_{:020x}", i * 7919)),
                    "due.1.work",
                ),
                Vec::new(),
            )
        });
        store.txn(Txn::new().and_then(ops)).await.unwrap();
    }
    let after = rss();
    println!(
        "memory per pending timer (store index entry): {} bytes ({count} timers, RSS {} -> {} MiB)",
        (after.saturating_sub(before)) / count as u64,
        before >> 20,
        after >> 20
    );
    store.close().await;
}

/// `count` open runs, each with its step ready, in the store; then a host whose copies may hold
/// `max_bytes` reads an agent's `get_work` page, and its copy of the ready-step index fills (or
/// stops at the bound): the growth is the copy's.
async fn memory_of_index_copies(count: usize, max_bytes: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = EmbeddedStore::open(dir.path().join("store"), EmbeddedOptions::default())
        .await
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(store);
    let organization = OrgId::from("bench");
    let keys = Keys::new("default");
    // One real ready step, its index entry copied under `count` runs' keys.
    let writer = Runtime::new(
        store.clone(),
        Arc::new(LocalBlobs::new(dir.path().join("blobs"))),
        RuntimeConfig::default(),
        Clock::system(),
    );
    writer
        .publish(&organization, PROCESS.as_bytes(), IndexMap::new())
        .await
        .unwrap();
    data(
        writer
            .execute(
                &agent(0),
                Write::StartRun {
                    process: "bench".into(),
                    version: None,
                    inputs: json!({ "ticket": "T-0" }),
                    mode: Mode::Live,
                },
                "start-0",
            )
            .await
            .unwrap(),
    );
    drop(writer);
    let ready = store
        .range(agentprocess_store::RangeRequest::new(
            keys.ready_steps(&organization),
        ))
        .await
        .unwrap();
    let entry = ready
        .kvs
        .first()
        .expect("the started run's step is ready")
        .value
        .clone();
    for chunk in 0..count.div_ceil(100) {
        let ops = (chunk * 100..((chunk + 1) * 100).min(count)).map(|i| {
            TxnOp::put(
                keys.ready_step(
                    &organization,
                    1_900_000_000_000 + i as u64,
                    &RunId::from(format!("r_{:032x}", i * 7919)),
                    &StepId::from_wire("work"),
                ),
                entry.clone(),
            )
        });
        store.txn(Txn::new().and_then(ops)).await.unwrap();
    }
    let config = RuntimeConfig {
        index_mirror: Some(MirrorLimits {
            max_bytes,
            ..MirrorLimits::default()
        }),
        ..RuntimeConfig::default()
    };
    let reader = Runtime::new(
        store.clone(),
        Arc::new(LocalBlobs::new(dir.path().join("blobs"))),
        config,
        Clock::system(),
    );
    // The embedded store's page cache lives in this process too: warm it with one read of the
    // whole index first, so that the growth measured is the copy's.
    let mut start = keys.ready_steps(&organization).start;
    loop {
        let range = agentprocess_store::KeyRange {
            start: start.clone(),
            end: keys.ready_steps(&organization).end,
        };
        let page = store
            .range(agentprocess_store::RangeRequest::new(range).with_limit(512))
            .await
            .unwrap();
        match page.kvs.last() {
            Some(last) if page.more => {
                start = last.key.clone();
                start.push(0);
            }
            _ => break,
        }
    }
    let before = rss();
    let started = Instant::now();
    let mut peak = before;
    loop {
        reader
            .get_work(&agent(1), agentprocess_service::GetWork::default())
            .await
            .unwrap();
        peak = peak.max(rss());
        let held = reader.index_mirror_bytes().unwrap();
        if held > 0 || started.elapsed() > Duration::from_secs(20) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A copy past its bound stops filling and retries 30 s later: measure after its entries went.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss();
    let held = reader.index_mirror_bytes().unwrap();
    println!(
        "index copy, {count} ready steps (entries of {} bytes), bound {} MiB: {} after {:.1} s; \
         {} bytes counted ({} per entry); RSS {} -> {} MiB (peak {} MiB)",
        entry.len(),
        max_bytes >> 20,
        if held > 0 {
            "whole"
        } else {
            "not kept (past its bound)"
        },
        started.elapsed().as_secs_f64(),
        held,
        held / count.max(1),
        before >> 20,
        after >> 20,
        peak >> 20,
    );
}
