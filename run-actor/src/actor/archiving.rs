//! Moving an ended run to the archive, when its [`ARCHIVE_TIMER`](super::ARCHIVE_TIMER) fires:
//! the record and its `list_runs` item (filed by process and by each input) go to the blob
//! store first, then ONE transaction,
//! fenced on the run record's version (and in a cluster on the shard's owner), deletes the run's
//! hot keys. A crash in between leaves
//! the run hot (and archived too: hot wins, and the timer, still there, archives it again).

use super::{Actor, RunAddress, Search, records};
use crate::call::RuntimeError;
use agentprocess_org::ArchivedRun;
use agentprocess_store::{Compare, Txn, TxnOp};

impl Actor {
    /// Moves the run to the archive if it ended long enough ago; does nothing for a run that
    /// is open, not yet due, already archived or unknown (a timer that outlived its reason).
    pub(super) async fn archive(&mut self) -> Result<(), RuntimeError> {
        self.load(Search::HotStoreAndArchive).await?;
        let host = self.host.clone();
        let loaded = self.loaded.as_ref().expect("loaded above");
        let (Some(run), false) = (&loaded.run, loaded.archived) else {
            return Ok(());
        };
        let Some(end) = &run.end else { return Ok(()) };
        let due = records::millis(end.at).saturating_add(super::archive_after_ms(&host.config));
        if u64::try_from(host.clock.now().as_millis()).unwrap_or(0) < due {
            return Ok(());
        }
        let RunAddress { organization, run_id } = &self.address;
        let record = serde_json::to_vec(run)
            .map_err(|e| RuntimeError::Corrupt(format!("run {run_id} does not serialize: {e}")))?;
        host.archive
            .store(&[ArchivedRun {
                organization: organization.clone(),
                run_id: run_id.clone(),
                process: run.process.clone(),
                started_at_ms: records::millis(run.started_at),
                record,
                summary: records::run_summary(run).to_string().into_bytes(),
                inputs: records::input_digests(run),
            }])
            .await?;
        let run_key = host.keys.run(organization, run_id);
        let mut ops = vec![TxnOp::delete(run_key.clone())];
        ops.extend(loaded.index.keys().map(|key| TxnOp::delete(key.clone())));
        ops.extend(
            loaded
                .claims
                .keys()
                .map(|step| TxnOp::delete(host.keys.claim(organization, run_id, step))),
        );
        let mut compares = vec![Compare::version_is(run_key, loaded.version)];
        compares.extend(self.fence()?);
        let txn = Txn::new().when(compares).and_then(ops);
        let committed = host.store.txn(txn).await;
        // Whatever happened, read the run again next time: from the archive once it moved.
        self.loaded = None;
        match committed {
            Ok(result) => {
                if result.succeeded {
                    host.config.metrics.runs_archived.add(1, &[]);
                    tracing::debug!(runId = %run_id, "run archived");
                    return Ok(());
                }
                // Not succeeded: this host lost the run's shard (its new owner archives it), or
                // the run changed meanwhile (its timer, if still due, comes again).
                match self.fence_lost().await {
                    Some(error) => Err(error),
                    None => Ok(()),
                }
            }
            Err(e) => Err(e.into()),
        }
    }
}
