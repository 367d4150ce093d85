//! `agentprocess token` run as a real process: the token it prints opens a dev-mode gateway that
//! shares its data folder, and bad input is refused with a clear message.

use agentprocess_gateway::{GatewayConfig, Identity, RunRead, ToolBackend, ToolName, ToolResult};
use serde_json::{Value, json};
use std::process::{Command, Output};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn agentprocess(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentprocess"))
        .args(args)
        .output()
        .expect("run agentprocess")
}

/// This test reaches no tool; the gateway only needs some backend.
struct NoTools;

impl ToolBackend for NoTools {
    async fn call(&self, _: &Identity, tool: ToolName, _: Value) -> ToolResult {
        Ok(json!({ "tool": tool.as_str() }).into())
    }

    async fn read_run(&self, _: &Identity, read: RunRead, _: &str) -> ToolResult {
        Ok(json!({ "read": read.as_str() }).into())
    }
}

/// POSTs an MCP `initialize` with `token` over a plain TCP connection; returns the status code.
async fn initialize_status(address: std::net::SocketAddr, token: &str) -> u16 {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": { "name": "test", "version": "0" } }
    })
    .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("an HTTP status line")
}

#[tokio::test]
async fn a_minted_token_opens_the_gateway() {
    let data = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let url = format!("http://{address}");
    let data_arg = data.path().display().to_string();

    // The command creates the key; the gateway started afterwards uses the same one.
    let output = agentprocess(&[
        "token",
        "--data",
        &data_arg,
        "--org",
        "acme",
        "--person",
        "mira@acme.test",
        "--group",
        "g_finance",
        "--operator",
        "--ttl",
        "30m",
        "--url",
        &url,
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let person_token = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    assert_eq!(person_token.split('.').count(), 3, "a JWT: {person_token}");

    let config = GatewayConfig {
        public_url: url.clone(),
        data_dir: data.path().to_owned(),
        ..GatewayConfig::default()
    };
    let app = agentprocess_gateway::router(&config, NoTools).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    assert_eq!(initialize_status(address, &person_token).await, 200);

    let output = agentprocess(&[
        "token",
        "--data",
        &data_arg,
        "--org",
        "acme",
        "--agent",
        "a_screener",
        "--url",
        &url,
    ]);
    assert!(output.status.success());
    let agent_token = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    assert_eq!(initialize_status(address, &agent_token).await, 200);

    // A token for another server's URL is not accepted here.
    let output = agentprocess(&[
        "token",
        "--data",
        &data_arg,
        "--org",
        "acme",
        "--agent",
        "a1",
        "--url",
        "http://127.0.0.1:1",
    ]);
    let elsewhere = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    assert_eq!(initialize_status(address, &elsewhere).await, 401);

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let key = data.path().join(agentprocess_gateway::auth::dev::DEV_KEY_FILE);
        assert_eq!(
            std::fs::metadata(key).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}

#[test]
fn bad_input_is_refused_with_a_message() {
    let data = tempfile::tempdir().unwrap();
    let data_arg = data.path().display().to_string();
    let cases: [&[&str]; 6] = [
        &["--org", "acme"],
        &["--org", "acme", "--agent", "a", "--person", "p@x.test"],
        &["--org", "acme", "--agent", "a", "--ttl", "12s"],
        &["--org", "acme", "--agent", "a", "--ttl", "0h"],
        &["--org", "acme", "--person", "not-an-email"],
        &["--agent", "a"],
    ];
    for case in cases {
        let mut args = vec!["token", "--data", &data_arg];
        args.extend_from_slice(case);
        let output = agentprocess(&args);
        assert!(!output.status.success(), "{case:?} should fail");
        assert!(output.stdout.is_empty(), "{case:?} printed a token");
        assert!(!output.stderr.is_empty(), "{case:?} said nothing");
    }
    let help = agentprocess(&["token", "--help"]);
    assert!(help.status.success());
    let text = String::from_utf8(help.stdout).unwrap();
    for flag in [
        "--org",
        "--agent",
        "--person",
        "--group",
        "--operator",
        "--ttl",
        "--data",
    ] {
        assert!(text.contains(flag), "--help mentions {flag}");
    }
}

/// Starts a dev-mode gateway with its data in `data` on a free port; returns its address.
async fn start_gateway(data: &std::path::Path) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let config = GatewayConfig {
        public_url: format!("http://{address}"),
        data_dir: data.to_owned(),
        ..GatewayConfig::default()
    };
    let app = agentprocess_gateway::router(&config, NoTools).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    address
}

#[tokio::test]
async fn without_url_a_token_names_the_url_its_server_recorded() {
    let data = tempfile::tempdir().unwrap();
    let data_arg = data.path().display().to_string();
    let address = start_gateway(data.path()).await;

    let output = agentprocess(&["token", "--data", &data_arg, "--org", "acme", "--agent", "a1"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let token = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    assert_eq!(initialize_status(address, &token).await, 200);

    // An explicit --url still wins.
    let output = agentprocess(&[
        "token",
        "--data",
        &data_arg,
        "--org",
        "acme",
        "--agent",
        "a1",
        "--url",
        "http://127.0.0.1:9",
    ]);
    let elsewhere = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    assert_eq!(initialize_status(address, &elsewhere).await, 401);
}

#[test]
fn without_server_data_token_says_where_it_looked_and_creates_nothing() {
    let parent = tempfile::tempdir().unwrap();
    let empty = parent.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let missing = parent.path().join("missing");
    for data in [&empty, &missing] {
        let data_arg = data.display().to_string();
        let output = agentprocess(&["token", "--data", &data_arg, "--org", "acme", "--agent", "a1"]);
        assert_eq!(output.status.code(), Some(2), "{data_arg}");
        assert!(output.stdout.is_empty(), "{data_arg}: printed a token");
        let message = String::from_utf8(output.stderr).unwrap();
        assert!(
            message.contains(&format!("no server data in {data_arg}")),
            "{message}"
        );
        assert!(message.contains("pass --data"), "{message}");
        assert!(message.contains("--url"), "{message}");
    }
    assert_eq!(
        std::fs::read_dir(&empty).unwrap().count(),
        0,
        "a file was created"
    );
    assert!(!missing.exists(), "the folder was created");

    // A key with no server URL: a token was minted with --url before any server started.
    let data_arg = empty.display().to_string();
    let output = agentprocess(&[
        "token",
        "--data",
        &data_arg,
        "--org",
        "acme",
        "--agent",
        "a1",
        "--url",
        "http://127.0.0.1:9",
    ]);
    assert!(output.status.success());
    let note = String::from_utf8(output.stderr).unwrap();
    assert!(note.contains("created a new dev signing key"), "{note}");
    let output = agentprocess(&["token", "--data", &data_arg, "--org", "acme", "--agent", "a1"]);
    assert_eq!(output.status.code(), Some(2));
    let message = String::from_utf8(output.stderr).unwrap();
    assert!(
        message.contains("holds a dev signing key but no server URL"),
        "{message}"
    );
}

#[test]
fn an_agent_with_operator_rights_is_told_what_they_give() {
    let data = tempfile::tempdir().unwrap();
    let data_arg = data.path().display().to_string();
    let mint = |actor: &[&str]| {
        let mut args = vec![
            "token",
            "--data",
            &data_arg,
            "--org",
            "acme",
            "--url",
            "http://127.0.0.1:9",
        ];
        args.extend_from_slice(actor);
        agentprocess(&args)
    };
    let agent = mint(&["--agent", "a1", "--operator"]);
    assert!(agent.status.success());
    let told = String::from_utf8(agent.stderr).unwrap();
    assert!(told.contains("the admin API"), "{told}");
    assert!(told.contains("never decide or cancel"), "{told}");
    for quiet in [
        mint(&["--agent", "a1"]),
        mint(&["--person", "ops@acme.test", "--operator"]),
    ] {
        assert!(quiet.status.success());
        assert!(
            !String::from_utf8(quiet.stderr)
                .unwrap()
                .contains("operator rights"),
            "only an agent with operator rights is told"
        );
    }
    let help = String::from_utf8(agentprocess(&["token", "--help"]).stdout).unwrap();
    assert!(help.contains("never decide or cancel"), "{help}");
}
