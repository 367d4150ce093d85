//! Every conformance fixture parses, and its body is kept byte for byte (spec §2).

use agentprocess_process::parse_document;
use std::path::PathBuf;

/// The conformance fixtures: `AGENTPROCESS_FIXTURES`, or the shared folder beside the checkout.
fn fixtures_dir() -> PathBuf {
    match std::env::var_os("AGENTPROCESS_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/agentprocess/fixtures"),
    }
}

fn fixtures() -> Vec<(String, Vec<u8>)> {
    let dir = fixtures_dir();
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path().join("PROCESS.md");
        if path.is_file() {
            let name = path
                .parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            found.push((name, std::fs::read(&path).unwrap()));
        }
    }
    found.sort();
    found
}

#[test]
fn all_twelve_fixtures_parse() {
    let fixtures = fixtures();
    assert_eq!(fixtures.len(), 12, "expected the twelve conformance fixtures");
    for (name, bytes) in fixtures {
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
