//! Field value checking (spec §2.3 fields, §3.6 event data, §6 rule 3 acceptance).

use agentprocess_process::values::{
    PersonFormat, check_value, check_values, is_date, is_datetime, is_person, same_number, same_value,
};
use agentprocess_process::{FieldMap, FieldSpec, FieldType};
use serde_json::Value;

const EMAIL: PersonFormat = PersonFormat::Email;

fn json(text: &str) -> Value {
    serde_json::from_str(text).expect("test JSON parses")
}

fn field(field_type: FieldType) -> FieldSpec {
    FieldSpec::of_type(field_type)
}

fn optional(field_type: FieldType) -> FieldSpec {
    FieldSpec {
        optional: true,
        ..FieldSpec::of_type(field_type)
    }
}

fn one_of(field_type: FieldType, allowed: &str) -> FieldSpec {
    let Value::Array(allowed) = json(allowed) else {
        panic!("one_of literals must be a JSON array");
    };
    FieldSpec {
        one_of: Some(allowed),
        ..FieldSpec::of_type(field_type)
    }
}

fn list_of(items: FieldSpec) -> FieldSpec {
    FieldSpec {
        items: Some(Box::new(items)),
        ..FieldSpec::of_type(FieldType::List)
    }
}

fn fields(entries: Vec<(&str, FieldSpec)>) -> FieldMap {
    entries
        .into_iter()
        .map(|(name, spec)| (name.to_string(), spec))
        .collect()
}

/// The rendered issues of a whole object checked at `output`.
fn output_issues(fields: &FieldMap, value: &str) -> Vec<String> {
    check_values(fields, &json(value), "output", EMAIL)
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// The rendered issues of one value checked at `output.x`.
fn value_issues(spec: &FieldSpec, value: &str) -> Vec<String> {
    check_value(spec, &json(value), "output.x", EMAIL)
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn accepts(spec: &FieldSpec, value: &str) {
    assert_eq!(
        value_issues(spec, value),
        Vec::<String>::new(),
        "{value} should be accepted"
    );
}

fn refuses(spec: &FieldSpec, value: &str, message: &str) {
    assert_eq!(
        value_issues(spec, value),
        vec![format!("output.x: {message}")],
        "{value} should be refused"
    );
}

// --- The eight types -------------------------------------------------------------------------

#[test]
fn spec_2_3_string_accepts_text_and_refuses_other_types() {
    let spec = field(FieldType::String);
    accepts(&spec, r#""No matches on OFAC or EU lists.""#);
    accepts(&spec, r#""""#);
    refuses(&spec, "12", "expected string");
    refuses(&spec, "true", "expected string");
    refuses(&spec, r#"["a"]"#, "expected string");
    refuses(&spec, r#"{"a": "b"}"#, "expected string");
}

#[test]
fn spec_2_3_number_accepts_json_numbers_and_refuses_other_types() {
    let spec = field(FieldType::Number);
    for good in ["0", "-0", "48000", "-12.5", "1e2", "1E-7", "2.5e+3"] {
        accepts(&spec, good);
    }
    refuses(&spec, r#""48000""#, "expected number");
    refuses(&spec, "false", "expected number");
    refuses(&spec, "[1]", "expected number");
}

/// Spec §2.3: a number field takes numbers of any size and precision. That they come back
/// unrounded from a run is checked by the runtime test `spec_2_3_numbers_are_never_rounded`.
#[test]
fn spec_2_3_number_fields_take_any_size_and_precision() {
    let spec = field(FieldType::Number);
    let fields = fields(vec![("amount", spec.clone())]);
    for sent in [
        "123456789012345678901234567890",
        "-98765432109876543210.000000000000000000001",
        "0.1000000000000000000000001",
        "1.0",
        "1.50",
        "-0",
        "1e400",
        "1E+2",
        "-1.2345678901234567890123456789e-400",
    ] {
        accepts(&spec, sent);
        let value = json(&format!(r#"{{"amount":{sent}}}"#));
        assert!(
            check_values(&fields, &value, "output", EMAIL).is_empty(),
            "{sent}"
        );
    }
}

#[test]
fn spec_2_3_boolean_accepts_true_and_false_only() {
    let spec = field(FieldType::Boolean);
    accepts(&spec, "true");
    accepts(&spec, "false");
    refuses(&spec, r#""true""#, "expected boolean");
    refuses(&spec, r#""yes""#, "expected boolean");
    refuses(&spec, "1", "expected boolean");
}

const DATE: &str = "expected date (YYYY-MM-DD, a real calendar date)";
const DATETIME: &str = "expected datetime (RFC 3339 with an offset)";
const PERSON: &str = "expected person (an email address)";

#[test]
fn spec_2_3_date_must_be_a_real_calendar_date() {
    let spec = field(FieldType::Date);
    accepts(&spec, r#""2024-02-29""#);
    accepts(&spec, r#""2000-02-29""#);
    accepts(&spec, r#""2023-12-31""#);
    refuses(&spec, r#""2023-02-29""#, DATE);
    refuses(&spec, r#""1900-02-29""#, DATE);
    refuses(&spec, r#""2023-04-31""#, DATE);
    refuses(&spec, r#""2023-13-01""#, DATE);
    refuses(&spec, r#""2023-00-10""#, DATE);
    refuses(&spec, r#""2023-01-00""#, DATE);
}

#[test]
fn spec_2_3_date_must_be_written_yyyy_mm_dd() {
    let spec = field(FieldType::Date);
    refuses(&spec, r#""2023-1-01""#, DATE);
    refuses(&spec, r#""2023-01-1""#, DATE);
    refuses(&spec, r#""23-01-01""#, DATE);
    refuses(&spec, r#""2023/01/01""#, DATE);
    refuses(&spec, r#""20230101""#, DATE);
    refuses(&spec, r#""2023-01-01T00:00:00Z""#, DATE);
    refuses(&spec, r#"" 2023-01-01""#, DATE);
    refuses(&spec, "20230101", DATE);
}

#[test]
fn spec_2_3_datetime_is_rfc_3339_with_an_offset() {
    let spec = field(FieldType::Datetime);
    accepts(&spec, r#""2026-10-06T09:04:12Z""#);
    accepts(&spec, r#""2026-10-06T09:04:12+05:30""#);
    accepts(&spec, r#""2026-10-06T09:04:12-08:00""#);
    accepts(&spec, r#""2026-10-06T09:04:12.123456789Z""#);
    accepts(&spec, r#""2016-12-31T23:59:60Z""#);
    accepts(&spec, r#""2026-10-06t09:04:12z""#);
    refuses(&spec, r#""2026-10-06T09:04:12""#, DATETIME);
    refuses(&spec, r#""2026-10-06T24:00:00Z""#, DATETIME);
    refuses(&spec, r#""2026-10-06""#, DATETIME);
    refuses(&spec, "1759741452", DATETIME);
}

#[test]
fn spec_2_3_list_accepts_arrays_and_refuses_other_types() {
    let spec = field(FieldType::List);
    accepts(&spec, "[]");
    accepts(&spec, r#"[1, "two", {"three": 3}, [4]]"#);
    refuses(&spec, r#""a, b""#, "expected list");
    refuses(&spec, r#"{"0": "a"}"#, "expected list");
}

#[test]
fn spec_2_3_object_accepts_any_object_and_refuses_other_types() {
    let spec = field(FieldType::Object);
    accepts(&spec, "{}");
    accepts(&spec, r#"{"anything": [1, {"goes": null}]}"#);
    refuses(&spec, "[]", "expected object");
    refuses(&spec, r#""{}""#, "expected object");
}

#[test]
fn spec_2_3_person_is_an_email_address() {
    let spec = field(FieldType::Person);
    accepts(&spec, r#""mira@example.com""#);
    refuses(&spec, r#""mira""#, PERSON);
    refuses(&spec, r#""Mira <mira@example.com>""#, PERSON);
    refuses(&spec, "42", PERSON);
}

// --- Presence, null, undeclared --------------------------------------------------------------

#[test]
fn spec_2_3_every_field_is_required_unless_optional() {
    let declared = fields(vec![
        ("summary", field(FieldType::String)),
        ("note", optional(FieldType::String)),
    ]);
    assert_eq!(
        output_issues(&declared, r#"{"summary": "ok"}"#),
        Vec::<String>::new()
    );
    assert_eq!(
        output_issues(&declared, r#"{"summary": "ok", "note": "fine"}"#),
        Vec::<String>::new()
    );
    assert_eq!(
        output_issues(&declared, r#"{"note": "fine"}"#),
        ["output.summary: missing"]
    );
}

#[test]
fn spec_2_3_null_is_not_a_value_even_for_optional_fields() {
    let declared = fields(vec![
        ("amount", field(FieldType::Number)),
        ("note", optional(FieldType::String)),
    ]);
    assert_eq!(
        output_issues(&declared, r#"{"amount": null, "note": null}"#),
        [
            "output.amount: null is not a value",
            "output.note: null is not a value"
        ]
    );
}

#[test]
fn spec_2_3_fields_not_declared_are_refused() {
    let declared = fields(vec![("cleared", field(FieldType::Boolean))]);
    assert_eq!(
        output_issues(&declared, r#"{"cleared": true, "extra": 1}"#),
        ["output.extra: not declared"]
    );
    assert_eq!(output_issues(&FieldMap::new(), "{}"), Vec::<String>::new());
    assert_eq!(
        output_issues(&FieldMap::new(), r#"{"z": 1, "a": null}"#),
        ["output.z: not declared", "output.a: not declared"]
    );
}

#[test]
fn spec_2_3_the_whole_value_must_be_an_object() {
    let declared = fields(vec![("cleared", field(FieldType::Boolean))]);
    for value in ["[]", "null", "true", r#""cleared""#, "1"] {
        assert_eq!(output_issues(&declared, value), ["output: expected object"]);
    }
    let issues = check_values(&declared, &json("[]"), "inputs", EMAIL);
    assert_eq!(issues[0].to_string(), "inputs: expected object");
}

#[test]
fn spec_6_3_tools_example_issues_read_as_the_tool_contracts_show() {
    // The `check_vendor` step of the specification's example.
    let declared = fields(vec![
        ("cleared", field(FieldType::Boolean)),
        ("summary", field(FieldType::String)),
    ]);
    assert_eq!(
        output_issues(&declared, r#"{"cleared": "yes", "extra": 1}"#),
        [
            "output.cleared: expected boolean",
            "output.summary: missing",
            "output.extra: not declared",
        ]
    );
}

#[test]
fn spec_6_3_every_issue_is_reported_at_once_in_a_fixed_order() {
    let declared = fields(vec![
        ("level", one_of(FieldType::String, r#"["low", "high"]"#)),
        ("start", field(FieldType::Date)),
        ("at", field(FieldType::Datetime)),
        ("manager", field(FieldType::Person)),
        ("tags", list_of(field(FieldType::String))),
        ("amount", field(FieldType::Number)),
        ("cleared", field(FieldType::Boolean)),
        ("note", optional(FieldType::String)),
    ]);
    // Keys sent in another order than declared: issues still follow the declaration, then the
    // undeclared keys in the order sent.
    let sent = r#"{
        "zeta": 1,
        "tags": ["a", "b", 3, null],
        "manager": "mira",
        "cleared": true,
        "at": "2026-10-06T09:04:12",
        "level": "urgent",
        "start": "2023-02-29",
        "alpha": 2
    }"#;
    assert_eq!(
        output_issues(&declared, sent),
        [
            r#"output.level: "urgent" is not one of "low", "high""#,
            "output.start: expected date (YYYY-MM-DD, a real calendar date)",
            "output.at: expected datetime (RFC 3339 with an offset)",
            "output.manager: expected person (an email address)",
            "output.tags[2]: expected string",
            "output.tags[3]: null is not a value",
            "output.amount: missing",
            "output.zeta: not declared",
            "output.alpha: not declared",
        ]
    );
}

#[test]
fn spec_3_6_event_data_and_run_inputs_are_named_by_their_path() {
    let declared = fields(vec![("start", field(FieldType::Date))]);
    let issues = check_values(&declared, &json(r#"{"start": "soon"}"#), "inputs", EMAIL);
    assert_eq!(issues[0].to_string(), format!("inputs.start: {DATE}"));
    let issues = check_values(&declared, &json(r#"{}"#), "data", EMAIL);
    assert_eq!(issues[0].to_string(), "data.start: missing");
    assert_eq!(issues[0].path, "data.start");
    assert_eq!(issues[0].message, "missing");
}

// --- one_of ----------------------------------------------------------------------------------

#[test]
fn spec_2_3_one_of_strings_compare_exactly() {
    let spec = one_of(FieldType::String, r#"["low", "high"]"#);
    accepts(&spec, r#""low""#);
    accepts(&spec, r#""high""#);
    refuses(&spec, r#""urgent""#, r#""urgent" is not one of "low", "high""#);
    refuses(&spec, r#""Low""#, r#""Low" is not one of "low", "high""#);
    refuses(&spec, r#""low ""#, r#""low " is not one of "low", "high""#);
    // The type is checked first; a wrong type is not also reported as outside one_of.
    refuses(&spec, "1", "expected string");
}

#[test]
fn spec_2_3_one_of_numbers_compare_as_exact_decimals() {
    let spec = one_of(FieldType::Number, "[1, 100, 0.1, -2.50]");
    for equal in [
        "1", "1.0", "1.000", "10e-1", "1e0", "100", "1e2", "1E+2", "0.01e4", "0.1", "1e-1",
    ] {
        accepts(&spec, equal);
    }
    accepts(&spec, "-2.5");
    accepts(&spec, "-25e-1");
    refuses(
        &spec,
        "0.1000000000000000000001",
        "0.1000000000000000000001 is not one of 1, 100, 0.1, -2.50",
    );
    refuses(&spec, "2.5", "2.5 is not one of 1, 100, 0.1, -2.50");
    refuses(&spec, "-1", "-1 is not one of 1, 100, 0.1, -2.50");
    refuses(&spec, "1e400", "1e+400 is not one of 1, 100, 0.1, -2.50");
}

#[test]
fn spec_2_3_one_of_booleans() {
    let spec = one_of(FieldType::Boolean, "[true]");
    accepts(&spec, "true");
    refuses(&spec, "false", "false is not one of true");
}

#[test]
fn spec_2_3_one_of_applies_inside_lists() {
    let spec = list_of(one_of(FieldType::String, r#"["low", "high"]"#));
    accepts(&spec, "[]");
    accepts(&spec, r#"["low", "high", "low"]"#);
    assert_eq!(
        value_issues(&spec, r#"["low", "urgent", 3, "HIGH"]"#),
        [
            r#"output.x[1]: "urgent" is not one of "low", "high""#,
            "output.x[2]: expected string",
            r#"output.x[3]: "HIGH" is not one of "low", "high""#,
        ]
    );
}

#[test]
fn spec_2_3_one_of_on_a_list_compares_whole_lists() {
    let spec = FieldSpec {
        one_of: Some(vec![json("[1, 2]"), json("[]")]),
        ..list_of(field(FieldType::Number))
    };
    accepts(&spec, "[1.0, 2e0]");
    accepts(&spec, "[]");
    refuses(&spec, "[2, 1]", "[2,1] is not one of [1,2], []");
    // Element issues come first; the list is not also reported as outside one_of.
    assert_eq!(
        value_issues(&spec, r#"[1, "2"]"#),
        [r#"output.x[1]: expected number"#]
    );
}

#[test]
fn spec_2_3_lists_of_lists_check_every_level() {
    let spec = list_of(list_of(one_of(FieldType::Number, "[0, 1]")));
    accepts(&spec, "[[0, 1], [], [1.0]]");
    assert_eq!(
        value_issues(&spec, r#"[[0, 2], "row", [null, 1, true]]"#),
        [
            "output.x[0][1]: 2 is not one of 0, 1",
            "output.x[1]: expected list",
            "output.x[2][0]: null is not a value",
            "output.x[2][2]: expected number",
        ]
    );
}

#[test]
fn spec_2_3_items_of_every_type_are_checked() {
    accepts(&list_of(field(FieldType::Date)), r#"["2024-02-29"]"#);
    assert_eq!(
        value_issues(
            &list_of(field(FieldType::Date)),
            r#"["2024-02-29", "2023-02-29"]"#
        ),
        [format!("output.x[1]: {DATE}")]
    );
    assert_eq!(
        value_issues(&list_of(field(FieldType::Person)), r#"["a@example.com", "b"]"#),
        [format!("output.x[1]: {PERSON}")]
    );
    assert_eq!(
        value_issues(&list_of(field(FieldType::Object)), r#"[{}, []]"#),
        ["output.x[1]: expected object"]
    );
}

#[test]
fn spec_2_3_a_list_without_items_takes_elements_of_any_kind() {
    accepts(&field(FieldType::List), r#"[null, 1, "a", [null]]"#);
}

#[test]
fn spec_2_3_check_value_works_on_a_declaration_without_one_of() {
    // The validator checks each one_of literal against the bare type.
    let bare = field(FieldType::Date);
    assert!(
        check_value(
            &bare,
            &json(r#""2024-02-29""#),
            "steps[0].output.day.one_of[0]",
            EMAIL
        )
        .is_empty()
    );
    let issues = check_value(
        &bare,
        &json(r#""tomorrow""#),
        "steps[0].output.day.one_of[1]",
        EMAIL,
    );
    assert_eq!(
        issues[0].to_string(),
        format!("steps[0].output.day.one_of[1]: {DATE}")
    );
    // optional plays no part in one value's check.
    refuses(&optional(FieldType::String), "null", "null is not a value");
}

// --- Comparison --------------------------------------------------------------------------------

#[test]
fn spec_2_3_numbers_compare_exactly_by_value() {
    let number = |text: &str| match json(text) {
        Value::Number(number) => number,
        other => panic!("{other} is not a number"),
    };
    let same = |a: &str, b: &str| same_number(&number(a), &number(b));
    assert!(same("1", "1.0"));
    assert!(same("1e2", "100"));
    assert!(same("0", "-0"));
    assert!(same("0", "0e999999999999999999999999999999999999999999"));
    assert!(same("-0.0", "0E-5"));
    assert!(same(
        "123456789012345678901234567890",
        "1.2345678901234567890123456789e29"
    ));
    assert!(same("1e400", "10e399"));
    assert!(same("1e-400", "0.1e-399"));
    assert!(same(
        "1e99999999999999999999999999999999999999999",
        "10e99999999999999999999999999999999999999998"
    ));
    assert!(!same("0.1000000000000000000001", "0.1"));
    assert!(!same("1", "-1"));
    assert!(!same("1e400", "1e401"));
    assert!(!same(
        "1e99999999999999999999999999999999999999999",
        "1e99999999999999999999999999999999999999998"
    ));
    assert!(!same("12", "21"));
}

#[test]
fn spec_2_3_values_compare_by_value() {
    assert!(same_value(
        &json(r#"{"a": 1, "b": [1.0]}"#),
        &json(r#"{"b": [1], "a": 1e0}"#)
    ));
    assert!(!same_value(&json(r#"{"a": 1}"#), &json(r#"{"a": 1, "b": 2}"#)));
    assert!(!same_value(&json("[1, 2]"), &json("[2, 1]")));
    assert!(!same_value(&json(r#""1""#), &json("1")));
    assert!(!same_value(&json("true"), &json("1")));
    assert!(same_value(&json("null"), &json("null")));
}

// --- The helpers on their own -------------------------------------------------------------------

#[test]
fn spec_2_3_is_date() {
    for good in [
        "2024-02-29",
        "2000-02-29",
        "0001-01-01",
        "9999-12-31",
        "2023-01-31",
        "2023-04-30",
    ] {
        assert!(is_date(good), "{good}");
    }
    for bad in [
        "2023-02-29",
        "1900-02-29",
        "2100-02-29",
        "2023-04-31",
        "2023-06-31",
        "2023-09-31",
        "2023-11-31",
        "2023-01-32",
        "0000-01-01",
        "2023-1-01",
        "2023-01-1",
        "10000-01-01",
        "+2023-01-01",
        "2023-01-01T00:00:00Z",
        "2023-01-01 ",
        "２０２３-01-01",
        "",
    ] {
        assert!(!is_date(bad), "{bad}");
    }
}

#[test]
fn spec_2_3_is_datetime() {
    for good in [
        "2026-10-06T09:04:12Z",
        "2026-10-06T09:04:12z",
        "2026-10-06t09:04:12Z",
        "2026-10-06T09:04:12+05:30",
        "2026-10-06T09:04:12-00:00",
        "2026-10-06T09:04:12+23:59",
        "2026-10-06T00:00:00.5Z",
        "2026-10-06T23:59:59.999999999999+01:00",
        "2016-12-31T23:59:60Z",
        "2024-02-29T12:00:00Z",
    ] {
        assert!(is_datetime(good), "{good}");
    }
    for bad in [
        "2026-10-06T09:04:12",
        "2026-10-06T09:04:12.5",
        "2026-10-06T24:00:00Z",
        "2026-10-06T23:60:00Z",
        "2026-10-06T23:59:61Z",
        "2026-10-06T09:04:12+24:00",
        "2026-10-06T09:04:12+05:60",
        "2026-10-06T09:04:12+0530",
        "2026-10-06T09:04:12+05",
        "2026-10-06T09:04:12.Z",
        "2026-10-06T09:04Z",
        "2026-10-06 09:04:12Z",
        "2026-10-06T9:04:12Z",
        "2023-02-29T09:04:12Z",
        "2026-10-06T09:04:12ZZ",
        "2026-10-06T09:04:12 Z",
        "2026-10-06",
        "2026-10-06T",
        "",
    ] {
        assert!(!is_datetime(bad), "{bad}");
    }
}

#[test]
fn spec_2_3_is_person_email() {
    for good in [
        "mira@example.com",
        "Mira.Lee+finance@mail.example.co.uk",
        "o'brien@example.ie",
        "user_1@sub-domain.example.org",
        "jörg@bücher.example",
        "a@b.co",
    ] {
        assert!(is_person(good, EMAIL), "{good}");
    }
    let long_local = format!("{}@example.com", "a".repeat(65));
    let long_total = format!("a@{}.com", vec!["b".repeat(63); 4].join("."));
    for bad in [
        "",
        "mira",
        "@example.com",
        "mira@",
        "mira@localhost",
        "mira@@example.com",
        "mira@team@example.com",
        "mira lee@example.com",
        " mira@example.com",
        "mira@example.com ",
        "mira@exa mple.com",
        "mira\n@example.com",
        "mira@example.com\u{0}",
        "Mira <mira@example.com>",
        "\"mira lee\"@example.com",
        ".mira@example.com",
        "mira.@example.com",
        "mi..ra@example.com",
        "mira@.example.com",
        "mira@example..com",
        "mira@example.com.",
        "mira@-example.com",
        "mira@example-.com",
        "mira@[192.0.2.1]",
        "mira@192.0.2.1",
        "mira@example.com(comment)",
        long_local.as_str(),
        long_total.as_str(),
    ] {
        assert!(!is_person(bad, EMAIL), "{bad:?}");
    }
    assert_eq!(PersonFormat::Email.name(), "email");
}

/// Days since 1970-01-01 of a proleptic Gregorian date, for any month and day numbers (an
/// out-of-range day rolls over). An independent calendar to check `is_date` against.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146097 + day_of_era - 719468
}

/// The date of a day count from [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719468;
    let era = days.div_euclid(146097);
    let day_of_era = days - era * 146097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[test]
fn spec_2_3_is_date_agrees_with_an_independent_calendar_for_every_month_end() {
    for year in 1..=9999 {
        for month in 1..=12 {
            for day in 27..=32 {
                let text = format!("{year:04}-{month:02}-{day:02}");
                let real = civil_from_days(days_from_civil(year, month, day)) == (year, month, day);
                assert_eq!(is_date(&text), real, "{text}");
                let datetime = format!("{text}T12:00:00Z");
                assert_eq!(is_datetime(&datetime), real, "{datetime}");
            }
        }
    }
}

#[test]
fn spec_2_3_a_number_written_any_way_is_the_same_number() {
    let number = |text: &str| match json(text) {
        Value::Number(number) => number,
        other => panic!("{other} is not a number"),
    };
    for digits in [
        "1",
        "7",
        "10",
        "25",
        "12345",
        "100200300400500600700800900",
        "9999999999999999999999",
    ] {
        for sign in ["", "-"] {
            let plain = number(&format!("{sign}{digits}"));
            let mut changed = digits.to_string();
            changed.replace_range(0..1, if digits.starts_with('9') { "8" } else { "9" });
            let other = number(&format!("{sign}{changed}"));
            for point in 0..=digits.len() {
                for exponent in -40i64..=40 {
                    // digits with the point moved `point` places from the right, times 10^exponent,
                    // is digits × 10^(exponent - point): write it with the exponent that makes it
                    // equal to `digits`, and pad with zeros that change nothing.
                    let (integer, fraction) = digits.split_at(digits.len() - point);
                    let integer = if integer.is_empty() { "0" } else { integer };
                    let fraction = if fraction.is_empty() {
                        String::new()
                    } else {
                        format!(".{fraction}000")
                    };
                    let written = format!("{sign}{integer}{fraction}e{}", point as i64 - exponent);
                    let scaled = number(&written);
                    let shifted = number(&format!("{sign}{digits}e{}", -exponent));
                    if exponent == 0 {
                        assert!(same_number(&scaled, &plain), "{written} = {sign}{digits}");
                    } else {
                        assert!(!same_number(&scaled, &plain), "{written} != {sign}{digits}");
                    }
                    assert!(
                        same_number(&scaled, &shifted),
                        "{written} = {sign}{digits}e{}",
                        -exponent
                    );
                    assert!(!same_number(&scaled, &other), "{written} != {sign}{changed}");
                }
            }
        }
    }
}
