//! Small readers shared by the validator: strings, durations, probabilities, and value quoting.

use crate::issue::Issue;
use crate::model::{Duration, DurationUnit};
use serde_json::Value;

/// A user's text in JSON quoting, as issues show it: `"Foo"`.
pub(super) fn quote(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// A user's value in JSON notation, numbers exactly as written.
pub(super) fn show(value: &Value) -> String {
    value.to_string()
}

/// A string that is not empty or only whitespace.
pub(super) fn non_blank(value: &Value, path: &str, issues: &mut Vec<Issue>) -> Option<String> {
    match value {
        Value::String(text) if text.trim().is_empty() => {
            issues.push(Issue::new(path, "must not be blank"));
            None
        }
        Value::String(text) => Some(text.clone()),
        _ => {
            issues.push(Issue::new(path, "expected a string"));
            None
        }
    }
}

/// The message for a value that should be `true` or `false`. YAML 1.2 core reads `yes` as a
/// string, so the value is shown.
pub(super) fn not_a_boolean(value: &Value) -> String {
    format!("{} is not a boolean; write true or false", show(value))
}

/// Spec §2.4: an integer followed by `m`, `h` or `d`. Nothing else: no sign, no spaces, no
/// decimals, and the amount fits in 64 bits.
pub(super) fn duration(value: &Value, path: &str, issues: &mut Vec<Issue>) -> Option<Duration> {
    let parsed = value.as_str().and_then(parse_duration);
    if parsed.is_none() {
        issues.push(Issue::new(
            path,
            format!(
                "{} is not a duration; expected an integer followed by m, h or d, like 30m, 4h or 3d",
                show(value)
            ),
        ));
    }
    parsed
}

fn parse_duration(text: &str) -> Option<Duration> {
    let unit = match text.chars().last()? {
        'm' => DurationUnit::Minutes,
        'h' => DurationUnit::Hours,
        'd' => DurationUnit::Days,
        _ => return None,
    };
    let digits = &text[..text.len() - 1];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let amount = digits.parse::<u64>().ok()?;
    Some(Duration { amount, unit })
}

/// A probability or confidence: a number from 0 to 1 inclusive.
pub(super) fn unit_number(value: &Value, path: &str, issues: &mut Vec<Issue>) -> Option<f64> {
    let number = value
        .as_f64()
        .filter(|n| value.is_number() && (0.0..=1.0).contains(n));
    if number.is_none() {
        issues.push(Issue::new(
            path,
            format!("{} is not a number from 0 to 1", show(value)),
        ));
    }
    number
}

/// The kind name with its article, for messages: `an approve step`, `a wait step`.
pub(super) fn a_step(kind: &str) -> String {
    let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {kind} step")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(text: &str) -> Option<Duration> {
        duration(&json!(text), "due", &mut Vec::new())
    }

    #[test]
    fn durations_are_an_integer_and_a_unit_spec_2_4() {
        assert_eq!(read("30m").map(|d| d.as_seconds()), Some(1_800));
        assert_eq!(read("4h").map(|d| d.as_seconds()), Some(14_400));
        assert_eq!(read("3d").map(|d| d.as_seconds()), Some(259_200));
        assert_eq!(read("0m").map(|d| d.amount), Some(0));
        for bad in [
            "",
            "m",
            "3",
            "3s",
            "3 d",
            " 3d",
            "+3d",
            "-3d",
            "1.5h",
            "3D",
            "３d",
            "99999999999999999999d",
        ] {
            assert_eq!(read(bad), None, "{bad:?}");
        }
        assert_eq!(duration(&json!(30), "due", &mut Vec::new()), None);
    }

    #[test]
    fn articles_read_naturally() {
        assert_eq!(a_step("approve"), "an approve step");
        assert_eq!(a_step("wait"), "a wait step");
    }
}
