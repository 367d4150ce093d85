//! `agentprocess scheduler`: the cluster's timer and notification service. Candidates campaign
//! for leadership in etcd; the leader fires timers, due dates and claim expiry through the
//! routed run service, delivers the outbox and keeps etcd healthy (compaction,
//! defragmentation), woken by watches on the store; a standby takes over when the leader's
//! lease ends.

use super::{CommonArgs, routing_options, run_role};
use crate::settings::{FlagSettings, Settings};
use crate::telemetry::Telemetry;
use agentprocess_cluster::{Election, RoutedRunService, ShardMap};
use agentprocess_run_actor::runtime::Clock;
use agentprocess_scheduler::{HttpTransport, Scheduler, SchedulerParts, StoreWatchHints};
use agentprocess_store::Store;
use anyhow::Context;
use clap::Args;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Run a scheduler of a cluster: one leads at a time (elected through etcd), the others wait to
/// take over. The leader fires waits, `wait_for` timeouts, due dates and claim expiry, archives
/// ended runs, removes expired idempotency records, delivers webhook notifications, and keeps
/// etcd healthy: its history compacted every `cluster.etcd_upkeep_seconds` (everything older
/// than one period), members defragmented one at a time when their files are mostly free
/// pages, a space alarm cleared once there is room.
#[derive(Debug, Args)]
pub struct SchedulerArgs {
    #[command(flatten)]
    common: CommonArgs,
}

pub fn run(args: SchedulerArgs) -> ExitCode {
    run_role("scheduler", &args.common, FlagSettings::default(), scheduler)
}

async fn scheduler(settings: Settings, telemetry: Arc<Telemetry>) -> anyhow::Result<()> {
    let etcd = super::connect_etcd_store(&settings).await?;
    let store: Arc<dyn Store> = Arc::new(etcd.clone());
    let keys = super::cluster_keys();
    let map = ShardMap::watch(store.clone(), keys.clone(), settings.cluster.shards)
        .await
        .context("cannot read the cluster's shard map")?;
    let runs = Arc::new(RoutedRunService::new(map, routing_options(&settings)?));
    let transport = Arc::new(HttpTransport::new(Duration::from_secs(
        settings.webhook_timeout_seconds,
    )));
    let candidate = super::incarnation_id("scheduler");
    // One clock for every term this scheduler leads.
    let clock = Clock::system();
    if settings.testing.clock_control {
        super::test_clock::warn_clock_control("scheduler");
        super::test_clock::follow(
            store.clone(),
            keys.clone(),
            clock.clone(),
            format!("scheduler:{candidate}"),
            settings.cluster.host_lease_seconds,
        )
        .await?;
    }
    let metrics = telemetry.serve_metrics(settings.metrics_listen).await?;
    println!(
        "agentprocess {} scheduler {candidate} campaigning",
        env!("CARGO_PKG_VERSION")
    );
    crate::telemetry::print_metrics_endpoint(metrics);
    let shutdown = super::shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        let campaign = Election::campaign(
            store.clone(),
            keys.scheduler_leader(),
            candidate.clone(),
            settings.cluster.leader_lease_seconds,
        );
        let leadership = tokio::select! {
            won = campaign => won.context("the leader election failed")?,
            _ = &mut shutdown => return Ok(()),
        };
        tracing::info!(%candidate, "this scheduler leads");
        let parts = SchedulerParts {
            store: store.clone(),
            keys: keys.clone(),
            clock: clock.clone(),
            runs: runs.clone(),
            hints: StoreWatchHints::start(store.clone(), keys.clone()),
        };
        let running = Scheduler::start(parts, transport.clone(), settings.scheduler());
        let upkeep = tokio::spawn(super::etcd_upkeep::run(
            etcd.clone(),
            Duration::from_secs(settings.cluster.etcd_upkeep_seconds),
        ));
        tokio::select! {
            _ = leadership.lost() => {
                tracing::warn!(%candidate, "this scheduler lost its leadership; campaigning again");
                upkeep.abort();
                running.stop().await;
            }
            _ = &mut shutdown => {
                upkeep.abort();
                running.stop().await;
                if let Err(error) = leadership.resign().await {
                    tracing::warn!(%error, "the leadership could not be handed over; a standby takes it when its lease ends");
                }
                return Ok(());
            }
        }
    }
}
