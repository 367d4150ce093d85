//! The backlog gauges operators watch and autoscale on, read off the store's indexes every few
//! seconds: ready agent steps and people's open work items per process with the oldest one's
//! age, open escalations, overdue items, live claims and the notification outbox.
//!
//! A sample reads each index in pages and at most `scan_limit` entries of each per
//! organization, so its cost is bounded whatever the store holds; a sample cut short says so
//! (`agentprocess.backlog.truncated`). Ages are measured when scraped, from the oldest entry of
//! the last sample, so they grow between samples as they do in the store.

use crate::machine::{OrgId, RunId, Timestamp};
use crate::packed;
use agentprocess_org::Clock;
use agentprocess_store::keys::Keys;
use agentprocess_store::{KeyRange, RangeRequest, Store, StoreError};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Meter, ObservableGauge};
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The meter the backlog gauges come from.
pub const METER: &str = "agentprocess-backlog";
/// Agent steps ready and not claimed, by `process`.
pub const READY_STEPS: &str = "agentprocess.backlog.ready_steps";
/// Seconds since the oldest ready, unclaimed agent step became ready, by `process`.
pub const READY_OLDEST_AGE: &str = "agentprocess.backlog.ready_oldest_age";
/// People's open work items (tasks, approvals, escalations), by `process`.
pub const WORK_ITEMS: &str = "agentprocess.backlog.work_items";
/// Seconds since the oldest open work item opened, by `process`.
pub const WORK_ITEM_OLDEST_AGE: &str = "agentprocess.backlog.work_item_oldest_age";
/// Open escalations, by `process`.
pub const ESCALATIONS: &str = "agentprocess.backlog.escalations";
/// Ready agent steps and open work items past their `due`, by `process` and `kind` (`agent`,
/// `person`).
pub const OVERDUE: &str = "agentprocess.backlog.overdue";
/// Claims held now (a claim key per claimed step).
pub const CLAIMS: &str = "agentprocess.backlog.claims";
/// Notifications waiting in the outbox for delivery.
pub const OUTBOX: &str = "agentprocess.backlog.outbox";
/// Seconds since the oldest notification waiting in the outbox was written.
pub const OUTBOX_OLDEST_AGE: &str = "agentprocess.backlog.outbox_oldest_age";
/// 1 when the last sample stopped at the scan limit somewhere (its counts are then lower
/// bounds), else 0.
pub const TRUNCATED: &str = "agentprocess.backlog.truncated";

/// The attribute naming a series' process.
pub const ATTRIBUTE_PROCESS: &str = "process";
/// The attribute naming a series' organization, only with `organization_label`.
pub const ATTRIBUTE_ORGANIZATION: &str = "organization";
/// The attribute telling agent steps from people's work items in [`OVERDUE`].
pub const ATTRIBUTE_KIND: &str = "kind";

/// How the backlog is sampled.
#[derive(Debug, Clone, Copy)]
pub struct BacklogOptions {
    /// How often a sample is taken.
    pub every: Duration,
    /// The most entries one sample reads of each index, per organization.
    pub scan_limit: usize,
    /// Whether series carry an `organization` attribute.
    pub organization_label: bool,
}

/// The backlog of one process (of one organization, when series are labelled by it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessBacklog {
    pub ready_steps: u64,
    /// When the oldest ready step became ready, in milliseconds since the epoch.
    pub oldest_ready_ms: Option<u64>,
    pub work_items: u64,
    /// When the oldest open work item opened, in milliseconds since the epoch.
    pub oldest_work_item_ms: Option<u64>,
    pub escalations: u64,
    pub overdue_agent_steps: u64,
    pub overdue_work_items: u64,
}

impl ProcessBacklog {
    /// Adds `other`'s counts to these, keeping the older of the two oldest entries.
    fn add(&mut self, other: &ProcessBacklog) {
        self.ready_steps += other.ready_steps;
        self.oldest_ready_ms = self
            .oldest_ready_ms
            .into_iter()
            .chain(other.oldest_ready_ms)
            .min();
        self.work_items += other.work_items;
        self.oldest_work_item_ms = self
            .oldest_work_item_ms
            .into_iter()
            .chain(other.oldest_work_item_ms)
            .min();
        self.escalations += other.escalations;
        self.overdue_agent_steps += other.overdue_agent_steps;
        self.overdue_work_items += other.overdue_work_items;
    }
}

/// One sample of the whole store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sample {
    /// By organization (`None` when series are not labelled by it) and process.
    pub processes: BTreeMap<(Option<OrgId>, String), ProcessBacklog>,
    pub claims: u64,
    pub outbox: u64,
    pub oldest_outbox_ms: Option<u64>,
    pub truncated: bool,
}

/// The sampler: a task taking a [`Sample`] every [`BacklogOptions::every`], and the gauges
/// reporting the last one.
#[derive(Debug)]
pub struct Backlog {
    _gauges: Vec<ObservableGauge<u64>>,
    _ages: Vec<ObservableGauge<f64>>,
}

impl Backlog {
    /// Starts sampling `store` and reports through the process-wide meter provider. The task and
    /// the gauges live as long as the process.
    pub fn start(store: Arc<dyn Store>, keys: Keys, clock: Clock, options: BacklogOptions) {
        let last = Arc::new(Mutex::new(Sample::default()));
        let backlog = Backlog::gauges(&opentelemetry::global::meter(METER), last.clone(), clock.clone());
        tokio::spawn(async move {
            let _gauges = backlog;
            let mut tick = tokio::time::interval(options.every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                match sample(store.as_ref(), &keys, &clock, &options).await {
                    Ok(sample) => *last.lock().expect("the last sample is never poisoned") = sample,
                    Err(error) => {
                        tracing::warn!(%error, "the backlog could not be read; the gauges keep the last sample")
                    }
                }
            }
        });
    }

    /// The gauges, each reading `last` when scraped.
    fn gauges(meter: &Meter, last: Arc<Mutex<Sample>>, clock: Clock) -> Backlog {
        type Count = fn(&ProcessBacklog) -> u64;
        type Oldest = fn(&ProcessBacklog) -> Option<u64>;
        let per_process: [(&'static str, &'static str, Count); 3] = [
            (READY_STEPS, "Agent steps ready and not claimed.", |p| {
                p.ready_steps
            }),
            (WORK_ITEMS, "People's open work items.", |p| p.work_items),
            (ESCALATIONS, "Open escalations.", |p| p.escalations),
        ];
        let mut gauges = Vec::new();
        for (name, description, count) in per_process {
            let last = last.clone();
            gauges.push(
                meter
                    .u64_observable_gauge(name)
                    .with_description(description)
                    .with_callback(move |gauge| {
                        let sample = last.lock().expect("the last sample is never poisoned");
                        for ((org, process), backlog) in &sample.processes {
                            gauge.observe(count(backlog), &attributes(org.as_ref(), process, None));
                        }
                    })
                    .build(),
            );
        }
        let overdue_last = last.clone();
        gauges.push(
            meter
                .u64_observable_gauge(OVERDUE)
                .with_description("Ready agent steps and open work items past their due date.")
                .with_callback(move |gauge| {
                    let sample = overdue_last.lock().expect("the last sample is never poisoned");
                    for ((org, process), backlog) in &sample.processes {
                        let (org, process) = (org.as_ref(), process.as_str());
                        gauge.observe(
                            backlog.overdue_agent_steps,
                            &attributes(org, process, Some("agent")),
                        );
                        gauge.observe(
                            backlog.overdue_work_items,
                            &attributes(org, process, Some("person")),
                        );
                    }
                })
                .build(),
        );
        type Whole = fn(&Sample) -> u64;
        let whole: [(&'static str, &'static str, Whole); 3] = [
            (CLAIMS, "Claims held now.", |s| s.claims),
            (OUTBOX, "Notifications waiting for delivery.", |s| s.outbox),
            (
                TRUNCATED,
                "1 when the last sample stopped at the scan limit.",
                |s| u64::from(s.truncated),
            ),
        ];
        for (name, description, value) in whole {
            let last = last.clone();
            gauges.push(
                meter
                    .u64_observable_gauge(name)
                    .with_description(description)
                    .with_callback(move |gauge| {
                        gauge.observe(
                            value(&last.lock().expect("the last sample is never poisoned")),
                            &[],
                        )
                    })
                    .build(),
            );
        }
        let oldest: [(&'static str, &'static str, Oldest); 2] = [
            (
                READY_OLDEST_AGE,
                "Age of the oldest ready, unclaimed agent step.",
                |p| p.oldest_ready_ms,
            ),
            (WORK_ITEM_OLDEST_AGE, "Age of the oldest open work item.", |p| {
                p.oldest_work_item_ms
            }),
        ];
        let mut ages = Vec::new();
        for (name, description, oldest) in oldest {
            let (last, clock) = (last.clone(), clock.clone());
            ages.push(
                meter
                    .f64_observable_gauge(name)
                    .with_description(description)
                    .with_unit("s")
                    .with_callback(move |gauge| {
                        let now = clock.now();
                        let sample = last.lock().expect("the last sample is never poisoned");
                        for ((org, process), backlog) in &sample.processes {
                            gauge.observe(
                                age_seconds(now, oldest(backlog)),
                                &attributes(org.as_ref(), process, None),
                            );
                        }
                    })
                    .build(),
            );
        }
        let (outbox_last, outbox_clock) = (last, clock);
        ages.push(
            meter
                .f64_observable_gauge(OUTBOX_OLDEST_AGE)
                .with_description("Age of the oldest notification waiting for delivery.")
                .with_unit("s")
                .with_callback(move |gauge| {
                    let oldest = outbox_last
                        .lock()
                        .expect("the last sample is never poisoned")
                        .oldest_outbox_ms;
                    gauge.observe(age_seconds(outbox_clock.now(), oldest), &[]);
                })
                .build(),
        );
        Backlog {
            _gauges: gauges,
            _ages: ages,
        }
    }
}

fn attributes(org: Option<&OrgId>, process: &str, kind: Option<&'static str>) -> Vec<KeyValue> {
    let mut attributes = vec![KeyValue::new(ATTRIBUTE_PROCESS, process.to_owned())];
    if let Some(org) = org {
        attributes.push(KeyValue::new(ATTRIBUTE_ORGANIZATION, org.as_str().to_owned()));
    }
    if let Some(kind) = kind {
        attributes.push(KeyValue::new(ATTRIBUTE_KIND, kind));
    }
    attributes
}

/// Seconds from `oldest` to `now`; 0 with nothing waiting (or a clock behind the entry).
fn age_seconds(now: Timestamp, oldest: Option<u64>) -> f64 {
    match oldest {
        Some(oldest) => (now.as_millis() - i64::try_from(oldest).unwrap_or(i64::MAX)).max(0) as f64 / 1000.0,
        None => 0.0,
    }
}

/// What a sample reads of a ready-step entry.
#[derive(Debug, Deserialize)]
struct ReadyEntry {
    process: String,
    #[serde(default)]
    overdue: bool,
}

/// What a sample reads of a work-item entry.
#[derive(Debug, Deserialize)]
struct WorkEntry {
    process: String,
    #[serde(rename = "workItem")]
    work_item: WorkItemEntry,
}

#[derive(Debug, Deserialize)]
struct WorkItemEntry {
    #[serde(default)]
    due: Option<String>,
    #[serde(default)]
    escalation: Option<serde_json::Value>,
}

/// Entries read per range request.
const PAGE: usize = 1_000;

/// Takes one sample of the store.
pub async fn sample(
    store: &dyn Store,
    keys: &Keys,
    clock: &Clock,
    options: &BacklogOptions,
) -> Result<Sample, StoreError> {
    let now = clock.now();
    let mut sample = Sample::default();
    for org in organizations(store, keys).await? {
        let label = options.organization_label.then(|| org.clone());
        let (processes, truncated) =
            organization_backlog(store, keys, now, &org, options.scan_limit, |_| {}).await?;
        for (process, backlog) in processes {
            let total = sample.processes.entry((label.clone(), process)).or_default();
            total.add(&backlog);
        }
        sample.truncated |= truncated;
    }
    let mut claims = 0;
    sample.truncated |= !scan(store, keys.claims(), options.scan_limit, |_, _| claims += 1).await?;
    sample.claims = claims;
    let (mut outbox, mut oldest_outbox_ms) = (0, None);
    sample.truncated |= !scan(store, keys.outbox_entries(), options.scan_limit, |key, _| {
        outbox += 1;
        if let Some(parsed) = keys.parse_outbox(key) {
            oldest_outbox_ms.get_or_insert(parsed.created_at_ms);
        }
    })
    .await?;
    sample.outbox = outbox;
    sample.oldest_outbox_ms = oldest_outbox_ms;
    Ok(sample)
}

/// The backlog of one organization's processes, reading at most `scan_limit` entries of each
/// index; `true` with it when an index held more. Each entry's run (a run with a ready step or
/// an open work item) is handed to `with_work_waiting` as it is read.
pub async fn organization_backlog(
    store: &dyn Store,
    keys: &Keys,
    now: Timestamp,
    org: &OrgId,
    scan_limit: usize,
    mut with_work_waiting: impl FnMut(&RunId),
) -> Result<(BTreeMap<String, ProcessBacklog>, bool), StoreError> {
    let mut processes: BTreeMap<String, ProcessBacklog> = BTreeMap::new();
    let mut truncated = false;
    truncated |= !scan(store, keys.ready_steps(org), scan_limit, |key, value| {
        let (Some(parsed), Some(entry)) = (keys.parse_ready_step(key), read::<ReadyEntry>(value)) else {
            return;
        };
        with_work_waiting(&parsed.run_id);
        let backlog = processes.entry(entry.process).or_default();
        backlog.ready_steps += 1;
        // The index is ordered by readySince: the first entry of a process is its oldest.
        backlog.oldest_ready_ms.get_or_insert(parsed.ready_since_ms);
        backlog.overdue_agent_steps += u64::from(entry.overdue);
    })
    .await?;
    // An item filed under several assignees (the operator queue and a group) counts once.
    let mut seen = HashSet::new();
    truncated |= !scan(store, keys.all_work_items(org), scan_limit, |key, value| {
        let (Some(parsed), Some(entry)) = (keys.parse_work_item(key), read::<WorkEntry>(value)) else {
            return;
        };
        with_work_waiting(&parsed.run_id);
        if !seen.insert((parsed.run_id, parsed.work_item_id)) {
            return;
        }
        let backlog = processes.entry(entry.process).or_default();
        backlog.work_items += 1;
        let oldest = backlog.oldest_work_item_ms.get_or_insert(parsed.since_ms);
        *oldest = (*oldest).min(parsed.since_ms);
        backlog.escalations += u64::from(entry.work_item.escalation.is_some_and(|e| !e.is_null()));
        let overdue = entry
            .work_item
            .due
            .as_deref()
            .and_then(Timestamp::parse_rfc3339)
            .is_some_and(|due| due < now);
        backlog.overdue_work_items += u64::from(overdue);
    })
    .await?;
    Ok((processes, truncated))
}

fn read<T: serde::de::DeserializeOwned>(stored: &[u8]) -> Option<T> {
    serde_json::from_slice(&packed::unpack(stored).ok()?).ok()
}

/// Every organization with keys in the store: one read of one key per organization.
async fn organizations(store: &dyn Store, keys: &Keys) -> Result<Vec<OrgId>, StoreError> {
    let all = keys.organizations();
    let mut from = all.start.clone();
    let mut found = Vec::new();
    loop {
        let range = KeyRange {
            start: from,
            end: all.end.clone(),
        };
        let page = store.range(RangeRequest::new(range).with_limit(1)).await?;
        let Some(kv) = page.kvs.first() else {
            return Ok(found);
        };
        let Some(org) = keys.family_of(&kv.key).and_then(|owner| owner.organization) else {
            return Ok(found);
        };
        let Some(next) = keys.organization(&org).end else {
            found.push(org);
            return Ok(found);
        };
        found.push(org);
        from = next;
    }
}

/// Reads `range` in pages, handing each key and value to `visit`, up to `limit` entries;
/// `true` when it read the whole range.
async fn scan(
    store: &dyn Store,
    range: KeyRange,
    limit: usize,
    visit: impl FnMut(&[u8], &[u8]),
) -> Result<bool, StoreError> {
    scan_in_pages(store, range, limit, PAGE, visit).await
}

/// [`scan`], reading `page` entries per range request (fewer for large values).
pub(crate) async fn scan_in_pages(
    store: &dyn Store,
    range: KeyRange,
    limit: usize,
    page: usize,
    mut visit: impl FnMut(&[u8], &[u8]),
) -> Result<bool, StoreError> {
    let mut from = range.start.clone();
    let mut read = 0;
    loop {
        let page_limit = page.min(limit - read);
        if page_limit == 0 {
            return Ok(false);
        }
        let request = RangeRequest::new(KeyRange {
            start: from,
            end: range.end.clone(),
        })
        .with_limit(page_limit);
        let answer = store.range(request).await?;
        for kv in &answer.kvs {
            visit(&kv.key, &kv.value);
        }
        read += answer.kvs.len();
        let Some(last) = answer.kvs.last().filter(|_| answer.more) else {
            return Ok(true);
        };
        from = last.key.clone();
        from.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::RunId;
    use agentprocess_store::keys::Assignee;
    use agentprocess_store::{EmbeddedOptions, EmbeddedStore, Txn, TxnOp};
    use serde_json::json;

    const NOW_MS: i64 = 1_790_812_800_000;

    fn options(scan_limit: usize, organization_label: bool) -> BacklogOptions {
        BacklogOptions {
            every: Duration::from_secs(1),
            scan_limit,
            organization_label,
        }
    }

    /// A store holding, in `acme`, three ready steps (two of `p`, one of `q`, one overdue) and an
    /// escalation filed under the operator queue and a group (one item, two entries), overdue;
    /// in `zeta`, one ready step of `p`; and a claim.
    async fn store(keys: &Keys) -> EmbeddedStore {
        let store = EmbeddedStore::in_memory(EmbeddedOptions::default());
        let (acme, zeta) = (OrgId::from("acme"), OrgId::from("zeta"));
        let ready =
            |process: &str, overdue: bool| json!({ "process": process, "overdue": overdue }).to_string();
        let escalation = json!({
            "process": "q",
            "workItem": { "due": "2026-01-01T00:00:00Z", "escalation": { "note": "Stuck." } },
        })
        .to_string();
        let step = crate::machine::StepId::from_wire("work");
        let ops = vec![
            TxnOp::put(
                keys.ready_step(&acme, 1_000, &RunId::from("r_1"), &step),
                ready("p", false),
            ),
            TxnOp::put(
                keys.ready_step(&acme, 2_000, &RunId::from("r_2"), &step),
                ready("p", true),
            ),
            TxnOp::put(
                keys.ready_step(&acme, 3_000, &RunId::from("r_3"), &step),
                ready("q", false),
            ),
            TxnOp::put(
                keys.work_item(&acme, &Assignee::Operators, 500, &RunId::from("r_4"), "w_1"),
                escalation.clone(),
            ),
            TxnOp::put(
                keys.work_item(
                    &acme,
                    &Assignee::Group("ops".into()),
                    500,
                    &RunId::from("r_4"),
                    "w_1",
                ),
                escalation,
            ),
            TxnOp::put(
                keys.ready_step(&zeta, 4_000, &RunId::from("r_5"), &step),
                ready("p", false),
            ),
            TxnOp::put(keys.claim(&acme, &RunId::from("r_6"), &step), "claim"),
        ];
        store.txn(Txn::new().and_then(ops)).await.unwrap();
        store
    }

    #[tokio::test]
    async fn a_sample_counts_each_process_and_each_work_item_once() {
        let keys = Keys::new("test");
        let store = store(&keys).await;
        let clock = Clock::starting_at(Timestamp::from_millis(NOW_MS));
        let sample = sample(&store, &keys, &clock, &options(1_000, false))
            .await
            .unwrap();
        let p = &sample.processes[&(None, "p".to_owned())];
        assert_eq!(
            (p.ready_steps, p.oldest_ready_ms, p.overdue_agent_steps),
            (3, Some(1_000), 1),
            "both organizations' steps of p, without the label"
        );
        let q = &sample.processes[&(None, "q".to_owned())];
        assert_eq!(q.ready_steps, 1);
        assert_eq!(
            (
                q.work_items,
                q.escalations,
                q.overdue_work_items,
                q.oldest_work_item_ms
            ),
            (1, 1, 1, Some(500)),
            "the escalation filed under two assignees is one item"
        );
        assert_eq!((sample.claims, sample.outbox, sample.truncated), (1, 0, false));
    }

    #[tokio::test]
    async fn with_the_organization_label_each_organization_has_its_own_series() {
        let keys = Keys::new("test");
        let store = store(&keys).await;
        let clock = Clock::starting_at(Timestamp::from_millis(NOW_MS));
        let sample = sample(&store, &keys, &clock, &options(1_000, true))
            .await
            .unwrap();
        let ready = |org: &str| sample.processes[&(Some(OrgId::from(org)), "p".to_owned())].ready_steps;
        assert_eq!((ready("acme"), ready("zeta")), (2, 1));
    }

    #[tokio::test]
    async fn a_sample_stops_at_the_scan_limit_and_says_so() {
        let keys = Keys::new("test");
        let store = store(&keys).await;
        let clock = Clock::starting_at(Timestamp::from_millis(NOW_MS));
        let sample = sample(&store, &keys, &clock, &options(2, false)).await.unwrap();
        assert!(sample.truncated);
        assert_eq!(
            sample.processes[&(None, "p".to_owned())].ready_steps,
            3,
            "two of acme's three entries, and zeta's one"
        );
        assert_eq!(
            sample.processes[&(None, "q".to_owned())].ready_steps,
            0,
            "acme's third ready step is past the limit"
        );
    }

    #[test]
    fn an_age_is_measured_from_the_oldest_entry_and_never_negative() {
        let now = Timestamp::from_millis(10_000);
        assert_eq!(age_seconds(now, Some(7_500)), 2.5);
        assert_eq!(age_seconds(now, Some(12_000)), 0.0);
        assert_eq!(age_seconds(now, None), 0.0);
    }
}
