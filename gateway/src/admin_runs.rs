//! The admin API's run routes, operators only, behind the same bearer layer as the rest of
//! `/admin/v1`:
//!
//! ```text
//! GET /admin/v1/runs/{runId}          → RunInspection { run, steps, workItems }: who holds each
//!                                       claim until when, lease expiries, open work items
//! GET /admin/v1/runs/{runId}/history  → RunHistory { runId, events, dropped }: every change of
//!                                       the run, with who and the notes, also once archived
//! ```
//!
//! Both read through the tool backend as the operator who asks, so the run service's rules
//! hold: another organization's run, or none, is 404 `not_found`. The answers are the types of
//! [`crate::admin_model`], which an operator CLI reads back.

use crate::Identity;
use crate::admin::require_operator;
use crate::admin_model::{RunHistory, RunInspection};
use crate::mcp::{ErrorCode, RunRead, ToolBackend, ToolError};
use crate::respond::HttpFailure;
use axum::extract::{Extension, Path, State};
use axum::middleware::from_fn;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// The run routes over `backend`. Expects the bearer layer in front, as
/// [`crate::admin_routes`] does; callers without operator rights get 403.
pub fn admin_run_routes<B: ToolBackend>(backend: Arc<B>) -> Router {
    Router::new()
        .route("/admin/v1/runs/{runId}", get(inspection::<B>))
        .route("/admin/v1/runs/{runId}/history", get(history::<B>))
        .route_layer(from_fn(require_operator))
        .with_state(backend)
}

/// `GET /admin/v1/runs/{runId}`.
async fn inspection<B: ToolBackend>(
    State(backend): State<Arc<B>>,
    Extension(identity): Extension<Identity>,
    Path(run_id): Path<String>,
) -> Result<Json<RunInspection>, RunRouteError> {
    read(backend.as_ref(), &identity, RunRead::Inspection, &run_id)
        .await
        .map(Json)
}

/// `GET /admin/v1/runs/{runId}/history`.
async fn history<B: ToolBackend>(
    State(backend): State<Arc<B>>,
    Extension(identity): Extension<Identity>,
    Path(run_id): Path<String>,
) -> Result<Json<RunHistory>, RunRouteError> {
    read(backend.as_ref(), &identity, RunRead::History, &run_id)
        .await
        .map(Json)
}

/// Reads `what` of the run and takes the answer as `T`.
async fn read<B: ToolBackend, T: DeserializeOwned>(
    backend: &B,
    identity: &Identity,
    what: RunRead,
    run_id: &str,
) -> Result<T, RunRouteError> {
    let data = backend
        .read_run(identity, what, run_id)
        .await
        .map_err(RunRouteError::Refused)?
        .into_value();
    serde_json::from_value(data).map_err(|e| RunRouteError::Unreadable(format!("{}: {e}", what.as_str())))
}

/// Why a run route failed.
#[derive(Debug)]
enum RunRouteError {
    /// The run service said no, or failed (`retry`).
    Refused(ToolError),
    /// The run service answered something that is not the model: a server bug.
    Unreadable(String),
}

impl From<RunRouteError> for HttpFailure {
    fn from(error: RunRouteError) -> Self {
        match error {
            RunRouteError::Refused(error) => match error.code {
                ErrorCode::NotFound => HttpFailure::NotFound(error.message),
                ErrorCode::Forbidden => HttpFailure::Forbidden(error.message),
                ErrorCode::Invalid => HttpFailure::Malformed(error.message),
                _ => HttpFailure::Unavailable(format!("{}; try again", error.message)),
            },
            RunRouteError::Unreadable(why) => {
                tracing::error!(%why, "a run read answered something the admin model does not hold");
                HttpFailure::Unavailable(format!("the run could not be read: {why}"))
            }
        }
    }
}

impl IntoResponse for RunRouteError {
    fn into_response(self) -> Response {
        HttpFailure::from(self).into_response()
    }
}
