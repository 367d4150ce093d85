//! `GET /ui/runs/{runId}`: a run from `get_run`, its state, inputs, open work, claims (who holds
//! each until when, from an operator's inspection), steps, map, timeline (from the run's history,
//! so decided escalations and their notes stay) and reworked steps; `POST /ui/runs/{runId}/cancel`
//! cancels it with a reason.

use super::timeline::{self, Entry, attempts, record_details, text};
use super::{issue_field, refusal_notice, refusal_page, time};
use crate::UiState;
use crate::layout::Page;
use crate::layout::path_segment;
use crate::session::SignedForm;
use crate::signed_in::SignedIn;
use crate::signing::random_text;
use agentprocess_gateway::auth::IdentityKind;
use agentprocess_gateway::mcp::{ToolError, ToolName};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// The cancel form as sent.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct CancelFields {
    reason: String,
    /// Made when the form was shown, so that sending it twice cancels once (spec §4.2).
    request_id: String,
}

/// What the cancel form shows again after a refusal: what was typed and why it failed.
#[derive(Debug, Default)]
struct CancelAttempt {
    reason: String,
    request_id: String,
    /// Next to the reason field.
    reason_error: Option<String>,
    /// A refusal that names no field.
    refusal: Option<ToolError>,
}

/// `GET /ui/runs/{runId}`.
pub async fn run_page(
    State(state): State<Arc<UiState>>,
    signed_in: SignedIn,
    Path(run_id): Path<String>,
) -> Response {
    match read_run(&state, &signed_in, &run_id).await {
        Ok(run) => render(&run, &signed_in, &CancelAttempt::default(), StatusCode::OK),
        Err(page) => page,
    }
}

/// `POST /ui/runs/{runId}/cancel`: `cancel` with the reason given, then the run page.
pub async fn cancel(
    State(state): State<Arc<UiState>>,
    Path(run_id): Path<String>,
    SignedForm { signed_in, form }: SignedForm<CancelFields>,
) -> Response {
    let reason = form.reason.trim().to_owned();
    let mut attempt = CancelAttempt {
        reason: form.reason.clone(),
        request_id: form.request_id.clone(),
        ..CancelAttempt::default()
    };
    if reason.is_empty() {
        attempt.reason_error = Some("Say why the run is cancelled: the reason is kept with the run.".into());
    } else {
        let request_id = if form.request_id.is_empty() {
            random_text(16)
        } else {
            form.request_id
        };
        let arguments = json!({ "runId": run_id, "reason": reason, "requestId": request_id });
        match state.call(&signed_in.identity, ToolName::Cancel, arguments).await {
            Ok(_) => return Redirect::to(&format!("/ui/runs/{}", path_segment(&run_id))).into_response(),
            Err(error) => match error.issues.iter().find(|issue| issue_field(issue) == "reason") {
                Some(issue) => attempt.reason_error = Some(issue.clone()),
                None => attempt.refusal = Some(error),
            },
        }
    }
    match read_run(&state, &signed_in, &run_id).await {
        // The form again with what was typed: a 200, as the sign-in form does.
        Ok(run) => render(&run, &signed_in, &attempt, StatusCode::OK),
        Err(page) => page,
    }
}

/// What the run page shows: the run view, the run's history and, for an operator, its
/// inspection or why it could not be read.
struct RunRead {
    view: Value,
    history: Value,
    inspection: Option<Result<Value, ToolError>>,
}

/// The run view and its history, or the page that says why they cannot be read.
async fn read_run(state: &UiState, signed_in: &SignedIn, run_id: &str) -> Result<RunRead, Response> {
    let cannot = |error: ToolError| refusal_page("This run cannot be shown", &error, signed_in);
    let view = state
        .call(&signed_in.identity, ToolName::GetRun, json!({ "runId": run_id }))
        .await
        .map_err(cannot)?;
    let history = state
        .runs
        .read_run(
            &signed_in.identity,
            agentprocess_gateway::mcp::RunRead::History,
            run_id,
        )
        .await
        .map_err(cannot)?
        .into_value();
    // Only operators may inspect a run: the page says who holds a claim to them alone.
    let inspection = if signed_in.identity.operator {
        let inspection = state
            .runs
            .read_run(
                &signed_in.identity,
                agentprocess_gateway::mcp::RunRead::Inspection,
                run_id,
            )
            .await;
        Some(inspection.map(|read| read.into_value()))
    } else {
        None
    };
    Ok(RunRead {
        view,
        history,
        inspection,
    })
}

fn render(read: &RunRead, signed_in: &SignedIn, attempt: &CancelAttempt, status: StatusCode) -> Response {
    let view = &read.view;
    let run = &view["run"];
    let id = text(&run["id"]);
    let title = format!("Run {id}");
    let main = html! {
        h1 { "Run " code { (id) } }
        (facts(run))
        (inputs(&view["data"]["inputs"]))
        (open_work(view))
        (claims(read.inspection.as_ref()))
        (map_figure(view))
        (steps(view, read.inspection.as_ref().and_then(|read| read.as_ref().ok())))
        (timeline_section(&timeline::timeline(&read.history, view)))
        (reworked(view))
        (cancel_section(view, signed_in, attempt))
    };
    Page {
        title: &title,
        signed_in: Some(signed_in),
        main,
    }
    .render(status)
}

fn facts(run: &Value) -> Markup {
    let state = text(&run["state"]);
    html! {
        dl class="facts" {
            dt { "Process" }
            dd { a href={ "/ui/processes/" (path_segment(&text(&run["process"]))) } { (text(&run["process"])) } " v" (text(&run["version"])) }
            dt { "State" }
            dd { span class={ "state state-" (state) } { (state) }
                 @if let Some(outcome) = run["outcome"].as_str() { " (outcome: " (outcome) ")" } }
            dt { "Mode" }
            dd { @if run["mode"] == "test" { span class="tag test" { "Test run" } } @else { "live" } }
            dt { "Started" }
            dd { (time(&text(&run["startedAt"]))) " by " (text(&run["startedBy"])) }
            dt { "Updated" }
            dd { (time(&text(&run["updatedAt"]))) }
            @if let Some(ended) = run["ended"].as_object() {
                dt { @if state == "cancelled" { "Cancelled" } @else { "Ended" } }
                dd {
                    (time(&ended.get("at").map(text).unwrap_or_default())) " by " (ended.get("by").map(text).unwrap_or_default())
                    @if let Some(note) = ended.get("note").and_then(Value::as_str) {
                        br; span class="run-end-note" { @if state == "cancelled" { "Reason: " } @else { "Note: " } (note) }
                    }
                }
            }
        }
    }
}

fn inputs(inputs: &Value) -> Markup {
    html! {
        h2 { "Inputs" }
        @match inputs.as_object().filter(|inputs| !inputs.is_empty()) {
            Some(inputs) => {
                dl class="facts" {
                    @for (name, value) in inputs { dt { (name) } dd { (text(value)) } }
                }
            }
            None => p { "None." }
        }
    }
}

fn open_work(view: &Value) -> Markup {
    let run_id = text(&view["run"]["id"]);
    let items = view["workItems"].as_array().cloned().unwrap_or_default();
    html! {
        h2 { "Open work" }
        @if items.is_empty() {
            p { "No work item waits on a person." }
        } @else {
            ul class="work-items" {
                @for item in &items {
                    @let step = text(&item["stepId"]);
                    li {
                        a href={ "/ui/work/" (path_segment(&run_id)) "/" (path_segment(&step)) } { "Open " (step) }
                        " · " (text(&item["kind"]))
                        @if let Some(group) = item["assignedTo"]["group"].as_str() { " · for group " (group) }
                        @if let Some(person) = item["assignedTo"]["person"].as_str() { " · for " (person) }
                        @if let Some(due) = item["due"].as_str() { " · due " (time(due)) }
                        @if let Some(escalation) = item["escalation"].as_object() {
                            br; "Escalated by " (escalation.get("by").map(text).unwrap_or_default())
                            @if let Some(note) = escalation.get("note").and_then(Value::as_str) { ": " (note) }
                        }
                    }
                }
            }
        }
    }
}

/// Who holds a claim on each claimed step and until when, and how often claims lapsed, from the
/// operator's inspection; for anyone else, that only operators see it.
fn claims(inspection: Option<&Result<Value, ToolError>>) -> Markup {
    let inspection = match inspection {
        None => {
            return html! {
                h2 { "Claims" }
                p class="muted" { "Who holds a claim is shown to operators." }
            };
        }
        Some(Err(error)) => return html! { h2 { "Claims" } (refusal_notice(error)) },
        Some(Ok(inspection)) => inspection,
    };
    let steps: Vec<&Value> = inspection["steps"].as_array().into_iter().flatten().collect();
    let held: Vec<&&Value> = steps.iter().filter(|step| step["claim"].is_object()).collect();
    let lapsed: Vec<&&Value> = steps
        .iter()
        .filter(|step| step["leaseExpiries"].as_u64().is_some_and(|lapses| lapses > 0))
        .collect();
    html! {
        h2 id="claims" { "Claims" }
        @if held.is_empty() {
            p { "No one holds a claim on this run." }
        } @else {
            ul class="claims" aria-labelledby="claims" {
                @for step in &held {
                    li {
                        code { (text(&step["id"])) } " is held by " strong { (text(&step["claim"]["holder"])) }
                        " until " (time(&text(&step["claim"]["expiresAt"])))
                    }
                }
            }
        }
        @for step in &lapsed {
            @let lapses = step["leaseExpiries"].as_u64().unwrap_or(0);
            p class="lapses" {
                "Claims of " code { (text(&step["id"])) } " lapsed " (lapses) @if lapses == 1 { " time." } @else { " times." }
            }
        }
    }
}

/// The map as an image from `map.svg` (its own styles stay out of the page's policy) at its own
/// size, in a box that scrolls when the map is wider than the screen, with a text alternative
/// naming the current steps; the step list below says the same in full.
fn map_figure(view: &Value) -> Markup {
    let run = &view["run"];
    let current: Vec<String> = view["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|step| matches!(step["state"].as_str(), Some("ready" | "claimed" | "waiting")))
        .map(|step| text(&step["id"]))
        .collect();
    let alt = format!(
        "Process map of {} v{}; {}. The steps and their states are listed under Steps.",
        text(&run["process"]),
        text(&run["version"]),
        if current.is_empty() {
            "no step is current".to_owned()
        } else {
            format!("current: {}", current.join(", "))
        }
    );
    let map = format!("/ui/runs/{}/map.svg", path_segment(&text(&run["id"])));
    html! {
        h2 id="map" { "Map" }
        figure class="run-map" {
            // A box that scrolls must be reachable by keyboard, so it takes focus.
            div class="map-box" tabindex="0" role="region" aria-labelledby="map" {
                img src=(map) alt=(alt);
            }
            figcaption {
                "The current steps are outlined; finished steps are marked done. "
                a href=(map) { "Open the map on its own" }
            }
        }
    }
}

fn steps(view: &Value, inspection: Option<&Value>) -> Markup {
    let inspected = |id: &Value| {
        inspection
            .and_then(|inspection| inspection["steps"].as_array())
            .and_then(|steps| steps.iter().find(|step| &step["id"] == id))
    };
    html! {
        h2 { "Steps" }
        ol class="step-states" {
            @for step in view["steps"].as_array().into_iter().flatten() {
                li {
                    code { (text(&step["id"])) } " · " (text(&step["kind"])) " · "
                    @match step["state"].as_str() {
                        Some(state) => span class={ "state state-" (state) } { (state) },
                        None => span class="muted" { "not reached" },
                    }
                    @if let Some(claim) = inspected(&step["id"]).and_then(|step| step["claim"].as_object()) {
                        " · held by " (claim.get("holder").map(text).unwrap_or_default())
                        " until " (time(&claim.get("expiresAt").map(text).unwrap_or_default()))
                    }
                    @if let Some(due) = step["due"].as_str() { " · due " (time(due)) }
                    @if step["overdue"] == true { " " span class="tag overdue" { "Overdue" } }
                }
            }
        }
    }
}

fn timeline_section(entries: &[Entry]) -> Markup {
    html! {
        h2 id="timeline" { "Timeline" }
        ol class="timeline" aria-labelledby="timeline" {
            @for entry in entries {
                li class=[entry.superseded.then_some("superseded")] {
                    p class="when" { (time(&entry.at)) }
                    p {
                        strong { (entry.by) } " " (entry.kind.label())
                        @if let Some(step) = &entry.step { " " code { (step) } }
                        @if let Some(attempt) = entry.attempt { " (attempt " (attempt) ")" }
                        @if entry.superseded { " " span class="tag" { "sent back" } }
                    }
                    (details(&entry.details))
                }
            }
        }
    }
}

fn details(details: &[(&'static str, String)]) -> Markup {
    html! {
        @if !details.is_empty() {
            dl class="facts compact" {
                @for (label, value) in details { dt { (label) } dd { (value) } }
            }
        }
    }
}

/// Each step that was done more than once (or rewound by a rejection), every attempt in order.
fn reworked(view: &Value) -> Markup {
    let reworked: Vec<(String, Vec<&Value>)> = view["data"]["steps"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, entry)| {
            entry["history"]
                .as_array()
                .is_some_and(|history| !history.is_empty())
        })
        .map(|(id, entry)| (id.clone(), attempts(entry)))
        .collect();
    html! {
        @if !reworked.is_empty() {
            h2 { "Reworked steps" }
            @for (id, records) in &reworked {
                section class="rework" aria-labelledby={ "rework-" (id) } {
                    h3 id={ "rework-" (id) } { code { (id) } }
                    ol {
                        @for record in records {
                            li {
                                (time(&text(&record["at"]))) " · " (text(&record["by"]))
                                @if let Some(decision) = record["decision"].as_str() { " · " (decision) }
                                (details(&record_details(record)))
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The cancel form, for an operator who is a person (`cancel` refuses agents and everyone else)
/// while the run has not ended.
fn cancel_section(view: &Value, signed_in: &SignedIn, attempt: &CancelAttempt) -> Markup {
    let open = matches!(view["run"]["state"].as_str(), Some("active" | "waiting"));
    let may_cancel =
        signed_in.identity.operator && matches!(signed_in.identity.kind, IdentityKind::Person { .. });
    if !open || !may_cancel {
        // A refused cancel is said even where the form is not offered.
        return html! { @if let Some(refusal) = &attempt.refusal { (refusal_notice(refusal)) } };
    }
    let request_id = if attempt.request_id.is_empty() {
        random_text(16)
    } else {
        attempt.request_id.clone()
    };
    let error = attempt.reason_error.as_deref();
    html! {
        h2 { "Cancel this run" }
        @if let Some(refusal) = &attempt.refusal { (refusal_notice(refusal)) }
        form method="post" action={ "/ui/runs/" (path_segment(&text(&view["run"]["id"]))) "/cancel" } novalidate {
            input type="hidden" name="csrf" value=(signed_in.csrf());
            input type="hidden" name="request_id" value=(request_id);
            div class="field" {
                label for="reason" { "Reason" }
                span class="hint" id="reason-hint" { "Required. Everyone who reads the run sees it." }
                @if let Some(message) = error { span class="error" id="reason-error" { (message) } }
                textarea id="reason" name="reason" rows="3" required
                    aria-describedby={ "reason-hint" @if error.is_some() { " reason-error" } }
                    aria-invalid=[error.map(|_| "true")] { (attempt.reason) }
            }
            div class="actions" { button type="submit" class="danger" { "Cancel the run" } }
        }
    }
}
