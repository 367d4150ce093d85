//! Where everything goes: columns from the flow, rows from the lanes, then lines routed through
//! the gaps between columns and the gutters between rows, so that no line crosses a card.
//!
//! Flow reads left to right (authoring guide, "How each part is drawn"): a step's column is the
//! longest chain of forward lines from the first step, so every forward line goes right. A join
//! bar has a column of its own. Rows are the lanes' tracks: a lane has as many tracks as it has
//! steps in one column. Lines leave a card on its right side and enter on its left; a rejection
//! leaves from the top or bottom and loops back through a gutter. A line's label sits on the
//! line's last segment, above it, inside the target's row, and the gap before the target is
//! widened until it fits.

use crate::flow::{End, Flow, FlowLine};
use crate::model::{
    Badge, BadgeKind, Card, CardKind, Endpoint, JoinBar, Label, Lane, Line, LineKind, Marker, MarkerKind,
    Performer, Point, ProcessMap, Rect,
};
use crate::text::{self, Face};
use agentprocess_process::{Next, Process, Step, StepKind};
use std::collections::{HashMap, HashSet};

/// Space around the whole map.
pub(crate) const MARGIN: i32 = 24;
/// The process name and description above the lanes.
pub(crate) const HEADING_HEIGHT: i32 = 76;
pub(crate) const NAME_BASELINE: i32 = 22;
pub(crate) const NAME_FONT: f64 = 18.0;
pub(crate) const DESCRIPTION_BASELINE: i32 = 44;
pub(crate) const DESCRIPTION_LINE: i32 = 16;
pub(crate) const DESCRIPTION_FONT: f64 = 12.0;
/// The lane headers' column at the left.
pub(crate) const LANE_HEADER_WIDTH: i32 = 156;
pub(crate) const LANE_PAD: i32 = 12;
pub(crate) const LANE_TITLE_FONT: f64 = 13.0;
pub(crate) const LANE_TITLE_LINE: i32 = 17;
pub(crate) const LANE_DETAIL_FONT: f64 = 10.0;
pub(crate) const LANE_DETAIL_LINE: i32 = 13;
/// Between the lane headers and the first column: the Start marker and its line.
const START_AREA: i32 = 84;
pub(crate) const START_RADIUS: i32 = 20;

pub(crate) const CARD_WIDTH: i32 = 240;
pub(crate) const CARD_PAD: i32 = 12;
const CARD_CONTENT: f64 = (CARD_WIDTH - 2 * CARD_PAD) as f64;
pub(crate) const CHIP_Y: i32 = 10;
pub(crate) const CHIP_HEIGHT: i32 = 18;
pub(crate) const CHIP_FONT: f64 = 10.0;
pub(crate) const CHIP_PAD: i32 = 6;
pub(crate) const ID_FONT: f64 = 11.0;
pub(crate) const TITLE_BASELINE: i32 = 48;
pub(crate) const TITLE_FONT: f64 = 14.0;
pub(crate) const TEXT_BASELINE: i32 = 68;
pub(crate) const TEXT_LINE: i32 = 16;
pub(crate) const TEXT_FONT: f64 = 12.0;
const TEXT_LINES: usize = 3;
pub(crate) const BADGE_HEIGHT: i32 = 20;
const BADGE_GAP: i32 = 6;
pub(crate) const BADGE_FONT: f64 = 11.0;
pub(crate) const BADGE_PAD: i32 = 7;
const BADGE_BOTTOM: i32 = 10;
const MIN_CARD_HEIGHT: i32 = 120;

pub(crate) const END_WIDTH: i32 = 180;
pub(crate) const END_LABEL_BASELINE: i32 = 20;
pub(crate) const END_OUTCOME_BASELINE: i32 = 40;
pub(crate) const END_OUTCOME_LINE: i32 = 18;
pub(crate) const END_OUTCOME_FONT: f64 = 14.0;
pub(crate) const END_ID_GAP: i32 = 17;
const END_BOTTOM: i32 = 10;

pub(crate) const BAR_WIDTH: i32 = 10;
/// How far a join bar reaches past its first and last line.
const BAR_OVERHANG: i32 = 22;
pub(crate) const DIAMOND: i32 = 26;
/// From a card's right edge to its decision point.
const DIAMOND_OFFSET: i32 = 12;
const DIAMOND_ZONE: i32 = DIAMOND_OFFSET + DIAMOND + 8;

const GAP_MIN: i32 = 56;
const CHANNEL_FIRST: i32 = 12;
const CHANNEL_STEP: i32 = 10;
const GUTTER_MIN: i32 = 48;
const GUTTER_FIRST: i32 = 14;
const GUTTER_STEP: i32 = 8;
/// A line with a label takes this many gutter slots: its own and room for the label.
const LABELLED_SLOTS: usize = 2;
/// Between two lines entering or leaving one side, with and without labels to fit.
const PORT_SPACING_LABELLED: i32 = 40;
const PORT_SPACING: i32 = 18;
/// Where a rejection leaves and enters on a card's top or bottom side.
const SIDE_ENTRY_FIRST: i32 = 20;
const SIDE_PORT_STEP: i32 = 16;

pub(crate) const LABEL_FONT: f64 = 11.0;
pub(crate) const LABEL_LINE: i32 = 13;
pub(crate) const LABEL_PAD: i32 = 5;
const LABEL_TEXT_WIDTH: f64 = 190.0;
/// Between a label and its line.
const LABEL_LIFT: i32 = 3;

/// Lays the process out as a map. Deterministic: the same process gives the same map.
pub fn layout(process: &Process) -> ProcessMap {
    let flow = Flow::read(process);
    let graph = Graph::new(process);
    let column = columns(&graph, &flow.lines);
    let grid = Grid::new(&flow, &graph, &column);
    let plans: Vec<Plan> = flow.lines.iter().map(|line| grid.plan(&graph, line)).collect();
    let cards: Vec<Option<CardText>> = process.steps.iter().map(card_text).collect();
    let ends: Vec<Option<EndText>> = process.steps.iter().map(end_text).collect();
    let decisions: Vec<bool> = process
        .steps
        .iter()
        .map(|s| matches!(s.next, Some(Next::Routes(_))) && s.work().is_some())
        .collect();
    let labels: Vec<Option<LabelText>> = flow.lines.iter().map(label_text).collect();
    Placer {
        process,
        flow: &flow,
        graph: &graph,
        grid: &grid,
        plans: &plans,
        cards: &cards,
        ends: &ends,
        decisions: &decisions,
        labels: &labels,
    }
    .place()
}

/// The grid's nodes: each step, then a join bar per `parallel:` step.
struct Graph {
    steps: usize,
    /// The bar node of each `parallel:` step, by step position.
    bar_node: Vec<Option<usize>>,
    /// The `parallel:` step of each bar, by bar number.
    bar_step: Vec<usize>,
}

impl Graph {
    fn new(process: &Process) -> Graph {
        let steps = process.steps.len();
        let mut bar_node = vec![None; steps];
        let mut bar_step = Vec::new();
        for (at, step) in process.steps.iter().enumerate() {
            if matches!(step.kind, StepKind::Parallel { .. }) {
                bar_node[at] = Some(steps + bar_step.len());
                bar_step.push(at);
            }
        }
        Graph {
            steps,
            bar_node,
            bar_step,
        }
    }

    fn count(&self) -> usize {
        self.steps + self.bar_step.len()
    }

    fn node(&self, end: End) -> Option<usize> {
        match end {
            End::Start => None,
            End::Step(at) => Some(at),
            End::Bar(at) => self.bar_node[at],
        }
    }

    fn is_bar(&self, node: usize) -> bool {
        node >= self.steps
    }
}

/// Each node's column: the longest chain of forward lines (all but Start and Rejected) that
/// leads to it, with every join bar alone in its column.
fn columns(graph: &Graph, lines: &[FlowLine]) -> Vec<usize> {
    let count = graph.count();
    let edges: Vec<(usize, usize)> = lines
        .iter()
        .filter(|line| !matches!(line.kind, LineKind::Start | LineKind::Rejected))
        .filter_map(|line| Some((graph.node(line.from)?, graph.node(line.to)?)))
        .collect();
    let order = topological_order(count, &edges);
    let mut floor = vec![0usize; count];
    // Each round moves what shares a bar's column one column on; a column's lowest-numbered bar
    // stays. Ranks only grow and are bounded, so this ends; the bound is a guard.
    for _ in 0..=count * count {
        let mut rank = floor.clone();
        for &node in &order {
            for &(from, to) in edges.iter().filter(|(from, _)| *from == node) {
                rank[to] = rank[to].max(rank[from] + 1);
            }
        }
        let mut moved = false;
        for bar in graph.steps..count {
            let shares: Vec<usize> = (0..count)
                .filter(|&other| other != bar && rank[other] == rank[bar])
                .filter(|&other| !graph.is_bar(other) || other > bar)
                .collect();
            let bar_stays = (graph.steps..bar).all(|earlier| rank[earlier] != rank[bar]);
            if bar_stays {
                for other in shares {
                    floor[other] = floor[other].max(rank[bar] + 1);
                    moved = true;
                }
            }
        }
        if !moved {
            return rank;
        }
    }
    floor
}

/// The nodes in an order where every edge goes forward; nodes on a cycle (which a valid
/// process cannot have) come last, in number order.
fn topological_order(count: usize, edges: &[(usize, usize)]) -> Vec<usize> {
    let mut incoming = vec![0usize; count];
    for &(_, to) in edges {
        incoming[to] += 1;
    }
    let mut ready: Vec<usize> = (0..count).rev().filter(|&n| incoming[n] == 0).collect();
    let mut order = Vec::with_capacity(count);
    let mut placed = vec![false; count];
    while let Some(node) = ready.pop() {
        order.push(node);
        placed[node] = true;
        for &(_, to) in edges.iter().filter(|(from, _)| *from == node) {
            incoming[to] -= 1;
            if incoming[to] == 0 {
                ready.push(to);
            }
        }
    }
    order.extend((0..count).filter(|&n| !placed[n]));
    order
}

/// Columns and rows: where each node sits, and which cells are taken.
struct Grid {
    column: Vec<usize>,
    columns: usize,
    /// Each step's row; bars have none.
    row: Vec<Option<usize>>,
    rows: usize,
    /// The first row of each lane and how many rows (tracks) it has.
    lane_rows: Vec<(usize, usize)>,
    /// The rows a bar spans: those of the steps whose lines enter it.
    bar_rows: HashMap<usize, (usize, usize)>,
    taken: HashSet<(usize, usize)>,
}

impl Grid {
    fn new(flow: &Flow, graph: &Graph, column: &[usize]) -> Grid {
        let columns = column.iter().max().map_or(1, |&c| c + 1);
        let lanes = flow.performers.len();
        let mut track = vec![0usize; graph.steps];
        let mut used: HashMap<(usize, usize), usize> = HashMap::new();
        let mut tracks = vec![1usize; lanes];
        for at in 0..graph.steps {
            let lane = flow.lane_of[at];
            let next_track = used.entry((lane, column[at])).or_insert(0);
            track[at] = *next_track;
            *next_track += 1;
            tracks[lane] = tracks[lane].max(*next_track);
        }
        let mut lane_rows = Vec::with_capacity(lanes);
        let mut rows = 0;
        for &count in &tracks {
            lane_rows.push((rows, count));
            rows += count;
        }
        let mut row: Vec<Option<usize>> = (0..graph.steps)
            .map(|at| Some(lane_rows[flow.lane_of[at]].0 + track[at]))
            .collect();
        row.resize(graph.count(), None);
        let mut taken: HashSet<(usize, usize)> = (0..graph.steps)
            .filter_map(|at| Some((column[at], row[at]?)))
            .collect();
        let mut bar_rows = HashMap::new();
        for (number, &parallel) in graph.bar_step.iter().enumerate() {
            let bar = graph.steps + number;
            let entering: Vec<usize> = flow
                .lines
                .iter()
                .filter(|line| line.to == End::Bar(parallel))
                .filter_map(|line| graph.node(line.from).and_then(|from| row[from]))
                .collect();
            let fallback = row[parallel].unwrap_or(0);
            let span = (
                entering.iter().copied().min().unwrap_or(fallback),
                entering.iter().copied().max().unwrap_or(fallback),
            );
            for r in span.0..=span.1 {
                taken.insert((column[bar], r));
            }
            bar_rows.insert(bar, span);
        }
        Grid {
            column: column.to_vec(),
            columns,
            row,
            rows,
            lane_rows,
            bar_rows,
            taken,
        }
    }

    /// A node's row for ordering: a step's row, a bar's first row.
    fn sort_row(&self, node: usize) -> usize {
        self.row[node].unwrap_or_else(|| self.bar_rows.get(&node).map_or(0, |span| span.0))
    }

    /// Whether `row` is empty in every column strictly between `from` and `to`.
    fn row_free(&self, row: usize, from: usize, to: usize) -> bool {
        (from + 1..to).all(|c| !self.taken.contains(&(c, row)))
    }

    /// Whether a join bar crosses gutter `gutter` (between rows `gutter - 1` and `gutter`) in a
    /// column strictly between `from` and `to`.
    fn bar_crosses(&self, gutter: usize, from: usize, to: usize) -> bool {
        self.bar_rows.iter().any(|(&bar, &(first, last))| {
            self.column[bar] > from && self.column[bar] < to && first < gutter && gutter <= last
        })
    }

    fn plan(&self, graph: &Graph, line: &FlowLine) -> Plan {
        let (Some(from), Some(to)) = (graph.node(line.from), graph.node(line.to)) else {
            return Plan::Start;
        };
        let (cs, ct) = (self.column[from], self.column[to]);
        if line.kind == LineKind::Rejected {
            let (rs, rt) = (self.sort_row(from), self.sort_row(to));
            let gap = if ct < cs {
                ct
            } else if ct > cs {
                ct - 1
            } else {
                cs
            };
            return if rt < rs {
                Plan::Back {
                    leave_top: true,
                    first: rs,
                    second: (rt + 1 != rs).then_some((gap, rt + 1)),
                    enter_top: false,
                }
            } else if rt > rs {
                Plan::Back {
                    leave_top: false,
                    first: rs + 1,
                    second: (rt != rs + 1).then_some((gap, rt)),
                    enter_top: true,
                }
            } else {
                Plan::Back {
                    leave_top: false,
                    first: rs + 1,
                    second: None,
                    enter_top: false,
                }
            };
        }
        if ct == cs + 1 || self.row[to].is_some_and(|rt| self.row_free(rt, cs, ct)) {
            return Plan::Forward(Via::Near);
        }
        if self.row[from].is_some_and(|rs| self.row_free(rs, cs, ct)) {
            return Plan::Forward(Via::SourceRow);
        }
        let (rs, rt) = (self.sort_row(from), self.sort_row(to));
        let mut preferred = Vec::new();
        if self.row[from].is_some() {
            preferred.push(if rt < rs { rs } else { rs + 1 });
        }
        preferred.push(if rt > rs { rt } else { rt + 1 });
        let first = preferred[0];
        let mut candidates = preferred;
        let mut others: Vec<usize> = (0..=self.rows).collect();
        others.sort_by_key(|&g| (g.abs_diff(first), g));
        candidates.extend(others);
        let gutter = candidates
            .iter()
            .copied()
            .find(|&g| !self.bar_crosses(g, cs, ct))
            .unwrap_or(first);
        Plan::Forward(Via::Gutter(gutter))
    }
}

/// How a line is routed, before coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// From the Start marker straight into the first step.
    Start,
    /// Right side of the source to the left side of the target.
    Forward(Via),
    /// A rejection: out of the source's top or bottom into gutter `first`, then either straight
    /// to the target or through a channel in a gap to gutter `second`, into the target's top
    /// or bottom.
    Back {
        leave_top: bool,
        first: usize,
        second: Option<(usize, usize)>,
        enter_top: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// Turn in the gap after the source, then along the target's row (free up to the target).
    Near,
    /// Along the source's row (free up to the target), turn in the gap before the target.
    SourceRow,
    /// Turn in the gap after the source, along this gutter, turn in the gap before the target.
    Gutter(usize),
}

/// A card's text, fitted.
struct CardText {
    kind: CardKind,
    title: String,
    id_text: String,
    text_lines: Vec<String>,
    instructions: String,
    note: Option<String>,
    /// Badges with their widths, in rows.
    badge_rows: Vec<Vec<(BadgeKind, String, i32)>>,
}

impl CardText {
    fn height(&self) -> i32 {
        let lines = (self.text_lines.len() + usize::from(self.note.is_some())).max(1) as i32;
        let text_bottom = TEXT_BASELINE + (lines - 1) * TEXT_LINE + 6;
        let rows = self.badge_rows.len() as i32;
        let badges = if rows == 0 {
            0
        } else {
            rows * BADGE_HEIGHT + (rows - 1) * BADGE_GAP + 10
        };
        (text_bottom + badges + BADGE_BOTTOM).max(MIN_CARD_HEIGHT)
    }
}

fn card_text(step: &Step) -> Option<CardText> {
    let (kind, instructions) = match &step.kind {
        StepKind::Agent { work } => (CardKind::Agent, work.instructions.clone()),
        StepKind::Task { work, .. } => (CardKind::Task, work.instructions.clone()),
        StepKind::Approve { text, .. } => (CardKind::Approve, text.clone()),
        StepKind::Wait { duration } => (CardKind::Wait, format!("Continues after {duration}.")),
        StepKind::WaitUntil { path } => (CardKind::WaitUntil, format!("Continues at the time in {path}.")),
        StepKind::WaitFor { event, .. } => (
            CardKind::WaitFor,
            format!("Continues when the event {event} arrives."),
        ),
        StepKind::Parallel { branches } => {
            let names: Vec<&str> = branches.iter().map(|b| b.as_str()).collect();
            (
                CardKind::Parallel,
                format!(
                    "Starts {} at once; continues when every branch has joined.",
                    and_list(&names)
                ),
            )
        }
        StepKind::Finish { .. } => return None,
    };
    let instructions = text::collapse(&instructions);
    let id_room = CARD_CONTENT - f64::from(chip_width(kind)) - 8.0;
    let note = match &step.kind {
        StepKind::Approve { on_reject: None, .. } => Some("If rejected, the run ends rejected.".to_string()),
        _ => None,
    };
    Some(CardText {
        kind,
        title: text::fit(
            &text::humanize(step.id.as_str()),
            CARD_CONTENT,
            TITLE_FONT,
            Face::SansBold,
        ),
        id_text: text::fit(step.id.as_str(), id_room, ID_FONT, Face::Mono),
        text_lines: text::wrap(&instructions, CARD_CONTENT, TEXT_FONT, Face::Sans, TEXT_LINES),
        instructions,
        note,
        badge_rows: badge_rows(badges(step)),
    })
}

/// The width of the chip that names a card's kind.
pub(crate) fn chip_width(kind: CardKind) -> i32 {
    let chip = kind.title().to_uppercase();
    (text::width(&chip, CHIP_FONT, Face::SansBold).ceil() as i32) + 2 * CHIP_PAD
}

/// "a", "a and b", "a, b and c".
fn and_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The badges a step shows: outputs, evidence, check, due and timeout.
fn badges(step: &Step) -> Vec<(BadgeKind, String)> {
    let mut badges = Vec::new();
    if let Some(work) = step.work() {
        if !work.output.is_empty() {
            let names: Vec<&str> = work.output.keys().map(String::as_str).collect();
            badges.push((BadgeKind::Output, output_badge(&names)));
        }
        if !work.evidence.is_empty() {
            let kinds: Vec<&str> = work.evidence.iter().map(|e| e.name()).collect();
            badges.push((BadgeKind::Evidence, format!("evidence: {}", kinds.join(", "))));
        }
        if let Some(check) = &work.check {
            let count = check.questions.len();
            let questions = if count == 1 {
                "1 question".to_string()
            } else {
                format!("{count} questions")
            };
            let kind = if work.advisory { "advisory check" } else { "check" };
            badges.push((BadgeKind::Check, format!("{kind}: {questions}")));
        }
    }
    if let Some(due) = step.due() {
        badges.push((BadgeKind::Due, format!("due {due}")));
    }
    if let StepKind::WaitFor {
        timeout: Some(timeout),
        ..
    } = &step.kind
    {
        badges.push((BadgeKind::Timeout, format!("timeout {timeout}")));
    }
    badges
}

/// `output: a, b, c`, with fewer names and a count of the rest when that is too wide.
fn output_badge(names: &[&str]) -> String {
    let room = CARD_CONTENT - f64::from(2 * BADGE_PAD);
    let fits = |text: &str| text::width(text, BADGE_FONT, Face::Sans) <= room;
    for shown in (1..=names.len()).rev() {
        let mut text = format!("output: {}", names[..shown].join(", "));
        if shown < names.len() {
            text.push_str(&format!(" +{}", names.len() - shown));
        }
        if fits(&text) {
            return text;
        }
    }
    let count = if names.len() == 1 {
        "1 field".to_string()
    } else {
        format!("{} fields", names.len())
    };
    text::fit(&format!("output: {count}"), room, BADGE_FONT, Face::Sans)
}

/// Badges fitted and set in rows across the card, left to right.
fn badge_rows(badges: Vec<(BadgeKind, String)>) -> Vec<Vec<(BadgeKind, String, i32)>> {
    let room = CARD_CONTENT;
    let mut rows: Vec<Vec<(BadgeKind, String, i32)>> = Vec::new();
    let mut used = 0.0;
    for (kind, text) in badges {
        let text = text::fit(&text, room - f64::from(2 * BADGE_PAD), BADGE_FONT, Face::Sans);
        let width = text::width(&text, BADGE_FONT, Face::Sans).ceil() as i32 + 2 * BADGE_PAD;
        let needed = f64::from(width) + if used > 0.0 { f64::from(BADGE_GAP) } else { 0.0 };
        match rows.last_mut() {
            Some(row) if used + needed <= room => {
                row.push((kind, text, width));
                used += needed;
            }
            _ => {
                rows.push(vec![(kind, text, width)]);
                used = f64::from(width);
            }
        }
    }
    rows
}

/// An End marker's text, fitted.
struct EndText {
    outcome: String,
    outcome_lines: Vec<String>,
}

impl EndText {
    fn height(&self) -> i32 {
        END_OUTCOME_BASELINE
            + (self.outcome_lines.len() as i32 - 1) * END_OUTCOME_LINE
            + END_ID_GAP
            + END_BOTTOM
    }
}

fn end_text(step: &Step) -> Option<EndText> {
    let StepKind::Finish { outcome } = &step.kind else {
        return None;
    };
    let room = f64::from(END_WIDTH - 2 * CARD_PAD);
    Some(EndText {
        outcome: outcome.clone(),
        outcome_lines: text::wrap(outcome, room, END_OUTCOME_FONT, Face::SansBold, 2),
    })
}

/// A line's label, wrapped, with the box it needs.
struct LabelText {
    text: String,
    lines: Vec<String>,
    width: i32,
    height: i32,
}

fn label_text(line: &FlowLine) -> Option<LabelText> {
    let text = text::collapse(line.label.as_deref()?);
    if text.is_empty() {
        return None;
    }
    let max_lines = if line.kind == LineKind::Rejected { 1 } else { 2 };
    let lines = text::wrap(&text, LABEL_TEXT_WIDTH, LABEL_FONT, Face::Sans, max_lines);
    let widest = lines
        .iter()
        .map(|l| text::width(l, LABEL_FONT, Face::Sans))
        .fold(0.0, f64::max);
    Some(LabelText {
        text,
        width: widest.ceil() as i32 + 2 * LABEL_PAD,
        height: lines.len() as i32 * LABEL_LINE + 6,
        lines,
    })
}

/// Which side of a node a line touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Side {
    Left,
    Right,
    Top,
    Bottom,
}

/// Turns the plans into coordinates.
struct Placer<'a> {
    process: &'a Process,
    flow: &'a Flow,
    graph: &'a Graph,
    grid: &'a Grid,
    plans: &'a [Plan],
    cards: &'a [Option<CardText>],
    ends: &'a [Option<EndText>],
    decisions: &'a [bool],
    labels: &'a [Option<LabelText>],
}

impl Placer<'_> {
    fn nodes(&self, index: usize) -> (Option<usize>, Option<usize>) {
        let line = &self.flow.lines[index];
        (self.graph.node(line.from), self.graph.node(line.to))
    }

    /// The lines on each side of each node, in the order they sit along that side.
    fn ports(&self) -> HashMap<(usize, Side), Vec<usize>> {
        let mut ports: HashMap<(usize, Side), Vec<usize>> = HashMap::new();
        for (index, plan) in self.plans.iter().enumerate() {
            let (from, to) = self.nodes(index);
            match *plan {
                Plan::Start | Plan::Forward(_) => {
                    if let Some(to) = to {
                        ports.entry((to, Side::Left)).or_default().push(index);
                    }
                    if let Some(from) = from
                        && !self.decisions.get(from).copied().unwrap_or(false)
                    {
                        ports.entry((from, Side::Right)).or_default().push(index);
                    }
                }
                Plan::Back {
                    leave_top, enter_top, ..
                } => {
                    if let Some(from) = from {
                        let side = if leave_top { Side::Top } else { Side::Bottom };
                        ports.entry((from, side)).or_default().push(index);
                    }
                    if let Some(to) = to {
                        let side = if enter_top { Side::Top } else { Side::Bottom };
                        ports.entry((to, side)).or_default().push(index);
                    }
                }
            }
        }
        let far_end = |index: usize, side: Side| -> (usize, usize) {
            let (from, to) = self.nodes(index);
            let other = if side == Side::Left { from } else { to };
            match other {
                Some(node) => (self.grid.sort_row(node) + 1, self.grid.column[node]),
                None => (0, 0),
            }
        };
        for ((_, side), lines) in ports.iter_mut() {
            if matches!(side, Side::Left | Side::Right) {
                lines.sort_by_key(|&index| (far_end(index, *side), index));
            }
        }
        ports
    }

    fn place(self) -> ProcessMap {
        let grid = self.grid;
        let graph = self.graph;
        let ports = self.ports();
        let count_on = |node: usize, side: Side| ports.get(&(node, side)).map_or(0, Vec::len) as i32;
        let spacing_on = |node: usize, side: Side| {
            let labelled = ports
                .get(&(node, side))
                .is_some_and(|lines| lines.iter().any(|&l| self.labels[l].is_some()));
            if labelled {
                PORT_SPACING_LABELLED
            } else {
                PORT_SPACING
            }
        };

        // Heights: one card height for the map; End markers as tall as their text and lines.
        let mut end_height: HashMap<usize, i32> = HashMap::new();
        let mut card_height = MIN_CARD_HEIGHT;
        for at in 0..graph.steps {
            if let Some(card) = &self.cards[at] {
                card_height = card_height
                    .max(card.height())
                    .max((count_on(at, Side::Left) + 1) * spacing_on(at, Side::Left))
                    .max((count_on(at, Side::Right) + 1) * spacing_on(at, Side::Right));
            }
            if let Some(end) = &self.ends[at] {
                let height = end
                    .height()
                    .max((count_on(at, Side::Left) + 1) * spacing_on(at, Side::Left));
                end_height.insert(at, height);
                card_height = card_height.max(height + 2 * PORT_SPACING_LABELLED);
            }
        }

        // Gutter slots, then the rows' tops.
        let mut gutter_slots = vec![0usize; grid.rows + 1];
        let mut slot_of: Vec<(usize, usize)> = vec![(0, 0); self.plans.len()];
        for (index, plan) in self.plans.iter().enumerate() {
            match *plan {
                Plan::Forward(Via::Gutter(gutter)) => {
                    slot_of[index].0 = gutter_slots[gutter];
                    gutter_slots[gutter] += 1;
                }
                Plan::Back { first, second, .. } => {
                    slot_of[index].0 = gutter_slots[first];
                    gutter_slots[first] += LABELLED_SLOTS;
                    if let Some((_, second)) = second {
                        slot_of[index].1 = gutter_slots[second];
                        gutter_slots[second] += 1;
                    }
                }
                _ => {}
            }
        }
        let gutter_height: Vec<i32> = gutter_slots
            .iter()
            .map(|&slots| GUTTER_MIN.max(2 * GUTTER_FIRST + slots as i32 * GUTTER_STEP))
            .collect();
        let lanes_top = MARGIN + HEADING_HEIGHT;
        let mut row_top = Vec::with_capacity(grid.rows);
        let mut gutter_top = Vec::with_capacity(grid.rows + 1);
        let mut y = lanes_top;
        for gutter in gutter_height.iter().take(grid.rows) {
            gutter_top.push(y);
            y += gutter;
            row_top.push(y);
            y += card_height;
        }
        gutter_top.push(y);
        let lanes_bottom = y + gutter_height[grid.rows];
        let gutter_y =
            |gutter: usize, slot: usize| gutter_top[gutter] + GUTTER_FIRST + slot as i32 * GUTTER_STEP;

        // Vertical extents of the steps; ports on their left and right sides.
        let mut rect: Vec<Rect> = vec![
            Rect {
                x: 0,
                y: 0,
                width: 0,
                height: 0
            };
            graph.count()
        ];
        for at in 0..graph.steps {
            let top = row_top[grid.row[at].unwrap_or(0)];
            rect[at] = match end_height.get(&at) {
                // Centred on the row's middle exactly, so a line from a card's centre is straight.
                Some(&height) => Rect {
                    x: 0,
                    y: top + card_height / 2 - height / 2,
                    width: END_WIDTH,
                    height,
                },
                None => Rect {
                    x: 0,
                    y: top,
                    width: CARD_WIDTH,
                    height: card_height,
                },
            };
        }
        let side_y = |rect: &Rect, position: usize, count: usize| {
            rect.y + ((position as i32 + 1) * rect.height) / (count as i32 + 1)
        };
        let mut exit_y: Vec<i32> = vec![0; self.plans.len()];
        let mut entry_y: Vec<i32> = vec![0; self.plans.len()];
        for ((node, side), lines) in &ports {
            if *node >= graph.steps {
                continue;
            }
            for (position, &index) in lines.iter().enumerate() {
                let y = side_y(&rect[*node], position, lines.len());
                match side {
                    Side::Left => entry_y[index] = y,
                    Side::Right => exit_y[index] = y,
                    _ => {}
                }
            }
        }
        for (at, decides) in self.decisions.iter().enumerate() {
            if *decides {
                for (index, line) in self.flow.lines.iter().enumerate() {
                    if line.from == End::Step(at) && !matches!(self.plans[index], Plan::Back { .. }) {
                        exit_y[index] = rect[at].center().y;
                    }
                }
            }
        }
        // Join bars: each line enters at the height it leaves its step, kept apart.
        for bar in graph.steps..graph.count() {
            let mut entering: Vec<usize> = (0..self.plans.len())
                .filter(|&index| self.nodes(index).1 == Some(bar))
                .collect();
            entering.sort_by_key(|&index| (exit_y[index], index));
            let mut previous: Option<i32> = None;
            for &index in &entering {
                let y = match previous {
                    Some(above) => exit_y[index].max(above + PORT_SPACING_LABELLED),
                    None => exit_y[index],
                };
                entry_y[index] = y;
                previous = Some(y);
            }
            let (first, last) = match (entering.first(), entering.last()) {
                (Some(&first), Some(&last)) => (entry_y[first], entry_y[last]),
                _ => {
                    let y = row_top[grid.sort_row(bar)] + card_height / 2;
                    (y, y)
                }
            };
            rect[bar] = Rect {
                x: 0,
                y: first - BAR_OVERHANG,
                width: BAR_WIDTH,
                height: last - first + 2 * BAR_OVERHANG,
            };
            for index in 0..self.plans.len() {
                if self.nodes(index).0 == Some(bar) {
                    let target = entry_y[index];
                    exit_y[index] = if target >= rect[bar].y + 10 && target <= rect[bar].bottom() - 10 {
                        target
                    } else {
                        rect[bar].center().y
                    };
                }
            }
        }
        for (index, plan) in self.plans.iter().enumerate() {
            if *plan == Plan::Start {
                exit_y[index] = entry_y[index];
            }
        }

        // Channels in the gaps, and each gap's width.
        let columns = grid.columns;
        let decision_in: Vec<bool> = (0..columns)
            .map(|c| (0..graph.steps).any(|at| self.decisions[at] && grid.column[at] == c))
            .collect();
        let zone = |gap: usize| if decision_in[gap] { DIAMOND_ZONE } else { 0 };
        // Each vertical run in a gap: (gap, line, which of the line's two channels, from y, to y,
        // whether the line crosses the gap leftwards).
        let mut runs: Vec<(usize, usize, bool, i32, i32, bool)> = Vec::new();
        for (index, plan) in self.plans.iter().enumerate() {
            let (from, to) = self.nodes(index);
            let (Some(from), Some(to)) = (from, to) else {
                continue;
            };
            let (cs, ct) = (grid.column[from], grid.column[to]);
            let (exit, entry) = (exit_y[index], entry_y[index]);
            match *plan {
                Plan::Forward(Via::Near) if exit != entry => {
                    runs.push((cs, index, false, exit, entry, false))
                }
                Plan::Forward(Via::SourceRow) if exit != entry => {
                    runs.push((ct - 1, index, true, exit, entry, false))
                }
                Plan::Forward(Via::Gutter(gutter)) => {
                    let y = gutter_y(gutter, slot_of[index].0);
                    runs.push((cs, index, false, exit, y, false));
                    runs.push((ct - 1, index, true, y, entry, false));
                }
                Plan::Back {
                    first,
                    second: Some((gap, second)),
                    ..
                } => {
                    let (y1, y2) = (
                        gutter_y(first, slot_of[index].0),
                        gutter_y(second, slot_of[index].1),
                    );
                    runs.push((gap, index, false, y1, y2, true));
                }
                _ => {}
            }
        }
        // Fewest crossings among lines that cross a gap rightwards and turn the same way: going
        // down, the line that turns lowest and goes furthest takes the leftmost channel; going
        // up, the mirror. Lines that cross leftwards (rejections) take the channels after.
        runs.sort_by_key(|&(gap, index, _, from_y, to_y, leftwards)| {
            let down = to_y > from_y;
            let order = if down { (-from_y, -to_y) } else { (from_y, to_y) };
            (gap, leftwards, !down, order, index)
        });
        let mut channels = vec![0usize; columns];
        let mut channel_of: Vec<(usize, usize)> = vec![(0, 0); self.plans.len()];
        for (gap, index, second, ..) in runs {
            let channel = channels[gap];
            channels[gap] += 1;
            if second {
                channel_of[index].1 = channel;
            } else {
                channel_of[index].0 = channel;
            }
        }
        let column_width: Vec<i32> = (0..columns)
            .map(|c| {
                if (0..graph.steps).any(|at| grid.column[at] == c) {
                    CARD_WIDTH
                } else {
                    BAR_WIDTH
                }
            })
            .collect();
        let channel_offset =
            |gap: usize, channel: usize| zone(gap) + CHANNEL_FIRST + channel as i32 * CHANNEL_STEP;
        let mut gap_width: Vec<i32> = (0..columns)
            .map(|gap| {
                let lines = zone(gap) + CHANNEL_FIRST + channels[gap] as i32 * CHANNEL_STEP + 12;
                if gap + 1 == columns {
                    if channels[gap] == 0 { 0 } else { lines }
                } else {
                    GAP_MIN.max(lines)
                }
            })
            .collect();
        // Room for each label on its line's last segment, before the target.
        for (index, plan) in self.plans.iter().enumerate() {
            let (Some(label), (Some(from), Some(to))) = (&self.labels[index], self.nodes(index)) else {
                continue;
            };
            let (cs, ct) = (grid.column[from], grid.column[to]);
            let straight = exit_y[index] == entry_y[index];
            let leaves_at = if self.decisions.get(from).copied().unwrap_or(false) {
                DIAMOND_OFFSET + DIAMOND
            } else {
                0
            };
            let (gap, start) = match *plan {
                Plan::Forward(Via::Near) if straight => (cs, leaves_at),
                Plan::Forward(Via::Near) => (cs, channel_offset(cs, channel_of[index].0)),
                Plan::Forward(Via::SourceRow) if straight => (cs, leaves_at),
                Plan::Forward(Via::SourceRow) | Plan::Forward(Via::Gutter(_)) => {
                    (ct - 1, channel_offset(ct - 1, channel_of[index].1))
                }
                _ => continue,
            };
            let between: i32 = (gap + 1..ct).map(|c| column_width[c]).sum();
            let needed = start + 6 + label.width + 8 - between;
            gap_width[gap] = gap_width[gap].max(needed);
        }
        let first_column = MARGIN + LANE_HEADER_WIDTH + START_AREA;
        let mut column_x = Vec::with_capacity(columns);
        let mut x = first_column;
        for c in 0..columns {
            column_x.push(x);
            x += column_width[c] + gap_width[c];
        }
        let width = x + MARGIN;
        let height = lanes_bottom + MARGIN;
        for (node, r) in rect.iter_mut().enumerate() {
            let left = column_x[grid.column[node]];
            r.x = if node < graph.steps && self.ends[node].is_some() {
                left + (CARD_WIDTH - END_WIDTH) / 2
            } else {
                left
            };
        }
        let channel_x =
            |gap: usize, channel: usize| column_x[gap] + column_width[gap] + channel_offset(gap, channel);

        // Ports on top and bottom sides, for rejections.
        let mut side_x: HashMap<(usize, usize), i32> = HashMap::new();
        for ((node, side), lines) in &ports {
            if !matches!(side, Side::Top | Side::Bottom) {
                continue;
            }
            let r = rect[*node];
            let (mut entries, mut exits) = (0, 0);
            for &index in lines {
                let leaving = self.nodes(index).0 == Some(*node);
                let x = if leaving {
                    exits += 1;
                    r.x + r.width * 3 / 5 + (exits - 1) * SIDE_PORT_STEP
                } else {
                    entries += 1;
                    r.x + SIDE_ENTRY_FIRST + (entries - 1) * SIDE_PORT_STEP
                };
                side_x.insert((index, usize::from(leaving)), x.min(r.right() - 8));
            }
        }

        // Lines.
        let mut lines = Vec::with_capacity(self.plans.len());
        let start_center = Point {
            x: MARGIN + LANE_HEADER_WIDTH + 14 + START_RADIUS,
            y: entry_y.first().copied().unwrap_or(lanes_top),
        };
        for (index, plan) in self.plans.iter().enumerate() {
            let flow_line = &self.flow.lines[index];
            let (from, to) = self.nodes(index);
            let Some(to) = to else { continue };
            let target = rect[to];
            let entry = Point {
                x: target.x,
                y: entry_y[index],
            };
            let mut points = Vec::new();
            let mut label_rect = None;
            match *plan {
                Plan::Start => {
                    points.push(Point {
                        x: start_center.x + START_RADIUS,
                        y: entry.y,
                    });
                    points.push(entry);
                }
                Plan::Forward(via) => {
                    let Some(from) = from else { continue };
                    let source = rect[from];
                    let exit = if self.decisions.get(from).copied().unwrap_or(false) {
                        Point {
                            x: source.right() + DIAMOND_OFFSET + DIAMOND,
                            y: exit_y[index],
                        }
                    } else {
                        Point {
                            x: source.right(),
                            y: exit_y[index],
                        }
                    };
                    let (cs, ct) = (grid.column[from], grid.column[to]);
                    points.push(exit);
                    match via {
                        Via::Near => {
                            let x = channel_x(cs, channel_of[index].0);
                            points.extend([Point { x, y: exit.y }, Point { x, y: entry.y }]);
                        }
                        Via::SourceRow => {
                            let x = channel_x(ct - 1, channel_of[index].1);
                            points.extend([Point { x, y: exit.y }, Point { x, y: entry.y }]);
                        }
                        Via::Gutter(gutter) => {
                            let y = gutter_y(gutter, slot_of[index].0);
                            let out = channel_x(cs, channel_of[index].0);
                            let into = channel_x(ct - 1, channel_of[index].1);
                            points.extend([
                                Point { x: out, y: exit.y },
                                Point { x: out, y },
                                Point { x: into, y },
                                Point { x: into, y: entry.y },
                            ]);
                        }
                    }
                    points.push(entry);
                    points = simplify(points);
                    if let Some(label) = &self.labels[index] {
                        let start = points[points.len() - 2];
                        label_rect = Some(Rect {
                            x: start.x + 6,
                            y: entry.y - LABEL_LIFT - label.height,
                            width: label.width,
                            height: label.height,
                        });
                    }
                }
                Plan::Back {
                    leave_top,
                    first,
                    second,
                    enter_top,
                } => {
                    let Some(from) = from else { continue };
                    let source = rect[from];
                    let sx = side_x.get(&(index, 1)).copied().unwrap_or(source.center().x);
                    let tx = side_x.get(&(index, 0)).copied().unwrap_or(target.center().x);
                    let sy = if leave_top { source.y } else { source.bottom() };
                    let ty = if enter_top { target.y } else { target.bottom() };
                    let y1 = gutter_y(first, slot_of[index].0);
                    points.extend([Point { x: sx, y: sy }, Point { x: sx, y: y1 }]);
                    match second {
                        Some((gap, gutter)) => {
                            let x = channel_x(gap, channel_of[index].0);
                            let y2 = gutter_y(gutter, slot_of[index].1);
                            points.extend([Point { x, y: y1 }, Point { x, y: y2 }, Point { x: tx, y: y2 }]);
                        }
                        None => points.push(Point { x: tx, y: y1 }),
                    }
                    points.push(Point { x: tx, y: ty });
                    points = simplify(points);
                    if let Some(label) = &self.labels[index] {
                        let heads_right = points.get(2).is_some_and(|p| p.x > sx);
                        let x = if heads_right { sx - 6 - label.width } else { sx + 6 };
                        label_rect = Some(Rect {
                            x,
                            y: y1 - label.height / 2,
                            width: label.width,
                            height: label.height,
                        });
                    }
                }
            }
            lines.push(Line {
                from: self.endpoint(flow_line.from),
                to: self.endpoint(flow_line.to),
                kind: flow_line.kind,
                label: match (&self.labels[index], label_rect) {
                    (Some(label), Some(rect)) => Some(Label {
                        text: label.text.clone(),
                        lines: label.lines.clone(),
                        rect,
                    }),
                    _ => None,
                },
                points,
            });
        }

        // Lanes.
        let lanes: Vec<Lane> = self
            .flow
            .performers
            .iter()
            .zip(&grid.lane_rows)
            .map(|(performer, &(first, count))| {
                let last = first + count - 1;
                let top = if first == 0 {
                    lanes_top
                } else {
                    row_top[first] - gutter_height[first] / 2
                };
                let bottom = if last + 1 == grid.rows {
                    lanes_bottom
                } else {
                    row_top[last] + card_height + gutter_height[last + 1] / 2
                };
                let room = f64::from(LANE_HEADER_WIDTH - 2 * LANE_PAD);
                let (title, detail) = lane_names(performer);
                Lane {
                    performer: performer.clone(),
                    rect: Rect {
                        x: MARGIN,
                        y: top,
                        width: width - 2 * MARGIN,
                        height: bottom - top,
                    },
                    header: Rect {
                        x: MARGIN,
                        y: top,
                        width: LANE_HEADER_WIDTH,
                        height: bottom - top,
                    },
                    title_lines: text::wrap(&title, room, LANE_TITLE_FONT, Face::SansBold, 3),
                    detail_lines: detail
                        .map(|d| text::wrap(&d, room, LANE_DETAIL_FONT, Face::Mono, 3))
                        .unwrap_or_default(),
                }
            })
            .collect();

        // Cards, markers and join bars.
        let mut cards = Vec::new();
        let mut markers = vec![Marker {
            kind: MarkerKind::Start,
            lane: self.flow.lane_of.first().copied().unwrap_or(0),
            rect: Rect {
                x: start_center.x - START_RADIUS,
                y: start_center.y - START_RADIUS,
                width: 2 * START_RADIUS,
                height: 2 * START_RADIUS,
            },
        }];
        for (at, step) in self.process.steps.iter().enumerate() {
            let lane = self.flow.lane_of[at];
            let r = rect[at];
            if let Some(card) = &self.cards[at] {
                let mut badges = Vec::new();
                let rows = card.badge_rows.len() as i32;
                for (row_index, row) in card.badge_rows.iter().enumerate() {
                    let y = r.bottom()
                        - BADGE_BOTTOM
                        - (rows - row_index as i32) * BADGE_HEIGHT
                        - (rows - 1 - row_index as i32) * BADGE_GAP;
                    let mut x = r.x + CARD_PAD;
                    for (kind, text, width) in row {
                        badges.push(Badge {
                            kind: *kind,
                            text: text.clone(),
                            rect: Rect {
                                x,
                                y,
                                width: *width,
                                height: BADGE_HEIGHT,
                            },
                        });
                        x += width + BADGE_GAP;
                    }
                }
                cards.push(Card {
                    step: step.id.clone(),
                    kind: card.kind,
                    lane,
                    rect: r,
                    title: card.title.clone(),
                    id_text: card.id_text.clone(),
                    text_lines: card.text_lines.clone(),
                    instructions: card.instructions.clone(),
                    note: card.note.clone(),
                    badges,
                });
                if self.decisions[at] {
                    markers.push(Marker {
                        kind: MarkerKind::Decision {
                            step: step.id.clone(),
                        },
                        lane,
                        rect: Rect {
                            x: r.right() + DIAMOND_OFFSET,
                            y: r.center().y - DIAMOND / 2,
                            width: DIAMOND,
                            height: DIAMOND,
                        },
                    });
                }
            }
            if let Some(end) = &self.ends[at] {
                markers.push(Marker {
                    kind: MarkerKind::End {
                        step: step.id.clone(),
                        outcome: end.outcome.clone(),
                        outcome_lines: end.outcome_lines.clone(),
                    },
                    lane,
                    rect: r,
                });
            }
        }
        let join_bars = graph
            .bar_step
            .iter()
            .enumerate()
            .map(|(number, &parallel)| JoinBar {
                parallel: self.process.steps[parallel].id.clone(),
                rect: rect[graph.steps + number],
            })
            .collect();
        let room = f64::from(width - 2 * MARGIN);
        ProcessMap {
            name: self.process.name.as_str().to_string(),
            description: self.process.description.clone(),
            description_lines: text::wrap(&self.process.description, room, DESCRIPTION_FONT, Face::Sans, 2),
            width,
            height,
            lanes,
            cards,
            markers,
            join_bars,
            lines,
        }
    }

    fn endpoint(&self, end: End) -> Endpoint {
        match end {
            End::Start => Endpoint::Start,
            End::Step(at) => Endpoint::Step(self.process.steps[at].id.clone()),
            End::Bar(at) => Endpoint::Join {
                parallel: self.process.steps[at].id.clone(),
            },
        }
    }
}

/// A lane's title and what it stands for.
fn lane_names(performer: &Performer) -> (String, Option<String>) {
    match performer {
        Performer::Agent => ("Agent".to_string(), None),
        Performer::Role(name) => (text::humanize(name), Some(format!("role {name}"))),
        Performer::Initiator => ("Initiator".to_string(), Some("who started the run".to_string())),
        Performer::Data(path) => {
            let field = path.rsplit('.').next().unwrap_or(path);
            (text::humanize(field), Some(path.clone()))
        }
    }
}

/// Drops repeated points and points in the middle of a straight run.
fn simplify(points: Vec<Point>) -> Vec<Point> {
    let mut kept: Vec<Point> = Vec::with_capacity(points.len());
    for point in points {
        if kept.last() == Some(&point) {
            continue;
        }
        if kept.len() >= 2 {
            let (a, b) = (kept[kept.len() - 2], kept[kept.len() - 1]);
            if (a.x == b.x && b.x == point.x) || (a.y == b.y && b.y == point.y) {
                kept.pop();
            }
        }
        kept.push(point);
    }
    kept
}
