//! Signing in and out: the dev sign-in form (no identity provider configured), which issues a
//! dev session for the organization, person or agent and operator rights picked, and sign-out.

use super::UiState;
use super::layout::{Page, message_page};
use super::session::DEV_SESSION_TTL;
use super::session::{
    HOME_PATH, SIGN_IN_COOKIE_SECONDS, SignedForm, bad_form, csrf_refused, read_cookie, safe_next,
    sign_in_csrf, sign_in_csrf_matches,
};
use super::signing::random_text;
use crate::signed_in::SignedIn;
use agentprocess_gateway::auth::IdentityKind;
use agentprocess_gateway::auth::dev::DevTokenRequest;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;
use std::sync::Arc;

/// The longest organization, agent id, email or group accepted.
const MAX_FIELD_CHARS: usize = 200;
/// The most groups a person may be given.
const MAX_GROUPS: usize = 50;

/// The fields of the dev sign-in form, as sent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SignInFields {
    pub csrf: Option<String>,
    pub next: Option<String>,
    pub organization: String,
    /// `person` or `agent`.
    pub kind: String,
    pub email: String,
    /// Comma-separated group ids.
    pub groups: String,
    pub agent_id: String,
    /// Present (`on`) when the operator box is ticked.
    pub operator: Option<String>,
}

/// A field of the dev sign-in form, for errors shown next to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Organization,
    Kind,
    Email,
    Groups,
    AgentId,
}

impl Field {
    /// The id of the field's input, which its error message points at.
    fn input_id(self) -> &'static str {
        match self {
            Field::Organization => "organization",
            Field::Kind => "kind-person",
            Field::Email => "email",
            Field::Groups => "groups",
            Field::AgentId => "agent_id",
        }
    }
}

/// What is wrong with a sign-in form: one message per field at most.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldErrors(Vec<(Field, String)>);

impl FieldErrors {
    fn add(&mut self, field: Field, message: impl Into<String>) {
        if self.of(field).is_none() {
            self.0.push((field, message.into()));
        }
    }

    /// The message for `field`, if it has one.
    pub fn of(&self, field: Field) -> Option<&str> {
        self.0
            .iter()
            .find(|(f, _)| *f == field)
            .map(|(_, message)| message.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The dev session a sign-in form asks for, or what is wrong with each field. Pure: the rules a
/// dev token's claims must meet to make an identity, said per field.
pub fn dev_session_request(fields: &SignInFields) -> Result<DevTokenRequest, FieldErrors> {
    let mut errors = FieldErrors::default();
    let organization = fields.organization.trim();
    if let Err(message) = plain_name(organization, "an organization") {
        errors.add(Field::Organization, message);
    }
    let kind = match fields.kind.as_str() {
        "person" => {
            let email = fields.email.trim();
            if email.is_empty() {
                errors.add(Field::Email, "Enter the person's email address.");
            } else if !looks_like_email(email) {
                errors.add(
                    Field::Email,
                    "Enter an email address like name@example.com, without spaces.",
                );
            }
            let groups: Vec<String> = fields
                .groups
                .split(',')
                .map(str::trim)
                .filter(|group| !group.is_empty())
                .map(str::to_owned)
                .collect();
            if groups.len() > MAX_GROUPS {
                errors.add(Field::Groups, format!("Give at most {MAX_GROUPS} groups."));
            } else if let Some(message) = groups.iter().find_map(|group| plain_name(group, "a group").err()) {
                errors.add(Field::Groups, format!("{message} Separate groups with commas."));
            }
            Some(IdentityKind::Person {
                email: email.to_owned(),
                groups,
            })
        }
        "agent" => {
            let id = fields.agent_id.trim();
            if let Err(message) = plain_name(id, "an agent id") {
                errors.add(Field::AgentId, message);
            }
            Some(IdentityKind::Agent { id: id.to_owned() })
        }
        _ => {
            errors.add(Field::Kind, "Choose whether you sign in as a person or an agent.");
            None
        }
    };
    match kind {
        Some(kind) if errors.is_empty() => Ok(DevTokenRequest {
            organization: organization.to_owned(),
            kind,
            operator: fields.operator.is_some(),
            ttl: DEV_SESSION_TTL,
        }),
        _ => Err(errors),
    }
}

/// A name the identity claims carry as given: not empty, no spaces or control characters, not
/// too long. `what` names it in the message ("an organization").
fn plain_name(text: &str, what: &str) -> Result<(), String> {
    if text.is_empty() {
        Err(format!("Enter {what}."))
    } else if text.chars().count() > MAX_FIELD_CHARS {
        Err(format!("Use at most {MAX_FIELD_CHARS} characters for {what}."))
    } else if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Err(format!("Use no spaces in {what} (\"{text}\")."))
    } else {
        Ok(())
    }
}

/// The person value is an email (`describe.person.format`); this catches typos, not more.
fn looks_like_email(text: &str) -> bool {
    text.chars().count() <= MAX_FIELD_CHARS
        && text
            .split_once('@')
            .is_some_and(|(local, domain)| !local.is_empty() && !domain.is_empty() && !domain.contains('@'))
        && !text.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// A form with no fields besides its CSRF token.
#[derive(Debug, Deserialize)]
pub struct NoFields {}

/// `?next=` of the sign-in page.
#[derive(Debug, Deserialize)]
pub struct NextQuery {
    next: Option<String>,
}

/// `GET /ui/sign-in`: the dev sign-in form, or with an identity provider the way to it.
pub async fn sign_in_page(
    State(state): State<Arc<UiState>>,
    Query(query): Query<NextQuery>,
    headers: HeaderMap,
) -> Response {
    let next = query
        .next
        .as_deref()
        .and_then(safe_next)
        .unwrap_or(HOME_PATH)
        .to_owned();
    let signed_in = match SignedIn::of(&state, &headers).await {
        Ok(signed_in) => signed_in,
        Err(page) => return page,
    };
    if let Some(provider) = &state.provider {
        return super::provider::sign_in_page(provider, &next, signed_in.as_ref());
    }
    if !state.auth.is_dev() {
        return provider_sign_in_not_configured(signed_in.as_ref());
    }
    let fields = SignInFields {
        next: Some(next),
        kind: "person".to_owned(),
        ..SignInFields::default()
    };
    dev_form(
        &state,
        &headers,
        &fields,
        &FieldErrors::default(),
        signed_in.as_ref(),
    )
}

/// The page an identity-provider deployment shows when it has no client for sign-in.
fn provider_sign_in_not_configured(signed_in: Option<&SignedIn>) -> Response {
    message_page(
        StatusCode::SERVICE_UNAVAILABLE,
        "Sign-in is not set up",
        "This server accepts tokens of an identity provider, but has no client to sign people in \
         with it: its operator sets client_id (and client_secret) under [auth.provider].",
        signed_in,
    )
}

/// `POST /ui/sign-in`: checks the form and, when every field is right, starts a dev session and
/// goes on to `next`; otherwise shows the form again with each error next to its field.
pub async fn sign_in(
    State(state): State<Arc<UiState>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if !state.auth.is_dev() {
        return message_page(
            StatusCode::NOT_FOUND,
            "No dev sign-in here",
            "This server signs people in with its identity provider.",
            None,
        );
    }
    let Ok(fields) = serde_urlencoded::from_bytes::<SignInFields>(&body) else {
        return bad_form("The sign-in form could not be read.");
    };
    let nonce = read_cookie(&headers, state.cookies.sign_in);
    if !sign_in_csrf_matches(&state, nonce.as_deref(), fields.csrf.as_deref()) {
        return csrf_refused();
    }
    let request = match dev_session_request(&fields) {
        Ok(request) => request,
        // A 200: the form again, errors shown, is what the browser should display (a 4xx
        // would also log a failed load in its console).
        Err(errors) => return dev_form(&state, &headers, &fields, &errors, None),
    };
    let token = state.auth.mint_dev(&request).expect("dev mode mints dev tokens");
    let next = fields.next.as_deref().and_then(safe_next).unwrap_or(HOME_PATH);
    let mut response = Redirect::to(next).into_response();
    let cookies = &state.cookies;
    let set = response.headers_mut();
    set.append(
        header::SET_COOKIE,
        cookies.set(cookies.session, &token, request.ttl.as_secs()),
    );
    set.append(header::SET_COOKIE, cookies.clear(cookies.sign_in));
    response
}

/// `POST /ui/sign-out`: ends the session in this browser and goes to the sign-in page.
pub async fn sign_out(State(state): State<Arc<UiState>>, _form: SignedForm<NoFields>) -> Response {
    let mut response = Redirect::to(super::session::SIGN_IN_PATH).into_response();
    response
        .headers_mut()
        .append(header::SET_COOKIE, state.cookies.clear(state.cookies.session));
    response
}

/// The dev sign-in form with `fields` filled in and `errors` next to their fields. Sets the
/// sign-in cookie whose nonce the form's CSRF token is bound to, when the browser has none.
fn dev_form(
    state: &UiState,
    headers: &HeaderMap,
    fields: &SignInFields,
    errors: &FieldErrors,
    signed_in: Option<&SignedIn>,
) -> Response {
    let (nonce, new_nonce) = match read_cookie(headers, state.cookies.sign_in) {
        Some(nonce) => (nonce, false),
        None => (random_text(16), true),
    };
    let csrf = sign_in_csrf(state, &nonce);
    let is_person = fields.kind != "agent";
    let main = html! {
        h1 { "Sign in" }
        p class="notice" {
            "This server runs in dev mode: there is no identity provider, so you say who you are. "
            "Anyone who can reach this page can sign in as anyone."
        }
        @if let Some(signed_in) = signed_in {
            p { "You are signed in as " strong { (signed_in.identity_label()) } ". Signing in again replaces that session." }
        }
        @if fields.next.as_deref().is_some_and(|next| next.starts_with(crate::oauth::authorize::AUTHORIZE_PATH)) {
            p { "An application asked to act as you. After you sign in, you decide whether it may." }
        }
        @if !errors.is_empty() {
            div class="errors" role="alert" aria-labelledby="error-summary" {
                h2 id="error-summary" { "Check these fields" }
                ul {
                    @for (field, message) in &errors.0 {
                        li { a href={ "#" (field.input_id()) } { (message) } }
                    }
                }
            }
        }
        // Only the section of the kind chosen shows: the stylesheet hides the other by the
        // radio that is checked, so it works without script.
        form class="sign-in" method="post" action="/ui/sign-in" novalidate {
            input type="hidden" name="csrf" value=(csrf);
            input type="hidden" name="next" value=(fields.next.as_deref().unwrap_or(HOME_PATH));
            (text_field("organization", "Organization", "The organization you act in, like acme.", &fields.organization, errors.of(Field::Organization), "organization"))
            fieldset aria-describedby=[errors.of(Field::Kind).map(|_| "kind-error")] {
                legend { "Sign in as" }
                @if let Some(message) = errors.of(Field::Kind) {
                    span class="error" id="kind-error" { (message) }
                }
                div class="choices" {
                    div class="choice" {
                        input type="radio" id="kind-person" name="kind" value="person" checked[is_person];
                        label for="kind-person" { "A person" }
                    }
                    div class="choice" {
                        input type="radio" id="kind-agent" name="kind" value="agent" checked[!is_person];
                        label for="kind-agent" { "An agent" }
                    }
                }
            }
            fieldset class="person-fields" {
                legend { "Person" }
                (text_field("email", "Email", "Like mira@acme.test.", &fields.email, errors.of(Field::Email), "email"))
                (text_field("groups", "Groups", "Group ids, separated by commas, like staff, finance.", &fields.groups, errors.of(Field::Groups), "off"))
            }
            fieldset class="agent-fields" {
                legend { "Agent" }
                (text_field("agent_id", "Agent id", "Like a_screener.", &fields.agent_id, errors.of(Field::AgentId), "off"))
            }
            div class="choice" {
                input type="checkbox" id="operator" name="operator" checked[fields.operator.is_some()];
                label for="operator" { "Operator of the organization" }
            }
            div class="actions" {
                button type="submit" { "Sign in" }
            }
        }
    };
    let mut response = Page {
        title: "Sign in",
        signed_in,
        main,
    }
    .render(StatusCode::OK);
    if new_nonce {
        response.headers_mut().append(
            header::SET_COOKIE,
            state
                .cookies
                .set(state.cookies.sign_in, &nonce, SIGN_IN_COOKIE_SECONDS),
        );
    }
    response
}

/// A labelled text input with its hint and, when it has one, its error, both tied to it for
/// screen readers.
fn text_field(
    id: &str,
    label: &str,
    hint: &str,
    value: &str,
    error: Option<&str>,
    autocomplete: &str,
) -> Markup {
    let hint_id = format!("{id}-hint");
    let error_id = format!("{id}-error");
    let described_by = match error {
        Some(_) => format!("{hint_id} {error_id}"),
        None => hint_id.clone(),
    };
    let input_type = if id == "email" { "email" } else { "text" };
    html! {
        div class="field" {
            label for=(id) { (label) }
            span class="hint" id=(hint_id) { (hint) }
            @if let Some(message) = error {
                span class="error" id=(error_id) { (message) }
            }
            input type=(input_type) id=(id) name=(id) value=(value) autocomplete=(autocomplete)
                spellcheck="false" aria-describedby=(described_by) aria-invalid=[error.map(|_| "true")];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person(organization: &str, email: &str, groups: &str) -> SignInFields {
        SignInFields {
            organization: organization.into(),
            kind: "person".into(),
            email: email.into(),
            groups: groups.into(),
            ..SignInFields::default()
        }
    }

    #[test]
    fn a_person_with_groups_and_operator_rights() {
        let mut fields = person(" acme ", "mira@acme.test", "staff, finance,,");
        fields.operator = Some("on".into());
        let request = dev_session_request(&fields).unwrap();
        assert_eq!(request.organization, "acme");
        assert!(request.operator);
        assert_eq!(
            request.kind,
            IdentityKind::Person {
                email: "mira@acme.test".into(),
                groups: vec!["staff".into(), "finance".into()]
            }
        );
    }

    #[test]
    fn an_agent_needs_only_its_id() {
        let fields = SignInFields {
            organization: "acme".into(),
            kind: "agent".into(),
            agent_id: "a_ap".into(),
            email: "not checked for an agent".into(),
            ..SignInFields::default()
        };
        let request = dev_session_request(&fields).unwrap();
        assert_eq!(request.kind, IdentityKind::Agent { id: "a_ap".into() });
        assert!(!request.operator);
    }

    #[test]
    fn every_wrong_field_gets_its_own_message() {
        let errors = dev_session_request(&person("", "mira at acme", "staff, fin ance")).unwrap_err();
        assert!(errors.of(Field::Organization).is_some());
        assert!(errors.of(Field::Email).unwrap().contains("email address"));
        assert!(errors.of(Field::Groups).unwrap().contains("fin ance"));
        let errors = dev_session_request(&SignInFields {
            organization: "acme".into(),
            kind: "robot".into(),
            ..SignInFields::default()
        })
        .unwrap_err();
        assert!(errors.of(Field::Kind).is_some());
        let errors = dev_session_request(&SignInFields {
            organization: "acme".into(),
            kind: "agent".into(),
            ..SignInFields::default()
        })
        .unwrap_err();
        assert!(errors.of(Field::AgentId).is_some());
        assert!(
            dev_session_request(&person("acme", "", ""))
                .unwrap_err()
                .of(Field::Email)
                .is_some()
        );
    }
}
