//! The open escalations of an organization, oldest first: what the web UI's queue and the admin
//! API both list, read the one way. Escalated steps wait on the operators' queue (spec §3.3),
//! which a person operator's `get_work` lists with their own work.

use crate::Identity;
use crate::mcp::{ToolError, ToolName};
use crate::tool_caller::ToolCaller;
use serde_json::{Value, json};

/// The most `get_work` pages (of [`PAGE_SIZE`]) one reading goes through.
const MAX_PAGES: usize = 50;
/// Work items per `get_work` page.
const PAGE_SIZE: usize = 100;
/// The most open work items one reading looks at.
pub const MAX_WORK_ITEMS_READ: usize = MAX_PAGES * PAGE_SIZE;

/// What one reading found.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenEscalations {
    /// The operator's `get_work` items whose work item carries an `escalation`, oldest
    /// escalation first.
    pub items: Vec<Value>,
    /// Every open work item was looked at (at most [`MAX_WORK_ITEMS_READ`] are).
    pub complete: bool,
}

/// The open escalations `operator` (a person) may decide, read with `get_work` as them, so every
/// rule on what they see holds. A refusal of `get_work` is passed on.
pub async fn open_escalations(
    runs: &dyn ToolCaller,
    operator: &Identity,
) -> Result<OpenEscalations, ToolError> {
    let mut items: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut complete = false;
    for _ in 0..MAX_PAGES {
        let mut arguments = json!({ "limit": PAGE_SIZE });
        if let Some(cursor) = &cursor {
            arguments["cursor"] = json!(cursor);
        }
        let page = runs
            .run_tool(operator, ToolName::GetWork, arguments)
            .await?
            .into_value();
        items.extend(
            page["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|item| item["workItem"]["escalation"].is_object())
                .cloned(),
        );
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => {
                complete = true;
                break;
            }
        }
    }
    items.sort_by(|a, b| escalated_at(a).cmp(escalated_at(b)));
    Ok(OpenEscalations { items, complete })
}

/// When an item was escalated (RFC 3339 in UTC, so text order is time order).
fn escalated_at(item: &Value) -> &str {
    item["workItem"]["escalation"]["at"].as_str().unwrap_or_default()
}
