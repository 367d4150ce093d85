//! A published version (its PROCESS.md, its map, its hash and groups) and the diff between two
//! texts of a process, rendered from the admin API's diff.

use super::process::roles_text;
use super::process_path;
use crate::UiState;
use crate::layout::Page;
use crate::layout::path_segment;
use crate::operator::{admin_failure_page, operator_admin};
use crate::signed_in::SignedIn;
use agentprocess_gateway::admin::{AdminError, process_diff};
use agentprocess_gateway::process_diff::{DiffLine, LineOp};
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;

/// `GET /ui/processes/{name}/versions/{version}`.
pub async fn version_page(
    State(state): State<Arc<UiState>>,
    signed_in: SignedIn,
    Path((name, version)): Path<(String, String)>,
) -> Response {
    let admin = match operator_admin(&state, &signed_in) {
        Ok(admin) => admin,
        Err(no_entry) => return no_entry.page(&signed_in),
    };
    let no_version = || AdminError::NoVersion {
        name: name.clone(),
        version: version.clone(),
    };
    let Some(number) = version.parse::<u64>().ok().filter(|number| *number > 0) else {
        return admin_failure_page(no_version(), &signed_in);
    };
    let record = match admin
        .parts
        .catalog
        .published_record(&signed_in.identity.organization, &name, number)
        .await
    {
        Ok(Some(record)) => record,
        Ok(None) => return admin_failure_page(no_version(), &signed_in),
        Err(error) => return admin_failure_page(AdminError::from(error), &signed_in),
    };
    let title = format!("{name} v{number}");
    let map = format!("{}/versions/{number}/map.svg", process_path(&name));
    let main = html! {
        p class="breadcrumb" { a href="/ui/processes" { "Processes" } " › " a href=(process_path(&name)) { (name) } }
        h1 { (title) }
        dl class="facts" {
            dt { "Content hash" } dd { code class="hash" { (record.content_hash) } }
            dt { "Published" } dd {
                (record.published_at)
                @if let Some(by) = &record.published_by { " by " (by) }
            }
            dt { "Roles" } dd { (roles_text(&record.roles)) }
        }
        h2 { "Process map" }
        figure class="process-map" {
            img src=(map) alt=(format!("Process map of {title}: its steps and the ways between them, as the PROCESS.md below describes them"));
        }
        h2 { "PROCESS.md" }
        pre class="source" tabindex="0" aria-label=(format!("PROCESS.md of {title}")) { code { (record.source) } }
    };
    Page {
        title: &title,
        signed_in: Some(&signed_in),
        main,
    }
    .render(StatusCode::OK)
}

/// The diff page's query: two sides, each a version number or `draft`.
#[derive(Debug, Default, Deserialize)]
struct DiffQuery {
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
}

/// `GET /ui/processes/{name}/diff?from=V&to=W`: every changed line with its context, each
/// marked added or removed in words and signs, not colour alone.
pub async fn diff_page(
    State(state): State<Arc<UiState>>,
    signed_in: SignedIn,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let admin = match operator_admin(&state, &signed_in) {
        Ok(admin) => admin,
        Err(no_entry) => return no_entry.page(&signed_in),
    };
    let query: DiffQuery =
        serde_urlencoded::from_str(query.as_deref().unwrap_or_default()).unwrap_or_default();
    let diff = match process_diff(
        &admin.parts.catalog,
        &signed_in.identity,
        &name,
        &query.from,
        &query.to,
    )
    .await
    {
        Ok(diff) => diff,
        Err(error) => return admin_failure_page(error, &signed_in),
    };
    let title = format!("{name}: {} to {}", side_label(&diff.from), side_label(&diff.to));
    let changes = &diff.diff;
    let main = html! {
        p class="breadcrumb" { a href="/ui/processes" { "Processes" } " › " a href=(process_path(&name)) { (name) } }
        h1 { "Changes in " (name) }
        dl class="facts" {
            dt { "From" } dd { (side_label(&diff.from)) " " code class="hash" { (diff.from["contentHash"].as_str().unwrap_or_default()) } }
            dt { "To" } dd { (side_label(&diff.to)) " " code class="hash" { (diff.to["contentHash"].as_str().unwrap_or_default()) } }
        }
        @if changes.identical {
            p { "The two texts are the same." }
        } @else {
            p { (changes.added) " line" @if changes.added != 1 { "s" } " added, "
                (changes.removed) " line" @if changes.removed != 1 { "s" } " removed." }
            @for hunk in &changes.hunks {
                div class="table-scroll" {
                    table class="diff" {
                        caption { "Lines " (hunk.old_start) " to " (hunk.old_start + hunk.old_lines.saturating_sub(1))
                                  " of " (side_label(&diff.from)) ", lines " (hunk.new_start) " to "
                                  (hunk.new_start + hunk.new_lines.saturating_sub(1)) " of " (side_label(&diff.to)) }
                        thead { tr {
                            th scope="col" { "Old line" }
                            th scope="col" { "New line" }
                            th scope="col" { "Change" }
                            th scope="col" { "Text" }
                        } }
                        tbody { @for line in &hunk.lines { (diff_row(line)) } }
                    }
                }
            }
        }
        p { a href=(format!("/ui/processes/{}", path_segment(&name))) { "Back to " (name) } }
    };
    Page {
        title: &title,
        signed_in: Some(&signed_in),
        main,
    }
    .render(StatusCode::OK)
}

/// One line of a hunk: its numbers, its change in a sign and a word, its text.
fn diff_row(line: &DiffLine) -> Markup {
    let (class, sign, word) = match line.op {
        LineOp::Equal => ("same", " ", "unchanged"),
        LineOp::Insert => ("added", "+", "added"),
        LineOp::Delete => ("removed", "−", "removed"),
    };
    html! {
        tr class=(class) {
            td { @if let Some(number) = line.old_line { (number) } }
            td { @if let Some(number) = line.new_line { (number) } }
            td {
                span aria-hidden="true" { (sign) } " "
                span class=(if line.op == LineOp::Equal { "visually-hidden" } else { "change-word" }) { (word) }
            }
            td {
                @match line.op {
                    LineOp::Insert => { ins { code { (line.text) } } }
                    LineOp::Delete => { del { code { (line.text) } } }
                    LineOp::Equal => { code { (line.text) } }
                }
            }
        }
    }
}

/// `v3` or `the draft`, from a side of the admin API's diff.
fn side_label(side: &Value) -> String {
    match side["version"].as_u64() {
        Some(version) => format!("v{version}"),
        None => "the draft".to_owned(),
    }
}
