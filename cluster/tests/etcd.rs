//! The cluster's main scenarios against a real three-member etcd cluster on loopback, with
//! short leases (etcd raises a TTL below its minimum, 3 s for the test cluster's election
//! timeout).

mod common;

use std::sync::Arc;
use std::time::Duration;

use agentprocess_store::{EtcdOptions, EtcdStore, Store, parse_endpoint_list};
use agentprocess_testkit::EtcdCluster;
use common::Setup;

const TTL: i64 = 3;

/// One cluster at a time: three members keep a small machine busy, and a starved member calls
/// elections that stall writes past the scenarios' deadlines.
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A fresh cluster and a store on it. The cluster must outlive the scenario.
async fn start() -> (EtcdCluster, Setup) {
    let cluster = EtcdCluster::start(3);
    let endpoints = parse_endpoint_list(&cluster.endpoint_list()).expect("endpoint list");
    let options = EtcdOptions {
        request_timeout: Duration::from_secs(30),
        ..EtcdOptions::default()
    };
    let store: Arc<dyn Store> = Arc::new(
        EtcdStore::connect(&endpoints, options)
            .await
            .expect("connect to etcd"),
    );
    (cluster, Setup::new(store, "test", TTL))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_host_takes_exactly_the_shards_it_wins() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    let (_cluster, setup) = start().await;
    common::second_host_takes_exactly_the_shards_it_wins(setup).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leave_waits_for_calls_in_flight_then_hands_every_shard_over() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    let (_cluster, setup) = start().await;
    common::leave_waits_for_calls_in_flight_then_hands_every_shard_over(setup).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survivor_takes_a_crashed_hosts_shards_after_its_lease_expires() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    let (_cluster, setup) = start().await;
    common::survivor_takes_a_crashed_hosts_shards_after_its_lease_expires(setup).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_captured_fence_stops_writes_once_the_shard_moved() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    let (_cluster, setup) = start().await;
    common::a_captured_fence_stops_writes_once_the_shard_moved(setup).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_map_follows_joins_leaves_and_crashes() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    let (_cluster, setup) = start().await;
    common::shard_map_follows_joins_leaves_and_crashes(setup).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_leads_after_the_leader_crashes_and_lost_fires_on_deletion() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    let (_cluster, setup) = start().await;
    common::standby_leads_after_the_leader_crashes_and_lost_fires_on_deletion(setup).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resigning_hands_leadership_over_at_once() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    let (_cluster, setup) = start().await;
    common::resigning_hands_leadership_over_at_once(setup).await;
}
