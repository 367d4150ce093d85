//! Checks a JSON object (run inputs, step output, event data) against a field map (spec §2.3).

use crate::fields::FieldMap;
use crate::issue::Issue;
use serde_json::Value;

/// The server's form of a `person` value, shown in `describe` as `person.format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersonFormat {
    Email,
}

/// Every issue with `value` against `fields`; empty when it is acceptable. `path` names the
/// object in issues (`output`, `inputs`, `data`).
pub fn check_values(fields: &FieldMap, value: &Value, path: &str, person: PersonFormat) -> Vec<Issue> {
    let _ = (fields, value, path, person);
    Vec::new()
}

/// Every issue with one value against one declaration (type, `one_of`, `items`), at `path`.
pub fn check_value(
    spec: &crate::fields::FieldSpec,
    value: &Value,
    path: &str,
    person: PersonFormat,
) -> Vec<Issue> {
    let _ = (spec, value, path, person);
    Vec::new()
}

/// Whether `text` is a real calendar date written `YYYY-MM-DD`.
pub fn is_date(text: &str) -> bool {
    let _ = text;
    false
}

/// Whether `text` is an RFC 3339 date-time with an offset (`Z` or `±HH:MM`).
pub fn is_datetime(text: &str) -> bool {
    let _ = text;
    false
}

/// Whether `text` is a person reference in `format`.
pub fn is_person(text: &str, format: PersonFormat) -> bool {
    let _ = (text, format);
    false
}
