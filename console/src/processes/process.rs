//! A process's page: its draft with a form per role to bind it to a group, the warnings, the
//! publish button (refusals shown next to the roles they name), the versions with their content
//! hashes, and the form that asks for a diff.

use super::{done_of, process_path};
use crate::UiState;
use crate::layout::Page;
use crate::layout::path_segment;
use crate::operator::{admin_failure_page, notice, operator_admin};
use crate::session::SignedForm;
use crate::signed_in::SignedIn;
use agentprocess_gateway::admin::{AdminError, bind_process_roles, publish_process};
use agentprocess_org::{CatalogRefusal, Draft, ProcessEntry, is_latest_version};
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use indexmap::IndexMap;
use maud::{Markup, html};
use serde::Deserialize;
use std::sync::Arc;

/// What the page says after a form: a notice, or what was refused and what was typed.
#[derive(Debug, Default)]
struct Feedback {
    notice: Option<&'static str>,
    /// Role → why its binding (or the publication) was refused.
    role_errors: IndexMap<String, String>,
    /// Role → the group as typed, kept when refused.
    typed: IndexMap<String, String>,
    /// Why the publication was refused, every issue.
    publish_errors: Vec<String>,
}

/// The notice a `done` value stands for.
fn done_notice(done: Option<&str>) -> Option<&'static str> {
    match done? {
        "imported" => Some("Imported: this is now the draft of the process."),
        "bound" => Some("The role's group is saved in the draft."),
        "published" => Some("Published: the new version is listed under Versions."),
        _ => None,
    }
}

/// `GET /ui/processes/{name}`.
pub async fn process_page(
    State(state): State<Arc<UiState>>,
    signed_in: SignedIn,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let feedback = Feedback {
        notice: done_notice(done_of(query.as_deref()).as_deref()),
        ..Feedback::default()
    };
    render(&state, &signed_in, &name, feedback).await
}

/// Reads the process and its draft and renders the page.
/// A form refused comes back as this page with 200, as the sign-in form does: the refusal is shown,
/// not an error.
async fn render(state: &UiState, signed_in: &SignedIn, name: &str, feedback: Feedback) -> Response {
    let admin = match operator_admin(state, signed_in) {
        Ok(admin) => admin,
        Err(no_entry) => return no_entry.page(signed_in),
    };
    let organization = &signed_in.identity.organization;
    let catalog = &admin.parts.catalog;
    let read = async {
        let entry = catalog.process(organization, name).await?;
        let draft = catalog.draft(organization, name).await?;
        Ok::<_, AdminError>((entry, draft))
    };
    match read.await {
        Ok((Some(entry), draft)) => page(signed_in, &entry, draft.as_ref(), &feedback).render(StatusCode::OK),
        Ok((None, _)) => admin_failure_page(AdminError::NoProcess(name.to_owned()), signed_in),
        Err(error) => admin_failure_page(error, signed_in),
    }
}

fn page<'a>(
    signed_in: &'a SignedIn,
    entry: &'a ProcessEntry,
    draft: Option<&Draft>,
    feedback: &Feedback,
) -> Page<'a> {
    let main = html! {
        p class="breadcrumb" { a href="/ui/processes" { "Processes" } }
        h1 { (entry.name) }
        p { (entry.description) }
        (notice(feedback.notice))
        @if let Some(draft) = draft {
            (draft_section(signed_in, entry, draft, feedback))
        } @else {
            section aria-labelledby="draft-heading" {
                h2 id="draft-heading" { "Draft" }
                p { "No draft: import a PROCESS.md of this process to change it." }
            }
        }
        (versions_section(entry))
        (diff_form(entry, draft.is_some()))
    };
    Page {
        title: &entry.name,
        signed_in: Some(signed_in),
        main,
    }
}

fn draft_section(signed_in: &SignedIn, entry: &ProcessEntry, draft: &Draft, feedback: &Feedback) -> Markup {
    let action = format!("{}/bindings", process_path(&draft.name));
    let published_as = entry
        .latest_version
        .filter(|_| is_latest_version(&draft.content_hash, &draft.bindings, entry.versions.last()));
    html! {
        section aria-labelledby="draft-heading" {
            h2 id="draft-heading" { "Draft" }
            dl class="facts" {
                dt { "Content hash" } dd { code class="hash" { (draft.content_hash) } }
                dt { "Imported" } dd { (draft.imported_at) " by " (draft.imported_by) }
                @if !draft.required_systems.is_empty() {
                    dt { "Requires systems" } dd { (draft.required_systems.join(", ")) }
                }
            }
            h3 { "Roles" }
            @if draft.roles.is_empty() {
                p { "This process has no roles to bind." }
            }
            @for (index, role) in draft.roles.iter().enumerate() {
                @let input_id = format!("group-{index}");
                @let error_id = format!("group-{index}-error");
                @let error = feedback.role_errors.get(role);
                @let value = feedback.typed.get(role).or(draft.bindings.get(role));
                form method="post" action=(action) class="role-binding" {
                    input type="hidden" name="csrf" value=(signed_in.csrf());
                    input type="hidden" name="role" value=(role);
                    label for=(input_id) { "Group for role " code { (role) } }
                    @if draft.bindings.contains_key(role) {
                        span class="state" { " (bound)" }
                    } @else {
                        span class="state unbound" { " (not bound)" }
                    }
                    @if let Some(error) = error {
                        p class="field-error" id=(error_id) { (error) }
                    }
                    div class="inline" {
                        input type="text" id=(input_id) name="group" value=[value]
                            aria-describedby=[error.map(|_| error_id.as_str())]
                            aria-invalid=[error.map(|_| "true")];
                        button type="submit" class="secondary" { "Save group" }
                    }
                }
            }
            @if !draft.warnings.is_empty() {
                h3 { "Warnings" }
                ul class="warnings" { @for warning in &draft.warnings { li { (warning) } } }
            }
            h3 { "Publish" }
            @if !feedback.publish_errors.is_empty() {
                div class="refusal" id="publish-errors" role="alert" {
                    p { "Not published:" }
                    ul class="issues" { @for error in &feedback.publish_errors { li { (error) } } }
                }
            }
            @if let Some(version) = published_as {
                p class="published-as" {
                    "This draft is version " (version) ", with the same content and groups: there is \
                     nothing to publish. Import a changed PROCESS.md or change a group first."
                }
            } @else {
                form method="post" action=(format!("{}/publish", process_path(&draft.name))) {
                    input type="hidden" name="csrf" value=(signed_in.csrf());
                    p { "Publishing makes the draft the next version, which new runs start on." }
                    button type="submit" { "Publish the draft" }
                }
            }
        }
    }
}

fn versions_section(entry: &ProcessEntry) -> Markup {
    html! {
        section aria-labelledby="versions-heading" {
            h2 id="versions-heading" { "Versions" }
            @if entry.versions.is_empty() {
                p { "Nothing published yet." }
            } @else {
                div class="table-scroll" {
                    table class="versions" {
                        thead { tr {
                            th scope="col" { "Version" }
                            th scope="col" { "Content hash" }
                            th scope="col" { "Published" }
                            th scope="col" { "Roles" }
                        } }
                        tbody {
                            @for version in entry.versions.iter().rev() {
                                tr {
                                    th scope="row" {
                                        a href=(format!("{}/versions/{}", process_path(&entry.name), version.version)) {
                                            "v" (version.version)
                                        }
                                    }
                                    td { code class="hash" { (version.content_hash) } }
                                    td {
                                        (version.published_at)
                                        @if let Some(by) = &version.published_by { " by " (by) }
                                    }
                                    td { (roles_text(&version.roles)) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `role → group, …`, or `none`.
pub(super) fn roles_text(roles: &IndexMap<String, String>) -> String {
    if roles.is_empty() {
        return "none".to_owned();
    }
    roles
        .iter()
        .map(|(role, group)| format!("{role} → {group}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The GET form asking for a diff between two versions, or a version and the draft.
fn diff_form(entry: &ProcessEntry, has_draft: bool) -> Markup {
    let mut sides: Vec<(String, String)> = entry
        .versions
        .iter()
        .map(|version| (version.version.to_string(), format!("v{}", version.version)))
        .collect();
    if has_draft {
        sides.push(("draft".to_owned(), "the draft".to_owned()));
    }
    if sides.len() < 2 {
        return html! {};
    }
    let to = sides.len() - 1;
    let from = to - 1;
    html! {
        section aria-labelledby="diff-heading" {
            h2 id="diff-heading" { "Compare" }
            form method="get" action=(format!("/ui/processes/{}/diff", path_segment(&entry.name))) class="diff-form" {
                div class="field" {
                    label for="from" { "From" }
                    select id="from" name="from" {
                        @for (index, (value, label)) in sides.iter().enumerate() {
                            option value=(value) selected[index == from] { (label) }
                        }
                    }
                }
                div class="field" {
                    label for="to" { "To" }
                    select id="to" name="to" {
                        @for (index, (value, label)) in sides.iter().enumerate() {
                            option value=(value) selected[index == to] { (label) }
                        }
                    }
                }
                button type="submit" class="secondary" { "Show the changes" }
            }
        }
    }
}

/// The fields of a role's binding form.
#[derive(Debug, Deserialize)]
pub struct BindFields {
    #[serde(default)]
    role: String,
    #[serde(default)]
    group: String,
}

/// `POST /ui/processes/{name}/bindings`: binds one role; a refusal comes back next to the role,
/// with the group as typed.
pub async fn bind(
    State(state): State<Arc<UiState>>,
    Path(name): Path<String>,
    SignedForm { signed_in, form }: SignedForm<BindFields>,
) -> Response {
    let admin = match operator_admin(&state, &signed_in) {
        Ok(admin) => admin,
        Err(no_entry) => return no_entry.page(&signed_in),
    };
    let bindings = IndexMap::from([(form.role.clone(), form.group.clone())]);
    match bind_process_roles(&admin.parts, &signed_in.identity, &name, &bindings).await {
        Ok(_) => Redirect::to(&format!("{}?done=bound", process_path(&name))).into_response(),
        Err(AdminError::Refused(CatalogRefusal::Invalid(issues))) => {
            let mut feedback = Feedback::default();
            feedback.typed.insert(form.role.clone(), form.group);
            for issue in issues {
                let role = issue.path.strip_prefix("bindings.").unwrap_or(&form.role);
                feedback.role_errors.insert(role.to_owned(), issue.message);
            }
            render(&state, &signed_in, &name, feedback).await
        }
        Err(error) => admin_failure_page(error, &signed_in),
    }
}

/// The publish form has no field but its CSRF token.
#[derive(Debug, Deserialize)]
pub struct NoFields {}

/// `POST /ui/processes/{name}/publish`: publishes the draft; a refusal comes back with every
/// issue, the unbound roles' next to them.
pub async fn publish(
    State(state): State<Arc<UiState>>,
    Path(name): Path<String>,
    SignedForm { signed_in, .. }: SignedForm<NoFields>,
) -> Response {
    let admin = match operator_admin(&state, &signed_in) {
        Ok(admin) => admin,
        Err(no_entry) => return no_entry.page(&signed_in),
    };
    match publish_process(&admin.parts, &admin.offer, &signed_in.identity, &name).await {
        Ok(_) => Redirect::to(&format!("{}?done=published", process_path(&name))).into_response(),
        Err(AdminError::Refused(CatalogRefusal::Invalid(issues))) => {
            let mut feedback = Feedback::default();
            for issue in &issues {
                if let Some(role) = issue.path.strip_prefix("bindings.") {
                    feedback
                        .role_errors
                        .insert(role.to_owned(), issue.message.clone());
                }
            }
            feedback.publish_errors = issues.iter().map(ToString::to_string).collect();
            render(&state, &signed_in, &name, feedback).await
        }
        Err(AdminError::Refused(refusal @ CatalogRefusal::Unchanged { .. })) => {
            let feedback = Feedback {
                publish_errors: vec![format!("{refusal}: change the draft or its groups first.")],
                ..Feedback::default()
            };
            render(&state, &signed_in, &name, feedback).await
        }
        Err(error) => admin_failure_page(error, &signed_in),
    }
}
