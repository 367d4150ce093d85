//! The inbox at `GET /ui`: the caller's open work exactly as `get_work` gives it, oldest first,
//! with due and overdue times, test runs and escalations marked, refreshed every 30 seconds
//! unless the person turns that off (`?updates=off`); after a decision, a notice of it, once.

use super::UiState;
use super::layout::{Page, message_page};
use super::session::take_flash;
use super::when::{is_before, now, time};
use super::work::{DecisionNotice, kind_label, work_path};
use crate::layout::run_path;
use crate::signed_in::SignedIn;
use agentprocess_gateway::auth::IdentityKind;
use agentprocess_gateway::mcp::ToolName;
use agentprocess_service::Timestamp;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// How often the inbox reloads itself, in seconds.
pub const REFRESH_SECONDS: u32 = 30;
/// The most `get_work` pages read for one inbox (of 100 items each).
const MAX_PAGES: usize = 10;

/// `?updates=off` stops the automatic refresh. Nothing in the query makes a notice: a link
/// anyone can write must not say that the reader decided something.
#[derive(Debug, Default, Deserialize)]
pub struct InboxQuery {
    updates: Option<String>,
}

/// One open item as the inbox lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxEntry {
    pub run_id: String,
    pub step_id: String,
    pub process: String,
    pub kind: &'static str,
    pub escalated: bool,
    pub test: bool,
    pub open_since: Option<String>,
    pub due: Option<String>,
    pub overdue: bool,
}

/// `GET /ui`: the inbox.
pub async fn inbox(
    State(state): State<Arc<UiState>>,
    signed_in: SignedIn,
    Query(query): Query<InboxQuery>,
    headers: HeaderMap,
) -> Response {
    let (flash, clear_flash) = take_flash(&state, &headers);
    let notice = flash.as_deref().and_then(DecisionNotice::from_bytes);
    let entries = match inbox_entries(&state, &signed_in).await {
        Ok(entries) => entries,
        Err(message) => {
            return message_page(
                StatusCode::SERVICE_UNAVAILABLE,
                "Your work cannot be read right now",
                &format!("The server answered: {message}. Try again in a moment."),
                Some(&signed_in),
            );
        }
    };
    let live = query.updates.as_deref() != Some("off");
    let main = html! {
        h1 { "Your work" }
        @if let Some(notice) = &notice {
            p class="notice" role="status" { (notice.text()) }
        }
        p class="refresh" {
            @match entries.len() {
                0 => { "Nothing is waiting for you. " }
                1 => { "One open item. " }
                count => { (count) " open items, oldest first. " }
            }
            @if live {
                "This page updates every " (REFRESH_SECONDS) " seconds. "
                a href="/ui" { "Refresh now" } " · " a href="/ui?updates=off" { "Stop automatic updates" }
            } @else {
                "Automatic updates are off. "
                a href="/ui?updates=off" { "Refresh now" } " · " a href="/ui" { "Update every " (REFRESH_SECONDS) " seconds" }
            }
        }
        @if entries.is_empty() {
            p { "New work appears here when a run reaches a step for you." }
        } @else {
            ol class="work-list" {
                @for entry in &entries { (entry_markup(entry)) }
            }
        }
        (who_you_are(&signed_in))
    };
    let page = Page {
        title: "Your work",
        signed_in: Some(&signed_in),
        main,
    };
    let mut response = if live {
        page.render_refreshing(StatusCode::OK, REFRESH_SECONDS)
    } else {
        page.render(StatusCode::OK)
    };
    if let Some(clear) = clear_flash {
        response.headers_mut().append(header::SET_COOKIE, clear);
    }
    response
}

/// Every open item of the caller, in `get_work`'s order (oldest first), pages followed.
async fn inbox_entries(state: &UiState, signed_in: &SignedIn) -> Result<Vec<InboxEntry>, String> {
    let identity = &signed_in.identity;
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut arguments = json!({ "limit": 100 });
        if let Some(cursor) = &cursor {
            arguments["cursor"] = json!(cursor);
        }
        let work = state
            .call(identity, ToolName::GetWork, arguments)
            .await
            .map_err(|error| error.message)?;
        items.extend(work["items"].as_array().cloned().unwrap_or_default());
        match work["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    let now = now();
    let mut runs: HashMap<String, Value> = HashMap::new();
    let mut entries = Vec::with_capacity(items.len());
    for item in &items {
        let entry = match &identity.kind {
            IdentityKind::Agent { .. } => agent_entry(item, now),
            IdentityKind::Person { .. } => {
                let run_id = item["runId"].as_str().unwrap_or_default().to_owned();
                if !runs.contains_key(&run_id) {
                    let view = state
                        .call(identity, ToolName::GetRun, json!({ "runId": run_id }))
                        .await
                        .map_err(|error| error.message)?;
                    runs.insert(run_id.clone(), view);
                }
                person_entry(item, &runs[&run_id], now)
            }
        };
        entries.push(entry);
    }
    Ok(entries)
}

/// An agent's item: `get_work` gives when it became ready, its due time and whether it is
/// overdue.
fn agent_entry(item: &Value, now: Timestamp) -> InboxEntry {
    let due = item["due"].as_str().map(str::to_owned);
    InboxEntry {
        run_id: text(&item["runId"]),
        step_id: text(&item["stepId"]),
        process: text(&item["process"]),
        kind: kind_label("agent", false),
        escalated: false,
        test: item["mode"] == "test",
        open_since: item["readySince"].as_str().map(str::to_owned),
        overdue: item["overdue"] == Value::Bool(true)
            || due.as_deref().is_some_and(|due| is_before(due, now)),
        due,
    }
}

/// A person's item: its work item, with the run view for the step's overdue flag and for when
/// it opened (the escalation's time, else the run's latest record before it, else its start).
fn person_entry(item: &Value, view: &Value, now: Timestamp) -> InboxEntry {
    let work_item = &item["workItem"];
    let step_id = text(&work_item["stepId"]);
    let escalated = work_item["escalation"].is_object();
    let due = work_item["due"].as_str().map(str::to_owned);
    let step_overdue = view["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|step| step["id"] == step_id.as_str() && step["overdue"] == Value::Bool(true));
    let open_since = if escalated {
        work_item["escalation"]["at"].as_str().map(str::to_owned)
    } else {
        latest_record_time(view).or_else(|| view["run"]["startedAt"].as_str().map(str::to_owned))
    };
    InboxEntry {
        run_id: text(&item["runId"]),
        process: text(&item["process"]),
        kind: kind_label(work_item["kind"].as_str().unwrap_or_default(), escalated),
        escalated,
        test: item["mode"] == "test",
        open_since,
        overdue: step_overdue || due.as_deref().is_some_and(|due| is_before(due, now)),
        due,
        step_id,
    }
}

/// The time of the run's latest step record: the moment its current waiting began, in a run
/// that moves one step at a time.
fn latest_record_time(view: &Value) -> Option<String> {
    view["data"]["steps"]
        .as_object()?
        .values()
        .filter_map(|entry| entry["at"].as_str())
        .filter_map(|at| Timestamp::parse_rfc3339(at).map(|parsed| (parsed, at)))
        .max_by_key(|(parsed, _)| *parsed)
        .map(|(_, at)| at.to_owned())
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

/// One item of the list: what and where, since when, due when, and its marks.
fn entry_markup(entry: &InboxEntry) -> Markup {
    html! {
        li class="work-entry" {
            h2 {
                a href=(work_path(&entry.run_id, &entry.step_id)) { (entry.kind) ": " (entry.step_id) }
            }
            @if entry.escalated || entry.test || entry.overdue {
                p class="marks" {
                    @if entry.escalated { span class="badge escalated" { "Escalated" } " " }
                    @if entry.overdue { span class="badge overdue" { "Overdue" } " " }
                    @if entry.test { span class="badge test" { "Test run" } }
                }
            }
            dl class="facts" {
                dt { "Process" } dd { (entry.process) }
                dt { "Run" } dd { a href=(run_path(&entry.run_id)) { code { (entry.run_id) } } }
                @if let Some(since) = &entry.open_since { dt { "Open since" } dd { (time(since)) } }
                dt { "Due" }
                dd {
                    @match &entry.due { Some(due) => (time(due)), None => "no due time" }
                }
            }
        }
    }
}

/// Who the caller is signed in as, in a small box.
fn who_you_are(signed_in: &SignedIn) -> Markup {
    let identity = &signed_in.identity;
    html! {
        section class="who-box" aria-labelledby="who-heading" {
            h2 id="who-heading" { "Signed in" }
            dl class="facts" {
                @match &identity.kind {
                    IdentityKind::Person { email, groups } => {
                        dt { "Person" } dd { (email) }
                        dt { "Groups" } dd { @if groups.is_empty() { "none" } @else { (groups.join(", ")) } }
                    }
                    IdentityKind::Agent { id } => { dt { "Agent" } dd { (id) } }
                }
                dt { "Organization" } dd { (identity.organization) }
                dt { "Operator" } dd { @if identity.operator { "yes" } @else { "no" } }
            }
            form method="post" action="/ui/sign-out" {
                input type="hidden" name="csrf" value=(signed_in.csrf());
                button type="submit" class="secondary" { "Sign out" }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::work::Decision;

    #[test]
    fn a_person_item_is_overdue_by_the_step_flag_or_the_clock() {
        let now = Timestamp::parse_rfc3339("2026-10-06T09:00:00Z").unwrap();
        let item = json!({ "runId": "r_1", "process": "p", "mode": "test", "workItem": {
            "stepId": "approve", "kind": "approve", "due": "2026-10-07T09:00:00Z", "escalation": null } });
        let view = json!({ "run": { "startedAt": "2026-10-06T08:00:00Z" },
            "steps": [{ "id": "approve", "overdue": false }],
            "data": { "steps": { "check": { "at": "2026-10-06T08:30:00Z" }, "older": { "at": "2026-10-06T08:10:00Z" } } } });
        let entry = person_entry(&item, &view, now);
        assert!(entry.test && !entry.overdue && !entry.escalated);
        assert_eq!(entry.kind, "Approval");
        assert_eq!(entry.open_since.as_deref(), Some("2026-10-06T08:30:00Z"));
        let later = Timestamp::parse_rfc3339("2026-10-08T00:00:00Z").unwrap();
        assert!(person_entry(&item, &view, later).overdue);
        let flagged =
            json!({ "run": {}, "steps": [{ "id": "approve", "overdue": true }], "data": { "steps": {} } });
        assert!(person_entry(&item, &flagged, now).overdue);
    }

    #[test]
    fn an_escalation_is_marked_and_open_since_it_was_escalated() {
        let item = json!({ "runId": "r_1", "process": "p", "mode": "live", "workItem": {
            "stepId": "validate", "kind": "agent", "due": null,
            "escalation": { "note": "n", "by": "a_x", "at": "2026-10-06T08:45:00Z" } } });
        let view =
            json!({ "run": { "startedAt": "2026-10-06T08:00:00Z" }, "steps": [], "data": { "steps": {} } });
        let entry = person_entry(&item, &view, Timestamp::from_millis(0));
        assert!(entry.escalated && !entry.test);
        assert_eq!(entry.kind, "Escalation");
        assert_eq!(entry.open_since.as_deref(), Some("2026-10-06T08:45:00Z"));
    }

    #[test]
    fn a_decision_notice_reads_back_and_names_only_known_decisions() {
        let notice = DecisionNotice {
            decision: Decision::Approved,
            run_id: "r_1".into(),
            step_id: "approve".into(),
        };
        let read = DecisionNotice::from_bytes(&notice.to_bytes()).unwrap();
        assert_eq!(read.text(), "Done: you approved approve of run r_1.");
        let unknown = br#"{"decision":"<b>","run":"r_1","step":"approve"}"#;
        assert_eq!(DecisionNotice::from_bytes(unknown), None);
        assert_eq!(DecisionNotice::from_bytes(b"approved"), None);
    }
}
