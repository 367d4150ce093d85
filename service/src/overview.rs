//! An organization at a glance, for operators: runs of the last day by state and by hour, the
//! work waiting for agents and for people, what is overdue, and the lease expiries and
//! escalations of the last day. Read off the store's indexes by whoever holds them (the actor
//! host's crate), shown by the console.

use crate::{OrgId, ServiceError, Timestamp};
use async_trait::async_trait;
use std::collections::BTreeMap;

/// How far back the overview looks, and how its hours are counted.
pub const OVERVIEW_HOURS: usize = 24;

/// One organization at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overview {
    /// When it was read.
    pub at: Timestamp,
    /// By process name.
    pub processes: BTreeMap<String, ProcessOverview>,
    /// Runs started in each of the last [`OVERVIEW_HOURS`] hours, oldest hour first; the last
    /// hour ends at [`Overview::at`].
    pub started_per_hour: Vec<u64>,
    /// Runs that ended in each of those hours, among the runs the overview counted.
    pub ended_per_hour: Vec<u64>,
    /// Claims whose lease ran out in the last [`OVERVIEW_HOURS`] hours.
    pub lease_expiries: u64,
    /// Steps escalated in the last [`OVERVIEW_HOURS`] hours.
    pub escalations: u64,
    /// Runs whose records the overview read: those started in the last day, and the older ones
    /// with work waiting.
    pub runs_read: u64,
    /// Some index or run held more than the overview reads at once: its counts are lower bounds.
    pub truncated: bool,
}

/// One process's share of an [`Overview`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessOverview {
    /// Runs started in the last [`OVERVIEW_HOURS`] hours, by their state now (`active`,
    /// `waiting`, `ended`, `cancelled`, as `list_runs` names them).
    pub runs_by_state: BTreeMap<String, u64>,
    /// Agent steps ready and not claimed.
    pub ready_steps: u64,
    /// When the oldest of them became ready.
    pub oldest_ready: Option<Timestamp>,
    /// People's open work items (tasks, approvals, escalations).
    pub work_items: u64,
    /// When the oldest of them opened.
    pub oldest_work_item: Option<Timestamp>,
    /// Open escalations.
    pub open_escalations: u64,
    /// Ready agent steps past their due date.
    pub overdue_agent_steps: u64,
    /// Open work items past their due date.
    pub overdue_work_items: u64,
}

/// Reads an organization's [`Overview`].
#[async_trait]
pub trait OrgOverview: Send + Sync + std::fmt::Debug {
    async fn overview(&self, organization: &OrgId) -> Result<Overview, ServiceError>;
}
