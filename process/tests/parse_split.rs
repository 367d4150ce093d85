//! Spec §2: how a PROCESS.md is cut into frontmatter and body, and the document-level refusals.

use agentprocess_process::parse::MAX_DOCUMENT_BYTES;
use agentprocess_process::{Issue, parse_document};
use serde_json::json;

fn body(source: &[u8]) -> String {
    parse_document(source)
        .unwrap_or_else(|issues| panic!("{source:?}: {issues:?}"))
        .body
}

/// The one issue a refused document carries, rendered as the protocol renders it.
fn refusal(source: &[u8]) -> String {
    match parse_document(source) {
        Ok(document) => panic!("{source:?} was accepted: {document:?}"),
        Err(issues) => {
            assert_eq!(issues.len(), 1, "{issues:?}");
            issues[0].to_string()
        }
    }
}

#[test]
fn body_is_everything_after_the_closing_line() {
    assert_eq!(body(b"---\na: 1\n---\n# Title\n\nText.\n"), "# Title\n\nText.\n");
}

#[test]
fn body_keeps_crlf_line_endings() {
    let document =
        parse_document(b"---\r\nname: x\r\nlist:\r\n  - 1\r\n---\r\nline 1\r\nline 2\r\n").unwrap();
    assert_eq!(document.frontmatter, json!({"name": "x", "list": [1]}));
    assert_eq!(document.body, "line 1\r\nline 2\r\n");
}

#[test]
fn body_without_a_trailing_newline_is_kept_as_is() {
    assert_eq!(body(b"---\na: 1\n---\nlast line"), "last line");
}

#[test]
fn closing_line_without_a_newline_gives_an_empty_body() {
    assert_eq!(body(b"---\na: 1\n---"), "");
    assert_eq!(body(b"---\na: 1\n---\n"), "");
}

#[test]
fn dashes_inside_the_body_stay_in_the_body() {
    assert_eq!(
        body(b"---\na: 1\n---\nabove\n---\nbelow\n---\n"),
        "above\n---\nbelow\n---\n"
    );
}

#[test]
fn delimiter_lines_may_have_trailing_spaces_and_tabs() {
    assert_eq!(body(b"--- \t\na: 1\n---\t \nbody"), "body");
}

#[test]
fn leading_body_whitespace_is_kept() {
    assert_eq!(body(b"---\na: 1\n---\n\n  indented\n\n"), "\n  indented\n\n");
}

#[test]
fn a_bom_at_the_start_is_skipped() {
    let document = parse_document("\u{feff}---\na: 1\n---\nbody\u{feff}".as_bytes()).unwrap();
    assert_eq!(document.frontmatter, json!({"a": 1}));
    assert_eq!(document.body, "body\u{feff}", "only the leading BOM is skipped");
}

#[test]
fn a_document_must_open_with_dashes() {
    let expected = "the document must start with a `---` line opening the frontmatter";
    assert_eq!(refusal(b"name: x\n---\n"), expected);
    assert_eq!(refusal(b""), expected);
    assert_eq!(refusal(b"\n---\na: 1\n---\n"), expected);
    assert_eq!(refusal(b" ---\na: 1\n---\n"), expected);
    assert_eq!(refusal(b"----\na: 1\n---\n"), expected);
    assert_eq!(refusal(b"--- a: 1\n---\n"), expected);
}

#[test]
fn an_unclosed_frontmatter_is_refused() {
    let expected = "the frontmatter opened on line 1 is never closed: no `---` line follows it";
    assert_eq!(refusal(b"---\nname: x\n"), expected);
    assert_eq!(refusal(b"---"), expected);
    assert_eq!(refusal(b"---\n"), expected);
    assert_eq!(refusal(b"---\nname: x\n----\n"), expected);
    assert_eq!(refusal(b"---\nname: x\n ---\n"), expected);
}

#[test]
fn an_empty_frontmatter_is_refused() {
    let expected = "the frontmatter between the `---` lines is empty";
    assert_eq!(refusal(b"---\n---\nbody"), expected);
    assert_eq!(refusal(b"---\n\n   \n---\n"), expected);
    assert_eq!(refusal(b"---\n# only a comment\n---\n"), expected);
}

#[test]
fn a_frontmatter_that_is_not_a_mapping_is_refused() {
    let message =
        |kind: &str| format!("the frontmatter must be a YAML mapping of keys to values, not {kind}");
    assert_eq!(refusal(b"---\n- a\n- b\n---\n"), message("a list"));
    assert_eq!(refusal(b"---\njust words\n---\n"), message("a string"));
    assert_eq!(refusal(b"---\n42\n---\n"), message("a number"));
    assert_eq!(refusal(b"---\ntrue\n---\n"), message("a boolean"));
    assert_eq!(refusal(b"---\n~\n---\n"), message("null"));
}

#[test]
fn a_document_over_the_size_limit_is_refused() {
    assert_eq!(MAX_DOCUMENT_BYTES, 1024 * 1024);
    let mut source = b"---\na: 1\n---\n".to_vec();
    source.resize(MAX_DOCUMENT_BYTES, b'x');
    assert_eq!(body(&source).len(), MAX_DOCUMENT_BYTES - 13);
    source.push(b'x');
    assert_eq!(
        refusal(&source),
        "the document is 1048577 bytes; the limit is 1048576 bytes (1 MiB)"
    );
}

#[test]
fn invalid_utf8_is_refused_with_its_offset() {
    assert_eq!(
        refusal(b"---\nname: \xff\n---\n"),
        "the document is not valid UTF-8: invalid byte at offset 10"
    );
    assert_eq!(
        refusal(b"---\na: 1\n---\nbody \xc3("),
        "the document is not valid UTF-8: invalid byte at offset 18"
    );
}

#[test]
fn issues_about_the_whole_document_have_an_empty_path() {
    let issues = parse_document(b"no frontmatter").unwrap_err();
    assert_eq!(
        issues,
        vec![Issue::new(
            "",
            "the document must start with a `---` line opening the frontmatter"
        )]
    );
}
