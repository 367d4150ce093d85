//! Durable transaction throughput of `EmbeddedStore`, and its memory per key.
//!
//! Each transaction is what a run write looks like: compare the idempotency key absent, then put
//! the run record, the idempotency record and an index entry, about 1 KiB in all. Every
//! transaction is acknowledged only after its batch is committed to disk. Run with
//! `cargo bench -p agentprocess-store --bench throughput`; `STORE_BENCH_SECONDS` sets the time
//! per scenario (default 5).
//!
//! A last scenario writes into a store that already holds 200,000 keys (about 140 MB), from 64
//! writers. The memory scenarios write many keys and report the resident set per key.

use agentprocess_ids::{OrgId, RunId, StepId};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentprocess_store::keys::Keys;
use agentprocess_store::{Compare, EmbeddedOptions, EmbeddedStore, Store, Txn, TxnOp};

fn main() {
    if let Ok(spec) = std::env::var(MEMORY_CHILD_ENV) {
        let (count, value_len) = spec.split_once(',').expect("count,value_len");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(memory_per_key(count.parse().unwrap(), value_len.parse().unwrap()));
        return;
    }
    let seconds: u64 = std::env::var("STORE_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        println!("durable txns/s (compare absent + 3 puts, ~1 KiB each), {seconds} s per run");
        for writers in [1, 64, 1000] {
            throughput(
                writers,
                Duration::from_secs(seconds),
                EmbeddedOptions::default(),
                0,
            )
            .await;
        }
        println!("200,000 keys preloaded");
        throughput(
            64,
            Duration::from_secs(seconds),
            EmbeddedOptions::default(),
            200_000,
        )
        .await;
    });
    // Memory is measured in fresh processes: this one's allocator holds on to what the
    // throughput runs freed.
    for spec in ["200000,1024", "200000,64", "1000000,0"] {
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .env(MEMORY_CHILD_ENV, spec)
            .output()
            .expect("memory measuring child");
        print!("{}", String::from_utf8_lossy(&output.stdout));
    }
}

const MEMORY_CHILD_ENV: &str = "STORE_BENCH_MEMORY_CHILD";

async fn throughput(writers: usize, duration: Duration, options: EmbeddedOptions, preload: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = EmbeddedStore::open(dir.path(), options).await.unwrap();
    let keys = Arc::new(Keys::new("bench"));
    for chunk in (0..preload).collect::<Vec<_>>().chunks(100) {
        let ops = chunk.iter().map(|i| {
            TxnOp::put(
                keys.run(&OrgId::from("acme"), &RunId::from(format!("old-{i:08}"))),
                vec![b'o'; 600],
            )
        });
        store.txn(Txn::new().and_then(ops)).await.unwrap();
    }
    let store: Arc<dyn Store> = Arc::new(store);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for writer in 0..writers {
        let (store, keys, stop, done) = (store.clone(), keys.clone(), stop.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let run_id = RunId::from(format!("run-{writer:05}"));
            let record = vec![b'r'; 800];
            let mut latencies = Vec::new();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let request_id = format!("{run_id}-req-{n}");
                let idem = keys.idempotency(&OrgId::from("acme"), &request_id);
                let txn = Txn::new().when([Compare::absent(idem.clone())]).and_then([
                    TxnOp::put(keys.run(&OrgId::from("acme"), &run_id), record.clone()),
                    TxnOp::put(idem, vec![b'i'; 150]),
                    TxnOp::put(
                        keys.ready_step(
                            &OrgId::from("acme"),
                            1_700_000_000_000 + n,
                            &run_id,
                            &StepId::from_wire("step"),
                        ),
                        vec![b'x'; 40],
                    ),
                ]);
                let t = Instant::now();
                let result = store.txn(txn).await.expect("txn");
                latencies.push(t.elapsed());
                assert!(result.succeeded);
                done.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
            latencies
        }));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let count_at_stop = done.load(Ordering::Relaxed);
    let elapsed = started.elapsed();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    println!(
        "{writers:>5} writers: {:>8.0} txns/s  (latency p50 {:?}, p99 {:?}, max {:?})",
        count_at_stop as f64 / elapsed.as_secs_f64(),
        pct(0.50),
        pct(0.99),
        latencies.last().unwrap(),
    );
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

async fn memory_per_key(count: usize, value_len: usize) {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions {
        // Keep the watch history out of the measure: it is a bounded cache of recent events.
        watch_history_bytes: 0,
        ..EmbeddedOptions::default()
    };
    let (store, _) = EmbeddedStore::open(dir.path(), options.clone()).await.unwrap();
    let keys = Keys::new("bench");
    let before = resident_bytes();
    let mut key_bytes = 0;
    for chunk in (0..count).collect::<Vec<_>>().chunks(100) {
        let ops: Vec<TxnOp> = chunk
            .iter()
            .map(|i| {
                let key = keys.run(&OrgId::from("acme"), &RunId::from(format!("run-{i:08}")));
                key_bytes += key.len();
                TxnOp::put(key, vec![b'v'; value_len])
            })
            .collect();
        store.txn(Txn::new().and_then(ops)).await.unwrap();
    }
    let grown = resident_bytes().saturating_sub(before);
    let payload = (key_bytes + count * value_len) / count;
    let per_key = grown / count as u64;
    println!(
        "memory: {count} keys with {value_len} B values: {per_key} B resident per key \
         ({payload} B of key and value, {} B overhead)",
        per_key.saturating_sub(payload as u64)
    );
    store.close().await;
    let disk_bytes: u64 = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|entry| entry.ok()?.metadata().ok())
        .map(|metadata| metadata.len())
        .sum();
    let started = Instant::now();
    let (store, report) = EmbeddedStore::open(dir.path(), options).await.unwrap();
    println!(
        "        {} MiB resident in all ({} MiB grown), {} MiB on disk; reopened with {} keys in {:.2?}",
        resident_bytes() >> 20,
        grown >> 20,
        disk_bytes >> 20,
        report.keys,
        started.elapsed()
    );
    store.close().await;
}
