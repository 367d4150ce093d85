//! `agentprocess serve` given bad input: malformed JSON-RPC, unknown tools, bodies and uploads over
//! the limits, a wrong-typed value in every argument of every tool (tools.md: arguments as the
//! schemas fix them, `invalid` with `issues` naming the argument), and bad settings at startup.
//! Each gets a clear error, and the server keeps serving with nothing changed.

mod common;

use common::{Mcp, Server, Who, request_id, status_and_json};
use serde_json::{Map, Value, json};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const AGENT: Who = Who::Agent("a_ap");

/// A raw POST to the MCP endpoint: status and the body as JSON (`Null` if it is not JSON).
async fn post_raw(server: &Server, body: impl Into<reqwest::Body>) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(server.mcp_url())
        .bearer_auth(server.token(&AGENT))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    status_and_json(response).await
}

/// Asserts `body` is a JSON-RPC 2.0 error with `code` whose message contains `says`.
fn assert_jsonrpc_error(body: &Value, code: i64, says: &str) {
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(says),
        "{message:?} does not say {says:?}: {body}"
    );
}

/// What the server holds, to compare before and after the bad input.
async fn state_of(client: &Mcp) -> (Value, Value) {
    (
        client.ok("list_runs", json!({})).await,
        client.ok("list_processes", json!({})).await,
    )
}

async fn start_one_run(client: &Mcp) {
    client.start_purchase_request("PR-1").await;
}

/// JSON-RPC 2.0 §5.1: a body that is not JSON is a parse error (-32700); one that is not a
/// request (wrong `jsonrpc`, no `method`, a batch) an invalid request (-32600); both HTTP 400.
/// An unknown tool is an error naming it. Afterwards the server answers and nothing changed.
#[tokio::test(flavor = "multi_thread")]
async fn malformed_json_rpc_gets_json_rpc_errors() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("purchase-request");
    let client = server.client(&AGENT).await;
    start_one_run(&client).await;
    let before = state_of(&client).await;

    let (status, body) = post_raw(&server, "{ this is not json").await;
    assert_eq!(status, 400);
    assert_jsonrpc_error(&body, -32700, "not JSON");

    let call = |jsonrpc: &str| {
        json!({ "jsonrpc": jsonrpc, "id": 7, "method": "tools/call",
                "params": { "name": "describe", "arguments": {} } })
    };
    let (status, body) = post_raw(&server, call("1.0").to_string()).await;
    assert_eq!(status, 400, "{body}");
    assert_jsonrpc_error(&body, -32600, "JSON-RPC 2.0");
    assert_eq!(body["id"], 7, "the id is echoed when it can be read: {body}");

    let (status, body) = post_raw(&server, json!({ "jsonrpc": "2.0", "id": 8 }).to_string()).await;
    assert_eq!(status, 400, "{body}");
    assert_jsonrpc_error(&body, -32600, "JSON-RPC 2.0");

    let (status, body) = post_raw(&server, json!([call("2.0"), call("2.0")]).to_string()).await;
    assert_eq!(status, 400, "{body}");
    assert_jsonrpc_error(&body, -32600, "JSON-RPC 2.0");

    let (status, body) = post_raw(
        &server,
        json!({ "jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": { "name": "delete_everything", "arguments": {} } })
        .to_string(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["id"], 9, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("delete_everything"), "{body}");
    assert_eq!(body["error"]["code"], -32602, "invalid params: {body}");

    let (status, body) = post_raw(
        &server,
        json!({ "jsonrpc": "2.0", "id": 10, "method": "no/such/method" }).to_string(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["error"]["code"], -32601, "method not found: {body}");

    let described = client.ok("describe", json!({})).await;
    assert_eq!(described["version"], "core-2");
    assert_eq!(state_of(&client).await, before);
    client.close().await;
}

/// Limits: a request body over the request limit is refused before it is read in full (HTTP 413,
/// a JSON-RPC error saying the limit); an upload over `maxUploadBytes` is `invalid` naming
/// `contentBase64`, and one at the limit is stored.
#[tokio::test(flavor = "multi_thread")]
async fn bodies_and_uploads_over_the_limits_are_refused() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        data.path(),
        &[],
        &[("AGENTPROCESS_LIMITS__MAX_UPLOAD_BYTES", "1024")],
    );
    server.publish_example("purchase-request");
    let client = server.client(&AGENT).await;
    start_one_run(&client).await;
    let before = state_of(&client).await;
    let described = client.ok("describe", json!({})).await;
    assert_eq!(described["maxUploadBytes"], 1024, "{described}");

    let huge = "A".repeat(3 << 20);
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": { "name": "upload", "arguments": {
                           "fileName": "big.bin", "contentType": "application/octet-stream",
                           "contentBase64": huge, "requestId": request_id() } } });
    let (status, body) = post_raw(&server, body.to_string()).await;
    assert_eq!(status, 413, "{body}");
    assert_jsonrpc_error(&body, -32600, "larger than this server's limit");

    let upload = |bytes: usize| {
        json!({ "fileName": "f.bin", "contentType": "application/octet-stream",
                "contentBase64": base64(&vec![7u8; bytes]), "requestId": request_id() })
    };
    let refused = client.refused("upload", upload(1025), "invalid").await;
    assert_eq!(
        refused["issues"],
        json!(["contentBase64: larger than 1024 bytes"]),
        "{refused}"
    );
    let stored = client.ok("upload", upload(1024)).await;
    assert_eq!(stored["bytes"], 1024, "{stored}");

    assert_eq!(client.ok("describe", json!({})).await["version"], "core-2");
    assert_eq!(state_of(&client).await, before);
    client.close().await;
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `property` of the published `schema`, or what it refers to in the schema's `$defs`.
fn resolved(schema: &Value, property: Value) -> Value {
    match property["$ref"]
        .as_str()
        .and_then(|reference| reference.strip_prefix("#/$defs/"))
    {
        Some(name) => schema["$defs"][name].clone(),
        None => property,
    }
}

/// A value of the right type for `schema`, inside its bounds.
fn right_value(schema: &Value) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|values| values.first()) {
        return first.clone();
    }
    match schema["type"].as_str() {
        Some("string") => json!("x"),
        Some("integer") | Some("number") => json!(1),
        Some("boolean") => json!(true),
        Some("object") => json!({}),
        Some("array") => json!([]),
        other => panic!("no right value for type {other:?}"),
    }
}

/// Values of the wrong type for `schema`.
fn wrong_values(schema: &Value) -> Vec<Value> {
    match schema["type"].as_str() {
        Some("string") => vec![json!(42), json!(null), json!(["x"])],
        Some("integer") | Some("number") => vec![json!("7"), json!(null), json!(true)],
        Some("boolean") => vec![json!("true"), json!(1)],
        Some("object") => vec![json!("x"), json!([]), json!(null)],
        Some("array") => vec![json!("x"), json!({}), json!(7)],
        other => panic!("no wrong values for type {other:?}"),
    }
}

/// tools.md: every tool's arguments as its published `inputSchema` fixes them. A wrong-typed
/// value in any argument, all others right, is `invalid` with the issue `"<argument>: expected
/// <type>"` (plus, for an enum, one saying the value is not allowed) and no other; nothing changes
/// and the server keeps answering.
#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_type_in_any_argument_of_any_tool_is_invalid_naming_it() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("purchase-request");
    let client = server.client(&AGENT).await;
    start_one_run(&client).await;
    let before = state_of(&client).await;

    let mut checked = 0;
    let mut tools: Vec<(String, Value)> = client
        .published_schemas()
        .await
        .into_iter()
        .map(|(tool, (input, _))| (tool, input))
        .collect();
    tools.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(tools.len(), 14, "every tool has an argument schema");
    for (tool, schema) in tools {
        let properties: Map<String, Value> = schema["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|(name, property)| (name, resolved(&schema, property)))
            .collect();
        let right: Map<String, Value> = properties
            .iter()
            .map(|(name, property)| (name.clone(), right_value(property)))
            .collect();
        for (name, property) in &properties {
            let expected = property["type"].as_str().unwrap();
            for wrong in wrong_values(property) {
                let mut arguments = right.clone();
                arguments.insert(name.clone(), wrong.clone());
                let error = client.refused(&tool, Value::Object(arguments), "invalid").await;
                // The type issue, and (for an enum) that the value is none of the allowed ones:
                // every issue names this argument.
                let issues = error["issues"].as_array().unwrap();
                assert_eq!(
                    issues[0],
                    format!("{name}: expected {expected}"),
                    "{tool}.{name} = {wrong}: {error}"
                );
                assert_eq!(
                    issues.len(),
                    1 + usize::from(property.get("enum").is_some()),
                    "{error}"
                );
                assert!(
                    issues
                        .iter()
                        .all(|issue| issue.as_str().unwrap().starts_with(&format!("{name}: "))),
                    "{tool}.{name} = {wrong}: {error}"
                );
                checked += 1;
            }
        }
        // And an argument the tool does not have.
        let mut arguments = right.clone();
        arguments.insert("colour".to_owned(), json!("red"));
        let error = client.refused(&tool, Value::Object(arguments), "invalid").await;
        assert_eq!(
            error["issues"],
            json!(["colour: not a known argument"]),
            "{tool}: {error}"
        );
    }
    assert!(checked > 100, "{checked} wrong values sent");

    assert_eq!(client.ok("describe", json!({})).await["version"], "core-2");
    assert_eq!(state_of(&client).await, before);
    client.close().await;
}

/// Runs `serve` with `args` and `env` and expects it to exit non-zero within a few seconds;
/// returns its stderr.
fn serve_fails(data: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentprocess"))
        .arg("serve")
        .arg("--data")
        .arg(data)
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve {args:?} {env:?} kept running");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "serve {args:?} {env:?} exited {status}");
    stderr
}

/// Bad settings stop `serve` at startup with a message naming what is wrong.
#[test]
fn bad_settings_stop_serve_with_a_clear_message() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("settings.toml");

    std::fs::write(&config, "lease_seconds = \"ten\"\n").unwrap();
    let stderr = serve_fails(data.path(), &["--config", config.to_str().unwrap()], &[]);
    assert!(stderr.contains("lease_seconds"), "{stderr}");

    std::fs::write(&config, "this is [ not toml\n").unwrap();
    let stderr = serve_fails(data.path(), &["--config", config.to_str().unwrap()], &[]);
    assert!(stderr.contains("settings.toml"), "{stderr}");

    std::fs::write(&config, "[limits]\ncheck_pass = 3.5\n").unwrap();
    let stderr = serve_fails(data.path(), &["--config", config.to_str().unwrap()], &[]);
    assert!(
        stderr.contains("limits.check_pass must be a number from 0 to 1"),
        "{stderr}"
    );

    let missing = data.path().join("nowhere.toml");
    let stderr = serve_fails(data.path(), &["--config", missing.to_str().unwrap()], &[]);
    assert!(stderr.contains("does not exist"), "{stderr}");

    let stderr = serve_fails(
        data.path(),
        &[],
        &[("AGENTPROCESS_LIMITS__MAX_UPLOAD_BYTES", "lots")],
    );
    assert!(stderr.to_lowercase().contains("max_upload_bytes"), "{stderr}");
    assert!(stderr.contains("\"lots\""), "{stderr}");

    let stderr = serve_fails(data.path(), &[], &[("AGENTPROCESS_LEASE_SECONDS", "0")]);
    assert!(stderr.contains("lease_seconds must be at least 1"), "{stderr}");

    std::fs::write(&config, "[admission]\ncalls_per_second_per_identity = -2\n").unwrap();
    let stderr = serve_fails(data.path(), &["--config", config.to_str().unwrap()], &[]);
    assert!(
        stderr.contains("admission.calls_per_second_per_identity must be a number of 0 or more"),
        "{stderr}"
    );
}
