//! A secured cluster. The roles on an etcd that serves TLS, requires client certificates and has
//! user authentication on: an actor host and a gateway started from the built binary with the
//! `[cluster]` TLS and user settings (the password once from the environment, once from a
//! file) publish a process and run it through MCP; a role given a wrong password stops at start
//! and says why. And the roles among themselves over mutual TLS: the actor host serves
//! `https://`, the gateway reaches it with its certificate, and a role with half of those
//! settings stops at start.

mod common;

use agentprocess_gateway::auth::dev::DevKey;
use agentprocess_testkit::{ClientCerts, EtcdCluster, SecuredEtcd, TestPki, free_loopback_ports};
use common::{Mcp, Who, publish_example_with, run_import};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PASSWORD: &str = "a password etcd checks";

/// A role process, killed when dropped.
struct Role(Child);

impl Drop for Role {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `[cluster]` settings of every role: the member's CA, this client's certificate and the
/// user; the password is given each role its own way.
fn write_settings(member: &SecuredEtcd, path: &Path, password_file: Option<&Path>) {
    let pki = member.pki();
    let mut toml = format!(
        "[cluster]\netcd = [{url:?}]\netcd_ca_file = {ca:?}\netcd_cert_file = {cert:?}\n\
         etcd_key_file = {key:?}\netcd_user = \"agentprocess\"\n",
        url = member.client_url(),
        ca = pki.ca_cert.display().to_string(),
        cert = pki.client_cert.display().to_string(),
        key = pki.client_key.display().to_string(),
    );
    if let Some(file) = password_file {
        toml.push_str(&format!(
            "etcd_password_file = {:?}\n",
            file.display().to_string()
        ));
    }
    std::fs::write(path, toml).unwrap();
}

fn start(dir: &Path, name: &str, args: &[String], env: &[(&str, &str)]) -> Role {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_agentprocess"))
        .args(args)
        .current_dir(dir)
        .env("RUST_LOG", "info,rmcp=warn")
        .envs(env.iter().copied())
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("the agentprocess binary starts");
    Role(child)
}

/// Runs a scheduler with `settings` that must stop at start; what it printed on stderr.
fn scheduler_refused(dir: &Path, settings: &Path, env: &[(&str, &str)]) -> String {
    let refused = Command::new(env!("CARGO_BIN_EXE_agentprocess"))
        .args(["scheduler", "--config"])
        .arg(settings)
        .envs(env.iter().copied())
        .current_dir(dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(!refused.status.success(), "the role must stop at start: {stderr}");
    stderr
}

fn log_of(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default()
}

/// An actor host and a gateway of one cluster, started from the built binary with their
/// settings files, and ready: the gateway saw the actor host's registration.
struct ActorAndGateway {
    _actor: Role,
    _gateway: Role,
    actor_port: u16,
    gateway_url: String,
    dev_key: PathBuf,
}

async fn actor_and_gateway(
    dir: &Path,
    actor_settings: &Path,
    gateway_settings: &Path,
    actor_env: &[(&str, &str)],
) -> ActorAndGateway {
    let blobs = dir.join("blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    let uploads = format!("file://{}", blobs.display());
    let ports = free_loopback_ports(2);
    let gateway_url = format!("http://127.0.0.1:{}", ports[1]);
    let dev_key = dir.join("dev-signing-key");
    let actor = start(
        dir,
        "actor",
        &[
            "actor".into(),
            "--config".into(),
            actor_settings.display().to_string(),
            "--uploads".into(),
            uploads.clone(),
            "--listen".into(),
            format!("127.0.0.1:{}", ports[0]),
        ],
        actor_env,
    );
    let gateway = start(
        dir,
        "gateway",
        &[
            "gateway".into(),
            "--config".into(),
            gateway_settings.display().to_string(),
            "--uploads".into(),
            uploads,
            "--listen".into(),
            gateway_url.trim_start_matches("http://").to_owned(),
            "--public-url".into(),
            gateway_url.clone(),
            "--dev-key".into(),
            dev_key.display().to_string(),
        ],
        &[],
    );
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = http.get(format!("{gateway_url}/readyz")).send().await;
        if matches!(&ready, Ok(answer) if answer.status().is_success()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the gateway is not ready within 60 s\nactor:\n{}\ngateway:\n{}",
            log_of(dir, "actor"),
            log_of(dir, "gateway")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ActorAndGateway {
        _actor: actor,
        _gateway: gateway,
        actor_port: ports[0],
        gateway_url,
        dev_key,
    }
}

impl ActorAndGateway {
    /// Publishes the purchase-request example and starts a run of it through MCP; checks the run is
    /// active when read back.
    async fn run_a_purchase_request(&self, request: &str) {
        let key = DevKey::load_or_create_file(&self.dev_key).unwrap();
        let token = |who: Who| key.mint(&self.gateway_url, &who.token_request("acme"));
        let operator = token(Who::Operator("ops@acme.test", &["ops"]));
        publish_example_with("purchase-request", |path, bindings| {
            run_import(&self.gateway_url, &operator, path, bindings, true)
        });
        let agent = Mcp::connect(
            &format!("{}/mcp", self.gateway_url),
            &token(Who::Agent("agent-1")),
        )
        .await;
        let started = agent.start_purchase_request(request).await;
        let run_id = started["run"]["id"].as_str().expect("a run id").to_owned();
        let run = agent.ok("get_run", serde_json::json!({ "runId": &run_id })).await;
        assert_eq!(run["run"]["id"], run_id.as_str());
        assert_eq!(run["run"]["state"], "active");
        agent.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_work_through_an_etcd_with_tls_client_certificates_and_users() {
    let member = SecuredEtcd::start(ClientCerts::Required);
    member.enable_authentication("agentprocess", PASSWORD).await;
    let dir = tempfile::tempdir().unwrap();
    let password_file = dir.path().join("etcd-password");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
    let actor_settings = dir.path().join("actor.toml");
    write_settings(&member, &actor_settings, None);
    let gateway_settings = dir.path().join("gateway.toml");
    write_settings(&member, &gateway_settings, Some(&password_file));

    // Ready means the gateway read, through TLS as the user, the actor host's registration.
    let roles = actor_and_gateway(
        dir.path(),
        &actor_settings,
        &gateway_settings,
        &[("AGENTPROCESS_CLUSTER__ETCD_PASSWORD", PASSWORD)],
    )
    .await;
    roles.run_a_purchase_request("PR-TLS-1").await;

    // A role with a wrong password stops at start, naming the login that failed.
    let stderr = scheduler_refused(
        dir.path(),
        &actor_settings,
        &[("AGENTPROCESS_CLUSTER__ETCD_PASSWORD", "not the password")],
    );
    assert!(
        stderr.contains("authentication failed"),
        "the reason names the login: {stderr}"
    );
}

/// Architecture, "gRPC between roles": with `cluster.grpc_ca_file`, `grpc_cert_file` and
/// `grpc_key_file` the actor host serves its run service over TLS at an `https://` URL and
/// answers only callers the CA signed; the gateway, given its own certificate, reaches it and a
/// run goes through MCP. (Who is refused at the handshake is checked in the proto crate's
/// tests.) A role given only part of those settings stops at start and names what is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_talk_to_each_other_over_mutual_tls() {
    let etcd = EtcdCluster::start(1);
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(dir.path());
    let settings = |name: &str, cert: &Path, key: &Path| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                "[cluster]\netcd = [{etcd:?}]\ngrpc_ca_file = {ca:?}\ngrpc_cert_file = {cert:?}\n\
                 grpc_key_file = {key:?}\n",
                etcd = etcd.client_urls()[0],
                ca = pki.ca_cert.display().to_string(),
                cert = cert.display().to_string(),
                key = key.display().to_string(),
            ),
        )
        .unwrap();
        path
    };
    // The actor host shows the certificate for 127.0.0.1; the gateway a client certificate.
    let actor_settings = settings("actor.toml", &pki.server_cert, &pki.server_key);
    let gateway_settings = settings("gateway.toml", &pki.client_cert, &pki.client_key);
    let roles = actor_and_gateway(dir.path(), &actor_settings, &gateway_settings, &[]).await;
    let actor_log = log_of(dir.path(), "actor");
    assert!(
        actor_log.contains(&format!("serving runs at https://127.0.0.1:{}", roles.actor_port)),
        "the actor host serves https://:\n{actor_log}"
    );
    roles.run_a_purchase_request("PR-MTLS-1").await;

    // Half the settings: the role stops before it does anything, naming what is missing.
    let half = dir.path().join("half.toml");
    std::fs::write(
        &half,
        format!(
            "[cluster]\netcd = [{:?}]\ngrpc_ca_file = {:?}\n",
            etcd.client_urls()[0],
            pki.ca_cert.display().to_string()
        ),
    )
    .unwrap();
    let stderr = scheduler_refused(dir.path(), &half, &[]);
    assert!(
        stderr.contains("cluster.grpc_cert_file is missing")
            && stderr.contains("cluster.grpc_key_file is missing"),
        "the reason names the missing settings: {stderr}"
    );
}
