//! Process maps as SVG images: a run's (`/ui/runs/{runId}/map.svg`, its current and done steps
//! highlighted) and a published version's (`/ui/processes/{name}/versions/{version}/map.svg`).

use super::refusal_page;
use super::timeline::text;
use crate::UiState;
use crate::layout::message_page;
use crate::signed_in::SignedIn;
use agentprocess_gateway::Identity;
use agentprocess_gateway::mcp::ToolName;
use agentprocess_map::{Highlight, layout, render_svg};
use agentprocess_process::{Offer, Process, StepId};
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;

/// An SVG opened on its own: nothing loads, its inline styles draw (the map's root carries one).
const SVG_CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'";

/// `GET /ui/runs/{runId}/map.svg`: the map of the run's version, from `get_run` as the caller.
pub async fn run_map(
    State(state): State<Arc<UiState>>,
    signed_in: SignedIn,
    Path(run_id): Path<String>,
) -> Response {
    let view = match state
        .call(&signed_in.identity, ToolName::GetRun, json!({ "runId": run_id }))
        .await
    {
        Ok(view) => view,
        Err(error) => return refusal_page("This run's map cannot be drawn", &error, &signed_in),
    };
    let run = &view["run"];
    let Some(version) = run["version"].as_u64() else {
        return no_map(&signed_in, "The run names no version.");
    };
    match published(&state, &signed_in.identity, &text(&run["process"]), version).await {
        Ok(process) => svg(render_svg(&layout(&process), &highlight(&view))),
        Err(no) => no.page(&signed_in),
    }
}

/// `GET /ui/processes/{name}/versions/{version}/map.svg`: a published version as published.
pub async fn version_map(
    State(state): State<Arc<UiState>>,
    signed_in: SignedIn,
    Path((name, version)): Path<(String, String)>,
) -> Response {
    let Some(version) = version.parse::<u64>().ok().filter(|v| *v > 0) else {
        return no_map(&signed_in, "A version is a number from 1 up.");
    };
    match published(&state, &signed_in.identity, &name, version).await {
        Ok(process) => svg(render_svg(&layout(&process), &Highlight::none())),
        Err(no) => no.page(&signed_in),
    }
}

/// What marks a run on its map (tools.md run view: `steps[].state`): ready, claimed and
/// waiting steps are current, done ones done.
pub fn highlight(view: &Value) -> Highlight {
    let mut highlight = Highlight::none();
    for step in view["steps"].as_array().into_iter().flatten() {
        let id = StepId::from_wire(text(&step["id"]));
        match step["state"].as_str() {
            Some("ready" | "claimed" | "waiting") => highlight.current.push(id),
            Some("done") => highlight.done.push(id),
            _ => {}
        }
    }
    highlight
}

/// Why a map cannot be drawn.
#[derive(Debug)]
enum NoMap {
    /// The server mounts no catalog (no admin parts).
    NoCatalog,
    NotPublished {
        name: String,
        version: u64,
    },
    CatalogUnavailable,
    /// A published version that no longer loads: a bug or corruption.
    DoesNotLoad,
}

impl NoMap {
    fn page(&self, signed_in: &SignedIn) -> Response {
        match self {
            NoMap::NoCatalog => no_map(signed_in, "This server keeps no catalog to draw maps from."),
            NoMap::NotPublished { name, version } => {
                no_map(signed_in, &format!("{name} has no published version {version}."))
            }
            NoMap::CatalogUnavailable => message_page(
                StatusCode::SERVICE_UNAVAILABLE,
                "The map cannot be drawn now",
                "The catalog cannot be read right now. Try again in a moment.",
                Some(signed_in),
            ),
            NoMap::DoesNotLoad => message_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "The map cannot be drawn",
                "This published version no longer reads as a process.",
                Some(signed_in),
            ),
        }
    }
}

/// The published version of `name` in the caller's organization, loaded.
async fn published(state: &UiState, identity: &Identity, name: &str, version: u64) -> Result<Process, NoMap> {
    let admin = state.admin.as_ref().ok_or(NoMap::NoCatalog)?;
    let record = admin
        .parts
        .catalog
        .published_record(&identity.organization, name, version)
        .await
        .map_err(|error| {
            tracing::error!(%error, "cannot read a published process");
            NoMap::CatalogUnavailable
        })?
        .ok_or_else(|| NoMap::NotPublished {
            name: name.to_owned(),
            version,
        })?;
    agentprocess_process::load(record.source.as_bytes(), &Offer::EVERYTHING)
        .map(|loaded| loaded.process)
        .map_err(|issues| {
            tracing::error!(
                process = name,
                version,
                issues = issues.len(),
                "a published version no longer loads"
            );
            NoMap::DoesNotLoad
        })
}

fn no_map(signed_in: &SignedIn, message: &str) -> Response {
    message_page(StatusCode::NOT_FOUND, "No such map", message, Some(signed_in))
}

/// An SVG document, not cached (a run's map changes as it moves).
fn svg(body: String) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("image/svg+xml"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(SVG_CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_steps_are_current_and_done_steps_done() {
        let view = json!({ "steps": [
            { "id": "screen", "state": "done" }, { "id": "sign_off", "state": "waiting" },
            { "id": "fix", "state": "claimed" }, { "id": "done", "state": null } ] });
        let highlight = highlight(&view);
        assert_eq!(
            highlight.current,
            vec![StepId::from_wire("sign_off"), StepId::from_wire("fix")]
        );
        assert_eq!(highlight.done, vec![StepId::from_wire("screen")]);
    }
}
