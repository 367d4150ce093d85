//! The roles of a cluster, each a process of the one binary on a shared etcd: `gateway`,
//! `actor` and `scheduler`. What they share: settings, the etcd connection, the blob store.
//!
//! ```text
//! actor.rs      an actor host: owns shards, serves the run service over gRPC, fenced writes
//! gateway.rs    MCP, admin API and file links; routes each run's calls to its shard's owner
//! scheduler.rs  leader-elected: fires timers through the routed run service, delivers the outbox
//! etcd_upkeep.rs  the leader keeps etcd healthy: compaction, defragmentation, space alarms
//! test_clock.rs testing only: the clock every role follows, moved through the store
//! ```

pub mod actor;
mod etcd_upkeep;
pub mod gateway;
pub mod scheduler;
mod test_clock;

use crate::settings::{ClusterFlags, ClusterSettings, FlagSettings, Settings};
use crate::telemetry::{Telemetry, TelemetryArgs, TelemetryOptions};
use agentprocess_cluster::RoutingOptions;
use agentprocess_proto::{ClientOptions, RoleTls};
use agentprocess_run_actor::runtime::{BlobStore, RuntimeConfig, blob_store_from_url};
use agentprocess_store::keys::Keys;
use agentprocess_store::{EtcdOptions, EtcdStore, EtcdTls, EtcdUser, Store};
use anyhow::Context;
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// What every role is told the same way.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// etcd's client URLs, comma-separated [setting: cluster.etcd].
    #[arg(long, value_name = "URL[,URL...]", value_delimiter = ',')]
    etcd: Vec<String>,
    /// Where uploads and the run archive live, a blob store every role reaches:
    /// `file:///shared/folder`, `s3://bucket/prefix`, `gs://...`, `az://...` [setting: uploads].
    #[arg(long, value_name = "URL")]
    uploads: Option<String>,
    /// A TOML settings file: the same settings as `serve`, plus `[cluster]`.
    #[arg(long, value_name = "FILE", env = "AGENTPROCESS_CONFIG")]
    config: Option<PathBuf>,
    #[command(flatten)]
    telemetry: TelemetryArgs,
}

impl CommonArgs {
    /// The settings from the stack (defaults, file, environment) with these flags and `flags`
    /// on top.
    fn settings(&self, mut flags: FlagSettings) -> Result<Settings, String> {
        if !self.etcd.is_empty() {
            flags.cluster = ClusterFlags {
                etcd: Some(self.etcd.clone()),
                ..flags.cluster
            };
        }
        flags.uploads = self.uploads.clone();
        flags.log_format = self.telemetry.log_format;
        flags.metrics_listen = self.telemetry.metrics_listen;
        Settings::load(self.config.as_deref(), flags).map_err(|e| e.to_string())
    }
}

/// Loads the settings, starts the async runtime and telemetry, and runs `role` to its end: what
/// every role's `run` does.
fn run_role<F, Fut>(name: &'static str, common: &CommonArgs, flags: FlagSettings, role: F) -> ExitCode
where
    F: FnOnce(Settings, Arc<Telemetry>) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let settings = match common.settings(flags) {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("error: the settings cannot be used: {error}");
            return ExitCode::from(2);
        }
    };
    if settings.cluster.etcd.is_empty() {
        eprintln!("error: `agentprocess {name}` needs etcd: pass --etcd URL[,URL...] (or set cluster.etcd)");
        return ExitCode::from(2);
    }
    run_with_telemetry(name, settings, role)
}

/// Starts the async runtime and the role's telemetry (the log, traces, the meter provider), runs
/// `role` to its end, then exports what telemetry still holds: how `serve` and every role run.
pub(crate) fn run_with_telemetry<F, Fut>(name: &'static str, settings: Settings, role: F) -> ExitCode
where
    F: FnOnce(Settings, Arc<Telemetry>) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let options = TelemetryOptions {
        role: name,
        log_format: settings.log_format,
        metrics_listen: settings.metrics_listen,
    };
    // The OTLP gRPC exporter is made inside the runtime, whose reactor its connection uses.
    let telemetry = match runtime.block_on(async { Telemetry::start(&options) }) {
        Ok(telemetry) => Arc::new(telemetry),
        Err(error) => {
            eprintln!("error: telemetry cannot be set up: {error:#}");
            return ExitCode::from(2);
        }
    };
    let outcome = runtime.block_on(role(settings, telemetry.clone()));
    // The runtime still runs: the last spans go out through its connections.
    if let Ok(telemetry) = Arc::try_unwrap(telemetry) {
        telemetry.shutdown();
    }
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The cluster's etcd, and its key layout.
async fn connect_etcd(settings: &Settings) -> anyhow::Result<(Arc<dyn Store>, Keys)> {
    let store = connect_etcd_store(settings).await?;
    Ok((Arc::new(store), cluster_keys()))
}

/// The key layout every role of the cluster writes and reads.
/// Files the runs the store held before runs were filed by input, in the background, and says
/// how it went: until it is done `list_runs` filtered by inputs reads runs in start order.
/// `serve` and every actor host start it; once the store says it is done, it does nothing.
pub(crate) fn file_runs_by_inputs(runtime: agentprocess_run_actor::runtime::Runtime) {
    use agentprocess_run_actor::runtime::Filing;
    tokio::spawn(async move {
        match runtime.file_runs_by_inputs().await {
            Ok(Filing::AlreadyDone) => {}
            Ok(Filing::Done { hot, archived }) => tracing::info!(
                hot,
                archived,
                "runs filed by input: list_runs filtered by inputs reads them where they are filed"
            ),
            Err(error) => tracing::warn!(
                error = %agentprocess_run_actor::error_chain(&error),
                "runs could not be filed by input; list_runs filtered by inputs reads runs in start order until a restart files them"
            ),
        }
    });
}

fn cluster_keys() -> Keys {
    Keys::new(&RuntimeConfig::default().cluster)
}

/// The cluster's etcd as itself, for what only etcd does (its upkeep).
async fn connect_etcd_store(settings: &Settings) -> anyhow::Result<EtcdStore> {
    EtcdStore::connect(&settings.cluster.etcd, etcd_options(&settings.cluster)?)
        .await
        .with_context(|| format!("cannot reach etcd at {}", settings.cluster.etcd.join(",")))
}

/// How the roles connect to etcd: TLS and the user from the settings, files read now so a
/// missing or unreadable one stops the role at start with its name.
pub(crate) fn etcd_options(cluster: &ClusterSettings) -> anyhow::Result<EtcdOptions> {
    let read = |setting: &str, path: &Path| {
        std::fs::read(path).with_context(|| format!("cluster.{setting}: cannot read {}", path.display()))
    };
    let tls = if cluster.etcd_tls() {
        let ca_pem = cluster
            .etcd_ca_file
            .as_deref()
            .map(|path| read("etcd_ca_file", path))
            .transpose()?;
        let client_identity = match (&cluster.etcd_cert_file, &cluster.etcd_key_file) {
            (Some(cert), Some(key)) => Some((read("etcd_cert_file", cert)?, read("etcd_key_file", key)?)),
            _ => None,
        };
        Some(EtcdTls {
            ca_pem,
            client_identity,
            server_name: cluster.etcd_server_name.clone(),
        })
    } else {
        None
    };
    let user = match &cluster.etcd_user {
        Some(name) => {
            let password = match (&cluster.etcd_password, &cluster.etcd_password_file) {
                (Some(password), _) => password.clone(),
                (None, Some(path)) => {
                    let bytes = read("etcd_password_file", path)?;
                    let text = String::from_utf8(bytes).with_context(|| {
                        format!("cluster.etcd_password_file: {} is not UTF-8", path.display())
                    })?;
                    let text = text.strip_suffix('\n').unwrap_or(&text);
                    text.strip_suffix('\r').unwrap_or(text).to_owned()
                }
                (None, None) => anyhow::bail!("cluster.etcd_user needs a password"),
            };
            Some(EtcdUser {
                name: name.clone(),
                password,
            })
        }
        None => None,
    };
    Ok(EtcdOptions {
        tls,
        user,
        ..EtcdOptions::default()
    })
}

/// The blob store every role shares: uploads and the run archive. A cluster has no data folder
/// all its roles reach, so it must be named.
fn shared_blobs(settings: &Settings, role: &str) -> anyhow::Result<Arc<dyn BlobStore>> {
    let Some(url) = &settings.uploads else {
        anyhow::bail!(
            "`agentprocess {role}` needs a blob store every role reaches, for uploads and the run \
             archive: pass --uploads URL (file:///shared/folder, s3://bucket/prefix, ...)"
        );
    };
    blob_store_from_url(url).with_context(|| format!("uploads = {url:?}"))
}

/// How gateways and the scheduler reach actor hosts.
fn routing_options(settings: &Settings) -> anyhow::Result<RoutingOptions> {
    Ok(RoutingOptions {
        shards: settings.cluster.shards,
        patience: Duration::from_millis(settings.cluster.route_patience_ms),
        client: ClientOptions {
            max_message_bytes: grpc_message_bytes(settings),
            tls: role_tls(&settings.cluster)?,
            ..ClientOptions::default()
        },
    })
}

/// This role's TLS between roles, its files read and checked now so a missing or unusable one
/// stops the role at start with its name; `None` when TLS between roles is off.
pub(crate) fn role_tls(cluster: &ClusterSettings) -> anyhow::Result<Option<RoleTls>> {
    let (Some(ca), Some(cert), Some(key)) = (
        &cluster.grpc_ca_file,
        &cluster.grpc_cert_file,
        &cluster.grpc_key_file,
    ) else {
        return Ok(None);
    };
    let read = |setting: &str, path: &Path| {
        std::fs::read(path).with_context(|| format!("cluster.{setting}: cannot read {}", path.display()))
    };
    let tls = RoleTls::new(
        read("grpc_ca_file", ca)?,
        read("grpc_cert_file", cert)?,
        read("grpc_key_file", key)?,
        cluster.grpc_server_name.clone(),
    )
    .with_context(|| {
        format!(
            "cluster.grpc_ca_file {}, grpc_cert_file {}, grpc_key_file {}",
            ca.display(),
            cert.display(),
            key.display()
        )
    })?;
    Ok(Some(tls))
}

/// The largest gRPC message between roles: an upload travels in one, so room for the largest
/// upload and the rest of the call.
fn grpc_message_bytes(settings: &Settings) -> usize {
    usize::try_from(settings.limits.max_upload_bytes)
        .unwrap_or(usize::MAX)
        .saturating_add(4 << 20)
}

/// Waits for Ctrl-C or SIGTERM.
pub(crate) async fn shutdown_signal() {
    crate::serve_cmd::shutdown_signal().await
}

/// This incarnation of a role's process: its host name (`role` without one), process id and
/// random bits, so a restarted process is never taken for the one before it.
fn incarnation_id(role: &str) -> String {
    let name = std::env::var("HOSTNAME")
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| role.to_owned());
    let mut random = [0u8; 4];
    getrandom::fill(&mut random).expect("the operating system's random source works");
    let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
    format!("{name}-{}-{suffix}", std::process::id())
}
