//! `serve`'s probes, unauthenticated: `/healthz` (the process answers) and `/readyz` (it can do
//! work: the store takes writes and the scheduler runs), for a supervisor or a load balancer.

use agentprocess_scheduler::SchedulerLiveness;
use agentprocess_store::EmbeddedStore;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};
use std::sync::Arc;

/// What readiness is judged on.
#[derive(Debug, Clone)]
struct Probes {
    store: Arc<EmbeddedStore>,
    scheduler: SchedulerLiveness,
}

/// `GET /healthz` and `GET /readyz`.
pub fn health_routes(store: Arc<EmbeddedStore>, scheduler: SchedulerLiveness) -> Router {
    Router::new()
        .route("/healthz", get(alive))
        .route("/readyz", get(ready))
        .with_state(Probes { store, scheduler })
}

/// 200 `{"status": "alive"}` whenever the HTTP server answers.
async fn alive() -> Json<Value> {
    Json(json!({ "status": "alive" }))
}

/// 200 `{"status": "ready", "store": "open", "scheduler": "running"}`; 503 with
/// `"status": "not_ready"` and `"store": "closed"` (closed, or stopped by a failed write) or
/// `"scheduler": "stopped"` for what is not.
async fn ready(State(probes): State<Probes>) -> (StatusCode, Json<Value>) {
    let store_open = probes.store.is_open();
    let scheduler_running = probes.scheduler.is_running();
    let ready = store_open && scheduler_running;
    let body = json!({
        "status": if ready { "ready" } else { "not_ready" },
        "store": if store_open { "open" } else { "closed" },
        "scheduler": if scheduler_running { "running" } else { "stopped" },
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentprocess_run_actor::runtime::{Clock, LocalBlobs, Runtime, RuntimeConfig};
    use agentprocess_scheduler::{HttpTransport, Scheduler, SchedulerConfig};
    use agentprocess_store::EmbeddedOptions;
    use std::time::Duration;

    async fn readiness(probes: &Probes) -> (StatusCode, Value) {
        let (status, Json(body)) = ready(State(probes.clone())).await;
        (status, body)
    }

    #[tokio::test]
    async fn ready_until_the_store_closes_or_the_scheduler_stops() {
        let blobs = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::in_memory(EmbeddedOptions::default()));
        let runtime = Runtime::new(
            store.clone(),
            Arc::new(LocalBlobs::new(blobs.path())),
            RuntimeConfig::default(),
            Clock::system(),
        );
        let transport = Arc::new(HttpTransport::new(Duration::from_secs(1)));
        let parts = crate::serve_cmd::scheduler_parts(&runtime);
        let scheduler = Scheduler::start(parts, transport, SchedulerConfig::default());
        let probes = Probes {
            store: store.clone(),
            scheduler: scheduler.liveness(),
        };
        assert_eq!(
            readiness(&probes).await,
            (
                StatusCode::OK,
                json!({ "status": "ready", "store": "open", "scheduler": "running" })
            )
        );
        scheduler.stop().await;
        assert_eq!(
            readiness(&probes).await,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                json!({ "status": "not_ready", "store": "open", "scheduler": "stopped" })
            )
        );
        store.close().await;
        assert_eq!(
            readiness(&probes).await.1,
            json!({ "status": "not_ready", "store": "closed", "scheduler": "stopped" })
        );
        assert_eq!(alive().await.0, json!({ "status": "alive" }));
    }
}
