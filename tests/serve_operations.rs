//! What whoever runs `agentprocess serve` watches: `/healthz` and `/readyz`, answered without a
//! token.

mod common;

use common::{Server, status_and_json};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn health_and_readiness_answer_without_a_token() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let (status, body) = status_and_json(reqwest::get(format!("{}/healthz", server.url)).await.unwrap()).await;
    assert_eq!((status, body), (200, json!({ "status": "alive" })));
    let (status, body) = status_and_json(reqwest::get(format!("{}/readyz", server.url)).await.unwrap()).await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({ "status": "ready", "store": "open", "scheduler": "running" })
        )
    );
}
