//! The runs area: the runs table, a run's page (timeline, map, cancel), process version maps,
//! the operators' escalation queue and the trust report.

mod escalations;
mod list;
mod map;
mod run;
mod table;
mod timeline;
mod trust;

use super::UiState;
use super::layout::Page;
use crate::signed_in::SignedIn;
use crate::when::time;
use agentprocess_gateway::mcp::{ErrorCode, ToolError};
use axum::Router;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use maud::{Markup, html};
use std::sync::Arc;

/// The routes of the runs area.
pub fn routes() -> Router<Arc<UiState>> {
    Router::new()
        .route("/ui/runs", get(list::runs_page))
        .route("/ui/runs/{run_id}", get(run::run_page))
        .route("/ui/runs/{run_id}/cancel", post(run::cancel))
        .route("/ui/runs/{run_id}/map.svg", get(map::run_map))
        .route(
            "/ui/processes/{name}/versions/{version}/map.svg",
            get(map::version_map),
        )
        .route("/ui/escalations", get(escalations::queue))
        .route("/ui/trust", get(trust::trust_page))
}

/// The status a page answers a tool's refusal with.
fn refusal_status(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::Forbidden => StatusCode::FORBIDDEN,
        ErrorCode::Retry => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Stale | ErrorCode::Conflict => StatusCode::CONFLICT,
        ErrorCode::Invalid | ErrorCode::NotAccepted => StatusCode::BAD_REQUEST,
    }
}

/// A page for a refusal no form field takes: what the server said, with its issues.
fn refusal_page(title: &str, error: &ToolError, signed_in: &SignedIn) -> Response {
    Page {
        title,
        signed_in: Some(signed_in),
        main: html! {
            h1 { (title) }
            (refusal_notice(error))
            p { a href="/ui/runs" { "Go to the runs" } }
        },
    }
    .render(refusal_status(error.code))
}

/// A refusal as a notice: its code, message and issues.
fn refusal_notice(error: &ToolError) -> Markup {
    html! {
        div class="errors" role="alert" {
            p { "The server refused (" code { (error.code.as_str()) } "): " (error.message) }
            @if !error.issues.is_empty() {
                ul { @for issue in &error.issues { li { (issue) } } }
            }
        }
    }
}

/// The 403 page of an operators' page, for everyone else.
fn operators_only(signed_in: &SignedIn) -> Option<Response> {
    (!signed_in.identity.operator).then(|| super::operator::NoEntry::NotOperator.page(signed_in))
}

/// The first name in an issue (`limit: must be at least 1` names `limit`, `inputs.x: …`
/// names `inputs`), which is the form field it belongs to.
fn issue_field(issue: &str) -> &str {
    let path = issue.trim_start_matches('/');
    let end = path.find([':', '.', '/', '[', ' ', ',']).unwrap_or(path.len());
    &path[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issue_names_the_field_it_belongs_to() {
        assert_eq!(issue_field("limit: must be at least 1"), "limit");
        assert_eq!(issue_field("inputs.amount: expected number"), "inputs");
        assert_eq!(issue_field("/state: not one of active"), "state");
        assert_eq!(issue_field("cursor: unknown"), "cursor");
        assert_eq!(issue_field("nothing here"), "nothing");
    }
}
