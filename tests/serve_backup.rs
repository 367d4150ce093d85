//! `agentprocess store backup` and `store restore` as real processes around `agentprocess serve`:
//! a backup taken while `agentprocess load` drives the server restores into a folder where a new
//! server answers every run acknowledged before the backup exactly as before, archived runs
//! included and each listed once, accepts the tokens of the old one and keeps its claims (which
//! still expire); restore refuses a folder in use and a damaged or truncated file, leaving
//! nothing behind.

mod common;

use common::quick::{
    QUICK_PROCESS, archived_runs_in, claim_quick, copy_tree, ended_quick, list_all, start_quick,
    wait_for_archived,
};
use common::{Mcp, ORG, Server, Who, archived_runs, request_id};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn agentprocess(args: &[&str], paths: &[&Path]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentprocess"));
    command.args(args);
    command.args(paths);
    command.output().expect("agentprocess runs")
}

/// `agentprocess store backup --data DATA --to FILE`.
fn backup(data: &Path, file: &Path) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentprocess"));
    command
        .args(["store", "backup", "--data"])
        .arg(data)
        .arg("--to")
        .arg(file);
    command.output().expect("agentprocess runs")
}

/// `agentprocess store restore FILE --data DATA`.
fn restore(file: &Path, data: &Path) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentprocess"));
    command
        .args(["store", "restore"])
        .arg(file)
        .arg("--data")
        .arg(data);
    command.output().expect("agentprocess runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn publish(server: &Server, folder: &Path) {
    let source = folder.join("quick.md");
    std::fs::write(&source, QUICK_PROCESS).unwrap();
    let (code, out, err) = server.import(&source, &[], true);
    assert_eq!(code, 0, "{out}\n{err}");
}

/// Waits until the archive under `data` holds `wanted` runs of `acme` (the load's runs are
/// another organization's).
async fn wait_for_archived_in_acme(data: &Path, wanted: usize) {
    let uploads = data.join("uploads");
    wait_for_archived(
        || archived_runs_in(&uploads, Some(ORG)),
        wanted,
        Duration::from_secs(60),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_backup_taken_under_load_restores_every_acknowledged_run() {
    let folder = tempfile::tempdir().unwrap();
    let data = folder.path().join("data");
    let mut server = Server::start_with_env(
        &data,
        &[],
        &[("AGENTPROCESS_ARCHIVE_ENDED_RUNS_AFTER_SECONDS", "60")],
    );
    publish(&server, folder.path());
    let token = server.token(&Who::Agent("a_worker"));
    let agent = Mcp::connect(&server.mcp_url(), &token).await;

    // Runs that ended and moved to the archive, then runs that ended since (still in the store),
    // runs still open, and one whose step is claimed.
    let mut runs = Vec::new();
    for i in 0..5 {
        runs.push(ended_quick(&agent, &format!("archived-{i}")).await);
    }
    server.advance(61).await;
    wait_for_archived_in_acme(&data, 5).await;
    for i in 0..4 {
        runs.push(ended_quick(&agent, &format!("ended-{i}")).await);
    }
    for i in 0..3 {
        runs.push(start_quick(&agent, &format!("open-{i}")).await);
    }
    let claimed_run = start_quick(&agent, "claimed").await;
    let claimed = claim_quick(&agent, &claimed_run).await;
    runs.push(claimed_run.clone());
    let mut views = Vec::new();
    for run in &runs {
        views.push(agent.ok("get_run", json!({ "runId": run })).await);
    }
    let listed = list_all(&agent, json!({ "process": "quick" }), 100).await;
    assert_eq!(listed.len(), runs.len());

    // The backup is taken while agents and a person drive the server.
    let load = Command::new(env!("CARGO_BIN_EXE_agentprocess"))
        .args(["load", "--server", &server.url, "--data"])
        .arg(&data)
        .args([
            "--agents",
            "4",
            "--people",
            "1",
            "--warmup",
            "1s",
            "--duration",
            "4s",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let file = folder.path().join("backup.apb");
    let backed_up = backup(&data, &file);
    assert!(backed_up.status.success(), "{}", text(&backed_up));
    let said = String::from_utf8_lossy(&backed_up.stdout);
    assert!(said.contains("from the running server"), "{said}");
    assert!(!folder.path().join("backup.apb.partial").exists());
    let load = load.wait_with_output().unwrap();
    assert!(load.status.success(), "{}", text(&load));
    let report: Value = serde_json::from_slice(&load.stdout).unwrap();
    assert_eq!(report["unexpectedErrors"], 0, "{report:#}");
    assert!(report["runs"].as_u64().unwrap() > 0, "{report:#}");

    // Runs that ended before the backup are archived after it: a backup whose store snapshot came
    // before their archiving and whose copy of the uploads came after holds them in both tiers.
    server.advance(61).await;
    wait_for_archived_in_acme(&data, 9).await;
    agent.close().await;
    let listen = server.listen;
    server.terminate();

    let restored = folder.path().join("restored");
    let restored_out = restore(&file, &restored);
    assert!(restored_out.status.success(), "{}", text(&restored_out));
    assert_eq!(
        archived_runs_in(&restored.join("uploads"), Some(ORG)),
        5,
        "the archive as the backup copied it"
    );
    copy_tree(&data.join("uploads/archive"), &restored.join("uploads/archive"));
    assert_eq!(archived_runs_in(&restored.join("uploads"), Some(ORG)), 9);
    assert_eq!(archived_runs(&restored), archived_runs(&data));

    // The same address, so the old server's tokens (its key and URL are restored) are accepted.
    let server = Server::start_listening(&restored, listen, &[]);
    let agent = Mcp::connect(&server.mcp_url(), &token).await;
    for (run, view) in runs.iter().zip(&views) {
        assert_eq!(&agent.ok("get_run", json!({ "runId": run })).await, view, "{run}");
    }
    for page in [1, 4, 100] {
        assert_eq!(
            list_all(&agent, json!({ "process": "quick" }), page).await,
            listed,
            "pages of {page}"
        );
    }
    // The claim is still held; the archive timers still in the store move the four ended runs
    // out again, and they read the same.
    agent
        .refused(
            "claim",
            json!({ "runId": claimed_run, "stepId": "work", "requestId": request_id() }),
            "conflict",
        )
        .await;
    assert!(claimed["token"].is_string());
    // Past the claim's expiry (the old server's clock ran 122 s ahead) the claim lapses.
    server.advance(800).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let call = json!({ "runId": claimed_run, "stepId": "work", "requestId": request_id() });
        let answer = agent.call("claim", call).await;
        if answer["ok"] == true {
            break;
        }
        assert_eq!(answer["error"]["code"], "conflict", "{answer}");
        assert!(Instant::now() < deadline, "the restored claim never expired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (run, view) in runs.iter().zip(&views).filter(|(run, _)| **run != claimed_run) {
        assert_eq!(&agent.ok("get_run", json!({ "runId": run })).await, view, "{run}");
    }
    let ids = |items: &[Value]| -> Vec<Value> { items.iter().map(|item| item["id"].clone()).collect() };
    assert_eq!(
        ids(&list_all(&agent, json!({ "process": "quick" }), 3).await),
        ids(&listed)
    );
    agent.close().await;
}

#[test]
fn restore_refuses_a_folder_in_use_and_a_damaged_file_and_leaves_nothing() {
    let folder = tempfile::tempdir().unwrap();
    let data = folder.path().join("data");
    let mut server = Server::start(&data, &[]);
    publish(&server, folder.path());
    server.terminate();
    assert!(
        !data.join("control.sock").exists(),
        "a clean stop removes the socket"
    );

    let file = folder.path().join("backup.apb");
    let backed_up = backup(&data, &file);
    assert!(backed_up.status.success(), "{}", text(&backed_up));
    assert!(
        String::from_utf8_lossy(&backed_up.stdout).contains("from the stopped server's store"),
        "{}",
        text(&backed_up)
    );
    let inside = backup(&data, &data.join("backup.apb"));
    assert_eq!(inside.status.code(), Some(2), "{}", text(&inside));

    let busy = folder.path().join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("keep"), "mine").unwrap();
    let refused = restore(&file, &busy);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("is not empty"),
        "{}",
        text(&refused)
    );
    assert_eq!(std::fs::read_dir(&busy).unwrap().count(), 1);

    let bytes = std::fs::read(&file).unwrap();
    let mut damaged = bytes.clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 0x01;
    let damaged_file = folder.path().join("damaged.apb");
    std::fs::write(&damaged_file, &damaged).unwrap();
    let truncated_file = folder.path().join("truncated.apb");
    std::fs::write(&truncated_file, &bytes[..bytes.len() - 10]).unwrap();
    let target = folder.path().join("target");
    for (file, says) in [(&damaged_file, "checksum"), (&truncated_file, "truncated")] {
        let refused = restore(file, &target);
        assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains(says),
            "{}",
            text(&refused)
        );
        assert!(!target.exists(), "nothing is left behind");
    }
    let before: Vec<_> = std::fs::read_dir(folder.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        before
            .iter()
            .all(|name| !name.to_string_lossy().contains("restoring")),
        "{before:?}"
    );

    std::fs::create_dir(&target).unwrap();
    let restored = restore(&file, &target);
    assert!(restored.status.success(), "{}", text(&restored));
    let stats = agentprocess(&["store", "stats", "--json", "--data"], &[&target]);
    assert!(stats.status.success(), "{}", text(&stats));
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert!(stats["total"]["keys"].as_u64().unwrap() > 0, "{stats:#}");

    // Uploads kept elsewhere than the data folder are not in the backup, and both commands say so.
    let elsewhere = folder.path().join("external.apb");
    let external = Command::new(env!("CARGO_BIN_EXE_agentprocess"))
        .args(["store", "backup", "--data"])
        .arg(&data)
        .arg("--to")
        .arg(&elsewhere)
        .env("AGENTPROCESS_UPLOADS", "s3://bucket/uploads")
        .output()
        .unwrap();
    assert!(external.status.success(), "{}", text(&external));
    assert!(
        String::from_utf8_lossy(&external.stdout).contains("are not in the backup"),
        "{}",
        text(&external)
    );
    let restored = restore(&elsewhere, &folder.path().join("external"));
    assert!(restored.status.success(), "{}", text(&restored));
    assert!(
        String::from_utf8_lossy(&restored.stdout).contains("does not hold the uploads"),
        "{}",
        text(&restored)
    );
}
