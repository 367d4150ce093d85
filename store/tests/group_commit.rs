//! Group commit over the embedded store: it passes the conformance suite, merges the writes of
//! concurrent callers into fewer store transactions, and never changes any one transaction's
//! outcome (architecture, "Group commit": idempotency stays inside each write's transaction).

use agentprocess_store::probed::{Probe, Probed};
use agentprocess_store::{
    Compare, EmbeddedOptions, EmbeddedStore, GroupCommit, GroupCommitOptions, KeyRange, RangeRequest, Store,
    Txn, TxnOp, conformance,
};
use async_trait::async_trait;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts the transactions that reach the store, each held a moment.
#[derive(Debug, Default)]
struct Counting {
    txns: AtomicUsize,
}

#[async_trait]
impl Probe for Counting {
    async fn txn(&self, _: &Txn) {
        self.txns.fetch_add(1, Ordering::SeqCst);
        // Slow enough that callers queue up behind each commit, as they do behind an etcd one.
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

fn counting() -> Arc<Probed<Counting>> {
    Arc::new(Probed::new(
        Arc::new(EmbeddedStore::in_memory(EmbeddedOptions::default())),
        Counting::default(),
    ))
}

/// A run write's shape: create the record if absent, with an index entry beside it.
fn create(n: usize) -> Txn {
    let record = format!("run/{n:04}").into_bytes();
    Txn::new().when([Compare::absent(record.clone())]).and_then([
        TxnOp::put(record, b"state".to_vec()),
        TxnOp::put(format!("index/{n:04}"), b"".to_vec()),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commit_passes_the_conformance_suite() {
    let store = Arc::new(GroupCommit::new(
        Arc::new(EmbeddedStore::in_memory(EmbeddedOptions::default())),
        GroupCommitOptions::default(),
    ));
    conformance::run_all(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_share_transactions_and_each_is_answered() {
    let inner = counting();
    let store = Arc::new(GroupCommit::new(inner.clone(), GroupCommitOptions::default()));
    let mut calls = Vec::new();
    for n in 0..200 {
        let store = store.clone();
        calls.push(tokio::spawn(async move { store.txn(create(n)).await }));
    }
    for call in calls {
        let result = call.await.unwrap().unwrap();
        assert!(result.succeeded);
        assert_eq!(
            result.results.len(),
            2,
            "each gets the results of its own operations"
        );
    }
    let found = inner
        .range(RangeRequest::new(KeyRange::prefix(b"run/".to_vec())))
        .await
        .unwrap();
    assert_eq!(found.kvs.len(), 200);
    let txns = inner.probe.txns.load(Ordering::SeqCst);
    assert!(
        txns < 100,
        "200 writes took {txns} store transactions: they were not grouped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_compare_fails_only_its_own_transaction() {
    let inner = counting();
    let store = Arc::new(GroupCommit::new(inner.clone(), GroupCommitOptions::default()));
    // Run 7 exists already: its create must fail, alone.
    assert!(store.txn(create(7)).await.unwrap().succeeded);
    let mut calls = Vec::new();
    for n in 0..40 {
        let store = store.clone();
        calls.push(tokio::spawn(
            async move { (n, store.txn(create(n)).await.unwrap()) },
        ));
    }
    for call in calls {
        let (n, result) = call.await.unwrap();
        assert_eq!(result.succeeded, n != 7, "run {n}");
    }
    let index = inner
        .range(RangeRequest::new(KeyRange::prefix(b"index/".to_vec())))
        .await
        .unwrap();
    assert_eq!(
        index.kvs.len(),
        40,
        "every other write landed, and run 7's index entry only once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writes_of_one_key_never_share_a_transaction() {
    let store = Arc::new(GroupCommit::new(counting(), GroupCommitOptions::default()));
    // Two retries of one request racing: both compare the idempotency key absent and put it.
    let racing = |value: &'static [u8]| {
        Txn::new()
            .when([Compare::absent(b"idem/req-1".to_vec())])
            .and_then([TxnOp::put(b"idem/req-1".to_vec(), value.to_vec())])
    };
    let (a, b) = tokio::join!(store.txn(racing(b"a")), store.txn(racing(b"b")));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(a.succeeded != b.succeeded, "exactly one wins: {a:?} {b:?}");
}

/// Transactions wait while the gate is closed; each one's size in writes (two operations each,
/// as [`create`] makes them) is recorded.
#[derive(Debug)]
struct Gate {
    open: tokio::sync::watch::Sender<bool>,
    sizes: std::sync::Mutex<Vec<usize>>,
}

#[async_trait]
impl Probe for Gate {
    async fn txn(&self, txn: &Txn) {
        self.sizes.lock().unwrap().push(txn.then.len() / 2);
        let mut open = self.open.subscribe();
        open.wait_for(|open| *open).await.unwrap();
    }
}

/// The batch sizes that reached a gated store after `writes` (each a list of write numbers sent
/// together, then given time to be taken), with the gate opened only at the end.
async fn sizes_behind_a_closed_gate(
    options: GroupCommitOptions,
    writes: &[&[usize]],
) -> (Vec<usize>, Vec<usize>) {
    let inner = Arc::new(Probed::new(
        Arc::new(EmbeddedStore::in_memory(EmbeddedOptions::default())),
        Gate {
            open: tokio::sync::watch::Sender::new(false),
            sizes: std::sync::Mutex::new(Vec::new()),
        },
    ));
    let store = Arc::new(GroupCommit::new(inner.clone(), options));
    let mut calls = Vec::new();
    for group in writes {
        for &n in *group {
            let store = store.clone();
            calls.push(tokio::spawn(async move { store.txn(create(n)).await }));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let while_closed = inner.probe.sizes.lock().unwrap().clone();
    inner.probe.open.send_replace(true);
    for call in calls {
        assert!(call.await.unwrap().unwrap().succeeded);
    }
    let all = inner.probe.sizes.lock().unwrap().clone();
    (while_closed, all)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_grow_while_others_are_in_flight() {
    let options = GroupCommitOptions {
        max_in_flight: 4,
        grow: true,
        ..GroupCommitOptions::default()
    };
    // One write goes at once; with one in flight the next batch waits for two, with two in
    // flight for four; when the gate opens, what waits goes together.
    let (while_closed, all) = sizes_behind_a_closed_gate(options, &[&[0], &[1], &[2], &[3, 4, 5]]).await;
    assert_eq!(while_closed, vec![1, 2]);
    assert_eq!(all, vec![1, 2, 3]);

    // Without growing, each write goes alone while one of the four in flight is free.
    let eager = GroupCommitOptions {
        grow: false,
        ..options
    };
    let (while_closed, all) = sizes_behind_a_closed_gate(eager, &[&[0], &[1], &[2], &[3, 4, 5]]).await;
    assert_eq!(while_closed, vec![1, 1, 1, 1]);
    assert_eq!(all, vec![1, 1, 1, 1, 2]);
}

/// Past `max_pending` requests in flight or queued, a read or a write is not sent: it fails at
/// once with `Overloaded`, naming the bound and when to come back; once answers come back, the
/// next request goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_bound_a_request_is_refused_at_once_and_nothing_is_sent() {
    let inner = Arc::new(Probed::new(
        Arc::new(EmbeddedStore::in_memory(EmbeddedOptions::default())),
        Gate {
            open: tokio::sync::watch::Sender::new(false),
            sizes: std::sync::Mutex::new(Vec::new()),
        },
    ));
    let options = GroupCommitOptions {
        max_pending: 2,
        max_pending_setting: "cluster.max_in_flight_store_requests",
        ..GroupCommitOptions::default()
    };
    let store = Arc::new(GroupCommit::new(inner.clone(), options));
    let held: Vec<_> = (0..2)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move { store.txn(create(n)).await })
        })
        .collect();
    while inner.probe.sizes.lock().unwrap().is_empty() {
        tokio::task::yield_now().await;
    }
    let refused = |result: Result<(), agentprocess_store::StoreError>| match result {
        Err(agentprocess_store::StoreError::Overloaded {
            limit,
            retry_after_ms,
        }) => {
            assert_eq!(limit, "cluster.max_in_flight_store_requests");
            assert_eq!(retry_after_ms, agentprocess_store::OVERLOADED_RETRY_AFTER_MS);
        }
        other => panic!("not refused at its bound: {other:?}"),
    };
    refused(store.txn(create(2)).await.map(drop));
    refused(
        store
            .range(RangeRequest::new(KeyRange::prefix(b"run/".to_vec())))
            .await
            .map(drop),
    );
    refused(store.get(b"run/0000").await.map(drop));
    inner.probe.open.send_replace(true);
    for call in held {
        assert!(call.await.unwrap().unwrap().succeeded);
    }
    assert!(store.txn(create(3)).await.unwrap().succeeded, "room again");
    let written = inner
        .range(RangeRequest::new(KeyRange::prefix(b"run/".to_vec())))
        .await
        .unwrap();
    let keys: Vec<_> = written.kvs.iter().map(|kv| kv.key.clone()).collect();
    assert_eq!(
        keys,
        vec![b"run/0000".to_vec(), b"run/0001".to_vec(), b"run/0003".to_vec()],
        "the refused write was never sent"
    );
}
