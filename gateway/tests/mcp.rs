//! The MCP endpoint driven by the rmcp client over real HTTP: the tool list, `describe`, argument
//! validation, routing to the backend, protocol revisions, and what the transport refuses.

mod common;

use agentprocess_gateway::tool::schemas::{self, ID_PREFIX, bundle};
use agentprocess_gateway::{DescribeConfig, IdentityKind, ToolName};
use agentprocess_testkit::{SchemaSet, assert_matches_schema, assert_matches_standalone, schemas_dir};
use common::{TestServer, initialize, post_mcp, post_mcp_with, start_dev, start_with};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ServiceError, ServiceExt};
use serde_json::{Map, Value, json};

type Client = RunningService<RoleClient, ClientConfig>;

/// An rmcp client for `server` with a dev agent token, speaking `version`.
async fn connect_as(server: &TestServer, version: ProtocolVersion) -> Client {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(server.mcp_url()).auth_header(server.agent_token()),
    );
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("gateway-tests", "0"),
    )
    .with_protocol_version(version)
    .serve(transport)
    .await
    .expect("the client connects")
}

async fn connect(server: &TestServer) -> Client {
    connect_as(server, ProtocolVersion::default()).await
}

async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    let arguments: Map<String, Value> = serde_json::from_value(arguments).unwrap();
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// The `{ ok, ... }` envelope, checked to be the same as structured content and as text.
fn envelope(result: &CallToolResult) -> Value {
    let structured = result.structured_content.clone().expect("structured content");
    let text = result.content[0].as_text().expect("a text block").text.clone();
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        structured,
        "text and structured content agree"
    );
    structured
}

/// `schema` bundled from the files of the schema folder, as a test reads them.
fn bundled_from_folder(schema: &Value) -> Value {
    bundle(schema, |name| {
        SchemaSet::ours().by_id(&format!("{ID_PREFIX}{name}")).cloned()
    })
    .unwrap_or_else(|e| panic!("the schema folder does not bundle: {e}"))
}

/// The `outputSchema` `tools/list` publishes for `tool`.
async fn published_output_schema(client: &Client, tool: &str) -> Value {
    let tools = client.list_all_tools().await.unwrap();
    let listed = tools
        .into_iter()
        .find(|listed| listed.name == tool)
        .unwrap_or_else(|| panic!("tools/list has no {tool}"));
    Value::Object((*listed.output_schema.expect("an outputSchema")).clone())
}

/// tools.md, "JSON Schemas": every tool is listed with our `tools/<name>.arguments.json` as
/// `inputSchema` and the envelope of our `tools/<name>.result.json` as `outputSchema`, bundled
/// so that each stands alone.
#[tokio::test]
async fn lists_the_fourteen_tools_with_our_schemas_bundled() {
    let server = start_dev().await;
    let client = connect(&server).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, ToolName::ALL.map(ToolName::as_str));
    for tool in &tools {
        let arguments = SchemaSet::ours()
            .file(&format!("tools/{}.arguments.json", tool.name))
            .unwrap();
        assert_eq!(
            Value::Object((*tool.input_schema).clone()),
            bundled_from_folder(arguments),
            "{}: inputSchema",
            tool.name
        );
        let output = Value::Object((*tool.output_schema.clone().expect("an outputSchema")).clone());
        assert_eq!(
            output,
            bundled_from_folder(&schemas::envelope(&tool.name)),
            "{}: outputSchema",
            tool.name
        );
        assert_eq!(output["type"], json!("object"));
        assert!(tool.description.as_deref().is_some_and(|d| !d.is_empty()));
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn describe_matches_its_schema() {
    let server = start_dev().await;
    let client = connect(&server).await;
    let result = call(&client, "describe", json!({})).await;
    assert_eq!(result.is_error, Some(false));
    let body = envelope(&result);
    assert_eq!(body["ok"], json!(true));
    assert_matches_schema("tools/describe.result.json", &body["data"]);
    let published = published_output_schema(&client, "describe").await;
    assert_matches_standalone("the outputSchema of describe", &published, &body);
    assert_eq!(body["data"]["version"], json!("core-2"));
    assert_eq!(body["data"]["profiles"], json!(["parallel-1", "x-wait-1"]));
    assert_eq!(body["data"]["person"], json!({ "format": "email" }));
    assert_eq!(body["data"]["tools"].as_array().unwrap().len(), 14);
    assert!(
        server.recorder.calls().is_empty(),
        "describe is answered by the gateway"
    );
}

#[tokio::test]
async fn describe_offers_check_only_with_an_evaluator() {
    let describe = DescribeConfig {
        evaluator_configured: true,
        lease_seconds: 120,
        ..DescribeConfig::default()
    };
    let server = start_with(Default::default(), describe, None).await;
    let client = connect(&server).await;
    let body = envelope(&call(&client, "describe", json!({})).await);
    assert_matches_schema("tools/describe.result.json", &body["data"]);
    assert_eq!(
        body["data"]["profiles"],
        json!(["parallel-1", "check-1", "x-wait-1"])
    );
    assert_eq!(body["data"]["leaseSeconds"], json!(120));
}

#[tokio::test]
async fn arguments_that_break_the_schema_are_invalid_with_every_issue() {
    let server = start_dev().await;
    let client = connect(&server).await;
    let cases = [
        (
            "describe",
            json!({ "verbose": true }),
            vec!["verbose: not a known argument"],
        ),
        (
            "get_work",
            json!({ "limit": "ten" }),
            vec!["limit: expected integer"],
        ),
        ("get_work", json!({ "limit": 500 }), vec!["limit: "]),
        (
            "claim",
            json!({ "runId": 7 }),
            vec!["runId: expected string", "stepId: missing", "requestId: missing"],
        ),
        (
            "start_run",
            json!({ "process": "p", "inputs": "none", "requestId": "q" }),
            vec!["inputs: expected object"],
        ),
        (
            "submit",
            json!({ "token": "t", "output": {}, "summary": "s", "requestId": "q", "evidence": [{ "kind": "photo", "ref": "x" }] }),
            vec!["evidence[0].kind: "],
        ),
        (
            "decide",
            json!({ "runId": "r", "workItemId": "w", "snapshot": "s", "decision": "maybe", "requestId": "q" }),
            vec!["decision: "],
        ),
        ("list_runs", json!({ "state": "sleeping" }), vec!["state: "]),
        (
            "send_event",
            json!({ "runId": "r", "name": "n", "data": [1], "requestId": "q" }),
            vec!["data: expected object"],
        ),
        (
            "upload",
            json!({ "fileName": "a.pdf", "contentType": "application/pdf", "requestId": "q" }),
            vec!["contentBase64: missing"],
        ),
    ];
    for (tool, arguments, expected) in cases {
        let result = call(&client, tool, arguments.clone()).await;
        assert_eq!(result.is_error, Some(true), "{tool} {arguments}");
        let body = envelope(&result);
        assert_eq!(body["ok"], json!(false), "{tool} {arguments}");
        assert_matches_schema("tool-error.json", &body["error"]);
        let published = published_output_schema(&client, tool).await;
        assert_matches_standalone(&format!("the outputSchema of {tool}"), &published, &body);
        assert_eq!(body["error"]["code"], json!("invalid"), "{tool} {arguments}");
        let mut issues: Vec<&str> = body["error"]["issues"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_str().unwrap())
            .collect();
        issues.sort();
        let mut expected = expected;
        expected.sort();
        assert_eq!(issues.len(), expected.len(), "{tool}: {issues:?}");
        for (issue, wanted) in issues.iter().zip(&expected) {
            assert!(
                issue.starts_with(wanted),
                "{tool}: {issue:?} should start with {wanted:?}"
            );
        }
    }
    assert!(
        server.recorder.calls().is_empty(),
        "no invalid call reaches the backend"
    );
}

#[tokio::test]
async fn a_valid_call_reaches_the_backend_with_the_callers_identity() {
    let server = start_dev().await;
    let client = connect(&server).await;
    let arguments = json!({ "runId": "r_8f2", "stepId": "check_vendor", "requestId": "q1" });
    let body = envelope(&call(&client, "claim", arguments.clone()).await);
    assert_eq!(body, json!({ "ok": true, "data": { "tool": "claim" } }));
    let calls = server.recorder.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].tool, ToolName::Claim);
    assert_eq!(calls[0].arguments, arguments);
    assert_eq!(calls[0].identity.organization, "acme");
    assert_eq!(
        calls[0].identity.kind,
        IdentityKind::Agent {
            id: "a_screener".into()
        }
    );
    assert!(!calls[0].identity.operator);

    // No arguments at all is an empty object.
    envelope(&call(&client, "list_processes", json!({})).await);
    let result = client
        .call_tool(CallToolRequestParams::new("get_work"))
        .await
        .unwrap();
    assert_eq!(envelope(&result)["ok"], json!(true));
    assert_eq!(server.recorder.calls().last().unwrap().arguments, json!({}));
}

#[tokio::test]
async fn an_unknown_tool_is_an_mcp_error() {
    let server = start_dev().await;
    let client = connect(&server).await;
    let error = client
        .call_tool(CallToolRequestParams::new("delete_everything"))
        .await
        .expect_err("unknown tool");
    let ServiceError::McpError(error) = error else {
        panic!("expected an MCP error, got {error:?}")
    };
    assert_eq!(error.code.0, -32602);
    assert!(error.message.contains("delete_everything"), "{}", error.message);
}

#[tokio::test]
async fn current_and_previous_protocol_revisions_are_served() {
    let server = start_dev().await;
    for version in [
        ProtocolVersion::LATEST,
        ProtocolVersion::V_2025_11_25,
        ProtocolVersion::V_2025_06_18,
        ProtocolVersion::V_2025_03_26,
    ] {
        let client = connect_as(&server, version.clone()).await;
        let body = envelope(&call(&client, "describe", json!({})).await);
        assert_eq!(body["ok"], json!(true), "{version:?}");
        assert_eq!(client.list_all_tools().await.unwrap().len(), 14, "{version:?}");
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn an_oversized_body_is_refused_and_the_server_stays_up() {
    let server = start_with(Default::default(), DescribeConfig::default(), Some(4096)).await;
    let token = server.agent_token();
    let huge = json!({
        "jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": { "name": "upload", "arguments": { "contentBase64": "A".repeat(10_000) } }
    });
    let answer = post_mcp(&server, Some(&token), huge.to_string()).await;
    assert_eq!(answer.status, 413);
    let body = answer.json();
    assert_eq!(body["error"]["code"], json!(-32600));
    assert!(
        body["error"]["message"].as_str().unwrap().contains("4096"),
        "{body}"
    );

    assert_eq!(post_mcp(&server, Some(&token), initialize()).await.status, 200);
}

#[tokio::test]
async fn malformed_json_rpc_is_a_json_rpc_error() {
    let server = start_dev().await;
    let token = server.agent_token();

    let answer = post_mcp(&server, Some(&token), "{ not json").await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.json()["error"]["code"], json!(-32700));
    assert_eq!(answer.json()["jsonrpc"], json!("2.0"));

    let answer = post_mcp(&server, Some(&token), json!({ "hello": "world" }).to_string()).await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.json()["error"]["code"], json!(-32600));

    let answer = post_mcp(
        &server,
        Some(&token),
        json!({ "jsonrpc": "2.0", "id": 4, "method": 12 }).to_string(),
    )
    .await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.json()["id"], json!(4));

    let client = connect(&server).await;
    assert_eq!(
        envelope(&call(&client, "describe", json!({})).await)["ok"],
        json!(true)
    );
}

/// The binary carries the schema folder as it is in the repository, byte for byte.
#[test]
fn the_embedded_schemas_are_the_folders_files() {
    for (path, embedded) in schemas::FILES {
        let file = schemas_dir().join(path);
        let on_disk = std::fs::read_to_string(&file).unwrap();
        assert_eq!(*embedded, on_disk, "{}", file.display());
    }
}

/// W3C Trace Context (architecture, "Observability"): a tool call joins the caller's trace when
/// its request carries a valid `traceparent` (same trace id, the gateway's own span as parent of
/// what it calls), starts a new one otherwise, and the backend runs inside it.
#[tokio::test]
async fn a_tool_call_runs_in_the_callers_trace_or_a_new_one() {
    let server = start_dev().await;
    let token = server.agent_token();
    let call = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": { "name": "get_run", "arguments": { "runId": "r_1" } }
    })
    .to_string();
    let incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    for revision in ["2025-06-18", "2025-03-26"] {
        let headers = [("traceparent", incoming), ("mcp-protocol-version", revision)];
        let answer = post_mcp_with(&server, Some(&token), &headers, call.clone()).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        let trace = server.recorder.calls().last().unwrap().trace.expect("a trace");
        assert_eq!(trace.trace_id(), "0af7651916cd43dd8448eb211c80319c", "{revision}");
        assert_ne!(
            trace.to_string(),
            incoming,
            "the gateway's span is the parent now"
        );
    }
    let answer = post_mcp_with(&server, Some(&token), &[("traceparent", "garbage")], call.clone()).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let fresh = server
        .recorder
        .calls()
        .last()
        .unwrap()
        .trace
        .expect("a new trace");
    assert_ne!(fresh.trace_id(), "0af7651916cd43dd8448eb211c80319c");
}
