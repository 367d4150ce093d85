//! Each process document's parsed frontmatter matches the process-document schema: our examples
//! always, and the protocol's published conformance fixtures when `AGENTPROCESS_OFFICIAL` names
//! them (then each value is also checked against the published schema).

use agentprocess_process::{Offer, load};
use agentprocess_testkit::assert_matches_schema;
use std::path::PathBuf;

fn assert_frontmatter_matches_schema(documents: Vec<(String, PathBuf)>) {
    for (name, path) in documents {
        let bytes = std::fs::read(&path).unwrap();
        let loaded =
            load(&bytes, &Offer::EVERYTHING).unwrap_or_else(|issues| panic!("{name} refused: {issues:?}"));
        assert_eq!(loaded.process.name.as_str(), name);
        assert_matches_schema("process-document.json", &loaded.frontmatter);
    }
}

#[test]
fn every_example_frontmatter_matches_the_process_document_schema() {
    let examples = agentprocess_testkit::examples();
    assert!(
        examples.len() >= 12,
        "at least twelve examples, found {}",
        examples.len()
    );
    assert_frontmatter_matches_schema(examples);
}

#[test]
fn every_official_fixture_frontmatter_matches_the_process_document_schema() {
    let Some(fixtures) = agentprocess_testkit::official_fixtures_or_skip(
        "every_official_fixture_frontmatter_matches_the_process_document_schema",
    ) else {
        return;
    };
    assert_frontmatter_matches_schema(fixtures);
}
