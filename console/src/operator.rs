//! What the operators' pages share: the way in (operators only, where the admin parts are), the
//! page an admin refusal becomes, and the notices a page shows after a form did what it said.

use super::layout::{Page, message_page};
use super::{UiAdmin, UiState};
use crate::signed_in::SignedIn;
use agentprocess_gateway::admin::AdminError;
use agentprocess_gateway::respond::HttpFailure;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};

/// Why an operator's page is not shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoEntry {
    /// The caller has no operator rights (403).
    NotOperator,
    /// The server mounts no admin parts (404).
    NoAdmin,
}

impl NoEntry {
    /// The page that says so.
    pub fn page(self, signed_in: &SignedIn) -> Response {
        match self {
            NoEntry::NotOperator => message_page(
                StatusCode::FORBIDDEN,
                "Operators only",
                "This page is for the organization's operators, and you have no operator rights.",
                Some(signed_in),
            ),
            NoEntry::NoAdmin => message_page(
                StatusCode::NOT_FOUND,
                "Not available here",
                "This server has no admin parts, so processes and webhooks cannot be managed here.",
                Some(signed_in),
            ),
        }
    }
}

/// The admin parts, for an operator only.
pub fn operator_admin<'a>(state: &'a UiState, signed_in: &SignedIn) -> Result<&'a UiAdmin, NoEntry> {
    if !signed_in.identity.operator {
        return Err(NoEntry::NotOperator);
    }
    state.admin.as_ref().ok_or(NoEntry::NoAdmin)
}

/// The page an admin refusal or failure becomes: the admin API's status and message, and each
/// issue it found.
pub fn admin_failure_page(error: AdminError, signed_in: &SignedIn) -> Response {
    let failure = HttpFailure::from(error);
    let status = failure.status();
    let body = failure.body();
    let message = body["error"]["message"].as_str().unwrap_or_default();
    let issues: Vec<&str> = body["error"]["issues"]
        .as_array()
        .map(|issues| issues.iter().filter_map(|issue| issue.as_str()).collect())
        .unwrap_or_default();
    let title = failure_title(status);
    Page {
        title,
        signed_in: Some(signed_in),
        main: html! {
            h1 { (title) }
            p { (message) }
            @if !issues.is_empty() {
                ul class="issues" { @for issue in &issues { li { (issue) } } }
            }
            p { a href="/ui" { "Go to the start page" } }
        },
    }
    .render(status)
}

fn failure_title(status: StatusCode) -> &'static str {
    match status {
        StatusCode::NOT_FOUND => "Not found",
        StatusCode::CONFLICT => "Not done: something changed",
        StatusCode::SERVICE_UNAVAILABLE => "Not done: try again",
        StatusCode::FORBIDDEN => "Not allowed",
        _ => "Not done",
    }
}

/// A notice at the top of a page, announced to screen readers.
pub fn notice(text: Option<&str>) -> Markup {
    html! {
        @if let Some(text) = text {
            p class="notice" role="status" { (text) }
        }
    }
}
