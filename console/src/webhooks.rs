//! The operators' webhooks page: the webhooks (add or replace one, delete one; a secret is
//! written, never shown back) and the dead letters, each to redeliver or delete, through the
//! admin API's functions.
//!
//! ```text
//! GET  /ui/webhooks                                     webhooks and dead letters
//! POST /ui/webhooks                                     add or replace a webhook { id, url, secret }
//! POST /ui/webhooks/{id}/delete                         delete a webhook
//! POST /ui/webhooks/dead-letters/{id}/redeliver         back into the outbox
//! POST /ui/webhooks/dead-letters/{id}/delete            discard it
//! ```

use super::UiState;
use super::layout::Page;
use super::operator::{admin_failure_page, notice, operator_admin};
use super::session::SignedForm;
use crate::signed_in::SignedIn;
use agentprocess_gateway::admin::{
    AdminError, DEFAULT_DEAD_LETTERS, dead_letter_items, delete_webhook_of, discard_letter, redeliver_letter,
    store_webhook, webhook_views,
};
use agentprocess_org::WebhookView;
use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// Where the page is.
const WEBHOOKS_PATH: &str = "/ui/webhooks";

/// The webhooks page's routes.
pub fn routes() -> Router<Arc<UiState>> {
    Router::new()
        .route(WEBHOOKS_PATH, get(webhooks_page).post(create))
        .route("/ui/webhooks/{id}/delete", post(delete))
        .route("/ui/webhooks/dead-letters/{id}/redeliver", post(redeliver))
        .route("/ui/webhooks/dead-letters/{id}/delete", post(discard))
}

/// A field of the webhook form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Id,
    Url,
    Secret,
}

impl Field {
    fn input_id(self) -> &'static str {
        match self {
            Field::Id => "webhook-id",
            Field::Url => "webhook-url",
            Field::Secret => "webhook-secret",
        }
    }

    /// The field an issue of `webhook_from_request` is about, by the word it starts with.
    fn of_issue(issue: &str) -> Option<Field> {
        if issue.starts_with("id ") {
            Some(Field::Id)
        } else if issue.starts_with("url") {
            Some(Field::Url)
        } else if issue.starts_with("secret") {
            Some(Field::Secret)
        } else {
            None
        }
    }
}

/// The webhook form as sent (the secret is never sent back).
#[derive(Debug, Default, Deserialize)]
pub struct WebhookFields {
    #[serde(default)]
    id: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    secret: String,
}

/// What the page says after a form.
#[derive(Debug, Default)]
struct Feedback {
    notice: Option<&'static str>,
    typed: WebhookFields,
    issues: Vec<String>,
}

impl Feedback {
    fn issues_of(&self, field: Field) -> Vec<&str> {
        self.issues
            .iter()
            .filter(|issue| Field::of_issue(issue) == Some(field))
            .map(String::as_str)
            .collect()
    }
}

fn done_notice(query: Option<&str>) -> Option<&'static str> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or_default()).ok()?;
    let done = pairs.into_iter().find(|(key, _)| key == "done")?.1;
    match done.as_str() {
        "saved" => Some("The webhook is saved. Its secret is kept and never shown."),
        "deleted" => Some("The webhook is deleted."),
        "redelivered" => Some("The dead letter is back in the outbox: it is being delivered again."),
        "discarded" => Some("The dead letter is deleted."),
        _ => None,
    }
}

/// `GET /ui/webhooks`.
pub async fn webhooks_page(
    State(state): State<Arc<UiState>>,
    signed_in: SignedIn,
    RawQuery(query): RawQuery,
) -> Response {
    let feedback = Feedback {
        notice: done_notice(query.as_deref()),
        ..Feedback::default()
    };
    render(&state, &signed_in, feedback).await
}

/// A form refused comes back as this page with 200, as the sign-in form does.
async fn render(state: &UiState, signed_in: &SignedIn, feedback: Feedback) -> Response {
    let admin = match operator_admin(state, signed_in) {
        Ok(admin) => admin,
        Err(no_entry) => return no_entry.page(signed_in),
    };
    let read = async {
        let webhooks = webhook_views(&admin.parts, &signed_in.identity).await?;
        let letters = dead_letter_items(&admin.parts, &signed_in.identity, DEFAULT_DEAD_LETTERS).await?;
        Ok::<_, AdminError>((webhooks, letters))
    };
    let (webhooks, letters) = match read.await {
        Ok(found) => found,
        Err(error) => return admin_failure_page(error, signed_in),
    };
    let main = html! {
        h1 { "Webhooks" }
        (notice(feedback.notice))
        (webhook_list(signed_in, &webhooks))
        (webhook_form(signed_in, &feedback))
        (dead_letter_list(signed_in, &letters))
    };
    Page {
        title: "Webhooks",
        signed_in: Some(signed_in),
        main,
    }
    .render(StatusCode::OK)
}

fn webhook_list(signed_in: &SignedIn, webhooks: &[WebhookView]) -> Markup {
    html! {
        section aria-labelledby="webhooks-heading" {
            h2 id="webhooks-heading" { "Configured webhooks" }
            @if webhooks.is_empty() {
                p { "No webhook: notifications are not sent anywhere." }
            } @else {
                ul class="webhooks" {
                    @for webhook in webhooks {
                        li {
                            strong { (webhook.id) } " " code class="url" { (webhook.url) }
                            form method="post" action=(format!("/ui/webhooks/{}/delete", webhook.id)) class="inline" {
                                input type="hidden" name="csrf" value=(signed_in.csrf());
                                button type="submit" class="secondary" { "Delete webhook " (webhook.id) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn webhook_form(signed_in: &SignedIn, feedback: &Feedback) -> Markup {
    let general: Vec<&String> = feedback
        .issues
        .iter()
        .filter(|issue| Field::of_issue(issue).is_none())
        .collect();
    html! {
        section aria-labelledby="add-webhook-heading" {
            h2 id="add-webhook-heading" { "Add or replace a webhook" }
            @if !feedback.issues.is_empty() {
                p class="field-error" role="alert" { "Not saved: " (feedback.issues.len()) " issue(s), shown at their fields." }
                @if !general.is_empty() {
                    ul class="issues" { @for issue in &general { li { (issue) } } }
                }
            }
            form method="post" action=(WEBHOOKS_PATH) class="webhook-form" {
                input type="hidden" name="csrf" value=(signed_in.csrf());
                (field(feedback, Field::Id, "Id", "text", &feedback.typed.id,
                       "Letters, digits, '.', '_' or '-'. An existing id is replaced."))
                (field(feedback, Field::Url, "URL", "url", &feedback.typed.url,
                       "Where notifications are POSTed."))
                (field(feedback, Field::Secret, "Secret", "password", "",
                       "Deliveries are signed with it. It is never shown again."))
                button type="submit" { "Save webhook" }
            }
        }
    }
}

fn field(feedback: &Feedback, field: Field, label: &str, kind: &str, value: &str, hint: &str) -> Markup {
    let id = field.input_id();
    let hint_id = format!("{id}-hint");
    let error_id = format!("{id}-error");
    let issues = feedback.issues_of(field);
    let described = if issues.is_empty() {
        hint_id.clone()
    } else {
        format!("{hint_id} {error_id}")
    };
    html! {
        div class="field" {
            label for=(id) { (label) }
            p class="hint" id=(hint_id) { (hint) }
            @if !issues.is_empty() {
                p class="field-error" id=(error_id) { (issues.join("; ")) }
            }
            input type=(kind) id=(id) name=(id.trim_start_matches("webhook-")) value=(value)
                autocomplete=[(kind == "password").then_some("new-password")]
                aria-describedby=(described) aria-invalid=[(!issues.is_empty()).then_some("true")];
        }
    }
}

fn dead_letter_list(signed_in: &SignedIn, letters: &[Value]) -> Markup {
    html! {
        section aria-labelledby="dead-letters-heading" {
            h2 id="dead-letters-heading" { "Dead letters" }
            p { "Notifications that could not be delivered after every attempt, oldest first." }
            @if letters.is_empty() {
                p { "None." }
            } @else {
                ul class="dead-letters" {
                    @for letter in letters { (dead_letter(signed_in, letter)) }
                }
            }
        }
    }
}

fn dead_letter(signed_in: &SignedIn, letter: &Value) -> Markup {
    let id = letter["id"].as_str().unwrap_or_default();
    let notification = &letter["notification"];
    let text = |value: &Value| value.as_str().unwrap_or("unknown").to_owned();
    html! {
        li class="dead-letter" data-id=(id) {
            dl class="facts" {
                dt { "Type" } dd { (text(&notification["type"])) }
                dt { "Run" } dd { code { (text(&notification["runId"])) } }
                dt { "Attempts" } dd { (letter["attempts"]) }
                dt { "Last error" } dd { (text(&letter["error"])) }
            }
            div class="actions" {
                form method="post" action=(format!("/ui/webhooks/dead-letters/{id}/redeliver")) {
                    input type="hidden" name="csrf" value=(signed_in.csrf());
                    button type="submit" { "Redeliver" }
                }
                form method="post" action=(format!("/ui/webhooks/dead-letters/{id}/delete")) {
                    input type="hidden" name="csrf" value=(signed_in.csrf());
                    button type="submit" class="secondary" { "Delete" }
                }
            }
        }
    }
}

/// `POST /ui/webhooks`: saves the webhook; a refusal comes back with each issue at its field and
/// the id and URL as typed.
pub async fn create(
    State(state): State<Arc<UiState>>,
    SignedForm { signed_in, form }: SignedForm<WebhookFields>,
) -> Response {
    let admin = match operator_admin(&state, &signed_in) {
        Ok(admin) => admin,
        Err(no_entry) => return no_entry.page(&signed_in),
    };
    let id = form.id.trim().to_owned();
    let request = json!({ "url": form.url.trim(), "secret": form.secret });
    match store_webhook(&admin.parts, &signed_in.identity, &id, &request).await {
        Ok(_) => done("saved"),
        Err(AdminError::InvalidWebhook(issues)) => {
            let feedback = Feedback {
                notice: None,
                typed: WebhookFields {
                    secret: String::new(),
                    ..form
                },
                issues,
            };
            render(&state, &signed_in, feedback).await
        }
        Err(error) => admin_failure_page(error, &signed_in),
    }
}

/// Forms with no field but their CSRF token.
#[derive(Debug, Deserialize)]
pub struct NoFields {}

/// `POST /ui/webhooks/{id}/delete`.
pub async fn delete(
    State(state): State<Arc<UiState>>,
    Path(id): Path<String>,
    SignedForm { signed_in, .. }: SignedForm<NoFields>,
) -> Response {
    let admin = match operator_admin(&state, &signed_in) {
        Ok(admin) => admin,
        Err(no_entry) => return no_entry.page(&signed_in),
    };
    match delete_webhook_of(&admin.parts, &signed_in.identity, &id).await {
        Ok(()) => done("deleted"),
        Err(error) => admin_failure_page(error, &signed_in),
    }
}

/// `POST /ui/webhooks/dead-letters/{id}/redeliver`.
pub async fn redeliver(
    State(state): State<Arc<UiState>>,
    Path(id): Path<String>,
    SignedForm { signed_in, .. }: SignedForm<NoFields>,
) -> Response {
    let admin = match operator_admin(&state, &signed_in) {
        Ok(admin) => admin,
        Err(no_entry) => return no_entry.page(&signed_in),
    };
    match redeliver_letter(&admin.parts, &signed_in.identity, &id).await {
        Ok(()) => done("redelivered"),
        Err(error) => admin_failure_page(error, &signed_in),
    }
}

/// `POST /ui/webhooks/dead-letters/{id}/delete`.
pub async fn discard(
    State(state): State<Arc<UiState>>,
    Path(id): Path<String>,
    SignedForm { signed_in, .. }: SignedForm<NoFields>,
) -> Response {
    let admin = match operator_admin(&state, &signed_in) {
        Ok(admin) => admin,
        Err(no_entry) => return no_entry.page(&signed_in),
    };
    match discard_letter(&admin.parts, &signed_in.identity, &id).await {
        Ok(()) => done("discarded"),
        Err(error) => admin_failure_page(error, &signed_in),
    }
}

/// Back to the page, with the notice of what was done.
fn done(what: &str) -> Response {
    Redirect::to(&format!("{WEBHOOKS_PATH}?done={what}")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_are_put_at_their_fields() {
        assert_eq!(
            Field::of_issue("id \"a b\" must be 1 to 64 letters"),
            Some(Field::Id)
        );
        assert_eq!(
            Field::of_issue("url \"x\" is not an absolute http(s) URL"),
            Some(Field::Url)
        );
        assert_eq!(
            Field::of_issue("secret is required: deliveries are signed with it"),
            Some(Field::Secret)
        );
        assert_eq!(Field::of_issue("the body must be a JSON object"), None);
    }
}
