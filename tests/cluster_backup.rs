//! A cluster backed up as the README says (an etcd snapshot with `etcdctl snapshot save`, then a
//! copy of the blob store), stopped, restored (`etcdctl snapshot restore` into new member data
//! folders, the blob store copied back) and started again: every run reads back as it was,
//! archived runs included, and the restored cluster goes on taking work.

mod cluster_support;
mod common;

use cluster_support::{Cluster, Role, Shape};
use common::quick::{QUICK_PROCESS, archived_runs_in, copy_tree, ended_quick, start_quick};
use common::{Mcp, ORG, Who, request_id};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

async fn list_all(agent: &Mcp) -> Vec<Value> {
    let found = agent
        .ok("list_runs", json!({ "process": "quick", "limit": 100 }))
        .await;
    assert!(found["nextCursor"].is_null());
    found["items"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_restored_from_an_etcd_snapshot_reads_back_every_run() {
    let mut cluster = Cluster::start(Shape {
        actors: 2,
        schedulers: 1,
        gateways: 1,
        env: vec![
            (
                "AGENTPROCESS_TESTING__CLOCK_CONTROL".to_owned(),
                "true".to_owned(),
            ),
            (
                "AGENTPROCESS_ARCHIVE_ENDED_RUNS_AFTER_SECONDS".to_owned(),
                "60".to_owned(),
            ),
        ],
    })
    .await;
    let folder = tempfile::tempdir().unwrap();
    let source = folder.path().join("quick.md");
    std::fs::write(&source, QUICK_PROCESS).unwrap();
    cluster.publish_in(ORG, &source, &[]);
    let agent = cluster.client(0, &Who::Agent("a_worker")).await;
    let mut runs = Vec::new();
    for i in 0..3 {
        runs.push(ended_quick(&agent, &format!("archived-{i}")).await);
    }
    cluster.advance(0, ORG, 61).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while archived_runs_in(&cluster.blobs_dir(), Some(ORG)) < 3 {
        assert!(Instant::now() < deadline, "the ended runs were not archived");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for i in 0..2 {
        runs.push(ended_quick(&agent, &format!("ended-{i}")).await);
    }
    for i in 0..2 {
        runs.push(start_quick(&agent, &format!("open-{i}")).await);
    }
    let mut views = Vec::new();
    for run in &runs {
        views.push(agent.ok("get_run", json!({ "runId": run })).await);
    }
    let listed = list_all(&agent).await;
    assert_eq!(listed.len(), runs.len());
    agent.close().await;

    // The backup: etcd first, then the blob store.
    let snapshot = folder.path().join("cluster.db");
    cluster.etcd.snapshot_save(&snapshot);
    let blobs_copy = folder.path().join("blobs");
    copy_tree(&cluster.blobs_dir(), &blobs_copy);

    // Everything stops; etcd comes back from the snapshot in new member folders, the blob store
    // from its copy; the roles start again.
    let roles = [
        (Role::Gateway, 0),
        (Role::Scheduler, 0),
        (Role::Actor, 0),
        (Role::Actor, 1),
    ];
    for (role, index) in roles {
        cluster.terminate(role, index);
    }
    cluster.etcd.restore_from_snapshot(&snapshot);
    std::fs::remove_dir_all(cluster.blobs_dir()).unwrap();
    copy_tree(&blobs_copy, &cluster.blobs_dir());
    for (role, index) in roles.into_iter().rev() {
        cluster.restart(role, index);
    }
    cluster.wait_settled(2).await;

    let agent = cluster.client(0, &Who::Agent("a_worker")).await;
    for (run, view) in runs.iter().zip(&views) {
        assert_eq!(&agent.ok("get_run", json!({ "runId": run })).await, view, "{run}");
    }
    assert_eq!(list_all(&agent).await, listed);
    let open = &runs[runs.len() - 1];
    agent
        .ok(
            "claim",
            json!({ "runId": open, "stepId": "work", "requestId": request_id() }),
        )
        .await;
    agent.close().await;
}
