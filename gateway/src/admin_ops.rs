//! The admin API's run operations: list runs (stuck ones too), cancel a run, list the agent
//! steps no agent has claimed, list the open escalations. Operators only, each in their own
//! organization, behind the same bearer layer as [`crate::admin`]; the types on the wire are
//! [`crate::admin_ops_model`]'s.
//!
//! ```text
//! GET  /admin/v1/runs?process=&state=&input.NAME=&overdue=&mode=&stuck=&limit=&cursor=
//!                                       → { items: [list_runs item (+ stuck)], nextCursor }
//! POST /admin/v1/runs/{runId}/cancel    { reason, requestId? } → the run view
//! GET  /admin/v1/work?olderThan=&leaseExpiredMoreThan=&limit=&cursor=
//!                                       → { items: [ready step], nextCursor }, oldest first
//! GET  /admin/v1/escalations?limit=N    → { items: [open escalation], truncated }, oldest first
//! ```
//!
//! Every run is reached through the tools, as the operator who asks and with the arguments
//! checked against the tools' schemas, so each rule and refusal is the protocol's: `list_runs`
//! for the listing (its filters, limits and cursors), `get_run` for what a `list_runs` item does
//! not say (`mode`, overdue steps), `cancel` for cancelling (spec §3.5). A tool's refusal keeps
//! its code, message and issues, with the status [`crate::respond::tool_refusal_status`] gives.
//!
//! The ready, unclaimed agent steps are the organization's ready-step index, oldest `readySince`
//! first, read by the run service for the operator ([`RunService::ready_steps`]) as `get_work`
//! reads it for an agent. `olderThan` and `stuck` end that ordered range at `now − seconds`, so a
//! page costs in proportion to `limit`, never to the number of runs. `stuck` lists, for each
//! step waiting past it, its run (a run with two such steps comes twice), the longest waiting
//! first; its cursor is of that listing ([`stuck_runs`], which the web console's stuck filter
//! reads too, with a [`StuckRule`] that may also count lapsed claims). Each ready step says how
//! many times a claim of it lapsed, from the operator's inspection of its run;
//! `leaseExpiredMoreThan` keeps the steps past that count, out of the page read.

use crate::admin::require_operator;
use crate::admin_model::RunInspection;
use crate::admin_ops_model::{
    CancelRequest, ESCALATIONS_PATH, EscalationsPage, EscalationsQuery, OpenEscalation, RUNS_PATH, ReadyStep,
    RunItem, RunsPage, RunsQuery, StuckStep, WORK_PATH, WorkPage, WorkQuery,
};
use crate::auth::{Identity, IdentityKind};
use crate::escalations::open_escalations;
use crate::mcp::{RunRead, ToolBackend, ToolError, ToolName};
use crate::respond::{self, HttpFailure};
use crate::runtime_backend::caller_of;
use crate::tool_caller::ToolCaller;
use agentprocess_org::Clock;
use agentprocess_service::{ReadySteps, RunService, Timestamp, ToolOutcome};
use axum::body::Bytes;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::middleware::from_fn;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// Runs or steps per page when the query does not say (as `list_runs` and `get_work`).
const DEFAULT_LIMIT: u64 = 20;
/// Most entries one page looks at per item it may return, when filters skip some, before it
/// answers with a cursor (the run service's own budget for its filters).
const SCAN_BUDGET_PER_ITEM: u64 = 10;
/// What begins the cursor of a `stuck` listing, so that it is never taken for `list_runs`' own.
const STUCK_CURSOR_PREFIX: &str = "stuck-";

/// What the handlers share: the tools, the run service's read of the ready-step index, and the
/// clock ages and thresholds are measured by.
struct Ops<B> {
    backend: Arc<B>,
    runs: Arc<dyn RunService>,
    clock: Clock,
}

/// The run operations' routes, operators only, calling tools through `backend` and reading the
/// ready-step index through `runs` (the same run service `backend` calls). Expects the bearer
/// layer in front, as [`crate::admin_routes`] does.
pub fn routes<B: ToolBackend>(backend: Arc<B>, runs: Arc<dyn RunService>, clock: Clock) -> Router {
    Router::new()
        .route(RUNS_PATH, get(list_runs::<B>))
        // `{runId}`, as every route under /admin/v1/runs/ names it: routes that share a
        // position must name it alike.
        .route("/admin/v1/runs/{runId}/cancel", post(cancel::<B>))
        .route(WORK_PATH, get(work::<B>))
        .route(ESCALATIONS_PATH, get(escalations::<B>))
        .route_layer(from_fn(require_operator))
        .with_state(Arc::new(Ops { backend, runs, clock }))
}

/// Calls `tool` as `identity` as `/mcp` would: the arguments checked against its schema first.
async fn call<T: ToolCaller + ?Sized>(
    tools: &T,
    identity: &Identity,
    tool: ToolName,
    arguments: Value,
) -> Result<Value, HttpFailure> {
    if let Err(issues) = tool.validate_arguments(&arguments) {
        return Err(HttpFailure::ToolRefused(ToolError::invalid_arguments(issues)));
    }
    tools
        .run_tool(identity, tool, arguments)
        .await
        .map(|data| data.into_value())
        .map_err(HttpFailure::ToolRefused)
}

/// `GET /admin/v1/runs`.
async fn list_runs<B: ToolBackend>(
    State(ops): State<Arc<Ops<B>>>,
    Extension(identity): Extension<Identity>,
    RawQuery(query): RawQuery,
) -> Result<Json<RunsPage>, HttpFailure> {
    let query = RunsQuery::parse(query.as_deref().unwrap_or("")).map_err(HttpFailure::Malformed)?;
    let page = match query.stuck_seconds {
        None => runs_page(ops.backend.as_ref(), &identity, &query).await?,
        Some(seconds) => {
            let rule = StuckRule {
                waited_more_than_seconds: seconds,
                lease_expired_more_than: None,
            };
            let (tools, runs) = (ops.backend.as_ref(), ops.runs.as_ref());
            stuck_runs(tools, runs, &identity, &query, rule, ops.clock.now()).await?
        }
    };
    Ok(Json(page))
}

fn seconds_in_millis(seconds: u64) -> i64 {
    i64::try_from(seconds)
        .unwrap_or(i64::MAX / 1000)
        .saturating_mul(1000)
}

/// `list_runs`' arguments for `query`, a page of `limit` after `cursor`.
fn list_runs_arguments(query: &RunsQuery, limit: u64, cursor: Option<&str>) -> Value {
    let mut arguments = Map::new();
    if let Some(process) = &query.process {
        arguments.insert("process".into(), json!(process));
    }
    if let Some(state) = &query.state {
        arguments.insert("state".into(), json!(state));
    }
    if let Some(inputs) = query.inputs_argument() {
        arguments.insert("inputs".into(), Value::Object(inputs));
    }
    arguments.insert("limit".into(), json!(limit));
    if let Some(cursor) = cursor {
        arguments.insert("cursor".into(), json!(cursor));
    }
    Value::Object(arguments)
}

/// A page of `list_runs` as the operator; with `mode` or `overdue`, each run is read with
/// `get_run` and pages are read on until `limit` runs match or the scan budget is spent.
async fn runs_page<B: ToolBackend>(
    backend: &B,
    identity: &Identity,
    query: &RunsQuery,
) -> Result<RunsPage, HttpFailure> {
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    let filtered = query.mode.is_some() || query.overdue.is_some();
    let budget = limit.saturating_mul(SCAN_BUDGET_PER_ITEM);
    let mut items = Vec::new();
    let mut cursor = query.cursor.clone();
    let mut scanned = 0;
    loop {
        // Never more than is still wanted, so every page ends on a cursor `list_runs` gave.
        let wanted = limit.saturating_sub(items.len() as u64);
        let arguments = list_runs_arguments(query, wanted, cursor.as_deref());
        let page = call(backend, identity, ToolName::ListRuns, arguments).await?;
        for item in page["items"].as_array().into_iter().flatten() {
            scanned += 1;
            if filtered {
                let view = call(
                    backend,
                    identity,
                    ToolName::GetRun,
                    json!({ "runId": item["id"] }),
                )
                .await?;
                if !view_matches(query, &view) {
                    continue;
                }
            }
            items.push(run_item(item)?);
        }
        cursor = page["nextCursor"].as_str().map(str::to_owned);
        if !filtered || items.len() as u64 >= limit || cursor.is_none() || scanned >= budget {
            return Ok(RunsPage {
                items,
                next_cursor: cursor,
            });
        }
    }
}

/// A `list_runs` item as the model has it.
fn run_item(item: &Value) -> Result<RunItem, HttpFailure> {
    serde_json::from_value(item.clone())
        .map_err(|e| HttpFailure::Unavailable(format!("a list_runs item does not read: {e}")))
}

/// Whether a run view passes the filters `list_runs` items cannot say: `mode` and `overdue`.
fn view_matches(query: &RunsQuery, view: &Value) -> bool {
    let run = &view["run"];
    let overdue = view["steps"]
        .as_array()
        .is_some_and(|steps| steps.iter().any(|step| step["overdue"] == true));
    query.mode.as_deref().is_none_or(|mode| run["mode"] == mode)
        && query.overdue.is_none_or(|wanted| overdue == wanted)
}

/// Whether a run view passes `list_runs`' own filters as `list_runs` applies them to its items
/// (`process` and `state` equal, every input equal): for runs found in the ready-step index.
fn view_matches_list_filters(query: &RunsQuery, view: &Value) -> bool {
    let run = &view["run"];
    query
        .process
        .as_deref()
        .is_none_or(|process| run["process"] == process)
        && query.state.as_deref().is_none_or(|state| run["state"] == state)
        && query.inputs_argument().is_none_or(|inputs| {
            inputs
                .iter()
                .all(|(name, value)| &view["data"]["inputs"][name] == value)
        })
}

/// A `list_runs` item made from a run view, with its stuck step.
fn run_item_of_view(view: &Value, stuck: StuckStep) -> Result<RunItem, HttpFailure> {
    let run = &view["run"];
    let item = json!({
        "id": run["id"], "process": run["process"], "version": run["version"], "state": run["state"],
        "outcome": run["outcome"], "startedAt": run["startedAt"], "updatedAt": run["updatedAt"],
        "inputs": view["data"]["inputs"],
    });
    let mut item = run_item(&item)?;
    item.stuck = Some(stuck);
    Ok(item)
}

/// A page of the organization's ready-step index after `cursor`, cut after `ready_until_ms`:
/// `get_work` items and the next cursor, read by the run service for the operator.
async fn ready_steps(
    runs: &dyn RunService,
    operator: &Identity,
    limit: u64,
    cursor: Option<String>,
    ready_until_ms: Option<u64>,
) -> Result<(Vec<Value>, Option<String>), HttpFailure> {
    let request = ReadySteps {
        limit: Some(usize::try_from(limit).unwrap_or(usize::MAX)),
        cursor,
        ready_until_ms,
    };
    let page = match runs.ready_steps(&caller_of(operator), request).await {
        Ok(ToolOutcome::Ok(page)) => page,
        Ok(ToolOutcome::Rendered(page)) => page.to_value(),
        Ok(ToolOutcome::Refused(refusal)) => return Err(HttpFailure::ToolRefused(respond::refused(refusal))),
        Err(error) => {
            tracing::error!(%error, "reading the ready steps failed in the runtime");
            return Err(HttpFailure::ToolRefused(respond::tool_failed()));
        }
    };
    let items = page["items"].as_array().cloned().unwrap_or_default();
    Ok((items, page["nextCursor"].as_str().map(str::to_owned)))
}

/// The instant `seconds` before `now`, less a millisecond: steps ready since then or before
/// have waited longer than `seconds`.
fn waited_longer_than(now: Timestamp, seconds: u64) -> u64 {
    u64::try_from(now.as_millis() - seconds_in_millis(seconds) - 1).unwrap_or(0)
}

/// When a `get_work` item's step became ready.
fn ready_since(item: &Value) -> Result<Timestamp, HttpFailure> {
    item["readySince"]
        .as_str()
        .and_then(Timestamp::parse_rfc3339)
        .ok_or_else(|| HttpFailure::Unavailable(format!("a ready step has no readySince: {item}")))
}

/// Whole seconds from `since` to `now` (0 when `since` is later).
pub fn age_seconds(since: Timestamp, now: Timestamp) -> u64 {
    u64::try_from((now.as_millis() - since.as_millis()) / 1000).unwrap_or(0)
}

/// What makes a ready, unclaimed agent step stuck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StuckRule {
    /// It has been ready and unclaimed for longer than this.
    pub waited_more_than_seconds: u64,
    /// Or, when given, its claims lapsed more than this many times, however long it has waited
    /// since (a claim that lapses leaves the step ready since the same instant).
    pub lease_expired_more_than: Option<u32>,
}

impl StuckRule {
    /// Where a listing oldest first may stop: steps ready after it have not waited long enough,
    /// so without a lease rule none of them is stuck. `None`: the whole index may hold some.
    fn ready_until_ms(&self, now: Timestamp) -> Option<u64> {
        match self.lease_expired_more_than {
            None => Some(waited_longer_than(now, self.waited_more_than_seconds)),
            Some(_) => None,
        }
    }

    /// Whether a step ready since `since` has waited too long by `now`.
    pub fn waited_too_long(&self, since: Timestamp, now: Timestamp) -> bool {
        since.as_millis()
            <= i64::try_from(waited_longer_than(now, self.waited_more_than_seconds)).unwrap_or(i64::MAX)
    }

    /// Whether `lease_expiries` lapsed claims are too many.
    pub fn lapsed_too_often(&self, lease_expiries: u32) -> bool {
        self.lease_expired_more_than
            .is_some_and(|more_than| lease_expiries > more_than)
    }
}

/// The runs with a stuck agent step by `rule` (ready and unclaimed too long, or claims lapsed
/// too often), one per such step, the longest waiting first, filtered by the rest of `query`:
/// the admin API's `stuck` listing and the web console's stuck filter. Each step is read from
/// the organization's ready-step index (`runs`, for the operator `identity`), each run with
/// `get_run` (and, for a lease rule, its inspection) through `tools`; a page reads at most ten
/// index entries per run it may hold, so it costs in proportion to its limit. Its cursor is of
/// this listing.
pub async fn stuck_runs<T: ToolCaller + ?Sized>(
    tools: &T,
    runs: &dyn RunService,
    identity: &Identity,
    query: &RunsQuery,
    rule: StuckRule,
    now: Timestamp,
) -> Result<RunsPage, HttpFailure> {
    let ready_until_ms = rule.ready_until_ms(now);
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    let mut cursor = match query.cursor.as_deref() {
        None => None,
        Some(cursor) => Some(
            cursor
                .strip_prefix(STUCK_CURSOR_PREFIX)
                .ok_or_else(|| {
                    HttpFailure::ToolRefused(
                        ToolError::new(
                            crate::mcp::ErrorCode::Invalid,
                            "the cursor is not one a stuck listing gave",
                        )
                        .with_issues(vec!["cursor: unknown".into()]),
                    )
                })?
                .to_owned(),
        ),
    };
    let budget = limit.saturating_mul(SCAN_BUDGET_PER_ITEM);
    let mut items = Vec::new();
    let mut scanned = 0;
    loop {
        let wanted = limit.saturating_sub(items.len() as u64);
        let (steps, next) = ready_steps(runs, identity, wanted, cursor, ready_until_ms).await?;
        for step in &steps {
            scanned += 1;
            let since = ready_since(step)?;
            if query.process.as_deref().is_some_and(|p| step["process"] != p)
                || query.mode.as_deref().is_some_and(|m| step["mode"] != m)
            {
                continue;
            }
            if !rule.waited_too_long(since, now) {
                let run_id = step["runId"].as_str().unwrap_or_default();
                let step_id = step["stepId"].as_str().unwrap_or_default();
                if !rule.lapsed_too_often(lease_expiries(tools, identity, run_id, step_id).await?) {
                    continue;
                }
            }
            let view = call(
                tools,
                identity,
                ToolName::GetRun,
                json!({ "runId": step["runId"] }),
            )
            .await?;
            if !view_matches_list_filters(query, &view) || !view_matches(query, &view) {
                continue;
            }
            let stuck = StuckStep {
                step_id: step["stepId"].as_str().unwrap_or_default().to_owned(),
                ready_since: since.to_rfc3339(),
                age_seconds: age_seconds(since, now),
            };
            items.push(run_item_of_view(&view, stuck)?);
        }
        cursor = next;
        if items.len() as u64 >= limit || cursor.is_none() || scanned >= budget {
            return Ok(RunsPage {
                items,
                next_cursor: cursor.map(|c| format!("{STUCK_CURSOR_PREFIX}{c}")),
            });
        }
    }
}

/// `POST /admin/v1/runs/{runId}/cancel`: the protocol's `cancel` as the operator.
async fn cancel<B: ToolBackend>(
    State(ops): State<Arc<Ops<B>>>,
    Extension(identity): Extension<Identity>,
    Path(run_id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, HttpFailure> {
    let request: CancelRequest = if body.iter().all(u8::is_ascii_whitespace) {
        CancelRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            HttpFailure::Malformed(format!(
                "the body must be JSON like {{\"reason\": \"…\", \"requestId\": \"…\"}}: {e}"
            ))
        })?
    };
    let mut arguments = json!({
        "runId": run_id,
        "requestId": request.request_id.unwrap_or_else(new_request_id),
    });
    if let Some(reason) = request.reason {
        arguments["reason"] = json!(reason);
    }
    let view = call(ops.backend.as_ref(), &identity, ToolName::Cancel, arguments).await?;
    Ok(Json(view))
}

/// A fresh `requestId` for a cancel sent without one.
fn new_request_id() -> String {
    let mut random = [0u8; 16];
    getrandom::fill(&mut random).expect("the system has randomness");
    let hex: String = random.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("admin-{hex}")
}

/// `GET /admin/v1/work`: ready, unclaimed agent steps, oldest first.
async fn work<B: ToolBackend>(
    State(ops): State<Arc<Ops<B>>>,
    Extension(identity): Extension<Identity>,
    RawQuery(query): RawQuery,
) -> Result<Json<WorkPage>, HttpFailure> {
    let query = WorkQuery::parse(query.as_deref().unwrap_or("")).map_err(HttpFailure::Malformed)?;
    let now = ops.clock.now();
    let ready_until_ms = query
        .older_than_seconds
        .map(|seconds| waited_longer_than(now, seconds));
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    let (steps, next_cursor) =
        ready_steps(ops.runs.as_ref(), &identity, limit, query.cursor, ready_until_ms).await?;
    let mut items = Vec::with_capacity(steps.len());
    for step in &steps {
        let since = ready_since(step)?;
        let text = |field: &str| step[field].as_str().unwrap_or_default().to_owned();
        let (run_id, step_id) = (text("runId"), text("stepId"));
        let lease_expiries = lease_expiries(ops.backend.as_ref(), &identity, &run_id, &step_id).await?;
        if query
            .lease_expired_more_than
            .is_some_and(|more_than| u64::from(lease_expiries) <= more_than)
        {
            continue;
        }
        items.push(ReadyStep {
            run_id,
            process: text("process"),
            version: step["version"].as_u64().unwrap_or_default(),
            step_id,
            mode: text("mode"),
            ready_since: since.to_rfc3339(),
            age_seconds: age_seconds(since, now),
            lease_expiries,
        });
    }
    Ok(Json(WorkPage { items, next_cursor }))
}

/// How many times a claim of `step_id` in run `run_id` lapsed, from the operator's inspection of
/// the run.
async fn lease_expiries<T: ToolCaller + ?Sized>(
    tools: &T,
    identity: &Identity,
    run_id: &str,
    step_id: &str,
) -> Result<u32, HttpFailure> {
    let inspection = tools
        .read_run(identity, RunRead::Inspection, run_id)
        .await
        .map_err(HttpFailure::ToolRefused)?
        .into_value();
    let inspection: RunInspection = serde_json::from_value(inspection)
        .map_err(|e| HttpFailure::Unavailable(format!("the run {run_id} could not be read: {e}")))?;
    Ok(inspection
        .steps
        .iter()
        .find(|step| step.id == step_id)
        .map_or(0, |step| step.lease_expiries))
}

/// `GET /admin/v1/escalations?limit=N`: the open escalations, oldest first, as the web UI's
/// queue finds them. Only a person decides an escalation, so only a person operator has a queue.
async fn escalations<B: ToolBackend>(
    State(ops): State<Arc<Ops<B>>>,
    Extension(identity): Extension<Identity>,
    RawQuery(query): RawQuery,
) -> Result<Json<EscalationsPage>, HttpFailure> {
    let query = EscalationsQuery::parse(query.as_deref().unwrap_or("")).map_err(HttpFailure::Malformed)?;
    if !matches!(identity.kind, IdentityKind::Person { .. }) {
        return Err(HttpFailure::Forbidden(
            "only a person decides an escalation: the operators' queue belongs to person operators; \
             use a person operator's token"
                .into(),
        ));
    }
    let found = open_escalations(ops.backend.as_ref(), &identity)
        .await
        .map_err(HttpFailure::ToolRefused)?;
    let limit = query.limit();
    let truncated = !found.complete || found.items.len() > limit;
    let items = found
        .items
        .iter()
        .take(limit)
        .map(|item| {
            let work = &item["workItem"];
            let escalation = &work["escalation"];
            let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
            OpenEscalation {
                run_id: text(&item["runId"]),
                process: text(&item["process"]),
                version: item["version"].as_u64().unwrap_or_default(),
                step_id: text(&work["stepId"]),
                work_item_id: text(&work["id"]),
                escalated_by: text(&escalation["by"]),
                note: text(&escalation["note"]),
                opened_at: text(&escalation["at"]),
            }
        })
        .collect();
    Ok(Json(EscalationsPage { items, truncated }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_age_is_whole_seconds_and_never_negative() {
        let now = Timestamp::parse_rfc3339("2026-10-06T09:10:00Z").unwrap();
        let since = Timestamp::parse_rfc3339("2026-10-06T09:05:47.900Z").unwrap();
        assert_eq!(age_seconds(since, now), 252);
        assert_eq!(age_seconds(now, since), 0);
    }

    /// A step is stuck once it has waited longer than the threshold, to the millisecond, as the
    /// ready-step index is cut; with a lease rule, also once its claims lapsed more than that.
    #[test]
    fn a_step_is_stuck_past_the_wait_or_past_the_lapsed_claims() {
        let now = Timestamp::parse_rfc3339("2026-10-06T10:00:00Z").unwrap();
        let at = |text: &str| Timestamp::parse_rfc3339(text).unwrap();
        let waiting = StuckRule {
            waited_more_than_seconds: 600,
            lease_expired_more_than: None,
        };
        assert!(waiting.waited_too_long(at("2026-10-06T09:49:59.999Z"), now));
        assert!(!waiting.waited_too_long(at("2026-10-06T09:50:00Z"), now));
        assert!(!waiting.lapsed_too_often(u32::MAX));
        assert_eq!(waiting.ready_until_ms(now), Some(waited_longer_than(now, 600)));
        let lapsing = StuckRule {
            lease_expired_more_than: Some(2),
            ..waiting
        };
        assert!(!lapsing.lapsed_too_often(2));
        assert!(lapsing.lapsed_too_often(3));
        assert_eq!(lapsing.ready_until_ms(now), None);
    }

    #[test]
    fn run_views_pass_the_filters_a_list_item_cannot_say() {
        let view = json!({
            "run": { "id": "r1", "process": "p", "mode": "test", "state": "active" },
            "data": { "inputs": { "amount": 48000, "code": "007" } },
            "steps": [ { "id": "a", "overdue": false }, { "id": "b", "overdue": true } ],
        });
        let query = |text: &str| RunsQuery::parse(text).unwrap();
        assert!(view_matches(&query("mode=test&overdue=true"), &view));
        assert!(!view_matches(&query("mode=live"), &view));
        assert!(!view_matches(&query("overdue=false"), &view));
        assert!(view_matches_list_filters(
            &query("process=p&state=active&input.amount=48000&input.code=%22007%22"),
            &view
        ));
        assert!(!view_matches_list_filters(&query("input.code=7"), &view));
        assert!(!view_matches_list_filters(&query("state=waiting"), &view));
    }
}
