//! `agentprocess serve` driven by the official MCP TypeScript SDK (`@modelcontextprotocol/sdk`,
//! the version `scripts/install-deps.sh` installs in `target/mcp-ts-sdk`) over Streamable HTTP with
//! bearer tokens: an agent routes a purchase request to the team lead, the person approves, the
//! agent places the order and the run ends `ordered` (spec §3.2, §3.3, §3.4; tools.md).

mod common;

use common::{Server, Who};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

#[tokio::test(flavor = "multi_thread")]
async fn the_typescript_sdk_walks_a_purchase_request_to_its_finish() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let deps = root.join("target/mcp-ts-sdk");
    assert!(
        deps.join("node_modules/@modelcontextprotocol/sdk/package.json")
            .is_file(),
        "{} lacks the MCP TypeScript SDK: run scripts/install-deps.sh",
        deps.display()
    );
    // An ES module finds its packages in the node_modules beside it.
    let script = deps.join("walk.mjs");
    std::fs::copy(root.join("tests/js/walk.mjs"), &script).unwrap();

    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("purchase-request");
    let agent = server.token(&Who::Agent("a_ts"));
    let person = server.token(&Who::Person("lead@acme.test", &["staff"]));
    let walked = tokio::task::spawn_blocking({
        let url = server.mcp_url();
        move || {
            Command::new("node")
                .arg(&script)
                .args([url, agent, person, "lead@acme.test".to_owned()])
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
        "walk.mjs failed:\n{stdout}\n{stderr}\nserver:\n{}",
        server.stderr()
    );
    let walk: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(walk["protocol"], "agentprocess core-2");
    assert_eq!(walk["tools"].as_array().unwrap().len(), 14, "{walk}");
    assert_eq!(walk["claimedStep"], "assess");
    assert_eq!(
        walk["decisions"],
        serde_json::json!(["approved", "rejected", "failed"])
    );
    assert_eq!(walk["state"], "ended");
    assert_eq!(walk["outcome"], "ordered");
    assert_eq!(walk["approvedBy"], "lead@acme.test");
}
