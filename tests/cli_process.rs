//! `agentprocess process check|hash|map` run as a real process against our example processes
//! (`examples/`), and `check` against the protocol's published fixtures when
//! `AGENTPROCESS_OFFICIAL` names them.

use agentprocess_testkit::{example, examples, official_fixtures_or_skip};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn agentprocess(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentprocess"))
        .args(args)
        .output()
        .expect("run agentprocess")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("utf-8 stdout")
}

/// The folder of our example process `name` (`examples/NAME`).
fn example_folder(name: &str) -> String {
    example(name).parent().unwrap().display().to_string()
}

/// Copies an example's PROCESS.md into a fresh folder with the given name.
fn copy_into_folder(name: &str, folder_name: &str) -> (tempfile::TempDir, String) {
    let temp = tempfile::tempdir().unwrap();
    let folder = temp.path().join(folder_name);
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(example(name), folder.join("PROCESS.md")).unwrap();
    (temp, folder.display().to_string())
}

/// Runs `process check` on every folder and asserts each is reported valid, with exit 0.
fn assert_all_valid(folders: &[String]) {
    let mut args = vec!["process", "check"];
    args.extend(folders.iter().map(String::as_str));
    let output = agentprocess(&args);
    assert_eq!(output.status.code(), Some(0), "stdout:\n{}", stdout(&output));
    assert_eq!(
        stdout(&output)
            .lines()
            .filter(|l| l.contains(": valid ("))
            .count(),
        folders.len(),
        "stdout:\n{}",
        stdout(&output)
    );
}

#[test]
fn every_example_passes_check_when_both_profiles_are_offered() {
    let folders: Vec<String> = examples().iter().map(|(name, _)| example_folder(name)).collect();
    assert_eq!(folders.len(), 14, "the fourteen example processes");
    assert_all_valid(&folders);
}

#[test]
fn every_official_fixture_passes_check_when_both_profiles_are_offered() {
    let Some(fixtures) =
        official_fixtures_or_skip("every_official_fixture_passes_check_when_both_profiles_are_offered")
    else {
        return;
    };
    let folders: Vec<String> = fixtures
        .iter()
        .map(|(_, path)| path.parent().unwrap().display().to_string())
        .collect();
    assert_all_valid(&folders);
}

#[test]
fn json_output_has_one_object_per_input_with_the_documented_fields() {
    let output = agentprocess(&[
        "process",
        "check",
        "--json",
        &example_folder("purchase-request"),
        &example_folder("partner-screening"),
    ]);
    assert_eq!(output.status.code(), Some(0));
    let objects: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object a line"))
        .collect();
    assert_eq!(objects.len(), 2);
    let first = objects[0].as_object().unwrap();
    let mut keys: Vec<&str> = first.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        ["hash", "issues", "name", "path", "requires", "valid", "warnings"]
    );
    assert_eq!(first["name"], "purchase-request");
    assert_eq!(first["valid"], true);
    assert_eq!(first["issues"], serde_json::json!([]));
    assert_eq!(first["warnings"], serde_json::json!([]));
    assert_eq!(
        first["requires"],
        Value::Null,
        "purchase-request declares no requires"
    );
    // §7: import shows what `requires` names; so does the check before it.
    assert_eq!(
        objects[1]["requires"],
        serde_json::json!({ "systems": ["watchlist-screening"] })
    );
    let hash = first["hash"].as_str().unwrap();
    assert_eq!(hash.len(), 64);
    assert!(
        hash.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
}

#[test]
fn a_profile_that_is_not_offered_refuses_the_process_with_exit_1() {
    let output = agentprocess(&[
        "process",
        "check",
        "--json",
        "--profile",
        "parallel-1",
        &example_folder("partner-screening"),
    ]);
    assert_eq!(output.status.code(), Some(1));
    let object: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(object["valid"], false);
    let issues: Vec<&str> = object["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap())
        .collect();
    assert_eq!(
        issues,
        ["steps[0].check: needs the check-1 profile, which this server does not offer"]
    );

    let output = agentprocess(&[
        "process",
        "check",
        "--no-profiles",
        &example_folder("product-launch"),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).contains("needs the parallel-1 profile"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn spec_2_1_a_folder_whose_name_differs_from_the_process_name_is_refused() {
    let (_temp, folder) = copy_into_folder("purchase-request", "purchases");
    let output = agentprocess(&["process", "check", "--json", &folder]);
    assert_eq!(output.status.code(), Some(1));
    let object: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(
        object["issues"],
        serde_json::json!([r#"name: "purchase-request" does not equal the folder name "purchases""#])
    );
}

#[test]
fn a_file_path_is_checked_without_a_folder_name_rule() {
    let (_temp, folder) = copy_into_folder("purchase-request", "purchases");
    let file = Path::new(&folder).join("PROCESS.md");
    let output = agentprocess(&["process", "check", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
}

#[test]
fn a_refused_document_prints_every_issue_and_exits_1() {
    let temp = tempfile::tempdir().unwrap();
    let file = temp.path().join("PROCESS.md");
    std::fs::write(
        &file,
        "---\nname: Bad_Name\ndescription: Two problems.\nsteps:\n  - id: work\n    agent: Do it.\n    next: aprove\n  - id: done\n    finish: ok\n---\nBody.\n",
    )
    .unwrap();
    let output = agentprocess(&["process", "check", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(text.contains(r#"name: "Bad_Name" does not match"#), "{text}");
    assert!(text.contains(r#"steps[0].next: unknown step "aprove""#), "{text}");
}

/// Spec §2.2 allows `on_timeout` without `timeout`: the process is valid, and `check` warns
/// that the route can never be taken, in text and in JSON.
#[test]
fn spec_2_2_on_timeout_without_timeout_is_valid_with_a_warning() {
    let case = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("process/tests/corpus/accepted/on-timeout-without-timeout/PROCESS.md")
        .display()
        .to_string();
    let warning = "steps[2].on_timeout: never taken: the step has no timeout";
    let text = agentprocess(&["process", "check", &case]);
    assert_eq!(text.status.code(), Some(0), "{}", stdout(&text));
    assert!(
        stdout(&text).contains(&format!("  warning: {warning}")),
        "{}",
        stdout(&text)
    );
    let json = agentprocess(&["process", "check", "--json", &case]);
    assert_eq!(json.status.code(), Some(0));
    let object: Value = serde_json::from_str(stdout(&json).trim()).unwrap();
    assert_eq!(object["valid"], true);
    assert_eq!(object["warnings"], serde_json::json!([warning]));
}

/// `process check --help` documents every field of the `--json` objects. The fields are read
/// from real outputs (valid with `requires`, valid with a warning, refused), so a field added
/// to the output without its line in the help fails here.
#[test]
fn check_help_documents_every_field_of_its_json_output() {
    let help = agentprocess(&["process", "check", "--help"]);
    assert_eq!(help.status.code(), Some(0));
    let help = stdout(&help);
    let warned = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("process/tests/corpus/accepted/on-timeout-without-timeout/PROCESS.md")
        .display()
        .to_string();
    let (_temp, refused) = copy_into_folder("purchase-request", "another-name");
    let output = agentprocess(&[
        "process",
        "check",
        "--json",
        &example_folder("partner-screening"),
        &warned,
        &refused,
    ]);
    let objects: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object a line"))
        .collect();
    assert_eq!(objects.len(), 3, "{}", stdout(&output));
    let mut fields = Vec::new();
    for object in &objects {
        for (key, value) in object.as_object().unwrap() {
            fields.push(key.clone());
            if let Some(inner) = value.as_object() {
                fields.extend(inner.keys().cloned());
            }
        }
    }
    assert!(fields.iter().any(|field| field == "systems"), "{objects:?}");
    for field in fields {
        assert!(
            help.contains(&format!("\"{field}\"")),
            "the help does not document {field:?}:\n{help}"
        );
    }
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(agentprocess(&["process", "check"]).status.code(), Some(2));
    assert_eq!(
        agentprocess(&["process", "check", "/nonexistent/PROCESS.md"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(agentprocess(&["process", "frobnicate"]).status.code(), Some(2));
    let empty = tempfile::tempdir().unwrap();
    let output = agentprocess(&["process", "check", empty.path().to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot read"));
}

#[test]
fn hash_prints_the_content_hash_of_spec_6_5() {
    let folder = example_folder("purchase-request");
    let output = agentprocess(&["process", "hash", &folder]);
    assert_eq!(output.status.code(), Some(0));
    let bytes = std::fs::read(Path::new(&folder).join("PROCESS.md")).unwrap();
    let document = agentprocess_process::parse_document(&bytes).unwrap();
    let expected = agentprocess_process::content_hash(&document.frontmatter, &document.body).to_hex();
    assert_eq!(stdout(&output).trim(), expected);
    let check = agentprocess(&["process", "check", "--json", &folder]);
    let object: Value = serde_json::from_str(stdout(&check).trim()).unwrap();
    assert_eq!(object["hash"], expected.as_str());
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("utf-8 stderr")
}

#[test]
fn map_prints_the_process_map_as_svg_and_exits_0() {
    let output = agentprocess(&["process", "map", &example_folder("partner-screening")]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let svg = stdout(&output);
    assert!(svg.starts_with("<?xml"), "{svg}");
    assert!(svg.trim_end().ends_with("</svg>"));
    for expected in [
        r#"data-process="partner-screening""#,
        r#"data-step="screen_partner" data-kind="agent""#,
        r#"data-kind="rejected" data-from="partner_approval" data-to="screen_partner""#,
        r#"data-marker="end" data-step="accepted" data-kind="finish""#,
    ] {
        assert!(svg.contains(expected), "missing {expected}");
    }
    let file = Path::new(&example_folder("partner-screening")).join("PROCESS.md");
    let from_file = agentprocess(&["process", "map", file.to_str().unwrap()]);
    assert_eq!(stdout(&from_file), svg, "a file and its folder give the same map");
}

#[test]
fn map_of_a_refused_document_prints_its_issues_and_no_map_and_exits_1() {
    let temp = tempfile::tempdir().unwrap();
    let file = temp.path().join("PROCESS.md");
    std::fs::write(
        &file,
        "---\nname: broken\ndescription: One problem.\nsteps:\n  - id: work\n    agent: Do it.\n    next: aprove\n  - id: done\n    finish: ok\n---\nBody.\n",
    )
    .unwrap();
    let output = agentprocess(&["process", "map", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "", "no map for what would not be published");
    let issues = stderr(&output);
    assert!(issues.contains("refused, 1 issue(s)"), "{issues}");
    assert!(
        issues.contains(r#"steps[0].next: unknown step "aprove""#),
        "{issues}"
    );

    // Refused as the offering server would: parallel-1 not offered.
    let output = agentprocess(&[
        "process",
        "map",
        "--no-profiles",
        &example_folder("product-launch"),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("needs the parallel-1 profile"),
        "{}",
        stderr(&output)
    );

    // §2.1: a folder whose name differs from the process name is refused too.
    let (_temp, folder) = copy_into_folder("purchase-request", "purchases");
    let output = agentprocess(&["process", "map", &folder]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("does not equal the folder name"));
}

#[test]
fn map_output_writes_the_svg_to_a_file() {
    let temp = tempfile::tempdir().unwrap();
    let file = temp.path().join("map.svg");
    let folder = example_folder("product-launch");
    let output = agentprocess(&["process", "map", &folder, "--output", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).contains("map written to"), "{}", stdout(&output));
    let written = std::fs::read_to_string(&file).unwrap();
    assert_eq!(written, stdout(&agentprocess(&["process", "map", &folder])));
    assert!(written.contains(r#"data-join="prepare""#));
}

#[test]
fn map_usage_errors_exit_2() {
    assert_eq!(agentprocess(&["process", "map"]).status.code(), Some(2));
    let output = agentprocess(&["process", "map", "/nonexistent/PROCESS.md"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("cannot read"));
}
