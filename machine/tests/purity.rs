//! The machine is pure by construction: its manifest names no dependency that does IO, reads a
//! clock or draws randomness (tokio, the store, object storage, getrandom), so adding one is a
//! failing test and not only a review comment.

use std::collections::BTreeSet;

/// Every dependency the machine, and the vocabulary it shares with the other roles, may have: the
/// ids, the vocabulary, the process model and data-only crates.
const ALLOWED: [&str; 7] = [
    "agentprocess-ids",
    "agentprocess-process",
    "agentprocess-vocab",
    "indexmap",
    "serde",
    "serde_json",
    "sha2",
];

#[test]
fn the_machine_depends_on_nothing_that_does_io() {
    for manifest in [
        include_str!("../Cargo.toml"),
        include_str!("../../vocab/Cargo.toml"),
    ] {
        check_pure(manifest);
    }
}

fn check_pure(manifest: &str) {
    let mut section = "";
    let mut dependencies = BTreeSet::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
            continue;
        }
        let is_dependency_table = section == "[dependencies]" || section.starts_with("[target.");
        if is_dependency_table && let Some((name, _)) = line.split_once('=') {
            dependencies.insert(name.trim().trim_end_matches(".workspace").to_string());
        }
    }
    assert!(dependencies.contains("agentprocess-ids"), "{dependencies:?}");
    let extra: Vec<&String> = dependencies
        .iter()
        .filter(|name| !ALLOWED.contains(&name.as_str()))
        .collect();
    assert!(extra.is_empty(), "the machine must stay pure; remove {extra:?}");
}
