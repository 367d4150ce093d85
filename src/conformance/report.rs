//! The runner's report: a table for people, JSON and JUnit XML for machines.

use super::{CheckResult, Outcome};
use serde_json::{Value, json};

/// Counts of each outcome.
pub fn counts(results: &[CheckResult]) -> (usize, usize, usize) {
    let passed = results.iter().filter(|r| r.outcome == Outcome::Passed).count();
    let failed = results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Failed(_)))
        .count();
    (passed, failed, results.len() - passed - failed)
}

/// The summary table, each failure's details after it.
pub fn table(results: &[CheckResult], server: &str, revision: &str, calls: u64) -> String {
    let width = results.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let mut out = format!("Conformance of {server} to core-2, over MCP {revision}\n\n");
    for result in results {
        let (mark, why) = match &result.outcome {
            Outcome::Passed => ("pass", String::new()),
            Outcome::Failed(_) => ("FAIL", String::new()),
            Outcome::NotRun(why) => ("not run", format!("  ({why})")),
        };
        out.push_str(&format!(
            "{mark:<8} {:<width$}  {}{why}\n",
            result.name, result.rule
        ));
    }
    let (passed, failed, not_run) = counts(results);
    out.push_str(&format!(
        "\n{passed} passed, {failed} failed, {not_run} not run; {calls} tool calls\n"
    ));
    for result in results {
        if let Outcome::Failed(details) = &result.outcome {
            out.push_str(&format!(
                "\nFAILED: {} ({})\n{}\n",
                result.name,
                result.rule,
                indent(details)
            ));
        }
    }
    out
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|line| format!("  {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every check as JSON: `{ server, passed, failed, notRun, checks: [{ name, rule, outcome, details, seconds }] }`.
pub fn json(results: &[CheckResult], server: &str) -> Value {
    let (passed, failed, not_run) = counts(results);
    let checks: Vec<Value> = results
        .iter()
        .map(|r| {
            let (outcome, details) = match &r.outcome {
                Outcome::Passed => ("passed", Value::Null),
                Outcome::Failed(d) => ("failed", json!(d)),
                Outcome::NotRun(d) => ("not_run", json!(d)),
            };
            json!({ "name": r.name, "rule": r.rule, "outcome": outcome, "details": details, "seconds": r.seconds })
        })
        .collect();
    json!({ "server": server, "version": "core-2", "passed": passed, "failed": failed, "notRun": not_run, "checks": checks })
}

/// JUnit XML: one test suite, a test case per check, `skipped` for a check not run.
pub fn junit(results: &[CheckResult], server: &str) -> String {
    let (_, failed, not_run) = counts(results);
    let total: f64 = results.iter().map(|r| r.seconds).sum();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"agentprocess conformance: {}\" tests=\"{}\" failures=\"{failed}\" skipped=\"{not_run}\" time=\"{total:.3}\">\n",
        xml(server),
        results.len()
    );
    for r in results {
        out.push_str(&format!(
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            xml(r.rule),
            xml(r.name),
            r.seconds
        ));
        match &r.outcome {
            Outcome::Passed => out.push_str("/>\n"),
            Outcome::Failed(d) => out.push_str(&format!(
                ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                xml(r.rule),
                xml(d)
            )),
            Outcome::NotRun(d) => out.push_str(&format!(
                ">\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                xml(d)
            )),
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results() -> Vec<CheckResult> {
        vec![
            CheckResult {
                name: "a",
                rule: "tools.md claim",
                outcome: Outcome::Passed,
                seconds: 0.5,
            },
            CheckResult {
                name: "b <&>",
                rule: "r",
                outcome: Outcome::Failed("call: x\nanswer: \"y\"".into()),
                seconds: 1.0,
            },
            CheckResult {
                name: "c",
                rule: "r",
                outcome: Outcome::NotRun("no clock".into()),
                seconds: 0.0,
            },
        ]
    }

    #[test]
    fn the_table_counts_and_details_every_failure() {
        let table = table(&results(), "http://s", "2025-11-25", 9);
        assert!(
            table.contains("1 passed, 1 failed, 1 not run; 9 tool calls"),
            "{table}"
        );
        assert!(
            table.contains("FAILED: b <&> (r)\n  call: x\n  answer: \"y\""),
            "{table}"
        );
        assert!(table.contains("not run  c"), "{table}");
    }

    #[test]
    fn junit_escapes_and_marks_failures_and_skips() {
        let xml = junit(&results(), "http://s");
        assert!(xml.contains("tests=\"3\" failures=\"1\" skipped=\"1\""), "{xml}");
        assert!(xml.contains("name=\"b &lt;&amp;&gt;\""), "{xml}");
        assert!(xml.contains("<skipped message=\"no clock\"/>"), "{xml}");
        assert!(xml.contains("answer: &quot;y&quot;</failure>"), "{xml}");
    }

    #[test]
    fn json_lists_every_check_with_its_outcome() {
        let json = json(&results(), "http://s");
        assert_eq!(json["failed"], 1);
        assert_eq!(json["checks"][2]["outcome"], "not_run");
        assert_eq!(json["checks"][1]["details"], "call: x\nanswer: \"y\"");
    }
}
