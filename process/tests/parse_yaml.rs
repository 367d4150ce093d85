//! Spec §2.1: the frontmatter is YAML 1.2 read with the core schema only, into JSON.

use agentprocess_process::{Issue, parse_document};
use serde_json::{Value, json};

/// Parses `yaml` as the whole frontmatter of a document.
fn frontmatter(yaml: &str) -> Value {
    let source = format!("---\n{yaml}---\nbody\n");
    parse_document(source.as_bytes())
        .unwrap_or_else(|issues| panic!("{yaml:?}: {issues:?}"))
        .frontmatter
}

/// The value of key `a` in a frontmatter `a: <yaml>`.
fn value(yaml: &str) -> Value {
    frontmatter(&format!("a: {yaml}\n"))["a"].clone()
}

/// The number of key `a`, as the exact JSON text it keeps.
fn number_text(yaml: &str) -> String {
    match value(yaml) {
        Value::Number(number) => number.to_string(),
        other => panic!("{yaml:?} gave {other:?}, not a number"),
    }
}

/// The one issue of a refused frontmatter, rendered `path: message`. The frontmatter starts on
/// line 2 of the document.
fn refusal(yaml: &str) -> String {
    let source = format!("---\n{yaml}---\n");
    match parse_document(source.as_bytes()) {
        Ok(document) => panic!("{yaml:?} was accepted: {:?}", document.frontmatter),
        Err(issues) => {
            assert_eq!(issues.len(), 1, "{issues:?}");
            issues[0].to_string()
        }
    }
}

#[test]
fn yaml_1_1_booleans_stay_strings() {
    for word in ["yes", "no", "on", "off", "y", "n", "Yes", "NO", "On", "OFF"] {
        assert_eq!(value(word), json!(word), "{word}");
    }
}

#[test]
fn core_booleans() {
    for word in ["true", "True", "TRUE"] {
        assert_eq!(value(word), json!(true));
    }
    for word in ["false", "False", "FALSE"] {
        assert_eq!(value(word), json!(false));
    }
    assert_eq!(value("tRUE"), json!("tRUE"));
}

#[test]
fn core_nulls() {
    for word in ["null", "Null", "NULL", "~", ""] {
        assert_eq!(value(word), Value::Null, "{word:?}");
    }
    assert_eq!(value("nULL"), json!("nULL"));
}

#[test]
fn integers_keep_their_digits() {
    assert_eq!(number_text("017"), "17", "a leading zero is decimal, not octal");
    assert_eq!(number_text("+5"), "5");
    assert_eq!(number_text("-12"), "-12");
    assert_eq!(number_text("000"), "0");
    assert_eq!(number_text("-0"), "-0");
    let big = "123456789012345678901234567890123456789012345678901234567890";
    assert_eq!(number_text(big), big, "never rounded");
}

#[test]
fn octal_and_hexadecimal_become_exact_decimals() {
    assert_eq!(number_text("0o17"), "15");
    assert_eq!(number_text("0x1F"), "31");
    assert_eq!(number_text("0xff"), "255");
    assert_eq!(
        number_text("0xffffffffffffffffffffffffffffffff"),
        u128::MAX.to_string()
    );
    // Not core schema integers: strings.
    for text in [
        "0x", "0o", "0o8", "-0x1", "+0o7", "0X1F", "0b101", "1_000", "12:30",
    ] {
        assert_eq!(value(text), json!(text), "{text}");
    }
}

#[test]
fn hexadecimal_beyond_128_bits_is_refused() {
    assert_eq!(
        refusal("a: 0x1ffffffffffffffffffffffffffffffff\n"),
        "a: 0x1ffffffffffffffffffffffffffffffff is too large: hexadecimal and octal numbers must fit in 128 bits (line 2)"
    );
}

#[test]
fn floats_keep_their_digits() {
    assert_eq!(number_text("1.50"), "1.50");
    assert_eq!(number_text("1."), "1.0");
    assert_eq!(number_text(".5"), "0.5");
    assert_eq!(number_text("-.5"), "-0.5");
    assert_eq!(number_text("+.5"), "0.5");
    assert_eq!(number_text("007.25"), "7.25");
    assert_eq!(
        number_text("0.1000000000000000000000000001"),
        "0.1000000000000000000000000001"
    );
    let value = value("2.5e3");
    assert_eq!(value.as_f64(), Some(2500.0));
    assert_eq!(self::value("-1.e-3").as_f64(), Some(-0.001));
    assert_eq!(self::value("1E+05").as_f64(), Some(100000.0));
    for text in [".", "1.2.3", "1e", "e5", ".e5", "1e5.0", "--1", "+-1", "1,5"] {
        assert_eq!(self::value(text), json!(text), "{text}");
    }
}

#[test]
fn infinity_and_nan_are_refused() {
    for word in [".inf", "-.inf", "+.Inf", ".INF", ".nan", ".NaN", ".NAN"] {
        assert_eq!(
            refusal(&format!("a: {word}\n")),
            format!("a: {word} is not a finite number; JSON has no such value (line 2)")
        );
    }
    assert_eq!(value(".Nan"), json!(".Nan"), "not a core schema spelling");
}

#[test]
fn numbers_beyond_a_double_are_refused() {
    assert_eq!(
        refusal("a: 1e400\n"),
        "a: 1e400 is out of range: a number must fit in a 64-bit floating point value (line 2)"
    );
}

#[test]
fn quoted_and_block_scalars_are_strings() {
    assert_eq!(value("\"17\""), json!("17"));
    assert_eq!(value("'true'"), json!("true"));
    assert_eq!(value("''"), json!(""));
    assert_eq!(value("\"null\""), json!("null"));
    assert_eq!(frontmatter("a: |\n  17\n")["a"], json!("17\n"));
    assert_eq!(frontmatter("a: >-\n  one\n  two\n")["a"], json!("one two"));
}

#[test]
fn mappings_keep_key_order_and_lists_nest() {
    let parsed = frontmatter("z: 1\na: [x, {k: v}]\nm:\n  - 1\n  - - 2\n");
    assert_eq!(parsed, json!({"z": 1, "a": ["x", {"k": "v"}], "m": [1, [2]]}));
    let keys: Vec<&String> = parsed.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["z", "a", "m"]);
}

#[test]
fn core_tags_are_honoured() {
    assert_eq!(value("!!str 17"), json!("17"));
    assert_eq!(value("!!str"), json!(""));
    assert_eq!(value("!!int \"17\""), json!(17));
    assert_eq!(value("!!int 0x10"), json!(16));
    assert_eq!(value("!!float 2.5").as_f64(), Some(2.5));
    assert_eq!(number_text("!!float 2"), "2");
    assert_eq!(value("!!bool \"true\""), json!(true));
    assert_eq!(value("!!null ''"), Value::Null);
    assert_eq!(value("!!map {b: 1}"), json!({"b": 1}));
    assert_eq!(value("!!seq [1]"), json!([1]));
    assert_eq!(value("!<tag:yaml.org,2002:str> 5"), json!("5"));
}

#[test]
fn a_value_that_does_not_fit_its_tag_is_refused() {
    assert_eq!(
        refusal("a: !!int 1.5\n"),
        "a: \"1.5\" is not a valid !!int (line 2)"
    );
    assert_eq!(
        refusal("a: !!int abc\n"),
        "a: \"abc\" is not a valid !!int (line 2)"
    );
    assert_eq!(
        refusal("a: !!float 0x10\n"),
        "a: \"0x10\" is not a valid !!float (line 2)"
    );
    assert_eq!(
        refusal("a: !!bool yes\n"),
        "a: \"yes\" is not a valid !!bool (line 2)"
    );
    assert_eq!(
        refusal("a: !!null 0\n"),
        "a: \"0\" is not a valid !!null (line 2)"
    );
    assert_eq!(
        refusal("a: !!float .nan\n"),
        "a: .nan is not a finite number; JSON has no such value (line 2)"
    );
    assert_eq!(
        refusal("a: !!map x\n"),
        "a: the tag !!map cannot be put on a scalar (line 2)"
    );
    assert_eq!(
        refusal("a: !!seq {}\n"),
        "a: the tag !!seq cannot be put on a mapping (line 2)"
    );
    assert_eq!(
        refusal("a: !!str []\n"),
        "a: the tag !!str cannot be put on a list (line 2)"
    );
}

#[test]
fn other_tags_are_refused_by_name() {
    let refused = |tag: &str| {
        format!(
            "a: the tag {tag} is not allowed; only the core tags !!str, !!int, !!float, !!bool, !!null, !!map and !!seq are (line 2)"
        )
    };
    assert_eq!(refusal("a: !!binary aGVsbG8=\n"), refused("!!binary"));
    assert_eq!(refusal("a: !!timestamp 2001-12-14\n"), refused("!!timestamp"));
    assert_eq!(refusal("a: !custom x\n"), refused("!custom"));
    assert_eq!(refusal("a: !custom [x]\n"), refused("!custom"));
    assert_eq!(refusal("a: ! x\n"), refused("!"));
    assert_eq!(
        refusal("a: !<tag:example.com,2000:x> x\n"),
        refused("!<tag:example.com,2000:x>")
    );
}

#[test]
fn keys_must_be_strings() {
    assert_eq!(
        refusal("1: x\n"),
        "mapping key 1 is a number; keys must be strings, so quote it: \"1\" (line 2)"
    );
    assert_eq!(
        refusal("a: b\ntrue: x\n"),
        "mapping key true is a boolean; keys must be strings, so quote it: \"true\" (line 3)"
    );
    assert_eq!(
        refusal("steps:\n  - 017: x\n"),
        "steps[0]: mapping key 17 is a number; keys must be strings, so quote it: \"17\" (line 3)"
    );
    assert_eq!(
        refusal("null: x\n"),
        "a mapping key is empty or null; keys must be strings (line 2)"
    );
    assert_eq!(
        refusal(": x\n"),
        "a mapping key is empty or null; keys must be strings (line 2)"
    );
    assert_eq!(
        refusal("? [a]\n: x\n"),
        "a mapping key is a list; keys must be strings (line 2)"
    );
    assert_eq!(
        refusal("a:\n  ? {b: c}\n  : x\n"),
        "a: a mapping key is a mapping; keys must be strings (line 3)"
    );
    assert_eq!(
        refusal("!!int 5: x\n"),
        "mapping key 5 is a number; keys must be strings, so quote it: \"5\" (line 2)"
    );
    // Quoted or tagged as strings, the same keys are fine.
    assert_eq!(
        frontmatter("\"1\": x\n'true': y\n!!str 2: z\n"),
        json!({"1": "x", "true": "y", "2": "z"})
    );
}

#[test]
fn duplicate_keys_are_refused_with_the_mapping_path() {
    assert_eq!(refusal("a: 1\nb: 2\na: 3\n"), "duplicate key \"a\" (line 4)");
    let steps =
        "name: x\nsteps:\n  - id: one\n    agent: Do it.\n  - id: two\n    agent: Do it.\n    id: three\n";
    assert_eq!(refusal(steps), "steps[1]: duplicate key \"id\" (line 8)");
    assert_eq!(
        refusal("a: {b: {c: 1, c: 2}}\n"),
        "a.b: duplicate key \"c\" (line 2)"
    );
    assert_eq!(
        refusal("a: 1\n\"a\": 2\n"),
        "duplicate key \"a\" (line 3)",
        "quoting makes no difference"
    );
}

#[test]
fn anchors_and_aliases_are_expanded() {
    let parsed = frontmatter("base: &b {x: 1, y: [2]}\ncopy: *b\nkey: &k name\n*k : 3\n");
    assert_eq!(
        parsed,
        json!({"base": {"x": 1, "y": [2]}, "copy": {"x": 1, "y": [2]}, "key": "name", "name": 3})
    );
    assert_eq!(
        refusal("a: &x [*x]\n"),
        "a[0]: an alias refers to a node that contains it (line 2)"
    );
    assert_eq!(
        refusal("a: *nowhere\n"),
        "frontmatter line 2 column 4: while parsing node, found unknown anchor"
    );
}

#[test]
fn merge_keys_are_plain_keys_in_yaml_1_2() {
    assert_eq!(
        frontmatter("a: &x {b: 1}\nc:\n  <<: *x\n"),
        json!({"a": {"b": 1}, "c": {"<<": {"b": 1}}})
    );
}

#[test]
fn only_one_yaml_document() {
    assert_eq!(
        refusal("a: 1\n--- b\n"),
        "the frontmatter must hold one YAML document; a second one starts on line 3"
    );
    assert_eq!(
        refusal("a: 1\n...\nb: 2\n"),
        "the frontmatter must hold one YAML document; a second one starts on line 4"
    );
    assert_eq!(frontmatter("a: 1\n...\n"), json!({"a": 1}));
}

#[test]
fn syntax_errors_name_the_file_line_and_column() {
    assert_eq!(
        refusal("a: 1\nb: c: d\n"),
        "frontmatter line 3 column 5: mapping values are not allowed in this context"
    );
    assert_eq!(
        refusal("a: 'open\n"),
        "frontmatter line 2 column 4: while scanning a quoted scalar, found unexpected end of stream"
    );
    assert_eq!(
        refusal("a: [1, 2\n"),
        "frontmatter line 3 column 1: while parsing a flow sequence, expected ',' or ']'"
    );
    // A BOM does not shift the lines.
    let issues = parse_document("\u{feff}---\na: 1\nb: c: d\n---\n".as_bytes()).unwrap_err();
    assert_eq!(
        issues[0].message,
        "frontmatter line 3 column 5: mapping values are not allowed in this context"
    );
}

#[test]
fn crlf_frontmatter_reads_like_lf() {
    let crlf = parse_document(b"---\r\na: 1\r\nb: |\r\n  x\r\n  y\r\n---\r\n").unwrap();
    assert_eq!(crlf.frontmatter, json!({"a": 1, "b": "x\ny\n"}));
}

#[test]
fn a_duplicate_step_key_is_one_issue_at_the_step() {
    let source = "---\nname: x\ndescription: y\nsteps:\n  - id: a\n    agent: |\n      Do it.\n    due: 2d\n    id: b\n---\n";
    assert_eq!(
        parse_document(source.as_bytes()).unwrap_err(),
        vec![Issue::new("steps[0]", "duplicate key \"id\" (line 9)")]
    );
    let crlf = source.replace('\n', "\r\n");
    assert_eq!(
        parse_document(crlf.as_bytes()).unwrap_err(),
        vec![Issue::new("steps[0]", "duplicate key \"id\" (line 9)")],
        "CRLF counts lines the same"
    );
}
