//! The store conformance suite, run against `EmbeddedStore`.

use std::sync::Arc;

use agentprocess_store::{EmbeddedOptions, EmbeddedStore, Store, conformance};

async fn open(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    let (store, _) = EmbeddedStore::open(dir.path(), EmbeddedOptions::default())
        .await
        .expect("open");
    Arc::new(store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_store_passes_the_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    conformance::run_all(open(&dir).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_store_passes_the_suite_twice_on_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    conformance::ranges_are_ordered_and_paged(store.clone()).await;
    conformance::ranges_are_ordered_and_paged(store.clone()).await;
    conformance::watches_replay_from_a_past_revision(store).await;
}

/// With tokio time paused, lease expiry is driven by the test's clock: the paused clock moves
/// past the 1 s TTL of the expiry check while far less real time passes.
#[tokio::test(start_paused = true)]
async fn lease_expiry_follows_paused_tokio_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let ttl = std::time::Duration::from_secs(1);
    let wall = std::time::Instant::now();
    let paused = tokio::time::Instant::now();
    conformance::lease_expiry_removes_attached_keys_and_emits_events(store.clone()).await;
    let (wall, paused) = (wall.elapsed(), paused.elapsed());
    assert!(paused >= ttl, "the paused clock reached the expiry: {paused:?}");
    assert!(wall < ttl / 2, "expiry waited for real time: {wall:?}");
    conformance::lease_keep_alive_and_revoke(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_store_passes_the_conformance_suite() {
    let store = EmbeddedStore::in_memory(EmbeddedOptions::default());
    assert_eq!(store.dir(), None);
    conformance::run_all(Arc::new(store)).await;
}
