//! The state of one run: everything the machine needs to apply the next command, and nothing a
//! run view must not show (only token hashes are kept, never tokens).

use super::check::CheckVerdict;
use crate::Timestamp;
use agentprocess_ids::{OrgId, RunId, StepId};
pub use agentprocess_vocab::TokenHash;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One run of a pinned process version.
///
/// INVARIANTS: `steps` has one entry per process step, in document order; a step with a claim is
/// `Claimed`; an open work item's step is `Waiting`; once `end` is set, no step is `Ready`,
/// `Claimed` or `Waiting`, no claim or work item is open and no timer is armed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    pub id: RunId,
    pub organization: OrgId,
    pub process: String,
    pub version: u64,
    pub mode: Mode,
    /// The agent id or person value of whoever started the run.
    pub started_by: String,
    /// The person who started the run; `None` when an agent did.
    pub initiator: Option<String>,
    pub started_at: Timestamp,
    pub updated_at: Timestamp,
    pub end: Option<RunEnd>,
    pub inputs: Map<String, Value>,
    pub steps: Vec<StepRun>,
    /// Open work items, oldest first.
    pub work_items: Vec<WorkItem>,
    /// Ids of work items that were decided (or closed by a decision), for `already_decided`.
    pub decided_work_items: Vec<String>,
    /// Events delivered before a matching `wait_for` step was ready, oldest first.
    pub held_events: Vec<HeldEvent>,
    /// Hashes of tokens retired before tokens carried their generation: presenting one is
    /// `stale`. Nothing is added any more (see `replaced_tokens`); kept so that stored runs
    /// still load and their old tokens still answer `stale`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retired_tokens: Vec<TokenHash>,
    /// Tags of the tokens this run issued that stopped being current (renewed, submitted,
    /// escalated, expired, taken back by a rejection) while the run is open: presenting one is
    /// `stale`; a token with an issued generation whose secret matches none of them is made up
    /// and `invalid` (spec §4.3). Cleared when the run ends, since every later write is
    /// `run_ended` first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced_tokens: Vec<TokenTag>,
    /// The claims whose lease ran out while the run is open: presenting the last token of one
    /// is `stale` saying which claim expired, when, and to claim the step again. Cleared with
    /// `replaced_tokens` when the run ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expired_claims: Vec<ExpiredClaim>,
    pub counters: Counters,
    /// Every change of the run, oldest first, at most `limits.history_events` of them (see
    /// [`crate::history`]). Runs stored before the history existed load with none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<crate::history::HistoryEvent>,
    /// How many of the oldest history events were dropped to keep the bound.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub history_dropped: u64,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

impl RunState {
    pub fn step(&self, id: &StepId) -> Option<&StepRun> {
        self.steps.iter().find(|s| s.id == *id)
    }

    pub(crate) fn step_mut(&mut self, id: &StepId) -> Option<&mut StepRun> {
        self.steps.iter_mut().find(|s| s.id == *id)
    }

    pub fn has_ended(&self) -> bool {
        self.end.is_some()
    }

    pub fn work_item(&self, id: &str) -> Option<&WorkItem> {
        self.work_items.iter().find(|w| w.id == id)
    }

    /// The run's state as a run view shows it (spec §3.5).
    pub fn state_name(&self) -> &'static str {
        match &self.end {
            Some(RunEnd { cancelled: true, .. }) => "cancelled",
            Some(_) => "ended",
            None if self
                .steps
                .iter()
                .any(|s| matches!(s.state, Some(StepState::Ready | StepState::Claimed))) =>
            {
                "active"
            }
            None => "waiting",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Live,
    Test,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Live => "live",
            Mode::Test => "test",
        }
    }
}

/// How a run ended: `run.ended` plus the outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEnd {
    pub cancelled: bool,
    /// The finish outcome, `rejected` or `failed`; `None` when cancelled.
    pub outcome: Option<String>,
    pub by: String,
    pub at: Timestamp,
    pub note: Option<String>,
}

/// Per-run counters for ids and generations; they only grow.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Counts step entries; a step's `entered` orders when it was last reached.
    #[serde(default)]
    pub entries: u64,
    pub work_items: u64,
    pub leases: u64,
    pub timers: u64,
    pub completions: u64,
    /// Counts tokens issued (claims and renewals): the generation of the newest token.
    #[serde(default)]
    pub tokens: u64,
}

/// A step's state (spec §3.5); `None` on a `StepRun` means not currently reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepState {
    Ready,
    Claimed,
    Waiting,
    Done,
    Failed,
    Cancelled,
}

impl StepState {
    pub fn as_str(self) -> &'static str {
        match self {
            StepState::Ready => "ready",
            StepState::Claimed => "claimed",
            StepState::Waiting => "waiting",
            StepState::Done => "done",
            StepState::Failed => "failed",
            StepState::Cancelled => "cancelled",
        }
    }

    /// Reached and not finished: ends as `cancelled` when the run ends.
    pub fn is_open(self) -> bool {
        matches!(self, StepState::Ready | StepState::Claimed | StepState::Waiting)
    }
}

/// The run-side record of one process step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRun {
    pub id: StepId,
    pub state: Option<StepState>,
    /// The current completion: `data.steps.<id>` without `history`.
    pub current: Option<StepRecord>,
    /// Earlier completions, oldest first.
    pub history: Vec<StepRecord>,
    /// When the current attempt became ready.
    pub ready_since: Option<Timestamp>,
    pub due_at: Option<Timestamp>,
    pub overdue: bool,
    pub claim: Option<Claim>,
    pub handoff: Handoff,
    pub escalation: Option<Escalation>,
    pub timers: Vec<ArmedTimer>,
    /// The open work item of this step, if any.
    pub work_item: Option<String>,
    /// When the step was last reached, on the run's entry counter (0: never).
    #[serde(default)]
    pub entered: u64,
    /// `parallel-1`, on a parallel step: the branch entries whose branch reached `join`.
    #[serde(default)]
    pub joined: Vec<StepId>,
    /// How many times a claim of this step lapsed (its lease ran out before a submit or an
    /// escalation): a step whose leases expire again and again is worth an operator's look.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub lease_expiries: u32,
}

fn is_zero_u32(count: &u32) -> bool {
    *count == 0
}

impl StepRun {
    pub fn new(id: StepId) -> Self {
        StepRun {
            id,
            state: None,
            current: None,
            history: Vec::new(),
            ready_since: None,
            due_at: None,
            overdue: false,
            claim: None,
            handoff: Handoff::default(),
            escalation: None,
            timers: Vec::new(),
            work_item: None,
            entered: 0,
            joined: Vec::new(),
            lease_expiries: 0,
        }
    }
}

/// One completion of a step as `data.steps.<id>` shows it (spec §3.1). `seq` orders completions
/// across the run, for rewinding on rejection; it is not rendered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRecord {
    pub output: Option<Map<String, Value>>,
    pub evidence: Option<Vec<EvidenceRecord>>,
    pub summary: Option<String>,
    pub next: Option<String>,
    pub reason: Option<String>,
    pub decision: Option<String>,
    pub note: Option<String>,
    /// `check-1`: the verdict recorded with this completion (pass, or any on an advisory step,
    /// or the unsure verdict of a candidate a person completed with).
    #[serde(default)]
    pub check: Option<CheckVerdict>,
    pub by: String,
    pub at: Timestamp,
    pub seq: u64,
}

/// An evidence item as recorded: file items carry the hash verified at submission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceRecord {
    pub kind: String,
    pub reference: String,
    pub sha256: Option<String>,
}

/// A live claim on an agent step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub holder: String,
    pub lease: u64,
    pub token: TokenHash,
    /// The generation of the current token (see [`Counters::tokens`]).
    #[serde(default)]
    pub generation: u64,
    pub expires_at: Timestamp,
    /// The latest `renew` progress note.
    pub progress: Option<String>,
}

/// A claim whose lease ran out, kept for the `stale` answer to its last token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpiredClaim {
    /// The generation of the claim's last token: the claim's id, which the agent reads in its
    /// token (`apt1.<runId>.<generation>.<secret>`).
    pub generation: u64,
    pub step: StepId,
    /// When the lease ran out (the claim's `expires_at`, not when the expiry was noticed).
    pub expired_at: Timestamp,
}

/// The first 8 bytes of a [`TokenHash`], kept for every token a run replaced: enough to tell a
/// token the run issued from a made-up one (a guess matches with probability 2^-64, and a match
/// grants nothing: a replaced token only ever earns `stale`), at a quarter of the bytes.
/// Stored as 16 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenTag(pub [u8; 8]);

impl TokenTag {
    pub fn of(hash: &TokenHash) -> TokenTag {
        let mut tag = [0u8; 8];
        tag.copy_from_slice(&hash.0[..8]);
        TokenTag(tag)
    }
}

impl Serialize for TokenTag {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&crate::hex(&self.0))
    }
}

impl<'de> Deserialize<'de> for TokenTag {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let mut bytes = [0u8; 8];
        if text.len() != 16 || !text.is_ascii() {
            return Err(serde::de::Error::custom("a token tag is 16 hex digits"));
        }
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[i * 2..i * 2 + 2], 16)
                .map_err(|_| serde::de::Error::custom("a token tag is 16 hex digits"))?;
        }
        Ok(TokenTag(bytes))
    }
}

/// What the previous attempt at a step left behind (spec §3.3). Empty renders as `null`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handoff {
    pub progress: Option<String>,
    pub returned: Option<Returned>,
    pub issues: Option<Vec<String>>,
    /// `check-1`: the verdict that sent the submission back (fail, or unsure then returned).
    #[serde(default)]
    pub check: Option<CheckVerdict>,
}

impl Handoff {
    pub fn is_empty(&self) -> bool {
        self.progress.is_none() && self.returned.is_none() && self.issues.is_none() && self.check.is_none()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Returned {
    pub note: String,
    pub by: String,
    pub at: Timestamp,
}

/// An agent's escalation of a step it held, or (`check-1`) a submission a check was unsure of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Escalation {
    pub note: String,
    pub by: String,
    pub at: Timestamp,
    /// `check-1`: the unsure verdict; run data shows it at `steps.<id>.check` while it waits.
    #[serde(default)]
    pub check: Option<CheckVerdict>,
    /// `check-1`: the held submission; `completed` without `output` completes with it.
    #[serde(default)]
    pub candidate: Option<StepRecord>,
}

/// A timer the runtime was asked to arm; a firing with another generation is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmedTimer {
    pub kind: TimerKind,
    pub generation: u64,
    pub fire_at: Timestamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimerKind {
    /// A `wait` duration or a `wait_until` time.
    Wait,
    /// A `wait_for` step's `timeout`.
    WaitForTimeout,
    /// A step's `due`.
    Due,
}

/// An open work item for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkItem {
    pub id: String,
    pub step: StepId,
    pub kind: WorkItemKind,
    pub assigned_to: Assignment,
    pub opened_at: Timestamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkItemKind {
    Task,
    Approve,
    /// An agent step an agent escalated.
    Escalation,
}

/// Who may decide a work item: the members of a group, one person, or the operator queue.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Assignment {
    Group(String),
    Person(String),
    /// The organization's operator queue, where escalations wait (spec §3.3): every person with
    /// operator rights, and the members of `also` when the server names an escalation group.
    Operators {
        also: Option<String>,
    },
}

impl Assignment {
    /// The name `assignedTo` shows for the operator queue when no escalation group is named.
    pub const OPERATOR_QUEUE: &'static str = "operators";

    /// Whether a person with these groups and rights is among the assignees.
    pub fn admits(&self, email: &str, groups: &[String], operator: bool) -> bool {
        match self {
            Assignment::Group(group) => groups.contains(group),
            Assignment::Person(person) => person == email,
            Assignment::Operators { also } => operator || also.as_ref().is_some_and(|g| groups.contains(g)),
        }
    }
}

/// An event held for a `wait_for` step that is not ready yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldEvent {
    pub name: String,
    pub data: Option<Map<String, Value>>,
    pub by: String,
    pub at: Timestamp,
}
