//! Filing the runs a store already held under their inputs' values, once per store: runs written
//! since are filed with every write ([`records::index_of`]); these are the ones written before.
//! Until it is done, `list_runs` filtered by inputs reads runs in start order instead.

use crate::actor::{Host, records};
use crate::call::RuntimeError;
use crate::packed;
use agentprocess_store::{Compare, CompareOp, CompareTarget, KeyRange, RangeRequest, Txn, TxnOp};
use serde_json::Value;
use std::sync::atomic::Ordering;

/// Keys read per page of the scan of every organization's keys.
const PAGE: usize = 256;
/// Most filings one transaction writes (etcd takes 128 operations).
const MAX_OPS: usize = 100;

/// What filing found to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filing {
    /// The store said it was done before.
    AlreadyDone,
    /// Filed now: the runs read in the hot store and in the archive.
    Done { hot: usize, archived: usize },
}

/// Files every run `host`'s store and archive hold under its inputs' values, then marks the
/// store done ([`Keys::runs_filed_by_input`](agentprocess_store::keys::Keys::runs_filed_by_input)).
/// Safe beside live writes and on several hosts at once: a hot run's filings are written only
/// while its `list_runs` entry is there (so never for a run archived meanwhile), and writing a
/// filing again changes nothing.
pub(super) async fn file_runs_by_inputs(host: &Host) -> Result<Filing, RuntimeError> {
    if runs_are_filed_by_input(host).await? {
        return Ok(Filing::AlreadyDone);
    }
    let hot = file_hot_runs(host).await?;
    let archived = host
        .archive
        .file_every_run_by_inputs(|item| {
            serde_json::from_slice::<Value>(item)
                .map(|item| records::item_input_digests(&item))
                .unwrap_or_default()
        })
        .await?;
    host.store
        .txn(Txn::new().and_then([TxnOp::put(host.keys.runs_filed_by_input(), b"done".to_vec())]))
        .await?;
    host.runs_filed_by_input.store(true, Ordering::Relaxed);
    Ok(Filing::Done { hot, archived })
}

/// Whether `list_runs` may read runs where they are filed by input: the store says every run
/// it held was filed.
pub(super) async fn runs_are_filed_by_input(host: &Host) -> Result<bool, RuntimeError> {
    if host.runs_filed_by_input.load(Ordering::Relaxed) {
        return Ok(true);
    }
    let filed = host
        .store
        .get(&host.keys.runs_filed_by_input())
        .await?
        .0
        .is_some();
    if filed {
        host.runs_filed_by_input.store(true, Ordering::Relaxed);
    }
    Ok(filed)
}

/// Files the runs of the hot store, reading every organization's `list_runs` entries and
/// skipping the other kinds of keys a range at a time; answers how many runs were read.
async fn file_hot_runs(host: &Host) -> Result<usize, RuntimeError> {
    let every = host.keys.organizations();
    let mut start = every.start.clone();
    let mut filed = 0;
    loop {
        let page = host
            .store
            .range(
                RangeRequest::new(KeyRange {
                    start: start.clone(),
                    end: every.end.clone(),
                })
                .with_limit(PAGE),
            )
            .await?;
        let Some(last) = page.kvs.last() else { break };
        let next = host.keys.past_kind_of(&last.key);
        let mut batch = Filings::default();
        for kv in &page.kvs {
            let Some(entry) = host.keys.parse_process_run(&kv.key) else {
                continue;
            };
            let Ok(item) = packed::read_json::<Value>(&kv.value) else {
                continue;
            };
            filed += 1;
            let puts: Vec<TxnOp> = records::item_input_digests(&item)
                .into_iter()
                .map(|(input, digest)| {
                    let key = host.keys.process_run_input(
                        &entry.org,
                        &entry.process,
                        &input,
                        &digest,
                        entry.started_at_ms,
                        &entry.run_id,
                    );
                    TxnOp::put(key, Vec::new())
                })
                .collect();
            if puts.is_empty() {
                continue;
            }
            if batch.puts.len() + puts.len() > MAX_OPS {
                std::mem::take(&mut batch).write(host).await?;
            }
            batch.add(kv.key.clone(), puts);
        }
        batch.write(host).await?;
        if !page.more {
            break;
        }
        start = next;
    }
    Ok(filed)
}

/// The filings of several runs, written in one transaction while every one of them is still
/// listed, else run by run.
#[derive(Debug, Default)]
struct Filings {
    /// Each run's listing entry, which must still be there for its filings to be written.
    listed: Vec<Compare>,
    puts: Vec<TxnOp>,
    /// Where each run's puts end in `puts`.
    ends: Vec<usize>,
}

impl Filings {
    fn add(&mut self, listing: Vec<u8>, puts: Vec<TxnOp>) {
        self.listed.push(Compare::new(
            listing,
            CompareOp::Greater,
            CompareTarget::Version(0),
        ));
        self.puts.extend(puts);
        self.ends.push(self.puts.len());
    }

    async fn write(self, host: &Host) -> Result<(), RuntimeError> {
        if self.listed.is_empty() {
            return Ok(());
        }
        let all = Txn::new()
            .when(self.listed.iter().cloned())
            .and_then(self.puts.iter().cloned());
        if host.store.txn(all).await?.succeeded {
            return Ok(());
        }
        // One of them was archived meanwhile: each on its own, so only that one is left out.
        let mut start = 0;
        for (listed, end) in self.listed.into_iter().zip(self.ends) {
            let puts = self.puts[start..end].to_vec();
            host.store.txn(Txn::new().when([listed]).and_then(puts)).await?;
            start = end;
        }
        Ok(())
    }
}
