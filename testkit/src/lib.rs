//! Test helpers shared by the workspace: the protocol's JSON Schemas and conformance fixtures,
//! a fake `check-1` evaluator ([`fake_evaluator`]), readers of run views ([`run_view`]) and a
//! real etcd cluster on loopback ([`etcd_cluster`]) and a member that serves TLS
//! ([`secured_etcd`]).
//!
//! The schemas and fixtures are the protocol's published copies, kept beside the repository in
//! `shared/agentprocess/`. `AGENTPROCESS_SCHEMAS` and `AGENTPROCESS_FIXTURES` override where they
//! are looked for.

pub mod etcd_cluster;
pub mod fake_evaluator;
pub mod run_view;
pub mod secured_etcd;

pub use etcd_cluster::{EtcdCluster, free_loopback_ports};
pub use fake_evaluator::FakeEvaluator;
pub use secured_etcd::{ClientCerts, SecuredEtcd, TestPki};

use jsonschema::{Retrieve, Uri, Validator};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The folder holding the core-2 JSON Schemas (`run-view.json`, `tools/claim.result.json`, ...).
pub fn schemas_dir() -> PathBuf {
    from_env_or("AGENTPROCESS_SCHEMAS", "shared/agentprocess/schemas/core-2")
}

/// The folder holding one sub-folder per conformance fixture, each with a `PROCESS.md`.
pub fn fixtures_dir() -> PathBuf {
    from_env_or("AGENTPROCESS_FIXTURES", "shared/agentprocess/fixtures")
}

/// Every conformance fixture as `(folder name, path of its PROCESS.md)`, sorted by name.
pub fn fixtures() -> Vec<(String, PathBuf)> {
    let dir = fixtures_dir();
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read fixtures folder {}: {e}", dir.display()))
        .map(|entry| entry.expect("fixture folder entry").path())
        .filter(|path| path.join("PROCESS.md").is_file())
        .map(|path| {
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                path.join("PROCESS.md"),
            )
        })
        .collect();
    found.sort();
    assert_eq!(
        found.len(),
        12,
        "expected the twelve conformance fixtures in {}",
        dir.display()
    );
    found
}

/// Looks for `relative` in the nearest ancestor of the workspace that holds it.
fn from_env_or(variable: &str, relative: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(variable) {
        return PathBuf::from(path);
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    workspace
        .ancestors()
        .map(|dir| dir.join(relative))
        .find(|candidate| candidate.is_dir())
        .unwrap_or_else(|| panic!("no {relative} beside the workspace; set {variable}"))
}

/// Every schema file, by path relative to the schemas folder (`tools/claim.result.json`).
fn schema_files() -> &'static BTreeMap<String, Value> {
    static FILES: OnceLock<BTreeMap<String, Value>> = OnceLock::new();
    FILES.get_or_init(|| {
        let root = schemas_dir();
        let mut files = BTreeMap::new();
        for dir in [root.clone(), root.join("tools")] {
            for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
                let path = entry.expect("schema entry").path();
                if path.extension().is_some_and(|ext| ext == "json") {
                    let text = std::fs::read_to_string(&path).expect("schema file");
                    let value: Value = serde_json::from_str(&text).expect("schema JSON");
                    let relative = path
                        .strip_prefix(&root)
                        .unwrap()
                        .to_string_lossy()
                        .replace('\\', "/");
                    files.insert(relative, value);
                }
            }
        }
        files
    })
}

/// Serves the schema files by `$id`, so references between them resolve without any network.
struct SchemaFiles;

impl Retrieve for SchemaFiles {
    fn retrieve(&self, uri: &Uri<String>) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let wanted = uri.as_str().trim_end_matches('#');
        schema_files()
            .values()
            .find(|value| value.get("$id").and_then(Value::as_str) == Some(wanted))
            .cloned()
            .ok_or_else(|| format!("no schema file has $id {wanted}").into())
    }
}

/// A validator for one schema file, with every other schema reachable by its `$id`. Compiled
/// once per schema file and shared, so tests can check every value they render.
pub fn validator(schema_file: &str) -> Arc<Validator> {
    static COMPILED: OnceLock<Mutex<HashMap<String, Arc<Validator>>>> = OnceLock::new();
    let mut compiled = COMPILED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(validator) = compiled.get(schema_file) {
        return Arc::clone(validator);
    }
    let schema = schema_files()
        .get(schema_file)
        .unwrap_or_else(|| panic!("no schema {schema_file}"));
    let validator = Arc::new(
        jsonschema::options()
            .with_retriever(SchemaFiles)
            .build(schema)
            .unwrap_or_else(|e| panic!("schema {schema_file} does not compile: {e}")),
    );
    compiled.insert(schema_file.to_string(), Arc::clone(&validator));
    validator
}

/// Panics with every violation when `value` does not match the schema in `schema_file`.
pub fn assert_matches_schema(schema_file: &str, value: &Value) {
    let validator = validator(schema_file);
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{schema_file} refuses the value:\n  {}\nvalue: {}",
        errors.join("\n  "),
        serde_json::to_string_pretty(value).unwrap()
    );
}
