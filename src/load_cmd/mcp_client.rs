//! A lean MCP client for the load generator: JSON-RPC `tools/call` over Streamable HTTP, one POST
//! per call on a shared keep-alive connection pool, against a stateless server answering in JSON.

use agentprocess_gateway::error_chain;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::fmt;
use std::time::Duration;

use crate::conformance::client::Revision;

/// How long one call may take before it counts as failed.
/// Longer than the longest `get_work` wait (`x-wait-1`), with room for the answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How one tool call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum CallOutcome {
    /// `{ ok: true, data }`.
    Ok(Data),
    /// `{ ok: false, error: { code, message, issues? } }`: the protocol said no.
    Refused(Refusal),
    /// No tool result: the connection, the HTTP status, or the JSON-RPC layer failed.
    Failed(Failure),
}

/// A tool result's `data`, kept as the JSON text the server sent: a caller reads only the fields
/// it needs ([`Data::parse`]) instead of building a value of the whole result, so the load
/// generator's own CPU per call stays small next to the server's.
#[derive(Debug, Clone)]
pub struct Data(Box<RawValue>);

impl Data {
    /// The data read as `T`, borrowing its strings where it can; `None` if it is not a `T`.
    pub fn parse<'a, T: Deserialize<'a>>(&'a self) -> Option<T> {
        serde_json::from_str(self.0.get()).ok()
    }

    /// The data of a JSON value.
    #[cfg(test)]
    pub fn from_value(value: &Value) -> Data {
        Data(RawValue::from_string(value.to_string()).expect("a JSON value writes valid JSON"))
    }
}

impl PartialEq for Data {
    fn eq(&self, other: &Data) -> bool {
        self.0.get() == other.0.get()
    }
}

/// A tool's `error` object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: String,
    pub message: String,
    pub issues: Vec<String>,
}

/// Why a call has no tool result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The request did not complete: connection refused or reset, timeout.
    Transport(String),
    /// An HTTP status other than 200.
    Status(u16),
    /// A JSON-RPC error instead of a result.
    JsonRpc { code: i64, message: String },
    /// A 200 answer that is not a tool result with a `structuredContent` envelope.
    Malformed(String),
}

impl Failure {
    /// A short key for counting failures of one kind together.
    pub fn key(&self) -> String {
        match self {
            Failure::Transport(_) => "transport".to_owned(),
            Failure::Status(status) => format!("http_{status}"),
            Failure::JsonRpc { code, .. } => format!("jsonrpc_{code}"),
            Failure::Malformed(_) => "malformed".to_owned(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Transport(e) => write!(f, "request failed: {e}"),
            Failure::Status(status) => write!(f, "HTTP status {status}"),
            Failure::JsonRpc { code, message } => write!(f, "JSON-RPC error {code}: {message}"),
            Failure::Malformed(e) => write!(f, "not a tool result: {e}"),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)?;
        if !self.issues.is_empty() {
            write!(f, " ({})", self.issues.join("; "))?;
        }
        Ok(())
    }
}

/// The client: cheap to clone, all clones share one connection pool.
#[derive(Debug, Clone)]
pub struct McpClient {
    http: reqwest::Client,
    endpoint: String,
    /// The revision every call names; the gateway is stateless, so no `initialize` handshake
    /// precedes the calls on either.
    revision: Revision,
}

impl McpClient {
    /// A client of the MCP endpoint at `{server}/mcp`, speaking `revision`.
    pub fn new(server: &str, revision: Revision) -> Result<McpClient, reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .tcp_nodelay(true)
            .no_proxy()
            .build()?;
        Ok(McpClient {
            http,
            endpoint: format!("{}/mcp", server.trim_end_matches('/')),
            revision,
        })
    }

    /// Calls `tool` with `arguments` as the holder of `token`.
    pub async fn call(&self, token: &str, tool: &str, arguments: &Value) -> CallOutcome {
        let request = self
            .http
            .post(&self.endpoint)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "application/json, text/event-stream")
            .bearer_auth(token);
        let response = self
            .revision
            .with_headers(request, "tools/call", Some(tool))
            .body(tools_call_body(1, tool, arguments, self.revision))
            .send()
            .await;
        let response = match response {
            Ok(response) => response,
            Err(e) => return CallOutcome::Failed(Failure::Transport(error_chain(&e))),
        };
        let status = response.status().as_u16();
        let body = match response.bytes().await {
            Ok(body) => body,
            Err(e) => return CallOutcome::Failed(Failure::Transport(error_chain(&e))),
        };
        if status != 200 {
            return CallOutcome::Failed(Failure::Status(status));
        }
        parse_tools_call_response(&body)
    }
}

/// The JSON-RPC request body of a `tools/call`; on 2026-07-28 with the client's context in
/// `_meta`, as every request of that revision carries it.
pub fn tools_call_body(id: u64, tool: &str, arguments: &Value, revision: Revision) -> String {
    let mut params = json!({ "name": tool, "arguments": arguments });
    if let Some(meta) = revision.request_meta() {
        params["_meta"] = meta;
    }
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params }).to_string()
}

/// A JSON-RPC answer, read only as far as the load generator needs it: the result's
/// `content` (the same envelope again, as text) is skipped, not parsed.
#[derive(Deserialize)]
struct Answer<'a> {
    #[serde(borrow, default)]
    result: Option<ToolCallResult<'a>>,
    #[serde(default)]
    error: Option<JsonRpcError>,
}

#[derive(Deserialize)]
struct ToolCallResult<'a> {
    #[serde(rename = "structuredContent", borrow, default)]
    structured_content: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct JsonRpcError {
    #[serde(default)]
    code: Option<i64>,
    #[serde(default)]
    message: Option<String>,
}

/// A tool result envelope, its `data` left as JSON text.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default)]
    ok: Option<Value>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<Value>,
}

/// Reads a `tools/call` answer: the `structuredContent` envelope of its result.
pub fn parse_tools_call_response(body: &[u8]) -> CallOutcome {
    let answer: Answer<'_> = match serde_json::from_slice(body) {
        Ok(answer) => answer,
        Err(e) => {
            return CallOutcome::Failed(Failure::Malformed(format!("body is not a JSON-RPC answer: {e}")));
        }
    };
    if let Some(error) = answer.error {
        return CallOutcome::Failed(Failure::JsonRpc {
            code: error.code.unwrap_or(0),
            message: error.message.unwrap_or_default(),
        });
    }
    let Some(envelope) = answer.result.and_then(|result| result.structured_content) else {
        return CallOutcome::Failed(Failure::Malformed(
            "no result.structuredContent in the answer".to_owned(),
        ));
    };
    parse_envelope(envelope.get())
}

/// Reads a tool result envelope (JSON text): `{ ok: true, data }` or `{ ok: false, error }`.
pub fn parse_envelope(envelope: &str) -> CallOutcome {
    let envelope: Envelope<'_> = match serde_json::from_str(envelope) {
        Ok(envelope) => envelope,
        Err(e) => {
            return CallOutcome::Failed(Failure::Malformed(format!("the envelope is not an object: {e}")));
        }
    };
    match envelope.ok.as_ref().and_then(Value::as_bool) {
        Some(true) => CallOutcome::Ok(Data(match envelope.data {
            Some(data) => data.to_owned(),
            None => RawValue::from_string("null".to_owned()).expect("null is JSON"),
        })),
        Some(false) => {
            let error = envelope.error.unwrap_or(Value::Null);
            let text = |key: &str| error.get(key).and_then(Value::as_str).map(str::to_owned);
            let Some(code) = text("code") else {
                return CallOutcome::Failed(Failure::Malformed(
                    "ok is false but error.code is missing".to_owned(),
                ));
            };
            let issues = error
                .get("issues")
                .and_then(Value::as_array)
                .map(|issues| {
                    issues
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            CallOutcome::Refused(Refusal {
                code,
                message: text("message").unwrap_or_default(),
                issues,
            })
        }
        None => CallOutcome::Failed(Failure::Malformed("the envelope has no boolean ok".to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tools_call_body_is_a_json_rpc_request_naming_the_tool() {
        let body: Value = serde_json::from_str(&tools_call_body(
            7,
            "claim",
            &json!({ "runId": "r_1" }),
            Revision::Y2025,
        ))
        .unwrap();
        assert_eq!(
            body,
            json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call",
                    "params": { "name": "claim", "arguments": { "runId": "r_1" } } })
        );
        let body: Value = serde_json::from_str(&tools_call_body(
            7,
            "claim",
            &json!({ "runId": "r_1" }),
            Revision::Y2026,
        ))
        .unwrap();
        assert_eq!(
            body["params"]["_meta"],
            json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {} })
        );
    }

    #[test]
    fn an_ok_envelope_gives_its_data() {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "result": {
            "content": [{ "type": "text", "text": "{}" }],
            "structuredContent": { "ok": true, "data": { "token": "t" } },
            "isError": false } });
        assert_eq!(
            parse_tools_call_response(body.to_string().as_bytes()),
            CallOutcome::Ok(Data::from_value(&json!({ "token": "t" })))
        );
    }

    #[test]
    fn a_refusal_keeps_code_message_and_issues() {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "result": {
            "structuredContent": { "ok": false, "error": {
                "code": "conflict", "message": "claimed", "issues": ["claimed_by_other"] } },
            "isError": true } });
        assert_eq!(
            parse_tools_call_response(body.to_string().as_bytes()),
            CallOutcome::Refused(Refusal {
                code: "conflict".into(),
                message: "claimed".into(),
                issues: vec!["claimed_by_other".into()],
            })
        );
    }

    #[test]
    fn a_json_rpc_error_is_a_failure_not_a_refusal() {
        let body = json!({ "jsonrpc": "2.0", "id": 1,
                           "error": { "code": -32602, "message": "unknown tool" } });
        assert_eq!(
            parse_tools_call_response(body.to_string().as_bytes()),
            CallOutcome::Failed(Failure::JsonRpc {
                code: -32602,
                message: "unknown tool".into()
            })
        );
    }

    #[test]
    fn answers_without_an_envelope_are_malformed() {
        for body in [
            "not json".to_owned(),
            json!({ "jsonrpc": "2.0", "id": 1, "result": { "content": [] } }).to_string(),
            json!({ "jsonrpc": "2.0", "id": 1, "result": { "structuredContent": { "data": 1 } } })
                .to_string(),
            json!({ "jsonrpc": "2.0", "id": 1, "result": { "structuredContent": { "ok": false } } })
                .to_string(),
        ] {
            let outcome = parse_tools_call_response(body.as_bytes());
            assert!(
                matches!(outcome, CallOutcome::Failed(Failure::Malformed(_))),
                "{body}: {outcome:?}"
            );
        }
    }

    #[test]
    fn failure_keys_group_failures_by_kind() {
        assert_eq!(Failure::Status(503).key(), "http_503");
        assert_eq!(
            Failure::JsonRpc {
                code: -32600,
                message: String::new()
            }
            .key(),
            "jsonrpc_-32600"
        );
        assert_eq!(Failure::Transport("reset".into()).key(), "transport");
    }
}
