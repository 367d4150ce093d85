//! Large documents validate without exhausting the stack: the parser allows 100,000 values. Their
//! speed is measured by `cargo bench -p agentprocess-process --bench parse_limits`.

use agentprocess_process::{Offer, validate};
use serde_json::{Value, json};

fn chain(count: usize, last_next: Option<&str>) -> Value {
    let mut steps: Vec<Value> = (0..count)
        .map(|i| json!({ "id": format!("s{i}"), "agent": "Do the next part." }))
        .collect();
    match last_next {
        Some(target) => steps[count - 1]["next"] = json!(target),
        None => steps.push(json!({ "id": "done", "finish": "done" })),
    }
    json!({ "name": "long", "description": "A long chain.", "steps": steps })
}

/// Spec §2.2: a long chain of steps validates, and a cycle through all of it is one issue.
#[test]
fn spec_2_2_a_long_chain_and_its_cycle() {
    assert!(validate(&chain(20_000, None), &Offer::EVERYTHING).is_ok());
    let issues = validate(&chain(20_000, Some("s0")), &Offer::EVERYTHING).expect_err("cycle");
    assert_eq!(issues.len(), 1);
    assert!(
        issues[0]
            .message
            .starts_with("cycle following next and on_timeout: s0 → s1 → ")
    );
}

/// Spec §2.3: a duplicate in a long `one_of` is found however far apart its copies are, and
/// written differently. How long that takes is measured by the `parse_limits` benchmark.
#[test]
fn spec_2_3_a_duplicate_in_a_long_one_of_is_found() {
    let mut values: Vec<Value> = (0..30_000).map(|i| json!(i)).collect();
    values.push(serde_json::from_str("29999.000").expect("number"));
    let frontmatter = json!({
        "name": "codes", "description": "Pick a code.",
        "inputs": { "code": { "type": "number", "one_of": values } },
        "steps": [ { "id": "done", "finish": "done" } ]
    });
    let issues = validate(&frontmatter, &Offer::EVERYTHING).expect_err("duplicate");
    assert_eq!(
        issues.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["inputs.code.one_of[30000]: 29999.000 is listed twice"]
    );
}
