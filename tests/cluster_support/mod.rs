//! A whole cluster on loopback for the cross-process tests: a real 3-member etcd and the built
//! binary's roles (actor hosts, schedulers, gateways) as child processes, dev tokens every
//! gateway accepts, and MCP clients through any gateway. Every process is killed on drop.
#![allow(dead_code)]

use crate::common::{Deployment, Mcp, ORG, Who, advance_clock, publish_example_with, run_import};
use agentprocess_gateway::auth::dev::DevKey;
use agentprocess_run_actor::machine::Timestamp;
use agentprocess_store::keys::Keys;
use agentprocess_store::{EtcdOptions, EtcdStore, RangeRequest, Store};
use agentprocess_testkit::{EtcdCluster, free_loopback_ports};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The shards every test cluster has (the default).
pub const SHARDS: usize = 256;
/// The actor hosts' and the scheduler leader's lease TTL in the test clusters, in seconds.
pub const LEASE_TTL_SECONDS: u64 = 3;

/// The clusters of one test binary start one after the other.
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A role of the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Actor,
    Scheduler,
    Gateway,
}

impl Role {
    fn command(self) -> &'static str {
        match self {
            Role::Actor => "actor",
            Role::Scheduler => "scheduler",
            Role::Gateway => "gateway",
        }
    }
}

/// How many of each role.
#[derive(Debug, Clone)]
pub struct Shape {
    pub actors: usize,
    pub schedulers: usize,
    pub gateways: usize,
    /// Settings for every role, as environment variables (`AGENTPROCESS_LEASE_SECONDS`, ...).
    pub env: Vec<(String, String)>,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            actors: 3,
            schedulers: 2,
            gateways: 2,
            env: Vec::new(),
        }
    }
}

/// One process of a role: how to start it again, and the child while it runs.
struct Process {
    role: Role,
    index: usize,
    args: Vec<String>,
    child: Option<Child>,
    log: PathBuf,
    starts: usize,
}

/// A running cluster. Dropping it kills every process (etcd members included).
pub struct Cluster {
    /// This test binary's turn: one cluster at a time (each is a dozen processes on a small
    /// machine). Held until the cluster is dropped.
    _turn: tokio::sync::MutexGuard<'static, ()>,
    pub etcd: EtcdCluster,
    /// A client of the cluster's etcd, for looking at what the roles wrote.
    pub store: EtcdStore,
    dir: tempfile::TempDir,
    /// The URL every gateway names as the cluster's (gateway 0's): tokens are for it, file
    /// links point at it.
    pub public_url: String,
    gateway_urls: Vec<String>,
    processes: Vec<Process>,
    env: Vec<(String, String)>,
}

impl Cluster {
    /// Starts etcd, then the actor hosts, the schedulers and the gateways, and waits until every
    /// shard is held by a live host, a scheduler leads and every gateway is ready.
    pub async fn start(shape: Shape) -> Cluster {
        let turn = ONE_CLUSTER_AT_A_TIME.lock().await;
        let etcd = EtcdCluster::start(3);
        let store = EtcdStore::connect(&etcd.client_urls(), EtcdOptions::default())
            .await
            .expect("etcd answers");
        let dir = tempfile::Builder::new()
            .prefix("agentprocess-cluster-")
            .tempdir()
            .unwrap();
        std::fs::create_dir_all(dir.path().join("blobs")).unwrap();
        let ports = free_loopback_ports(shape.actors + shape.gateways);
        let gateway_urls: Vec<String> = ports[shape.actors..]
            .iter()
            .map(|port| format!("http://127.0.0.1:{port}"))
            .collect();
        let public_url = gateway_urls.first().cloned().unwrap_or_default();
        let mut env = vec![
            (
                "AGENTPROCESS_CLUSTER__HOST_LEASE_SECONDS".to_owned(),
                LEASE_TTL_SECONDS.to_string(),
            ),
            (
                "AGENTPROCESS_CLUSTER__LEADER_LEASE_SECONDS".to_owned(),
                LEASE_TTL_SECONDS.to_string(),
            ),
        ];
        env.extend(shape.env.iter().cloned());
        let mut cluster = Cluster {
            _turn: turn,
            etcd,
            store,
            dir,
            public_url,
            gateway_urls,
            processes: Vec::new(),
            env,
        };
        let uploads = format!("file://{}", cluster.dir.path().join("blobs").display());
        let etcd_urls = cluster.etcd.endpoint_list();
        let common = |role: Role| -> Vec<String> {
            let mut args = vec![role.command().to_owned(), "--etcd".to_owned(), etcd_urls.clone()];
            if role != Role::Scheduler {
                args.extend(["--uploads".to_owned(), uploads.clone()]);
            }
            args
        };
        for (i, port) in ports[..shape.actors].iter().enumerate() {
            let mut args = common(Role::Actor);
            args.extend(["--listen".to_owned(), format!("127.0.0.1:{port}")]);
            cluster.add(Role::Actor, i, args);
        }
        for i in 0..shape.schedulers {
            cluster.add(Role::Scheduler, i, common(Role::Scheduler));
        }
        let dev_key = cluster.dev_key_path();
        for i in 0..shape.gateways {
            let mut args = common(Role::Gateway);
            args.extend([
                "--listen".to_owned(),
                cluster.gateway_urls[i].trim_start_matches("http://").to_owned(),
                "--public-url".to_owned(),
                cluster.public_url.clone(),
                "--dev-key".to_owned(),
                dev_key.display().to_string(),
            ]);
            cluster.add(Role::Gateway, i, args);
        }
        cluster.wait_settled(shape.actors).await;
        cluster
    }

    fn add(&mut self, role: Role, index: usize, args: Vec<String>) {
        let log = self.dir.path().join(format!("{}-{index}.log", role.command()));
        let mut process = Process {
            role,
            index,
            args,
            child: None,
            log,
            starts: 0,
        };
        self.spawn(&mut process);
        self.processes.push(process);
    }

    fn spawn(&self, process: &mut Process) {
        process.starts += 1;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&process.log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_agentprocess"))
            .args(&process.args)
            .current_dir(self.dir.path())
            .env("RUST_LOG", "info,rmcp=warn")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("the agentprocess binary starts");
        process.child = Some(child);
    }

    fn process_mut(&mut self, role: Role, index: usize) -> &mut Process {
        self.processes
            .iter_mut()
            .find(|p| p.role == role && p.index == index)
            .unwrap_or_else(|| panic!("no {role:?} {index}"))
    }

    /// The dev key file every gateway shares.
    pub fn dev_key_path(&self) -> PathBuf {
        self.dir.path().join("dev-signing-key")
    }

    /// The folder uploads and the run archive go to.
    pub fn blobs_dir(&self) -> PathBuf {
        self.dir.path().join("blobs")
    }

    pub fn gateway_url(&self, gateway: usize) -> &str {
        &self.gateway_urls[gateway]
    }

    pub fn mcp_url(&self, gateway: usize) -> String {
        format!("{}/mcp", self.gateway_urls[gateway])
    }

    /// A dev token of `organization` for `who`, accepted by every gateway.
    pub fn token_in(&self, organization: &str, who: &Who) -> String {
        DevKey::load_or_create_file(&self.dev_key_path())
            .unwrap()
            .mint(&self.public_url, &who.token_request(organization))
    }

    /// An MCP client of `ORG` through `gateway`.
    pub async fn client(&self, gateway: usize, who: &Who) -> Mcp {
        self.client_in(gateway, ORG, who).await
    }

    pub async fn client_in(&self, gateway: usize, organization: &str, who: &Who) -> Mcp {
        Mcp::connect(&self.mcp_url(gateway), &self.token_in(organization, who)).await
    }

    /// Imports the text at `path` through `gateway` as an operator of `organization`, binds
    /// `bindings` and publishes when asked; returns (exit code, stdout, stderr).
    pub fn import_in(
        &self,
        gateway: usize,
        organization: &str,
        path: &Path,
        bindings: &[(&str, &str)],
        publish: bool,
    ) -> (i32, String, String) {
        let token = self.token_in(organization, &Who::Operator("ops@acme.test", &["ops"]));
        run_import(self.gateway_url(gateway), &token, path, bindings, publish)
    }

    /// Imports the text at `path` through gateway 0 as an operator of `organization`, binds
    /// `bindings` and publishes; panics when that fails.
    pub fn publish_in(&self, organization: &str, path: &Path, bindings: &[(&str, &str)]) {
        let (code, out, err) = self.import_in(0, organization, path, bindings, true);
        assert_eq!(code, 0, "import of {} failed:\n{out}\n{err}", path.display());
    }

    /// Publishes our example process `name` (`examples/NAME`) in `organization`, each role bound to the group
    /// of the same name.
    pub fn publish_example_in(&self, organization: &str, name: &str) {
        publish_example_with(name, |path, bindings| {
            self.import_in(0, organization, path, bindings, true)
        })
    }

    /// Moves the cluster's clock forward through `gateway` as an operator of `organization`;
    /// returns the gateway's time after every role applied the move.
    pub async fn advance(&self, gateway: usize, organization: &str, seconds: u64) -> Timestamp {
        let token = self.token_in(organization, &Who::Operator("ops@acme.test", &["ops"]));
        advance_clock(self.gateway_url(gateway), &token, seconds).await
    }

    pub fn gateways(&self) -> usize {
        self.gateway_urls.len()
    }

    /// `kill -9` the process; it stays down until [`Cluster::restart`].
    pub fn kill9(&mut self, role: Role, index: usize) {
        let process = self.process_mut(role, index);
        if let Some(mut child) = process.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait for the process to end (an actor host hands its shards over first).
    pub fn terminate(&mut self, role: Role, index: usize) {
        let process = self.process_mut(role, index);
        if let Some(mut child) = process.child.take() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            let _ = child.wait();
        }
    }

    /// Sends `signal` (`STOP`, `CONT`) to the running process.
    pub fn signal(&mut self, role: Role, index: usize, signal: &str) {
        let process = self.process_mut(role, index);
        let pid = process.child.as_ref().expect("running").id();
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} {pid}");
    }

    /// Starts the process again with the same arguments (after a kill or a termination).
    pub fn restart(&mut self, role: Role, index: usize) {
        let position = self
            .processes
            .iter()
            .position(|p| p.role == role && p.index == index)
            .unwrap();
        let mut process = self.processes.remove(position);
        assert!(process.child.is_none(), "{role:?} {index} is still running");
        // A listener's port may take a moment to be free again.
        std::thread::sleep(Duration::from_millis(200));
        self.spawn(&mut process);
        self.processes.insert(position, process);
    }

    /// The live actor hosts (their host keys) and how many shards have a holder.
    pub async fn shard_view(&self) -> (usize, usize) {
        let keys = Keys::new("default");
        let hosts = self
            .store
            .range(RangeRequest::new(keys.hosts()))
            .await
            .unwrap()
            .kvs
            .len();
        let shards = self
            .store
            .range(RangeRequest::new(keys.shards()))
            .await
            .unwrap()
            .kvs
            .len();
        (hosts, shards)
    }

    /// Waits until `actors` hosts are live and hold every shard, a scheduler leads, and every
    /// gateway is ready; panics with every log's tail after a minute.
    pub async fn wait_settled(&self, actors: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let http = reqwest::Client::new();
        loop {
            let (hosts, shards) = self.shard_view().await;
            let leader = self
                .store
                .get(&Keys::new("default").scheduler_leader())
                .await
                .map(|(found, _)| found.is_some())
                .unwrap_or(false);
            let schedulers = self
                .processes
                .iter()
                .any(|p| p.role == Role::Scheduler && p.child.is_some());
            let mut gateways_ready = true;
            for (i, url) in self.gateway_urls.iter().enumerate() {
                if self.is_running(Role::Gateway, i) {
                    let ready = http.get(format!("{url}/readyz")).send().await;
                    gateways_ready &= ready.is_ok_and(|r| r.status().is_success());
                }
            }
            if hosts == actors && shards == SHARDS && (leader || !schedulers) && gateways_ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not settle within a minute ({hosts} hosts, {shards} shards held, \
                 leader {leader}, gateways ready {gateways_ready})\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The index of the scheduler that leads now (its candidate id names its process id).
    pub async fn scheduler_leader(&self) -> Option<usize> {
        let (found, _) = self
            .store
            .get(&Keys::new("default").scheduler_leader())
            .await
            .ok()?;
        let candidate = String::from_utf8(found?.value).ok()?;
        self.processes.iter().find_map(|p| {
            let pid = p.child.as_ref()?.id();
            (p.role == Role::Scheduler && candidate.contains(&format!("-{pid}-"))).then_some(p.index)
        })
    }

    pub fn is_running(&self, role: Role, index: usize) -> bool {
        self.processes
            .iter()
            .any(|p| p.role == role && p.index == index && p.child.is_some())
    }

    /// The metrics URL the process printed in its log (its roles serve metrics when
    /// `AGENTPROCESS_METRICS_LISTEN` is set).
    pub fn metrics_url(&self, role: Role, index: usize) -> String {
        let log = self.log(role, index);
        log.lines()
            .find_map(|line| line.trim().strip_prefix("metrics: "))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("{role:?} {index} printed no metrics endpoint:\n{log}"))
    }

    /// The last lines of every process's log, for failure messages.
    pub fn logs(&self) -> String {
        let mut text = String::new();
        for process in &self.processes {
            let log = std::fs::read_to_string(&process.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(30)..].join("\n");
            text.push_str(&format!(
                "--- {} {} ({} starts)\n{tail}\n",
                process.role.command(),
                process.index,
                process.starts
            ));
        }
        text
    }

    /// The log of one process so far.
    pub fn log(&self, role: Role, index: usize) -> String {
        let process = self
            .processes
            .iter()
            .find(|p| p.role == role && p.index == index)
            .unwrap();
        std::fs::read_to_string(&process.log).unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for process in &mut self.processes {
            if let Some(mut child) = process.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// A cluster seen from one organization, as a [`Deployment`] for the example walks: its calls
/// take turns between the gateways, so every walk goes through all of them.
pub struct ClusterOrg {
    cluster: Arc<Cluster>,
    organization: String,
    turn: AtomicUsize,
}

impl ClusterOrg {
    pub fn new(cluster: Arc<Cluster>, organization: &str) -> ClusterOrg {
        ClusterOrg {
            cluster,
            organization: organization.to_owned(),
            turn: AtomicUsize::new(0),
        }
    }

    /// The gateway whose turn it is.
    fn next_gateway(&self) -> usize {
        self.turn.fetch_add(1, Ordering::Relaxed) % self.cluster.gateways()
    }
}

impl Deployment for ClusterOrg {
    fn organization(&self) -> &str {
        &self.organization
    }

    fn mcp_url(&self) -> String {
        self.cluster.mcp_url(self.next_gateway())
    }

    fn token_in(&self, organization: &str, who: &Who) -> String {
        self.cluster.token_in(organization, who)
    }

    async fn client_in(&self, organization: &str, who: &Who) -> Mcp {
        self.cluster
            .client_in(self.next_gateway(), organization, who)
            .await
    }

    fn import_in(
        &self,
        organization: &str,
        path: &Path,
        bindings: &[(&str, &str)],
        publish: bool,
    ) -> (i32, String, String) {
        self.cluster
            .import_in(self.next_gateway(), organization, path, bindings, publish)
    }

    async fn advance(&self, seconds: u64) -> Timestamp {
        self.cluster
            .advance(self.next_gateway(), &self.organization, seconds)
            .await
    }
}
