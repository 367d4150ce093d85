//! The trust report (check-1 §4 "earn trust first"): reads a process's runs through the same
//! tools an operator calls and hands them to the pure [`report`].
//!
//! [`collect`] pages `list_runs` for the process, reads each run with `get_run` (hot or
//! archived alike) and each version's published document from the catalog, all as the operator
//! who asked, so every protocol rule on what they may see holds. It reads at most `limit` runs,
//! in `list_runs` order (start order), and says when it stopped short.

pub mod report;

pub use report::{Counts, DayCounts, Disagreement, StepTrust, TrustReport, UnreadableRun, trust_report};

use crate::Identity;
use crate::mcp::{ToolBackend, ToolData, ToolError, ToolName};
use agentprocess_org::{Catalog, OrgError};
use agentprocess_process::{Offer, Process};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashMap;

/// Runs one report reads when not told.
pub const DEFAULT_TRUST_RUNS: usize = 2_000;
/// The most runs one report reads.
pub const MAX_TRUST_RUNS: usize = 20_000;

/// A report and how much of the process's history it covers.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CollectedReport {
    #[serde(flatten)]
    pub report: TrustReport,
    /// More runs exist than `limit` let it read.
    pub truncated: bool,
}

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// A tool refused (no such process, not an operator, `retry`): the caller's answer.
    #[error("{tool} refused: {}", .error.message)]
    Refused { tool: &'static str, error: ToolError },
    #[error(transparent)]
    Catalog(#[from] OrgError),
    /// A published version's document or a run view did not read: a bug or corruption.
    #[error("{0}")]
    Corrupt(String),
}

/// Reads up to `limit` runs of `process` as `operator` and builds their report.
pub async fn collect<B: ToolBackend>(
    backend: &B,
    catalog: &Catalog,
    operator: &Identity,
    process: &str,
    limit: usize,
) -> Result<CollectedReport, TrustError> {
    let limit = limit.clamp(1, MAX_TRUST_RUNS);
    let mut views: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut truncated = false;
    'pages: loop {
        let mut arguments = json!({ "process": process, "limit": 100 });
        if let Some(cursor) = &cursor {
            arguments["cursor"] = json!(cursor);
        }
        let page = call(backend, operator, ToolName::ListRuns, arguments).await?;
        for item in page["items"].as_array().into_iter().flatten() {
            if views.len() == limit {
                truncated = true;
                break 'pages;
            }
            let run = call(
                backend,
                operator,
                ToolName::GetRun,
                json!({ "runId": item["id"] }),
            )
            .await?;
            views.push(run);
        }
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    let mut versions: HashMap<u64, Process> = HashMap::new();
    for view in &views {
        let Some(version) = view["run"]["version"].as_u64() else {
            continue;
        };
        if versions.contains_key(&version) {
            continue;
        }
        let Some(record) = catalog
            .published_record(&operator.organization, process, version)
            .await?
        else {
            continue;
        };
        let loaded =
            agentprocess_process::load(record.source.as_bytes(), &Offer::EVERYTHING).map_err(|issues| {
                TrustError::Corrupt(format!(
                    "published {process} v{version} no longer loads: {}",
                    issues
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ")
                ))
            })?;
        versions.insert(version, loaded.process);
    }
    let report = trust_report(process, &views, |version| versions.get(&version))
        .map_err(|error| TrustError::Corrupt(error.to_string()))?;
    Ok(CollectedReport { report, truncated })
}

async fn call<B: ToolBackend>(
    backend: &B,
    operator: &Identity,
    tool: ToolName,
    arguments: Value,
) -> Result<Value, TrustError> {
    backend
        .call(operator, tool, arguments)
        .await
        .map(ToolData::into_value)
        .map_err(|error| TrustError::Refused {
            tool: tool.as_str(),
            error,
        })
}
