//! Hostile frontmatter is refused clearly, at the limit it breaks: alias bombs, deep nesting,
//! huge expansions. Each refusal names the line where the work stopped. How fast these inputs
//! are handled is measured by `cargo bench -p agentprocess-process --bench parse_limits`.

use agentprocess_process::parse::{MAX_DEPTH, MAX_EXPANDED_TEXT_BYTES, MAX_VALUES};
use agentprocess_process::{Document, Issue, parse_document};
use std::time::Duration;

/// Far longer than any of these inputs takes: only a hang fails on time.
const HANG_GUARD: Duration = Duration::from_secs(30);

/// Parses `source` on a thread of its own, failing the test if it does not finish in
/// [`HANG_GUARD`].
fn parse_guarded(source: String) -> Result<Document, Vec<Issue>> {
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(parse_document(source.as_bytes()));
    });
    result
        .recv_timeout(HANG_GUARD)
        .unwrap_or_else(|e| panic!("the parser did not finish within {HANG_GUARD:?}: {e}"))
}

/// The one issue of a refused frontmatter.
fn refusal(yaml: &str) -> String {
    match parse_guarded(format!("---\n{yaml}---\n")) {
        Ok(_) => panic!("accepted"),
        Err(issues) => {
            assert_eq!(issues.len(), 1, "{issues:?}");
            issues[0].to_string()
        }
    }
}

fn billion_laughs(levels: usize) -> String {
    let mut yaml = String::from("l0: &l0 \"lol\"\n");
    for level in 1..=levels {
        let previous = level - 1;
        let items = vec![format!("*l{previous}"); 10].join(", ");
        yaml.push_str(&format!("l{level}: &l{level} [{items}]\n"));
    }
    yaml
}

#[test]
fn a_billion_laughs_is_refused_at_the_first_level_over_the_limit() {
    // l5 (line 7) holds 10^5 values once expanded, which with the levels before passes
    // MAX_VALUES; l6 to l9 are never expanded.
    let issue = refusal(&billion_laughs(9));
    assert_eq!(
        issue,
        format!(
            "the frontmatter holds more than {MAX_VALUES} values once anchors and aliases are expanded (line 7)"
        )
    );
}

#[test]
fn a_few_levels_of_aliases_are_fine() {
    let source = format!("---\n{}---\n", billion_laughs(3));
    let document = parse_document(source.as_bytes()).unwrap();
    assert_eq!(document.frontmatter["l3"][9][9][9], "lol");
}

#[test]
fn a_long_string_aliased_many_times_is_refused() {
    let long = "x".repeat(512 * 1024);
    let aliases = ["*s"; 10].join(", ");
    // The copies pass MAX_EXPANDED_TEXT_BYTES on the line of the aliases, before the last ones.
    let issue = refusal(&format!("s: &s {long}\nt: [{aliases}]\n"));
    assert_eq!(
        issue,
        format!(
            "the frontmatter holds more than {MAX_EXPANDED_TEXT_BYTES} bytes of text once anchors and aliases are expanded (line 3)"
        )
    );
}

#[test]
fn too_many_plain_values_are_refused() {
    let items = vec!["1"; MAX_VALUES + 1].join(",");
    let issue = refusal(&format!("a: [{items}]\n"));
    assert_eq!(
        issue,
        format!(
            "the frontmatter holds more than {MAX_VALUES} values once anchors and aliases are expanded (line 2)"
        )
    );
}

#[test]
fn nesting_is_limited() {
    assert_eq!(MAX_DEPTH, 64);
    // The top-level mapping is level 1; 63 lists inside it reach the limit exactly.
    let deepest = format!("a: {}{}\n", "[".repeat(63), "]".repeat(63));
    assert!(parse_document(format!("---\n{deepest}---\n").as_bytes()).is_ok());
    let too_deep = format!("a: {}{}\n", "[".repeat(64), "]".repeat(64));
    let path = format!("a{}", "[0]".repeat(63));
    let issue = refusal(&too_deep);
    assert_eq!(
        issue,
        format!("{path}: the frontmatter nests lists and mappings more than 64 levels deep (line 2)")
    );
}

#[test]
fn very_deep_nesting_is_refused_without_recursion() {
    let yaml = format!("a: {}\n", "[".repeat(500_000));
    let issue = refusal(&yaml);
    // The YAML scanner meets its own nesting limit while looking ahead for a flow key, long
    // before the end of the line.
    assert_eq!(
        issue,
        "frontmatter line 2 column 259: the frontmatter nests lists and mappings more than 64 levels deep"
    );
}

#[test]
fn aliases_cannot_nest_past_the_limit() {
    let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
    let also_deep = format!("{}*d{}", "[".repeat(30), "]".repeat(30));
    let issue = refusal(&format!("d: &d {deep}\ne: {also_deep}\n"));
    let path = format!("e{}", "[0]".repeat(30));
    assert_eq!(
        issue,
        format!("{path}: the frontmatter nests lists and mappings more than 64 levels deep (line 3)")
    );
}

#[test]
fn a_long_key_over_many_values_parses() {
    let key = "k".repeat(400_000);
    let items = ["1"; 90_000].join(",");
    // An explicit key: YAML limits implicit ones to 1024 characters.
    let document = parse_guarded(format!("---\n? {key}\n: [{items}]\n---\n")).unwrap();
    assert_eq!(document.frontmatter[&key].as_array().map(Vec::len), Some(90_000));
}
