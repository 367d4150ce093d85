//! Field maps of spec §2.3 (`inputs`, `output`): names, the eight types, `one_of` and `items`.

use super::text::{not_a_boolean, quote, show};
use crate::fields::{FieldMap, FieldSpec, FieldType};
use crate::issue::{Issue, child, index};
use crate::values::{PersonFormat, check_value, same_value};
use serde_json::Value;
use std::collections::HashMap;

const TYPE_NAMES: &str = "string, number, boolean, date, datetime, list, object, person";

/// Reads a field map, reporting every issue. Fields with issues are left out of the result.
pub(super) fn field_map(value: &Value, path: &str, issues: &mut Vec<Issue>) -> FieldMap {
    let mut fields = FieldMap::new();
    let Some(map) = value.as_object() else {
        issues.push(Issue::new(path, "expected a map of field names to types"));
        return fields;
    };
    for (name, declaration) in map {
        if name.is_empty() {
            issues.push(Issue::new(path, "a field name must not be empty"));
            continue;
        }
        if let Some(spec) = field_spec(declaration, &child(path, name), issues) {
            fields.insert(name.clone(), spec);
        }
    }
    fields
}

/// One declaration: a type name, or an object with `type` and its optional keys. `items` is a
/// field object like any other (spec §2.3), so it may carry `optional`, which means nothing for
/// a list element: [`crate::validate::warnings`] says so, and value checks ignore it.
fn field_spec(value: &Value, path: &str, issues: &mut Vec<Issue>) -> Option<FieldSpec> {
    let map = match value {
        Value::String(name) => return type_name(name, path, issues).map(FieldSpec::of_type),
        Value::Object(map) => map,
        _ => {
            issues.push(Issue::new(path, "expected a type name or a field object"));
            return None;
        }
    };
    let start = issues.len();
    let mut field_type = None;
    let mut type_written = false;
    let mut description = None;
    let mut optional = false;
    let mut one_of = None;
    let mut items = None;
    for (key, entry) in map {
        let entry_path = child(path, key);
        match key.as_str() {
            "type" => {
                type_written = true;
                match entry {
                    Value::String(name) => field_type = type_name(name, &entry_path, issues),
                    _ => issues.push(Issue::new(entry_path, "expected a type name")),
                }
            }
            "description" => match entry {
                Value::String(text) => description = Some(text.clone()),
                _ => issues.push(Issue::new(entry_path, "expected a string")),
            },
            "optional" => match entry {
                Value::Bool(flag) => optional = *flag,
                _ => issues.push(Issue::new(entry_path, not_a_boolean(entry))),
            },
            "one_of" => one_of = Some(entry),
            "items" => items = Some(entry),
            _ => issues.push(Issue::new(entry_path, "unknown field")),
        }
    }
    if !type_written {
        issues.push(Issue::new(child(path, "type"), "missing"));
    }
    let one_of = one_of.and_then(|entry| one_of_values(entry, field_type, &child(path, "one_of"), issues));
    let items = match items {
        None => None,
        Some(_) if field_type.is_some_and(|t| t != FieldType::List) => {
            issues.push(Issue::new(child(path, "items"), "allowed only on a list field"));
            None
        }
        Some(entry) => field_spec(entry, &child(path, "items"), issues).map(Box::new),
    };
    let field_type = field_type?;
    (issues.len() == start).then_some(FieldSpec {
        field_type,
        description,
        optional,
        one_of,
        items,
    })
}

fn type_name(name: &str, path: &str, issues: &mut Vec<Issue>) -> Option<FieldType> {
    let found = FieldType::from_name(name);
    if found.is_none() {
        issues.push(Issue::new(
            path,
            format!("{} is not a type; expected one of {TYPE_NAMES}", quote(name)),
        ));
    }
    found
}

/// `one_of`: a non-empty list of distinct values of the field's own type, on scalar types only.
fn one_of_values(
    value: &Value,
    field_type: Option<FieldType>,
    path: &str,
    issues: &mut Vec<Issue>,
) -> Option<Vec<Value>> {
    if let Some(kind @ (FieldType::List | FieldType::Object)) = field_type {
        issues.push(Issue::new(
            path,
            format!("not allowed on {} field", article(kind)),
        ));
        return None;
    }
    let list = match value.as_array() {
        Some(list) if !list.is_empty() => list,
        _ => {
            issues.push(Issue::new(path, "expected a non-empty list of values"));
            return None;
        }
    };
    let field_type = field_type?;
    let element = FieldSpec::of_type(field_type);
    // Values that are the same have the same bucket; only values in one bucket are compared.
    let mut buckets: HashMap<String, Vec<&Value>> = HashMap::new();
    for (position, entry) in list.iter().enumerate() {
        let entry_path = index(path, position);
        issues.extend(check_value(&element, entry, &entry_path, PersonFormat::Email));
        let bucket = buckets.entry(bucket(entry)).or_default();
        if bucket.iter().any(|earlier| same_value(earlier, entry)) {
            issues.push(Issue::new(entry_path, format!("{} is listed twice", show(entry))));
        }
        bucket.push(entry);
    }
    Some(list.clone())
}

/// A key equal for equal values: exact decimals that are equal round to the same `f64`.
fn bucket(value: &Value) -> String {
    match value {
        Value::Number(number) => {
            let rounded = number.as_f64().unwrap_or(f64::NAN);
            // -0 and 0 are the same number.
            format!("n{}", if rounded == 0.0 { 0.0 } else { rounded })
        }
        other => other.to_string(),
    }
}

fn article(field_type: FieldType) -> String {
    match field_type {
        FieldType::Object => "an object".to_string(),
        other => format!("a {other}"),
    }
}
