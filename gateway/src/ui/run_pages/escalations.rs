//! `GET /ui/escalations` (operators): every open escalation the operator may decide, oldest
//! first. Escalated steps wait on the operators' queue (spec §3.3), which a person operator's
//! `get_work` lists with their own work; only a person decides (spec §6.4).

use super::refusal_page;
use super::timeline::text;
use super::{operators_only, time};
use crate::auth::IdentityKind;
use crate::mcp::ToolName;
use crate::ui::UiState;
use crate::ui::layout::path_segment;
use crate::ui::layout::{Page, message_page};
use crate::ui::session::SignedIn;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use serde_json::{Value, json};
use std::sync::Arc;

/// The most `get_work` pages (of 100) the queue reads.
const MAX_PAGES: usize = 50;

/// `GET /ui/escalations`.
pub async fn queue(State(state): State<Arc<UiState>>, signed_in: SignedIn) -> Response {
    if let Some(forbidden) = operators_only(&signed_in) {
        return forbidden;
    }
    if !matches!(signed_in.identity.kind, IdentityKind::Person { .. }) {
        return message_page(
            StatusCode::FORBIDDEN,
            "Escalations are decided by people",
            "Only a person decides an escalation. Sign in as a person with operator rights to see the queue.",
            Some(&signed_in),
        );
    }
    let mut escalations: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut complete = false;
    for _ in 0..MAX_PAGES {
        let mut arguments = json!({ "limit": 100 });
        if let Some(cursor) = &cursor {
            arguments["cursor"] = json!(cursor);
        }
        let page = match state
            .call(&signed_in.identity, ToolName::GetWork, arguments)
            .await
        {
            Ok(page) => page,
            Err(error) => return refusal_page("The escalations cannot be read", &error, &signed_in),
        };
        escalations.extend(
            page["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|item| item["workItem"]["escalation"].is_object())
                .cloned(),
        );
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => {
                complete = true;
                break;
            }
        }
    }
    escalations.sort_by(|a, b| {
        text(&a["workItem"]["escalation"]["at"]).cmp(&text(&b["workItem"]["escalation"]["at"]))
    });
    let main = html! {
        h1 { "Escalations" }
        p { "Steps an agent or a check handed to the operators, oldest first. Open one to return it, complete it or fail the run." }
        @if !complete {
            p class="notice" { "Only the first " (MAX_PAGES * 100) " open work items were read." }
        }
        @if escalations.is_empty() {
            p { "No escalation is open." }
        } @else {
            ol class="escalations" {
                @for item in &escalations {
                    @let run_id = text(&item["runId"]);
                    @let work = &item["workItem"];
                    @let step = text(&work["stepId"]);
                    @let escalation = &work["escalation"];
                    li class="escalation" {
                        p class="run-title" {
                            a href={ "/ui/work/" (path_segment(&run_id)) "/" (path_segment(&step)) } { "Decide " (step) }
                            " in " (text(&item["process"])) " v" (text(&item["version"]))
                            @if item["mode"] == "test" { " " span class="tag test" { "Test run" } }
                        }
                        dl class="facts compact" {
                            dt { "Run" }
                            dd { a href={ "/ui/runs/" (path_segment(&run_id)) } { code { (run_id) } } }
                            dt { "Escalated by" }
                            dd { (text(&escalation["by"])) }
                            dt { "At" }
                            dd { (time(&text(&escalation["at"]))) }
                            dt { "Reason" }
                            dd { (text(&escalation["note"])) }
                            @if let Some(verdict) = escalation["check"]["verdict"].as_str() {
                                dt { "Check" }
                                dd { (verdict) }
                            }
                        }
                    }
                }
            }
        }
    };
    Page {
        title: "Escalations",
        signed_in: Some(&signed_in),
        main,
    }
    .render(StatusCode::OK)
}
