//! The process list and the import of a PROCESS.md: a refused import shows the text with line
//! numbers and every issue next to the line it is about, in a form to fix it and import again.

use super::process_path;
use crate::UiState;
use crate::layout::Page;
use crate::operator::{admin_failure_page, operator_admin};
use crate::session::{bad_form, csrf_refused, session_csrf_matches};
use crate::signed_in::SignedIn;
use agentprocess_gateway::admin::{AdminError, import_process};
use agentprocess_org::{CatalogRefusal, ProcessEntry};
use agentprocess_process::Issue;
use agentprocess_process::locate::issue_line;
use axum::extract::{Multipart, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use std::borrow::Cow;
use std::sync::Arc;

/// `GET /ui/processes`: every process and the import form.
pub async fn processes_page(State(state): State<Arc<UiState>>, signed_in: SignedIn) -> Response {
    let admin = match operator_admin(&state, &signed_in) {
        Ok(admin) => admin,
        Err(no_entry) => return no_entry.page(&signed_in),
    };
    let processes = match admin
        .parts
        .catalog
        .processes(&signed_in.identity.organization)
        .await
    {
        Ok(processes) => processes,
        Err(error) => return admin_failure_page(AdminError::from(error), &signed_in),
    };
    list_page(&signed_in, &processes, None)
}

/// What a refused import shows: the text as sent and every issue.
struct Refused<'a> {
    source: &'a str,
    issues: &'a [Issue],
}

fn list_page(signed_in: &SignedIn, processes: &[ProcessEntry], refused: Option<Refused<'_>>) -> Response {
    let main = html! {
        h1 { "Processes" }
        @if let Some(refused) = &refused {
            (refusal(refused))
        }
        (process_table(processes))
        (import_form(signed_in, refused.as_ref().map(|refused| refused.source)))
    };
    Page {
        title: if refused.is_some() {
            "Import refused"
        } else {
            "Processes"
        },
        signed_in: Some(signed_in),
        main,
    }
    .render(StatusCode::OK)
}

fn process_table(processes: &[ProcessEntry]) -> Markup {
    html! {
        section aria-labelledby="processes-heading" {
            h2 id="processes-heading" { "All processes" }
            @if processes.is_empty() {
                p { "No process yet: import a PROCESS.md below." }
            } @else {
                div class="table-scroll" {
                    table class="processes" {
                        thead { tr {
                            th scope="col" { "Process" }
                            th scope="col" { "Latest version" }
                            th scope="col" { "Versions" }
                            th scope="col" { "Draft" }
                        } }
                        tbody {
                            @for process in processes {
                                tr {
                                    th scope="row" {
                                        a href=(process_path(&process.name)) { (process.name) }
                                        p class="description" { (process.description) }
                                    }
                                    td { @match process.latest_version {
                                        Some(version) => { "v" (version) }
                                        None => { "not published" }
                                    } }
                                    td { (process.versions.len()) }
                                    td { (draft_state(process)) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A draft's state in a few words: none (or none but the latest version itself), its unbound
/// roles, or ready.
fn draft_state(process: &ProcessEntry) -> String {
    match (process.unpublished_draft(), process.latest_version) {
        (None, Some(latest)) if process.draft.is_some() => format!("none: the same as v{latest}"),
        (None, _) => "none".to_owned(),
        (Some(draft), _) if draft.unbound.is_empty() => "ready to publish".to_owned(),
        (Some(draft), _) => format!("unbound roles: {}", draft.unbound.join(", ")),
    }
}

fn import_form(signed_in: &SignedIn, source: Option<&str>) -> Markup {
    html! {
        section aria-labelledby="import-heading" {
            h2 id="import-heading" { "Import a PROCESS.md" }
            p { "Choose a file, or paste the text. The import becomes the draft of its process \
                 (replacing an earlier draft, keeping the groups of roles it still has); \
                 nothing is published until you publish it." }
            form method="post" action="/ui/processes" enctype="multipart/form-data" class="import" {
                input type="hidden" name="csrf" value=(signed_in.csrf());
                div class="field" {
                    label for="file" { "PROCESS.md file" }
                    input type="file" id="file" name="file" accept=".md,text/markdown,text/plain";
                }
                div class="field" {
                    label for="source" { "Or the text of the PROCESS.md" }
                    p class="hint" id="source-hint" { "Used when no file is chosen." }
                    textarea id="source" name="source" rows="16" spellcheck="false"
                        aria-describedby="source-hint" {
                        (source.unwrap_or_default())
                    }
                }
                button type="submit" { "Import" }
            }
        }
    }
}

/// The refused text, numbered, each issue right after the line it is about; issues about the
/// whole file first.
fn refusal(refused: &Refused<'_>) -> Markup {
    let located: Vec<(Option<usize>, &Issue)> = refused
        .issues
        .iter()
        .map(|issue| (issue_line(refused.source, issue), issue))
        .collect();
    let line_count = refused.source.lines().count();
    let whole_file: Vec<&Issue> = located
        .iter()
        .filter(|(line, _)| line.is_none_or(|line| line > line_count))
        .map(|(_, issue)| *issue)
        .collect();
    html! {
        section class="refusal" aria-labelledby="refusal-heading" {
            h2 id="refusal-heading" {
                "Not imported: " (refused.issues.len()) " issue" @if refused.issues.len() != 1 { "s" } " found"
            }
            p { "Nothing was changed. Each issue is shown under its line; fix the text in the form \
                 below and import again." }
            @if !whole_file.is_empty() {
                ul class="issues" id="file-issues" {
                    @for issue in &whole_file { li { (issue) } }
                }
            }
            div class="table-scroll" {
                table class="source-lines" {
                    caption { "The text as sent, with its issues" }
                    thead { tr { th scope="col" { "Line" } th scope="col" { "Text" } } }
                    tbody {
                        @for (index, text) in refused.source.lines().enumerate() {
                            @let number = index + 1;
                            tr id=(format!("line-{number}")) {
                                th scope="row" { (number) }
                                td { code { (text) } }
                            }
                            @for (_, issue) in located.iter().filter(|(line, _)| *line == Some(number)) {
                                tr class="line-issue" data-line=(number) {
                                    td { span class="visually-hidden" { "Issue on line " (number) } }
                                    td { strong { "Issue: " } (issue) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The parts of the import form.
#[derive(Debug, Default)]
struct ImportForm {
    csrf: Option<String>,
    file: Vec<u8>,
    source: String,
}

impl ImportForm {
    /// The file when one was chosen, byte for byte; the pasted text otherwise, with the line
    /// breaks as typed: browsers send a textarea's lines with CRLF (HTML's form submission rules),
    /// which the person did not write and which would change the content hash.
    fn document(&self) -> Cow<'_, [u8]> {
        if self.file.is_empty() {
            Cow::Owned(self.source.replace("\r\n", "\n").into_bytes())
        } else {
            Cow::Borrowed(&self.file)
        }
    }
}

async fn read_import_form(mut multipart: Multipart) -> Result<ImportForm, Response> {
    let unreadable =
        |_| bad_form("The import form could not be read; choose the file or paste the text again.");
    let mut form = ImportForm::default();
    while let Some(field) = multipart.next_field().await.map_err(unreadable)? {
        match field.name() {
            Some("csrf") => form.csrf = Some(field.text().await.map_err(unreadable)?),
            Some("file") => form.file = field.bytes().await.map_err(unreadable)?.to_vec(),
            Some("source") => form.source = field.text().await.map_err(unreadable)?,
            _ => {}
        }
    }
    Ok(form)
}

/// `POST /ui/processes`: imports the file (or the pasted text) as a draft and goes to its
/// process; a refused one comes back with every issue at its line.
pub async fn import(
    State(state): State<Arc<UiState>>,
    signed_in: SignedIn,
    headers: HeaderMap,
    multipart: Multipart,
) -> Response {
    let admin = match operator_admin(&state, &signed_in) {
        Ok(admin) => admin,
        Err(no_entry) => return no_entry.page(&signed_in),
    };
    let form = match read_import_form(multipart).await {
        Ok(form) => form,
        Err(page) => return page,
    };
    if !session_csrf_matches(&state, &headers, form.csrf.as_deref()) {
        return csrf_refused();
    }
    let document = form.document();
    match import_process(&admin.parts, &admin.offer, &signed_in.identity, &document).await {
        Ok(draft) => Redirect::to(&format!("{}?done=imported", process_path(&draft.name))).into_response(),
        Err(AdminError::Refused(CatalogRefusal::Invalid(issues))) => {
            let source = String::from_utf8_lossy(&document);
            let processes = match admin
                .parts
                .catalog
                .processes(&signed_in.identity.organization)
                .await
            {
                Ok(processes) => processes,
                Err(error) => return admin_failure_page(AdminError::from(error), &signed_in),
            };
            let refused = Refused {
                source: &source,
                issues: &issues,
            };
            list_page(&signed_in, &processes, Some(refused))
        }
        Err(error) => admin_failure_page(error, &signed_in),
    }
}
