//! Reads that need no kind: `get_run` reads the run record; `get_work`, `list_runs` and
//! `list_processes` range the indexes, whose values are the rendered items, so a page costs in
//! proportion to `limit` (and to what a filter skips, capped per page), never to the number of
//! runs. Cursors are opaque: the hex of the last position read within the range.

use crate::actor::Host;
use crate::call::{RuntimeError, ToolOutcome};
use crate::machine::RunId;
use crate::machine::hex;
use crate::machine::{Caller, CallerKind, Refusal, RunState, render};
use agentprocess_service::{GetWork, ListRuns};
use agentprocess_store::keys::Assignee;
use agentprocess_store::{KeyRange, RangeRequest};
use serde_json::{Value, json};
use std::collections::VecDeque;

/// Most index entries one page may skip over for filters before it returns a cursor.
const SCAN_BUDGET_PER_ITEM: usize = 10;
const DEFAULT_LIMIT: usize = 20;
const MAX_LIMIT: usize = 100;

pub(super) async fn get_run(
    host: &Host,
    caller: &Caller,
    run_id: &RunId,
) -> Result<ToolOutcome, RuntimeError> {
    let (record, _) = host
        .store
        .get(&host.keys.run(&caller.organization, run_id))
        .await?;
    let Some(record) = record else {
        return Ok(ToolOutcome::Refused(Refusal::not_found(
            "no such run in this organization",
        )));
    };
    let run: RunState = serde_json::from_slice(&record.value)
        .map_err(|e| RuntimeError::Corrupt(format!("run {run_id}: {e}")))?;
    let pinned = host
        .pinned
        .get(&caller.organization, &run.process, run.version)
        .await?
        .ok_or_else(|| RuntimeError::Corrupt(format!("run {run_id} pins an unpublished version")))?;
    Ok(ToolOutcome::Ok(render::run_view(&pinned, &run)))
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

/// One index range being read in pages, positions relative to its prefix.
#[derive(Debug)]
struct Source {
    range: KeyRange,
    buffer: VecDeque<(Vec<u8>, Vec<u8>)>,
    next_start: Vec<u8>,
    exhausted: bool,
}

impl Source {
    fn new(range: KeyRange, after: Option<&[u8]>) -> Self {
        let next_start = match after {
            Some(position) => {
                let mut start = range.start.clone();
                start.extend_from_slice(position);
                start.push(0);
                start
            }
            None => range.start.clone(),
        };
        Source {
            range,
            buffer: VecDeque::new(),
            next_start,
            exhausted: false,
        }
    }

    async fn refill(&mut self, host: &Host, page: usize) -> Result<(), RuntimeError> {
        if !self.buffer.is_empty() || self.exhausted {
            return Ok(());
        }
        let range = KeyRange {
            start: self.next_start.clone(),
            end: self.range.end.clone(),
        };
        let found = host
            .store
            .range(RangeRequest::new(range).with_limit(page))
            .await?;
        self.exhausted = !found.more;
        if let Some(last) = found.kvs.last() {
            self.next_start = last.key.clone();
            self.next_start.push(0);
        }
        let prefix = self.range.start.len();
        self.buffer.extend(
            found
                .kvs
                .into_iter()
                .map(|kv| (kv.key[prefix..].to_vec(), kv.value)),
        );
        Ok(())
    }
}

/// Reads the merge of `ranges` in position order after `after`, keeping the values `keep`
/// accepts; returns at most `limit` values and the cursor of the next page.
async fn scan(
    host: &Host,
    ranges: Vec<KeyRange>,
    after: Option<Vec<u8>>,
    limit: usize,
    keep: impl Fn(&Value) -> bool,
) -> Result<(Vec<Value>, Option<String>), RuntimeError> {
    let mut sources: Vec<Source> = ranges
        .into_iter()
        .map(|range| Source::new(range, after.as_deref()))
        .collect();
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
        let Ok(value) = serde_json::from_slice::<Value>(&value) else {
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

fn page(items: Vec<Value>, next_cursor: Option<String>) -> ToolOutcome {
    ToolOutcome::Ok(json!({ "items": items, "nextCursor": next_cursor }))
}

pub(super) async fn get_work(
    host: &Host,
    caller: &Caller,
    request: GetWork,
) -> Result<ToolOutcome, RuntimeError> {
    let (limit, after) = match (limit_of(request.limit), decode_cursor(request.cursor.as_deref())) {
        (Ok(limit), Ok(after)) => (limit, after),
        (Err(refusal), _) | (_, Err(refusal)) => return Ok(ToolOutcome::Refused(refusal)),
    };
    let org = &caller.organization;
    let ranges = match &caller.kind {
        CallerKind::Agent { .. } => vec![host.keys.ready_steps(org)],
        // An item filed under several of these (an escalation in the operator queue and in the
        // escalation group) has one position, so the merge shows it once.
        CallerKind::Person { email, groups } => groups
            .iter()
            .map(|group| host.keys.work_items(org, &Assignee::Group(group.clone())))
            .chain([host.keys.work_items(org, &Assignee::Person(email.clone()))])
            .chain(
                caller
                    .operator
                    .then(|| host.keys.work_items(org, &Assignee::Operators)),
            )
            .collect(),
    };
    let process = request.process;
    let (items, next) = scan(host, ranges, after, limit, |item| {
        process
            .as_deref()
            .is_none_or(|p| item["process"].as_str() == Some(p))
    })
    .await?;
    Ok(page(items, next))
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
    let ranges = match &request.process {
        Some(process) => vec![host.keys.process_runs(org, process)],
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
                .filter_map(|summary| summary["name"].as_str().map(|n| host.keys.process_runs(org, n)))
                .collect()
        }
    };
    let (state, inputs) = (request.state, request.inputs);
    let (items, next) = scan(host, ranges, after, limit, |run| {
        state.as_deref().is_none_or(|s| run["state"].as_str() == Some(s))
            && inputs
                .as_ref()
                .is_none_or(|wanted| wanted.iter().all(|(name, value)| &run["inputs"][name] == value))
    })
    .await?;
    Ok(page(items, next))
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
    let ranges = vec![host.keys.catalog(&caller.organization)];
    let (items, next) = scan(host, ranges, after, DEFAULT_LIMIT, |_| true).await?;
    Ok(page(items, next))
}
