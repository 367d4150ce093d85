//! Every example process's map (and every accepted document of the process crate's corpus, and
//! the protocol's published fixtures when `AGENTPROCESS_OFFICIAL` names them), drawn as SVG, parsed back with an XML parser and compared with what the DOCUMENT
//! declares (authoring guide, "Process maps", "How each part is drawn"). The expectations are
//! read from the parsed frontmatter here, not from the layout, so a layout that loses or
//! invents a lane, card or line fails.

use agentprocess_map::{Highlight, layout, render_svg};
use agentprocess_process::{Offer, load, parse_document};
use roxmltree::{Document, Node};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const KINDS: [&str; 8] = [
    "agent",
    "task",
    "approve",
    "wait",
    "wait_until",
    "wait_for",
    "finish",
    "parallel",
];

/// Our examples, the published fixtures when present, then the accepted corpus beside the
/// process crate's tests.
fn documents() -> Vec<(String, PathBuf)> {
    let mut documents = agentprocess_testkit::examples();
    let official = agentprocess_testkit::official_fixtures_or_skip("example_maps").unwrap_or_default();
    documents.extend(
        official
            .into_iter()
            .map(|(name, path)| (format!("official/{name}"), path)),
    );
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../process/tests/corpus/accepted");
    let mut accepted: Vec<(String, PathBuf)> = std::fs::read_dir(&corpus)
        .unwrap_or_else(|e| panic!("{}: {e}", corpus.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("PROCESS.md").is_file())
        .map(|path| {
            (
                format!("corpus/{}", path.file_name().unwrap().to_string_lossy()),
                path.join("PROCESS.md"),
            )
        })
        .collect();
    accepted.sort();
    documents.extend(accepted);
    documents
}

/// One step as the frontmatter writes it.
struct DocStep<'a> {
    id: &'a str,
    kind: &'static str,
    value: &'a Value,
}

impl DocStep<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        self.value.get(key)
    }
}

fn steps(frontmatter: &Value) -> Vec<DocStep<'_>> {
    frontmatter["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|step| DocStep {
            id: step["id"].as_str().unwrap(),
            kind: KINDS.into_iter().find(|k| step.get(*k).is_some()).unwrap(),
            value: step,
        })
        .collect()
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A line as the document declares it: (kind, from, to, parallel of a join end, label).
type ExpectedLine = (String, String, String, Option<String>, Option<String>);

/// Every line the guide's table asks for, read from the frontmatter (spec §2.2 for `next`,
/// `on_reject`, `on_timeout` and the following-step default; parallel-1 §1–§2 for branches).
fn expected_lines(steps: &[DocStep]) -> Vec<ExpectedLine> {
    let index = |id: &str| steps.iter().position(|s| s.id == id);
    // Which parallel step's branch holds each step.
    let mut branch_of: BTreeMap<&str, &str> = BTreeMap::new();
    for parallel in steps.iter().filter(|s| s.kind == "parallel") {
        let mut queue: Vec<&str> = parallel
            .get("parallel")
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        while let Some(id) = queue.pop() {
            if branch_of.insert(id, parallel.id).is_some() {
                continue;
            }
            let step = &steps[index(id).unwrap()];
            for target in forward_targets(steps, step) {
                if target != "join" {
                    queue.push(target);
                }
            }
        }
    }
    let mut lines = vec![(
        "start".into(),
        "start".into(),
        steps[0].id.to_string(),
        None,
        None,
    )];
    for step in steps {
        let to = |target: &str| -> (String, Option<String>) {
            match (target, branch_of.get(step.id)) {
                ("join", Some(parallel)) => ("join".into(), Some(parallel.to_string())),
                _ => (target.into(), None),
            }
        };
        let mut push =
            |kind: &str, from: &str, target: &str, parallel: Option<String>, label: Option<String>| {
                let (to, into_bar) = to(target);
                lines.push((kind.into(), from.into(), to, parallel.or(into_bar), label));
            };
        let next = single_next(steps, step);
        match step.kind {
            "agent" | "task" => match step.get("next") {
                Some(Value::Array(routes)) => {
                    for route in routes {
                        match route {
                            Value::String(target) => push("route", step.id, target, None, None),
                            _ => push(
                                "route",
                                step.id,
                                route["to"].as_str().unwrap(),
                                None,
                                route.get("when").and_then(Value::as_str).map(collapse),
                            ),
                        }
                    }
                }
                _ => push("next", step.id, &next.unwrap(), None, None),
            },
            "approve" => {
                push("approved", step.id, &next.unwrap(), None, Some("Approved".into()));
                if let Some(back) = step.get("on_reject").and_then(Value::as_str) {
                    push("rejected", step.id, back, None, Some("Rejected".into()));
                }
            }
            "wait" | "wait_until" => push("next", step.id, &next.unwrap(), None, None),
            "wait_for" => {
                push("next", step.id, &next.unwrap(), None, None);
                if let Some(target) = step.get("on_timeout").and_then(Value::as_str) {
                    let label = match step.get("timeout").and_then(Value::as_str) {
                        Some(timeout) => format!("Timeout {timeout}"),
                        None => "On timeout".to_string(),
                    };
                    push("timeout", step.id, target, None, Some(label));
                }
            }
            "parallel" => {
                for entry in step.get("parallel").unwrap().as_array().unwrap() {
                    push("branch", step.id, entry.as_str().unwrap(), None, None);
                }
                lines.push((
                    "join".into(),
                    "join".into(),
                    next.unwrap(),
                    Some(step.id.to_string()),
                    None,
                ));
            }
            _ => {}
        }
    }
    lines
}

/// A step's `next` when it is one step: declared, or the following step in the list.
fn single_next(steps: &[DocStep], step: &DocStep) -> Option<String> {
    match step.get("next") {
        Some(Value::String(target)) => Some(target.clone()),
        Some(_) => None,
        None => {
            let position = steps.iter().position(|s| s.id == step.id).unwrap();
            steps.get(position + 1).map(|s| s.id.to_string())
        }
    }
}

fn forward_targets<'a>(steps: &'a [DocStep], step: &'a DocStep) -> Vec<&'a str> {
    let mut targets = Vec::new();
    match step.get("next") {
        Some(Value::String(target)) => targets.push(target.as_str()),
        Some(Value::Array(routes)) => targets.extend(routes.iter().map(|r| match r {
            Value::String(target) => target.as_str(),
            _ => r["to"].as_str().unwrap(),
        })),
        _ => {
            let position = steps.iter().position(|s| s.id == step.id).unwrap();
            targets.extend(steps.get(position + 1).map(|s| s.id));
        }
    }
    targets.extend(step.get("on_timeout").and_then(Value::as_str));
    targets
}

/// The lanes in order (guide: Agent, then each role or person named in `task:` and `approve:`
/// steps), and each step's lane: its performer, or for a step no performer does, the lane of
/// the first step in the document that leads into it.
fn expected_lanes(steps: &[DocStep], lines: &[ExpectedLine]) -> (Vec<String>, BTreeMap<String, String>) {
    let mut lanes: Vec<String> = Vec::new();
    for step in steps {
        if let Some(person) = step.get("person").and_then(Value::as_str)
            && !lanes.iter().any(|l| l == person)
        {
            lanes.push(person.to_string());
        }
    }
    if steps.iter().any(|s| s.kind == "agent") || lanes.is_empty() {
        lanes.insert(0, "agent".into());
    }
    let own = |step: &DocStep| -> Option<String> {
        match step.kind {
            "agent" => Some("agent".into()),
            _ => step.get("person").and_then(Value::as_str).map(str::to_string),
        }
    };
    let mut lane_of = BTreeMap::new();
    for step in steps {
        let mut at = step;
        let mut guard = 0;
        let lane = loop {
            if let Some(lane) = own(at) {
                break lane;
            }
            let before = lines
                .iter()
                .filter(|(kind, ..)| kind != "rejected" && kind != "start")
                .find(|(_, _, to, ..)| to == at.id)
                .map(|(_, from, _, parallel, _)| match (from.as_str(), parallel) {
                    // A join bar's line counts as its parallel step's.
                    ("join", Some(parallel)) => parallel.clone(),
                    _ => from.clone(),
                });
            match before {
                Some(before) if guard < steps.len() => {
                    at = steps.iter().find(|s| s.id == before).unwrap();
                    guard += 1;
                }
                _ => break lanes[0].clone(),
            }
        };
        lane_of.insert(step.id.to_string(), lane);
    }
    (lanes, lane_of)
}

/// An axis-aligned box read back from a shape.
#[derive(Debug, Clone, Copy)]
struct Box2 {
    left: f64,
    top: f64,
    right: f64,
    bottom: f64,
}

impl Box2 {
    fn overlaps(&self, other: &Box2) -> bool {
        self.left < other.right
            && other.left < self.right
            && self.top < other.bottom
            && other.top < self.bottom
    }

    /// Whether a point lies on the box's outline.
    fn on_edge(&self, (x, y): (f64, f64)) -> bool {
        let within_x = x >= self.left && x <= self.right;
        let within_y = y >= self.top && y <= self.bottom;
        ((x == self.left || x == self.right) && within_y) || ((y == self.top || y == self.bottom) && within_x)
    }

    /// Whether an axis-aligned segment passes through the box's inside (running along or
    /// ending on its outline does not count).
    fn cut_by(&self, (x1, y1): (f64, f64), (x2, y2): (f64, f64)) -> bool {
        if y1 == y2 {
            y1 > self.top && y1 < self.bottom && x1.min(x2) < self.right && x1.max(x2) > self.left
        } else {
            x1 > self.left && x1 < self.right && y1.min(y2) < self.bottom && y1.max(y2) > self.top
        }
    }
}

fn number(node: Node, attribute: &str) -> f64 {
    node.attribute(attribute)
        .unwrap_or_else(|| panic!("{attribute} on {node:?}"))
        .parse()
        .unwrap()
}

/// The box of a `<g>`'s shape: a rect, a circle or a polygon with `class="shape"`.
fn shape_box(group: Node) -> Box2 {
    let shape = group
        .children()
        .find(|c| c.attribute("class") == Some("shape"))
        .unwrap_or_else(|| panic!("no shape in {group:?}"));
    match shape.tag_name().name() {
        "rect" => {
            let (x, y) = (number(shape, "x"), number(shape, "y"));
            Box2 {
                left: x,
                top: y,
                right: x + number(shape, "width"),
                bottom: y + number(shape, "height"),
            }
        }
        "circle" => {
            let (cx, cy, r) = (number(shape, "cx"), number(shape, "cy"), number(shape, "r"));
            Box2 {
                left: cx - r,
                top: cy - r,
                right: cx + r,
                bottom: cy + r,
            }
        }
        "polygon" => {
            let points: Vec<(f64, f64)> = shape
                .attribute("points")
                .unwrap()
                .split_whitespace()
                .map(|pair| {
                    let (x, y) = pair.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect();
            Box2 {
                left: points.iter().map(|p| p.0).fold(f64::MAX, f64::min),
                top: points.iter().map(|p| p.1).fold(f64::MAX, f64::min),
                right: points.iter().map(|p| p.0).fold(f64::MIN, f64::max),
                bottom: points.iter().map(|p| p.1).fold(f64::MIN, f64::max),
            }
        }
        other => panic!("unexpected shape {other}"),
    }
}

/// The points of a line's path (`M x y L x y ...`).
fn path_points(line: Node) -> Vec<(f64, f64)> {
    let path = line
        .children()
        .find(|c| c.attribute("class") == Some("line-path"))
        .expect("a line path");
    let numbers: Vec<f64> = path
        .attribute("d")
        .unwrap()
        .split(|c: char| c == 'M' || c == 'L' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    numbers.chunks(2).map(|pair| (pair[0], pair[1])).collect()
}

fn check_map(name: &str, bytes: &[u8]) {
    let loaded = load(bytes, &Offer::EVERYTHING).unwrap_or_else(|issues| panic!("{name}: {issues:?}"));
    let svg = render_svg(&layout(&loaded.process), &Highlight::none());
    let xml = Document::parse(&svg).unwrap_or_else(|e| panic!("{name}: not well-formed XML: {e}"));
    let frontmatter = parse_document(bytes).unwrap().frontmatter;
    let steps = steps(&frontmatter);
    let root = xml.root_element();

    // A standalone, accessible SVG that scales down to a phone.
    assert_eq!(root.tag_name().name(), "svg", "{name}");
    assert_eq!(root.tag_name().namespace(), Some("http://www.w3.org/2000/svg"));
    assert_eq!(root.attribute("role"), Some("img"), "{name}");
    let view_box: Vec<f64> = root
        .attribute("viewBox")
        .unwrap()
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(view_box[..2], [0.0, 0.0], "{name}");
    assert_eq!(view_box[2], number(root, "width"), "{name}");
    assert!(root.children().any(|c| {
        c.has_tag_name("title")
            && c.text()
                .is_some_and(|t| t.contains(frontmatter["name"].as_str().unwrap()))
    }));
    assert!(
        root.children()
            .any(|c| c.has_tag_name("desc") && c.text().is_some_and(|t| !t.is_empty()))
    );
    assert!(
        !xml.descendants()
            .any(|n| n.has_tag_name("script") || n.has_tag_name("image") || n.has_tag_name("foreignObject"))
    );

    // Lanes: Agent first, then each role or person in first use, top to bottom.
    let lines = expected_lines(&steps);
    let (lanes, lane_of) = expected_lanes(&steps, &lines);
    let drawn_lanes: Vec<Node> = xml
        .descendants()
        .filter(|n| n.has_attribute("data-lane-kind"))
        .collect();
    let keys: Vec<&str> = drawn_lanes
        .iter()
        .map(|n| n.attribute("data-lane").unwrap())
        .collect();
    assert_eq!(keys, lanes, "{name}: lanes");
    let band = |key: &str| -> Box2 {
        let lane = drawn_lanes
            .iter()
            .find(|n| n.attribute("data-lane") == Some(key))
            .unwrap();
        let rect = lane
            .children()
            .find(|c| c.attribute("class") == Some("lane-band"))
            .unwrap();
        let (y, height) = (number(rect, "y"), number(rect, "height"));
        Box2 {
            left: number(rect, "x"),
            top: y,
            right: number(rect, "x") + number(rect, "width"),
            bottom: y + height,
        }
    };
    for pair in keys.windows(2) {
        assert!(
            band(pair[0]).bottom <= band(pair[1]).top,
            "{name}: lanes in order"
        );
    }

    // Exactly one card per step, with its kind and id, in its lane; a finish is an End marker
    // with its outcome.
    let mut boxes: Vec<(String, Box2)> = Vec::new();
    for step in &steps {
        let drawn: Vec<Node> = xml
            .descendants()
            .filter(|n| n.attribute("data-step") == Some(step.id))
            .collect();
        assert_eq!(drawn.len(), 1, "{name}: one card for step {}", step.id);
        let card = drawn[0];
        assert_eq!(
            card.attribute("data-kind"),
            Some(step.kind),
            "{name}: {}",
            step.id
        );
        let lane = &lane_of[step.id];
        assert_eq!(
            card.attribute("data-lane"),
            Some(lane.as_str()),
            "{name}: lane of {}",
            step.id
        );
        let shape = shape_box(card);
        let band = band(lane);
        assert!(
            shape.top >= band.top && shape.bottom <= band.bottom,
            "{name}: {} inside its lane",
            step.id
        );
        if step.kind == "finish" {
            assert_eq!(card.attribute("data-marker"), Some("end"), "{name}: {}", step.id);
            assert_eq!(
                card.attribute("data-outcome"),
                step.get("finish").and_then(Value::as_str),
                "{name}"
            );
        } else {
            assert_eq!(card.attribute("class"), Some("card"), "{name}: {}", step.id);
            let texts: String = card
                .descendants()
                .filter_map(|n| n.text())
                .collect::<Vec<_>>()
                .join(" ");
            assert!(texts.contains(step.id), "{name}: {} shows its id", step.id);
        }
        boxes.push((step.id.to_string(), shape));
    }

    // One Start marker; a decision point per step whose next is a list; a join bar per parallel.
    let markers = |kind: &str| -> Vec<Node> {
        xml.descendants()
            .filter(|n| n.attribute("data-marker") == Some(kind))
            .collect()
    };
    assert_eq!(markers("start").len(), 1, "{name}");
    boxes.push(("start".into(), shape_box(markers("start")[0])));
    let decisions: BTreeSet<&str> = markers("decision")
        .iter()
        .map(|n| n.attribute("data-decision").unwrap())
        .collect();
    let routed: BTreeSet<&str> = steps
        .iter()
        .filter(|s| s.get("next").is_some_and(Value::is_array))
        .map(|s| s.id)
        .collect();
    assert_eq!(decisions, routed, "{name}: decision points");
    for decision in markers("decision") {
        boxes.push((
            format!("decision {}", decision.attribute("data-decision").unwrap()),
            shape_box(decision),
        ));
    }
    let bars: Vec<Node> = xml
        .descendants()
        .filter(|n| n.has_attribute("data-join"))
        .collect();
    let joins: BTreeSet<&str> = bars.iter().map(|n| n.attribute("data-join").unwrap()).collect();
    let parallels: BTreeSet<&str> = steps
        .iter()
        .filter(|s| s.kind == "parallel")
        .map(|s| s.id)
        .collect();
    assert_eq!(joins, parallels, "{name}: join bars");
    for bar in &bars {
        boxes.push((
            format!("join {}", bar.attribute("data-join").unwrap()),
            shape_box(*bar),
        ));
    }
    for (i, (a, first)) in boxes.iter().enumerate() {
        for (b, second) in &boxes[i + 1..] {
            assert!(!first.overlaps(second), "{name}: {a} overlaps {b}");
        }
    }

    // One line per declared edge, each labelled as the guide says, rejections dashed.
    let drawn_lines: Vec<Node> = xml
        .descendants()
        .filter(|n| n.attribute("class") == Some("line"))
        .collect();
    let mut drawn: Vec<ExpectedLine> = drawn_lines
        .iter()
        .map(|n| {
            let attribute = |a: &str| n.attribute(a).map(str::to_string);
            (
                attribute("data-kind").unwrap(),
                attribute("data-from").unwrap(),
                attribute("data-to").unwrap(),
                attribute("data-parallel"),
                attribute("data-label"),
            )
        })
        .collect();
    let mut expected = lines.clone();
    drawn.sort();
    expected.sort();
    assert_eq!(drawn, expected, "{name}: lines");

    // Every line starts on what it leaves and ends on what it enters, in straight runs, never
    // through a card; forward lines read left to right.
    let box_of = |end: &str, parallel: Option<&str>, leaving: bool, kind: &str| -> Box2 {
        let key = match (end, parallel) {
            ("join", Some(parallel)) => format!("join {parallel}"),
            ("start", None) => "start".to_string(),
            (id, _) if leaving && kind == "route" => format!("decision {id}"),
            (id, _) => id.to_string(),
        };
        boxes
            .iter()
            .find(|(k, _)| *k == key)
            .unwrap_or_else(|| panic!("{name}: nothing drawn for {key}"))
            .1
    };
    for line in &drawn_lines {
        let (kind, from, to) = (
            line.attribute("data-kind").unwrap(),
            line.attribute("data-from").unwrap(),
            line.attribute("data-to").unwrap(),
        );
        let parallel = line.attribute("data-parallel");
        let points = path_points(*line);
        let what = format!("{name}: {kind} line {from} → {to}");
        assert!(points.len() >= 2, "{what}");
        let source = box_of(from, parallel.filter(|_| from == "join"), true, kind);
        let target = box_of(to, parallel.filter(|_| to == "join"), false, kind);
        let (first, last) = (points[0], *points.last().unwrap());
        if from == "start" {
            let c = (
                (source.left + source.right) / 2.0,
                (source.top + source.bottom) / 2.0,
            );
            let r = (source.right - source.left) / 2.0;
            assert!(
                ((first.0 - c.0).hypot(first.1 - c.1) - r).abs() < 0.5,
                "{what}: starts on the Start marker"
            );
        } else {
            assert!(
                source.on_edge(first),
                "{what}: starts on its source {first:?} {source:?}"
            );
        }
        assert!(
            target.on_edge(last),
            "{what}: ends on its target {last:?} {target:?}"
        );
        for pair in points.windows(2) {
            assert!(
                pair[0].0 == pair[1].0 || pair[0].1 == pair[1].1,
                "{what}: straight runs"
            );
            for (key, shape) in &boxes {
                assert!(!shape.cut_by(pair[0], pair[1]), "{what}: crosses {key}");
            }
        }
        let dashed = line.descendants().any(|n| n.has_attribute("stroke-dasharray"));
        assert_eq!(dashed, kind == "rejected", "{what}: dashed only when rejected");
        assert_eq!(
            line.attribute("data-style"),
            Some(if dashed { "dashed" } else { "solid" }),
            "{what}"
        );
        if kind != "rejected" && kind != "start" {
            assert!(target.left > source.right - 1.0, "{what}: reads left to right");
        }
    }

    // Every label on the map has its own space: no label overlaps another or a card.
    let labels: Vec<Box2> = xml
        .descendants()
        .filter(|n| n.attribute("class") == Some("line-label"))
        .map(|n| {
            let rect = n.children().find(|c| c.has_tag_name("rect")).unwrap();
            let (x, y) = (number(rect, "x"), number(rect, "y"));
            Box2 {
                left: x,
                top: y,
                right: x + number(rect, "width"),
                bottom: y + number(rect, "height"),
            }
        })
        .collect();
    for (i, label) in labels.iter().enumerate() {
        for other in &labels[i + 1..] {
            assert!(!label.overlaps(other), "{name}: two labels overlap");
        }
        for (key, shape) in &boxes {
            assert!(!label.overlaps(shape), "{name}: a label overlaps {key}");
        }
    }
}

#[test]
fn every_example_map_has_the_documents_lanes_cards_and_lines() {
    let documents = documents();
    assert!(documents.len() >= 12);
    for (name, path) in documents {
        check_map(&name, &std::fs::read(&path).unwrap());
    }
}
