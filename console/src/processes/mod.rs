//! The operators' process pages: the list with the import form, a process (its draft, role
//! bindings, publication, versions), a version, and a diff between two texts. Every change goes
//! through the admin API's functions, so the same rules hold as at `/admin/v1/processes`.
//!
//! ```text
//! GET  /ui/processes                                    the processes; the import form
//! POST /ui/processes                                    import (multipart: a file or pasted text)
//! GET  /ui/processes/{name}                             the draft, its roles, the versions
//! POST /ui/processes/{name}/bindings                    bind one role to a group
//! POST /ui/processes/{name}/publish                     publish the draft
//! GET  /ui/processes/{name}/versions/{version}          the version's PROCESS.md and map
//! GET  /ui/processes/{name}/diff?from=V&to=W            what changed (V, W: a version or draft)
//! ```

mod import;
mod process;
mod version;

use super::UiState;
use crate::layout::path_segment;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use std::sync::Arc;

/// The process pages' routes. The import takes a body as large as the admin API's.
pub fn routes() -> Router<Arc<UiState>> {
    Router::new()
        .route(
            "/ui/processes",
            get(import::processes_page)
                .post(import::import)
                .layer(DefaultBodyLimit::max(
                    agentprocess_gateway::admin::MAX_ADMIN_BODY_BYTES * 2,
                )),
        )
        .route("/ui/processes/{name}", get(process::process_page))
        .route("/ui/processes/{name}/bindings", post(process::bind))
        .route("/ui/processes/{name}/publish", post(process::publish))
        .route(
            "/ui/processes/{name}/versions/{version}",
            get(version::version_page),
        )
        .route("/ui/processes/{name}/diff", get(version::diff_page))
}

/// The page of process `name`.
fn process_path(name: &str) -> String {
    format!("/ui/processes/{}", path_segment(name))
}

/// The `done` parameter of a page's query: which form just did what it said.
fn done_of(query: Option<&str>) -> Option<String> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(query.unwrap_or_default())
        .ok()?
        .into_iter()
        .find(|(key, _)| key == "done")
        .map(|(_, value)| value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_in_paths() {
        assert_eq!(process_path("purchase-request"), "/ui/processes/purchase-request");
        assert_eq!(process_path("a b/c"), "/ui/processes/a%20b%2Fc");
    }

    #[test]
    fn done_is_read_from_the_query() {
        assert_eq!(done_of(Some("done=published&x=1")).as_deref(), Some("published"));
        assert_eq!(done_of(None), None);
        assert_eq!(done_of(Some("%zz")), None);
    }
}
