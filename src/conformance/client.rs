//! The runner's MCP client: Streamable HTTP on MCP 2025-11-25 (an `initialize` handshake) or
//! 2026-07-28 (stateless requests, each with its own `_meta` and standard headers), every result
//! checked against the protocol's result schemas, failed results kept for the report.

use agentprocess_gateway::error_chain;
use agentprocess_gateway::tool::schemas;
use jsonschema::Validator;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The MCP revisions the runner speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Revision {
    /// `initialize`, then calls in the session the server may open.
    #[value(name = "2025-11-25")]
    Y2025,
    /// No handshake: `server/discover`, then self-contained requests.
    #[value(name = "2026-07-28")]
    Y2026,
}

impl Revision {
    pub fn as_str(self) -> &'static str {
        match self {
            Revision::Y2025 => "2025-11-25",
            Revision::Y2026 => "2026-07-28",
        }
    }

    /// The `_meta` every request of 2026-07-28 carries (the revision and the client's
    /// capabilities); `None` before it.
    pub fn request_meta(self) -> Option<Value> {
        (self == Revision::Y2026).then(|| {
            json!({
                "io.modelcontextprotocol/protocolVersion": self.as_str(),
                "io.modelcontextprotocol/clientCapabilities": {},
            })
        })
    }

    /// `request` with the headers this revision asks of a request of `method` (naming `name`):
    /// `MCP-Protocol-Version`, and from 2026-07-28 the standard `Mcp-Method` and `Mcp-Name`
    /// that let a middle box route without reading the body.
    pub fn with_headers(
        self,
        request: reqwest::RequestBuilder,
        method: &str,
        name: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let request = request.header("MCP-Protocol-Version", self.as_str());
        if self != Revision::Y2026 {
            return request;
        }
        let request = request.header("Mcp-Method", method);
        match name {
            Some(name) => request.header("Mcp-Name", name),
            None => request,
        }
    }
}

/// How long one call may take before it counts as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// One tool call as the report shows it: what was sent and what came back.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub tool: String,
    pub arguments: Value,
    /// The result's structured content, or a description of why there was none.
    pub answer: Value,
}

impl std::fmt::Display for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} -> {}", self.tool, self.arguments, self.answer)
    }
}

/// A result that does not match its schema: the call and the schema's complaints.
#[derive(Debug, Clone)]
pub struct SchemaViolation {
    pub exchange: Exchange,
    pub problems: Vec<String>,
}

/// Why a call has no tool result at all (the transport, HTTP or JSON-RPC layer failed).
#[derive(Debug, Clone)]
pub struct CallFailure {
    pub exchange: Exchange,
    pub reason: String,
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.exchange.tool, self.exchange.arguments, self.reason
        )
    }
}

/// What every client of one runner shares: the HTTP pool, the endpoint and the schema record.
#[derive(Debug)]
pub struct Shared {
    http: reqwest::Client,
    endpoint: String,
    revision: Revision,
    next_id: AtomicU64,
    /// Tool calls made, and results that broke their schema.
    pub calls: AtomicU64,
    pub violations: Mutex<Vec<SchemaViolation>>,
}

impl Shared {
    pub fn new(endpoint: &str, revision: Revision) -> Result<Arc<Shared>, String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .no_proxy()
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {}", error_chain(&e)))?;
        Ok(Arc::new(Shared {
            http,
            endpoint: endpoint.to_owned(),
            revision,
            next_id: AtomicU64::new(1),
            calls: AtomicU64::new(0),
            violations: Mutex::new(Vec::new()),
        }))
    }
}

/// One identity's connection to the server.
#[derive(Debug, Clone)]
pub struct Client {
    shared: Arc<Shared>,
    token: String,
    /// The `MCP-Session-Id` the server gave at `initialize` (2025-11-25 servers may give one).
    session: Option<String>,
    /// Who this is, for the report.
    pub who: String,
}

impl Client {
    /// Connects as the holder of `token`: on 2025-11-25 with the `initialize` handshake, on
    /// 2026-07-28 by asking `server/discover` which revisions the server speaks.
    pub async fn connect(shared: &Arc<Shared>, who: &str, token: &str) -> Result<Client, String> {
        let mut client = Client {
            shared: shared.clone(),
            token: token.to_owned(),
            session: None,
            who: who.to_owned(),
        };
        match shared.revision {
            Revision::Y2025 => {
                let params = json!({
                    "protocolVersion": Revision::Y2025.as_str(),
                    "capabilities": {},
                    "clientInfo": client_info(),
                });
                let (answer, session) = client.rpc("initialize", params).await?;
                if answer.get("result").is_none() {
                    return Err(format!("initialize as {who} failed: {answer}"));
                }
                client.session = session;
                client.notify("notifications/initialized").await?;
            }
            Revision::Y2026 => {
                let (answer, _) = client.rpc("server/discover", json!({})).await?;
                let speaks = answer["result"]["supportedVersions"]
                    .as_array()
                    .is_some_and(|versions| versions.iter().any(|v| v == Revision::Y2026.as_str()));
                if !speaks {
                    return Err(format!(
                        "server/discover as {who}: the server does not list 2026-07-28: {answer}"
                    ));
                }
            }
        }
        Ok(client)
    }

    fn request(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut request = self
            .shared
            .http
            .post(&self.shared.endpoint)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "application/json, text/event-stream")
            .bearer_auth(&self.token)
            .body(body.to_string());
        if let Some(session) = &self.session {
            request = request.header("Mcp-Session-Id", session);
        }
        let method = body["method"].as_str().unwrap_or_default();
        self.shared
            .revision
            .with_headers(request, method, body["params"]["name"].as_str())
    }

    async fn notify(&self, method: &str) -> Result<(), String> {
        let body = json!({ "jsonrpc": "2.0", "method": method });
        let response = self
            .request(&body)
            .send()
            .await
            .map_err(|e| format!("{method}: {}", error_chain(&e)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("{method}: HTTP {status}"));
        }
        Ok(())
    }

    /// One JSON-RPC request: its answer (from a JSON body or the event stream) and the session
    /// id the server named, if any.
    async fn rpc(&self, method: &str, params: Value) -> Result<(Value, Option<String>), String> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let mut params = params;
        if let Some(mut meta) = self.shared.revision.request_meta() {
            // Every request carries the client's context itself: there is no session.
            meta["io.modelcontextprotocol/clientInfo"] = client_info();
            params["_meta"] = meta;
        }
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let response = self
            .request(&body)
            .send()
            .await
            .map_err(|e| format!("request failed: {}", error_chain(&e)))?;
        let status = response.status();
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let is_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let text = response
            .text()
            .await
            .map_err(|e| format!("reading the answer failed: {}", error_chain(&e)))?;
        if !status.is_success() {
            return Err(format!("HTTP {status}: {}", text.trim()));
        }
        let answer = if is_stream {
            answer_in_stream(&text, id)
                .ok_or_else(|| format!("no answer to request {id} in the event stream"))?
        } else {
            serde_json::from_str(&text).map_err(|e| format!("the answer is not JSON ({e}): {text}"))?
        };
        Ok((answer, session))
    }

    /// `tools/list`: the tools the server offers.
    pub async fn list_tools(&self) -> Result<Vec<Value>, String> {
        let (answer, _) = self.rpc("tools/list", json!({})).await?;
        answer["result"]["tools"]
            .as_array()
            .cloned()
            .ok_or_else(|| format!("tools/list answered without tools: {answer}"))
    }

    /// Calls `tool`; its structured content (`{ok, data}` or `{ok, error}`), checked against the
    /// tool's result schema; an error when no tool result came back.
    pub async fn call(&self, tool: &str, arguments: Value) -> Result<Value, CallFailure> {
        self.shared.calls.fetch_add(1, Ordering::Relaxed);
        let exchange = |answer: Value| Exchange {
            tool: tool.to_owned(),
            arguments: arguments.clone(),
            answer,
        };
        let answer = match self
            .rpc("tools/call", json!({ "name": tool, "arguments": arguments }))
            .await
        {
            Ok((answer, _)) => answer,
            Err(reason) => {
                return Err(CallFailure {
                    exchange: exchange(Value::Null),
                    reason,
                });
            }
        };
        let Some(content) = answer["result"].get("structuredContent").cloned() else {
            return Err(CallFailure {
                exchange: exchange(answer.clone()),
                reason: "no tool result with structured content".to_owned(),
            });
        };
        let problems = result_problems(tool, &content);
        if !problems.is_empty() {
            self.shared
                .violations
                .lock()
                .expect("the violation list is never poisoned")
                .push(SchemaViolation {
                    exchange: exchange(content.clone()),
                    problems,
                });
        }
        Ok(content)
    }
}

fn client_info() -> Value {
    json!({ "name": "agentprocess-conformance", "version": env!("CARGO_PKG_VERSION") })
}

/// The JSON-RPC response with `id` among the events of a `text/event-stream` body.
fn answer_in_stream(text: &str, id: u64) -> Option<Value> {
    let mut data = String::new();
    let mut found = None;
    for line in text.lines().chain(std::iter::once("")) {
        if let Some(rest) = line.strip_prefix("data:") {
            data.push_str(rest.trim_start());
            data.push('\n');
        } else if line.is_empty() && !data.is_empty() {
            if let Ok(message) = serde_json::from_str::<Value>(&data)
                && message["id"] == json!(id)
            {
                found = Some(message);
            }
            data.clear();
        }
    }
    found
}

/// What is wrong with `content` as `tool`'s structured content; empty when it matches.
pub fn result_problems(tool: &str, content: &Value) -> Vec<String> {
    match validator(tool) {
        Some(validator) => validator
            .iter_errors(content)
            .map(|error| format!("{}: {error}", error.instance_path()))
            .collect(),
        None => vec![format!("{tool} is not a tool of the protocol")],
    }
}

fn validator(tool: &str) -> Option<Arc<Validator>> {
    static VALIDATORS: OnceLock<Mutex<HashMap<String, Option<Arc<Validator>>>>> = OnceLock::new();
    let mut validators = VALIDATORS
        .get_or_init(Default::default)
        .lock()
        .expect("the validator cache is never poisoned");
    validators
        .entry(tool.to_owned())
        .or_insert_with(|| {
            schemas::embedded(&format!("tools:{tool}.result"))?;
            let bundled = schemas::bundle(&schemas::envelope(tool), schemas::embedded)
                .unwrap_or_else(|e| panic!("the embedded schemas of {tool} do not bundle: {e}"));
            let validator = jsonschema::draft202012::new(&bundled)
                .unwrap_or_else(|e| panic!("the result schema of {tool} does not compile: {e}"));
            Some(Arc::new(validator))
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_found_among_other_events_of_a_stream() {
        let text = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n\
                    data: {\"jsonrpc\":\"2.0\",\"id\":7,\n\
                    data: \"result\":{}}\n\n";
        assert_eq!(
            answer_in_stream(text, 7),
            Some(json!({ "jsonrpc": "2.0", "id": 7, "result": {} }))
        );
        assert_eq!(answer_in_stream(text, 8), None);
    }

    #[test]
    fn a_result_outside_its_schema_is_reported_and_one_inside_is_not() {
        assert!(
            result_problems(
                "renew",
                &json!({ "ok": true, "data": { "token": "t", "expiresAt": "2030-01-01T00:00:00Z" } })
            )
            .is_empty()
        );
        assert!(!result_problems("renew", &json!({ "ok": true, "data": { "token": 1 } })).is_empty());
        assert!(
            result_problems(
                "renew",
                &json!({ "ok": false, "error": { "code": "stale", "message": "m" } })
            )
            .is_empty()
        );
        assert!(!result_problems("renew", &json!({ "ok": false, "error": { "code": "sorry" } })).is_empty());
    }
}
