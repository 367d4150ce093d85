//! The caller's work as an MCP resource (`agentprocess://work`, or `?process=NAME` for one
//! process's): read, it is the caller's first `get_work` page; subscribed on a
//! `subscriptions/listen` stream (MCP 2026-07-28), it is `notifications/resources/updated` each
//! time work the caller may take becomes ready (`docs/profiles/wait.md`).
//!
//! A stream's notifications are hints, as the profile says: each one follows a page that lists
//! an item the stream had not told of; a client reads its work then. The stream waits for work on
//! the actor hosts (`x-wait-1`), so a quiet stream costs no store read.

use super::backend::{ToolBackend, WorkWait};
use crate::auth::Identity;
use crate::tool::result::{ToolData, ToolResult};
use rmcp::service::SubscriptionSink;
use serde_json::Value;
use std::collections::HashSet;
use std::time::Duration;
use tokio::time::Instant;

/// The resource of all the caller's work.
pub const WORK_URI: &str = "agentprocess://work";
/// How long one wait of a stream lasts before it is made again.
const STREAM_WAIT: Duration = Duration::from_secs(20);
/// The least time between two reads of a stream: a backend that cannot wait, or one that fails,
/// is asked at most this often.
const LEAST_BETWEEN_READS: Duration = Duration::from_secs(1);

/// The process a work resource's URI names: `Some(None)` for all the caller's work,
/// `Some(Some(name))` for one process's, `None` for a URI that is no work resource.
pub fn process_of(uri: &str) -> Option<Option<String>> {
    let rest = uri.strip_prefix(WORK_URI)?;
    if rest.is_empty() {
        return Some(None);
    }
    let name = rest.strip_prefix("?process=")?;
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    plain.then(|| Some(name.to_owned()))
}

/// Each item of a `get_work` page, as a key that tells it from the others: an agent's step
/// (`runId/stepId`) or a person's work item (`runId/workItemId`).
fn item_keys(page: &ToolData) -> HashSet<String> {
    let parsed;
    let page = match page {
        ToolData::Value(value) => value,
        ToolData::Rendered(rendered) => {
            parsed = serde_json::from_str::<Value>(rendered.json()).unwrap_or(Value::Null);
            &parsed
        }
    };
    let Some(items) = page["items"].as_array() else {
        return HashSet::new();
    };
    items
        .iter()
        .map(|item| {
            let run = item["runId"].as_str().unwrap_or_default();
            let which = item["stepId"]
                .as_str()
                .or_else(|| item["workItem"]["id"].as_str())
                .unwrap_or_default();
            format!("{run}/{which}")
        })
        .collect()
}

/// Tells `sink` of `uri` each time the caller's page lists work it had not told of, until the
/// stream closes.
///
/// The first read waits until work is ready; after a page with work, each read waits for work
/// made ready after it started, and one that hears of none reads the page as it is next, so work
/// made ready between two reads is told at the latest one wait later.
pub async fn tell_of_new_work<B: ToolBackend>(
    backend: &B,
    identity: &Identity,
    uri: String,
    sink: SubscriptionSink,
) {
    let Some(process) = process_of(&uri) else {
        return;
    };
    let mut told: HashSet<String> = HashSet::new();
    let mut only_new = false;
    loop {
        let started = Instant::now();
        let wait = WorkWait {
            process: process.clone(),
            wait: Some(STREAM_WAIT),
            only_new,
        };
        let page: ToolResult = backend.work_page(identity, wait).await;
        match page {
            Ok(page) => {
                let listed = item_keys(&page);
                if listed.iter().any(|item| !told.contains(item))
                    && sink.notify_resource_updated(uri.clone()).await.is_err()
                {
                    return;
                }
                only_new = !listed.is_empty();
                if only_new {
                    told = listed;
                }
            }
            Err(refused) => {
                tracing::debug!(code = refused.code.as_str(), detail = %refused.message, "a work stream's read failed; reading again");
                only_new = false;
            }
        }
        tokio::time::sleep_until(started + LEAST_BETWEEN_READS).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_work_uri_names_all_the_callers_work_or_one_process() {
        assert_eq!(process_of("agentprocess://work"), Some(None));
        assert_eq!(
            process_of("agentprocess://work?process=invoice-approval"),
            Some(Some("invoice-approval".to_owned()))
        );
        for not_work in [
            "agentprocess://runs",
            "agentprocess://work/",
            "agentprocess://work?process=",
            "agentprocess://work?process=a b",
            "agentprocess://work?state=ready",
        ] {
            assert_eq!(process_of(not_work), None, "{not_work}");
        }
    }

    #[test]
    fn items_are_told_apart_by_run_and_step_or_work_item() {
        let page = ToolData::Value(json!({ "items": [
            { "runId": "r_1", "stepId": "triage" },
            { "runId": "r_1", "workItem": { "id": "w_2" } },
            { "runId": "r_2", "stepId": "triage" },
        ], "nextCursor": null }));
        let keys = item_keys(&page);
        assert_eq!(keys.len(), 3);
        assert!(keys.contains("r_1/w_2"));
    }
}
