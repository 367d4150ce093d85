//! Effects: what the runtime must do after it committed a transition, named by intent. The
//! runtime turns them into index entries, timers, leases and outbox entries in the same store
//! transaction as the new state, and acts on them only after the commit.

use super::state::{Assignment, TimerKind};
use super::time::Timestamp;

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// An agent step became claimable: put it in the ready-step index (ordered by `ready_since`).
    StepReady {
        step: String,
        ready_since: Timestamp,
        due: Option<Timestamp>,
    },
    /// An agent step is no longer claimable (claimed, escalated, done, run ended).
    StepNotReady {
        step: String,
    },
    /// A person's work item exists now: index it under its assignment.
    OpenWorkItem {
        id: String,
        step: String,
        assigned_to: Assignment,
        opened_at: Timestamp,
    },
    CloseWorkItem {
        id: String,
    },
    /// Fire `TimerFired { step, kind, generation }` at `fire_at`.
    ArmTimer {
        step: String,
        kind: TimerKind,
        fire_at: Timestamp,
        generation: u64,
    },
    CancelTimer {
        step: String,
        kind: TimerKind,
        generation: u64,
    },
    /// Create, or extend, the claim lease of `lease` on `step` until `expires_at`; when it
    /// lapses, send `ClaimExpired { step, lease }`.
    GrantClaimLease {
        step: String,
        lease: u64,
        holder: String,
        expires_at: Timestamp,
    },
    RevokeClaimLease {
        step: String,
        lease: u64,
    },
    /// Deliver a notification. Never emitted for runs in `mode: test`.
    Notify(Notification),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Notification {
    /// A work item was opened for its assignees.
    WorkOpened {
        work_item: String,
        step: String,
        to: Assignment,
    },
    /// A step's `due` passed: to the assignee, and to the organization's operators.
    Overdue { step: String, to: Recipient },
    /// An agent escalated a step to the operator queue.
    Escalated {
        work_item: String,
        step: String,
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
