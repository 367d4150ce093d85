//! A gateway on a free local port with a backend that records its calls, and raw HTTP helpers.

#![allow(dead_code)]

use agentprocess_gateway::auth::dev::{DevKey, DevTokenRequest};
use agentprocess_gateway::{
    AuthConfig, DescribeConfig, GatewayConfig, Identity, IdentityKind, RunRead, ToolBackend, ToolName,
    ToolResult,
};
use agentprocess_service::trace::TraceParent;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One call the backend saw.
#[derive(Debug, Clone)]
pub struct Call {
    pub identity: Identity,
    pub tool: ToolName,
    pub arguments: Value,
    /// The trace context the call reached the backend in.
    pub trace: Option<TraceParent>,
}

/// Answers every call with `{ "tool": <name> }` and remembers it.
#[derive(Debug, Default)]
pub struct Recorder {
    calls: Mutex<Vec<Call>>,
}

impl Recorder {
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
}

impl ToolBackend for Recorder {
    async fn call(&self, identity: &Identity, tool: ToolName, arguments: Value) -> ToolResult {
        self.calls.lock().unwrap().push(Call {
            identity: identity.clone(),
            tool,
            arguments,
            trace: agentprocess_service::trace::current(),
        });
        Ok(json!({ "tool": tool.as_str() }).into())
    }

    async fn read_run(&self, _: &Identity, read: RunRead, run_id: &str) -> ToolResult {
        Ok(json!({ "read": read.as_str(), "runId": run_id }).into())
    }
}

/// A running gateway.
pub struct TestServer {
    /// `http://127.0.0.1:<port>`: the public URL and resource URI.
    pub url: String,
    pub recorder: Arc<Recorder>,
    pub data_dir: tempfile::TempDir,
}

impl TestServer {
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.url)
    }

    /// The dev key of a dev-mode server.
    pub fn dev_key(&self) -> DevKey {
        DevKey::load_or_create(self.data_dir.path()).unwrap()
    }

    /// A dev token for an agent `a_screener` of `acme`.
    pub fn agent_token(&self) -> String {
        self.dev_key().mint(
            &self.url,
            &DevTokenRequest {
                organization: "acme".into(),
                kind: IdentityKind::Agent {
                    id: "a_screener".into(),
                },
                operator: false,
                ttl: Duration::from_secs(600),
            },
        )
    }
}

/// Starts a gateway with `auth` (dev mode when it has no provider) and `describe`.
pub async fn start_with(
    auth: AuthConfig,
    describe: DescribeConfig,
    max_request_bytes: Option<usize>,
) -> TestServer {
    // The HTTP clients of the tests use TLS without a built-in crypto provider, as the gateway does.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let data_dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let config = GatewayConfig {
        public_url: url.clone(),
        data_dir: data_dir.path().to_owned(),
        dev_key: None,
        auth,
        describe,
        max_request_bytes,
        allowed_hosts: Vec::new(),
        admission: Default::default(),
    };
    let app = agentprocess_gateway::router(&config, recorder.clone()).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    TestServer {
        url,
        recorder,
        data_dir,
    }
}

/// A dev-mode gateway with the default `describe`.
pub async fn start_dev() -> TestServer {
    start_with(AuthConfig::default(), DescribeConfig::default(), None).await
}

/// A raw HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub www_authenticate: Option<String>,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// POSTs `body` to `/mcp` as a Streamable HTTP client would, with an optional bearer token.
pub async fn post_mcp(server: &TestServer, token: Option<&str>, body: impl Into<reqwest::Body>) -> Answer {
    post_mcp_with(server, token, &[], body).await
}

/// [`post_mcp`] with more headers.
pub async fn post_mcp_with(
    server: &TestServer,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: impl Into<reqwest::Body>,
) -> Answer {
    let mut request = reqwest::Client::new()
        .post(server.mcp_url())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    Answer {
        status: response.status().as_u16(),
        www_authenticate: response
            .headers()
            .get("www-authenticate")
            .map(|value| value.to_str().unwrap().to_owned()),
        body: response.text().await.unwrap(),
    }
}

/// An `initialize` request body.
pub fn initialize() -> String {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": { "name": "test", "version": "0" } }
    })
    .to_string()
}
