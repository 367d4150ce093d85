//! Validates parsed frontmatter against every rule of spec §2 and the offered profiles.
//!
//! One pass over the document, in written order, reports every local issue: unknown and
//! missing fields, field maps, each step's keys and values, `person` and `wait_until` paths,
//! targets that name no step, and whatever the process needs that the server does not offer.
//! Then the whole-graph rules run on the steps' edges: reachability, acyclicity and the
//! `parallel-1` branch rules. Only a document with no issue at all becomes a [`Process`].

mod check;
mod fields;
mod graph;
mod parallel;
mod steps;
mod text;

use crate::fields::FieldMap;
use crate::issue::{Issue, index};
use crate::model::{Process, ProcessName};
use crate::names::is_process_name;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use text::{non_blank, quote};

/// What the publishing server offers: profiles and optional tools a process may need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    /// `parallel-1`.
    pub parallel: bool,
    /// `check-1` (only while an evaluator is configured).
    pub check: bool,
    /// The `upload` tool, needed by `evidence: [file]`.
    pub upload: bool,
    /// The `send_event` tool, needed by `wait_for`.
    pub send_event: bool,
}

impl Offer {
    /// Both profiles and every optional tool.
    pub const EVERYTHING: Offer = Offer {
        parallel: true,
        check: true,
        upload: true,
        send_event: true,
    };

    /// The core alone: no profile, no optional tool.
    pub const CORE: Offer = Offer {
        parallel: false,
        check: false,
        upload: false,
        send_event: false,
    };
}

const NAME_PATTERN: &str = "^[a-z0-9]+(-[a-z0-9]+)*$";

/// What is allowed but probably not meant, in a valid process: a `wait_for` step's
/// `on_timeout` without a `timeout` (spec §2.2 allows it; it can never be taken), and
/// `optional` on a list's `items` (a field object like any other, §2.3, but an element is
/// never absent). Warnings never refuse anything; `process check` and import show them.
pub fn warnings(process: &Process) -> Vec<Issue> {
    let mut warnings = Vec::new();
    optional_items(&process.inputs, "inputs", &mut warnings);
    for (position, step) in process.steps.iter().enumerate() {
        let path = index("steps", position);
        if let crate::model::StepKind::WaitFor {
            timeout: None,
            on_timeout: Some(_),
            ..
        } = &step.kind
        {
            warnings.push(Issue::new(
                format!("{path}.on_timeout"),
                "never taken: the step has no timeout",
            ));
        }
        if let Some(work) = step.work() {
            optional_items(&work.output, &format!("{path}.output"), &mut warnings);
        }
    }
    warnings
}

fn optional_items(fields: &FieldMap, path: &str, warnings: &mut Vec<Issue>) {
    for (name, spec) in fields {
        let mut path = format!("{path}.{name}");
        let mut items = spec.items.as_deref();
        while let Some(item) = items {
            path.push_str(".items");
            if item.optional {
                warnings.push(Issue::new(
                    format!("{path}.optional"),
                    "has no effect: a list element is never absent",
                ));
            }
            items = item.items.as_deref();
        }
    }
}

/// Builds the typed process, or refuses with every issue found, in document order and then
/// the whole-graph issues.
///
/// Profile rules apply whenever a process uses a profile's keys; when the server does not offer
/// the profile, that is one more issue at each step that uses it.
pub fn validate(frontmatter: &Value, offer: &Offer) -> Result<Process, Vec<Issue>> {
    let Some(document) = frontmatter.as_object() else {
        return Err(vec![Issue::new("", "expected the frontmatter to be a mapping")]);
    };
    let catalog = Catalog::new(document, offer);
    let mut issues = Vec::new();
    let mut name = None;
    let mut description = None;
    let mut inputs = FieldMap::new();
    let mut required_systems = Vec::new();
    let mut steps = None;
    for (key, value) in document {
        match key.as_str() {
            "name" => name = process_name(value, &mut issues),
            "description" => description = non_blank(value, "description", &mut issues),
            "inputs" => inputs = fields::field_map(value, "inputs", &mut issues),
            "requires" => required_systems = requires(value, &mut issues),
            "steps" => steps = Some(read_steps(value, &catalog, &mut issues)),
            _ => issues.push(Issue::new(key.as_str(), "unknown field")),
        }
    }
    for required in ["name", "description", "steps"] {
        if !document.contains_key(required) {
            issues.push(Issue::new(required, "missing"));
        }
    }
    if let Some((_, Some((shapes, all_edges_read)))) = &steps {
        graph::check(shapes.clone(), *all_edges_read, &mut issues);
    }
    if !issues.is_empty() {
        return Err(issues);
    }
    let built = (|| {
        Some(Process {
            name: name?,
            description: description?,
            inputs,
            required_systems,
            steps: steps?.0.into_iter().collect::<Option<Vec<_>>>()?,
        })
    })();
    built.ok_or_else(|| vec![Issue::new("", "the document could not be read as a process")])
}

/// What step-level checks need to know about the whole document before reading it in order:
/// the offer, the declared inputs, every step id and output map, and whether `parallel:` is used.
pub(crate) struct Catalog<'a> {
    pub(crate) offer: &'a Offer,
    pub(crate) inputs: FieldMap,
    pub(crate) uses_parallel: bool,
    /// Each written step id (first occurrence) with its position and declared output.
    steps: HashMap<String, (usize, FieldMap)>,
}

impl<'a> Catalog<'a> {
    fn new(document: &serde_json::Map<String, Value>, offer: &'a Offer) -> Self {
        // Issues found here are reported again, in order, by the main pass.
        let mut ignored = Vec::new();
        let inputs = document
            .get("inputs")
            .map(|value| fields::field_map(value, "inputs", &mut ignored))
            .unwrap_or_default();
        let list = document.get("steps").and_then(Value::as_array);
        let mut steps = HashMap::new();
        let mut uses_parallel = false;
        for (position, step) in list.into_iter().flatten().enumerate() {
            let Some(step) = step.as_object() else { continue };
            uses_parallel |= step.contains_key("parallel");
            if let Some(id) = step.get("id").and_then(Value::as_str)
                && !steps.contains_key(id)
            {
                let output = step
                    .get("output")
                    .map(|value| fields::field_map(value, "output", &mut ignored))
                    .unwrap_or_default();
                steps.insert(id.to_string(), (position, output));
            }
        }
        Catalog {
            offer,
            inputs,
            uses_parallel,
            steps,
        }
    }

    /// The position of the first step with this id.
    pub(crate) fn step_position(&self, id: &str) -> Option<usize> {
        self.steps.get(id).map(|(position, _)| *position)
    }

    /// The declared output of the step with this id; empty when it declares none.
    pub(crate) fn outputs(&self, id: &str) -> Option<&FieldMap> {
        self.steps.get(id).map(|(_, output)| output)
    }
}

type Shapes = Option<(Vec<graph::Shape>, bool)>;

/// Reads `steps`: the typed steps (each `None` when broken) and, when every step has a sound
/// id and kind, their shapes for the graph rules with whether every edge key was read whole.
fn read_steps(
    value: &Value,
    catalog: &Catalog,
    issues: &mut Vec<Issue>,
) -> (Vec<Option<crate::model::Step>>, Shapes) {
    let list = match value.as_array() {
        Some(list) if !list.is_empty() => list,
        Some(_) => {
            issues.push(Issue::new("steps", "expected at least one step"));
            return (vec![None], None);
        }
        None => {
            issues.push(Issue::new("steps", "expected a list"));
            return (vec![None], None);
        }
    };
    let mut seen = HashMap::new();
    let mut typed = Vec::new();
    let mut shapes = Some(Vec::new());
    let mut all_edges_read = true;
    for (position, step) in list.iter().enumerate() {
        let start = issues.len();
        let read = steps::step(
            step,
            position,
            position + 1 == list.len(),
            catalog,
            &mut seen,
            issues,
        );
        all_edges_read &= !issues[start..]
            .iter()
            .any(|issue| is_edge_issue(&issue.path, position));
        typed.push(read.step);
        match (read.shape, shapes.as_mut()) {
            (Some(shape), Some(shapes)) => shapes.push(shape),
            _ => shapes = None,
        }
    }
    (typed, shapes.map(|shapes| (shapes, all_edges_read)))
}

/// Whether an issue is about a key that makes edges (`next`, `on_reject`, `on_timeout`,
/// `parallel`) of steps[`position`]: the graph then lacks an edge the author meant.
fn is_edge_issue(path: &str, position: usize) -> bool {
    let step = index("steps", position);
    path.strip_prefix(step.as_str()).is_some_and(|rest| {
        [".next", ".on_reject", ".on_timeout", ".parallel"]
            .iter()
            .any(|key| {
                rest.strip_prefix(key)
                    .is_some_and(|after| after.is_empty() || after.starts_with(['.', '[']))
            })
    })
}

fn process_name(value: &Value, issues: &mut Vec<Issue>) -> Option<ProcessName> {
    let Some(text) = value.as_str() else {
        issues.push(Issue::new("name", "expected a string"));
        return None;
    };
    let name = ProcessName::new(text);
    if name.is_none() {
        let message = if text.chars().count() > 64 {
            format!("{} is longer than 64 characters", quote(text))
        } else {
            format!("{} does not match {NAME_PATTERN}", quote(text))
        };
        issues.push(Issue::new("name", message));
    }
    name
}

/// `requires` (spec revision 10): exactly `systems`, one or more distinct system names.
fn requires(value: &Value, issues: &mut Vec<Issue>) -> Vec<String> {
    let Some(map) = value.as_object() else {
        issues.push(Issue::new("requires", "expected an object with systems"));
        return Vec::new();
    };
    for key in map.keys().filter(|k| *k != "systems") {
        issues.push(Issue::new(format!("requires.{key}"), "unknown field"));
    }
    let Some(systems) = map.get("systems") else {
        issues.push(Issue::new("requires.systems", "missing"));
        return Vec::new();
    };
    let Some(list) = systems.as_array().filter(|list| !list.is_empty()) else {
        issues.push(Issue::new(
            "requires.systems",
            "expected a list of one or more system names",
        ));
        return Vec::new();
    };
    let mut names: Vec<String> = Vec::new();
    let mut listed: HashSet<&str> = HashSet::new();
    for (position, entry) in list.iter().enumerate() {
        let path = index("requires.systems", position);
        match entry.as_str() {
            None => issues.push(Issue::new(path, "expected a system name")),
            Some(text) if text.chars().count() > 64 => {
                issues.push(Issue::new(
                    path,
                    format!("{} is longer than 64 characters", quote(text)),
                ));
            }
            Some(text) if !is_process_name(text) => {
                issues.push(Issue::new(
                    path,
                    format!("{} does not match {NAME_PATTERN}", quote(text)),
                ));
            }
            Some(text) if !listed.insert(text) => {
                issues.push(Issue::new(path, format!("{} is listed twice", quote(text))));
            }
            Some(text) => names.push(text.to_string()),
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::is_edge_issue;

    #[test]
    fn edge_issues_are_told_apart_by_key_and_position() {
        assert!(is_edge_issue("steps[1].next", 1));
        assert!(is_edge_issue("steps[1].next[2].to", 1));
        assert!(is_edge_issue("steps[1].on_reject", 1));
        assert!(is_edge_issue("steps[1].parallel[0]", 1));
        assert!(!is_edge_issue("steps[10].next", 1));
        assert!(!is_edge_issue("steps[1].nextStep", 1));
        assert!(!is_edge_issue("steps[1].due", 1));
    }
}
