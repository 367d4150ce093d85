//! The server's settings: defaults, then a TOML file, then `AGENTPROCESS_*` variables, then flags.

use crate::telemetry::LogFormat;
use agentprocess_gateway::files::FileUrlConfig;
use agentprocess_gateway::{AuthConfig, DEFAULT_DATA_DIR, DescribeConfig, GatewayConfig};
use agentprocess_run_actor::backlog::BacklogOptions;
use agentprocess_run_actor::machine::{Assignment, Limits, Probability};
use agentprocess_run_actor::{EvaluatorConfig, MirrorLimits};
use agentprocess_scheduler::SchedulerConfig;
use agentprocess_store::{EmbeddedOptions, GroupCommitOptions};
use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `AGENTPROCESS_*` variables that are not settings of the server: those of the operator
/// commands, the settings file's path, and those of the test suite. Any other `AGENTPROCESS_*`
/// variable must name a setting, or the server refuses to start and says which.
const NOT_SETTINGS: [&str; 8] = [
    "URL",
    "TOKEN",
    "CONFIG",
    "SCHEMAS",
    "FIXTURES",
    "OFFICIAL",
    "REQUIRE_OFFICIAL",
    "BLESS",
];

/// Everything `agentprocess serve` can be told. Every field has a default that suits one
/// machine; a TOML file uses the same names (`[limits]`, `[auth]`, `[evaluator]` as tables),
/// and so do environment variables: `AGENTPROCESS_LEASE_SECONDS=300`,
/// `AGENTPROCESS_LIMITS__RUN_DATA_BYTES=262144` (`__` separates a table from its key).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// The address the HTTP server listens on.
    pub listen: SocketAddr,
    /// Where the store, uploads and dev keys live.
    pub data_dir: PathBuf,
    /// The URL clients reach the server at (without `/mcp`); default `http://<listen>`.
    pub public_url: Option<String>,
    /// `leaseSeconds`: how long a claim lasts before it must be renewed.
    pub lease_seconds: u64,
    pub limits: LimitSettings,
    /// A group whose members also get escalated steps, beside every operator (spec §3.3: the
    /// organization's operator queue); none by default.
    pub escalation_group: Option<String>,
    /// Whether operators get escalated steps. `false` makes `escalation_group` (then required)
    /// the only place escalations go.
    pub escalate_to_operators: bool,
    /// How long a `requestId` answers replays, in seconds.
    pub idempotency_retention_seconds: u64,
    /// How long an ended run stays in the store before it moves to the archive, in seconds.
    pub archive_ended_runs_after_seconds: u64,
    /// Where uploaded files go: a URL (`s3://bucket/prefix`, `gs://…`, `az://…`, `file:///…`);
    /// default the `uploads` folder in the data folder.
    pub uploads: Option<String>,
    /// The webhook delivery timeout, in seconds.
    pub webhook_timeout_seconds: u64,
    /// `Host` header values accepted besides the public URL's host and loopback names.
    pub allowed_hosts: Vec<String>,
    pub auth: AuthConfig,
    /// The `check-1` evaluator (an OpenAI-compatible endpoint); `check-1` is offered only when
    /// this is set.
    pub evaluator: Option<EvaluatorConfig>,
    /// Signed file URLs: the key several gateways share, and how long a link lives.
    pub files: FileUrlConfig,
    /// Webhook delivery: attempts before a notification becomes a dead letter, and backoff.
    pub notifications: NotificationSettings,
    pub store: StoreSettings,
    pub testing: TestingSettings,
    /// Dev mode across processes: the signing key file every gateway of a cluster shares (and
    /// `agentprocess token --dev-key` mints with); by default the key in the data folder.
    pub dev_key: Option<PathBuf>,
    /// The cluster roles (`gateway`, `actor`, `scheduler`): where etcd is, how runs are sharded.
    pub cluster: ClusterSettings,
    /// How log lines are written: `text` or `json`.
    pub log_format: LogFormat,
    /// Where Prometheus metrics are served (`GET /metrics`), off the public port; none: no metrics.
    pub metrics_listen: Option<SocketAddr>,
    pub metrics: MetricsSettings,
    /// How many tool calls a gateway takes at once, and how fast from one identity or one
    /// organization; past a limit a call is answered `retry` at once, naming it. None by default.
    pub admission: agentprocess_gateway::admission::AdmissionLimits,
}

/// What the metrics say beyond each crate's instruments.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSettings {
    /// Whether the backlog gauges carry an `organization` label (off by default: one shared
    /// cluster can serve many organizations, each a set of series).
    pub organization_label: bool,
    /// How often the backlog gauges are read off the store's indexes, in seconds.
    pub backlog_sample_seconds: u64,
    /// The most index entries one sample reads per organization and index; past it the sample
    /// says it was cut short (`agentprocess_backlog_truncated`).
    pub backlog_scan_limit: usize,
    /// The most run records one read of the operators' overview takes (the last day's runs, and
    /// older runs with work waiting); past it the overview says its counts are lower bounds.
    pub overview_run_limit: usize,
}

impl Default for MetricsSettings {
    fn default() -> Self {
        MetricsSettings {
            organization_label: false,
            backlog_sample_seconds: 15,
            backlog_scan_limit: 100_000,
            overview_run_limit: 5_000,
        }
    }
}

/// What the roles of a cluster share. `serve` reads none of it.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterSettings {
    /// etcd's client URLs (`http://host:2379`, or `https://host:2379` with TLS); every role
    /// needs at least one.
    pub etcd: Vec<String>,
    /// TLS to etcd: the PEM file of the certificate authority that signed the members'
    /// certificates. Setting it (or any `etcd_*` TLS setting, or an `https://` endpoint) turns
    /// TLS on; with no CA named, the platform's trusted roots are used.
    pub etcd_ca_file: Option<PathBuf>,
    /// TLS to etcd: this process's client certificate (PEM), for members started with
    /// `--client-cert-auth`. Needs `etcd_key_file`.
    pub etcd_cert_file: Option<PathBuf>,
    /// TLS to etcd: the private key (PEM) of `etcd_cert_file`.
    pub etcd_key_file: Option<PathBuf>,
    /// TLS to etcd: the name the members' certificates carry, when it is not the endpoints' host.
    pub etcd_server_name: Option<String>,
    /// The etcd user to authenticate as, on a cluster with authentication enabled.
    pub etcd_user: Option<String>,
    /// The password of `etcd_user` (better given as `AGENTPROCESS_CLUSTER__ETCD_PASSWORD` or
    /// through `etcd_password_file` than written in a settings file).
    pub etcd_password: Option<String>,
    /// A file holding the password of `etcd_user` (a mounted secret); one trailing newline is
    /// ignored.
    pub etcd_password_file: Option<PathBuf>,
    /// TLS between roles: the PEM file of the certificate authority that signs every role's
    /// certificate. With `grpc_cert_file` and `grpc_key_file` it turns mutual TLS on: actor
    /// hosts serve gRPC over TLS (`https://` URLs) and answer only callers whose certificate
    /// this CA signed; gateways and schedulers reach them only if their certificate it signed.
    pub grpc_ca_file: Option<PathBuf>,
    /// TLS between roles: this role's certificate (PEM), shown by an actor host to its callers
    /// and by a gateway or scheduler to actor hosts.
    pub grpc_cert_file: Option<PathBuf>,
    /// TLS between roles: the private key (PEM) of `grpc_cert_file`.
    pub grpc_key_file: Option<PathBuf>,
    /// TLS between roles: the name every actor host's certificate is checked against, when
    /// their certificates do not name the host of their URLs (one certificate for all of them).
    pub grpc_server_name: Option<String>,
    /// Virtual shards runs are spread over: fixed when the cluster is created (changing it
    /// moves runs between shards, so every role of a cluster must agree).
    pub shards: u32,
    /// The TTL of an actor host's etcd lease, in seconds: how long a crashed host's shards wait
    /// before another host takes them.
    pub host_lease_seconds: i64,
    /// The TTL of the scheduler leader's etcd lease, in seconds: how long a crashed leader is
    /// waited for before a standby takes over.
    pub leader_lease_seconds: i64,
    /// How long a gateway or the scheduler keeps looking for a run's owner (shards moving, a
    /// host restarting) before the caller gets `retry`, in milliseconds.
    pub route_patience_ms: u64,
    /// The gRPC URL other roles reach an actor host at; default `http://<listen>`.
    pub advertise_url: Option<String>,
    /// Merged transactions an actor host keeps in flight to etcd at once (group commit): fewer
    /// make bigger batches (fewer etcd requests per write), more make shorter waits.
    pub group_commit_in_flight: usize,
    /// Whether a batch waits to grow while others are in flight (it goes once `2^n` writes wait
    /// with `n` in flight, or one comes back); `false` sends each as soon as one is free.
    pub group_commit_grow: bool,
    /// Calls one actor host works on at once (0: no bound); past it a call is answered `retry`
    /// at once, naming this setting. Timer firings and `get_work` calls waiting for work are not
    /// counted.
    pub max_in_flight_calls_per_host: usize,
    /// etcd requests (reads and writes) one actor host has in flight or queued at once (0: no
    /// bound); past it a call that needs another is answered `retry` at once, naming this
    /// setting, and nothing is sent.
    pub max_in_flight_store_requests: usize,
    /// Most bytes an actor host's copies of the organizations' ready-step and work-item indexes
    /// hold together (kept by etcd watches, so that `get_work` pages are read from memory); 0
    /// reads every page from etcd. An index that does not fit is read from etcd.
    pub index_mirror_max_bytes: usize,
    /// How often the scheduler leader compacts etcd's history (to the revision of one period
    /// before) and looks at its members' sizes, in seconds.
    pub etcd_upkeep_seconds: u64,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        ClusterSettings {
            etcd: Vec::new(),
            etcd_ca_file: None,
            etcd_cert_file: None,
            etcd_key_file: None,
            etcd_server_name: None,
            etcd_user: None,
            etcd_password: None,
            etcd_password_file: None,
            grpc_ca_file: None,
            grpc_cert_file: None,
            grpc_key_file: None,
            grpc_server_name: None,
            shards: agentprocess_cluster::DEFAULT_SHARDS,
            host_lease_seconds: 5,
            leader_lease_seconds: 5,
            route_patience_ms: 15_000,
            advertise_url: None,
            etcd_upkeep_seconds: 300,
            group_commit_in_flight: GroupCommitOptions::default().max_in_flight,
            group_commit_grow: GroupCommitOptions::default().grow,
            max_in_flight_calls_per_host: 0,
            max_in_flight_store_requests: 0,
            index_mirror_max_bytes: MirrorLimits::default().max_bytes,
        }
    }
}

impl Settings {
    /// How the backlog gauges are sampled.
    pub fn backlog(&self) -> BacklogOptions {
        BacklogOptions {
            every: Duration::from_secs(self.metrics.backlog_sample_seconds),
            scan_limit: self.metrics.backlog_scan_limit,
            organization_label: self.metrics.organization_label,
        }
    }
}

impl ClusterSettings {
    /// Whether the roles reach etcd over TLS: any TLS setting, or an `https://` endpoint.
    pub fn etcd_tls(&self) -> bool {
        self.etcd_ca_file.is_some()
            || self.etcd_cert_file.is_some()
            || self.etcd_key_file.is_some()
            || self.etcd_server_name.is_some()
            || self
                .etcd
                .iter()
                .any(|endpoint| endpoint.trim().starts_with("https://"))
    }

    /// Whether the roles talk to each other over mutual TLS.
    pub fn grpc_tls(&self) -> bool {
        self.grpc_ca_file.is_some()
    }

    fn grpc_security_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let files = [
            ("grpc_ca_file", self.grpc_ca_file.is_some()),
            ("grpc_cert_file", self.grpc_cert_file.is_some()),
            ("grpc_key_file", self.grpc_key_file.is_some()),
        ];
        if files.iter().any(|(_, set)| *set) {
            for (name, set) in files {
                if !set {
                    problems.push(format!(
                        "TLS between roles needs cluster.grpc_ca_file, grpc_cert_file and \
                         grpc_key_file together: cluster.{name} is missing"
                    ));
                }
            }
        } else if self.grpc_server_name.is_some() {
            problems.push(
                "cluster.grpc_server_name is set but TLS between roles is not (cluster.grpc_ca_file, \
                 grpc_cert_file, grpc_key_file)"
                    .to_owned(),
            );
        }
        if let Some(url) = &self.advertise_url {
            let wanted = if self.grpc_tls() { "https://" } else { "http://" };
            if !url.trim().starts_with(wanted) {
                problems.push(format!(
                    "cluster.advertise_url {url:?} must start with {wanted}: TLS between roles is {}",
                    if self.grpc_tls() { "on" } else { "off" }
                ));
            }
        }
        problems
    }

    fn etcd_security_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        match (&self.etcd_cert_file, &self.etcd_key_file) {
            (Some(_), None) => problems.push("cluster.etcd_cert_file needs cluster.etcd_key_file".to_owned()),
            (None, Some(_)) => problems.push("cluster.etcd_key_file needs cluster.etcd_cert_file".to_owned()),
            _ => {}
        }
        let password = self.etcd_password.is_some() || self.etcd_password_file.is_some();
        if self.etcd_password.is_some() && self.etcd_password_file.is_some() {
            problems.push(
                "cluster.etcd_password and cluster.etcd_password_file are both set; give one".to_owned(),
            );
        }
        match (&self.etcd_user, password) {
            (Some(user), _) if user.trim().is_empty() => {
                problems.push("cluster.etcd_user must not be empty".to_owned());
            }
            (Some(_), false) => problems.push(
                "cluster.etcd_user needs cluster.etcd_password or cluster.etcd_password_file".to_owned(),
            ),
            (None, true) => problems.push("an etcd password is set but cluster.etcd_user is not".to_owned()),
            _ => {}
        }
        problems
    }
}

/// The embedded store.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreSettings {
    /// Most memory the embedded store's page cache takes. The keys live on disk; this bounds
    /// how much of them stays in memory, whatever their number.
    pub cache_bytes: u64,
    /// Checkpoint the store's file and start a new journal once the journal outgrows this. A
    /// longer journal means fewer synced checkpoints and a longer replay at start after a crash.
    #[serde(alias = "compact_after_bytes")]
    pub checkpoint_after_bytes: u64,
}

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            cache_bytes: EmbeddedOptions::default().cache_bytes as u64,
            checkpoint_after_bytes: EmbeddedOptions::default().checkpoint_after_bytes,
        }
    }
}

/// How notifications are retried: the wait starts at `first_backoff_ms` and doubles after each
/// failed attempt, up to `max_backoff_ms`; after `max_attempts` the notification becomes a dead
/// letter (`GET /admin/v1/dead-letters`). Looks at the outbox are at least `gather_ms` apart.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NotificationSettings {
    pub max_attempts: u32,
    pub first_backoff_ms: u64,
    pub max_backoff_ms: u64,
    pub gather_ms: u64,
}

impl Default for NotificationSettings {
    fn default() -> Self {
        // Not `SchedulerConfig::default()`: settings load before telemetry starts, and that
        // would bind the scheduler's instruments to no meter provider.
        NotificationSettings {
            max_attempts: agentprocess_scheduler::DEFAULT_MAX_ATTEMPTS,
            first_backoff_ms: u64::try_from(agentprocess_scheduler::DEFAULT_FIRST_BACKOFF.as_millis())
                .unwrap_or(u64::MAX),
            max_backoff_ms: u64::try_from(agentprocess_scheduler::DEFAULT_MAX_BACKOFF.as_millis())
                .unwrap_or(u64::MAX),
            gather_ms: u64::try_from(agentprocess_scheduler::DEFAULT_OUTBOX_GATHER.as_millis())
                .unwrap_or(u64::MAX),
        }
    }
}

/// The longest `notifications.gather_ms` accepted.
const MAX_NOTIFICATION_GATHER_MS: u64 = 10_000;

/// The limits `describe` reports and the runtime enforces: one section, so the two never differ.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitSettings {
    pub run_data_bytes: u64,
    pub max_upload_bytes: u64,
    pub check_pass: f64,
    pub check_fail: Option<f64>,
    pub check_confidence: f64,
    pub check_state_bytes: u64,
    /// How many history events (the operator's audit trail) a run keeps; past it the oldest
    /// are dropped and counted.
    pub history_events_per_run: u64,
}

/// Switches for test environments only. Never turn them on in production.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TestingSettings {
    /// Lets operators move the server's clock forward (`POST /admin/v1/clock`), so tests can
    /// reach due dates, waits and lease expiry without waiting.
    pub clock_control: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            public_url: None,
            lease_seconds: Limits::DEFAULT_LEASE_SECONDS,
            limits: LimitSettings::default(),
            escalation_group: None,
            escalate_to_operators: true,
            idempotency_retention_seconds: 7 * 24 * 3600,
            archive_ended_runs_after_seconds: 3 * 24 * 3600,
            uploads: None,
            webhook_timeout_seconds: 10,
            allowed_hosts: Vec::new(),
            auth: AuthConfig::default(),
            evaluator: None,
            files: FileUrlConfig::default(),
            notifications: NotificationSettings::default(),
            store: StoreSettings::default(),
            testing: TestingSettings::default(),
            dev_key: None,
            cluster: ClusterSettings::default(),
            log_format: LogFormat::default(),
            metrics_listen: None,
            metrics: MetricsSettings::default(),
            admission: Default::default(),
        }
    }
}

impl Default for LimitSettings {
    fn default() -> Self {
        let limits = Limits::default();
        LimitSettings {
            run_data_bytes: limits.run_data_bytes as u64,
            max_upload_bytes: 10 << 20,
            check_pass: limits.check_pass.get(),
            check_fail: limits.check_fail.map(Probability::get),
            check_confidence: limits.check_confidence.get(),
            check_state_bytes: limits.check_state_bytes as u64,
            history_events_per_run: limits.history_events as u64,
        }
    }
}

/// Flags given on the command line: each one overrides every other source.
#[derive(Debug, Default, Serialize)]
pub struct FlagSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uploads: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dev_key: Option<PathBuf>,
    #[serde(skip_serializing_if = "ClusterFlags::is_empty")]
    pub cluster: ClusterFlags,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_format: Option<LogFormat>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_listen: Option<SocketAddr>,
}

/// The `[cluster]` settings a role's flags set.
#[derive(Debug, Default, Serialize)]
pub struct ClusterFlags {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etcd: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advertise_url: Option<String>,
}

impl ClusterFlags {
    fn is_empty(&self) -> bool {
        self.etcd.is_none() && self.advertise_url.is_none()
    }
}

/// Settings that cannot be used, with the reason.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SettingsError(String);

impl Settings {
    /// Reads the settings: defaults, the TOML file (if given), `AGENTPROCESS_*`, then `flags`.
    pub fn load(file: Option<&Path>, flags: FlagSettings) -> Result<Settings, SettingsError> {
        let mut figment = Figment::new();
        if let Some(file) = file {
            if !file.is_file() {
                return Err(SettingsError(format!(
                    "the settings file {} does not exist",
                    file.display()
                )));
            }
            figment = figment.merge(Toml::file_exact(file));
        }
        let settings: Settings = figment
            .merge(Env::prefixed("AGENTPROCESS_").split("__").filter(|key| {
                !NOT_SETTINGS
                    .iter()
                    .any(|name| key.as_str().eq_ignore_ascii_case(name))
            }))
            .merge(Serialized::defaults(flags))
            .extract()
            .map_err(|e| SettingsError(e.to_string()))?;
        settings.check()?;
        Ok(settings)
    }

    fn check(&self) -> Result<(), SettingsError> {
        let limits = &self.limits;
        let mut problems = Vec::new();
        if self.lease_seconds == 0 {
            problems.push("lease_seconds must be at least 1".to_owned());
        }
        if limits.run_data_bytes < 1024 {
            problems.push("limits.run_data_bytes must be at least 1024".to_owned());
        }
        if limits.run_data_bytes > 1_400_000 {
            problems.push(
                "limits.run_data_bytes must stay under 1,400,000 (the store's request limit)".to_owned(),
            );
        }
        if limits.max_upload_bytes == 0 {
            problems.push("limits.max_upload_bytes must be at least 1".to_owned());
        }
        problems.extend(self.admission.problems());
        if limits.history_events_per_run == 0 {
            problems.push("limits.history_events_per_run must be at least 1".to_owned());
        }
        for (name, value) in [
            ("check_pass", Some(limits.check_pass)),
            ("check_fail", limits.check_fail),
            ("check_confidence", Some(limits.check_confidence)),
        ] {
            if let Some(value) = value
                && Probability::new(value).is_none()
            {
                problems.push(format!("limits.{name} must be a number from 0 to 1"));
            }
        }
        if let Some(fail) = limits.check_fail
            && fail > limits.check_pass
        {
            problems.push("limits.check_fail must not be above limits.check_pass".to_owned());
        }
        match &self.escalation_group {
            Some(group) if group.trim().is_empty() => {
                problems.push("escalation_group must not be empty".to_owned());
            }
            None if !self.escalate_to_operators => problems.push(
                "escalate_to_operators = false needs an escalation_group to send escalations to".to_owned(),
            ),
            _ => {}
        }
        if self.metrics.backlog_sample_seconds == 0 {
            problems.push("metrics.backlog_sample_seconds must be at least 1".to_owned());
        }
        if self.metrics.backlog_scan_limit == 0 {
            problems.push("metrics.backlog_scan_limit must be at least 1".to_owned());
        }
        if self.metrics.overview_run_limit == 0 {
            problems.push("metrics.overview_run_limit must be at least 1".to_owned());
        }
        if self.store.cache_bytes < 1 << 20 {
            problems.push("store.cache_bytes must be at least 1048576".to_owned());
        }
        if usize::try_from(self.store.cache_bytes).is_err() {
            problems.push("store.cache_bytes does not fit this machine's address space".to_owned());
        }
        if self.store.checkpoint_after_bytes < 1 << 20 {
            problems.push("store.checkpoint_after_bytes must be at least 1048576".to_owned());
        }
        let cluster = &self.cluster;
        if cluster.shards == 0 || cluster.shards > 65_536 {
            problems.push("cluster.shards must be from 1 to 65536".to_owned());
        }
        if cluster.host_lease_seconds < 2 {
            problems.push("cluster.host_lease_seconds must be at least 2".to_owned());
        }
        if cluster.leader_lease_seconds < 2 {
            problems.push("cluster.leader_lease_seconds must be at least 2".to_owned());
        }
        if cluster.group_commit_in_flight == 0 {
            problems.push("cluster.group_commit_in_flight must be at least 1".to_owned());
        }
        if cluster.etcd_upkeep_seconds == 0 {
            problems.push("cluster.etcd_upkeep_seconds must be at least 1".to_owned());
        }
        if cluster.route_patience_ms == 0 {
            problems.push("cluster.route_patience_ms must be at least 1".to_owned());
        }
        problems.extend(cluster.etcd_security_problems());
        problems.extend(cluster.grpc_security_problems());
        let notifications = &self.notifications;
        if notifications.max_attempts == 0 {
            problems.push("notifications.max_attempts must be at least 1".to_owned());
        }
        if notifications.first_backoff_ms == 0 {
            problems.push("notifications.first_backoff_ms must be at least 1".to_owned());
        }
        if notifications.max_backoff_ms < notifications.first_backoff_ms {
            problems.push(
                "notifications.max_backoff_ms must not be below notifications.first_backoff_ms".to_owned(),
            );
        }
        if notifications.gather_ms > MAX_NOTIFICATION_GATHER_MS {
            problems.push(format!(
                "notifications.gather_ms must be at most {MAX_NOTIFICATION_GATHER_MS} (a notification waits that long at most)"
            ));
        }
        if let Some(evaluator) = &self.evaluator {
            problems.extend(
                evaluator
                    .problems()
                    .into_iter()
                    .map(|p| format!("evaluator: {p}")),
            );
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(SettingsError(problems.join("; ")))
        }
    }

    /// The URL clients reach the server at.
    pub fn public_url(&self) -> String {
        match &self.public_url {
            Some(url) => url.clone(),
            None => format!("http://{}", self.listen),
        }
    }

    /// Who escalated steps wait on.
    pub fn escalate_to(&self) -> Assignment {
        match (&self.escalation_group, self.escalate_to_operators) {
            (Some(group), false) => Assignment::Group(group.clone()),
            (also, _) => Assignment::Operators { also: also.clone() },
        }
    }

    /// The limits the runtime enforces.
    pub fn limits(&self) -> Limits {
        let probability = |value: f64| Probability::new(value).expect("checked when loaded");
        Limits {
            run_data_bytes: usize::try_from(self.limits.run_data_bytes).unwrap_or(usize::MAX),
            lease_seconds: self.lease_seconds,
            check_pass: probability(self.limits.check_pass),
            check_fail: self.limits.check_fail.map(probability),
            check_confidence: probability(self.limits.check_confidence),
            check_state_bytes: usize::try_from(self.limits.check_state_bytes).unwrap_or(usize::MAX),
            history_events: usize::try_from(self.limits.history_events_per_run).unwrap_or(usize::MAX),
        }
    }

    /// What `describe` reports: the same numbers the runtime enforces.
    pub fn describe(&self) -> DescribeConfig {
        DescribeConfig {
            lease_seconds: self.lease_seconds,
            run_data_bytes: self.limits.run_data_bytes,
            max_upload_bytes: self.limits.max_upload_bytes,
            parallel: true,
            evaluator_configured: self.evaluator.is_some(),
            check_pass: self.limits.check_pass,
            check_fail: self.limits.check_fail,
            check_confidence: self.limits.check_confidence,
            check_state_bytes: self.limits.check_state_bytes,
        }
    }

    pub fn gateway(&self) -> GatewayConfig {
        GatewayConfig {
            public_url: self.public_url(),
            data_dir: self.data_dir.clone(),
            dev_key: self.dev_key.clone(),
            auth: self.auth.clone(),
            describe: self.describe(),
            max_request_bytes: None,
            allowed_hosts: self.allowed_hosts.clone(),
            admission: self.admission.clone(),
        }
    }

    pub fn idempotency_retention(&self) -> Duration {
        Duration::from_secs(self.idempotency_retention_seconds)
    }

    pub fn archive_ended_runs_after(&self) -> Duration {
        Duration::from_secs(self.archive_ended_runs_after_seconds)
    }

    /// The scheduler's settings: its defaults with the delivery retries of `[notifications]`.
    pub fn scheduler(&self) -> SchedulerConfig {
        SchedulerConfig {
            max_attempts: self.notifications.max_attempts,
            first_backoff: Duration::from_millis(self.notifications.first_backoff_ms),
            max_backoff: Duration::from_millis(self.notifications.max_backoff_ms),
            outbox_gather: Duration::from_millis(self.notifications.gather_ms),
            ..SchedulerConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }

    #[test]
    fn describe_reports_the_limits_the_runtime_enforces() {
        let settings = Settings::load(None, FlagSettings::default()).unwrap();
        let limits = settings.limits();
        let describe = settings.describe().result();
        assert_eq!(describe["limits"], limits.to_json());
        assert_eq!(describe["leaseSeconds"], limits.lease_seconds);
        assert_eq!(
            describe["profiles"],
            serde_json::json!(["parallel-1", "x-wait-1"])
        );
    }

    #[test]
    fn flags_win_over_the_file_and_the_file_over_the_defaults() {
        let settings_file = file("lease_seconds = 120\n[limits]\nrun_data_bytes = 4096\ncheck_fail = 0.4\n");
        let from_file = Settings::load(Some(settings_file.path()), FlagSettings::default()).unwrap();
        assert_eq!(from_file.lease_seconds, 120);
        assert_eq!(from_file.limits.run_data_bytes, 4096);
        assert_eq!(from_file.limits().check_fail.map(Probability::get), Some(0.4));
        assert_eq!(from_file.limits.check_pass, 0.9, "unset keys keep their defaults");
        let flags = FlagSettings {
            lease_seconds: Some(90),
            listen: Some("127.0.0.1:9999".parse().unwrap()),
            ..FlagSettings::default()
        };
        let flagged = Settings::load(Some(settings_file.path()), flags).unwrap();
        assert_eq!(flagged.lease_seconds, 90);
        assert_eq!(flagged.public_url(), "http://127.0.0.1:9999");
        assert_eq!(flagged.limits.run_data_bytes, 4096);
    }

    #[test]
    fn unknown_and_unusable_settings_are_refused_with_their_names() {
        let unknown = file("lease_secs = 5\n");
        let error = Settings::load(Some(unknown.path()), FlagSettings::default()).unwrap_err();
        assert!(error.to_string().contains("lease_secs"), "{error}");
        let wrong_type = file("lease_seconds = \"soon\"\n");
        let error = Settings::load(Some(wrong_type.path()), FlagSettings::default()).unwrap_err();
        assert!(error.to_string().contains("lease_seconds"), "{error}");
        let unusable = file("lease_seconds = 0\n[limits]\ncheck_pass = 1.5\ncheck_fail = -0.1\n");
        let error = Settings::load(Some(unusable.path()), FlagSettings::default()).unwrap_err();
        for expected in ["lease_seconds", "limits.check_pass", "limits.check_fail"] {
            assert!(error.to_string().contains(expected), "{expected} in {error}");
        }
        let missing = Settings::load(
            Some(Path::new("/nonexistent/agentprocess.toml")),
            FlagSettings::default(),
        );
        assert!(missing.unwrap_err().to_string().contains("does not exist"));
    }

    #[test]
    fn etcd_tls_and_user_settings_are_checked_together() {
        let incomplete = file(
            "[cluster]\netcd = [\"https://etcd:2379\"]\netcd_cert_file = \"client.pem\"\n\
             etcd_user = \"agentprocess\"\n",
        );
        let error = Settings::load(Some(incomplete.path()), FlagSettings::default()).unwrap_err();
        for expected in ["cluster.etcd_key_file", "cluster.etcd_password"] {
            assert!(error.to_string().contains(expected), "{expected} in {error}");
        }
        let both = file("[cluster]\netcd_user = \"a\"\netcd_password = \"p\"\netcd_password_file = \"f\"\n");
        let error = Settings::load(Some(both.path()), FlagSettings::default()).unwrap_err();
        assert!(error.to_string().contains("both set"), "{error}");
        let no_user = file("[cluster]\netcd_password = \"p\"\n");
        let error = Settings::load(Some(no_user.path()), FlagSettings::default()).unwrap_err();
        assert!(error.to_string().contains("cluster.etcd_user is not"), "{error}");

        let plain = Settings::load(None, FlagSettings::default()).unwrap();
        assert!(!plain.cluster.etcd_tls());
        let https_only = file("[cluster]\netcd = [\"https://etcd:2379\"]\n");
        let https_only = Settings::load(Some(https_only.path()), FlagSettings::default()).unwrap();
        assert!(
            https_only.cluster.etcd_tls(),
            "an https endpoint turns TLS on, with the platform's roots"
        );
    }

    #[test]
    fn tls_between_roles_is_all_three_files_or_none_and_the_advertised_url_agrees() {
        let half = file("[cluster]\ngrpc_cert_file = \"host.pem\"\ngrpc_server_name = \"actor\"\n");
        let error = Settings::load(Some(half.path()), FlagSettings::default()).unwrap_err();
        for expected in [
            "cluster.grpc_ca_file is missing",
            "cluster.grpc_key_file is missing",
        ] {
            assert!(error.to_string().contains(expected), "{expected} in {error}");
        }
        let name_only = file("[cluster]\ngrpc_server_name = \"actor\"\n");
        let error = Settings::load(Some(name_only.path()), FlagSettings::default()).unwrap_err();
        assert!(error.to_string().contains("grpc_server_name is set"), "{error}");
        let plain_url = file(
            "[cluster]\ngrpc_ca_file = \"ca.pem\"\ngrpc_cert_file = \"host.pem\"\n\
             grpc_key_file = \"host-key.pem\"\nadvertise_url = \"http://actor-0:7070\"\n",
        );
        let error = Settings::load(Some(plain_url.path()), FlagSettings::default()).unwrap_err();
        assert!(error.to_string().contains("must start with https://"), "{error}");
        let https_without = file("[cluster]\nadvertise_url = \"https://actor-0:7070\"\n");
        let error = Settings::load(Some(https_without.path()), FlagSettings::default()).unwrap_err();
        assert!(error.to_string().contains("must start with http://"), "{error}");

        let whole = file(
            "[cluster]\ngrpc_ca_file = \"ca.pem\"\ngrpc_cert_file = \"host.pem\"\n\
             grpc_key_file = \"host-key.pem\"\nadvertise_url = \"https://actor-0:7070\"\n",
        );
        let whole = Settings::load(Some(whole.path()), FlagSettings::default()).unwrap();
        assert!(whole.cluster.grpc_tls());
        assert!(
            !Settings::load(None, FlagSettings::default())
                .unwrap()
                .cluster
                .grpc_tls()
        );
    }

    #[test]
    fn the_kubernetes_settings_file_loads_as_every_role_loads_it() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/settings.toml");
        let settings = Settings::load(Some(&path), FlagSettings::default()).unwrap();
        assert_eq!(settings.cluster.etcd.len(), 3);
        assert!(
            settings.auth.provider.is_some(),
            "a shared cluster does not run in dev mode"
        );
        assert!(settings.uploads.is_some(), "every role reaches one blob store");
    }

    #[test]
    fn notification_retries_reach_the_scheduler_and_are_checked() {
        let defaults = Settings::load(None, FlagSettings::default()).unwrap().scheduler();
        assert_eq!(defaults.max_attempts, SchedulerConfig::default().max_attempts);
        assert_eq!(defaults.first_backoff, SchedulerConfig::default().first_backoff);
        assert_eq!(defaults.outbox_gather, SchedulerConfig::default().outbox_gather);
        let quick = file("[notifications]\nmax_attempts = 3\nfirst_backoff_ms = 50\ngather_ms = 0\n");
        let scheduler = Settings::load(Some(quick.path()), FlagSettings::default())
            .unwrap()
            .scheduler();
        assert_eq!(scheduler.max_attempts, 3);
        assert_eq!(scheduler.first_backoff, Duration::from_millis(50));
        assert_eq!(scheduler.max_backoff, SchedulerConfig::default().max_backoff);
        assert_eq!(scheduler.outbox_gather, Duration::ZERO);
        let unusable = file(
            "[notifications]\nmax_attempts = 0\nfirst_backoff_ms = 0\nmax_backoff_ms = 0\ngather_ms = 60000\n",
        );
        let error = Settings::load(Some(unusable.path()), FlagSettings::default()).unwrap_err();
        for expected in [
            "notifications.max_attempts",
            "notifications.first_backoff_ms",
            "notifications.gather_ms",
        ] {
            assert!(error.to_string().contains(expected), "{expected} in {error}");
        }
        let inverted = file("[notifications]\nfirst_backoff_ms = 5000\nmax_backoff_ms = 10\n");
        let error = Settings::load(Some(inverted.path()), FlagSettings::default()).unwrap_err();
        assert!(
            error.to_string().contains("notifications.max_backoff_ms"),
            "{error}"
        );
    }

    #[test]
    fn an_evaluator_offers_check_and_is_checked() {
        let with = file("[evaluator]\nurl = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n");
        let settings = Settings::load(Some(with.path()), FlagSettings::default()).unwrap();
        assert_eq!(
            settings.describe().result()["profiles"],
            serde_json::json!(["parallel-1", "check-1", "x-wait-1"])
        );
        let bad = file("[evaluator]\nurl = \"not a url\"\nmodel = \"\"\n");
        assert!(Settings::load(Some(bad.path()), FlagSettings::default()).is_err());
    }

    #[test]
    fn the_history_bound_reaches_the_runtime_and_is_checked() {
        let defaults = Settings::load(None, FlagSettings::default()).unwrap().limits();
        assert_eq!(defaults.history_events, Limits::DEFAULT_HISTORY_EVENTS);
        let small = file("[limits]\nhistory_events_per_run = 50\n");
        let limits = Settings::load(Some(small.path()), FlagSettings::default())
            .unwrap()
            .limits();
        assert_eq!(limits.history_events, 50);
        let none = file("[limits]\nhistory_events_per_run = 0\n");
        let error = Settings::load(Some(none.path()), FlagSettings::default()).unwrap_err();
        assert!(
            error.to_string().contains("limits.history_events_per_run"),
            "{error}"
        );
    }
}
