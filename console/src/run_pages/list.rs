//! `GET /ui/runs`: the runs the caller may see as a table, through `list_runs` (its own
//! visibility rules hold), filtered by process, state, input values, overdue and, for operators,
//! stuck (the admin API's stuck listing), a page at a time, each page sortable.

use super::table::{Ordering, Row, Sort, SortKey, runs_table};
use super::timeline::text;
use super::{issue_field, refusal_notice};
use crate::UiState;
use crate::layout::Page;
use crate::session::bad_form;
use crate::signed_in::SignedIn;
use agentprocess_gateway::admin_ops::{StuckRule, stuck_runs};
use agentprocess_gateway::admin_ops_model::{RunsQuery, input_filter_value};
use agentprocess_gateway::mcp::{RunRead, ToolError, ToolName};
use agentprocess_gateway::respond::{HttpFailure, tool_failed};
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use futures_util::{StreamExt, stream};
use maud::{Markup, html};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// Runs per page when the form does not say.
const DEFAULT_PAGE_SIZE: &str = "20";
/// The most runs a page holds (`list_runs`' own limit, which the stuck listing keeps too).
const MAX_PAGE_SIZE: u64 = 100;
/// How many runs of a page are read at once (a `get_run`, and an inspection for operators).
const ROW_READS_AT_ONCE: usize = 8;
/// Minutes ready and unclaimed after which a step is stuck, when the form does not say.
const DEFAULT_STUCK_MINUTES: &str = "60";
/// Lapsed claims after which a step is stuck, when the form does not say.
const DEFAULT_STUCK_LAPSES: &str = "2";
/// The states `list_runs` filters on (tools.md `list_runs`, spec §3 run states).
const STATES: [&str; 4] = ["active", "waiting", "ended", "cancelled"];

/// The filter form as sent (every field text, so that what was typed comes back as typed).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct Filters {
    pub process: String,
    pub state: String,
    /// `name=value` lines.
    pub inputs: String,
    /// `on` when ticked.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub overdue: String,
    /// `on` when ticked (operators): the stuck listing instead of `list_runs`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stuck: String,
    /// Minutes a step has waited, ready and unclaimed, after which it is stuck.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub waited: String,
    /// Lapsed claims after which a step is stuck; empty for no such rule.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub lapsed: String,
    pub limit: String,
    /// A [`SortKey`] name; empty for the listing's order.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub sort: String,
    /// `asc` or `desc`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub order: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cursor: String,
}

/// What is wrong with the filters, per field; `general` holds what names no field.
#[derive(Debug, Default)]
struct FilterErrors {
    fields: Vec<(&'static str, String)>,
    general: Option<ToolError>,
}

impl FilterErrors {
    fn of(&self, field: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(f, _)| *f == field)
            .map(|(_, m)| m.as_str())
    }

    fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.general.is_none()
    }

    /// Each issue of a refusal next to the field it names; the refusal itself when none does.
    fn from_refusal(error: ToolError) -> FilterErrors {
        let mut errors = FilterErrors::default();
        for issue in &error.issues {
            let field = match issue_field(issue) {
                "process" => "process",
                "state" => "state",
                "inputs" => "inputs",
                "limit" => "limit",
                "cursor" => "cursor",
                _ => continue,
            };
            errors.fields.push((field, issue.clone()));
        }
        if errors.fields.is_empty() {
            errors.general = Some(error);
        }
        errors
    }
}

/// The `list_runs` arguments of the filters, or what is wrong with the fields the tool cannot
/// judge (a page size that is not a number, an input line without `=`).
fn list_arguments(filters: &Filters) -> Result<Value, FilterErrors> {
    let mut arguments = json!({});
    let mut errors = FilterErrors::default();
    if !filters.process.trim().is_empty() {
        arguments["process"] = json!(filters.process.trim());
    }
    if !filters.state.is_empty() {
        arguments["state"] = json!(filters.state);
    }
    match parse_inputs(&filters.inputs) {
        Ok(inputs) if inputs.is_empty() => {}
        Ok(inputs) => arguments["inputs"] = Value::Object(inputs),
        Err(message) => errors.fields.push(("inputs", message)),
    }
    let limit = filters.limit.trim();
    let limit = if limit.is_empty() {
        DEFAULT_PAGE_SIZE
    } else {
        limit
    };
    match limit.parse::<i64>() {
        Ok(limit) => arguments["limit"] = json!(limit),
        Err(_) => errors.fields.push((
            "limit",
            format!("Enter a whole number of runs per page, not \"{limit}\"."),
        )),
    }
    if !filters.cursor.is_empty() {
        arguments["cursor"] = json!(filters.cursor);
    }
    if errors.is_empty() {
        Ok(arguments)
    } else {
        Err(errors)
    }
}

/// `name=value` lines as the input values `list_runs` matches on equality: a value that reads
/// as a JSON number, `true`, `false`, `null` or a quoted string is that; anything else is text.
pub fn parse_inputs(text: &str) -> Result<Map<String, Value>, String> {
    Ok(input_lines(text)?
        .into_iter()
        .map(|(name, value)| (name, input_filter_value(&value)))
        .collect())
}

/// `name=value` lines as `(name, value as typed)`, trimmed; a name given again keeps its last value.
fn input_lines(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut inputs: Vec<(String, String)> = Vec::new();
    for line in text.lines().map(str::trim).filter(|line| !line.is_empty()) {
        let Some((name, value)) = line.split_once('=') else {
            return Err(format!("Write each input as name=value (\"{line}\" has no =)."));
        };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() {
            return Err(format!("Name the input before the = in \"{line}\"."));
        }
        inputs.retain(|(seen, _)| seen != name);
        inputs.push((name.to_owned(), value.to_owned()));
    }
    Ok(inputs)
}

/// A whole number typed in a field, or `default` when it is empty.
fn whole_number(typed: &str, default: &str) -> Option<u64> {
    let typed = typed.trim();
    if typed.is_empty() { default } else { typed }.parse().ok()
}

/// The stuck listing's query and rule for the filters, or what is wrong with the fields it
/// reads (it has no tool to judge them).
fn stuck_arguments(filters: &Filters) -> Result<(RunsQuery, StuckRule), FilterErrors> {
    let mut errors = FilterErrors::default();
    let waited = whole_number(&filters.waited, DEFAULT_STUCK_MINUTES).filter(|minutes| *minutes > 0);
    if waited.is_none() {
        errors
            .fields
            .push(("waited", "Enter a whole number of minutes from 1 up.".into()));
    }
    let lapsed = match filters.lapsed.trim() {
        "" => Some(None),
        typed => typed.parse::<u32>().ok().map(Some),
    };
    if lapsed.is_none() {
        errors.fields.push((
            "lapsed",
            "Enter a whole number of lapsed claims, or nothing to leave lapses out.".into(),
        ));
    }
    let inputs = input_lines(&filters.inputs).unwrap_or_else(|message| {
        errors.fields.push(("inputs", message));
        Vec::new()
    });
    let limit =
        whole_number(&filters.limit, DEFAULT_PAGE_SIZE).filter(|limit| (1..=MAX_PAGE_SIZE).contains(limit));
    if limit.is_none() {
        errors.fields.push((
            "limit",
            format!("Enter a whole number of runs per page from 1 to {MAX_PAGE_SIZE}."),
        ));
    }
    let (Some(minutes), Some(lapsed), Some(limit)) = (waited, lapsed, limit) else {
        return Err(errors);
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    let given = |typed: &str| Some(typed.trim().to_owned()).filter(|typed| !typed.is_empty());
    let waited_more_than_seconds = minutes.saturating_mul(60);
    let query = RunsQuery {
        process: given(&filters.process),
        state: given(&filters.state),
        inputs,
        overdue: (!filters.overdue.is_empty()).then_some(true),
        mode: None,
        stuck_seconds: Some(waited_more_than_seconds),
        limit: Some(limit),
        cursor: given(&filters.cursor),
    };
    let rule = StuckRule {
        waited_more_than_seconds,
        lease_expired_more_than: lapsed,
    };
    Ok((query, rule))
}

/// A page of the listing the filters ask for, its items and cursor: `list_runs` as the caller,
/// or for an operator who ticked stuck, the admin API's stuck listing.
async fn listed(
    state: &UiState,
    signed_in: &SignedIn,
    filters: &Filters,
) -> Result<(Vec<Value>, Option<String>), FilterErrors> {
    if filters.stuck.is_empty() {
        let arguments = list_arguments(filters)?;
        let page = state
            .call(&signed_in.identity, ToolName::ListRuns, arguments)
            .await
            .map_err(FilterErrors::from_refusal)?;
        let items = page["items"].as_array().cloned().unwrap_or_default();
        return Ok((items, page["nextCursor"].as_str().map(str::to_owned)));
    }
    let Some(admin) = state.admin.as_ref().filter(|_| signed_in.identity.operator) else {
        let mut errors = FilterErrors::default();
        errors.fields.push((
            "stuck",
            "Stuck runs are found among the organization's ready steps, which only operators read.".into(),
        ));
        return Err(errors);
    };
    let (query, rule) = stuck_arguments(filters)?;
    let (tools, run_service) = (state.runs.as_ref(), admin.run_service.as_ref());
    let now = admin.clock.now();
    match stuck_runs(tools, run_service, &signed_in.identity, &query, rule, now).await {
        Ok(page) => {
            let items = page
                .items
                .iter()
                .map(|item| serde_json::to_value(item).expect("a run item is JSON"))
                .collect();
            Ok((items, page.next_cursor))
        }
        Err(HttpFailure::ToolRefused(error)) => Err(FilterErrors::from_refusal(error)),
        Err(failure) => {
            tracing::error!(?failure, "the stuck runs could not be read");
            Err(FilterErrors {
                fields: Vec::new(),
                general: Some(tool_failed()),
            })
        }
    }
}

/// `GET /ui/runs`.
pub async fn runs_page(
    State(state): State<Arc<UiState>>,
    signed_in: SignedIn,
    RawQuery(query): RawQuery,
) -> Response {
    let Ok(filters) = serde_urlencoded::from_str::<Filters>(query.as_deref().unwrap_or("")) else {
        return bad_form("The filters in the address could not be read.");
    };
    let stuck = !filters.stuck.is_empty();
    let (mut rows, next_cursor, errors) = match listed(&state, &signed_in, &filters).await {
        Ok((items, next_cursor)) => {
            // The stuck listing has kept only overdue runs already, when asked.
            let overdue_only = !filters.overdue.is_empty() && !stuck;
            let rows = rows_of(&state, &signed_in, items, overdue_only).await;
            (rows, next_cursor, FilterErrors::default())
        }
        Err(errors) => (Vec::new(), None, errors),
    };
    let ordering = match Sort::parse(&filters.sort, &filters.order) {
        Some(sort) => {
            sort.apply(&mut rows);
            Ordering::Sorted(sort)
        }
        None if stuck => Ordering::LongestWaitingFirst,
        None => Ordering::StartOrder,
    };
    let now = state
        .admin
        .as_ref()
        .map_or_else(crate::when::now, |admin| admin.clock.now());
    let may_see_stuck = signed_in.identity.operator && state.admin.is_some();
    let main = html! {
        h1 { "Runs" }
        (filter_form(&filters, &errors, may_see_stuck))
        @if let Some(error) = &errors.general { (refusal_notice(error)) }
        @if errors.is_empty() {
            h2 id="results" { "Results" }
            @if !filters.overdue.is_empty() && !stuck {
                p class="hint" { "Overdue keeps the runs of this page that have an overdue step, so a page may hold fewer runs." }
            }
            @if rows.is_empty() {
                p { "No runs on this page match." }
            } @else {
                (runs_table(&rows, ordering, now, |sort| sorted_page(&filters, sort)))
            }
            @if let Some(cursor) = next_cursor {
                p { a href=(next_page(&filters, &cursor)) rel="next" { "Next page" } }
            }
        }
    };
    Page {
        title: "Runs",
        signed_in: Some(&signed_in),
        main,
    }
    .render(StatusCode::OK)
}

/// The rows of `items`, each run read with `get_run` as the caller and, for an operator, with
/// its inspection (who holds each claim until when); with `overdue_only`, only the runs with an
/// overdue step. A run that cannot be read keeps its row with what the listing said. Up to
/// [`ROW_READS_AT_ONCE`] runs are read at once, rows kept in the listing's order.
async fn rows_of(state: &UiState, signed_in: &SignedIn, items: Vec<Value>, overdue_only: bool) -> Vec<Row> {
    let identity = &signed_in.identity;
    let reads = items.into_iter().map(|item| async move {
        let run_id = text(&item["id"]);
        let view = state
            .call(identity, ToolName::GetRun, json!({ "runId": run_id }))
            .await
            .ok();
        let mut row = Row {
            item,
            view,
            inspection: None,
        };
        if overdue_only && !row.is_overdue() {
            return None;
        }
        if identity.operator {
            row.inspection = state
                .runs
                .read_run(identity, RunRead::Inspection, &run_id)
                .await
                .ok()
                .map(|read| read.into_value());
        }
        Some(row)
    });
    stream::iter(reads)
        .buffered(ROW_READS_AT_ONCE)
        .filter_map(|row| async move { row })
        .collect()
        .await
}

/// The address of this page sorted by `sort`: the same filters and cursor.
fn sorted_page(filters: &Filters, sort: Sort) -> String {
    let sorted = Filters {
        sort: sort.key.name().to_owned(),
        order: sort.order_name().to_owned(),
        ..filters.clone()
    };
    format!(
        "/ui/runs?{}#results",
        serde_urlencoded::to_string(&sorted).expect("strings encode")
    )
}

/// The address of the next page: the same filters and the tool's cursor.
fn next_page(filters: &Filters, cursor: &str) -> String {
    let next = Filters {
        cursor: cursor.to_owned(),
        ..filters.clone()
    };
    format!(
        "/ui/runs?{}",
        serde_urlencoded::to_string(&next).expect("strings encode")
    )
}

fn filter_form(filters: &Filters, errors: &FilterErrors, may_see_stuck: bool) -> Markup {
    html! {
        form method="get" action="/ui/runs" class="filters runs-filters" novalidate {
            (text_input("process", "Process", "The process name, like purchase-request.", &filters.process, errors.of("process")))
            div class="field" {
                label for="state" { "State" }
                @if let Some(message) = errors.of("state") { span class="error" id="state-error" { (message) } }
                select id="state" name="state" aria-describedby=[errors.of("state").map(|_| "state-error")]
                    aria-invalid=[errors.of("state").map(|_| "true")] {
                    option value="" selected[filters.state.is_empty()] { "Any" }
                    @for state in STATES {
                        option value=(state) selected[filters.state == state] { (state) }
                    }
                    @if !filters.state.is_empty() && !STATES.contains(&filters.state.as_str()) {
                        option value=(filters.state) selected { (filters.state) }
                    }
                }
            }
            div class="field" {
                label for="inputs" { "Input values" }
                span class="hint" id="inputs-hint" { "One name=value a line, like vendorName=Acme or amount=48000. Numbers, true and false match as such; put text that looks like one in quotes." }
                @if let Some(message) = errors.of("inputs") { span class="error" id="inputs-error" { (message) } }
                textarea id="inputs" name="inputs" rows="3" spellcheck="false"
                    aria-describedby={ "inputs-hint" @if errors.of("inputs").is_some() { " inputs-error" } }
                    aria-invalid=[errors.of("inputs").map(|_| "true")] { (filters.inputs) }
            }
            div class="choice" {
                input type="checkbox" id="overdue" name="overdue" checked[!filters.overdue.is_empty()];
                label for="overdue" { "Only runs with an overdue step" }
            }
            @if may_see_stuck || errors.of("stuck").is_some() {
                fieldset class="stuck" {
                    legend { "Stuck work" }
                    @if let Some(message) = errors.of("stuck") { span class="error" id="stuck-error" { (message) } }
                    div class="choice" {
                        input type="checkbox" id="stuck" name="stuck" checked[!filters.stuck.is_empty()]
                            aria-describedby=[errors.of("stuck").map(|_| "stuck-error")];
                        label for="stuck" { "Only runs with a stuck agent step" }
                    }
                    @if may_see_stuck {
                        (text_input("waited", "Stuck after minutes ready and unclaimed", "A step no agent has claimed for longer than this is stuck.",
                            if filters.waited.is_empty() { DEFAULT_STUCK_MINUTES } else { &filters.waited }, errors.of("waited")))
                        (text_input("lapsed", "Or after lapsed claims", "A step whose claims lapsed more times than this is stuck too, however long it has waited. Leave empty to leave lapses out.",
                            if filters.lapsed.is_empty() && filters.stuck.is_empty() { DEFAULT_STUCK_LAPSES } else { &filters.lapsed }, errors.of("lapsed")))
                    }
                }
            }
            (text_input("limit", "Runs per page", "From 1 to 100.", if filters.limit.is_empty() { DEFAULT_PAGE_SIZE } else { &filters.limit }, errors.of("limit")))
            div class="field" {
                label for="sort" { "Sort this page by" }
                span class="hint" id="sort-hint" { "Pages follow the order runs started, oldest first (stuck runs: the longest waiting first); a sort orders the page shown." }
                select id="sort" name="sort" aria-describedby="sort-hint" {
                    option value="" selected[filters.sort.is_empty()] { "The listing's order" }
                    @for key in SortKey::ALL {
                        option value=(key.name()) selected[filters.sort == key.name()] { (key.label()) }
                    }
                }
            }
            div class="field" {
                label for="order" { "Direction" }
                select id="order" name="order" {
                    option value="asc" selected[filters.order != "desc"] { "Ascending" }
                    option value="desc" selected[filters.order == "desc"] { "Descending" }
                }
            }
            @if let Some(message) = errors.of("cursor") {
                p class="error" { (message) " " a href="/ui/runs" { "Start from the first page" } }
            }
            div class="actions" { button type="submit" { "Show runs" } }
        }
    }
}

/// A labelled text input with its hint and error, both tied to it for screen readers.
fn text_input(id: &str, label: &str, hint: &str, value: &str, error: Option<&str>) -> Markup {
    let hint_id = format!("{id}-hint");
    let error_id = format!("{id}-error");
    html! {
        div class="field" {
            label for=(id) { (label) }
            span class="hint" id=(hint_id) { (hint) }
            @if let Some(message) = error { span class="error" id=(error_id) { (message) } }
            input type="text" id=(id) name=(id) value=(value) spellcheck="false" autocomplete="off"
                aria-describedby={ (hint_id) @if error.is_some() { " " (error_id) } }
                aria-invalid=[error.map(|_| "true")];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_values_keep_their_json_type_and_text_stays_text() {
        let inputs = parse_inputs("vendorName = Acme\namount=48000\n\nurgent=true\ncode=\"007\"").unwrap();
        assert_eq!(
            Value::Object(inputs),
            json!({ "vendorName": "Acme", "amount": 48000, "urgent": true, "code": "007" })
        );
        assert!(parse_inputs("vendorName Acme").unwrap_err().contains("no ="));
        assert!(parse_inputs("=x").is_err());
        assert_eq!(parse_inputs("list=[1]").unwrap()["list"], json!("[1]"));
    }

    #[test]
    fn filters_become_list_runs_arguments() {
        let filters = Filters {
            process: " purchase-request ".into(),
            state: "waiting".into(),
            inputs: "approver=mira@acme.test".into(),
            limit: "5".into(),
            cursor: "00ff".into(),
            ..Filters::default()
        };
        assert_eq!(
            list_arguments(&filters).unwrap(),
            json!({ "process": "purchase-request", "state": "waiting", "inputs": { "approver": "mira@acme.test" },
                    "limit": 5, "cursor": "00ff" })
        );
        assert_eq!(
            list_arguments(&Filters::default()).unwrap(),
            json!({ "limit": 20 })
        );
        let errors = list_arguments(&Filters {
            limit: "many".into(),
            ..Filters::default()
        })
        .unwrap_err();
        assert!(errors.of("limit").unwrap().contains("whole number"));
    }

    #[test]
    fn stuck_filters_become_the_stuck_listing_query_and_rule() {
        let filters = Filters {
            process: " triage ".into(),
            inputs: "ticket=T-1\npriority=high".into(),
            overdue: "on".into(),
            stuck: "on".into(),
            waited: "90".into(),
            lapsed: "2".into(),
            cursor: "stuck-00".into(),
            ..Filters::default()
        };
        let (query, rule) = stuck_arguments(&filters).unwrap();
        assert_eq!(query.process.as_deref(), Some("triage"));
        assert_eq!(query.state, None);
        assert_eq!(
            query.inputs,
            vec![
                ("ticket".to_owned(), "T-1".to_owned()),
                ("priority".to_owned(), "high".to_owned())
            ]
        );
        assert_eq!(query.overdue, Some(true));
        assert_eq!(query.limit, Some(20));
        assert_eq!(query.cursor.as_deref(), Some("stuck-00"));
        assert_eq!(
            rule,
            StuckRule {
                waited_more_than_seconds: 90 * 60,
                lease_expired_more_than: Some(2),
            }
        );
        let (_, rule) = stuck_arguments(&Filters::default()).unwrap();
        assert_eq!(rule.waited_more_than_seconds, 3600);
        assert_eq!(rule.lease_expired_more_than, None);
        let errors = stuck_arguments(&Filters {
            waited: "0".into(),
            lapsed: "often".into(),
            limit: "101".into(),
            ..Filters::default()
        })
        .unwrap_err();
        assert!(
            errors.of("waited").is_some() && errors.of("lapsed").is_some() && errors.of("limit").is_some()
        );
    }

    #[test]
    fn a_sort_link_keeps_the_filters_and_the_page() {
        let filters = Filters {
            process: "p".into(),
            limit: "2".into(),
            cursor: "0a".into(),
            sort: "state".into(),
            ..Filters::default()
        };
        let sort = Sort::parse("started", "desc").unwrap();
        assert_eq!(
            sorted_page(&filters, sort),
            "/ui/runs?process=p&state=&inputs=&limit=2&sort=started&order=desc&cursor=0a#results"
        );
    }

    #[test]
    fn the_next_page_carries_the_filters_and_the_cursor() {
        let filters = Filters {
            process: "p".into(),
            inputs: "a=1".into(),
            limit: "2".into(),
            ..Filters::default()
        };
        assert_eq!(
            next_page(&filters, "0a"),
            "/ui/runs?process=p&state=&inputs=a%3D1&limit=2&cursor=0a"
        );
    }
}
