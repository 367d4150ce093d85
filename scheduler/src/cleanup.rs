//! Removes idempotency records whose retention has passed, using the expiry index written with
//! each record.

use crate::{SchedulerConfig, SchedulerParts};
use agentprocess_service::Timestamp;
use agentprocess_store::{RangeRequest, StoreError, Txn, TxnOp};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use tokio::sync::watch;

/// Pairs of keys removed per transaction (two operations each, within the 128 limit).
const PER_TXN: usize = 60;

/// Sweeps every `cleanup_every`; records in `swept_at_ms` the clock time of each sweep that
/// finished.
pub(crate) async fn run(
    parts: Arc<SchedulerParts>,
    config: SchedulerConfig,
    swept_at_ms: Arc<AtomicI64>,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let now = parts.clock.now();
        match sweep(&parts, now).await {
            Ok(_) => {
                swept_at_ms.fetch_max(now.as_millis(), Ordering::AcqRel);
            }
            Err(error) => tracing::warn!(%error, "expired idempotency records cannot be removed now"),
        }
        tokio::select! {
            biased;
            _ = stopped.changed() => return,
            _ = tokio::time::sleep(config.cleanup_every) => {}
        }
    }
}

/// Removes every record that expired by `now`; returns how many.
pub(crate) async fn sweep(parts: &SchedulerParts, now: Timestamp) -> Result<usize, StoreError> {
    let keys = &parts.keys;
    let store = &parts.store;
    let now = u64::try_from(now.as_millis()).unwrap_or(0);
    let mut removed = 0;
    loop {
        let page = store
            .range(RangeRequest::new(keys.idempotency_expiries_due(now)).with_limit(PER_TXN))
            .await?;
        if page.kvs.is_empty() {
            return Ok(removed);
        }
        let mut ops = Vec::new();
        for kv in &page.kvs {
            ops.push(TxnOp::delete(kv.key.clone()));
            if let Some(expiry) = keys.parse_idempotency_expiry(&kv.key) {
                ops.push(TxnOp::delete(keys.idempotency(&expiry.org, &expiry.request_id)));
            }
        }
        store.txn(Txn::new().and_then(ops)).await?;
        removed += page.kvs.len();
        if !page.more {
            return Ok(removed);
        }
    }
}
