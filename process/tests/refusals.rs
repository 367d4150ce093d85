//! The refusal corpus: every rule of spec §2 and of the profiles, one small document each.
//!
//! `tests/corpus/refused/<case>/` holds a `PROCESS.md`, the exact expected issues in
//! `issues.txt` (one `path: message` per line, in order), and optionally `offer.txt` naming what
//! the server offers (`parallel check upload send_event`; absent means everything).
//! `tests/corpus/accepted/<case>/PROCESS.md` and our example processes must publish;
//! an accepted case's `warnings.txt` holds its exact warnings (absent means none).
//!
//! After a deliberate change of wording, `AGENTPROCESS_BLESS=1 cargo test --test refusals`
//! rewrites every `issues.txt` with the actual issues; review the diff before committing.

use agentprocess_process::{Offer, load, warnings};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn corpus(kind: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(kind);
    let mut cases: Vec<PathBuf> = fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("reading {}: {e}", root.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .filter(|path| path.join("PROCESS.md").is_file())
        .collect();
    cases.sort();
    cases
}

/// Our example process `name` (`examples/NAME/PROCESS.md`).
fn example(name: &str) -> Vec<u8> {
    let path = agentprocess_testkit::example(name);
    fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Reads `offer.txt`: the words `parallel`, `check`, `upload`, `send_event`; absent is everything.
fn offer(case: &Path) -> Offer {
    let Ok(text) = fs::read_to_string(case.join("offer.txt")) else {
        return Offer::EVERYTHING;
    };
    let mut offer = Offer::CORE;
    for word in text.split_whitespace() {
        match word {
            "parallel" => offer.parallel = true,
            "check" => offer.check = true,
            "upload" => offer.upload = true,
            "send_event" => offer.send_event = true,
            other => panic!("{}: unknown offer word {other:?}", case.display()),
        }
    }
    offer
}

fn issue_lines(bytes: &[u8], offer: &Offer) -> Option<Vec<String>> {
    match load(bytes, offer) {
        Ok(_) => None,
        Err(issues) => Some(issues.iter().map(ToString::to_string).collect()),
    }
}

/// Spec §2: "A server MUST refuse a file that breaks any of these", reporting every issue.
#[test]
fn spec_2_every_refused_case_reports_exactly_its_issues() {
    let cases = corpus("refused");
    let mut failures = Vec::new();
    for case in &cases {
        let bytes = fs::read(case.join("PROCESS.md")).expect("PROCESS.md");
        let expected: Vec<String> = fs::read_to_string(case.join("issues.txt"))
            .unwrap_or_default()
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(str::to_string)
            .collect();
        let name = case.file_name().unwrap_or_default().to_string_lossy();
        let actual = issue_lines(&bytes, &offer(case));
        if std::env::var_os("AGENTPROCESS_BLESS").is_some() {
            let mut text = actual.clone().unwrap_or_default().join("\n");
            text.push('\n');
            fs::write(case.join("issues.txt"), text).expect("writing issues.txt");
            continue;
        }
        match actual {
            None => failures.push(format!(
                "{name}: accepted, expected:\n  {}",
                expected.join("\n  ")
            )),
            Some(actual) if actual != expected => failures.push(format!(
                "{name}:\n expected:\n  {}\n actual:\n  {}",
                expected.join("\n  "),
                actual.join("\n  ")
            )),
            Some(_) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Spec §2: the corpus exercises at least sixty different refusals. Every case is refused, and
/// the rules its issues state (messages with names and numbers masked) are counted once each.
#[test]
fn spec_2_the_corpus_covers_at_least_sixty_refusals() {
    let mut rules = BTreeSet::new();
    for case in corpus("refused") {
        let bytes = fs::read(case.join("PROCESS.md")).expect("PROCESS.md");
        let Err(issues) = load(&bytes, &offer(&case)) else {
            panic!("{} is accepted", case.display());
        };
        rules.extend(issues.iter().map(|issue| rule_of(&issue.message)));
    }
    assert!(
        rules.len() >= 60,
        "only {} different refusals: {rules:#?}",
        rules.len()
    );
}

/// The rule a message states: its quoted names and its numbers masked.
fn rule_of(message: &str) -> String {
    let mut rule = String::new();
    let mut quoted = false;
    for c in message.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                if quoted {
                    rule.push_str("\"…\"");
                }
            }
            _ if quoted => {}
            '0'..='9' => {
                if !rule.ends_with('#') {
                    rule.push('#');
                }
            }
            c => rule.push(c),
        }
    }
    rule
}

/// Spec §2.2 (`on_timeout` needs no `timeout`) and §2.3 (`items` is a field object): what the
/// specification allows publishes, with a warning where it can mean nothing.
#[test]
fn spec_2_accepted_edge_cases_publish_with_exactly_their_warnings() {
    let mut warned = 0;
    for case in corpus("accepted") {
        let bytes = fs::read(case.join("PROCESS.md")).expect("PROCESS.md");
        let loaded = load(&bytes, &offer(&case)).unwrap_or_else(|issues| {
            let lines: Vec<String> = issues.iter().map(ToString::to_string).collect();
            panic!("{} refused:\n  {}", case.display(), lines.join("\n  "))
        });
        let actual: Vec<String> = warnings(&loaded.process)
            .iter()
            .map(ToString::to_string)
            .collect();
        let expected: Vec<String> = fs::read_to_string(case.join("warnings.txt"))
            .unwrap_or_default()
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(str::to_string)
            .collect();
        assert_eq!(actual, expected, "{}", case.display());
        warned += usize::from(!expected.is_empty());
    }
    assert!(warned >= 2, "the warning cases are in the corpus");
}

#[test]
fn spec_2_every_example_publishes_with_everything_offered() {
    let examples = agentprocess_testkit::examples();
    assert!(
        examples.len() >= 12,
        "at least twelve examples, found {}",
        examples.len()
    );
    for (name, _) in examples {
        if let Some(issues) = issue_lines(&example(&name), &Offer::EVERYTHING) {
            panic!("{name} refused:\n  {}", issues.join("\n  "));
        }
    }
}

#[test]
fn spec_2_every_official_fixture_publishes_with_everything_offered() {
    let Some(fixtures) = agentprocess_testkit::official_fixtures_or_skip(
        "spec_2_every_official_fixture_publishes_with_everything_offered",
    ) else {
        return;
    };
    for (name, path) in fixtures {
        let bytes = fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        if let Some(issues) = issue_lines(&bytes, &Offer::EVERYTHING) {
            panic!("{name} refused:\n  {}", issues.join("\n  "));
        }
    }
}

/// parallel-1 preamble: "A server without the profile refuses such a process at publication."
#[test]
fn parallel_1_product_launch_needs_the_profile() {
    let offer = Offer {
        parallel: false,
        ..Offer::EVERYTHING
    };
    assert_eq!(
        issue_lines(&example("product-launch"), &offer),
        Some(vec![
            "steps[1].parallel: needs the parallel-1 profile, which this server does not offer".to_string()
        ])
    );
}

/// check-1 preamble: "A server without the profile ... refuses such a process at publication."
#[test]
fn check_1_partner_screening_needs_the_profile() {
    let offer = Offer {
        check: false,
        ..Offer::EVERYTHING
    };
    assert_eq!(
        issue_lines(&example("partner-screening"), &offer),
        Some(vec![
            "steps[0].check: needs the check-1 profile, which this server does not offer".to_string()
        ])
    );
}

/// Spec §4.2: "A server MUST refuse to publish a process that needs a tool it does not offer."
#[test]
fn spec_4_2_file_evidence_and_events_need_their_tools() {
    let no_upload = Offer {
        upload: false,
        ..Offer::EVERYTHING
    };
    let issues = issue_lines(&example("policy-update"), &no_upload).expect("refused");
    assert_eq!(
        issues,
        [
            "steps[0].evidence: file evidence needs the upload tool, which this server does not offer",
            "steps[3].evidence: file evidence needs the upload tool, which this server does not offer",
        ]
    );
    let no_events = Offer {
        send_event: false,
        ..Offer::EVERYTHING
    };
    assert_eq!(
        issue_lines(&example("account-closure"), &no_events),
        Some(vec![
            "steps[4].wait_for: needs the send_event tool, which this server does not offer".to_string()
        ])
    );
}
