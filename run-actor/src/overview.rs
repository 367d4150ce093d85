//! An organization's [`Overview`] for the console, read off the store: the runs started in the
//! last day (their records, in one ordered range: a run's id begins with its start time), the
//! backlog indexes as the backlog gauges read them, and the records of older runs with work
//! waiting, for the lease expiries and escalations of the last day. Every read is bounded: at most
//! `scan_limit` entries of each index and `run_limit` run records; an overview cut short says so. One organization's overview is kept for a few
//! seconds, so that pages refreshing together cost one read.

use crate::backlog::{organization_backlog, scan_in_pages};
use crate::machine::{HistoryKind, OrgId, RunId, RunState, Timestamp};
use crate::packed;
use agentprocess_org::Clock;
use agentprocess_service::{OVERVIEW_HOURS, OrgOverview, Overview, ProcessOverview, ServiceError};
use agentprocess_store::keys::Keys;
use agentprocess_store::{KeyRange, Store};
use async_trait::async_trait;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HOUR_MS: i64 = 3_600_000;
/// Records read per range request.
const PAGE: usize = 200;
/// How long one organization's overview is answered again without reading.
const KEPT_FOR: Duration = Duration::from_secs(5);

/// Counts the runs of the last [`OVERVIEW_HOURS`] hours before `now` into `overview`: those
/// started in the window by process and state, started and ended per hour, and the lease
/// expiries and escalations their histories record in the window. PURE.
pub fn count_runs<'a>(overview: &mut Overview, now: Timestamp, runs: impl IntoIterator<Item = &'a RunState>) {
    let window_start = now.as_millis() - HOUR_MS * OVERVIEW_HOURS as i64;
    let hour_of = |at: Timestamp| -> Option<usize> {
        let since = at.as_millis() - window_start;
        (since >= 0 && at <= now).then(|| (since / HOUR_MS).min(OVERVIEW_HOURS as i64 - 1) as usize)
    };
    overview.started_per_hour.resize(OVERVIEW_HOURS, 0);
    overview.ended_per_hour.resize(OVERVIEW_HOURS, 0);
    for run in runs {
        overview.runs_read += 1;
        if let Some(hour) = hour_of(run.started_at) {
            overview.started_per_hour[hour] += 1;
            let process = overview.processes.entry(run.process.clone()).or_default();
            *process
                .runs_by_state
                .entry(run.state_name().to_string())
                .or_default() += 1;
            if let Some(hour) = run.end.as_ref().and_then(|end| hour_of(end.at)) {
                overview.ended_per_hour[hour] += 1;
            }
        }
        for event in &run.history {
            if hour_of(event.at).is_none() {
                continue;
            }
            match event.kind {
                HistoryKind::LeaseExpired { .. } => overview.lease_expiries += 1,
                HistoryKind::Escalated { .. } => overview.escalations += 1,
                _ => {}
            }
        }
    }
}

/// Reads overviews from a store, every organization's from the same indexes the actor hosts
/// write.
#[derive(Debug)]
pub struct StoreOverview {
    store: Arc<dyn Store>,
    keys: Keys,
    clock: Clock,
    scan_limit: usize,
    run_limit: usize,
    kept: Mutex<HashMap<OrgId, (Instant, Overview)>>,
}

impl StoreOverview {
    /// Overviews of `store`'s organizations, each reading at most `scan_limit` entries of each
    /// index and `run_limit` run records.
    pub fn new(
        store: Arc<dyn Store>,
        keys: Keys,
        clock: Clock,
        scan_limit: usize,
        run_limit: usize,
    ) -> StoreOverview {
        StoreOverview {
            store,
            keys,
            clock,
            scan_limit: scan_limit.max(1),
            run_limit: run_limit.max(1),
            kept: Mutex::new(HashMap::new()),
        }
    }

    async fn read(&self, org: &OrgId) -> Result<Overview, agentprocess_store::StoreError> {
        let now = self.clock.now();
        let mut overview = Overview {
            at: now,
            ..Overview::default()
        };
        let since_ms = u64::try_from(now.as_millis() - HOUR_MS * OVERVIEW_HOURS as i64).unwrap_or(0);
        // Runs started in the window: their ids begin with their start time.
        let all_runs = self.keys.runs(org);
        let window = KeyRange {
            start: self.keys.run(org, &RunId::from(format!("r_{since_ms:011x}"))),
            end: all_runs.end,
        };
        let mut recent = Vec::new();
        let mut recent_ids = BTreeSet::new();
        overview.truncated |=
            !scan_in_pages(self.store.as_ref(), window, self.run_limit, PAGE, |_, value| {
                if let Ok(run) = packed::read_json::<RunState>(value) {
                    recent_ids.insert(run.id.clone());
                    recent.push(run);
                }
            })
            .await?;
        // Older runs with work waiting: a lapsed claim makes its step ready again, and an
        // escalation opens a work item, so these hold the events of the window the recent runs
        // do not.
        let mut waiting = BTreeSet::new();
        let (backlog, backlog_truncated) = organization_backlog(
            self.store.as_ref(),
            &self.keys,
            now,
            org,
            self.scan_limit,
            |run| {
                waiting.insert(run.clone());
            },
        )
        .await?;
        overview.truncated |= backlog_truncated;
        let mut older = Vec::new();
        for run_id in waiting.difference(&recent_ids) {
            if recent.len() + older.len() >= self.run_limit {
                overview.truncated = true;
                break;
            }
            let (record, _) = self.store.get(&self.keys.run(org, run_id)).await?;
            if let Some(run) = record.and_then(|record| packed::read_json::<RunState>(&record.value).ok()) {
                older.push(run);
            }
        }
        count_runs(&mut overview, now, recent.iter().chain(&older));
        for (process, backlog) in backlog {
            let entry: &mut ProcessOverview = overview.processes.entry(process).or_default();
            entry.ready_steps = backlog.ready_steps;
            entry.oldest_ready = backlog.oldest_ready_ms.map(to_timestamp);
            entry.work_items = backlog.work_items;
            entry.oldest_work_item = backlog.oldest_work_item_ms.map(to_timestamp);
            entry.open_escalations = backlog.escalations;
            entry.overdue_agent_steps = backlog.overdue_agent_steps;
            entry.overdue_work_items = backlog.overdue_work_items;
        }
        Ok(overview)
    }
}

fn to_timestamp(millis: u64) -> Timestamp {
    Timestamp::from_millis(i64::try_from(millis).unwrap_or(i64::MAX))
}

#[async_trait]
impl OrgOverview for StoreOverview {
    async fn overview(&self, organization: &OrgId) -> Result<Overview, ServiceError> {
        if let Some((read_at, overview)) = self
            .kept
            .lock()
            .expect("kept overviews are never poisoned")
            .get(organization)
            && read_at.elapsed() < KEPT_FOR
        {
            return Ok(overview.clone());
        }
        let overview = self
            .read(organization)
            .await
            .map_err(|error| ServiceError::Unavailable(format!("the overview cannot be read: {error}")))?;
        let mut kept = self.kept.lock().expect("kept overviews are never poisoned");
        kept.retain(|_, (read_at, _)| read_at.elapsed() < KEPT_FOR);
        kept.insert(organization.clone(), (Instant::now(), overview.clone()));
        Ok(overview)
    }
}
