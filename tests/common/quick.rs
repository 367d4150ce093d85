//! The one-step `quick` process the archive and backup tests run, and what they look at: its
//! runs started and ended, `list_runs` paged through, the archive's run records counted, folders
//! copied.

use super::{Mcp, request_id};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// One agent step, then done.
pub const QUICK_PROCESS: &str = r#"---
name: quick
description: One agent step, then done.
inputs:
  item: string
steps:
  - id: work
    agent: Do the work for the item.
    output:
      result: string
  - id: done
    finish: done
---

# Quick

One item per run.
"#;

/// Starts a run of `quick` for `item`; answers its id.
pub async fn start_quick(agent: &Mcp, item: &str) -> String {
    let started = agent
        .ok(
            "start_run",
            json!({ "process": "quick", "inputs": { "item": item }, "requestId": request_id() }),
        )
        .await;
    started["run"]["id"].as_str().unwrap().to_owned()
}

/// Claims the `work` step of a `quick` run; answers the claim.
pub async fn claim_quick(agent: &Mcp, run_id: &str) -> Value {
    agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": "work", "requestId": request_id() }),
        )
        .await
}

/// Starts a run of `quick` and walks it to its end; answers its id.
pub async fn ended_quick(agent: &Mcp, item: &str) -> String {
    let run_id = start_quick(agent, item).await;
    let claimed = claim_quick(agent, &run_id).await;
    agent
        .ok(
            "submit",
            json!({ "token": claimed["token"], "output": { "result": item }, "summary": "Done.",
                    "requestId": request_id() }),
        )
        .await;
    run_id
}

/// Every `list_runs` item with the arguments of `filter` (an object), `page` at a time.
pub async fn list_all(agent: &Mcp, filter: Value, page: u64) -> Vec<Value> {
    let mut items = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let mut arguments = filter.clone();
        arguments["limit"] = json!(page);
        if !cursor.is_null() {
            arguments["cursor"] = cursor.clone();
        }
        let found = agent.ok("list_runs", arguments).await;
        items.extend(found["items"].as_array().unwrap().iter().cloned());
        cursor = found["nextCursor"].clone();
        if cursor.is_null() {
            return items;
        }
    }
}

/// How many run records the archive in the blob store folder `blobs` holds (a data folder's
/// `uploads`): of `organization`, or of every organization. Files still being written
/// (`.partial`) are not counted.
pub fn archived_runs_in(blobs: &Path, organization: Option<&str>) -> usize {
    fn count(dir: &Path) -> usize {
        std::fs::read_dir(dir).map_or(0, |entries| {
            entries
                .flatten()
                .map(|entry| match entry.file_type().unwrap().is_dir() {
                    true => count(&entry.path()),
                    false => usize::from(!entry.path().to_string_lossy().ends_with(".partial")),
                })
                .sum()
        })
    }
    let archive = blobs.join("archive");
    match organization {
        // The archive names an organization's folder by its id's bytes in hex.
        Some(organization) => {
            let folder: String = organization.bytes().map(|b| format!("{b:02x}")).collect();
            count(&archive.join(folder).join("run"))
        }
        None => std::fs::read_dir(&archive).map_or(0, |organizations| {
            organizations
                .flatten()
                .map(|org| count(&org.path().join("run")))
                .sum()
        }),
    }
}

/// Waits until `archived()` counts at least `wanted` runs, for at most `patience`.
pub async fn wait_for_archived(archived: impl Fn() -> usize, wanted: usize, patience: Duration) {
    let deadline = Instant::now() + patience;
    while archived() < wanted {
        assert!(
            Instant::now() < deadline,
            "only {} of {wanted} runs archived",
            archived()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Copies every file under `from` to the same place under `to`, replacing what is there.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
