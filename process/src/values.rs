//! Checks a JSON object (run inputs, step output, event data) against a field map (spec §2.3).

use crate::fields::{FieldMap, FieldSpec, FieldType};
use crate::issue::{Issue, child, index};
use serde_json::{Number, Value};
use std::cmp::Ordering;

/// The server's form of a `person` value, shown in `describe` as `person.format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersonFormat {
    /// An email address, such as `mira@example.com` (see [`is_person`] for the exact check).
    Email,
}

impl PersonFormat {
    /// The format's name as `describe` shows it in `person.format`.
    pub fn name(self) -> &'static str {
        match self {
            PersonFormat::Email => "email",
        }
    }

    /// What a value in this format is, as issue texts say it: `an email address`.
    pub fn description(self) -> &'static str {
        match self {
            PersonFormat::Email => "an email address",
        }
    }
}

/// Every issue with `value` against `fields`; empty when it is acceptable. `path` names the
/// object in issues (`output`, `inputs`, `data`).
///
/// Every issue is reported at once, in a fixed order: declared fields in declaration order, then
/// undeclared fields in the order the caller sent them. Each issue's message, after its path:
///
/// | Problem | Message |
/// |---|---|
/// | a required field is absent | `missing` |
/// | a field nobody declared | `not declared` |
/// | `null`, for any field or list element with `items` | `null is not a value` |
/// | wrong type | `expected boolean`, `expected date (YYYY-MM-DD, a real calendar date)`, ... |
/// | outside `one_of` | `"urgent" is not one of "low", "high"` (values as compact JSON) |
/// | `value` itself is not an object | `expected object`, at `path` itself, and nothing else |
///
/// CONTRACT: numbers are never converted to floating point. `value` is only read, so whatever
/// the caller stores keeps every number exactly as parsed, and `one_of` compares numbers as exact
/// decimals on their text ([`same_number`]).
pub fn check_values(fields: &FieldMap, value: &Value, path: &str, person: PersonFormat) -> Vec<Issue> {
    let Some(object) = value.as_object() else {
        return vec![Issue::new(path, "expected object")];
    };
    let mut issues = Vec::new();
    for (name, spec) in fields {
        let field_path = child(path, name);
        match object.get(name) {
            Some(field_value) => check_into(spec, field_value, &field_path, person, &mut issues),
            None if spec.optional => {}
            None => issues.push(Issue::new(field_path, "missing")),
        }
    }
    for name in object.keys() {
        if !fields.contains_key(name) {
            issues.push(Issue::new(child(path, name), "not declared"));
        }
    }
    issues
}

/// Every issue with one value against one declaration (type, `one_of`, `items`), at `path`.
///
/// `optional` plays no part here: it only lets a field be absent, and `null` is never a value.
/// Works on any declaration, with or without `one_of`, so it can also check that a `one_of`
/// literal has its field's type.
pub fn check_value(spec: &FieldSpec, value: &Value, path: &str, person: PersonFormat) -> Vec<Issue> {
    let mut issues = Vec::new();
    check_into(spec, value, path, person, &mut issues);
    issues
}

/// Appends the issues of one value: `null` first, then the type, then list elements against
/// `items`, and `one_of` last, only for a value whose type and elements are right.
fn check_into(spec: &FieldSpec, value: &Value, path: &str, person: PersonFormat, issues: &mut Vec<Issue>) {
    if value.is_null() {
        issues.push(Issue::new(path, "null is not a value"));
        return;
    }
    if !has_type(spec.field_type, value, person) {
        issues.push(Issue::new(path, expected(spec.field_type, person)));
        return;
    }
    if let (Some(items), Value::Array(elements)) = (&spec.items, value) {
        let before = issues.len();
        for (position, element) in elements.iter().enumerate() {
            check_into(items, element, &index(path, position), person, issues);
        }
        if issues.len() > before {
            return;
        }
    }
    if let Some(allowed) = &spec.one_of
        && !allowed.iter().any(|candidate| same_value(candidate, value))
    {
        let choices: Vec<String> = allowed.iter().map(Value::to_string).collect();
        issues.push(Issue::new(
            path,
            format!("{value} is not one of {}", choices.join(", ")),
        ));
    }
}

/// Whether a non-null `value` has `field_type`.
fn has_type(field_type: FieldType, value: &Value, person: PersonFormat) -> bool {
    match field_type {
        FieldType::String => value.is_string(),
        FieldType::Number => value.is_number(),
        FieldType::Boolean => value.is_boolean(),
        FieldType::Date => value.as_str().is_some_and(is_date),
        FieldType::Datetime => value.as_str().is_some_and(is_datetime),
        FieldType::List => value.is_array(),
        FieldType::Object => value.is_object(),
        FieldType::Person => value.as_str().is_some_and(|text| is_person(text, person)),
    }
}

/// The message for a value of the wrong type. The types whose form is not obvious from the
/// name say what the form is.
fn expected(field_type: FieldType, person: PersonFormat) -> String {
    match field_type {
        FieldType::Date => "expected date (YYYY-MM-DD, a real calendar date)".to_string(),
        FieldType::Datetime => "expected datetime (RFC 3339 with an offset)".to_string(),
        FieldType::Person => format!("expected person ({})", person.description()),
        other => format!("expected {}", other.name()),
    }
}

/// Whether two JSON values are the same value, as `one_of` compares them.
///
/// Numbers compare as exact decimals (`1.0` is `1`, `1e2` is `100`, `-0` is `0`, but
/// `0.1000000000000000000001` is not `0.1`); strings compare exactly, code point for code point;
/// lists compare element by element in order; objects compare by their keys and values, in any
/// key order.
pub fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Number(a), Value::Number(b)) => same_number(a, b),
        (Value::String(a), Value::String(b)) => a == b,
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_value(a, b))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(key, a)| b.get(key).is_some_and(|b| same_value(a, b)))
        }
        _ => false,
    }
}

/// Whether two JSON numbers have the same exact decimal value, computed on their text.
pub fn same_number(a: &Number, b: &Number) -> bool {
    let (a, b) = (a.to_string(), b.to_string());
    match (Decimal::parse(&a), Decimal::parse(&b)) {
        (Some(a), Some(b)) => a == b,
        // Not JSON number text (cannot come from a parsed document): fall back to the text.
        _ => a == b,
    }
}

/// A decimal number in a unique form: `(-1)^negative × digits × 10^exponent`, where `digits`
/// has no leading or trailing zero. Zero is positive with no digits and exponent 0, so two
/// numbers are equal exactly when their `Decimal`s are.
#[derive(Debug, PartialEq, Eq)]
struct Decimal {
    negative: bool,
    /// Significant digits, each 0–9, most significant first.
    digits: Vec<u8>,
    exponent: BigInt,
}

impl Decimal {
    /// Parses JSON number text: `-?digits(.digits)?([eE][+-]?digits)?`. Leading zeros in the
    /// integer part are tolerated (they do not change the value); anything else is `None`.
    fn parse(text: &str) -> Option<Decimal> {
        let bytes = text.as_bytes();
        let mut at = 0;
        let negative = bytes.first() == Some(&b'-');
        if negative {
            at += 1;
        }
        let integer = digit_run(bytes, &mut at);
        if integer.is_empty() {
            return None;
        }
        let mut fraction: &[u8] = &[];
        if bytes.get(at) == Some(&b'.') {
            at += 1;
            fraction = digit_run(bytes, &mut at);
            if fraction.is_empty() {
                return None;
            }
        }
        let mut written_exponent = BigInt::zero();
        if matches!(bytes.get(at), Some(b'e' | b'E')) {
            at += 1;
            let exponent_negative = match bytes.get(at) {
                Some(b'-') => {
                    at += 1;
                    true
                }
                Some(b'+') => {
                    at += 1;
                    false
                }
                _ => false,
            };
            let exponent_digits = digit_run(bytes, &mut at);
            if exponent_digits.is_empty() {
                return None;
            }
            written_exponent = BigInt::from_ascii(exponent_negative, exponent_digits);
        }
        if at != bytes.len() {
            return None;
        }

        // The value is mantissa × 10^(written_exponent - fraction length).
        let mantissa: Vec<u8> = integer.iter().chain(fraction).map(|d| d - b'0').collect();
        let (Some(first), Some(last)) = (
            mantissa.iter().position(|&d| d != 0),
            mantissa.iter().rposition(|&d| d != 0),
        ) else {
            return Some(Decimal {
                negative: false,
                digits: Vec::new(),
                exponent: BigInt::zero(),
            });
        };
        let trailing_zeros = mantissa.len() - 1 - last;
        // Both counts are bounded by the text's length, so they fit an i128 with room to spare.
        let shift = trailing_zeros as i128 - fraction.len() as i128;
        Some(Decimal {
            negative,
            digits: mantissa[first..=last].to_vec(),
            exponent: written_exponent.add(&BigInt::from_i128(shift)),
        })
    }
}

/// Advances `at` over ASCII digits and returns them.
fn digit_run<'a>(bytes: &'a [u8], at: &mut usize) -> &'a [u8] {
    let start = *at;
    while bytes.get(*at).is_some_and(u8::is_ascii_digit) {
        *at += 1;
    }
    &bytes[start..*at]
}

/// A signed integer of any size. A JSON exponent may have more digits than any machine integer
/// holds (`1e99999999999999999999999999999999999999999`), and equality must still be exact.
///
/// INVARIANT: `magnitude` has no leading zero; zero is an empty magnitude and not negative.
#[derive(Debug, PartialEq, Eq)]
struct BigInt {
    negative: bool,
    /// Decimal digits, each 0–9, most significant first.
    magnitude: Vec<u8>,
}

impl BigInt {
    fn zero() -> BigInt {
        BigInt {
            negative: false,
            magnitude: Vec::new(),
        }
    }

    /// From ASCII digits, leading zeros allowed.
    fn from_ascii(negative: bool, digits: &[u8]) -> BigInt {
        BigInt::normalized(negative, digits.iter().map(|d| d - b'0').collect())
    }

    fn from_i128(value: i128) -> BigInt {
        BigInt::from_ascii(value < 0, value.unsigned_abs().to_string().as_bytes())
    }

    fn normalized(negative: bool, mut magnitude: Vec<u8>) -> BigInt {
        let leading_zeros = magnitude.iter().take_while(|&&d| d == 0).count();
        magnitude.drain(..leading_zeros);
        BigInt {
            negative: negative && !magnitude.is_empty(),
            magnitude,
        }
    }

    fn add(&self, other: &BigInt) -> BigInt {
        if self.negative == other.negative {
            return BigInt::normalized(self.negative, add_magnitudes(&self.magnitude, &other.magnitude));
        }
        match compare_magnitudes(&self.magnitude, &other.magnitude) {
            Ordering::Equal => BigInt::zero(),
            Ordering::Greater => BigInt::normalized(
                self.negative,
                subtract_magnitudes(&self.magnitude, &other.magnitude),
            ),
            Ordering::Less => BigInt::normalized(
                other.negative,
                subtract_magnitudes(&other.magnitude, &self.magnitude),
            ),
        }
    }
}

/// Orders two magnitudes without leading zeros.
fn compare_magnitudes(a: &[u8], b: &[u8]) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// `a + b`, digits most significant first; the result may start with a zero.
fn add_magnitudes(a: &[u8], b: &[u8]) -> Vec<u8> {
    let width = a.len().max(b.len()) + 1;
    let mut sum = vec![0; width];
    let mut carry = 0;
    for place in 0..width {
        let digit_a = a.len().checked_sub(place + 1).map_or(0, |i| a[i]);
        let digit_b = b.len().checked_sub(place + 1).map_or(0, |i| b[i]);
        let total = digit_a + digit_b + carry;
        sum[width - 1 - place] = total % 10;
        carry = total / 10;
    }
    sum
}

/// `a - b` for `a >= b`, digits most significant first; the result may start with zeros.
fn subtract_magnitudes(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut difference = vec![0; a.len()];
    let mut borrow = 0;
    for place in 0..a.len() {
        let digit_a = a[a.len() - 1 - place];
        let digit_b = b.len().checked_sub(place + 1).map_or(0, |i| b[i]) + borrow;
        let (digit, next_borrow) = if digit_a >= digit_b {
            (digit_a - digit_b, 0)
        } else {
            (digit_a + 10 - digit_b, 1)
        };
        difference[a.len() - 1 - place] = digit;
        borrow = next_borrow;
    }
    difference
}

/// Whether `text` is a real calendar date written `YYYY-MM-DD`.
///
/// Years run from 0001 to 9999 on the proleptic Gregorian calendar; months and days must exist
/// (`2024-02-29` yes, `2023-02-29` and `2023-04-31` no). Exactly two digits for month and day.
pub fn is_date(text: &str) -> bool {
    is_date_bytes(text.as_bytes())
}

fn is_date_bytes(bytes: &[u8]) -> bool {
    let [y1, y2, y3, y4, b'-', m1, m2, b'-', d1, d2] = *bytes else {
        return false;
    };
    let (Some(year), Some(month), Some(day)) =
        (number(&[y1, y2, y3, y4]), number(&[m1, m2]), number(&[d1, d2]))
    else {
        return false;
    };
    year >= 1
        && (1..=12).contains(&month)
        && day >= 1
        && day <= agentprocess_vocab::days_in_month(year, month)
}

/// The value of a few ASCII digits; `None` if any byte is not a digit.
fn number(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0, |value, &byte| {
        byte.is_ascii_digit().then(|| value * 10 + u32::from(byte - b'0'))
    })
}

/// Whether `text` is an RFC 3339 date-time with an offset (`Z` or `±HH:MM`).
///
/// The form is `YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)`, with `t` and `z` accepted in
/// lower case as RFC 3339 allows. The date must be real ([`is_date`]); hours run 00–23, minutes
/// 00–59, seconds 00–60 (60 for a leap second); offset hours 00–23 and minutes 00–59. A
/// date-time without an offset says nothing about the instant and is refused.
pub fn is_datetime(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() > 11
        && is_date_bytes(&bytes[..10])
        && matches!(bytes[10], b'T' | b't')
        && is_time_with_offset(&bytes[11..])
}

/// `HH:MM:SS[.fraction]` followed by an offset.
fn is_time_with_offset(bytes: &[u8]) -> bool {
    let [h1, h2, b':', m1, m2, b':', s1, s2, ref rest @ ..] = *bytes else {
        return false;
    };
    let (Some(hour), Some(minute), Some(second)) = (number(&[h1, h2]), number(&[m1, m2]), number(&[s1, s2]))
    else {
        return false;
    };
    if hour > 23 || minute > 59 || second > 60 {
        return false;
    }
    let offset = match rest {
        [b'.', fraction @ ..] => {
            let digits = fraction.iter().take_while(|b| b.is_ascii_digit()).count();
            if digits == 0 {
                return false;
            }
            &fraction[digits..]
        }
        _ => rest,
    };
    is_offset(offset)
}

/// `Z`, `z`, `+HH:MM` or `-HH:MM`.
fn is_offset(bytes: &[u8]) -> bool {
    match *bytes {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => {
            let (Some(hour), Some(minute)) = (number(&[h1, h2]), number(&[m1, m2])) else {
                return false;
            };
            hour <= 23 && minute <= 59
        }
        _ => false,
    }
}

/// Whether `text` is a person reference in `format`.
///
/// [`PersonFormat::Email`]: a plain address `local@domain`, at most 254 bytes, checked by hand
/// because a person value is an identity the server matches, not a mail header:
/// - exactly one `@`;
/// - the local part is 1–64 bytes of dot-separated, non-empty atoms of letters, digits and
///   ``!#$%&'*+-/=?^_`{|}~`` (letters and digits of any script allowed);
/// - the domain is at most 253 bytes, at least two dot-separated labels of 1–63 bytes of letters,
///   digits and inner hyphens, and its last label is not all digits.
///
/// So no whitespace, control characters, display names (`Mira <mira@example.com>`), quoted
/// local parts, comments, IP-literal domains or trailing dots.
pub fn is_person(text: &str, format: PersonFormat) -> bool {
    match format {
        PersonFormat::Email => is_email(text),
    }
}

fn is_email(text: &str) -> bool {
    if text.len() > 254 {
        return false;
    }
    let Some((local, domain)) = text.split_once('@') else {
        return false;
    };
    is_local_part(local) && is_domain(domain)
}

fn is_local_part(local: &str) -> bool {
    local.len() <= 64
        && local
            .split('.')
            .all(|atom| !atom.is_empty() && atom.chars().all(is_local_char))
}

fn is_local_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c) || (!c.is_ascii() && c.is_alphanumeric())
}

fn is_domain(domain: &str) -> bool {
    let labels: Vec<&str> = domain.split('.').collect();
    domain.len() <= 253
        && labels.len() >= 2
        && labels.iter().all(|label| is_domain_label(label))
        && labels
            .last()
            .is_some_and(|top| !top.bytes().all(|b| b.is_ascii_digit()))
}

fn is_domain_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= 63
        && !label.starts_with('-')
        && !label.ends_with('-')
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || (!c.is_ascii() && c.is_alphanumeric()))
}
