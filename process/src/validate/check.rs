//! The `check` key of the check-1 profile (§2): yes/no, choice and rubric questions.

use super::text::{non_blank, quote, show, unit_number};
use crate::issue::{Issue, child, index};
use crate::model::{Check, Question};
use serde_json::{Map, Value};
use std::collections::HashSet;

const QUESTION_KEYS: [&str; 7] = ["ask", "pass", "fail", "one_of", "unsure", "levels", "confidence"];

/// Reads a `check` value: the short form (one yes/no question) or a non-empty list of questions.
pub(super) fn check(value: &Value, path: &str, issues: &mut Vec<Issue>) -> Option<Check> {
    match value {
        Value::String(_) => {
            let ask = non_blank(value, path, issues)?;
            Some(Check {
                questions: vec![Question::YesNo {
                    ask,
                    pass: None,
                    fail: None,
                }],
            })
        }
        Value::Array(list) if !list.is_empty() => {
            let start = issues.len();
            let questions: Vec<Option<Question>> = list
                .iter()
                .enumerate()
                .map(|(position, entry)| question(entry, &index(path, position), issues))
                .collect();
            if issues.len() > start {
                return None;
            }
            questions
                .into_iter()
                .collect::<Option<Vec<_>>>()
                .map(|questions| Check { questions })
        }
        _ => {
            issues.push(Issue::new(
                path,
                "expected a question or a non-empty list of questions",
            ));
            None
        }
    }
}

fn question(value: &Value, path: &str, issues: &mut Vec<Issue>) -> Option<Question> {
    let Some(map) = value.as_object() else {
        issues.push(Issue::new(path, "expected a question object with ask"));
        return None;
    };
    for key in map.keys() {
        if !QUESTION_KEYS.contains(&key.as_str()) {
            issues.push(Issue::new(child(path, key), "unknown field"));
        }
    }
    let ask = match map.get("ask") {
        Some(ask) => non_blank(ask, &child(path, "ask"), issues),
        None => {
            issues.push(Issue::new(child(path, "ask"), "missing"));
            None
        }
    };
    match (map.get("one_of"), map.get("levels")) {
        (Some(_), Some(_)) => {
            issues.push(Issue::new(
                path,
                "has both one_of and levels; a question is a choice or a rubric, not both",
            ));
            None
        }
        (Some(one_of), None) => choice(map, one_of, ask, path, issues),
        (None, Some(levels)) => rubric(map, levels, ask, path, issues),
        (None, None) => yes_no(map, ask, path, issues),
    }
}

/// Reports keys a question kind does not take, e.g. `fail` on a choice.
fn refuse(map: &Map<String, Value>, keys: &[(&str, &str)], path: &str, issues: &mut Vec<Issue>) {
    for (key, message) in keys {
        if map.contains_key(*key) {
            issues.push(Issue::new(child(path, key), *message));
        }
    }
}

const ONLY_YES_NO: &str = "allowed only on a yes/no question";
const ONLY_CHOICE: &str = "allowed only on a choice question";
const ONLY_CHOICE_OR_RUBRIC: &str = "allowed only on a choice or rubric question";

fn yes_no(
    map: &Map<String, Value>,
    ask: Option<String>,
    path: &str,
    issues: &mut Vec<Issue>,
) -> Option<Question> {
    refuse(
        map,
        &[("unsure", ONLY_CHOICE), ("confidence", ONLY_CHOICE_OR_RUBRIC)],
        path,
        issues,
    );
    let pass = map
        .get("pass")
        .map(|v| unit_number(v, &child(path, "pass"), issues));
    let fail = map
        .get("fail")
        .map(|v| unit_number(v, &child(path, "fail"), issues));
    if let (Some(Some(pass_at)), Some(Some(fail_at))) = (pass, fail)
        && fail_at > pass_at
    {
        issues.push(Issue::new(
            child(path, "fail"),
            format!("{} is above pass {}", show(&map["fail"]), show(&map["pass"])),
        ));
        return None;
    }
    Some(Question::YesNo {
        ask: ask?,
        pass: pass.map_or(Some(None), |p| p.map(Some))?,
        fail: fail.map_or(Some(None), |f| f.map(Some))?,
    })
}

fn choice(
    map: &Map<String, Value>,
    one_of: &Value,
    ask: Option<String>,
    path: &str,
    issues: &mut Vec<Issue>,
) -> Option<Question> {
    refuse(map, &[("fail", ONLY_YES_NO)], path, issues);
    let one_of_path = child(path, "one_of");
    let answers: Option<Vec<(String, String)>> = match one_of.as_object() {
        Some(answers) if answers.len() >= 2 => {
            let start = issues.len();
            let mut read = Vec::new();
            for (name, description) in answers {
                if name.is_empty() {
                    issues.push(Issue::new(&one_of_path, "an answer name must not be empty"));
                } else if let Some(text) = non_blank(description, &child(&one_of_path, name), issues) {
                    read.push((name.clone(), text));
                }
            }
            (issues.len() == start).then_some(read)
        }
        _ => {
            issues.push(Issue::new(
                &one_of_path,
                "expected a map of two or more answer names to descriptions",
            ));
            None
        }
    };
    let names = one_of.as_object();
    let pass = match map.get("pass") {
        None => {
            issues.push(Issue::new(child(path, "pass"), "missing"));
            None
        }
        Some(pass) => answer_names(pass, names, &[], true, &child(path, "pass"), issues),
    };
    let unsure = match map.get("unsure") {
        None => Some(Vec::new()),
        Some(unsure) => answer_names(
            unsure,
            names,
            pass.as_deref().unwrap_or(&[]),
            false,
            &child(path, "unsure"),
            issues,
        ),
    };
    let confidence = map
        .get("confidence")
        .map(|v| unit_number(v, &child(path, "confidence"), issues));
    Some(Question::Choice {
        ask: ask?,
        one_of: answers?,
        pass: pass?,
        unsure: unsure?,
        confidence: confidence.map_or(Some(None), |c| c.map(Some))?,
    })
}

/// A list of answer names from `one_of`, distinct, none of them in `taken` (the pass names).
fn answer_names(
    value: &Value,
    names: Option<&Map<String, Value>>,
    taken: &[String],
    non_empty: bool,
    path: &str,
    issues: &mut Vec<Issue>,
) -> Option<Vec<String>> {
    let Some(list) = value.as_array().filter(|list| !non_empty || !list.is_empty()) else {
        let expected = if non_empty {
            "expected a non-empty list of answer names from one_of"
        } else {
            "expected a list of answer names from one_of"
        };
        issues.push(Issue::new(path, expected));
        return None;
    };
    let start = issues.len();
    let taken: HashSet<&str> = taken.iter().map(String::as_str).collect();
    let mut read: Vec<String> = Vec::new();
    let mut listed: HashSet<&str> = HashSet::new();
    for (position, entry) in list.iter().enumerate() {
        let entry_path = index(path, position);
        let Some(name) = entry.as_str() else {
            issues.push(Issue::new(entry_path, "expected an answer name"));
            continue;
        };
        if names.is_some_and(|names| !names.contains_key(name)) {
            issues.push(Issue::new(
                entry_path,
                format!("{} is not an answer in one_of", quote(name)),
            ));
        } else if !listed.insert(name) {
            issues.push(Issue::new(entry_path, format!("{} is listed twice", quote(name))));
        } else if taken.contains(name) {
            issues.push(Issue::new(entry_path, format!("{} is also in pass", quote(name))));
        } else {
            read.push(name.to_string());
        }
    }
    (issues.len() == start).then_some(read)
}

fn rubric(
    map: &Map<String, Value>,
    levels: &Value,
    ask: Option<String>,
    path: &str,
    issues: &mut Vec<Issue>,
) -> Option<Question> {
    refuse(
        map,
        &[("fail", ONLY_YES_NO), ("unsure", ONLY_CHOICE)],
        path,
        issues,
    );
    let levels_path = child(path, "levels");
    let read_levels: Option<Vec<String>> = match levels.as_array() {
        Some(list) if (2..=10).contains(&list.len()) => {
            let start = issues.len();
            let read: Vec<String> = list
                .iter()
                .enumerate()
                .filter_map(|(position, level)| non_blank(level, &index(&levels_path, position), issues))
                .collect();
            (issues.len() == start).then_some(read)
        }
        _ => {
            issues.push(Issue::new(
                &levels_path,
                "expected a list of 2 to 10 level descriptions",
            ));
            None
        }
    };
    let count = levels.as_array().map(Vec::len).filter(|n| (2..=10).contains(n));
    let pass = match (map.get("pass"), count) {
        (None, _) => {
            issues.push(Issue::new(child(path, "pass"), "missing"));
            None
        }
        (Some(pass), count) => {
            let level = pass
                .as_u64()
                .filter(|_| pass.is_u64())
                .and_then(|n| usize::try_from(n).ok());
            match (level, count) {
                (Some(level), Some(count)) if level < count => Some(level),
                (_, Some(count)) => {
                    issues.push(Issue::new(
                        child(path, "pass"),
                        format!("{} is not a level index from 0 to {}", show(pass), count - 1),
                    ));
                    None
                }
                (Some(level), None) => Some(level),
                (None, None) => {
                    issues.push(Issue::new(
                        child(path, "pass"),
                        format!("{} is not a level index", show(pass)),
                    ));
                    None
                }
            }
        }
    };
    let confidence = map
        .get("confidence")
        .map(|v| unit_number(v, &child(path, "confidence"), issues));
    Some(Question::Rubric {
        ask: ask?,
        levels: read_levels?,
        pass: pass?,
        confidence: confidence.map_or(Some(None), |c| c.map(Some))?,
    })
}
