//! `GET /ui/escalations` (operators): every open escalation the operator may decide, oldest
//! first, as [`agentprocess_gateway::escalations`] finds them; only a person decides (spec §6.4).

use super::refusal_page;
use super::timeline::text;
use super::{operators_only, time};
use crate::UiState;
use crate::layout::path_segment;
use crate::layout::{Page, message_page};
use crate::signed_in::SignedIn;
use agentprocess_gateway::auth::IdentityKind;
use agentprocess_gateway::escalations::{MAX_WORK_ITEMS_READ, open_escalations};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use std::sync::Arc;

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
    let (escalations, complete) = match open_escalations(state.runs.as_ref(), &signed_in.identity).await {
        Ok(found) => (found.items, found.complete),
        Err(error) => return refusal_page("The escalations cannot be read", &error, &signed_in),
    };
    let main = html! {
        h1 { "Escalations" }
        p { "Steps an agent or a check handed to the operators, oldest first. Open one to return it, complete it or fail the run." }
        @if !complete {
            p class="notice" { "Only the first " (MAX_WORK_ITEMS_READ) " open work items were read." }
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
