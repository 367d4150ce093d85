//! Packs run writes into store transactions within the store's limits and keeps several in
//! flight, so the store's writer syncs many transactions at once.

use agentprocess_run_actor::fixtures::RunWrites;
use agentprocess_store::{Compare, EmbeddedStore, RangeRequest, Store, Txn, TxnOp};
use anyhow::{Context, bail};
use tokio::task::JoinSet;

/// Most operations in one transaction: the store's (and etcd's) default limit.
const MAX_TXN_OPS: usize = 128;
/// Most bytes of keys and values in one transaction: well under the 1.5 MiB request limit.
const MAX_TXN_BYTES: usize = 1 << 20;
/// Transactions committing at once.
const IN_FLIGHT: usize = 16;

/// Writes runs in transactions of whole runs.
#[derive(Debug)]
pub struct Writer {
    store: EmbeddedStore,
    compares: Vec<Compare>,
    ops: Vec<TxnOp>,
    bytes: usize,
    runs_pending: u64,
    in_flight: JoinSet<anyhow::Result<u64>>,
    /// Runs whose transaction committed.
    pub committed: u64,
    /// Transactions committed.
    pub transactions: u64,
}

impl Writer {
    pub fn new(store: EmbeddedStore) -> Self {
        Writer {
            store,
            compares: Vec::new(),
            ops: Vec::new(),
            bytes: 0,
            runs_pending: 0,
            in_flight: JoinSet::new(),
            committed: 0,
            transactions: 0,
        }
    }

    /// Adds one run; sends the transaction being filled first when the run would not fit in it.
    pub async fn add(&mut self, run: RunWrites) -> anyhow::Result<()> {
        let bytes: usize = run.ops.iter().map(op_bytes).sum();
        if run.ops.len() > MAX_TXN_OPS || bytes > MAX_TXN_BYTES {
            bail!(
                "one run needs {} operations and {bytes} bytes, more than a transaction may carry",
                run.ops.len()
            );
        }
        if self.ops.len() + run.ops.len() > MAX_TXN_OPS || self.bytes + bytes > MAX_TXN_BYTES {
            self.send().await?;
        }
        self.compares.extend(run.compares);
        self.ops.extend(run.ops);
        self.bytes += bytes;
        self.runs_pending += 1;
        Ok(())
    }

    /// Sends the transaction being filled, after waiting for a slot.
    async fn send(&mut self) -> anyhow::Result<()> {
        if self.ops.is_empty() {
            return Ok(());
        }
        while self.in_flight.len() >= IN_FLIGHT {
            self.settle_one().await?;
        }
        let txn = Txn::new()
            .when(std::mem::take(&mut self.compares))
            .and_then(std::mem::take(&mut self.ops));
        let runs = std::mem::take(&mut self.runs_pending);
        self.bytes = 0;
        let store = self.store.clone();
        self.in_flight.spawn(async move {
            let result = store.txn(txn).await.context("writing fixture runs")?;
            if !result.succeeded {
                bail!("a fixture run's id is taken already: nothing of its transaction was written");
            }
            Ok(runs)
        });
        Ok(())
    }

    async fn settle_one(&mut self) -> anyhow::Result<()> {
        if let Some(joined) = self.in_flight.join_next().await {
            self.committed += joined.context("a write task failed")??;
            self.transactions += 1;
        }
        Ok(())
    }

    /// Sends what is left and waits until every transaction committed.
    pub async fn finish(&mut self) -> anyhow::Result<()> {
        self.send().await?;
        while !self.in_flight.is_empty() {
            self.settle_one().await?;
        }
        Ok(())
    }
}

fn op_bytes(op: &TxnOp) -> usize {
    match op {
        TxnOp::Put { key, value, .. } => key.len() + value.len(),
        TxnOp::Delete { range } | TxnOp::Range(RangeRequest { range, .. }) => {
            range.start.len() + range.end.as_ref().map_or(0, Vec::len)
        }
    }
}
