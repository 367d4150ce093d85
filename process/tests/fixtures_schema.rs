//! Each conformance fixture's parsed frontmatter matches the protocol's process-document schema.

use agentprocess_process::{Offer, load};
use agentprocess_testkit::{assert_matches_schema, fixtures};

#[test]
fn every_fixture_frontmatter_matches_the_process_document_schema() {
    for (name, path) in fixtures() {
        let bytes = std::fs::read(&path).unwrap();
        let loaded =
            load(&bytes, &Offer::EVERYTHING).unwrap_or_else(|issues| panic!("{name} refused: {issues:?}"));
        assert_eq!(loaded.process.name.as_str(), name);
        assert_matches_schema("process-document.json", &loaded.frontmatter);
    }
}
