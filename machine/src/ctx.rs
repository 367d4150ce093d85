//! What the runtime passes in with every command: time, fresh randomness, limits, the caller and
//! the few lookups the machine needs. Nothing in here is read from the environment.

use super::check::Probability;
use crate::Timestamp;
use crate::UploadStatus;
use agentprocess_ids::OrgId;
use agentprocess_process::{PersonFormat, Process};
use indexmap::IndexMap;

/// The context of one command.
///
/// DETERMINISM: `apply` uses nothing but this, the process and the run state, so the same
/// state, command and context always give the same transition. Fresh ids and token secrets
/// are derived from `seed`, which the runtime MUST fill with new random bytes for every command.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    pub now: Timestamp,
    /// 32 random bytes for this command; every fresh id and token secret is derived from them.
    pub seed: [u8; 32],
    pub limits: Limits,
    pub person_format: PersonFormat,
    /// Who escalated steps wait on: the operator queue by default (spec §3.3), or a group.
    pub escalate_to: &'a super::state::Assignment,
    pub uploads: &'a dyn UploadLookup,
}

/// Server limits shown in `describe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `limits.runDataBytes`: the most run data (inputs and step records, as JSON) may weigh.
    pub run_data_bytes: usize,
    /// `leaseSeconds`: how long a claim lasts before it must be renewed.
    pub lease_seconds: u64,
    /// `limits.checkPass` (`check-1`): the yes/no pass threshold of a question that sets none.
    pub check_pass: Probability,
    /// `limits.checkFail`: the yes/no fail threshold of a question that sets none; `None`: below
    /// the pass threshold fails.
    pub check_fail: Option<Probability>,
    /// `limits.checkConfidence`: below this confidence a choice or rubric answer is unsure, for
    /// a question that sets none.
    pub check_confidence: Probability,
    /// `limits.checkStateBytes`: how much run data the evaluator is shown; larger run data is
    /// cut oldest completed step first.
    pub check_state_bytes: usize,
    /// `limits.history_events_per_run`: how many history events a run keeps; past it the
    /// oldest are dropped and counted (see [`crate::history`]). Not part of `describe`.
    pub history_events: usize,
}

impl Limits {
    /// The server default of `limits.runDataBytes`: well under etcd's 1.5 MiB request limit.
    pub const DEFAULT_RUN_DATA_BYTES: usize = 512 * 1024;
    /// The server default of `leaseSeconds`.
    pub const DEFAULT_LEASE_SECONDS: u64 = 600;
    /// The server default of `limits.checkStateBytes` (check.md §5: 64 KB).
    pub const DEFAULT_CHECK_STATE_BYTES: usize = 64 * 1024;
    /// The server default of `limits.history_events_per_run`.
    pub const DEFAULT_HISTORY_EVENTS: usize = 1000;

    /// The `limits` object of `describe`: `runDataBytes`, and the `check-1` limits of
    /// check.md §5 (`checkFail` is `null` when the server sets none).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "runDataBytes": self.run_data_bytes,
            "checkPass": self.check_pass.get(),
            "checkFail": self.check_fail.map(Probability::get),
            "checkConfidence": self.check_confidence.get(),
            "checkStateBytes": self.check_state_bytes,
        })
    }
}

/// The server defaults: check.md §5 for the check limits.
impl Default for Limits {
    fn default() -> Self {
        Limits {
            run_data_bytes: Limits::DEFAULT_RUN_DATA_BYTES,
            lease_seconds: Limits::DEFAULT_LEASE_SECONDS,
            check_pass: Probability::DEFAULT_PASS,
            check_fail: None,
            check_confidence: Probability::DEFAULT_CONFIDENCE,
            check_state_bytes: Limits::DEFAULT_CHECK_STATE_BYTES,
            history_events: Limits::DEFAULT_HISTORY_EVENTS,
        }
    }
}

/// Looks up an `upload` id for file evidence (spec §5).
pub trait UploadLookup: std::fmt::Debug {
    fn lookup(&self, organization: &OrgId, upload_id: &str) -> UploadStatus;
}

/// An upload lookup that knows no files, for processes without file evidence.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoUploads;

impl UploadLookup for NoUploads {
    fn lookup(&self, _organization: &OrgId, _upload_id: &str) -> UploadStatus {
        UploadStatus::NotFound
    }
}

/// Who is calling, as established by the gateway's authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub organization: OrgId,
    pub kind: CallerKind,
    /// Whether this identity is one of the organization's operators.
    pub operator: bool,
}

/// An agent or a person, with what identifies it. Only a person decides work items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallerKind {
    /// A program that claims and submits agent steps: its id.
    Agent { id: String },
    /// A human identity: its `person` value (an email) and the groups it belongs to.
    Person { email: String, groups: Vec<String> },
}

impl Caller {
    /// An agent of `organization`, not an operator.
    pub fn agent(organization: &str, id: &str) -> Caller {
        Caller {
            organization: OrgId::from(organization),
            kind: CallerKind::Agent { id: id.to_owned() },
            operator: false,
        }
    }

    /// A person of `organization` in `groups`, not an operator.
    pub fn person(organization: &str, email: &str, groups: &[&str]) -> Caller {
        Caller {
            organization: OrgId::from(organization),
            kind: CallerKind::Person {
                email: email.to_owned(),
                groups: groups.iter().map(|g| g.to_string()).collect(),
            },
            operator: false,
        }
    }

    /// The identity as recorded in `by` fields: the agent id or the person value.
    pub fn name(&self) -> &str {
        match &self.kind {
            CallerKind::Agent { id } => id,
            CallerKind::Person { email, .. } => email,
        }
    }

    pub fn is_agent(&self) -> bool {
        matches!(self.kind, CallerKind::Agent { .. })
    }
}

/// A published process version as a run pins it: the validated document, its version number,
/// the markdown body, and the role bindings (role name → group id) made at import.
#[derive(Debug, Clone)]
pub struct PinnedProcess {
    pub process: Process,
    pub version: u64,
    pub body: String,
    pub roles: IndexMap<String, String>,
}
