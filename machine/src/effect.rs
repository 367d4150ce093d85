//! Effects: what the runtime must do after it committed a transition and cannot read off the
//! new state. Only notifications are; see [`Effect`].

use super::state::Assignment;
use agentprocess_ids::StepId;

/// Something to do once the transition is committed, and only then.
///
/// Notifications are the only effects: the state records that a work item is open, not that
/// its assignees were told, so a notification cannot be derived from the state. Everything
/// else the runtime keeps (the ready-step index, work-item index, timers, claim leases) it
/// derives from the state, diffing before and after: a step's `state` and `ready_since`, its
/// `timers`, its `claim` and the run's `work_items`. Do NOT add an effect for anything the state
/// already says: the state is the one source of truth.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Deliver a notification. Never emitted for runs in `mode: test`.
    Notify(Notification),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Notification {
    /// A work item was opened for its assignees.
    WorkOpened {
        work_item: String,
        step: StepId,
        to: Assignment,
    },
    /// A step's `due` passed: to the assignee, and to the organization's operators.
    Overdue { step: StepId, to: Recipient },
    /// An agent escalated a step to the operator queue.
    Escalated {
        work_item: String,
        step: StepId,
        to: Assignment,
        note: String,
    },
    /// The run ended or was cancelled.
    RunEnded { state: String, outcome: Option<String> },
}

/// Who a notification is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recipient {
    Assignment(Assignment),
    /// The agent holding the step's claim.
    Agent(String),
    Operators,
}
