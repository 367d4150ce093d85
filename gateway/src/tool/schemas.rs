//! Our JSON Schemas (`schemas/core-2/`), embedded at build time and bundled to stand alone in `tools/list`.
//!
//! The files refer to each other only by `$id` ([`ID_PREFIX`] plus a name). An MCP client cannot
//! resolve those ids, so what the server publishes is a BUNDLE: every file a schema reaches is
//! copied into its `$defs` under its name, and every reference points there.

use serde_json::{Map, Value, json};
use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

/// How every schema file's `$id` begins; the rest is the file's name (`run-view`,
/// `tools:claim.result`).
pub const ID_PREFIX: &str = "urn:agentprocess-server:core-2:";

/// The JSON Schema dialect of every file and bundle.
const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

macro_rules! embedded {
    ($($path:literal),* $(,)?) => {
        &[$(($path, include_str!(concat!("../../../schemas/core-2/", $path)))),*]
    };
}

/// Every schema file, by its path under `schemas/core-2/`, as built into the binary.
pub const FILES: &[(&str, &str)] = embedded![
    "check-question.json",
    "check-verdict.json",
    "duration.json",
    "evidence-item.json",
    "evidence-kind.json",
    "evidence-record.json",
    "field-type.json",
    "field.json",
    "handoff.json",
    "output-fields.json",
    "process-document.json",
    "request-id.json",
    "route.json",
    "run-data.json",
    "run-state.json",
    "run-view.json",
    "step-completion.json",
    "tool-error.json",
    "work-item.json",
    "tools/describe.arguments.json",
    "tools/describe.result.json",
    "tools/list_processes.arguments.json",
    "tools/list_processes.result.json",
    "tools/start_run.arguments.json",
    "tools/start_run.result.json",
    "tools/get_run.arguments.json",
    "tools/get_run.result.json",
    "tools/get_work.arguments.json",
    "tools/get_work.result.json",
    "tools/claim.arguments.json",
    "tools/claim.result.json",
    "tools/renew.arguments.json",
    "tools/renew.result.json",
    "tools/upload.arguments.json",
    "tools/upload.result.json",
    "tools/submit.arguments.json",
    "tools/submit.result.json",
    "tools/escalate.arguments.json",
    "tools/escalate.result.json",
    "tools/decide.arguments.json",
    "tools/decide.result.json",
    "tools/cancel.arguments.json",
    "tools/cancel.result.json",
    "tools/send_event.arguments.json",
    "tools/send_event.result.json",
    "tools/list_runs.arguments.json",
    "tools/list_runs.result.json",
];

/// An embedded schema file by its name (the part of its `$id` after [`ID_PREFIX`]).
pub fn embedded(name: &str) -> Option<Value> {
    static BY_NAME: OnceLock<HashMap<String, Value>> = OnceLock::new();
    BY_NAME
        .get_or_init(|| {
            FILES
                .iter()
                .map(|(path, text)| {
                    let schema: Value = serde_json::from_str(text)
                        .unwrap_or_else(|e| panic!("embedded schema {path} is not JSON: {e}"));
                    let name = schema["$id"]
                        .as_str()
                        .and_then(|id| id.strip_prefix(ID_PREFIX))
                        .unwrap_or_else(|| panic!("embedded schema {path} has no $id of ours"))
                        .to_owned();
                    (name, schema)
                })
                .collect()
        })
        .get(name)
        .cloned()
}

/// A schema file that cannot be bundled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BundleError {
    #[error("no schema file has the $id {ID_PREFIX}{0}")]
    Missing(String),
    #[error("{0:?} is not a reference to one of our schema files by $id")]
    ForeignReference(String),
}

/// `root` made self-contained: every file it reaches through `$ref`, directly or not, goes
/// into `$defs` under its name (without its own `$id` and `$schema`), and every reference
/// points at that copy. `root` loses its `$id`, which no client could resolve. `lookup` finds a
/// file by name; the gateway passes [`embedded`], a test may read the folder.
pub fn bundle(root: &Value, lookup: impl Fn(&str) -> Option<Value>) -> Result<Value, BundleError> {
    let mut bundled = root.clone();
    let mut wanted = Vec::new();
    point_references_at_defs(&mut bundled, &mut wanted)?;
    let mut defs = Map::new();
    let mut seen = BTreeSet::new();
    while let Some(name) = wanted.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let mut file = lookup(&name).ok_or_else(|| BundleError::Missing(name.clone()))?;
        if let Value::Object(fields) = &mut file {
            fields.remove("$id");
            fields.remove("$schema");
        }
        point_references_at_defs(&mut file, &mut wanted)?;
        defs.insert(name, file);
    }
    if let Value::Object(fields) = &mut bundled {
        fields.remove("$id");
        fields.insert("$schema".to_owned(), Value::String(DIALECT.to_owned()));
        if !defs.is_empty() {
            defs.sort_keys();
            fields.insert("$defs".to_owned(), Value::Object(defs));
        }
    }
    Ok(bundled)
}

/// Rewrites every `$ref` by `$id` in `schema` to `#/$defs/<name>`, and names each file reached.
fn point_references_at_defs(schema: &mut Value, reached: &mut Vec<String>) -> Result<(), BundleError> {
    match schema {
        Value::Object(fields) => {
            if let Some(Value::String(reference)) = fields.get_mut("$ref") {
                let name = reference
                    .strip_prefix(ID_PREFIX)
                    .ok_or_else(|| BundleError::ForeignReference(reference.clone()))?
                    .to_owned();
                *reference = format!("#/$defs/{name}");
                reached.push(name);
            }
            for value in fields.values_mut() {
                point_references_at_defs(value, reached)?;
            }
        }
        Value::Array(items) => {
            for item in items {
                point_references_at_defs(item, reached)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The schema of a tool result's structured content, before bundling: the envelope of tools.md,
/// `{ ok: true, data }` with the tool's result, or `{ ok: false, error }` with a tool error.
pub fn envelope(tool: &str) -> Value {
    json!({
        "$schema": DIALECT,
        "title": format!("{tool} outcome"),
        "description": format!(
            "What {tool} answers as structured content: {{ ok: true, data }} with the tool's result, \
             or {{ ok: false, error }} with a refusal (tools.md)."
        ),
        "type": "object",
        "oneOf": [
            {
                "properties": {
                    "ok": { "const": true },
                    "data": { "$ref": format!("{ID_PREFIX}tools:{tool}.result") }
                },
                "required": ["ok", "data"],
                "additionalProperties": false
            },
            {
                "properties": {
                    "ok": { "const": false },
                    "error": { "$ref": format!("{ID_PREFIX}tool-error") }
                },
                "required": ["ok", "error"],
                "additionalProperties": false
            }
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn every_file_of_the_folder_is_embedded() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas/core-2");
        let mut on_disk = Vec::new();
        for dir in [root.clone(), root.join("tools")] {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let relative = path
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                if relative.ends_with(".json") && relative != "index.json" {
                    on_disk.push(relative);
                }
            }
        }
        on_disk.sort();
        let mut embedded: Vec<String> = FILES.iter().map(|(path, _)| path.to_string()).collect();
        embedded.sort();
        assert_eq!(embedded, on_disk);
    }

    #[test]
    fn every_file_bundles_with_no_reference_left_outside() {
        for (path, text) in FILES {
            let schema: Value = serde_json::from_str(text).unwrap();
            let bundled = bundle(&schema, embedded).unwrap_or_else(|e| panic!("{path}: {e}"));
            let text = bundled.to_string();
            assert!(!text.contains(ID_PREFIX), "{path} still names an id: {text}");
            jsonschema::draft202012::new(&bundled).unwrap_or_else(|e| panic!("{path}: {e}"));
        }
    }

    #[test]
    fn a_recursive_file_is_copied_once() {
        let field = json!({ "$ref": format!("{ID_PREFIX}field") });
        let bundled = bundle(&field, embedded).unwrap();
        assert_eq!(bundled["$ref"], "#/$defs/field");
        assert_eq!(
            bundled["$defs"].as_object().unwrap().keys().collect::<Vec<_>>(),
            ["field", "field-type"]
        );
    }

    #[test]
    fn a_reference_by_any_other_id_is_refused() {
        let foreign = json!({ "$ref": "https://example.com/schema.json" });
        assert_eq!(
            bundle(&foreign, embedded),
            Err(BundleError::ForeignReference(
                "https://example.com/schema.json".to_owned()
            ))
        );
        let missing = json!({ "items": { "$ref": format!("{ID_PREFIX}no-such-shape") } });
        assert_eq!(
            bundle(&missing, embedded),
            Err(BundleError::Missing("no-such-shape".to_owned()))
        );
    }
}
