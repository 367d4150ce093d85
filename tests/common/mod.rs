//! The built `agentprocess serve` in a child process, dev tokens for it, and an rmcp client whose
//! every tool result is checked against our schemas and the `outputSchema` the server publishes.

#![allow(dead_code)]

pub mod browser;
pub mod checked;
pub mod listener;
pub mod quick;
pub mod scrape;
pub mod ui;

use agentprocess_gateway::IdentityKind;
use agentprocess_gateway::auth::dev::{DevKey, DevTokenRequest};
use agentprocess_run_actor::machine::Timestamp;
use agentprocess_testkit::{assert_matches_schema, assert_matches_standalone};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The organization the tests act in unless they say otherwise.
pub const ORG: &str = "acme";

/// A running `agentprocess serve`, killed when dropped.
pub struct Server {
    child: Option<Child>,
    /// `http://127.0.0.1:<port>`: the public URL, issuer and audience of dev tokens.
    pub url: String,
    /// The address it listens on (the public URL's, unless `--public-url` named another).
    pub listen: SocketAddr,
    pub data: PathBuf,
    /// The folder `serve` runs in when it was started without `--data` (its data is then the
    /// default `.agentprocess` there).
    pub folder: Option<PathBuf>,
    pub args: Vec<String>,
    /// Environment variables added to the server's, kept for restarts.
    pub env: Vec<(String, String)>,
    /// `http://<addr>/metrics` when started with `--metrics-listen`.
    pub metrics_url: Option<String>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

/// Where a started `serve` keeps its data.
#[derive(Debug, Clone, Copy)]
enum Data<'a> {
    /// `--data` this folder.
    Flag(&'a Path),
    /// No `--data`: the default `.agentprocess` in this folder, which `serve` runs in.
    DefaultIn(&'a Path),
}

/// Who a token is for.
#[derive(Debug, Clone)]
pub enum Who {
    Agent(&'static str),
    /// An agent identity with operator rights.
    AgentOperator(&'static str),
    Person(&'static str, &'static [&'static str]),
    Operator(&'static str, &'static [&'static str]),
}

impl Who {
    /// What a dev token for this identity in `organization` says, valid for an hour.
    pub fn token_request(&self, organization: &str) -> DevTokenRequest {
        let (kind, operator) = match self {
            Who::Agent(id) => (IdentityKind::Agent { id: id.to_string() }, false),
            Who::AgentOperator(id) => (IdentityKind::Agent { id: id.to_string() }, true),
            Who::Person(email, groups) | Who::Operator(email, groups) => (
                IdentityKind::Person {
                    email: email.to_string(),
                    groups: groups.iter().map(|g| g.to_string()).collect(),
                },
                matches!(self, Who::Operator(..)),
            ),
        };
        DevTokenRequest {
            organization: organization.to_owned(),
            kind,
            operator,
            ttl: Duration::from_secs(3600),
        }
    }
}

impl Server {
    /// Starts `serve` on a free loopback port with its data in `data`, clock control on, and
    /// `args` added.
    pub fn start(data: &Path, args: &[&str]) -> Server {
        Server::start_at(Data::Flag(data), "127.0.0.1:0".parse().unwrap(), args, &[])
    }

    /// As [`Server::start`], listening on `listen` (for a URL that must be known before the
    /// server starts).
    pub fn start_listening(data: &Path, listen: SocketAddr, args: &[&str]) -> Server {
        Server::start_at(Data::Flag(data), listen, args, &[])
    }

    /// Starts `serve` in `folder` without `--data`, as a newcomer types it: its data is
    /// `.agentprocess` in `folder`. On a free loopback port, with `args` added.
    pub fn start_in_folder(folder: &Path, args: &[&str]) -> Server {
        Server::start_at(Data::DefaultIn(folder), "127.0.0.1:0".parse().unwrap(), args, &[])
    }

    /// As [`Server::start`], with `env` added to the server's environment (settings such as
    /// `AGENTPROCESS_EVALUATOR__URL` or `AGENTPROCESS_LIMITS__MAX_UPLOAD_BYTES`).
    pub fn start_with_env(data: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Server::start_at(Data::Flag(data), "127.0.0.1:0".parse().unwrap(), args, &env)
    }

    fn start_at(data: Data<'_>, listen: SocketAddr, args: &[&str], env: &[(String, String)]) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agentprocess"));
        command.arg("serve");
        let (data, folder) = match data {
            Data::Flag(data) => {
                command.arg("--data").arg(data);
                (data.to_owned(), None)
            }
            Data::DefaultIn(folder) => {
                command.current_dir(folder);
                (folder.join(".agentprocess"), Some(folder.to_owned()))
            }
        };
        let mut child = command
            .arg("--listen")
            .arg(listen.to_string())
            .args(args)
            .env("AGENTPROCESS_TESTING__CLOCK_CONTROL", "true")
            .env("RUST_LOG", "warn")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the server binary starts");
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        {
            let mut pipe = child.stderr.take().unwrap();
            let stderr = stderr.clone();
            std::thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut buffer) {
                    if n == 0 {
                        break;
                    }
                    stderr
                        .lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buffer[..n]));
                }
            });
        }
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut url = None;
        let mut local = None;
        let mut metrics_url = None;
        let mut line = String::new();
        while url.is_none() {
            line.clear();
            if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                let status = child.wait().unwrap();
                panic!(
                    "serve exited ({status}) before it printed its endpoint:\n{}",
                    stderr.lock().unwrap()
                );
            }
            if let Some(endpoint) = line.trim().strip_prefix("metrics: ") {
                metrics_url = Some(endpoint.to_owned());
            }
            if let Some(endpoint) = line.trim().strip_prefix("MCP endpoint: ") {
                url = Some(endpoint.trim_end_matches("/mcp").to_owned());
            }
            if let Some((_, address)) = line.trim().split_once(" listening on ") {
                local = address.parse().ok();
            }
        }
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let url = url.unwrap();
        let listen = local.expect("serve prints the address it listens on");
        Server {
            child: Some(child),
            url,
            listen,
            data,
            folder,
            args: args.iter().map(|a| a.to_string()).collect(),
            env: env.to_vec(),
            metrics_url,
            stderr,
        }
    }

    /// `kill -9`, then the same server again on the same port and data (so tokens stay valid).
    pub fn kill_and_restart(&mut self) {
        self.kill9();
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let mut again = None;
        // The port may take a moment to be free again.
        for _ in 0..50 {
            if std::net::TcpListener::bind(self.listen).is_ok() {
                let data = match &self.folder {
                    Some(folder) => Data::DefaultIn(folder),
                    None => Data::Flag(&self.data),
                };
                again = Some(Server::start_at(data, self.listen, &args, &self.env));
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        *self = again.expect("the port frees up after the kill");
    }

    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait: a clean shutdown.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        child.wait().unwrap()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.url)
    }

    /// A dev token of `ORG`.
    pub fn token(&self, who: &Who) -> String {
        self.token_in(ORG, who)
    }

    pub fn token_in(&self, organization: &str, who: &Who) -> String {
        DevKey::load_or_create(&self.data)
            .unwrap()
            .mint(&self.url, &who.token_request(organization))
    }

    /// An MCP client of `ORG` acting as `who`.
    pub async fn client(&self, who: &Who) -> Mcp {
        Mcp::connect(&self.mcp_url(), &self.token(who)).await
    }

    pub async fn client_in(&self, organization: &str, who: &Who) -> Mcp {
        Mcp::connect(&self.mcp_url(), &self.token_in(organization, who)).await
    }

    /// Runs `agentprocess process import PATH --bind ... --publish` against this server as an
    /// operator of `ORG`; returns (exit code, stdout, stderr).
    pub fn import(&self, path: &Path, bindings: &[(&str, &str)], publish: bool) -> (i32, String, String) {
        self.import_in(ORG, path, bindings, publish)
    }

    /// As [`Server::import`], as an operator of `organization`.
    pub fn import_in(
        &self,
        organization: &str,
        path: &Path,
        bindings: &[(&str, &str)],
        publish: bool,
    ) -> (i32, String, String) {
        let token = self.token_in(organization, &Who::Operator("ops@acme.test", &["ops"]));
        run_import(&self.url, &token, path, bindings, publish)
    }

    /// Imports, binds every role to the group of the same name, and publishes; panics on failure.
    pub fn publish_example(&self, name: &str) {
        self.publish_example_in(ORG, name)
    }

    /// As [`Server::publish_example`], in `organization`.
    pub fn publish_example_in(&self, organization: &str, name: &str) {
        publish_example_with(name, |path, bindings| {
            self.import_in(organization, path, bindings, true)
        })
    }

    /// Moves the server's clock forward (testing.clock_control); returns the server's time after
    /// the move (`advance(0)` reads the clock).
    pub async fn advance(&self, seconds: u64) -> Timestamp {
        let token = self.token(&Who::Operator("ops@acme.test", &["ops"]));
        advance_clock(&self.url, &token, seconds).await
    }
}

/// Imports our example process `name` (`examples/NAME`) with `import` (path, bindings → exit code, stdout,
/// stderr), each role bound to the group of the same name; panics when that fails.
pub fn publish_example_with(
    name: &str,
    import: impl FnOnce(&Path, &[(&str, &str)]) -> (i32, String, String),
) {
    let path = agentprocess_testkit::example(name);
    let source = std::fs::read(&path).unwrap();
    let loaded = agentprocess_process::load(&source, &agentprocess_process::Offer::EVERYTHING).unwrap();
    let roles: Vec<String> = loaded
        .process
        .role_names()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let bindings: Vec<(&str, &str)> = roles.iter().map(|r| (r.as_str(), r.as_str())).collect();
    let (code, out, err) = import(&path, &bindings);
    assert_eq!(code, 0, "import of {name} failed:\n{out}\n{err}");
}

/// Runs `agentprocess process import PATH --server URL --bind ... [--publish]` with `token`;
/// returns (exit code, stdout, stderr).
pub fn run_import(
    server_url: &str,
    token: &str,
    path: &Path,
    bindings: &[(&str, &str)],
    publish: bool,
) -> (i32, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentprocess"));
    command
        .args(["process", "import"])
        .arg(path)
        .args(["--server", server_url])
        .env("AGENTPROCESS_TOKEN", token);
    for (role, group) in bindings {
        command.arg("--bind").arg(format!("{role}={group}"));
    }
    if publish {
        command.arg("--publish");
    }
    let output = command.output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Moves the clock of the deployment at `url` forward with an operator's `token`
/// (`POST /admin/v1/clock`); returns its time after the move.
pub async fn advance_clock(url: &str, token: &str, seconds: u64) -> Timestamp {
    let response = reqwest::Client::new()
        .post(format!("{url}/admin/v1/clock"))
        .bearer_auth(token)
        .json(&json!({ "advanceSeconds": seconds }))
        .send()
        .await
        .unwrap();
    let (status, body) = status_and_json(response).await;
    assert_eq!(status, 200, "{body}");
    body["now"]
        .as_str()
        .and_then(Timestamp::parse_rfc3339)
        .unwrap_or_else(|| panic!("the server's time: {body}"))
}

/// Where a walk runs: one `serve` ([`Server`]) or a whole cluster. A walk acts in the
/// deployment's organization ([`Deployment::organization`]) unless it names another.
#[allow(async_fn_in_trait)]
pub trait Deployment {
    /// The organization the walk acts in.
    fn organization(&self) -> &str;

    /// The MCP endpoint (one of them, for a cluster).
    fn mcp_url(&self) -> String;

    /// A dev token of `organization` for `who`.
    fn token_in(&self, organization: &str, who: &Who) -> String;

    fn token(&self, who: &Who) -> String {
        self.token_in(self.organization(), who)
    }

    /// An MCP client of `organization` acting as `who`.
    async fn client_in(&self, organization: &str, who: &Who) -> Mcp;

    async fn client(&self, who: &Who) -> Mcp {
        self.client_in(self.organization(), who).await
    }

    /// `agentprocess process import PATH --bind ... [--publish]` as an operator of
    /// `organization`; returns (exit code, stdout, stderr).
    fn import_in(
        &self,
        organization: &str,
        path: &Path,
        bindings: &[(&str, &str)],
        publish: bool,
    ) -> (i32, String, String);

    fn import(&self, path: &Path, bindings: &[(&str, &str)], publish: bool) -> (i32, String, String) {
        self.import_in(self.organization(), path, bindings, publish)
    }

    /// Publishes our example process `name` in `organization`, each role bound to the group
    /// of the same name; panics on failure.
    fn publish_example_in(&self, organization: &str, name: &str) {
        publish_example_with(name, |path, bindings| {
            self.import_in(organization, path, bindings, true)
        })
    }

    fn publish_example(&self, name: &str) {
        self.publish_example_in(self.organization(), name)
    }

    /// Moves the deployment's clock forward (every process of it); returns its time after the
    /// move (`advance(0)` reads the clock).
    async fn advance(&self, seconds: u64) -> Timestamp;
}

impl Deployment for Server {
    fn organization(&self) -> &str {
        ORG
    }

    fn mcp_url(&self) -> String {
        Server::mcp_url(self)
    }

    fn token_in(&self, organization: &str, who: &Who) -> String {
        Server::token_in(self, organization, who)
    }

    async fn client_in(&self, organization: &str, who: &Who) -> Mcp {
        Server::client_in(self, organization, who).await
    }

    fn import_in(
        &self,
        organization: &str,
        path: &Path,
        bindings: &[(&str, &str)],
        publish: bool,
    ) -> (i32, String, String) {
        Server::import_in(self, organization, path, bindings, publish)
    }

    async fn advance(&self, seconds: u64) -> Timestamp {
        Server::advance(self, seconds).await
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// An rmcp client over Streamable HTTP.
pub struct Mcp {
    client: RunningService<RoleClient, ClientConfig>,
    /// Every tool's `outputSchema` as `tools/list` published it, fetched on the first call.
    output_schemas: tokio::sync::OnceCell<HashMap<String, Value>>,
}

/// An HTTP answer's status and its body as JSON (`null` when the body is not JSON).
pub async fn status_and_json(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

static REQUESTS: AtomicU64 = AtomicU64::new(0);

/// A fresh `requestId`.
pub fn request_id() -> String {
    format!(
        "req-{}-{}",
        std::process::id(),
        REQUESTS.fetch_add(1, Ordering::Relaxed)
    )
}

impl Mcp {
    pub async fn connect(url: &str, token: &str) -> Mcp {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token.to_owned()),
        );
        let client = ClientConfig::new(ClientCapabilities::default(), Implementation::new("e2e", "0"))
            .serve(transport)
            .await
            .expect("the MCP client connects");
        Mcp {
            client,
            output_schemas: tokio::sync::OnceCell::new(),
        }
    }

    /// Every tool's published `inputSchema` and `outputSchema`, by name, from `tools/list`.
    pub async fn published_schemas(&self) -> HashMap<String, (Value, Value)> {
        self.list_schemas()
            .await
            .unwrap_or_else(|e| panic!("tools/list: {e}"))
    }

    /// [`Mcp::published_schemas`], or why `tools/list` got no answer.
    async fn list_schemas(&self) -> Result<HashMap<String, (Value, Value)>, String> {
        let tools = match tokio::time::timeout(Duration::from_secs(30), self.client.list_all_tools()).await {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("no answer within 30 s".to_owned()),
        };
        Ok(tools
            .into_iter()
            .map(|tool| {
                let input = Value::Object((*tool.input_schema).clone());
                let output = Value::Object((*tool.output_schema.expect("an outputSchema")).clone());
                (tool.name.to_string(), (input, output))
            })
            .collect())
    }

    /// Every tool's published `outputSchema`, fetched once per client.
    async fn output_schemas(&self) -> Result<&HashMap<String, Value>, String> {
        self.output_schemas
            .get_or_try_init(|| async {
                let schemas = self.list_schemas().await?;
                Ok(schemas
                    .into_iter()
                    .map(|(name, (_, output))| (name, output))
                    .collect())
            })
            .await
    }

    /// Calls `tool` and returns its `{ ok, ... }` envelope, after checking it against the
    /// tool's result schema (or the error schema), the whole envelope against the `outputSchema`
    /// the server publishes for the tool, and that text and structured content agree.
    pub async fn call(&self, tool: &str, arguments: Value) -> Value {
        self.try_call(tool, arguments)
            .await
            .unwrap_or_else(|e| panic!("{tool}: {e}"))
    }

    /// Like [`Mcp::call`], but a call that got no answer (the server died, the connection was
    /// refused, no answer within 30 s) is `Err` instead of a panic. An answer is checked as in
    /// `call`.
    pub async fn try_call(&self, tool: &str, arguments: Value) -> Result<Value, String> {
        let arguments: Map<String, Value> = serde_json::from_value(arguments).expect("an object");
        // Fetched before the call, so a server that is gone fails this call like any other.
        let output_schemas = self.output_schemas().await?;
        let call = self
            .client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments));
        let result: CallToolResult = match tokio::time::timeout(Duration::from_secs(30), call).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("no answer within 30 s".to_owned()),
        };
        let envelope = result.structured_content.clone().expect("structured content");
        let text = result.content[0].as_text().expect("a text block").text.clone();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), envelope);
        match envelope["ok"].as_bool() {
            Some(true) => {
                assert_eq!(result.is_error, Some(false));
                assert_matches_schema(&format!("tools/{tool}.result.json"), &envelope["data"]);
            }
            Some(false) => {
                assert_eq!(result.is_error, Some(true));
                assert_matches_schema("tool-error.json", &envelope["error"]);
            }
            None => panic!("{tool}: no ok in {envelope}"),
        }
        let published = output_schemas
            .get(tool)
            .unwrap_or_else(|| panic!("tools/list has no {tool}"));
        assert_matches_standalone(&format!("the outputSchema of {tool}"), published, &envelope);
        Ok(envelope)
    }

    /// Starts a `purchase-request` run for request `request_id` (its quote URL named after it,
    /// approved by manager@acme.test) and returns the `start_run` data.
    pub async fn start_purchase_request(&self, request_id_input: &str) -> Value {
        let quote = format!("https://docs.test/{}", request_id_input.to_lowercase());
        self.ok(
            "start_run",
            json!({
                "process": "purchase-request",
                "inputs": { "requestId": request_id_input, "quoteDocument": quote,
                            "approver": "manager@acme.test" },
                "requestId": request_id(),
            }),
        )
        .await
    }

    /// Calls `tool` and returns its `data`, panicking on a refusal.
    pub async fn ok(&self, tool: &str, arguments: Value) -> Value {
        let envelope = self.call(tool, arguments).await;
        assert_eq!(envelope["ok"], true, "{tool} refused: {envelope}");
        envelope["data"].clone()
    }

    /// Calls `tool` and returns its `error`, panicking if it succeeded or the code differs.
    pub async fn refused(&self, tool: &str, arguments: Value, code: &str) -> Value {
        let envelope = self.call(tool, arguments).await;
        assert_eq!(envelope["ok"], false, "{tool} succeeded: {envelope}");
        assert_eq!(envelope["error"]["code"], code, "{tool}: {envelope}");
        envelope["error"].clone()
    }

    /// The ids `list_runs` with `arguments` lists, every page read through its cursor, and how
    /// many pages that took.
    pub async fn listed_run_ids(&self, arguments: Value) -> (Vec<String>, usize) {
        let mut ids = Vec::new();
        let mut arguments = arguments;
        for pages in 1.. {
            let page = self.ok("list_runs", arguments.clone()).await;
            ids.extend(
                page["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|item| item["id"].as_str().unwrap().to_owned()),
            );
            match page["nextCursor"].as_str() {
                Some(cursor) => arguments["cursor"] = json!(cursor),
                None => return (ids, pages),
            }
        }
        unreachable!("pages are counted without end")
    }

    pub async fn close(self) {
        let _ = self.client.cancel().await;
    }
}

/// How many run records the archive holds under `data` (of every organization).
pub fn archived_runs(data: &Path) -> usize {
    quick::archived_runs_in(&data.join("uploads"), None)
}
