//! Our schemas against a corpus of valid and invalid documents (`testkit/corpus/`), and, where
//! the protocol's published schemas are present, against those over the same corpus.
//!
//! A corpus file is named after the schema it exercises (`tools/claim.result.json`), or lists
//! the schemas it applies to in `schemas`, and holds `valid` and `invalid` documents by name.
//! Names starting `captured:` are results the server returned in a test.

use agentprocess_testkit::{SchemaSet, official_dir_or_skip};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Where our schemas and the published ones judge a corpus document differently on purpose:
/// `(schema file, document name, why)`. tools.md and the specification win over a published
/// schema; each entry names the text that decides.
const DELIBERATE_DIFFERENCES: &[(&str, &str, &str)] = &[
    (
        "tools/get_work.arguments.json",
        "waiting for work (x-wait-1)",
        "docs/profiles/wait.md: `waitSeconds` is this server's profile, which tools.md allows a \
         server to add (`extensions`, server-specific profiles); the published schema knows only \
         the core arguments",
    ),
    (
        "tools/describe.result.json",
        "no check limits without the check profile",
        "check.md §5: the check* limits are listed by a server that implements check-1; the \
         published schema requires them of every server",
    ),
    (
        "run-view.json",
        "layout of the process map",
        "tools.md, Shared shapes: a run view has run, data, steps, workItems and body; `layout` is \
         in the published schema only",
    ),
    (
        "run-view.json",
        "replay marker",
        "tools.md, Shared shapes and specification §4: a replay returns the original result \
         unchanged; `replayed` is in the published schema only",
    ),
    (
        "tools/submit.arguments.json",
        "empty summary",
        "tools.md §submit: `summary` is 1–2000 characters; the published schema has no minimum",
    ),
    (
        "tools/describe.result.json",
        "another core version",
        "tools.md opens with version `core-2`, which these schemas describe; the published schema \
         takes any string",
    ),
    (
        "tools/describe.result.json",
        "a tool that is not one of the fourteen",
        "specification §4.1 and §4.2 name the fourteen tools; the published schema takes any name",
    ),
    (
        "run-view.json",
        "fractional version",
        "specification §6 rule 5: publishing creates a numbered version; the published schema takes \
         any number",
    ),
    (
        "tools/upload.result.json",
        "negative size",
        "tools.md §upload: `bytes` is the stored file's size; the published schema takes any number",
    ),
    (
        "process-document.json",
        "two kind keys",
        "specification §2.2: a step has exactly one kind key; the published schema does not count them",
    ),
    (
        "process-document.json",
        "duration in words",
        "specification §2.4: a duration is an integer followed by m, h or d, nothing else",
    ),
    (
        "process-document.json",
        "a list next with one route",
        "specification §2.2: a list `next` has two or more routes",
    ),
    (
        "process-document.json",
        "data sources of another server",
        "specification §2.1: unknown frontmatter fields are refused; `data_sources`, `emails` and \
         `files` are in the published schema only",
    ),
];

/// One document of the corpus and what our schemas must say of it.
struct Document {
    corpus_file: String,
    schema: String,
    name: String,
    valid: bool,
    value: Value,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// Every document of the corpus, once per schema it applies to.
fn corpus() -> Vec<Document> {
    let root = corpus_dir();
    let mut documents = Vec::new();
    for dir in [root.clone(), root.join("tools")] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
            .collect();
        paths.sort();
        for path in paths {
            let corpus_file = path
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
                .unwrap_or_else(|e| panic!("{corpus_file}: {e}"));
            let schemas: Vec<String> = match file.get("schemas") {
                Some(listed) => serde_json::from_value(listed.clone()).unwrap(),
                None => vec![corpus_file.clone()],
            };
            for schema in &schemas {
                for (valid, key) in [(true, "valid"), (false, "invalid")] {
                    for (name, value) in file[key]
                        .as_object()
                        .unwrap_or_else(|| panic!("{corpus_file}: no {key}"))
                    {
                        documents.push(Document {
                            corpus_file: corpus_file.clone(),
                            schema: schema.clone(),
                            name: name.clone(),
                            valid,
                            value: value.clone(),
                        });
                    }
                }
            }
        }
    }
    documents
}

fn verdict(valid: bool) -> &'static str {
    if valid { "accepts" } else { "refuses" }
}

/// tools.md, Shared shapes and every tool's result: each shape and result has valid and invalid
/// documents, and our schemas accept exactly the valid ones.
#[test]
fn our_schemas_accept_the_valid_documents_and_refuse_the_invalid() {
    let ours = SchemaSet::ours();
    let documents = corpus();
    let mut wrong = Vec::new();
    for document in &documents {
        let violations = ours.violations(&document.schema, &document.value);
        if violations.is_empty() != document.valid {
            wrong.push(format!(
                "{} (from {}) {} {:?}: {violations:?}",
                document.schema,
                document.corpus_file,
                verdict(violations.is_empty()),
                document.name
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    let mut covered: Vec<&str> = documents
        .iter()
        .map(|document| document.schema.as_str())
        .collect();
    covered.sort();
    covered.dedup();
    let mut expected = vec![
        "check-verdict.json",
        "evidence-item.json",
        "process-document.json",
        "run-data.json",
        "run-view.json",
        "tool-error.json",
        "work-item.json",
    ];
    let tools = [
        "describe",
        "list_processes",
        "start_run",
        "get_run",
        "get_work",
        "claim",
        "renew",
        "upload",
        "submit",
        "escalate",
        "decide",
        "cancel",
        "send_event",
        "list_runs",
    ];
    let results: Vec<String> = tools
        .iter()
        .map(|tool| format!("tools/{tool}.result.json"))
        .collect();
    expected.extend(results.iter().map(String::as_str));
    expected.push("tools/submit.arguments.json");
    expected.push("tools/get_work.arguments.json");
    expected.sort();
    assert_eq!(
        covered, expected,
        "every shape and every tool result has a corpus"
    );
    for schema in &expected {
        for valid in [true, false] {
            let count = documents
                .iter()
                .filter(|document| document.schema == *schema && document.valid == valid)
                .count();
            assert!(
                count >= 5,
                "{schema}: only {count} {} documents",
                if valid { "valid" } else { "invalid" }
            );
        }
    }
}

/// tools.md, "JSON Schemas": ours and the published schemas accept and refuse the same corpus,
/// except where tools.md wins ([`DELIBERATE_DIFFERENCES`]).
#[test]
fn the_published_schemas_judge_the_corpus_as_ours_do() {
    let Some(official) = official_dir_or_skip("the_published_schemas_judge_the_corpus_as_ours_do") else {
        return;
    };
    let official = SchemaSet::load(official.join("schemas/core-2"));
    let mut disagreements = Vec::new();
    let mut differences_seen = Vec::new();
    for document in corpus() {
        let by_ours = SchemaSet::ours()
            .violations(&document.schema, &document.value)
            .is_empty();
        let by_official = official.violations(&document.schema, &document.value).is_empty();
        let deliberate = DELIBERATE_DIFFERENCES
            .iter()
            .any(|(schema, name, _)| *schema == document.corpus_file && *name == document.name);
        if deliberate {
            differences_seen.push((document.corpus_file.clone(), document.name.clone()));
            assert_ne!(
                by_ours,
                by_official,
                "{} {:?} is listed as a deliberate difference, but both schemas {} it",
                document.schema,
                document.name,
                verdict(by_ours)
            );
        } else if by_ours != by_official {
            disagreements.push(format!(
                "{}: ours {} {:?}, the published schema {} it",
                document.schema,
                verdict(by_ours),
                document.name,
                verdict(by_official)
            ));
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    for (schema, name, _) in DELIBERATE_DIFFERENCES {
        assert!(
            differences_seen
                .iter()
                .any(|(file, seen)| file == schema && seen == name),
            "deliberate difference {schema} {name:?} has no corpus document"
        );
    }
}
