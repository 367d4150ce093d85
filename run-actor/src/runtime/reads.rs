//! Reads that need no kind: `get_run` reads the run record, from the hot store or else the
//! archive; `get_work`, an operator's ready steps, `list_runs` and `list_processes` range the
//! indexes, whose values are the rendered items, so a page costs in proportion to `limit` (and to
//! what a filter skips, capped per page), never to the number of runs. `list_runs` merges each
//! process's hot index with its archive index, both in start order; filtered by inputs, it reads
//! both where runs are filed under the first input's value, so a filter no other run matches
//! finds its runs on the first page however many runs came before. Cursors are opaque: the hex
//! of the last position read.

use crate::actor::{Host, RunRecord, Search, records};
use crate::call::{RuntimeError, ToolOutcome};
use crate::machine::hex;
use crate::machine::{Caller, CallerKind, Refusal, RunState, history, inspect, render};
use crate::machine::{OrgId, RunId};
use crate::packed;
use agentprocess_service::{GetWork, ListRuns, ReadySteps, RenderedData};
use agentprocess_store::keys::{Assignee, Keys};
use agentprocess_store::{KeyRange, RangeRequest};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::VecDeque;

/// Most index entries one page may skip over for filters before it returns a cursor.
const SCAN_BUDGET_PER_ITEM: usize = 10;
const DEFAULT_LIMIT: usize = 20;
const MAX_LIMIT: usize = 100;

/// The state of run `run_id` of `organization`, from the hot store or else the archive; `None`
/// when neither holds it.
async fn run_state(
    host: &Host,
    organization: &OrgId,
    run_id: &RunId,
) -> Result<Option<RunState>, RuntimeError> {
    let record = match host
        .run_record(organization, run_id, Search::HotStoreAndArchive)
        .await?
    {
        Some(RunRecord::Hot { bytes, .. } | RunRecord::Archived(bytes)) => bytes,
        None => return Ok(None),
    };
    packed::read_json(&record)
        .map(Some)
        .map_err(|e| RuntimeError::Corrupt(format!("run {run_id}: {e}")))
}

fn no_such_run() -> ToolOutcome {
    ToolOutcome::Refused(Refusal::not_found("no such run in this organization"))
}

pub(super) async fn get_run(
    host: &Host,
    caller: &Caller,
    run_id: &RunId,
) -> Result<ToolOutcome, RuntimeError> {
    let Some(run) = run_state(host, &caller.organization, run_id).await? else {
        return Ok(no_such_run());
    };
    let pinned = host
        .pinned
        .get(&caller.organization, &run.process, run.version)
        .await?
        .ok_or_else(|| RuntimeError::Corrupt(format!("run {run_id} pins an unpublished version")))?;
    Ok(ToolOutcome::Ok(render::run_view(&pinned, &run)))
}

/// A run's history (`{ runId, events, dropped }`), for whoever may `get_run` the run: read
/// the same way, through the archive, so an archived run's history is its archived record's.
pub(super) async fn run_history(
    host: &Host,
    caller: &Caller,
    run_id: &RunId,
) -> Result<ToolOutcome, RuntimeError> {
    Ok(match run_state(host, &caller.organization, run_id).await? {
        Some(run) => ToolOutcome::Ok(history::history_view(&run)),
        None => no_such_run(),
    })
}

/// An operator's inspection of a run (see [`inspect::inspection`]): `forbidden` to anyone who
/// is not an operator of the organization, whether or not the run exists.
pub(super) async fn inspect_run(
    host: &Host,
    caller: &Caller,
    run_id: &RunId,
) -> Result<ToolOutcome, RuntimeError> {
    if !caller.operator {
        return Ok(ToolOutcome::Refused(Refusal::forbidden(
            "only an operator of this organization may inspect a run",
        )));
    }
    Ok(match run_state(host, &caller.organization, run_id).await? {
        Some(run) => ToolOutcome::Ok(inspect::inspection(&run)),
        None => no_such_run(),
    })
}

fn limit_of(limit: Option<usize>) -> Result<usize, Refusal> {
    match limit {
        None => Ok(DEFAULT_LIMIT),
        Some(limit) if (1..=MAX_LIMIT).contains(&limit) => Ok(limit),
        Some(_) => Err(Refusal::invalid("limit must be between 1 and 100")
            .with_issues(vec!["limit: expected 1 to 100".into()])),
    }
}

fn decode_cursor(cursor: Option<&str>) -> Result<Option<Vec<u8>>, Refusal> {
    let Some(cursor) = cursor else { return Ok(None) };
    let invalid = || {
        Refusal::invalid("the cursor is not one this server gave").with_issues(vec!["cursor: unknown".into()])
    };
    if cursor.len() % 2 != 0 || !cursor.is_ascii() {
        return Err(invalid());
    }
    (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&cursor[i..i + 2], 16).map_err(|_| invalid()))
        .collect::<Result<Vec<u8>, _>>()
        .map(Some)
}

/// What one source of a merged listing reads.
#[derive(Debug)]
enum Index {
    /// A range of the hot store; positions are keys relative to its prefix. Read from this
    /// host's copy of `mirrored` (an index holding the range) while that copy is whole.
    Hot {
        range: KeyRange,
        next_start: Vec<u8>,
        mirrored: Option<KeyRange>,
    },
    /// A process's runs filed under an input's value in the hot store; positions are keys
    /// relative to its prefix, as in the process's own range, where each entry's item is read.
    HotByInput {
        range: KeyRange,
        next_start: Vec<u8>,
        items: KeyRange,
    },
    /// A process's archive index; positions are [`Keys::process_run_position`]s, the same as
    /// its hot `list_runs` range's.
    Archived {
        organization: OrgId,
        process: String,
        /// The input (name, digest) whose value files the runs read; `None`: every run.
        input: Option<(String, String)>,
        after: Option<(u64, RunId)>,
    },
}

/// One index being read in pages, in position order.
#[derive(Debug)]
struct Source {
    index: Index,
    buffer: VecDeque<(Vec<u8>, Vec<u8>)>,
    exhausted: bool,
}

impl Source {
    fn hot(range: KeyRange, after: Option<&[u8]>) -> Self {
        Source::hot_mirrored(range, after, None)
    }

    /// [`Source::hot`], read from this host's copy of `mirrored` while it is whole.
    fn hot_mirrored(range: KeyRange, after: Option<&[u8]>, mirrored: Option<KeyRange>) -> Self {
        let next_start = start_after(&range, after);
        Source {
            index: Index::Hot {
                range,
                next_start,
                mirrored,
            },
            buffer: VecDeque::new(),
            exhausted: false,
        }
    }

    /// The runs filed in `range` (under an input's value), whose items are in `items` at the
    /// same positions, after `after`.
    fn hot_by_input(range: KeyRange, items: KeyRange, after: Option<&[u8]>) -> Self {
        let next_start = start_after(&range, after);
        Source {
            index: Index::HotByInput {
                range,
                next_start,
                items,
            },
            buffer: VecDeque::new(),
            exhausted: false,
        }
    }

    /// The archive index of `process` (or its runs filed under `input`), after `after` (a
    /// position of its `list_runs` range).
    fn archived(
        organization: &OrgId,
        process: &str,
        input: Option<(String, String)>,
        after: Option<&[u8]>,
    ) -> Self {
        Source {
            index: Index::Archived {
                organization: organization.clone(),
                process: process.to_string(),
                input,
                after: after.and_then(Keys::parse_process_run_position),
            },
            buffer: VecDeque::new(),
            // A cursor that is no run position (another listing's) finds nothing here.
            exhausted: after.is_some_and(|a| Keys::parse_process_run_position(a).is_none()),
        }
    }

    async fn refill(&mut self, host: &Host, page: usize) -> Result<(), RuntimeError> {
        if !self.buffer.is_empty() || self.exhausted {
            return Ok(());
        }
        match &mut self.index {
            Index::Hot {
                range,
                next_start,
                mirrored,
            } => {
                let (entries, more) = read_on(host, range, next_start, page, mirrored.as_ref()).await?;
                self.exhausted = !more;
                self.buffer.extend(entries);
            }
            Index::HotByInput {
                range,
                next_start,
                items,
            } => {
                let (entries, more) = read_on(host, range, next_start, page, None).await?;
                self.exhausted = !more;
                let positions: Vec<Vec<u8>> = entries.into_iter().map(|(position, _)| position).collect();
                // Each entry's item, read where the process's own range keeps it, all at once.
                let reads = positions.iter().map(|position| {
                    let mut item_key = items.start.clone();
                    item_key.extend_from_slice(position);
                    async move { host.store.get(&item_key).await }
                });
                let read = futures_util::future::try_join_all(reads).await?;
                for (position, (item, _)) in positions.into_iter().zip(read) {
                    // Gone since (archived): the archive's source lists it.
                    if let Some(item) = item {
                        self.buffer.push_back((position, item.value));
                    }
                }
            }
            Index::Archived {
                organization,
                process,
                input,
                after,
            } => {
                let after_run = after.as_ref().map(|(at, run)| (*at, run));
                let found = match input {
                    Some((name, digest)) => {
                        host.archive
                            .runs_with_input_after(organization, process, (name, digest), after_run, page)
                            .await?
                    }
                    None => {
                        host.archive
                            .runs_after(organization, process, after_run, page)
                            .await?
                    }
                };
                self.exhausted = found.len() < page;
                if let Some(last) = found.last() {
                    *after = Some((last.started_at_ms, last.run_id.clone()));
                }
                self.buffer.extend(found.into_iter().map(|entry| {
                    (
                        Keys::process_run_position(entry.started_at_ms, &entry.run_id),
                        entry.summary,
                    )
                }));
            }
        }
        Ok(())
    }
}

/// Up to `page` entries of `range` from `next_start` on, as (position in the range, value), and
/// whether more follow; `next_start` moves past the last one read. From this host's copy of
/// `mirrored` when it holds one that is whole, else from the store.
async fn read_on(
    host: &Host,
    range: &KeyRange,
    next_start: &mut Vec<u8>,
    page: usize,
    mirrored: Option<&KeyRange>,
) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, bool), RuntimeError> {
    let copied = match (mirrored, &host.mirrors, &range.end) {
        (Some(mirrored), Some(mirrors), Some(end)) => mirrors.read(mirrored, next_start, end, page),
        _ => None,
    };
    let (kvs, more) = match copied {
        Some(copied) => copied,
        None => {
            let request = KeyRange {
                start: next_start.clone(),
                end: range.end.clone(),
            };
            let found = host
                .store
                .range(RangeRequest::new(request).with_limit(page))
                .await?;
            let kvs = found.kvs.into_iter().map(|kv| (kv.key, kv.value)).collect();
            (kvs, found.more)
        }
    };
    if let Some((last, _)) = kvs.last() {
        *next_start = last.clone();
        next_start.push(0);
    }
    let prefix = range.start.len();
    let entries = kvs
        .into_iter()
        .map(|(mut key, value)| (key.split_off(prefix), value))
        .collect();
    Ok((entries, more))
}

/// Where a range's reading starts: its start, or just past position `after` in it.
fn start_after(range: &KeyRange, after: Option<&[u8]>) -> Vec<u8> {
    match after {
        Some(position) => {
            let mut start = range.start.clone();
            start.extend_from_slice(position);
            start.push(0);
            start
        }
        None => range.start.clone(),
    }
}

/// Reads the merge of `sources` (hot ranges and archive indexes, each read from just past the
/// same position) in position order, keeping the values `keep` accepts; returns at most
/// `limit` values and the cursor of the next page. An entry found in two of them (filed under
/// two ranges, or a run both hot and archived after a crash mid-archiving) comes once, the
/// hot one first.
async fn scan(
    host: &Host,
    sources: Vec<Source>,
    limit: usize,
    keep: impl Fn(&Value) -> bool,
) -> Result<(Vec<Value>, Option<String>), RuntimeError> {
    let read = |stored: &[u8]| packed::read_json::<Value>(stored).ok();
    scan_as(host, sources, limit, read, keep).await
}

/// [`scan`] with each stored value read by `read` (an entry it cannot read is skipped).
async fn scan_as<T>(
    host: &Host,
    mut sources: Vec<Source>,
    limit: usize,
    read: impl Fn(&[u8]) -> Option<T>,
    keep: impl Fn(&T) -> bool,
) -> Result<(Vec<T>, Option<String>), RuntimeError> {
    let page = limit + 1;
    let budget = limit * SCAN_BUDGET_PER_ITEM + page;
    let mut items = Vec::new();
    let mut scanned = 0;
    let mut last: Option<Vec<u8>> = None;
    loop {
        for source in &mut sources {
            source.refill(host, page).await?;
        }
        let next = sources
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.buffer.front().map(|(position, _)| (i, position)))
            .min_by(|a, b| a.1.cmp(b.1))
            .map(|(i, _)| i);
        let Some(next) = next else {
            return Ok((items, None));
        };
        if scanned >= budget {
            return Ok((items, last.map(|p| hex(&p))));
        }
        let (position, value) = sources[next].buffer.pop_front().expect("front exists");
        scanned += 1;
        if last.as_ref() == Some(&position) {
            // The same entry filed under another of the merged ranges.
            continue;
        }
        let Some(value) = read(&value) else {
            continue;
        };
        if !keep(&value) {
            last = Some(position);
            continue;
        }
        if items.len() == limit {
            return Ok((items, last.map(|p| hex(&p))));
        }
        items.push(value);
        last = Some(position);
    }
}

/// `{ items, nextCursor }`, the items moved in rather than copied.
fn page(items: Vec<Value>, next_cursor: Option<String>) -> ToolOutcome {
    let mut page = Map::with_capacity(2);
    page.insert("items".to_owned(), Value::Array(items));
    page.insert(
        "nextCursor".to_owned(),
        next_cursor.map_or(Value::Null, Value::String),
    );
    ToolOutcome::Ok(Value::Object(page))
}

/// The caller's `get_work` page, `{ items, nextCursor }`, spliced from the items' stored JSON:
/// an index entry's value is the item exactly as the caller gets it, so it is checked to be one
/// JSON value and copied, never parsed into values and written again.
///
/// On a host that copies the indexes ([`IndexMirrors`](super::mirror::IndexMirrors)), the page is read from the copy while it
/// is whole; a page the copy finds empty is read again from the store, since the copy may not
/// have seen work made ready elsewhere yet.
pub(super) async fn work_page(
    host: &Host,
    caller: &Caller,
    request: GetWork,
) -> Result<Result<RenderedData, Refusal>, RuntimeError> {
    let (limit, after) = match (limit_of(request.limit), decode_cursor(request.cursor.as_deref())) {
        (Ok(limit), Ok(after)) => (limit, after),
        (Err(refusal), _) | (_, Err(refusal)) => return Ok(Err(refusal)),
    };
    let org = &caller.organization;
    let (ranges, index) = match &caller.kind {
        CallerKind::Agent { .. } => (vec![host.keys.ready_steps(org)], host.keys.ready_steps(org)),
        // An item filed under several of these (an escalation in the operator queue and in the
        // escalation group) has one position, so the merge shows it once.
        CallerKind::Person { email, groups } => (
            groups
                .iter()
                .map(|group| host.keys.work_items(org, &Assignee::Group(group.clone())))
                .chain([host.keys.work_items(org, &Assignee::Person(email.clone()))])
                .chain(
                    caller
                        .operator
                        .then(|| host.keys.work_items(org, &Assignee::Operators)),
                )
                .collect(),
            host.keys.all_work_items(org),
        ),
    };
    let process = request.process;
    let keep = |item: &RawValue| {
        process.as_deref().is_none_or(|p| {
            serde_json::from_str::<ItemProcess<'_>>(item.get()).is_ok_and(|item| item.process == p)
        })
    };
    let mirrored = host
        .mirrors
        .as_ref()
        .is_some_and(|mirrors| mirrors.is_whole(&index));
    if mirrored {
        let page = rendered_page(host, ranges.clone(), after.as_deref(), limit, Some(&index), keep).await?;
        if !page_is_empty(&page) {
            return Ok(Ok(page));
        }
    }
    rendered_page(host, ranges, after.as_deref(), limit, None, keep)
        .await
        .map(Ok)
}

/// An operator's page of the organization's ready-step index: the agent steps ready and not
/// claimed (ready since `ready_until_ms` or before, when given), oldest first, each as an
/// agent's `get_work` item. The cut is the end of the range read, so a page costs in proportion
/// to its limit, never to the number of runs.
pub(super) async fn ready_steps_page(
    host: &Host,
    caller: &Caller,
    request: ReadySteps,
) -> Result<Result<RenderedData, Refusal>, RuntimeError> {
    if !caller.operator {
        return Ok(Err(Refusal::forbidden(
            "only an operator reads the organization's ready steps",
        )));
    }
    let (limit, after) = match (limit_of(request.limit), decode_cursor(request.cursor.as_deref())) {
        (Ok(limit), Ok(after)) => (limit, after),
        (Err(refusal), _) | (_, Err(refusal)) => return Ok(Err(refusal)),
    };
    let org = &caller.organization;
    let range = match request.ready_until_ms {
        Some(until) => host.keys.ready_steps_until(org, until),
        None => host.keys.ready_steps(org),
    };
    rendered_page(host, vec![range], after.as_deref(), limit, None, |_| true)
        .await
        .map(Ok)
}

/// `{ items, nextCursor }` of the index entries of `ranges` after `after` that `keep` accepts,
/// spliced from their stored JSON; read from this host's copy of `mirrored` (the index holding
/// them all) while it is whole.
async fn rendered_page(
    host: &Host,
    ranges: Vec<KeyRange>,
    after: Option<&[u8]>,
    limit: usize,
    mirrored: Option<&KeyRange>,
    keep: impl Fn(&RawValue) -> bool,
) -> Result<RenderedData, RuntimeError> {
    let read = |stored: &[u8]| {
        let json = String::from_utf8(packed::unpack(stored).ok()?.into_owned()).ok()?;
        RawValue::from_string(json).ok()
    };
    let sources = ranges
        .into_iter()
        .map(|range| Source::hot_mirrored(range, after, mirrored.cloned()))
        .collect();
    let (items, next) = scan_as(host, sources, limit, read, |item| keep(item)).await?;
    let page = RenderedPage {
        items: &items,
        next_cursor: next.as_deref(),
    };
    let rendered = serde_json::value::to_raw_value(&page)
        .map_err(|e| RuntimeError::Corrupt(format!("a work page does not render: {e}")))?;
    Ok(RenderedData::new(rendered))
}

/// A page with no item and no next page.
pub(crate) fn empty_page() -> RenderedData {
    RenderedData::new(
        RawValue::from_string(r#"{"items":[],"nextCursor":null}"#.to_owned()).expect("valid JSON"),
    )
}

/// Whether a rendered page holds no item ([`RenderedPage`] writes `items` first).
pub(crate) fn page_is_empty(page: &RenderedData) -> bool {
    page.json().starts_with(r#"{"items":[]"#)
}

/// The `process` of a stored index entry's item; `None` when it does not read as one.
pub(crate) fn stored_item_process(stored: &[u8]) -> Option<String> {
    let json = packed::unpack(stored).ok()?;
    serde_json::from_slice::<ItemProcess<'_>>(&json)
        .ok()
        .map(|item| item.process.into_owned())
}

/// A `get_work` page as the caller gets it: the items' JSON as stored.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RenderedPage<'a> {
    items: &'a [Box<RawValue>],
    next_cursor: Option<&'a str>,
}

/// The one field of a stored work item a `process` filter reads.
#[derive(Deserialize)]
struct ItemProcess<'a> {
    #[serde(borrow)]
    process: Cow<'a, str>,
}

pub(super) async fn list_runs(
    host: &Host,
    caller: &Caller,
    request: ListRuns,
) -> Result<ToolOutcome, RuntimeError> {
    let (limit, after) = match (limit_of(request.limit), decode_cursor(request.cursor.as_deref())) {
        (Ok(limit), Ok(after)) => (limit, after),
        (Err(refusal), _) | (_, Err(refusal)) => return Ok(ToolOutcome::Refused(refusal)),
    };
    let org = &caller.organization;
    let processes: Vec<String> = match &request.process {
        Some(process) => vec![process.clone()],
        None => {
            // Every process of the organization, merged by start time.
            let catalog = host
                .store
                .range(RangeRequest::new(host.keys.catalog(org)))
                .await?;
            catalog
                .kvs
                .iter()
                .filter_map(|kv| serde_json::from_slice::<Value>(&kv.value).ok())
                .filter_map(|summary| summary["name"].as_str().map(str::to_string))
                .collect()
        }
    };
    // Filtered by inputs, each process's runs are read where they are filed under the first
    // input's value, unless a version of the process has runs filed under none.
    let filed_under = request
        .inputs
        .as_ref()
        .and_then(|wanted| wanted.iter().next())
        .map(|(name, value)| (name.clone(), records::input_digest(value)));
    let mut sources = Vec::with_capacity(2 * processes.len());
    for process in &processes {
        let runs = host.keys.process_runs(org, process);
        let input = match &filed_under {
            Some(input) if every_run_is_filed_by_input(host, org, process).await? => Some(input.clone()),
            _ => None,
        };
        match &input {
            Some((name, digest)) => sources.push(Source::hot_by_input(
                host.keys.process_runs_with_input(org, process, name, digest),
                runs,
                after.as_deref(),
            )),
            None => sources.push(Source::hot(runs, after.as_deref())),
        }
        sources.push(Source::archived(org, process, input, after.as_deref()));
    }
    let (state, inputs) = (request.state, request.inputs);
    let (items, next) = scan(host, sources, limit, |run| {
        state.as_deref().is_none_or(|s| run["state"].as_str() == Some(s))
            && inputs.as_ref().is_none_or(|wanted| {
                wanted
                    .iter()
                    .all(|(name, value)| run["inputs"].get(name) == Some(value))
            })
    })
    .await?;
    Ok(page(items, next))
}

/// Whether every run of `process` is filed under its inputs' values: the store's runs from
/// before filing were filed ([`super::filing`]), and no published version of the process
/// declares more inputs than a run is filed under ([`records::MAX_INDEXED_INPUTS`]).
async fn every_run_is_filed_by_input(host: &Host, org: &OrgId, process: &str) -> Result<bool, RuntimeError> {
    if !super::filing::runs_are_filed_by_input(host).await? {
        return Ok(false);
    }
    let Some(latest) = host.pinned.resolve(org, process, None).await? else {
        return Ok(true);
    };
    for version in 1..=latest.version {
        let declared = match version == latest.version {
            true => latest.process.inputs.len(),
            false => match host.pinned.get(org, process, version).await? {
                Some(pinned) => pinned.process.inputs.len(),
                None => continue,
            },
        };
        if declared > records::MAX_INDEXED_INPUTS {
            return Ok(false);
        }
    }
    Ok(true)
}

pub(super) async fn list_processes(
    host: &Host,
    caller: &Caller,
    cursor: Option<String>,
) -> Result<ToolOutcome, RuntimeError> {
    let after = match decode_cursor(cursor.as_deref()) {
        Ok(after) => after,
        Err(refusal) => return Ok(ToolOutcome::Refused(refusal)),
    };
    let sources = vec![Source::hot(
        host.keys.catalog(&caller.organization),
        after.as_deref(),
    )];
    let (items, next) = scan(host, sources, DEFAULT_LIMIT, |_| true).await?;
    Ok(page(items, next))
}
