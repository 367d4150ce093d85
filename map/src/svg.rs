//! Draws a [`ProcessMap`] as one standalone SVG 1.1 document: no script, no external font, no
//! link, every text escaped, and data attributes that name what each shape draws.
//!
//! What tests and the UI can rely on:
//! - the root `<svg>` has `role="img"`, a `<title>` and a `<desc>` (a plain-language walk
//!   through the steps), and `data-process`;
//! - a lane is a `<g data-lane="KEY" data-lane-kind="agent|role|initiator|data">`, in order;
//! - a step that is not a `finish` is a `<g class="card" data-step="ID" data-kind="KIND"
//!   data-lane="KEY">`; a `finish` is a `<g class="end" data-marker="end" data-step="ID"
//!   data-kind="finish" data-outcome="OUTCOME">`; highlighted ones carry `data-state`;
//! - the Start marker is `<g data-marker="start">`, a decision point `<g data-marker="decision"
//!   data-decision="ID">`, a join bar `<g class="join-bar" data-join="ID">`;
//! - a line is a `<g class="line" data-kind data-from data-to data-style>` with `data-label`
//!   when it has one and `data-parallel` when it leaves or enters a join bar (`data-from` or
//!   `data-to` is then `join`);
//! - the outline of each card, marker and bar has `class="shape"`, and each line's path
//!   `class="line-path"`, so their geometry can be read back.

use crate::layout::{
    BADGE_FONT, BADGE_PAD, CARD_PAD, CHIP_FONT, CHIP_HEIGHT, CHIP_PAD, CHIP_Y, DESCRIPTION_BASELINE,
    DESCRIPTION_FONT, DESCRIPTION_LINE, END_ID_GAP, END_LABEL_BASELINE, END_OUTCOME_BASELINE,
    END_OUTCOME_FONT, END_OUTCOME_LINE, ID_FONT, LABEL_FONT, LABEL_LINE, LABEL_PAD, LANE_DETAIL_FONT,
    LANE_DETAIL_LINE, LANE_PAD, LANE_TITLE_FONT, LANE_TITLE_LINE, MARGIN, NAME_BASELINE, NAME_FONT,
    TEXT_BASELINE, TEXT_FONT, TEXT_LINE, TITLE_BASELINE, TITLE_FONT, chip_width,
};
use crate::model::{
    BadgeKind, Card, CardKind, Endpoint, Lane, Line, LineKind, LineStyle, Marker, MarkerKind, ProcessMap,
};
use crate::text;
use agentprocess_process::StepId;
use std::fmt::Write;

/// What a run has reached, to mark on the map: the steps it is at now and the steps done.
/// [`Highlight::none`] draws a process version as published.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Highlight {
    /// The run's current steps: ready, claimed or waiting (several inside a parallel region).
    pub current: Vec<StepId>,
    /// Steps already completed.
    pub done: Vec<StepId>,
}

impl Highlight {
    /// Nothing highlighted: the map of a process version.
    pub fn none() -> Highlight {
        Highlight::default()
    }

    fn state(&self, step: &StepId) -> Option<&'static str> {
        if self.current.contains(step) {
            Some("current")
        } else if self.done.contains(step) {
            Some("done")
        } else {
            None
        }
    }
}

const SANS: &str = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif";
const MONO: &str = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'Liberation Mono', monospace";

/// Colours, each at least 4.5:1 against what it is drawn on.
const INK: &str = "#111827";
const INK_SOFT: &str = "#374151";
const PAPER: &str = "#ffffff";
const LANE_EVEN: &str = "#f8fafc";
const LANE_ODD: &str = "#eef2f7";
const LANE_HEADER: &str = "#e2e8f0";
const LANE_RULE: &str = "#cbd5e1";
const LINE: &str = "#475569";
const REJECTED: &str = "#b91c1c";
const NOTE: &str = "#991b1b";
const CURRENT: &str = "#c2410c";
const DONE: &str = "#047857";
const DONE_FILL: &str = "#ecfdf5";
const BAR: &str = "#334155";
const DECISION_FILL: &str = "#fef3c7";
const DECISION_STROKE: &str = "#92400e";

fn kind_colour(kind: CardKind) -> &'static str {
    match kind {
        CardKind::Agent => "#1d4ed8",
        CardKind::Task => "#047857",
        CardKind::Approve => "#6d28d9",
        CardKind::Wait | CardKind::WaitUntil | CardKind::WaitFor => "#92400e",
        CardKind::Parallel => "#334155",
    }
}

/// Draws the map as a standalone SVG document, with the run's steps highlighted.
pub fn render_svg(map: &ProcessMap, highlight: &Highlight) -> String {
    let mut svg = String::with_capacity(16 * 1024);
    let (w, h) = (map.width, map.height);
    let _ = writeln!(svg, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{w}" height="{h}" viewBox="0 0 {w} {h}" preserveAspectRatio="xMinYMin meet" role="img" aria-labelledby="process-map-title process-map-desc" data-process="{name}" font-family="{SANS}" style="max-width:100%;height:auto">"#,
        name = escape(&map.name),
    );
    let _ = writeln!(
        svg,
        r#"<title id="process-map-title">Process map: {}</title>"#,
        escape(&map.name)
    );
    let _ = writeln!(
        svg,
        r#"<desc id="process-map-desc">{}</desc>"#,
        escape(&describe(map))
    );
    defs(&mut svg);
    let _ = writeln!(svg, r#"<rect width="{w}" height="{h}" fill="{PAPER}"/>"#);
    heading(&mut svg, map);
    svg.push_str("<g class=\"lanes\">\n");
    for (index, lane) in map.lanes.iter().enumerate() {
        draw_lane(&mut svg, index, lane);
    }
    svg.push_str("</g>\n<g class=\"lines\">\n");
    for line in &map.lines {
        draw_line(&mut svg, line);
    }
    svg.push_str("</g>\n<g class=\"markers\">\n");
    for bar in &map.join_bars {
        let r = bar.rect;
        let _ = writeln!(
            svg,
            r#"<g class="join-bar" data-join="{id}"><title>Join: the branches of {id} meet here</title><rect class="shape" x="{}" y="{}" width="{}" height="{}" rx="3" fill="{BAR}"/></g>"#,
            r.x,
            r.y,
            r.width,
            r.height,
            id = escape(bar.parallel.as_str()),
        );
    }
    for marker in &map.markers {
        draw_marker(&mut svg, map, marker, highlight);
    }
    svg.push_str("</g>\n<g class=\"cards\">\n");
    for card in &map.cards {
        draw_card(&mut svg, map, card, highlight);
    }
    svg.push_str("</g>\n<g class=\"labels\">\n");
    for (index, line) in map.lines.iter().enumerate() {
        draw_label(&mut svg, index, line);
    }
    svg.push_str("</g>\n</svg>\n");
    svg
}

fn defs(svg: &mut String) {
    let _ = writeln!(svg, "<defs>");
    for (id, colour) in [
        ("process-map-arrow", LINE),
        ("process-map-arrow-rejected", REJECTED),
    ] {
        let _ = writeln!(
            svg,
            r#"<marker id="{id}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" markerUnits="userSpaceOnUse" orient="auto"><path d="M0 0 L10 5 L0 10 z" fill="{colour}"/></marker>"#
        );
    }
    let _ = writeln!(svg, "</defs>");
}

fn heading(svg: &mut String, map: &ProcessMap) {
    let _ = writeln!(
        svg,
        r#"<g class="heading"><text x="{MARGIN}" y="{}" font-size="{NAME_FONT}" font-weight="700" fill="{INK}">{}</text>"#,
        MARGIN + NAME_BASELINE,
        escape(&map.name)
    );
    for (index, line) in map.description_lines.iter().enumerate() {
        let _ = writeln!(
            svg,
            r#"<text x="{MARGIN}" y="{}" font-size="{DESCRIPTION_FONT}" fill="{INK_SOFT}">{}</text>"#,
            MARGIN + DESCRIPTION_BASELINE + index as i32 * DESCRIPTION_LINE,
            escape(line)
        );
    }
    svg.push_str("</g>\n");
}

fn draw_lane(svg: &mut String, index: usize, lane: &Lane) {
    let r = lane.rect;
    let head = lane.header;
    let fill = if index.is_multiple_of(2) {
        LANE_EVEN
    } else {
        LANE_ODD
    };
    let _ = writeln!(
        svg,
        r#"<g class="lane" data-lane="{}" data-lane-kind="{}" data-lane-index="{index}">"#,
        escape(lane.performer.key()),
        lane.performer.kind_name(),
    );
    let _ = writeln!(
        svg,
        r#"<rect class="lane-band" x="{}" y="{}" width="{}" height="{}" fill="{fill}" stroke="{LANE_RULE}"/>"#,
        r.x, r.y, r.width, r.height
    );
    let _ = writeln!(
        svg,
        r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{LANE_HEADER}" stroke="{LANE_RULE}"/>"#,
        head.x, head.y, head.width, head.height
    );
    let mut y = head.y + LANE_PAD + LANE_TITLE_LINE - 4;
    for line in &lane.title_lines {
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{y}" font-size="{LANE_TITLE_FONT}" font-weight="700" fill="{INK}">{}</text>"#,
            head.x + LANE_PAD,
            escape(line)
        );
        y += LANE_TITLE_LINE;
    }
    for line in &lane.detail_lines {
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{y}" font-size="{LANE_DETAIL_FONT}" font-family="{MONO}" fill="{INK_SOFT}">{}</text>"#,
            head.x + LANE_PAD,
            escape(line)
        );
        y += LANE_DETAIL_LINE;
    }
    svg.push_str("</g>\n");
}

/// `(data-from or data-to, data-parallel)` for an endpoint.
fn endpoint_attributes(endpoint: &Endpoint) -> (&str, Option<&str>) {
    match endpoint {
        Endpoint::Start => ("start", None),
        Endpoint::Step(id) => (id.as_str(), None),
        Endpoint::Join { parallel } => ("join", Some(parallel.as_str())),
    }
}

fn draw_line(svg: &mut String, line: &Line) {
    let (from, from_parallel) = endpoint_attributes(&line.from);
    let (to, to_parallel) = endpoint_attributes(&line.to);
    let mut attributes = format!(
        r#"class="line" data-kind="{}" data-from="{}" data-to="{}" data-style="{}""#,
        line.kind.name(),
        escape(from),
        escape(to),
        line.kind.style().name()
    );
    if let Some(parallel) = from_parallel.or(to_parallel) {
        let _ = write!(attributes, r#" data-parallel="{}""#, escape(parallel));
    }
    if let Some(label) = &line.label {
        let _ = write!(attributes, r#" data-label="{}""#, escape(&label.text));
    }
    let mut d = String::new();
    for (index, point) in line.points.iter().enumerate() {
        let _ = write!(
            d,
            "{}{} {}",
            if index == 0 { "M" } else { " L" },
            point.x,
            point.y
        );
    }
    let (colour, arrow, dash) = match line.kind.style() {
        LineStyle::Dashed => (
            REJECTED,
            "process-map-arrow-rejected",
            r#" stroke-dasharray="7 5""#,
        ),
        LineStyle::Solid => (LINE, "process-map-arrow", ""),
    };
    let title = match &line.label {
        Some(label) => format!("{from} to {to}: {}", label.text),
        None => format!("{from} to {to}"),
    };
    let _ = writeln!(
        svg,
        r#"<g {attributes}><title>{}</title><path class="line-path" d="{d}" fill="none" stroke="{colour}" stroke-width="1.75" stroke-linejoin="round"{dash} marker-end="url(#{arrow})"/></g>"#,
        escape(&title)
    );
}

fn draw_label(svg: &mut String, index: usize, line: &Line) {
    let Some(label) = &line.label else { return };
    let r = label.rect;
    let colour = if line.kind == LineKind::Rejected {
        REJECTED
    } else {
        INK
    };
    let _ = write!(
        svg,
        r#"<g class="line-label" data-line="{index}"><rect x="{}" y="{}" width="{}" height="{}" rx="4" fill="{PAPER}" fill-opacity="0.94" stroke="{LANE_RULE}"/>"#,
        r.x, r.y, r.width, r.height
    );
    for (number, text) in label.lines.iter().enumerate() {
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" font-size="{LABEL_FONT}" fill="{colour}">{}</text>"#,
            r.x + LABEL_PAD,
            r.y + 3 + (number as i32 + 1) * LABEL_LINE - 3,
            escape(text)
        );
    }
    svg.push_str("</g>\n");
}

fn draw_marker(svg: &mut String, map: &ProcessMap, marker: &Marker, highlight: &Highlight) {
    let r = marker.rect;
    let lane = map.lanes.get(marker.lane).map_or("", |l| l.performer.key());
    match &marker.kind {
        MarkerKind::Start => {
            let c = r.center();
            let _ = writeln!(
                svg,
                r#"<g class="start" data-marker="start" data-lane="{}"><title>Start</title><circle class="shape" cx="{}" cy="{}" r="{}" fill="{INK}"/><text x="{}" y="{}" font-size="10" font-weight="700" fill="{PAPER}" text-anchor="middle">Start</text></g>"#,
                escape(lane),
                c.x,
                c.y,
                r.width / 2,
                c.x,
                c.y + 4
            );
        }
        MarkerKind::Decision { step } => {
            let c = r.center();
            let card_right = map
                .cards
                .iter()
                .find(|card| &card.step == step)
                .map_or(r.x, |card| card.rect.right());
            let _ = writeln!(
                svg,
                r#"<g class="decision" data-marker="decision" data-decision="{id}"><title>Decision after {id}: one route is chosen</title><path d="M{card_right} {cy} L{} {cy}" stroke="{LINE}" stroke-width="1.75"/><polygon class="shape" points="{},{} {},{} {},{} {},{}" fill="{DECISION_FILL}" stroke="{DECISION_STROKE}" stroke-width="1.5"/></g>"#,
                r.x,
                c.x,
                r.y,
                r.right(),
                c.y,
                c.x,
                r.bottom(),
                r.x,
                c.y,
                id = escape(step.as_str()),
                cy = c.y,
            );
        }
        MarkerKind::End {
            step,
            outcome,
            outcome_lines,
        } => {
            let state = highlight.state(step);
            let state_attribute = state.map(|s| format!(r#" data-state="{s}""#)).unwrap_or_default();
            let (stroke, width) = match state {
                Some("current") => (CURRENT, 4),
                _ => (INK, 3),
            };
            let fill = if state == Some("done") {
                DONE_FILL
            } else {
                "#f3f4f6"
            };
            let _ = write!(
                svg,
                r#"<g class="end" data-marker="end" data-step="{id}" data-kind="finish" data-lane="{}" data-outcome="{}"{state_attribute}><title>End: the run ends {}</title><rect class="shape" x="{}" y="{}" width="{}" height="{}" rx="{}" fill="{fill}" stroke="{stroke}" stroke-width="{width}"/>"#,
                escape(lane),
                escape(outcome),
                escape(outcome),
                r.x,
                r.y,
                r.width,
                r.height,
                (r.height / 2).min(28),
                id = escape(step.as_str()),
            );
            let cx = r.center().x;
            let _ = write!(
                svg,
                r#"<text x="{cx}" y="{}" font-size="10" font-weight="700" fill="{INK_SOFT}" text-anchor="middle">END</text>"#,
                r.y + END_LABEL_BASELINE
            );
            let mut y = r.y + END_OUTCOME_BASELINE;
            for line in outcome_lines {
                let _ = write!(
                    svg,
                    r#"<text x="{cx}" y="{y}" font-size="{END_OUTCOME_FONT}" font-weight="700" fill="{INK}" text-anchor="middle">{}</text>"#,
                    escape(line)
                );
                y += END_OUTCOME_LINE;
            }
            let id_room = f64::from(r.width - 2 * CARD_PAD);
            let _ = writeln!(
                svg,
                r#"<text x="{cx}" y="{}" font-size="10" font-family="{MONO}" fill="{INK_SOFT}" text-anchor="middle">{}</text></g>"#,
                y - END_OUTCOME_LINE + END_ID_GAP,
                escape(&text::fit(step.as_str(), id_room, 10.0, text::Face::Mono))
            );
        }
    }
}

fn draw_card(svg: &mut String, map: &ProcessMap, card: &Card, highlight: &Highlight) {
    let r = card.rect;
    let colour = kind_colour(card.kind);
    let lane = map.lanes.get(card.lane).map_or("", |l| l.performer.key());
    let state = highlight.state(&card.step);
    let state_attribute = state.map(|s| format!(r#" data-state="{s}""#)).unwrap_or_default();
    let (fill, stroke, stroke_width) = match state {
        Some("current") => (PAPER, CURRENT, 3.5),
        Some("done") => (DONE_FILL, colour, 1.5),
        _ => (PAPER, colour, 1.5),
    };
    let _ = writeln!(
        svg,
        r#"<g class="card" data-step="{id}" data-kind="{}" data-lane="{}"{state_attribute}>"#,
        card.kind.name(),
        escape(lane),
        id = escape(card.step.as_str()),
    );
    let _ = writeln!(
        svg,
        r#"<title>{} step {}: {}</title>"#,
        card.kind.title(),
        escape(card.step.as_str()),
        escape(&card.instructions)
    );
    let _ = writeln!(
        svg,
        r#"<rect class="shape" x="{}" y="{}" width="{}" height="{}" rx="8" fill="{fill}" stroke="{stroke}" stroke-width="{stroke_width}"/>"#,
        r.x, r.y, r.width, r.height
    );
    let _ = writeln!(
        svg,
        r#"<rect x="{}" y="{}" width="5" height="{}" rx="2" fill="{colour}"/>"#,
        r.x + 1,
        r.y + 6,
        r.height - 12
    );
    // Kind chip and id.
    let chip = card.kind.title().to_uppercase();
    let chip_width = chip_width(card.kind);
    let x = r.x + CARD_PAD;
    let _ = writeln!(
        svg,
        r#"<rect x="{x}" y="{}" width="{chip_width}" height="{CHIP_HEIGHT}" rx="4" fill="{colour}"/><text x="{}" y="{}" font-size="{CHIP_FONT}" font-weight="700" fill="{PAPER}">{}</text>"#,
        r.y + CHIP_Y,
        x + CHIP_PAD,
        r.y + CHIP_Y + 13,
        escape(&chip)
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" font-size="{ID_FONT}" font-family="{MONO}" fill="{INK_SOFT}">{}</text>"#,
        x + chip_width + 8,
        r.y + CHIP_Y + 13,
        escape(&card.id_text)
    );
    if let Some(state) = state {
        let (text, colour) = if state == "current" {
            ("NOW", CURRENT)
        } else {
            ("DONE", DONE)
        };
        let _ = writeln!(
            svg,
            r#"<rect x="{}" y="{}" width="40" height="{CHIP_HEIGHT}" rx="9" fill="{colour}"/><text x="{}" y="{}" font-size="10" font-weight="700" fill="{PAPER}" text-anchor="middle">{text}</text>"#,
            r.right() - 48,
            r.y - CHIP_HEIGHT / 2,
            r.right() - 28,
            r.y - CHIP_HEIGHT / 2 + 13
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{x}" y="{}" font-size="{TITLE_FONT}" font-weight="700" fill="{INK}">{}</text>"#,
        r.y + TITLE_BASELINE,
        escape(&card.title)
    );
    let mut y = r.y + TEXT_BASELINE;
    for line in &card.text_lines {
        let _ = writeln!(
            svg,
            r#"<text x="{x}" y="{y}" font-size="{TEXT_FONT}" fill="{INK_SOFT}">{}</text>"#,
            escape(line)
        );
        y += TEXT_LINE;
    }
    if let Some(note) = &card.note {
        let _ = writeln!(
            svg,
            r#"<text x="{x}" y="{y}" font-size="{TEXT_FONT}" font-style="italic" fill="{NOTE}">{}</text>"#,
            escape(note)
        );
    }
    for badge in &card.badges {
        let b = badge.rect;
        let (fill, ink) = match badge.kind {
            BadgeKind::Check => ("#ede9fe", "#4c1d95"),
            BadgeKind::Due | BadgeKind::Timeout => ("#fef3c7", "#78350f"),
            BadgeKind::Evidence => ("#dcfce7", "#14532d"),
            BadgeKind::Output => ("#dbeafe", "#1e3a8a"),
        };
        let _ = writeln!(
            svg,
            r#"<g class="badge" data-badge="{}"><rect x="{}" y="{}" width="{}" height="{}" rx="10" fill="{fill}"/><text x="{}" y="{}" font-size="{BADGE_FONT}" fill="{ink}">{}</text></g>"#,
            badge.kind.name(),
            b.x,
            b.y,
            b.width,
            b.height,
            b.x + BADGE_PAD,
            b.y + 14,
            escape(&badge.text)
        );
    }
    svg.push_str("</g>\n");
}

/// The map in words, for screen readers: lanes, then each step with where it leads.
fn describe(map: &ProcessMap) -> String {
    let mut text = format!("{} ", map.description.trim());
    let lanes: Vec<String> = map.lanes.iter().map(|l| l.title_lines.join(" ")).collect();
    let _ = write!(text, "Lanes: {}. ", lanes.join(", "));
    let name = |endpoint: &Endpoint| match endpoint {
        Endpoint::Start => "start".to_string(),
        Endpoint::Step(id) => id.as_str().to_string(),
        Endpoint::Join { parallel } => format!("the join of {parallel}"),
    };
    for line in map.lines.iter().filter(|l| l.kind == LineKind::Start) {
        let _ = write!(text, "Starts at {}. ", name(&line.to));
    }
    for card in &map.cards {
        let lane = map
            .lanes
            .get(card.lane)
            .map_or(String::new(), |l| l.title_lines.join(" "));
        let _ = write!(text, "{} ({}, {}): ", card.step.as_str(), card.kind.title(), lane);
        let outgoing: Vec<String> = map
            .lines
            .iter()
            .filter(|l| l.from == Endpoint::Step(card.step.clone()))
            .map(|l| {
                let what = match (&l.kind, &l.label) {
                    (LineKind::Route, Some(label)) => format!("when {}, ", label.text),
                    (LineKind::Route, None) => "may go ".to_string(),
                    (LineKind::Branch, _) => "branch ".to_string(),
                    (_, Some(label)) => format!("{} ", label.text.to_lowercase()),
                    _ => String::new(),
                };
                format!("{what}to {}", name(&l.to))
            })
            .collect();
        let joins: Vec<String> = map
            .lines
            .iter()
            .filter(|l| {
                l.from
                    == Endpoint::Join {
                        parallel: card.step.clone(),
                    }
            })
            .map(|l| format!("after every branch joins, to {}", name(&l.to)))
            .collect();
        let mut all = outgoing;
        all.extend(joins);
        if let Some(note) = &card.note {
            all.push(note.trim_end_matches('.').to_lowercase());
        }
        let _ = write!(text, "{}. ", all.join("; "));
    }
    for marker in &map.markers {
        if let MarkerKind::End { step, outcome, .. } = &marker.kind {
            let _ = write!(text, "{}: the run ends {}. ", step.as_str(), outcome);
        }
    }
    text.trim_end().to_string()
}

/// Escapes text for XML content and attribute values; characters XML 1.0 cannot hold become
/// U+FFFD.
pub(crate) fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            '\t' | '\n' | '\r' => escaped.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => escaped.push('\u{FFFD}'),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn markup_and_control_characters_are_escaped() {
        assert_eq!(
            escape(r#"a<b>&"c"'d'"#),
            "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;"
        );
        assert_eq!(escape("bell\u{7}"), "bell\u{FFFD}");
    }
}
