//! The map as plain data: lanes, cards, markers, join bars and lines, each placed on the canvas.
//!
//! Everything here is decided by [`crate::layout`]; [`crate::render_svg`] only draws it. The
//! UI can read the same data to link a card to its step or to place its own overlays.

use agentprocess_process::StepId;

/// A point on the canvas, in pixels from its top left corner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    pub x: i32,
    pub y: i32,
}

/// An axis-aligned box on the canvas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    pub x: i32,
    pub y: i32,
    pub width: i32,
    pub height: i32,
}

impl Rect {
    pub fn right(&self) -> i32 {
        self.x + self.width
    }

    pub fn bottom(&self) -> i32 {
        self.y + self.height
    }

    pub fn center(&self) -> Point {
        Point {
            x: self.x + self.width / 2,
            y: self.y + self.height / 2,
        }
    }

    /// Whether the two boxes share any area (touching edges do not count).
    pub fn overlaps(&self, other: &Rect) -> bool {
        self.x < other.right() && other.x < self.right() && self.y < other.bottom() && other.y < self.bottom()
    }
}

/// A process drawn as a map: lanes top to bottom, flow left to right (authoring guide, "Process
/// maps").
///
/// INVARIANT: every step of the process has exactly one card or, for a `finish`, one End
/// marker; no two of cards, markers and join bars overlap; every line starts on the box of what
/// it leaves and ends on the box of what it enters.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessMap {
    /// The process name.
    pub name: String,
    /// The process description, whole.
    pub description: String,
    /// The description as drawn under the name: wrapped, at most two lines.
    pub description_lines: Vec<String>,
    pub width: i32,
    pub height: i32,
    /// Performers' lanes, top to bottom: Agent first, then each role or person in first use.
    pub lanes: Vec<Lane>,
    /// One card per step that is not a `finish`, in document order.
    pub cards: Vec<Card>,
    /// The Start marker, a decision point after each step whose `next` is a list, and an End
    /// marker per `finish` step.
    pub markers: Vec<Marker>,
    /// One join bar per `parallel:` step.
    pub join_bars: Vec<JoinBar>,
    pub lines: Vec<Line>,
}

/// Who completes the steps of a lane.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Performer {
    /// `agent:` steps.
    Agent,
    /// A role name local to the process (`person: finance-approver`).
    Role(String),
    /// `person: initiator`, the person who started the run.
    Initiator,
    /// A path to a `person` value in run data (`person: inputs.manager`).
    Data(String),
}

impl Performer {
    /// The lane's key as the document spells the performer: `agent` for the Agent lane, else
    /// the `person:` value. Only [`Performer::kind_name`] tells a role named `agent` apart.
    pub fn key(&self) -> &str {
        match self {
            Performer::Agent => "agent",
            Performer::Role(name) => name,
            Performer::Initiator => "initiator",
            Performer::Data(path) => path,
        }
    }

    pub fn kind_name(&self) -> &'static str {
        match self {
            Performer::Agent => "agent",
            Performer::Role(_) => "role",
            Performer::Initiator => "initiator",
            Performer::Data(_) => "data",
        }
    }
}

/// A horizontal band holding one performer's steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Lane {
    pub performer: Performer,
    /// The whole band, header included.
    pub rect: Rect,
    /// The header at the band's left end.
    pub header: Rect,
    /// The performer's name as drawn in the header, wrapped (`Finance approver`).
    pub title_lines: Vec<String>,
    /// What the name stands for, wrapped (`role finance-approver`, `inputs.manager`).
    pub detail_lines: Vec<String>,
}

/// The kind of a step drawn as a card (a `finish` is an End marker instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CardKind {
    Agent,
    Task,
    Approve,
    Wait,
    WaitUntil,
    WaitFor,
    Parallel,
}

impl CardKind {
    /// The kind key as written in a `PROCESS.md`.
    pub fn name(self) -> &'static str {
        match self {
            CardKind::Agent => "agent",
            CardKind::Task => "task",
            CardKind::Approve => "approve",
            CardKind::Wait => "wait",
            CardKind::WaitUntil => "wait_until",
            CardKind::WaitFor => "wait_for",
            CardKind::Parallel => "parallel",
        }
    }

    /// The kind as a person reads it on the card.
    pub fn title(self) -> &'static str {
        match self {
            CardKind::Agent => "Agent",
            CardKind::Task => "Task",
            CardKind::Approve => "Approval",
            CardKind::Wait => "Wait",
            CardKind::WaitUntil => "Wait until",
            CardKind::WaitFor => "Wait for event",
            CardKind::Parallel => "Parallel",
        }
    }
}

/// One step as a card: its kind, id and instructions, and badges for what it requires.
#[derive(Debug, Clone, PartialEq)]
pub struct Card {
    pub step: StepId,
    pub kind: CardKind,
    /// Index into [`ProcessMap::lanes`].
    pub lane: usize,
    pub rect: Rect,
    /// The id as a title: `check_vendor` becomes `Check vendor`, fitted to the card.
    pub title: String,
    /// The id as written, fitted beside the kind.
    pub id_text: String,
    /// The instructions, wrapped and cut to a few lines (an ellipsis marks a cut).
    pub text_lines: Vec<String>,
    /// The instructions whole, with whitespace collapsed, for tooltips and descriptions.
    pub instructions: String,
    /// What the card must also say: an approval without `on_reject` ends the run rejected.
    pub note: Option<String>,
    pub badges: Vec<Badge>,
}

/// What a badge on a card stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BadgeKind {
    /// The `output` fields.
    Output,
    /// The `evidence` kinds.
    Evidence,
    /// A `check` (check-1 profile).
    Check,
    /// The `due` duration.
    Due,
    /// A `wait_for` step's `timeout`.
    Timeout,
}

impl BadgeKind {
    pub fn name(self) -> &'static str {
        match self {
            BadgeKind::Output => "output",
            BadgeKind::Evidence => "evidence",
            BadgeKind::Check => "check",
            BadgeKind::Due => "due",
            BadgeKind::Timeout => "timeout",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Badge {
    pub kind: BadgeKind,
    pub text: String,
    pub rect: Rect,
}

/// A marker that is not a step's card.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    pub kind: MarkerKind,
    /// Index into [`ProcessMap::lanes`].
    pub lane: usize,
    pub rect: Rect,
}

#[derive(Debug, Clone, PartialEq)]
pub enum MarkerKind {
    /// Leads into the first step.
    Start,
    /// After a step whose `next` is a list; its routes leave from here.
    Decision { step: StepId },
    /// A `finish` step: the run ends with this outcome.
    End {
        step: StepId,
        outcome: String,
        /// The outcome as drawn, wrapped.
        outcome_lines: Vec<String>,
    },
}

/// Where a `parallel:` step's branches meet before the process continues.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinBar {
    /// The `parallel:` step whose branches join here.
    pub parallel: StepId,
    pub rect: Rect,
}

/// What a line leaves or enters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Endpoint {
    Start,
    /// A step's card or End marker. A route leaves from the step's decision point.
    Step(StepId),
    /// The join bar of a `parallel:` step.
    Join {
        parallel: StepId,
    },
}

/// Which key of the document a line draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LineKind {
    /// From the Start marker into the first step.
    Start,
    /// A single `next`, declared or the following step.
    Next,
    /// One route of a `next` list, from the step's decision point.
    Route,
    /// An approval's `next`.
    Approved,
    /// An approval's `on_reject`, dashed.
    Rejected,
    /// A `wait_for` step's `on_timeout`.
    Timeout,
    /// From a `parallel:` step to one of its branch entries.
    Branch,
    /// From a join bar to the `parallel:` step's `next`. Lines into a join bar keep the kind
    /// of the key that ends the branch.
    Join,
}

impl LineKind {
    pub fn name(self) -> &'static str {
        match self {
            LineKind::Start => "start",
            LineKind::Next => "next",
            LineKind::Route => "route",
            LineKind::Approved => "approved",
            LineKind::Rejected => "rejected",
            LineKind::Timeout => "timeout",
            LineKind::Branch => "branch",
            LineKind::Join => "join",
        }
    }

    /// Rejections are dashed; everything else is solid.
    pub fn style(self) -> LineStyle {
        match self {
            LineKind::Rejected => LineStyle::Dashed,
            _ => LineStyle::Solid,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LineStyle {
    Solid,
    Dashed,
}

impl LineStyle {
    pub fn name(self) -> &'static str {
        match self {
            LineStyle::Solid => "solid",
            LineStyle::Dashed => "dashed",
        }
    }
}

/// A line: horizontal and vertical segments through the gaps between columns and the gutters
/// between rows, never across a card.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub from: Endpoint,
    pub to: Endpoint,
    pub kind: LineKind,
    pub label: Option<Label>,
    /// At least two points; the last one lies on the edge of what the line enters.
    pub points: Vec<Point>,
}

/// A line's label: a route's `when`, `Approved`, `Rejected` or the timeout.
#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    /// The whole text.
    pub text: String,
    /// The text as drawn: wrapped, at most two lines, an ellipsis marking a cut.
    pub lines: Vec<String>,
    pub rect: Rect,
}
