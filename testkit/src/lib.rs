//! Test helpers shared by the workspace: the JSON Schemas ([`assert_matches_schema`]), our
//! example processes ([`example`]), a fake `check-1` evaluator ([`fake_evaluator`]), readers of
//! run views ([`run_view`]) and a real etcd cluster on loopback ([`etcd_cluster`]) and a member
//! that serves TLS ([`secured_etcd`]).
//!
//! The schemas and processes are the server's own, in the repository's `schemas/core-2/` and
//! `examples/`, so a clone needs nothing beside it. `AGENTPROCESS_OFFICIAL` names a folder with
//! the protocol's published `schemas/core-2/` and `fixtures/`: when it is set, every value checked
//! against one of our schemas is checked against the published schema of the same name too, and
//! the tests of the published fixtures run. `AGENTPROCESS_SCHEMAS` overrides where our schemas are
//! looked for.

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

/// The variable naming the protocol's published schemas and fixtures.
pub const OFFICIAL_VARIABLE: &str = "AGENTPROCESS_OFFICIAL";

/// The variable that makes a missing [`official_dir`] a test failure rather than a skip.
pub const REQUIRE_OFFICIAL_VARIABLE: &str = "AGENTPROCESS_REQUIRE_OFFICIAL";

/// The folder holding our core-2 JSON Schemas (`run-view.json`, `tools/claim.result.json`, ...):
/// `AGENTPROCESS_SCHEMAS`, else the repository's `schemas/core-2`.
pub fn schemas_dir() -> PathBuf {
    match std::env::var_os("AGENTPROCESS_SCHEMAS") {
        Some(path) => PathBuf::from(path),
        None => workspace_root().join("schemas/core-2"),
    }
}

/// The folder `AGENTPROCESS_OFFICIAL` names, holding the protocol's published `schemas/core-2`
/// and `fixtures`; `None` when it is not set.
pub fn official_dir() -> Option<PathBuf> {
    std::env::var_os(OFFICIAL_VARIABLE).map(PathBuf::from)
}

/// [`official_dir`], for a test that compares against the published schemas. `None`, with the
/// reason printed, when it is not set; a failure when `AGENTPROCESS_REQUIRE_OFFICIAL=1` asks for
/// it or when it names no folder with `schemas/core-2`.
pub fn official_dir_or_skip(test: &str) -> Option<PathBuf> {
    let required = std::env::var_os(REQUIRE_OFFICIAL_VARIABLE).is_some_and(|value| value == "1");
    match official_dir() {
        Some(dir) => {
            assert!(
                dir.join("schemas/core-2").is_dir(),
                "{OFFICIAL_VARIABLE}={} holds no schemas/core-2",
                dir.display()
            );
            Some(dir)
        }
        None if required => {
            panic!("{test}: {REQUIRE_OFFICIAL_VARIABLE}=1 but {OFFICIAL_VARIABLE} is not set")
        }
        None => {
            eprintln!("{test}: skipped, {OFFICIAL_VARIABLE} names no published schemas");
            None
        }
    }
}

/// The folder of our example processes (`examples/` in the repository), one sub-folder each with
/// a `PROCESS.md`; the tests, the README's walk-through and the conformance runner use them.
pub fn examples_dir() -> PathBuf {
    workspace_root().join("examples")
}

/// The path of example `name`'s `PROCESS.md`; panics when there is no such example.
pub fn example(name: &str) -> PathBuf {
    let path = examples_dir().join(name).join("PROCESS.md");
    assert!(path.is_file(), "no example process {name} at {}", path.display());
    path
}

/// Every example process as `(folder name, path of its PROCESS.md)`, sorted by name.
pub fn examples() -> Vec<(String, PathBuf)> {
    process_folders(&examples_dir())
}

/// The protocol's twelve published conformance fixtures as `(folder name, path of its
/// PROCESS.md)`, from `$AGENTPROCESS_OFFICIAL/fixtures`: `None`, with the reason printed, when
/// the published folder is absent (see [`official_dir_or_skip`]).
pub fn official_fixtures_or_skip(test: &str) -> Option<Vec<(String, PathBuf)>> {
    let dir = official_dir_or_skip(test)?.join("fixtures");
    let found = process_folders(&dir);
    assert_eq!(
        found.len(),
        12,
        "expected the twelve conformance fixtures in {}",
        dir.display()
    );
    Some(found)
}

/// The sub-folders of `dir` holding a `PROCESS.md`, as `(folder name, path of the file)`, sorted.
fn process_folders(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read process folder {}: {e}", dir.display()))
        .map(|entry| entry.expect("process folder entry").path())
        .filter(|path| path.join("PROCESS.md").is_file())
        .map(|path| {
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                path.join("PROCESS.md"),
            )
        })
        .collect();
    found.sort();
    found
}

/// The workspace's root folder: the repository checkout.
fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
}

/// One folder of JSON Schema files, each compiled on demand with every other file of the folder
/// reachable by its `$id`, so references between them resolve without any network.
pub struct SchemaSet {
    root: PathBuf,
    /// Every schema file, by path relative to the folder (`tools/claim.result.json`).
    files: Arc<BTreeMap<String, Value>>,
    compiled: Mutex<HashMap<String, Arc<Validator>>>,
}

impl SchemaSet {
    /// Our schemas, from [`schemas_dir`], loaded once.
    pub fn ours() -> &'static SchemaSet {
        static OURS: OnceLock<SchemaSet> = OnceLock::new();
        OURS.get_or_init(|| SchemaSet::load(schemas_dir()))
    }

    /// The protocol's published schemas, from [`official_dir`], loaded once; `None` when
    /// `AGENTPROCESS_OFFICIAL` is not set.
    pub fn official() -> Option<&'static SchemaSet> {
        static OFFICIAL: OnceLock<Option<SchemaSet>> = OnceLock::new();
        OFFICIAL
            .get_or_init(|| official_dir().map(|dir| SchemaSet::load(dir.join("schemas/core-2"))))
            .as_ref()
    }

    /// Every `*.json` of `root` and of `root/tools`.
    pub fn load(root: PathBuf) -> SchemaSet {
        let mut files = BTreeMap::new();
        for dir in [root.clone(), root.join("tools")] {
            for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
                let path = entry.expect("schema entry").path();
                if path.extension().is_some_and(|ext| ext == "json") {
                    let text = std::fs::read_to_string(&path).expect("schema file");
                    let value: Value =
                        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                    let relative = path
                        .strip_prefix(&root)
                        .unwrap()
                        .to_string_lossy()
                        .replace('\\', "/");
                    files.insert(relative, value);
                }
            }
        }
        SchemaSet {
            root,
            files: Arc::new(files),
            compiled: Mutex::default(),
        }
    }

    /// The folder the files came from.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file at `path` relative to the folder, if there is one.
    pub fn file(&self, path: &str) -> Option<&Value> {
        self.files.get(path)
    }

    /// The file whose `$id` is `id`.
    pub fn by_id(&self, id: &str) -> Option<&Value> {
        self.files
            .values()
            .find(|value| value.get("$id").and_then(Value::as_str) == Some(id))
    }

    /// A validator for the file at `path`, compiled once and shared.
    pub fn validator(&self, path: &str) -> Arc<Validator> {
        let mut compiled = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(validator) = compiled.get(path) {
            return Arc::clone(validator);
        }
        let schema = self
            .file(path)
            .unwrap_or_else(|| panic!("no schema {path} in {}", self.root.display()));
        let validator = Arc::new(
            jsonschema::options()
                .with_retriever(ById(Arc::clone(&self.files)))
                .build(schema)
                .unwrap_or_else(|e| panic!("schema {path} in {} does not compile: {e}", self.root.display())),
        );
        compiled.insert(path.to_string(), Arc::clone(&validator));
        validator
    }

    /// Every violation of the file at `path` by `value`, one line each; empty when it matches.
    pub fn violations(&self, path: &str, value: &Value) -> Vec<String> {
        self.validator(path)
            .iter_errors(value)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect()
    }
}

impl std::fmt::Debug for SchemaSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaSet")
            .field("root", &self.root)
            .field("files", &self.files.len())
            .finish()
    }
}

/// Serves the files of one folder by `$id`.
struct ById(Arc<BTreeMap<String, Value>>);

impl Retrieve for ById {
    fn retrieve(&self, uri: &Uri<String>) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let wanted = uri.as_str().trim_end_matches('#');
        self.0
            .values()
            .find(|value| value.get("$id").and_then(Value::as_str) == Some(wanted))
            .cloned()
            .ok_or_else(|| format!("no schema file has $id {wanted}").into())
    }
}

/// A validator for one of our schema files, compiled once per file and shared, so tests can
/// check every value they render.
pub fn validator(schema_file: &str) -> Arc<Validator> {
    SchemaSet::ours().validator(schema_file)
}

/// Panics with every violation when `value` does not match our schema in `schema_file`. When
/// `AGENTPROCESS_OFFICIAL` is set and the published schemas have a file of the same name,
/// `value` must match that one too: what the server returns keeps to the published contract.
pub fn assert_matches_schema(schema_file: &str, value: &Value) {
    let mut sets = vec![SchemaSet::ours()];
    sets.extend(SchemaSet::official().filter(|official| official.file(schema_file).is_some()));
    for set in sets {
        let errors = set.violations(schema_file, value);
        assert!(
            errors.is_empty(),
            "{schema_file} in {} refuses the value:\n  {}\nvalue: {}",
            set.root().display(),
            errors.join("\n  "),
            serde_json::to_string_pretty(value).unwrap()
        );
    }
}

/// Panics with every violation when `value` does not match `schema`, a schema that must stand
/// alone (a tool's published `inputSchema` or `outputSchema`): nothing outside it is reachable,
/// so a reference it cannot resolve itself fails to compile. `what` names it in the message.
/// Compiled once per distinct schema.
pub fn assert_matches_standalone(what: &str, schema: &Value, value: &Value) {
    static COMPILED: OnceLock<Mutex<HashMap<String, Arc<Validator>>>> = OnceLock::new();
    let key = schema.to_string();
    let validator = {
        let mut compiled = COMPILED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let validator = compiled.entry(key).or_insert_with(|| {
            Arc::new(
                jsonschema::draft202012::new(schema)
                    .unwrap_or_else(|e| panic!("{what} does not compile on its own: {e}")),
            )
        });
        Arc::clone(validator)
    };
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} refuses the value:\n  {}\nvalue: {}",
        errors.join("\n  "),
        serde_json::to_string_pretty(value).unwrap()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clone needs nothing beside it: without `AGENTPROCESS_SCHEMAS`, the schemas are the
    /// repository's own folder, never one found above the checkout.
    #[test]
    fn the_schemas_are_the_repositorys_own() {
        if std::env::var_os("AGENTPROCESS_SCHEMAS").is_some() {
            eprintln!(
                "the_schemas_are_the_repositorys_own: skipped, AGENTPROCESS_SCHEMAS overrides the folder"
            );
            return;
        }
        let dir = schemas_dir();
        assert_eq!(dir, workspace_root().join("schemas/core-2"));
        assert!(dir.join("index.json").is_file(), "{}", dir.display());
        assert!(SchemaSet::ours().file("run-view.json").is_some());
    }
}
