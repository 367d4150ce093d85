//! How fast hostile and very large frontmatter is handled: the inputs of `tests/parse_limits.rs`
//! and of `tests/validate_scale.rs`. Prints figures; asserts nothing about time.
//!
//! Run with `cargo bench -p agentprocess-process --bench parse_limits`; `PARSE_BENCH_RUNS` sets
//! how many times each input is handled (default 10). Each line gives the fastest and the median
//! run.

use agentprocess_process::{Offer, parse_document, validate};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn main() {
    let runs: usize = std::env::var("PARSE_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10)
        .max(1);
    println!("{runs} runs per input");
    let laughs = frontmatter(&billion_laughs(9));
    measure("billion laughs, 9 levels (refused)", runs, || {
        assert!(parse_document(laughs.as_bytes()).is_err());
    });
    let aliased = frontmatter(&format!(
        "s: &s {}\nt: [{}]\n",
        "x".repeat(512 * 1024),
        ["*s"; 10].join(", ")
    ));
    measure("512 KiB string aliased 10 times (refused)", runs, || {
        assert!(parse_document(aliased.as_bytes()).is_err());
    });
    let deep = frontmatter(&format!("a: {}\n", "[".repeat(500_000)));
    measure("500,000 open brackets (refused)", runs, || {
        assert!(parse_document(deep.as_bytes()).is_err());
    });
    let long_key = format!(
        "---\n? {}\n: [{}]\n---\n",
        "k".repeat(400_000),
        ["1"; 90_000].join(",")
    );
    measure("400,000-byte key over 90,000 values (parsed)", runs, || {
        assert!(parse_document(long_key.as_bytes()).is_ok());
    });
    let cycle = long_chain(20_000);
    measure("a cycle through 20,000 steps (validated)", runs, || {
        assert!(validate(&cycle, &Offer::EVERYTHING).is_err());
    });
    let codes = long_one_of();
    measure(
        "one_of of 30,001 numbers, one listed twice (validated)",
        runs,
        || {
            assert!(validate(&codes, &Offer::EVERYTHING).is_err());
        },
    );
}

fn frontmatter(yaml: &str) -> String {
    format!("---\n{yaml}---\n")
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

fn long_chain(count: usize) -> Value {
    let mut steps: Vec<Value> = (0..count)
        .map(|i| json!({ "id": format!("s{i}"), "agent": "Do the next part." }))
        .collect();
    steps[count - 1]["next"] = json!("s0");
    json!({ "name": "long", "description": "A long chain.", "steps": steps })
}

fn long_one_of() -> Value {
    let mut values: Vec<Value> = (0..30_000).map(|i| json!(i)).collect();
    values.push(serde_json::from_str("29999.000").expect("number"));
    json!({
        "name": "codes", "description": "Pick a code.",
        "inputs": { "code": { "type": "number", "one_of": values } },
        "steps": [ { "id": "done", "finish": "done" } ]
    })
}

/// Runs `work` `runs` times and prints the fastest and the median time.
fn measure(what: &str, runs: usize, mut work: impl FnMut()) {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            work();
            started.elapsed()
        })
        .collect();
    times.sort();
    println!(
        "{what}: fastest {:.1} ms, median {:.1} ms",
        times[0].as_secs_f64() * 1000.0,
        times[runs / 2].as_secs_f64() * 1000.0
    );
}
