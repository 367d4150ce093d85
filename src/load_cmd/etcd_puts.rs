//! `agentprocess load --etcd-puts`: etcd's raw write rate, the yardstick for a cluster's figures.
//! As many workers as `--agents` each commit one-put transactions (a small value under a key of
//! their own) back to back, for the warmup and then the measured window, through the same etcd
//! client the roles use.

use super::stats::{Window, percentile};
use agentprocess_store::{EtcdOptions, EtcdStore, Store, Txn, TxnOp};
use anyhow::Context;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one measurement found.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PutsReport {
    pub workers: usize,
    pub seconds: f64,
    pub transactions: u64,
    pub transactions_per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub errors: u64,
}

/// Runs the measurement against the etcd at `endpoints`.
pub async fn measure(
    endpoints: &[String],
    workers: usize,
    warmup: Duration,
    duration: Duration,
) -> anyhow::Result<PutsReport> {
    let store: Arc<dyn Store> = Arc::new(
        EtcdStore::connect(endpoints, EtcdOptions::default())
            .await
            .with_context(|| format!("cannot reach etcd at {}", endpoints.join(",")))?,
    );
    let window = Window::after_warmup(Instant::now(), warmup, duration);
    let until = Instant::now() + warmup + duration;
    let mut tasks = Vec::new();
    for worker in 0..workers {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0u64;
            let value = vec![b'x'; 256];
            let mut n = 0u64;
            while Instant::now() < until {
                n += 1;
                let key = format!("agentprocess-raw-puts/{worker:04}/{:08}", n % 1000);
                let started = Instant::now();
                let outcome = store
                    .txn(Txn::new().and_then([TxnOp::put(key.into_bytes(), value.clone())]))
                    .await;
                if window.contains(started) {
                    match outcome {
                        Ok(_) => {
                            latencies.push(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX))
                        }
                        Err(_) => errors += 1,
                    }
                }
            }
            (latencies, errors)
        }));
    }
    let mut latencies = Vec::new();
    let mut errors = 0;
    for task in tasks {
        let (found, failed) = task.await.context("a worker failed")?;
        latencies.extend(found);
        errors += failed;
    }
    latencies.sort_unstable();
    let seconds = window.seconds();
    let transactions = latencies.len() as u64;
    Ok(PutsReport {
        workers,
        seconds,
        transactions,
        transactions_per_second: transactions as f64 / seconds,
        p50_ms: percentile(&latencies, 0.5) as f64 / 1000.0,
        p99_ms: percentile(&latencies, 0.99) as f64 / 1000.0,
        errors,
    })
}
