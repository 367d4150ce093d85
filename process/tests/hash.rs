//! Spec §6.5: the content hash is SHA-256 of RFC 8785 canonical frontmatter JSON, `\n`, the body.

use agentprocess_process::hash::canonical_json;
use agentprocess_process::{ContentHash, content_hash, parse_document};
use proptest::prelude::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn hash_of(source: &str) -> ContentHash {
    let document = parse_document(source.as_bytes()).unwrap_or_else(|issues| panic!("{issues:?}"));
    content_hash(&document.frontmatter, &document.body)
}

/// The partner-screening example's frontmatter as JSON, written out by hand from the file: what
/// any YAML 1.2 core-schema parser reads from it.
fn partner_screening_frontmatter() -> Value {
    json!({
        "name": "partner-screening",
        "description": "Screen a prospective partner against watch lists, have a model check the screening, and get the partnerships manager's approval.",
        "inputs": {
            "partnerName": "string",
            "dealSize": { "type": "number", "description": "Expected yearly revenue from the partnership in USD" }
        },
        "requires": { "systems": ["watchlist-screening"] },
        "steps": [
            {
                "id": "screen_partner",
                "agent": "Search partnerName in the watch-list screening system, on both the\nsanctions list and the adverse-media list. Attach the screening report.\nSet cleared to true only when neither list has a match. Choose\npartner_approval when cleared; otherwise turned_down.\n",
                "output": { "cleared": "boolean", "summary": "string" },
                "evidence": ["file"],
                "next": ["partner_approval", "turned_down"],
                "check": [
                    {
                        "ask": "Does the cleared value agree with the attached report?",
                        "pass": 0.9,
                        "fail": 0.5
                    },
                    {
                        "ask": "How does the summary read?",
                        "one_of": {
                            "decisive": "Gives the result and names both lists.",
                            "vague": "Hedges or leaves the result open.",
                            "unreadable": "Impossible to tell."
                        },
                        "pass": ["decisive"],
                        "unsure": ["unreadable"]
                    },
                    {
                        "ask": "How thorough is the screening?",
                        "levels": [
                            "No list is clearly searched.",
                            "One list is searched.",
                            "Both lists are searched, with the search terms given."
                        ],
                        "pass": 2,
                        "confidence": 0.8
                    }
                ]
            },
            {
                "id": "partner_approval",
                "person": "partnerships-manager",
                "approve": "Approve only when the partner is cleared and the deal is worth it.",
                "due": "2d",
                "on_reject": "screen_partner",
                "next": "accepted"
            },
            { "id": "turned_down", "finish": "declined" },
            { "id": "accepted", "finish": "partnered" }
        ]
    })
}

/// Spec §6.5, computed here without the library: SHA-256 (the `sha2` crate) over the reference
/// RFC 8785 implementation's canonical JSON of the frontmatter, one newline, then the body
/// exactly as the file has it after the closing `---` line. The library's hash, stable across
/// parses, agrees with it and with the value pinned once.
#[test]
fn an_example_hash_is_stable_and_agrees_with_an_independent_computation() {
    let bytes = std::fs::read(agentprocess_testkit::example("partner-screening")).unwrap();
    let document = parse_document(&bytes).unwrap();
    let first = content_hash(&document.frontmatter, &document.body);
    let again = parse_document(&bytes).unwrap();
    assert_eq!(first, content_hash(&again.frontmatter, &again.body));

    let text = std::str::from_utf8(&bytes).unwrap();
    let after_opening = text.strip_prefix("---\n").expect("the file opens with ---");
    let closing = after_opening
        .find("\n---\n")
        .expect("the frontmatter closes with ---");
    let body = &after_opening[closing + "\n---\n".len()..];
    let frontmatter = partner_screening_frontmatter();
    assert_eq!(
        document.frontmatter, frontmatter,
        "the parsed frontmatter is the file's"
    );
    let mut independent = Sha256::new();
    independent.update(serde_json_canonicalizer::to_vec(&frontmatter).unwrap());
    independent.update(b"\n");
    independent.update(body.as_bytes());
    let independent = ContentHash(independent.finalize().into());

    assert_eq!(first, independent, "the library's hash is the spec's");
    assert_eq!(
        independent.to_hex(),
        "b64ef77ddf8ebc033aad38bb2d741172b089e202c1efcec32545f4dc87218585",
        "the pinned hash"
    );
}

#[test]
fn one_byte_of_body_changes_the_hash() {
    let before = hash_of("---\nname: x\n---\nApprove it.\n");
    let after = hash_of("---\nname: x\n---\nApprove it!\n");
    assert_ne!(before, after);
    assert_ne!(
        hash_of("---\nname: x\n---\nbody\n"),
        hash_of("---\nname: x\n---\nbody\r\n")
    );
    assert_ne!(
        hash_of("---\nname: x\n---\nbody\n"),
        hash_of("---\nname: x\n---\nbody")
    );
}

#[test]
fn yaml_style_and_key_order_do_not_change_the_hash() {
    let block = "---\nname: demo\n# a comment\ninputs:\n  amount: number\n  note: { type: string, optional: true }\nsteps:\n  - id: one\n    agent: Do it.\n    due: 2d\n    limit: 017\n    ratio: 1.50\n---\nbody\n";
    let flow = "---\n{steps: [{limit: 17, due: \"2d\", ratio: 15e-1, agent: 'Do it.', id: one}],\n    inputs: {note: {optional: true, type: string}, amount: \"number\"}, name: \"demo\"}\n---\nbody\n";
    let indented = "---\nsteps:\n    -   id: one   # trailing comment\n        agent: >-\n            Do it.\n        due: !!str 2d\n        limit: 0x11\n        ratio: 1.5\nname: 'demo'\ninputs:\n        note:\n                type: string\n                optional: True\n        amount: number\n---\nbody\n";
    assert_eq!(hash_of(block), hash_of(flow));
    assert_eq!(hash_of(block), hash_of(indented));
}

#[test]
fn the_separator_is_one_newline() {
    let frontmatter = json!({"name": "x", "b": [1, "two"], "a": null});
    let body = "# Body\n";
    let canonical = canonical_json(&frontmatter);
    assert_eq!(canonical, br#"{"a":null,"b":[1,"two"],"name":"x"}"#);
    let mut by_hand = Sha256::new();
    by_hand.update(&canonical);
    by_hand.update(b"\n");
    by_hand.update(body.as_bytes());
    let expected: [u8; 32] = by_hand.finalize().into();
    assert_eq!(content_hash(&frontmatter, body), ContentHash(expected));
}

#[test]
fn numbers_canonicalize_as_ecmascript_doubles() {
    let parsed = parse_document(
        b"---\na: 1.50\nb: 1e3\nc: 123456789012345678901234567890\nd: 0.000001\ne: 1e-7\nf: -0\ng: 1e21\nh: 0x10\ni: 9007199254740993\n---\n",
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(canonical_json(&parsed.frontmatter)).unwrap(),
        r#"{"a":1.5,"b":1000,"c":1.2345678901234568e+29,"d":0.000001,"e":1e-7,"f":0,"g":1e+21,"h":16,"i":9007199254740992}"#
    );
}

#[test]
fn strings_and_keys_canonicalize_per_rfc_8785() {
    // RFC 8785 §3.2.3: keys sort by UTF-16 code units; §3.2.2.2: minimal string escapes.
    let value = json!({"\u{20ac}": 1, "\r": 2, "\u{1f600}": 3, "\u{fb33}": 4, "1": 5, "\u{80}": 6, "a\"\\\u{1f}/é": 7});
    assert_eq!(
        String::from_utf8(canonical_json(&value)).unwrap(),
        "{\"\\r\":2,\"1\":5,\"a\\\"\\\\\\u001f/é\":7,\"\u{80}\":6,\"\u{20ac}\":1,\"\u{1f600}\":3,\"\u{fb33}\":4}"
    );
}

#[test]
fn hex_round_trips() {
    let hash = hash_of("---\na: 1\n---\n");
    let hex = hash.to_hex();
    assert_eq!(hex.len(), 64);
    assert_eq!(hex, hex.to_lowercase());
    assert_eq!(hash.to_string(), hex);
    assert_eq!(hex.parse::<ContentHash>(), Ok(hash));
    assert_eq!(hex.to_uppercase().parse::<ContentHash>(), Ok(hash));
    assert_eq!(
        "abc".parse::<ContentHash>().unwrap_err().to_string(),
        "a content hash is 64 hex digits, not 3 characters"
    );
    let bad = format!("{}g", &hex[..63]);
    assert_eq!(
        bad.parse::<ContentHash>().unwrap_err().to_string(),
        "a content hash is hex digits only, found 'g'"
    );
    assert_eq!(
        ContentHash([0xab; 32]).to_string(),
        "abababababababababababababababababababababababababababababababab"
    );
}

/// Number texts as a document or a call may spell them: integers of any size, doubles in
/// exponent form, and decimals whose exponent may leave a double's range (no canonical form).
fn number_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:e}")),
        (any::<i32>(), 0u32..100_000, -400i32..400)
            .prop_map(|(whole, fraction, exponent)| format!("{whole}.{fraction}e{exponent}")),
        "[1-9][0-9]{15,40}",
    ]
}

/// Strings with what RFC 8785 escapes or sorts specially: quotes, backslashes, control
/// characters, DEL, and characters above the Basic Multilingual Plane.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[\\x00-\\x1f\"\\\\/a\\x7f\u{80}\u{e000}-\u{e010}\u{fb33}\u{1f600}-\u{1f610}]{0,6}",
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number_text().prop_map(|number| serde_json::from_str(&number).expect("a JSON number")),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

proptest! {
    /// Our one-pass canonical JSON writes exactly what the reference RFC 8785 implementation
    /// writes (stored fingerprints and content hashes depend on it), and has no canonical form
    /// (empty bytes) exactly when it has none.
    #[test]
    fn canonical_json_is_byte_for_byte_the_reference_implementation(value in json_value()) {
        let reference = serde_json_canonicalizer::to_vec(&value).unwrap_or_default();
        let ours = canonical_json(&value);
        prop_assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&reference));
    }
}
