//! `agentprocess actor`: an actor host of a cluster. It registers in etcd, takes the shards
//! rendezvous hashing gives it, serves the run service over gRPC for runs of those shards,
//! fences every run write on its hold of the run's shard, and commits the writes of many runs
//! in shared etcd transactions (group commit).

use super::{CommonArgs, connect_etcd, grpc_message_bytes, run_role, shared_blobs};
use crate::settings::{ClusterFlags, FlagSettings, Settings};
use crate::telemetry::Telemetry;
use agentprocess_cluster::{ActorMembership, HostRecord, MembershipOptions, ShardGuard, shard_of};
use agentprocess_proto::run_service_server;
use agentprocess_run_actor::machine::RunId;
use agentprocess_run_actor::runtime::{Clock, NoHints, Runtime, RuntimeConfig};
use agentprocess_run_actor::{MirrorLimits, RunFence};
use agentprocess_service::run_routing_key;
use agentprocess_store::{Compare, GroupCommit, GroupCommitOptions, Store, StoreError};
use anyhow::Context;
use async_trait::async_trait;
use clap::Args;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Run an actor host of a cluster: run actors for the shards it owns, served over gRPC to the
/// gateways and the scheduler.
///
/// Settings come from the same stack as `serve` (defaults, --config, AGENTPROCESS_*, flags),
/// with `[cluster]` for what the roles share. SIGTERM or Ctrl-C hands its shards over: it stops
/// taking calls, lets those in flight finish, and gives the shards up at once.
#[derive(Debug, Args)]
pub struct ActorArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Where the gRPC run service listens [default: 127.0.0.1:7070].
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// The URL other roles reach this host at [default: http://<listen>, or https://<listen>
    /// with TLS between roles; setting: cluster.advertise_url].
    #[arg(long, value_name = "URL")]
    advertise_url: Option<String>,
    /// How long a claim lasts before it must be renewed, in seconds [default: 600].
    #[arg(long, value_name = "N")]
    lease_seconds: Option<u64>,
}

/// Where an actor host listens when not told.
const DEFAULT_LISTEN: ([u8; 4], u16) = ([127, 0, 0, 1], 7070);

pub fn run(args: ActorArgs) -> ExitCode {
    let flags = FlagSettings {
        listen: Some(args.listen.unwrap_or_else(|| SocketAddr::from(DEFAULT_LISTEN))),
        lease_seconds: args.lease_seconds,
        cluster: ClusterFlags {
            advertise_url: args.advertise_url,
            ..ClusterFlags::default()
        },
        ..FlagSettings::default()
    };
    run_role("actor", &args.common, flags, actor)
}

/// The fence an actor host's runs write under: its hold of the run's shard.
#[derive(Debug)]
struct ShardFence {
    membership: Arc<ActorMembership>,
    shards: u32,
}

impl ShardFence {
    fn shard(&self, run_id: &RunId) -> u32 {
        shard_of(run_routing_key(run_id.as_str()), self.shards)
    }
}

#[async_trait]
impl RunFence for ShardFence {
    fn compare(&self, run_id: &RunId) -> Result<Compare, String> {
        let shard = self.shard(run_id);
        self.membership
            .fence(shard)
            .ok_or_else(|| format!("this host does not own shard {shard} (run {run_id})"))
    }

    async fn still_holds(&self, run_id: &RunId) -> Result<bool, StoreError> {
        self.membership.still_holds(self.shard(run_id)).await
    }
}

async fn actor(settings: Settings, telemetry: Arc<Telemetry>) -> anyhow::Result<()> {
    let tls = super::role_tls(&settings.cluster)?;
    let (store, keys) = connect_etcd(&settings).await?;
    let blobs = shared_blobs(&settings, "actor")?;
    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .with_context(|| format!("cannot listen on {}", settings.listen))?;
    let local = listener.local_addr().context("the listener has no address")?;
    let url = settings
        .cluster
        .advertise_url
        .clone()
        .unwrap_or_else(|| match tls {
            Some(_) => format!("https://{local}"),
            None => format!("http://{local}"),
        });
    let host = HostRecord {
        id: super::incarnation_id("actor"),
        url: url.clone(),
    };
    let shards = settings.cluster.shards;
    let membership = ActorMembership::join(
        store.clone(),
        keys.clone(),
        host,
        MembershipOptions {
            shards,
            lease_ttl_seconds: settings.cluster.host_lease_seconds,
            ..MembershipOptions::default()
        },
    )
    .await
    .context("cannot join the cluster")?;
    let config = RuntimeConfig {
        // The scheduler watches the store: there is no one in this process to tell.
        hints: Arc::new(NoHints),
        fence: Some(Arc::new(ShardFence {
            membership: membership.clone(),
            shards,
        })),
        // Every page read is an etcd request here: `get_work` reads the watched copies.
        index_mirror: (settings.cluster.index_mirror_max_bytes > 0).then(|| MirrorLimits {
            max_bytes: settings.cluster.index_mirror_max_bytes,
            ..MirrorLimits::default()
        }),
        ..crate::serve_cmd::runtime_config(&settings)?
    };
    let clock = Clock::system();
    if settings.testing.clock_control {
        super::test_clock::warn_clock_control("actor host");
        super::test_clock::follow(
            store.clone(),
            keys.clone(),
            clock.clone(),
            format!("actor:{}", membership.host_id()),
            settings.cluster.host_lease_seconds,
        )
        .await?;
    }
    // Many runs' writes share one etcd transaction: a round trip per batch, not per write.
    let grouped: Arc<dyn Store> = Arc::new(GroupCommit::new(
        store,
        GroupCommitOptions {
            max_in_flight: settings.cluster.group_commit_in_flight,
            grow: settings.cluster.group_commit_grow,
            max_pending: settings.cluster.max_in_flight_store_requests,
            max_pending_setting: "cluster.max_in_flight_store_requests",
            ..GroupCommitOptions::default()
        },
    ));
    let runtime = Runtime::new(grouped, blobs, config, clock);
    super::file_runs_by_inputs(runtime.clone());
    let waiting = runtime.clone();
    let service = ShardGuard::new(Arc::new(runtime), membership.clone(), shards)
        .with_max_in_flight(settings.cluster.max_in_flight_calls_per_host);
    let server = run_service_server(Arc::new(service), grpc_message_bytes(&settings));
    let metrics = telemetry.serve_metrics(settings.metrics_listen).await?;
    let _shards_owned = metrics
        .is_some()
        .then(|| agentprocess_cluster::metrics::shards_owned_gauge(&membership));

    println!(
        "agentprocess {} actor host {} serving runs at {url}",
        env!("CARGO_PKG_VERSION"),
        membership.host_id()
    );
    crate::telemetry::print_metrics_endpoint(metrics);
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = &tls {
        // Callers must show a certificate the cluster's CA signed.
        builder = builder
            .tls_config(tls.server_config())
            .context("cluster.grpc_cert_file and grpc_key_file cannot serve TLS")?;
    }
    let (stop_serving, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(builder.add_service(server).serve_with_incoming_shutdown(
        tokio_stream::wrappers::TcpListenerStream::new(listener),
        async {
            let _ = stopped.await;
        },
    ));
    super::shutdown_signal().await;
    eprintln!("agentprocess: handing this host's shards over");
    // Calls waiting for work answer now: their callers ask again, of a host that stays.
    waiting.stop_waiting_for_work();
    membership.leave().await;
    let _ = stop_serving.send(());
    match tokio::time::timeout(Duration::from_secs(10), serving).await {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(error))) => Err(error).context("the gRPC server failed"),
        Ok(Err(error)) => Err(error).context("the gRPC server stopped"),
        Err(_) => {
            tracing::warn!("calls still open 10 s after the shards were handed over; stopping anyway");
            Ok(())
        }
    }
}
