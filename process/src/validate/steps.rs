//! One step of spec §2.2: id, kind, the keys its kind allows, their values, paths and edges.

use super::Catalog;
use super::check::check;
use super::fields::field_map;
use super::graph::{Edge, EdgeKind, Goal, Shape};
use super::text::{a_step, duration, non_blank, not_a_boolean, quote, show};
use crate::fields::{FieldMap, FieldType};
use crate::issue::{Issue, child, index};
use crate::model::{
    Check, DataPath, Duration, EvidenceKind, Next, PersonRef, Route, Step, StepId, StepKind, Target, Work,
};
use crate::names::is_step_id;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// The kind keys, in the order messages list them.
pub(super) const KINDS: [&str; 8] = [
    "agent",
    "task",
    "approve",
    "wait",
    "wait_until",
    "wait_for",
    "finish",
    "parallel",
];

/// Every optional step key of the core and the profiles.
const OPTIONAL_KEYS: [&str; 10] = [
    "output",
    "evidence",
    "next",
    "person",
    "on_reject",
    "due",
    "timeout",
    "on_timeout",
    "check",
    "advisory",
];

/// The optional keys each kind allows (spec §2.2, parallel-1 §1, check-1 §2).
fn allowed(kind: &str, key: &str) -> bool {
    let keys: &[&str] = match kind {
        "agent" => &["output", "evidence", "next", "due", "check", "advisory"],
        "task" => &["person", "output", "evidence", "next", "due", "check", "advisory"],
        "approve" => &["person", "on_reject", "due", "next"],
        "wait" | "wait_until" | "parallel" => &["next"],
        "wait_for" => &["next", "timeout", "on_timeout"],
        _ => &[],
    };
    keys.contains(&key)
}

pub(super) const STEP_ID_PATTERN: &str = "^[a-z][a-z0-9_-]{0,63}$";

/// What one step yields: the typed step when it is wholly valid, and its shape for the graph
/// rules when its id and kind are usable.
pub(super) struct Read {
    pub step: Option<Step>,
    pub shape: Option<Shape>,
}

/// The values read from a step's keys; `None` where a key is absent or broken.
#[derive(Default)]
struct Parts {
    text: Option<String>,
    duration: Option<Duration>,
    wait_until: Option<DataPath>,
    event: Option<String>,
    branches: Option<Vec<StepId>>,
    output: FieldMap,
    evidence: Vec<EvidenceKind>,
    next: Option<Next>,
    person: Option<PersonRef>,
    on_reject: Option<StepId>,
    due: Option<Duration>,
    timeout: Option<Duration>,
    on_timeout: Option<Target>,
    check: Option<Check>,
    advisory: bool,
}

/// Reads steps[`position`]. `seen` maps the ids of earlier steps to their first positions.
pub(super) fn step(
    value: &Value,
    position: usize,
    last: bool,
    catalog: &Catalog,
    seen: &mut HashMap<String, usize>,
    issues: &mut Vec<Issue>,
) -> Read {
    let path = index("steps", position);
    let Some(map) = value.as_object() else {
        issues.push(Issue::new(&path, "expected an object"));
        return Read {
            step: None,
            shape: None,
        };
    };
    let start = issues.len();
    let id = step_id(map, &path, catalog, seen, issues);
    if let Some(text) = map.get("id").and_then(Value::as_str) {
        seen.entry(text.to_string()).or_insert(position);
    }

    let kinds: Vec<&str> = KINDS.into_iter().filter(|k| map.contains_key(*k)).collect();
    let kind = match kinds.as_slice() {
        [] => {
            issues.push(Issue::new(
                &path,
                format!("no kind key; expected one of {}", KINDS.join(", ")),
            ));
            None
        }
        [kind] => Some(*kind),
        several => {
            issues.push(Issue::new(
                &path,
                format!("more than one kind key: {}", several.join(", ")),
            ));
            None
        }
    };

    let mut parts = Parts::default();
    let mut reader = Reader {
        catalog,
        issues,
        edges: Vec::new(),
    };
    for (key, entry) in map {
        let key_path = child(&path, key);
        if key == "id" {
            continue;
        }
        if KINDS.contains(&key.as_str()) {
            reader.kind_value(key, entry, &key_path, &mut parts);
        } else if OPTIONAL_KEYS.contains(&key.as_str()) {
            match kind {
                Some(kind) if !allowed(kind, key) => {
                    reader.push(&key_path, format!("not allowed on {}", a_step(kind)));
                }
                _ => reader.optional_value(key, entry, &key_path, kind, &mut parts),
            }
        } else {
            reader.push(&key_path, "unknown field");
        }
    }
    let edges = reader.edges;

    if let Some(kind @ ("task" | "approve")) = kind
        && !map.contains_key("person")
    {
        issues.push(Issue::new(
            child(&path, "person"),
            format!("missing; {} needs person", a_step(kind)),
        ));
    }
    if map.contains_key("advisory") && !map.contains_key("check") && matches!(kind, Some("agent" | "task")) {
        issues.push(Issue::new(child(&path, "advisory"), "allowed only beside check"));
    }
    if last && kind.is_some_and(|k| k != "finish") && !map.contains_key("next") {
        issues.push(Issue::new(&path, "the last step must be a finish or name next"));
    }

    let shape = match (&id, kind) {
        (Some(id), Some(kind)) => Some(Shape {
            id: id.as_str().to_string(),
            kind,
            declared_next: map.contains_key("next"),
            edges,
        }),
        _ => None,
    };
    let step = if issues.len() == start {
        id.zip(kind).and_then(|(id, kind)| typed(id, kind, parts))
    } else {
        None
    };
    Read { step, shape }
}

fn step_id(
    map: &Map<String, Value>,
    path: &str,
    catalog: &Catalog,
    seen: &HashMap<String, usize>,
    issues: &mut Vec<Issue>,
) -> Option<StepId> {
    let id_path = child(path, "id");
    let Some(value) = map.get("id") else {
        issues.push(Issue::new(id_path, "missing"));
        return None;
    };
    let Some(text) = value.as_str() else {
        issues.push(Issue::new(id_path, "expected a string"));
        return None;
    };
    let Some(id) = StepId::new(text) else {
        issues.push(Issue::new(
            id_path,
            format!("{} does not match {STEP_ID_PATTERN}", quote(text)),
        ));
        return None;
    };
    if let Some(earlier) = seen.get(text) {
        issues.push(Issue::new(
            id_path,
            format!("{} is already the id of steps[{earlier}]", quote(text)),
        ));
        return None;
    }
    if text == "join" && catalog.uses_parallel {
        issues.push(Issue::new(
            id_path,
            "\"join\" is reserved by the parallel-1 profile, which this process uses",
        ));
        return None;
    }
    Some(id)
}

/// Reads the keys of one step, collecting its issues and the edges its keys make.
struct Reader<'r, 'c> {
    catalog: &'r Catalog<'c>,
    issues: &'r mut Vec<Issue>,
    edges: Vec<Edge>,
}

impl Reader<'_, '_> {
    fn push(&mut self, path: &str, message: impl Into<String>) {
        self.issues.push(Issue::new(path, message));
    }

    /// The value of a kind key; the offer issue comes first when the kind needs what is missing.
    fn kind_value(&mut self, kind: &str, value: &Value, path: &str, parts: &mut Parts) {
        let offer = self.catalog.offer;
        match kind {
            "agent" | "task" | "approve" | "finish" => parts.text = non_blank(value, path, self.issues),
            "wait" => parts.duration = duration(value, path, self.issues),
            "wait_until" => {
                parts.wait_until = match value.as_str() {
                    Some(text) => data_path(text, FieldType::Datetime, path, self.catalog, self.issues),
                    None => {
                        self.push(path, "expected a path to a datetime field");
                        None
                    }
                }
            }
            "wait_for" => {
                if !offer.send_event {
                    self.push(
                        path,
                        "needs the send_event tool, which this server does not offer",
                    );
                }
                parts.event = match value.as_str() {
                    Some(name) if is_step_id(name) => Some(name.to_string()),
                    Some(name) => {
                        self.push(path, format!("{} does not match {STEP_ID_PATTERN}", quote(name)));
                        None
                    }
                    None => {
                        self.push(path, "expected an event name");
                        None
                    }
                };
            }
            "parallel" => {
                if !offer.parallel {
                    self.push(
                        path,
                        "needs the parallel-1 profile, which this server does not offer",
                    );
                }
                parts.branches = self.branches(value, path);
            }
            _ => {}
        }
    }

    /// `parallel:`: two or more distinct ids of existing steps, the branch entries.
    fn branches(&mut self, value: &Value, path: &str) -> Option<Vec<StepId>> {
        let Some(list) = value.as_array().filter(|list| list.len() >= 2) else {
            self.push(path, "expected a list of two or more step ids");
            return None;
        };
        let start = self.issues.len();
        let mut entries: Vec<StepId> = Vec::new();
        let mut listed: HashSet<&str> = HashSet::new();
        for (position, entry) in list.iter().enumerate() {
            let entry_path = index(path, position);
            let Some(text) = entry.as_str() else {
                self.push(&entry_path, "expected a step id");
                continue;
            };
            if !listed.insert(text) {
                self.push(&entry_path, format!("{} is listed twice", quote(text)));
                continue;
            }
            match self.catalog.step_position(text) {
                Some(to) => {
                    self.edges.push(Edge {
                        to: Goal::Step(to),
                        path: entry_path,
                        kind: EdgeKind::Branch,
                    });
                    entries.extend(StepId::new(text));
                }
                None => self.push(&entry_path, format!("unknown step {}", quote(text))),
            }
        }
        (self.issues.len() == start).then_some(entries)
    }

    /// The value of an optional key the step's kind allows (or any, when the kind is unknown).
    fn optional_value(
        &mut self,
        key: &str,
        value: &Value,
        path: &str,
        kind: Option<&str>,
        parts: &mut Parts,
    ) {
        let offer = self.catalog.offer;
        match key {
            "output" => parts.output = field_map(value, path, self.issues),
            "evidence" => {
                parts.evidence = evidence(value, path, self.issues);
                if parts.evidence.contains(&EvidenceKind::File) && !offer.upload {
                    self.push(
                        path,
                        "file evidence needs the upload tool, which this server does not offer",
                    );
                }
            }
            "next" => parts.next = self.next(value, path, kind),
            "person" => parts.person = person(value, path, self.catalog, self.issues),
            "on_reject" => {
                parts.on_reject = self
                    .target(value, path, EdgeKind::OnReject)
                    .and_then(|t| t.step().cloned())
            }
            "due" => parts.due = duration(value, path, self.issues),
            "timeout" => parts.timeout = duration(value, path, self.issues),
            "on_timeout" => parts.on_timeout = self.target(value, path, EdgeKind::OnTimeout),
            "check" => {
                if !offer.check {
                    self.push(
                        path,
                        "needs the check-1 profile, which this server does not offer",
                    );
                }
                parts.check = check(value, path, self.issues);
            }
            "advisory" => match value {
                Value::Bool(flag) => parts.advisory = *flag,
                _ => self.push(path, not_a_boolean(value)),
            },
            _ => {}
        }
    }

    /// Resolves one edge target and records the edge for the graph rules. `join` is a target
    /// only of `next` and `on_timeout`, and only in a process that uses parallel-1.
    fn target(&mut self, value: &Value, path: &str, kind: EdgeKind) -> Option<Target> {
        let Some(text) = value.as_str() else {
            self.push(path, "expected a step id");
            return None;
        };
        let goal = if text == "join" && self.catalog.uses_parallel {
            if kind == EdgeKind::OnReject {
                self.push(
                    path,
                    "\"join\" is not a step; it ends a branch only as a next or on_timeout target",
                );
                return None;
            }
            Goal::Join
        } else if let Some(position) = self.catalog.step_position(text) {
            Goal::Step(position)
        } else {
            self.push(path, format!("unknown step {}", quote(text)));
            return None;
        };
        self.edges.push(Edge {
            to: goal,
            path: path.to_string(),
            kind,
        });
        match goal {
            Goal::Join => Some(Target::Join),
            Goal::Step(_) => StepId::new(text).map(Target::Step),
        }
    }

    /// `next`: one target, or a list of two or more distinct routes on agent and task steps.
    fn next(&mut self, value: &Value, path: &str, kind: Option<&str>) -> Option<Next> {
        let list = match value {
            Value::String(_) => return self.target(value, path, EdgeKind::Next).map(Next::Step),
            Value::Array(list) => list,
            _ => {
                self.push(path, "expected a step id or a list of routes");
                return None;
            }
        };
        let start = self.issues.len();
        if let Some(kind @ ("approve" | "wait" | "wait_until" | "wait_for" | "parallel")) = kind {
            self.push(
                path,
                format!(
                    "a list of routes is allowed only on agent and task steps, not on {}",
                    a_step(kind)
                ),
            );
        }
        if list.len() < 2 {
            self.push(path, "a list of routes needs two or more routes");
        }
        let mut routes: Vec<Route> = Vec::new();
        let mut written: HashSet<&str> = HashSet::new();
        for (position, entry) in list.iter().enumerate() {
            let entry_path = index(path, position);
            let (to_value, to_path, when) = match entry {
                Value::String(_) => (entry, entry_path.clone(), None),
                Value::Object(route) => {
                    for key in route.keys() {
                        if key != "to" && key != "when" {
                            self.push(&child(&entry_path, key), "unknown field");
                        }
                    }
                    let when = route
                        .get("when")
                        .map(|when| non_blank(when, &child(&entry_path, "when"), self.issues));
                    match route.get("to") {
                        Some(to) => (to, child(&entry_path, "to"), when),
                        None => {
                            self.push(&child(&entry_path, "to"), "missing");
                            continue;
                        }
                    }
                }
                _ => {
                    self.push(&entry_path, "expected a step id or { to, when }");
                    continue;
                }
            };
            if let Some(text) = to_value.as_str()
                && !written.insert(text)
            {
                self.push(&to_path, format!("{} is listed twice", quote(text)));
                continue;
            }
            let to = self.target(to_value, &to_path, EdgeKind::Next);
            // `when` is optional; `Some(None)` means it was written but broken.
            if let (Some(to), Some(when)) = (to, when.unwrap_or(Some(String::new()))) {
                routes.push(Route {
                    to,
                    when: (!when.is_empty()).then_some(when),
                });
            }
        }
        (self.issues.len() == start).then_some(Next::Routes(routes))
    }
}

fn evidence(value: &Value, path: &str, issues: &mut Vec<Issue>) -> Vec<EvidenceKind> {
    let Some(list) = value.as_array() else {
        issues.push(Issue::new(path, "expected a list of evidence kinds: file, link"));
        return Vec::new();
    };
    let mut kinds = Vec::new();
    for (position, entry) in list.iter().enumerate() {
        let entry_path = index(path, position);
        match entry.as_str().and_then(EvidenceKind::from_name) {
            Some(kind) if kinds.contains(&kind) => {
                issues.push(Issue::new(entry_path, format!("{} is listed twice", show(entry))));
            }
            Some(kind) => kinds.push(kind),
            None => issues.push(Issue::new(
                entry_path,
                format!("{} is not an evidence kind; expected file or link", show(entry)),
            )),
        }
    }
    kinds
}

fn person(value: &Value, path: &str, catalog: &Catalog, issues: &mut Vec<Issue>) -> Option<PersonRef> {
    let Some(text) = value.as_str() else {
        issues.push(Issue::new(
            path,
            "expected a role name, initiator, or a path to a person field",
        ));
        return None;
    };
    if text == "initiator" {
        return Some(PersonRef::Initiator);
    }
    if text.contains('.') {
        return data_path(text, FieldType::Person, path, catalog, issues).map(PersonRef::Path);
    }
    if text.is_empty() || text.chars().any(char::is_whitespace) {
        issues.push(Issue::new(
            path,
            format!(
                "{} is not a role name; a role name is not empty and has no spaces or dots",
                quote(text)
            ),
        ));
        return None;
    }
    Some(PersonRef::Role(text.to_string()))
}

/// `inputs.<field>` or `steps.<id>.output.<field>`, naming a declared field of type `want`.
fn data_path(
    text: &str,
    want: FieldType,
    path: &str,
    catalog: &Catalog,
    issues: &mut Vec<Issue>,
) -> Option<DataPath> {
    let not_a_path = || {
        Issue::new(
            path,
            format!(
                "{} is not a path; expected inputs.<field> or steps.<id>.output.<field>",
                quote(text)
            ),
        )
    };
    let (data_path, declared) = if let Some(field) = text.strip_prefix("inputs.") {
        if field.is_empty() {
            issues.push(not_a_path());
            return None;
        }
        let Some(spec) = catalog.inputs.get(field) else {
            issues.push(Issue::new(
                path,
                format!("{} names no declared input", quote(text)),
            ));
            return None;
        };
        (
            DataPath::Input {
                field: field.to_string(),
            },
            spec,
        )
    } else if let Some(rest) = text.strip_prefix("steps.") {
        let Some((step, field)) = rest
            .split_once('.')
            .and_then(|(step, rest)| Some((step, rest.strip_prefix("output.")?)))
            .filter(|(step, field)| !step.is_empty() && !field.is_empty())
        else {
            issues.push(not_a_path());
            return None;
        };
        let (Some(step_id), Some(outputs)) = (StepId::new(step), catalog.outputs(step)) else {
            issues.push(Issue::new(
                path,
                format!("{} names unknown step {}", quote(text), quote(step)),
            ));
            return None;
        };
        let Some(spec) = outputs.get(field) else {
            issues.push(Issue::new(
                path,
                format!(
                    "{} names no declared output field of step {}",
                    quote(text),
                    quote(step)
                ),
            ));
            return None;
        };
        (
            DataPath::StepOutput {
                step: step_id,
                field: field.to_string(),
            },
            spec,
        )
    } else {
        issues.push(not_a_path());
        return None;
    };
    if declared.field_type != want {
        issues.push(Issue::new(
            path,
            format!(
                "{} is a {} field; expected a {want} field",
                quote(text),
                declared.field_type
            ),
        ));
        return None;
    }
    Some(data_path)
}

/// Assembles the typed step from parts already checked; `None` if a required part is missing.
fn typed(id: StepId, kind: &str, parts: Parts) -> Option<Step> {
    let work = |parts: Parts| -> Option<(Work, Option<PersonRef>, Option<Next>)> {
        Some((
            Work {
                instructions: parts.text?,
                output: parts.output,
                evidence: parts.evidence,
                due: parts.due,
                check: parts.check,
                advisory: parts.advisory,
            },
            parts.person,
            parts.next,
        ))
    };
    let (kind, next) = match kind {
        "agent" => {
            let (work, _, next) = work(parts)?;
            (StepKind::Agent { work }, next)
        }
        "task" => {
            let (work, person, next) = work(parts)?;
            (
                StepKind::Task {
                    work,
                    person: person?,
                },
                next,
            )
        }
        "approve" => (
            StepKind::Approve {
                text: parts.text?,
                person: parts.person?,
                on_reject: parts.on_reject,
                due: parts.due,
            },
            parts.next,
        ),
        "wait" => (
            StepKind::Wait {
                duration: parts.duration?,
            },
            parts.next,
        ),
        "wait_until" => (
            StepKind::WaitUntil {
                path: parts.wait_until?,
            },
            parts.next,
        ),
        "wait_for" => (
            StepKind::WaitFor {
                event: parts.event?,
                timeout: parts.timeout,
                on_timeout: parts.on_timeout,
            },
            parts.next,
        ),
        "finish" => (StepKind::Finish { outcome: parts.text? }, None),
        "parallel" => (
            StepKind::Parallel {
                branches: parts.branches?,
            },
            parts.next,
        ),
        _ => return None,
    };
    Some(Step { id, kind, next })
}
