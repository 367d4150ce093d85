//! Fuzzes the parser alone and checks what holds for every document it accepts.

#![no_main]

use agentprocess_process::parse::MAX_DOCUMENT_BYTES;
use agentprocess_process::{content_hash, parse_document};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(document) = parse_document(data) else {
        return;
    };
    assert!(document.frontmatter.is_object(), "the frontmatter is a mapping");
    assert!(
        data.ends_with(document.body.as_bytes()),
        "the body is the end of the input, byte for byte"
    );
    let hash = content_hash(&document.frontmatter, &document.body);
    assert_eq!(hash, content_hash(&document.frontmatter, &document.body));
    assert_eq!(hash.to_hex().parse(), Ok(hash));

    // The parsed frontmatter written back as JSON (which is YAML) parses to the same value, so
    // number normalization and string handling are stable. Aliases can expand it past the size
    // limit; those are skipped.
    let json = serde_json::to_string(&document.frontmatter).expect("a Value always serializes");
    let source = format!("---\n{json}\n---\n");
    if source.len() > MAX_DOCUMENT_BYTES {
        return;
    }
    let shown: String = json.chars().take(2000).collect();
    let again = parse_document(source.as_bytes())
        .unwrap_or_else(|issues| panic!("re-parsing {shown} failed: {issues:?}"));
    assert_eq!(again.frontmatter, document.frontmatter, "re-parsing {shown}");
});
