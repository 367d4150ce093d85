//! `agentprocess serve` driven by the official MCP Python SDK over Streamable HTTP with a bearer
//! token (spec §4 tools, §5 authentication): an agent walks `assess` of our purchase-request
//! example, a person approves.
//! The SDK lives in `target/py-venv`, made by `scripts/install-deps.sh`.

mod common;

use common::{Server, Who};
use std::path::PathBuf;
use std::process::Command;

#[tokio::test(flavor = "multi_thread")]
async fn the_python_sdk_walks_a_purchase_request_to_approval() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("target/py-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/install-deps.sh to create the Python venv with the MCP SDK",
        python.display()
    );
    let sdk = Command::new(&python)
        .args(["-c", "import mcp.client.streamable_http"])
        .output()
        .unwrap();
    assert!(
        sdk.status.success(),
        "the MCP SDK is not installed in target/py-venv: run scripts/install-deps.sh\n{}",
        String::from_utf8_lossy(&sdk.stderr)
    );

    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("purchase-request");
    let agent_token = server.token(&Who::Agent("a_ap"));
    let person_token = server.token(&Who::Person("manager@acme.test", &["staff"]));

    let walked = tokio::task::spawn_blocking({
        let url = server.mcp_url();
        move || {
            Command::new(&python)
                .arg(root.join("tests/python/walk.py"))
                .args([url, agent_token, person_token])
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&walked.stdout);
    let stderr = String::from_utf8_lossy(&walked.stderr);
    assert!(
        walked.status.success(),
        "walk.py failed ({}):\n{stdout}\n{stderr}\nserver:\n{}",
        walked.status,
        server.stderr()
    );
    let run_id = stdout
        .trim()
        .strip_prefix("walked ")
        .unwrap_or_else(|| panic!("walk.py printed {stdout}"));

    // What the SDK did is in the server: assess by the agent, the approval by the approver.
    let agent = server.client(&Who::Agent("a_ap")).await;
    let run = agent.ok("get_run", serde_json::json!({ "runId": run_id })).await;
    assert_eq!(run["data"]["steps"]["assess"]["by"], "a_ap", "{run}");
    assert_eq!(run["data"]["steps"]["assess"]["reason"], "830 USD is under 5000");
    assert_eq!(run["data"]["steps"]["team_lead_approval"]["decision"], "approved");
    assert_eq!(
        run["data"]["steps"]["team_lead_approval"]["by"],
        "manager@acme.test"
    );
    agent.close().await;
}
