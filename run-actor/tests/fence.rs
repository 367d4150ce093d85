//! The shard fence (architecture, "Sharding, routing, failure": a host that lost its shard
//! writes nothing): every run write carries the fence's compare, and a host whose fence no
//! longer holds answers `NotOwner` and leaves the store as it was.

mod runtime_support;

use agentprocess_run_actor::RunFence;
use agentprocess_run_actor::machine::{ErrorCode, RunId, StepId};
use agentprocess_run_actor::runtime::{Clock, LocalBlobs, Mode, Runtime, RuntimeConfig, RuntimeError, Write};
use agentprocess_store::keys::Keys;
use agentprocess_store::{Compare, LeaseId, RangeRequest, Store, StoreError, Txn, TxnOp};
use async_trait::async_trait;
use runtime_support::*;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

const SHARD_KEY: &[u8] = b"test/shard/0";

/// A fence over one shard key held with `lease`, as an actor host believes it: `believes_held`
/// is what the host last heard (a frozen host still believes it).
#[derive(Debug)]
struct OneShardFence {
    store: Arc<dyn Store>,
    lease: LeaseId,
    believes_held: AtomicBool,
}

#[async_trait]
impl RunFence for OneShardFence {
    fn compare(&self, _run_id: &RunId) -> Result<Compare, String> {
        if self.believes_held.load(Ordering::SeqCst) {
            Ok(Compare::lease_is(SHARD_KEY.to_vec(), Some(self.lease)))
        } else {
            Err("this host does not own shard 0".into())
        }
    }

    async fn still_holds(&self, _run_id: &RunId) -> Result<bool, StoreError> {
        let (found, _) = self.store.get(SHARD_KEY).await?;
        Ok(found.is_some_and(|kv| kv.lease == Some(self.lease)))
    }
}

impl OneShardFence {
    /// A fence over the shard key held with `lease`, whose host believes it holds it.
    fn believing(store: &Arc<dyn Store>, lease: LeaseId) -> Arc<OneShardFence> {
        Arc::new(OneShardFence {
            store: store.clone(),
            lease,
            believes_held: AtomicBool::new(true),
        })
    }
}

async fn hold_shard(store: &Arc<dyn Store>) -> LeaseId {
    let lease = store.lease_grant(60).await.unwrap().id;
    let txn = Txn::new().and_then(vec![TxnOp::put_with_lease(
        SHARD_KEY.to_vec(),
        b"host-a".to_vec(),
        lease,
    )]);
    assert!(store.txn(txn).await.unwrap().succeeded);
    lease
}

/// Every key of the cluster and its version: what "nothing was written" compares.
async fn snapshot(store: &Arc<dyn Store>) -> Vec<(Vec<u8>, i64)> {
    let keys = Keys::new(&RuntimeConfig::default().cluster);
    let found = store.range(RangeRequest::new(keys.cluster())).await.unwrap();
    found.kvs.into_iter().map(|kv| (kv.key, kv.version)).collect()
}

/// A runtime in `dir` whose writes carry `fence`'s compare, with one defect-triage run
/// started; the run.
async fn fenced_runtime(
    dir: &std::path::Path,
    store: &Arc<dyn Store>,
    fence: Arc<OneShardFence>,
) -> (Runtime, RunId) {
    let config = RuntimeConfig {
        fence: Some(fence),
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(
        store.clone(),
        Arc::new(LocalBlobs::new(dir.join("blobs"))),
        config,
        Clock::starting_at(START),
    );
    publish_example(&runtime, ORG, "defect-triage").await;
    let started = start(
        &runtime,
        &agent("starter"),
        "defect-triage",
        json!({ "reportId": "T-1" }),
        "s-1",
    )
    .await;
    let run = run_id(&started);
    (runtime, run)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_whose_shard_moved_writes_nothing_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir.path().join("store")).await;
    let lease = hold_shard(&store).await;
    let fence = OneShardFence::believing(&store, lease);
    let (runtime, run) = fenced_runtime(dir.path(), &store, fence.clone()).await;

    // Another host takes the shard while this one is frozen: it still believes it holds it.
    store.lease_revoke(lease).await.unwrap();
    let other = store.lease_grant(60).await.unwrap().id;
    let txn = Txn::new().and_then(vec![TxnOp::put_with_lease(
        SHARD_KEY.to_vec(),
        b"host-b".to_vec(),
        other,
    )]);
    assert!(store.txn(txn).await.unwrap().succeeded);
    let before = snapshot(&store).await;

    let claim = Write::Claim {
        run_id: run.clone(),
        step: StepId::from_wire("triage"),
    };
    let outcome = runtime.execute(&agent("a1"), claim.clone(), "c-1").await;
    assert!(
        matches!(&outcome, Err(RuntimeError::NotOwner(why)) if why.contains("no longer owns")),
        "{outcome:?}"
    );
    assert_eq!(
        snapshot(&store).await,
        before,
        "the fenced write changed the store"
    );

    // Once the host knows, it refuses before writing.
    fence.believes_held.store(false, Ordering::SeqCst);
    let outcome = runtime.execute(&agent("a1"), claim, "c-2").await;
    assert!(matches!(&outcome, Err(RuntimeError::NotOwner(_))), "{outcome:?}");
    assert_eq!(snapshot(&store).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_pass_while_the_fence_holds() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir.path().join("store")).await;
    let lease = hold_shard(&store).await;
    let fence = OneShardFence::believing(&store, lease);
    let (runtime, run) = fenced_runtime(dir.path(), &store, fence).await;
    let granted = ok(claim(&runtime, &agent("a1"), &run, "triage", "c-1").await);
    assert!(granted["token"].is_string());
}

/// A host frozen while its shard moved answers nothing from what it read before: the new owner
/// claimed a step meanwhile, and the frozen host, resumed, is handed the submit with that
/// claim's token. Read from its memory the token was never issued ("does not verify"); the
/// host must see the run changed, read it again and, as its fence no longer holds, say it does
/// not own the run, so the caller's router sends the submit to the new owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_lost_its_shard_refuses_nothing_from_what_it_read_before() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir.path().join("store")).await;
    let lease = hold_shard(&store).await;
    let frozen_fence = OneShardFence::believing(&store, lease);
    // Starting the run leaves it in the host's memory.
    let (frozen, run) = fenced_runtime(dir.path(), &store, frozen_fence).await;

    // The shard moves to another host, which claims the step.
    store.lease_revoke(lease).await.unwrap();
    let owner = hold_shard(&store).await;
    let owner_fence = OneShardFence::believing(&store, owner);
    let new_owner = Runtime::new(
        store.clone(),
        Arc::new(LocalBlobs::new(dir.path().join("blobs"))),
        RuntimeConfig {
            fence: Some(owner_fence),
            ..RuntimeConfig::default()
        },
        Clock::starting_at(START),
    );
    let granted = ok(claim(&new_owner, &agent("a1"), &run, "triage", "c-1").await);
    let token = granted["token"].as_str().unwrap().to_owned();
    let before = snapshot(&store).await;

    let submit = Write::Submit {
        token: token.clone(),
        submission: triage_findings(),
    };
    let outcome = frozen.execute(&agent("a1"), submit.clone(), "s-2").await;
    assert!(
        matches!(&outcome, Err(RuntimeError::NotOwner(_))),
        "the frozen host answered from a run it read before the shard moved: {outcome:?}"
    );
    assert_eq!(snapshot(&store).await, before, "the frozen host wrote");

    // What it answers from now on is what the store holds: the step is taken.
    let outcome = frozen
        .execute(
            &agent("a2"),
            Write::Claim {
                run_id: run.clone(),
                step: StepId::from_wire("triage"),
            },
            "c-2",
        )
        .await
        .unwrap();
    assert_eq!(refused(outcome).code, ErrorCode::Conflict);
    assert_eq!(snapshot(&store).await, before, "the frozen host wrote");
    ok(new_owner.execute(&agent("a1"), submit, "s-2").await.unwrap());
}

/// A fenced host refuses what the protocol refuses, once: a `start_run` with inputs its process
/// does not take is `invalid` (a run that is not there stays not there), not an endless reread
/// that ends in `retry`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_host_refuses_a_bad_start_as_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir.path().join("store")).await;
    let lease = hold_shard(&store).await;
    let (runtime, _) = fenced_runtime(dir.path(), &store, OneShardFence::believing(&store, lease)).await;
    let before = snapshot(&store).await;
    let outcome = runtime
        .execute(
            &agent("starter"),
            Write::StartRun {
                process: "defect-triage".into(),
                version: None,
                inputs: json!({ "notAnInput": 1 }),
                mode: Mode::Live,
            },
            "s-bad",
        )
        .await
        .unwrap();
    assert_eq!(refused(outcome).code, ErrorCode::Invalid);
    assert_eq!(snapshot(&store).await, before, "a refused start wrote");
}
