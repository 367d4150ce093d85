//! Every process document parses, and its body is kept byte for byte (spec §2): our examples
//! always, and the protocol's twelve published conformance fixtures when `AGENTPROCESS_OFFICIAL`
//! names them.

use agentprocess_process::parse_document;
use std::path::PathBuf;

/// Parses each `(name, path)` and checks the frontmatter names the process and the body is the
/// file's tail, starting after the closing fence.
fn assert_parses_with_body_kept(documents: Vec<(String, PathBuf)>) {
    for (name, path) in documents {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let document = parse_document(&bytes).unwrap_or_else(|issues| panic!("{name}: {issues:?}"));
        let frontmatter = document.frontmatter.as_object().expect("a mapping");
        assert_eq!(frontmatter["name"], name.as_str(), "{name}");
        assert!(frontmatter["steps"].is_array(), "{name}");
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.ends_with(&document.body),
            "{name}: body is a suffix of the file"
        );
        assert!(
            document.body.starts_with('\n') || document.body.starts_with('#'),
            "{name}"
        );
    }
}

#[test]
fn every_example_parses() {
    let examples = agentprocess_testkit::examples();
    assert!(
        examples.len() >= 12,
        "at least twelve examples, found {}",
        examples.len()
    );
    assert_parses_with_body_kept(examples);
}

#[test]
fn all_twelve_official_fixtures_parse() {
    let Some(fixtures) =
        agentprocess_testkit::official_fixtures_or_skip("all_twelve_official_fixtures_parse")
    else {
        return;
    };
    assert_eq!(fixtures.len(), 12, "expected the twelve conformance fixtures");
    assert_parses_with_body_kept(fixtures);
}
