//! The validated process: steps, kinds, routes, paths and durations as types, per spec §2.

use crate::fields::FieldMap;
use std::fmt;

/// A process name: 1–64 characters matching `^[a-z0-9]+(-[a-z0-9]+)*$`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessName(String);

impl ProcessName {
    /// Wraps a name already checked by validation; `None` when it breaks the name rule.
    pub fn new(name: &str) -> Option<Self> {
        crate::names::is_process_name(name).then(|| ProcessName(name.to_string()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProcessName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub use agentprocess_ids::StepId;

/// A published, valid process document.
///
/// INVARIANT: every rule of spec §2 (and of the profiles the publisher offered) holds; every
/// target names an existing step; `steps` is non-empty.
#[derive(Debug, Clone, PartialEq)]
pub struct Process {
    pub name: ProcessName,
    pub description: String,
    pub inputs: FieldMap,
    /// External systems the process depends on (`requires.systems`); declaring grants nothing.
    pub required_systems: Vec<String>,
    pub steps: Vec<Step>,
}

impl Process {
    pub fn step(&self, id: &StepId) -> Option<&Step> {
        self.steps.iter().find(|s| &s.id == id)
    }

    pub fn step_index(&self, id: &StepId) -> Option<usize> {
        self.steps.iter().position(|s| &s.id == id)
    }

    /// Where the run goes after `step` completes along its single `next` edge: the declared
    /// target, or the following step in the list when none is declared. `None` for a finish and
    /// for a step whose `next` is a route list (the actor chooses). For a parallel step this is
    /// the continuation taken once every branch has joined.
    pub fn default_next(&self, step: &Step) -> Option<Target> {
        match (&step.kind, &step.next) {
            (StepKind::Finish { .. }, _) => None,
            (_, Some(Next::Step(target))) => Some(target.clone()),
            (_, Some(Next::Routes(_))) => None,
            (_, None) => {
                let position = self.step_index(&step.id)?;
                self.steps.get(position + 1).map(|s| Target::Step(s.id.clone()))
            }
        }
    }

    /// Whether any step uses a key of the `parallel-1` profile.
    pub fn uses_parallel(&self) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(s.kind, StepKind::Parallel { .. }))
    }

    /// Whether any step uses a key of the `check-1` profile.
    pub fn uses_check(&self) -> bool {
        self.steps
            .iter()
            .any(|s| s.work().is_some_and(|w| w.check.is_some()))
    }

    /// Whether any step requires `file` evidence, which needs the `upload` tool.
    pub fn uses_file_evidence(&self) -> bool {
        self.steps
            .iter()
            .any(|s| s.work().is_some_and(|w| w.evidence.contains(&EvidenceKind::File)))
    }

    /// Whether any step waits for an event, which needs the `send_event` tool.
    pub fn uses_events(&self) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(s.kind, StepKind::WaitFor { .. }))
    }

    /// The role names used in `person:` keys, in first-use order; each must be bound to a group.
    pub fn role_names(&self) -> Vec<&str> {
        let mut roles: Vec<&str> = Vec::new();
        for step in &self.steps {
            if let Some(PersonRef::Role(role)) = step.person()
                && !roles.contains(&role.as_str())
            {
                roles.push(role);
            }
        }
        roles
    }
}

/// One step: an id, exactly one kind (with the keys that kind allows), and where it goes next.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub id: StepId,
    pub kind: StepKind,
    /// The declared `next`; `None` means the following step in the list (and, for a finish,
    /// nothing at all).
    pub next: Option<Next>,
}

impl Step {
    /// The work declaration of an `agent` or `task` step.
    pub fn work(&self) -> Option<&Work> {
        match &self.kind {
            StepKind::Agent { work } | StepKind::Task { work, .. } => Some(work),
            _ => None,
        }
    }

    /// Who completes a `task` or `approve` step.
    pub fn person(&self) -> Option<&PersonRef> {
        match &self.kind {
            StepKind::Task { person, .. } | StepKind::Approve { person, .. } => Some(person),
            _ => None,
        }
    }

    /// The step's `due` duration, for the kinds that take one.
    pub fn due(&self) -> Option<Duration> {
        match &self.kind {
            StepKind::Agent { work } | StepKind::Task { work, .. } => work.due,
            StepKind::Approve { due, .. } => *due,
            _ => None,
        }
    }

    pub fn kind_name(&self) -> &'static str {
        self.kind.name()
    }
}

/// The kind key of a step and the optional keys only that kind allows.
#[derive(Debug, Clone, PartialEq)]
pub enum StepKind {
    /// Completed by an agent.
    Agent { work: Work },
    /// Completed by a person.
    Task { work: Work, person: PersonRef },
    /// Approved or rejected by a person.
    Approve {
        /// What the person is approving.
        text: String,
        person: PersonRef,
        on_reject: Option<StepId>,
        due: Option<Duration>,
    },
    /// Continues after a duration.
    Wait { duration: Duration },
    /// Continues at the `datetime` found at a path in run data.
    WaitUntil { path: DataPath },
    /// Continues when `send_event` delivers the named event, or at `on_timeout` after `timeout`.
    WaitFor {
        event: String,
        timeout: Option<Duration>,
        on_timeout: Option<Target>,
    },
    /// Ends the run with this outcome.
    Finish { outcome: String },
    /// `parallel-1`: makes every branch entry ready at once and continues when all joined.
    Parallel { branches: Vec<StepId> },
}

impl StepKind {
    /// The kind key as written in a `PROCESS.md`.
    pub fn name(&self) -> &'static str {
        match self {
            StepKind::Agent { .. } => "agent",
            StepKind::Task { .. } => "task",
            StepKind::Approve { .. } => "approve",
            StepKind::Wait { .. } => "wait",
            StepKind::WaitUntil { .. } => "wait_until",
            StepKind::WaitFor { .. } => "wait_for",
            StepKind::Finish { .. } => "finish",
            StepKind::Parallel { .. } => "parallel",
        }
    }
}

/// What an `agent` or `task` step declares about the work and its acceptance.
#[derive(Debug, Clone, PartialEq)]
pub struct Work {
    pub instructions: String,
    pub output: FieldMap,
    /// Evidence kinds that must be attached, each at least once.
    pub evidence: Vec<EvidenceKind>,
    pub due: Option<Duration>,
    /// `check-1`: questions a model answers about each submission.
    pub check: Option<Check>,
    /// `check-1`: record verdicts without ever blocking. Only `true` when `check` is present.
    pub advisory: bool,
}

/// An evidence kind (spec §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EvidenceKind {
    /// An `upload` id the server verifies.
    File,
    /// A URL or document number, recorded as stated.
    Link,
}

impl EvidenceKind {
    pub fn name(self) -> &'static str {
        match self {
            EvidenceKind::File => "file",
            EvidenceKind::Link => "link",
        }
    }
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "file" => Some(EvidenceKind::File),
            "link" => Some(EvidenceKind::Link),
            _ => None,
        }
    }
}

/// A declared `next`: one target, or a list of two or more routes the actor chooses from.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    Step(Target),
    Routes(Vec<Route>),
}

/// One choosable route of a `next` list.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub to: Target,
    /// Plain-language label: when to take this route. Guides the actor; not enforced.
    pub when: Option<String>,
}

/// Where an edge leads: a step, or (`parallel-1`, inside a branch) the branch's end.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    Step(StepId),
    /// The reserved word `join`: this branch is finished.
    Join,
}

impl Target {
    pub fn step(&self) -> Option<&StepId> {
        match self {
            Target::Step(id) => Some(id),
            Target::Join => None,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Step(id) => f.write_str(id.as_str()),
            Target::Join => f.write_str("join"),
        }
    }
}

/// Who completes a person step.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PersonRef {
    /// A role name local to the process, bound to a group at import.
    Role(String),
    /// The person who started the run.
    Initiator,
    /// A `person` value in run data.
    Path(DataPath),
}

/// A path to a declared field in run data: `inputs.<field>` or `steps.<id>.output.<field>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DataPath {
    Input { field: String },
    StepOutput { step: StepId, field: String },
}

impl fmt::Display for DataPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataPath::Input { field } => write!(f, "inputs.{field}"),
            DataPath::StepOutput { step, field } => write!(f, "steps.{step}.output.{field}"),
        }
    }
}

/// A duration: an integer followed by `m`, `h` or `d` (spec §2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Duration {
    pub amount: u64,
    pub unit: DurationUnit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DurationUnit {
    Minutes,
    Hours,
    Days,
}

impl Duration {
    /// The length in seconds, saturating rather than overflowing.
    pub fn as_seconds(self) -> u64 {
        let unit_seconds = match self.unit {
            DurationUnit::Minutes => 60,
            DurationUnit::Hours => 3_600,
            DurationUnit::Days => 86_400,
        };
        self.amount.saturating_mul(unit_seconds)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.unit {
            DurationUnit::Minutes => 'm',
            DurationUnit::Hours => 'h',
            DurationUnit::Days => 'd',
        };
        write!(f, "{}{}", self.amount, unit)
    }
}

/// `check-1`: the questions of a step's `check` key.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// At least one question. The short form is one yes/no question with default thresholds.
    pub questions: Vec<Question>,
}

/// One check question, of one of the three kinds.
#[derive(Debug, Clone, PartialEq)]
pub enum Question {
    /// Passes at or above `pass` yes-probability; fails below `fail` (or below `pass` when no
    /// `fail` is given); unsure between them. `None` thresholds take the server's defaults.
    YesNo {
        ask: String,
        pass: Option<f64>,
        fail: Option<f64>,
    },
    /// The evaluator picks one answer name; `pass` names pass, `unsure` names are unsure, any
    /// other answer fails.
    Choice {
        ask: String,
        /// Answer name to description, in declared order; two or more.
        one_of: Vec<(String, String)>,
        pass: Vec<String>,
        unsure: Vec<String>,
        confidence: Option<f64>,
    },
    /// The evaluator picks a level, 0-based, worst first; at or above `pass` passes.
    Rubric {
        ask: String,
        levels: Vec<String>,
        pass: usize,
        confidence: Option<f64>,
    },
}

impl Question {
    pub fn ask(&self) -> &str {
        match self {
            Question::YesNo { ask, .. } | Question::Choice { ask, .. } | Question::Rubric { ask, .. } => ask,
        }
    }
}
