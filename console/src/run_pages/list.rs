//! `GET /ui/runs`: the runs the caller may see, through `list_runs` (its own visibility rules
//! hold), filtered by process, state, input values and overdue, a page at a time.

use super::timeline::text;
use super::{issue_field, refusal_notice, time};
use crate::UiState;
use crate::layout::Page;
use crate::session::bad_form;
use crate::signed_in::SignedIn;
use agentprocess_gateway::admin_ops_model::input_filter_value;
use agentprocess_gateway::mcp::{ToolError, ToolName};
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// Runs per page when the form does not say.
const DEFAULT_PAGE_SIZE: &str = "20";
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
    pub limit: String,
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
    let mut inputs = Map::new();
    for line in text.lines().map(str::trim).filter(|line| !line.is_empty()) {
        let Some((name, value)) = line.split_once('=') else {
            return Err(format!("Write each input as name=value (\"{line}\" has no =)."));
        };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() {
            return Err(format!("Name the input before the = in \"{line}\"."));
        }
        inputs.insert(name.to_owned(), input_filter_value(value));
    }
    Ok(inputs)
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
    let page = match list_arguments(&filters) {
        Ok(arguments) => match state
            .call(&signed_in.identity, ToolName::ListRuns, arguments)
            .await
        {
            Ok(page) => Ok(page),
            Err(error) => Err(FilterErrors::from_refusal(error)),
        },
        Err(errors) => Err(errors),
    };
    let (rows, next_cursor, errors) = match page {
        Ok(page) => {
            let items = page["items"].as_array().cloned().unwrap_or_default();
            let rows = rows_of(&state, &signed_in, items, !filters.overdue.is_empty()).await;
            (
                rows,
                page["nextCursor"].as_str().map(str::to_owned),
                FilterErrors::default(),
            )
        }
        Err(errors) => (Vec::new(), None, errors),
    };
    let main = html! {
        h1 { "Runs" }
        (filter_form(&filters, &errors))
        @if let Some(error) = &errors.general { (refusal_notice(error)) }
        @if errors.is_empty() {
            h2 id="results" { "Results" }
            @if !filters.overdue.is_empty() {
                p class="hint" { "Overdue keeps the runs of this page that have an overdue step, so a page may hold fewer runs." }
            }
            @if rows.is_empty() {
                p { "No runs on this page match." }
            } @else {
                ul class="run-list" aria-labelledby="results" {
                    @for row in &rows { (run_row(row)) }
                }
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

/// A row of the list: the `list_runs` item and, when it reads, the run view, which says what
/// the item does not (`mode`, and `steps[].overdue`).
struct Row {
    item: Value,
    view: Option<Value>,
}

impl Row {
    fn is_test(&self) -> bool {
        self.view
            .as_ref()
            .is_some_and(|view| view["run"]["mode"] == "test")
    }

    fn is_overdue(&self) -> bool {
        self.view.as_ref().is_some_and(|view| {
            view["steps"]
                .as_array()
                .is_some_and(|steps| steps.iter().any(|step| step["overdue"] == true))
        })
    }
}

/// The rows of `items`, each run read with `get_run` as the caller; with `overdue_only`, only
/// the runs with an overdue step.
async fn rows_of(state: &UiState, signed_in: &SignedIn, items: Vec<Value>, overdue_only: bool) -> Vec<Row> {
    let mut rows = Vec::new();
    for item in items {
        let view = state
            .call(
                &signed_in.identity,
                ToolName::GetRun,
                json!({ "runId": item["id"] }),
            )
            .await
            .ok();
        let row = Row { item, view };
        if !overdue_only || row.is_overdue() {
            rows.push(row);
        }
    }
    rows
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

fn run_row(row: &Row) -> Markup {
    let item = &row.item;
    let id = text(&item["id"]);
    let ended = matches!(item["state"].as_str(), Some("ended" | "cancelled"));
    html! {
        li class="run-row" {
            p class="run-title" {
                a href={ "/ui/runs/" (id) } { (text(&item["process"])) " v" (text(&item["version"])) " · " code { (id) } }
                @if row.is_test() { " " span class="tag test" { "Test run" } }
                @if row.is_overdue() { " " span class="tag overdue" { "Overdue" } }
            }
            dl class="facts compact" {
                dt { "State" }
                dd { span class={ "state state-" (text(&item["state"])) } { (text(&item["state"])) }
                     @if let Some(outcome) = item["outcome"].as_str() { " (" (outcome) ")" } }
                dt { "Started" }
                dd { (time(&text(&item["startedAt"]))) }
                dt { @if ended { "Ended" } @else { "Updated" } }
                dd { (time(&text(&item["updatedAt"]))) }
            }
        }
    }
}

fn filter_form(filters: &Filters, errors: &FilterErrors) -> Markup {
    html! {
        form method="get" action="/ui/runs" class="filters" novalidate {
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
            (text_input("limit", "Runs per page", "From 1 to 100.", if filters.limit.is_empty() { DEFAULT_PAGE_SIZE } else { &filters.limit }, errors.of("limit")))
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
