//! A real etcd cluster for tests: members started on free loopback ports, stopped on drop.
//!
//! [`EtcdCluster::start`] runs the `etcd` binary found on `PATH` (etcd 3.4, Debian's
//! `etcd-server`; `scripts/install-deps.sh` installs it) once per member, each with its data
//! folder and log file in one temporary folder, and waits until every member reports the
//! cluster healthy. Dropping the cluster kills every member that is still running (also when a
//! test panics) and removes the folder. Each member's log is kept in the folder as
//! `<name>.log`; a failed start prints the logs' last lines.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a cluster may take to elect its first leader before the start is a failure.
const START_PATIENCE: Duration = Duration::from_secs(60);

/// One running (or killed) member.
#[derive(Debug)]
struct Member {
    name: String,
    client: SocketAddr,
    peer: String,
    log: PathBuf,
    process: Option<Child>,
}

/// A running etcd cluster on loopback. Kills its members when dropped.
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<Member>,
    /// `name=peer URL` of every member, comma-separated: etcd's `--initial-cluster`.
    initial_cluster: String,
    /// How many times the cluster was restored from a snapshot (each restore's data folders are
    /// new ones).
    restores: usize,
    /// Holds the members' data folders and logs; removed after the members are killed.
    dir: tempfile::TempDir,
}

impl EtcdCluster {
    /// Starts a cluster of `size` members and waits until it has a leader and every member is
    /// healthy. Panics (after killing what it started) when etcd is missing or does not come up.
    pub fn start(size: usize) -> EtcdCluster {
        assert!(size > 0, "a cluster has at least one member");
        let dir = tempfile::Builder::new()
            .prefix("etcd-cluster-")
            .tempdir()
            .expect("temporary folder for the etcd cluster");
        let ports = free_loopback_ports(2 * size);
        let peer = |i: usize| format!("http://127.0.0.1:{}", ports[2 * i + 1]);
        let initial_cluster: Vec<String> = (0..size).map(|i| format!("m{i}={}", peer(i))).collect();
        let token = format!("agentprocess-test-{}-{}", std::process::id(), ports[0]);
        let mut cluster = EtcdCluster {
            members: Vec::with_capacity(size),
            initial_cluster: initial_cluster.join(","),
            restores: 0,
            dir,
        };
        for i in 0..size {
            let name = format!("m{i}");
            let client = SocketAddr::from(([127, 0, 0, 1], ports[2 * i]));
            let log = cluster.dir.path().join(format!("{name}.log"));
            let process = spawn_member(
                &cluster.dir.path().join(&name),
                &name,
                client,
                &peer(i),
                &cluster.initial_cluster,
                &token,
                &log,
            );
            cluster.members.push(Member {
                name,
                client,
                peer: peer(i),
                log,
                process: Some(process),
            });
        }
        cluster.wait_until_healthy();
        cluster
    }

    /// Every member's client URL (`http://127.0.0.1:PORT`), killed members included, in member
    /// order.
    pub fn client_urls(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("http://{}", m.client))
            .collect()
    }

    /// The client URLs as one `URL,URL,URL` list, the form a `--etcd` flag takes.
    pub fn endpoint_list(&self) -> String {
        self.client_urls().join(",")
    }

    /// Kills member `index` with SIGKILL, as a crash would, and waits until it is gone.
    pub fn kill(&mut self, index: usize) {
        let member = &mut self.members[index];
        if let Some(mut process) = member.process.take() {
            process.kill().expect("kill etcd member");
            process.wait().expect("reap etcd member");
        }
    }

    /// Saves a snapshot of the cluster's keys, leases included, to `path` with `etcdctl snapshot
    /// save` against a live member, as an operator backs a cluster up.
    pub fn snapshot_save(&self, path: &Path) {
        let (_, member) = self.live_members().next().expect("a live etcd member");
        let output = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &format!("http://{}", member.client)])
            .args(["snapshot", "save"])
            .arg(path)
            .output()
            .unwrap_or_else(|error| panic!("cannot run etcdctl ({error}): install etcd-client"));
        assert!(
            output.status.success(),
            "etcdctl snapshot save: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Stops every member and starts the cluster again from `snapshot`, as an operator restores
    /// one: `etcdctl snapshot restore` into a new data folder per member (a new cluster token),
    /// then each member on the ports it had, and waits until the cluster is healthy.
    pub fn restore_from_snapshot(&mut self, snapshot: &Path) {
        for index in 0..self.members.len() {
            self.kill(index);
        }
        self.restores += 1;
        let token = format!(
            "agentprocess-test-{}-restored-{}",
            std::process::id(),
            self.restores
        );
        for member in &mut self.members {
            let data_dir = self
                .dir
                .path()
                .join(format!("{}-restored-{}", member.name, self.restores));
            let output = Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .args(["snapshot", "restore"])
                .arg(snapshot)
                .args(["--name", &member.name])
                .args(["--initial-cluster", &self.initial_cluster])
                .args(["--initial-cluster-token", &token])
                .args(["--initial-advertise-peer-urls", &member.peer])
                .arg("--data-dir")
                .arg(&data_dir)
                .output()
                .unwrap_or_else(|error| panic!("cannot run etcdctl ({error}): install etcd-client"));
            assert!(
                output.status.success(),
                "etcdctl snapshot restore: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            member.process = Some(spawn_member(
                &data_dir,
                &member.name,
                member.client,
                &member.peer,
                &self.initial_cluster,
                &token,
                &member.log,
            ));
        }
        self.wait_until_healthy();
    }

    /// The index of the member that is the leader, as the live members report it. Panics when
    /// no live member answers.
    pub fn leader(&self) -> usize {
        let statuses: Vec<(usize, Value)> = self
            .live_members()
            .filter_map(|(i, member)| {
                Some((i, post_json(member.client, "/v3/maintenance/status", "{}").ok()?))
            })
            .collect();
        let member_id = |status: &Value| status["header"]["member_id"].as_str().map(str::to_string);
        let (_, any) = statuses.first().expect("a live etcd member answers its status");
        let leader = any["leader"].as_str().expect("the status names the leader");
        statuses
            .iter()
            .find(|(_, status)| member_id(status).as_deref() == Some(leader))
            .map(|(i, _)| *i)
            .expect("the leader is a live member of this cluster")
    }

    /// Compacts the cluster's history before `revision` (etcd keeps the state at `revision`), on
    /// a live member, and waits until the compaction is done.
    pub fn compact(&self, revision: i64) {
        let (_, member) = self.live_members().next().expect("a live etcd member");
        let body = format!(r#"{{"revision": "{revision}", "physical": true}}"#);
        post_json(member.client, "/v3/kv/compaction", &body).expect("compaction");
    }

    fn live_members(&self) -> impl Iterator<Item = (usize, &Member)> {
        self.members
            .iter()
            .enumerate()
            .filter(|(_, member)| member.process.is_some())
    }

    fn wait_until_healthy(&mut self) {
        let deadline = Instant::now() + START_PATIENCE;
        loop {
            let exited: Vec<String> = self
                .members
                .iter_mut()
                .filter_map(|member| {
                    let status = member.process.as_mut()?.try_wait().ok()??;
                    Some(format!("{} exited with {status}", member.name))
                })
                .collect();
            if !exited.is_empty() {
                panic!("etcd did not start: {}\n{}", exited.join("; "), self.log_tails());
            }
            if self.members.iter().all(|member| is_healthy(member.client)) {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "etcd cluster not healthy within {START_PATIENCE:?}\n{}",
                    self.log_tails()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log_tails(&self) -> String {
        self.members
            .iter()
            .map(|member| {
                let log = std::fs::read_to_string(&member.log).unwrap_or_default();
                let lines: Vec<&str> = log.lines().collect();
                let tail = lines[lines.len().saturating_sub(20)..].join("\n");
                format!("--- {} ({}):\n{tail}", member.name, member.log.display())
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for member in &mut self.members {
            if let Some(mut process) = member.process.take() {
                let _ = process.kill();
                let _ = process.wait();
            }
        }
    }
}

/// Starts one member. Elections are slower than etcd's defaults (200 ms heartbeats, 2 s
/// election timeout) so a busy test machine does not see spurious leader changes.
fn spawn_member(
    data_dir: &Path,
    name: &str,
    client: SocketAddr,
    peer_url: &str,
    initial_cluster: &str,
    token: &str,
    log: &Path,
) -> Child {
    let client_url = format!("http://{client}");
    let mut command = Command::new("etcd");
    command
        .arg("--name")
        .arg(name)
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--listen-client-urls", &client_url])
        .args(["--advertise-client-urls", &client_url])
        .args(["--listen-peer-urls", peer_url])
        .args(["--initial-advertise-peer-urls", peer_url])
        .args(["--initial-cluster", initial_cluster])
        .args(["--initial-cluster-token", token])
        .args(["--initial-cluster-state", "new"])
        .args(["--heartbeat-interval", "200", "--election-timeout", "2000"])
        .args(["--logger", "zap", "--log-level", "warn"]);
    spawn_etcd(&mut command, log)
}

/// Runs an `etcd` command with its output going to `log`. Panics, saying how to install etcd,
/// when it cannot run.
pub(crate) fn spawn_etcd(command: &mut Command, log: &Path) -> Child {
    let log_file = std::fs::File::create(log).expect("etcd log file");
    let stderr = log_file.try_clone().expect("etcd log file");
    command
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|error| {
            panic!("cannot run etcd ({error}): install etcd 3.4 (Debian's etcd-server; scripts/install-deps.sh does)")
        })
}

/// `count` distinct loopback ports that were free a moment ago (held together while chosen,
/// so no two are the same).
pub fn free_loopback_ports(count: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..count)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind a loopback port"))
        .collect();
    listeners
        .iter()
        .map(|listener| listener.local_addr().expect("bound address").port())
        .collect()
}

/// Whether the member answers `/health` with `"health":"true"` (it is up and has a leader).
fn is_healthy(client: SocketAddr) -> bool {
    request(client, "GET", "/health", "")
        .map(|body| body.contains(r#""health":"true""#))
        .unwrap_or(false)
}

/// POSTs `body` to etcd's JSON gateway and parses the answer.
fn post_json(client: SocketAddr, path: &str, body: &str) -> Result<Value, String> {
    let answer = request(client, "POST", path, body)?;
    serde_json::from_str(&answer).map_err(|error| format!("{path}: {error}: {answer}"))
}

/// One HTTP/1.0 request (so the answer is neither chunked nor kept alive); the answer's body
/// when the status is 200.
fn request(client: SocketAddr, method: &str, path: &str, body: &str) -> Result<String, String> {
    let mut stream =
        TcpStream::connect_timeout(&client, Duration::from_secs(2)).map_err(|error| error.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|error| error.to_string())?;
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: {client}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|error| error.to_string())?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|error| error.to_string())?;
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or("no HTTP header in the answer")?;
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        return Err(format!("{method} {path}: {head}"));
    }
    Ok(body.to_string())
}
