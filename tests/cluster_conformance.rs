//! `agentprocess conformance` through each gateway of a loopback cluster on etcd, on both MCP
//! revisions: every check passes, the clock moved through one gateway moving every role.

mod cluster_support;
mod common;

use agentprocess_testkit::fake_evaluator::FakeEvaluator;
use cluster_support::{Cluster, Shape};
use serde_json::Value;
use std::process::Command;

#[tokio::test(flavor = "multi_thread")]
async fn every_check_passes_through_both_gateways_of_a_cluster_on_both_revisions() {
    let evaluator = FakeEvaluator::spawn_on_thread(None);
    let shape = Shape {
        actors: 2,
        schedulers: 1,
        gateways: 2,
        env: [
            ("AGENTPROCESS_TESTING__CLOCK_CONTROL", "true"),
            ("AGENTPROCESS_EVALUATOR__URL", evaluator.base_url.as_str()),
            ("AGENTPROCESS_EVALUATOR__MODEL", "fake"),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect(),
    };
    let cluster = Cluster::start(shape).await;
    let dev_key = cluster.dev_key_path();
    // Each gateway, each revision: the first run publishes, the second finds them published.
    let runs = [(0, "2025-11-25"), (1, "2026-07-28")];
    for (gateway, revision) in runs {
        let out = tempfile::tempdir().unwrap();
        let report_path = out.path().join("report.json");
        let mut command = Command::new(env!("CARGO_BIN_EXE_agentprocess"));
        command
            .args([
                "conformance",
                "--url",
                cluster.gateway_url(gateway),
                "--public-url",
                &cluster.public_url,
            ])
            .args(["--mcp-revision", revision])
            .arg("--dev-key")
            .arg(&dev_key)
            .arg("--json")
            .arg(&report_path);
        command.arg("--publish");
        let output = tokio::task::spawn_blocking(move || command.output().unwrap())
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(
            output.status.code(),
            Some(0),
            "gateway {gateway} on {revision}:\n{stdout}\n{stderr}\n{}",
            cluster.logs()
        );
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
        assert_eq!(report["failed"], 0, "gateway {gateway} on {revision}:\n{stdout}");
        assert_eq!(report["notRun"], 0, "gateway {gateway} on {revision}:\n{stdout}");
    }
}
