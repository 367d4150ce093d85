//! The direct path answers exactly what rmcp answers: the same requests over real HTTP to a
//! gateway with the direct path and to one without it, compared status, headers and body bytes.

use crate::auth::dev::{DevKey, DevTokenRequest};
use crate::mcp::{ErrorCode, RunRead, ToolBackend, ToolError, ToolName, ToolResult};
use crate::{ExtraRoutes, GatewayConfig, Identity, IdentityKind};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// The `requestId` the backend refuses.
const REFUSED_REQUEST: &str = "refuse-me";

/// Answers every tool with data that needs escaping in a JSON string, its arguments echoed;
/// refuses a call whose `requestId` is [`REFUSED_REQUEST`].
#[derive(Debug)]
struct Scripted;

impl ToolBackend for Scripted {
    async fn call(&self, identity: &Identity, tool: ToolName, arguments: Value) -> ToolResult {
        if arguments.get("requestId") == Some(&json!(REFUSED_REQUEST)) {
            return Err(
                ToolError::new(ErrorCode::Conflict, "the step is \"claimed\"\nelsewhere")
                    .with_issues(vec!["claimed_by_other".into()]),
            );
        }
        Ok(json!({
            "tool": tool.as_str(),
            "organization": identity.organization.as_str(),
            "arguments": arguments,
            "text": "quotes \" backslash \\ tab\t newline\n control \u{1} é ✓ 😀 </script>",
            "numbers": [0, -7, 2.5, 1e-9, 18446744073709551615u64],
            "nested": { "z": null, "a": [true, false, {}, []] },
        })
        .into())
    }

    async fn read_run(&self, _: &Identity, read: RunRead, run_id: &str) -> ToolResult {
        Ok(json!({ "read": read.as_str(), "runId": run_id }).into())
    }
}

/// A gateway on a loopback port: dev auth, the [`Scripted`] backend.
struct Gateway {
    address: String,
    token: String,
    _data: tempfile::TempDir,
}

async fn start(direct_calls: bool) -> Gateway {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let data = tempfile::tempdir().unwrap();
    let config = GatewayConfig {
        public_url: format!("http://{address}"),
        data_dir: data.path().to_owned(),
        ..GatewayConfig::default()
    };
    let app = crate::build_router(&config, Scripted, ExtraRoutes::default(), direct_calls)
        .unwrap()
        .router;
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let token = DevKey::load_or_create(data.path()).unwrap().mint(
        &config.public_url,
        &DevTokenRequest {
            organization: "acme".into(),
            kind: IdentityKind::Agent {
                id: "a_screener".into(),
            },
            operator: true,
            ttl: Duration::from_secs(600),
        },
    );
    Gateway {
        address,
        token,
        _data: data,
    }
}

/// One request: its body and its headers, by name; `{token}` and `{host}` in a value are the
/// gateway's.
#[derive(Debug, Clone)]
struct Case {
    what: &'static str,
    headers: Vec<(&'static str, String)>,
    body: String,
    /// Whether the direct path answers it.
    direct: bool,
}

/// The headers of a Streamable HTTP client of 2025-06-18.
fn plain_headers() -> Vec<(&'static str, String)> {
    vec![
        ("Host", "{host}".into()),
        ("Authorization", "Bearer {token}".into()),
        ("Content-Type", "application/json".into()),
        ("Accept", "application/json, text/event-stream".into()),
        ("MCP-Protocol-Version", "2025-06-18".into()),
    ]
}

fn tools_call(id: Value, tool: &str, arguments: Value) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": tool, "arguments": arguments } })
    .to_string()
}

/// A 2026-07-28 `tools/call` with `meta` as its `_meta`.
fn self_contained_call(id: Value, tool: &str, arguments: Value, meta: Value) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": tool, "arguments": arguments, "_meta": meta } })
    .to_string()
}

/// The `_meta` a 2026-07-28 request must carry.
fn meta() -> Value {
    json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} })
}

fn with(mut object: Value, key: &str, value: Value) -> Value {
    object[key] = value;
    object
}

/// Arguments each tool's schema accepts.
fn valid_arguments(tool: ToolName) -> Value {
    match tool {
        ToolName::Describe => json!({}),
        ToolName::ListProcesses => json!({ "cursor": "c1" }),
        ToolName::StartRun => {
            json!({ "process": "invoice", "inputs": { "amount": 48000, "note": "a \"quoted\" note" }, "requestId": "q1" })
        }
        ToolName::GetRun => json!({ "runId": "r_8f2" }),
        ToolName::GetWork => json!({ "limit": 10 }),
        ToolName::Claim => json!({ "runId": "r_8f2", "stepId": "check", "requestId": "q2" }),
        ToolName::Renew => json!({ "token": "t", "progress": "half way", "requestId": "q3" }),
        ToolName::Upload => {
            json!({ "fileName": "a.pdf", "contentType": "application/pdf", "contentBase64": "aGVsbG8=", "requestId": "q4" })
        }
        ToolName::Submit => {
            json!({ "token": "t", "output": { "ok": true }, "summary": "done", "requestId": "q5" })
        }
        ToolName::Escalate => json!({ "token": "t", "note": "help", "requestId": "q6" }),
        ToolName::Decide => {
            json!({ "runId": "r_8f2", "workItemId": "w1", "snapshot": "s1", "decision": "approved", "requestId": "q7" })
        }
        ToolName::Cancel => json!({ "runId": "r_8f2", "reason": "duplicate", "requestId": "q8" }),
        ToolName::SendEvent => {
            json!({ "runId": "r_8f2", "name": "paid", "data": { "x": 1 }, "requestId": "q9" })
        }
        ToolName::ListRuns => json!({ "state": "active", "limit": 5 }),
    }
}

fn cases() -> Vec<Case> {
    let direct = |what, body: String| Case {
        what,
        headers: plain_headers(),
        body,
        direct: true,
    };
    let to_rmcp = |what, body: String| Case {
        what,
        headers: plain_headers(),
        body,
        direct: false,
    };
    let with_header = |case: Case, name: &'static str, value: Option<&str>, direct: bool| {
        let mut headers: Vec<_> = case
            .headers
            .into_iter()
            .filter(|(header, _)| !header.eq_ignore_ascii_case(name))
            .collect();
        if let Some(value) = value {
            headers.push((name, value.to_owned()));
        }
        Case {
            headers,
            direct,
            ..case
        }
    };
    let describe = || direct("describe", tools_call(json!(1), "describe", json!({})));
    // A 2026-07-28 request: the revision in its header and `_meta`, its method and tool in the
    // standard headers (the tool's name read from the body).
    let self_contained = |what, body: String, direct: bool| {
        let tool = serde_json::from_str::<Value>(&body).unwrap()["params"]["name"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut headers: Vec<_> = plain_headers()
            .into_iter()
            .filter(|(name, _)| *name != "MCP-Protocol-Version")
            .collect();
        headers.extend([
            ("MCP-Protocol-Version", "2026-07-28".to_owned()),
            ("Mcp-Method", "tools/call".to_owned()),
            ("Mcp-Name", tool),
        ]);
        Case {
            what,
            headers,
            body,
            direct,
        }
    };

    let mut cases: Vec<Case> = ToolName::ALL
        .into_iter()
        .map(|tool| {
            direct(
                tool.as_str(),
                tools_call(json!(1), tool.as_str(), valid_arguments(tool)),
            )
        })
        .collect();
    cases.extend([
        direct(
            "a refusal",
            tools_call(json!(2), "submit", json!({ "token": "t", "output": {}, "summary": "s", "requestId": REFUSED_REQUEST })),
        ),
        direct(
            "invalid arguments",
            tools_call(json!(3), "get_work", json!({ "limit": "ten", "colour": 1 })),
        ),
        direct(
            "no arguments",
            json!({ "jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": { "name": "get_work" } })
                .to_string(),
        ),
        direct(
            "null arguments",
            json!({ "jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": { "name": "describe", "arguments": null } })
                .to_string(),
        ),
        direct(
            "a string id",
            tools_call(json!("call-\"7\"/é"), "get_run", json!({ "runId": "r_1" })),
        ),
        direct("a negative id", tools_call(json!(-12), "describe", json!({}))),
        direct(
            "a string progress token",
            json!({ "jsonrpc": "2.0", "id": 5, "method": "tools/call",
                    "params": { "name": "describe", "arguments": {}, "_meta": { "progressToken": "p-1" } } })
            .to_string(),
        ),
        direct(
            "a numeric progress token",
            json!({ "jsonrpc": "2.0", "id": 6, "method": "tools/call",
                    "params": { "name": "get_run", "arguments": { "runId": "r_2" }, "_meta": { "progressToken": 99 } } })
            .to_string(),
        ),
        with_header(describe(), "MCP-Protocol-Version", None, true),
        with_header(describe(), "MCP-Protocol-Version", Some("2025-11-25"), true),
        with_header(describe(), "MCP-Protocol-Version", Some("2025-03-26"), true),
        with_header(describe(), "MCP-Protocol-Version", Some("2024-11-05"), true),
        with_header(describe(), "MCP-Protocol-Version", Some("2026-07-28"), false),
        self_contained("a 2026-07-28 call", self_contained_call(json!(40), "get_run", json!({ "runId": "r_1" }), meta()), true),
        self_contained("a 2026-07-28 refusal", self_contained_call(json!(41), "submit",
            json!({ "token": "t", "output": {}, "summary": "s", "requestId": REFUSED_REQUEST }), meta()), true),
        self_contained("a 2026-07-28 call with the client's name", self_contained_call(json!("c-42"), "describe", json!({}),
            with(meta(), "io.modelcontextprotocol/clientInfo", json!({ "name": "c", "version": "1" }))), true),
        self_contained("a 2026-07-28 call with a trace context", self_contained_call(json!(43), "get_work", json!({ "limit": 3 }),
            with(meta(), "traceparent", json!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))), true),
        self_contained("a 2026-07-28 call of invalid arguments", self_contained_call(json!(44), "get_work", json!({ "limit": "ten" }), meta()), true),
        self_contained("2026-07-28 without client capabilities", self_contained_call(json!(45), "describe", json!({}),
            json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28" })), false),
        self_contained("2026-07-28 naming another revision in _meta", self_contained_call(json!(46), "describe", json!({}),
            with(meta(), "io.modelcontextprotocol/protocolVersion", json!("2025-11-25"))), false),
        self_contained("2026-07-28 with a log level", self_contained_call(json!(47), "describe", json!({}),
            with(meta(), "io.modelcontextprotocol/logLevel", json!("debug"))), false),
        self_contained("2026-07-28 with a progress token", self_contained_call(json!(48), "describe", json!({}),
            with(meta(), "progressToken", json!(1))), false),
        self_contained("2026-07-28 without _meta", tools_call(json!(49), "describe", json!({})), false),
        with_header(self_contained("2026-07-28 without Mcp-Method", self_contained_call(json!(50), "describe", json!({}), meta()), false),
            "Mcp-Method", None, false),
        with_header(self_contained("2026-07-28 naming another tool", self_contained_call(json!(51), "describe", json!({}), meta()), false),
            "Mcp-Name", Some("get_run"), false),
        with_header(self_contained("2026-07-28 with a parameter header", self_contained_call(json!(52), "describe", json!({}), meta()), false),
            "Mcp-Param-Region", Some("eu"), false),
        with_header(describe(), "MCP-Protocol-Version", Some("1999-01-01"), false),
        with_header(describe(), "Accept", Some("application/json"), false),
        with_header(describe(), "Accept", Some("text/event-stream"), false),
        with_header(describe(), "Accept", None, false),
        with_header(describe(), "Accept", Some("application/json;q=0.9, text/event-stream;q=0"), false),
        with_header(describe(), "Accept", Some("application/json;q=0.5, text/event-stream"), false),
        with_header(describe(), "Accept", Some("Application/JSON, TEXT/event-stream; charset=utf-8"), true),
        with_header(describe(), "Host", Some("evil.example"), false),
        with_header(describe(), "Host", Some("LOCALHOST:1"), true),
        with_header(describe(), "Content-Type", Some("text/plain"), false),
        with_header(describe(), "Content-Type", Some("application/json; charset=utf-8"), true),
        with_header(describe(), "Authorization", None, false),
        to_rmcp(
            "an unknown tool",
            tools_call(json!(8), "delete_everything", json!({})),
        ),
        to_rmcp("tools/list", json!({ "jsonrpc": "2.0", "id": 9, "method": "tools/list" }).to_string()),
        to_rmcp(
            "a notification",
            json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }).to_string(),
        ),
        to_rmcp(
            "a batch",
            format!("[{}]", tools_call(json!(10), "describe", json!({}))),
        ),
        to_rmcp("an id written as a float", tools_call(json!(11.0), "describe", json!({}))),
        to_rmcp("an id too large", tools_call(json!(u64::MAX), "describe", json!({}))),
        to_rmcp("a null id", tools_call(Value::Null, "describe", json!({}))),
        to_rmcp(
            "another JSON-RPC version",
            json!({ "jsonrpc": "1.0", "id": 12, "method": "tools/call", "params": { "name": "describe" } })
                .to_string(),
        ),
        to_rmcp(
            "an unknown member",
            json!({ "jsonrpc": "2.0", "id": 13, "method": "tools/call", "params": { "name": "describe" }, "extra": 1 })
                .to_string(),
        ),
        to_rmcp(
            "other _meta",
            json!({ "jsonrpc": "2.0", "id": 14, "method": "tools/call",
                    "params": { "name": "describe", "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28" } } })
            .to_string(),
        ),
        to_rmcp(
            "arguments not an object",
            json!({ "jsonrpc": "2.0", "id": 15, "method": "tools/call", "params": { "name": "describe", "arguments": [1] } })
                .to_string(),
        ),
        to_rmcp("not JSON", "{ not json".into()),
    ]);
    cases
}

/// An HTTP answer as it came off the wire: status, headers but `Date` (lower-case, in order, the
/// gateway's own address in them written `{host}`), and body bytes.
#[derive(Debug, PartialEq)]
struct Answer {
    status: String,
    headers: Vec<String>,
    body: Vec<u8>,
}

/// Sends `case` to `gateway` over a fresh connection, as raw HTTP/1.1, and reads the answer.
async fn send(gateway: &Gateway, case: &Case) -> Answer {
    let mut request = String::from("POST /mcp HTTP/1.1\r\nConnection: close\r\n");
    for (name, value) in &case.headers {
        let value = value
            .replace("{host}", &gateway.address)
            .replace("{token}", &gateway.token);
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!(
        "Content-Length: {}\r\n\r\n{}",
        case.body.len(),
        case.body
    ));
    let mut stream = tokio::net::TcpStream::connect(&gateway.address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let split = raw
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("{}: no end of headers in {raw:?}", case.what));
    let head = String::from_utf8(raw[..split].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().to_owned();
    let headers = lines
        .map(|line| line.replace(&gateway.address, "{host}").to_ascii_lowercase())
        .filter(|line| !line.starts_with("date:"))
        .collect();
    Answer {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    }
}

/// The names of the spans opened while it is the thread's subscriber.
#[derive(Debug, Default, Clone)]
struct SpanNames {
    names: Arc<Mutex<Vec<&'static str>>>,
}

impl SpanNames {
    fn take(&self) -> Vec<&'static str> {
        std::mem::take(&mut *self.names.lock().unwrap())
    }
}

impl Subscriber for SpanNames {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut names = self.names.lock().unwrap();
        names.push(span.metadata().name());
        Id::from_u64(names.len() as u64)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, _: &Event<'_>) {}

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// rmcp's span around the serve loop it starts for each stateless request.
const RMCP_SERVE_SPAN: &str = "serve_inner";

/// The whole comparison, on one thread, so that the span recorder sees the servers' tasks.
#[tokio::test(flavor = "current_thread")]
async fn the_direct_path_answers_byte_for_byte_what_rmcp_answers() {
    let spans = SpanNames::default();
    let _recording = tracing::subscriber::set_default(spans.clone());
    let direct = start(true).await;
    let rmcp = start(false).await;
    for case in cases() {
        let by_rmcp = send(&rmcp, &case).await;
        let rmcp_spans = spans.take();
        let by_direct = send(&direct, &case).await;
        let direct_spans = spans.take();
        assert_eq!(
            String::from_utf8_lossy(&by_direct.body),
            String::from_utf8_lossy(&by_rmcp.body),
            "{}",
            case.what
        );
        assert_eq!(by_direct, by_rmcp, "{}", case.what);
        if case.direct {
            assert!(by_rmcp.status.contains(" 200 "), "{}: {:?}", case.what, by_rmcp);
            assert!(
                rmcp_spans.contains(&RMCP_SERVE_SPAN),
                "{}: {rmcp_spans:?}",
                case.what
            );
            assert!(
                direct_spans.contains(&"tool_call"),
                "{}: {direct_spans:?}",
                case.what
            );
            assert!(
                !direct_spans.contains(&RMCP_SERVE_SPAN),
                "{}: rmcp answered, not the direct path: {direct_spans:?}",
                case.what
            );
        } else {
            let called_a_tool = direct_spans.contains(&"tool_call");
            assert!(
                !called_a_tool || direct_spans.contains(&RMCP_SERVE_SPAN),
                "{}: the direct path took it: {direct_spans:?}",
                case.what
            );
        }
    }
}

#[test]
fn only_a_plain_tools_call_is_parsed_for_the_direct_path() {
    use super::{Revision, ToolsCall};
    use rmcp::model::RequestId;
    let call = ToolsCall::parse(
        tools_call(json!(3), "claim", json!({ "runId": "r" })).as_bytes(),
        Revision::Session,
    );
    assert_eq!(
        call,
        Some(ToolsCall {
            id: RequestId::Number(3),
            tool: ToolName::Claim,
            arguments: json!({ "runId": "r" }).as_object().cloned(),
            traceparent: None,
        })
    );
    for body in [
        tools_call(json!(1.5), "claim", json!({})),
        tools_call(json!(true), "claim", json!({})),
        tools_call(json!(1), "claims", json!({})),
        json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": { "name": "claim" } }).to_string(),
        json!({ "jsonrpc": "2.0", "method": "tools/call", "params": { "name": "claim" } }).to_string(),
        json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "claim", "task": {} } })
            .to_string(),
        json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": { "name": "claim", "_meta": { "progressToken": {} } } })
        .to_string(),
        r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"claim"}}"#.to_owned(),
    ] {
        assert_eq!(ToolsCall::parse(body.as_bytes(), Revision::Session), None, "{body}");
    }
}
