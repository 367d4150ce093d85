//! The fourteen tools of core-2: their names, descriptions, argument schemas and result schemas.
//!
//! The schemas are our own `schemas/core-2/tools/<name>.arguments.json` and `.result.json`,
//! embedded at build time ([`super::schemas`]) so the binary needs no schema folder at run time,
//! and bundled so each stands alone in `tools/list`.

use super::schemas;
use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use jsonschema::{ValidationError, Validator};
use serde_json::{Map, Value};
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

/// One of the fourteen tools. The order is the order of `tools.md` and of `describe.tools`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolName {
    Describe,
    ListProcesses,
    StartRun,
    GetRun,
    GetWork,
    Claim,
    Renew,
    Upload,
    Submit,
    Escalate,
    Decide,
    Cancel,
    SendEvent,
    ListRuns,
}

impl ToolName {
    /// Every tool, in the order `tools.md` lists them.
    pub const ALL: [ToolName; 14] = [
        ToolName::Describe,
        ToolName::ListProcesses,
        ToolName::StartRun,
        ToolName::GetRun,
        ToolName::GetWork,
        ToolName::Claim,
        ToolName::Renew,
        ToolName::Upload,
        ToolName::Submit,
        ToolName::Escalate,
        ToolName::Decide,
        ToolName::Cancel,
        ToolName::SendEvent,
        ToolName::ListRuns,
    ];

    /// The tool's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::Describe => "describe",
            ToolName::ListProcesses => "list_processes",
            ToolName::StartRun => "start_run",
            ToolName::GetRun => "get_run",
            ToolName::GetWork => "get_work",
            ToolName::Claim => "claim",
            ToolName::Renew => "renew",
            ToolName::Upload => "upload",
            ToolName::Submit => "submit",
            ToolName::Escalate => "escalate",
            ToolName::Decide => "decide",
            ToolName::Cancel => "cancel",
            ToolName::SendEvent => "send_event",
            ToolName::ListRuns => "list_runs",
        }
    }

    /// What the tool does, as shown to MCP clients in `tools/list`.
    pub fn description(self) -> &'static str {
        match self {
            ToolName::Describe => {
                "Protocol version, profiles, lease seconds, the person format and the server's limits."
            }
            ToolName::ListProcesses => {
                "Published processes: name, description, version number and inputs. Paged."
            }
            ToolName::StartRun => "Start a run of a published process with its inputs. Returns the run view.",
            ToolName::GetRun => "The run view: run data, step states and open work items.",
            ToolName::GetWork => {
                "For an agent: ready steps it may claim, each with the exact claim call. For a \
                 person: their open work items, each with the exact decide call. Oldest first, paged."
            }
            ToolName::Claim => {
                "Claim a ready agent step: a token, its expiry, the step, the process body and the run data."
            }
            ToolName::Renew => {
                "Extend a claim's lease; optionally leave a progress note. Returns a new token."
            }
            ToolName::Upload => {
                "Store a file (base64) to attach as file evidence. Returns its id and SHA-256."
            }
            ToolName::Submit => {
                "Submit a claimed step: output, evidence, a summary of what was done, and the chosen next."
            }
            ToolName::Escalate => "Hand a claimed step to a person with a note.",
            ToolName::Decide => {
                "A person's decision on a work item: completed, approved, rejected, returned or failed."
            }
            ToolName::Cancel => "Cancel an active or waiting run with a reason (operators).",
            ToolName::SendEvent => "Deliver a named event to one run.",
            ToolName::ListRuns => "Runs of this organization, filtered by process, state and input fields.",
        }
    }

    /// Whether the tool changes nothing (MCP `readOnlyHint`).
    pub fn is_read_only(self) -> bool {
        matches!(
            self,
            ToolName::Describe
                | ToolName::ListProcesses
                | ToolName::GetRun
                | ToolName::GetWork
                | ToolName::ListRuns
        )
    }

    /// The tool's argument schema, bundled: what `tools/list` publishes as `inputSchema` and
    /// what every call is checked against. Shared and built once.
    pub fn arguments_schema(self) -> Arc<Map<String, Value>> {
        catalog()[self.index()].arguments.clone()
    }

    /// The schema of the tool result's structured content, bundled: the envelope with the
    /// tool's result or a tool error, published in `tools/list` as `outputSchema`.
    pub fn output_schema(self) -> Arc<Map<String, Value>> {
        catalog()[self.index()].output.clone()
    }

    /// Checks `arguments` against the tool's schema. `Err` holds one issue per violation, each
    /// naming the argument it is about, in the style of the protocol's `issues`.
    pub fn validate_arguments(self, arguments: &Value) -> Result<(), Vec<String>> {
        let issues: Vec<String> = catalog()[self.index()]
            .validator
            .iter_errors(arguments)
            .map(|error| issue(&error))
            .collect();
        if issues.is_empty() { Ok(()) } else { Err(issues) }
    }

    fn index(self) -> usize {
        ToolName::ALL
            .iter()
            .position(|tool| *tool == self)
            .expect("every tool is in ALL")
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The name is not one of the fourteen tools.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tool {0:?}; the tools are {names}", names = ToolName::ALL.map(ToolName::as_str).join(", "))]
pub struct UnknownTool(pub String);

impl FromStr for ToolName {
    type Err = UnknownTool;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        ToolName::ALL
            .into_iter()
            .find(|tool| tool.as_str() == name)
            .ok_or_else(|| UnknownTool(name.to_owned()))
    }
}

/// A tool's bundled schemas and the compiled validator of its arguments.
struct Entry {
    arguments: Arc<Map<String, Value>>,
    output: Arc<Map<String, Value>>,
    validator: Validator,
}

/// Every tool's schemas and validator, bundled and compiled on first use. The embedded schemas
/// are fixed at build time, so a failure here is a bug in this crate, and the tests exercise
/// every one.
fn catalog() -> &'static [Entry] {
    static CATALOG: OnceLock<Vec<Entry>> = OnceLock::new();
    CATALOG.get_or_init(|| {
        ToolName::ALL
            .iter()
            .map(|tool| {
                let arguments = bundled(
                    &schemas::embedded(&format!("tools:{tool}.arguments"))
                        .expect("every tool has an argument schema"),
                );
                let output = bundled(&schemas::envelope(tool.as_str()));
                let validator = jsonschema::draft202012::new(&Value::Object(arguments.clone()))
                    .unwrap_or_else(|e| panic!("argument schema of {tool} does not compile: {e}"));
                Entry {
                    arguments: Arc::new(arguments),
                    output: Arc::new(output),
                    validator,
                }
            })
            .collect()
    })
}

/// `schema` bundled from the embedded files, as the object `tools/list` carries.
fn bundled(schema: &Value) -> Map<String, Value> {
    match schemas::bundle(schema, schemas::embedded) {
        Ok(Value::Object(bundled)) => bundled,
        Ok(other) => panic!("a bundled schema is an object, not {other}"),
        Err(e) => panic!("embedded schemas do not bundle: {e}"),
    }
}

/// One schema violation as an issue line: `"<argument path>: <what is wrong>"`, like
/// `"limit: expected integer"`, `"requestId: missing"` or `"colour: not an argument of this tool"`.
fn issue(error: &ValidationError<'_>) -> String {
    let path = argument_path(error);
    let (path, problem) = match error.kind() {
        ValidationErrorKind::Required { property } => {
            let property = property
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| property.to_string());
            (join_path(&path, &property), "missing".to_owned())
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            let names: Vec<String> = unexpected.iter().map(|name| join_path(&path, name)).collect();
            let noun = if path.is_empty() { "argument" } else { "field" };
            return format!("{}: not a known {noun}", names.join(", "));
        }
        ValidationErrorKind::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(single) => single.to_string(),
                TypeKind::Multiple(many) => many
                    .iter()
                    .map(|one| one.to_string())
                    .collect::<Vec<_>>()
                    .join(" or "),
            };
            (path, format!("expected {expected}"))
        }
        _ => (path, error.to_string()),
    };
    if path.is_empty() {
        format!("arguments: {problem}")
    } else {
        format!("{path}: {problem}")
    }
}

/// The instance path in the dotted form the protocol's issues use: `evidence[0].kind`.
fn argument_path(error: &ValidationError<'_>) -> String {
    let mut path = String::new();
    for segment in error.instance_path().iter() {
        match segment {
            LocationSegment::Property(name) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&name);
            }
            LocationSegment::Index(index) => path.push_str(&format!("[{index}]")),
        }
    }
    path
}

fn join_path(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}.{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_name_round_trips() {
        for tool in ToolName::ALL {
            assert_eq!(tool.as_str().parse::<ToolName>(), Ok(tool));
        }
        assert!("delete_everything".parse::<ToolName>().is_err());
    }

    #[test]
    fn every_tool_has_its_own_schemas_standing_alone() {
        for tool in ToolName::ALL {
            let arguments = Value::Object((*tool.arguments_schema()).clone());
            assert_eq!(arguments["title"], format!("{tool} arguments"));
            let output = Value::Object((*tool.output_schema()).clone());
            assert_eq!(output["type"], "object", "MCP requires an object at the root");
            assert!(
                output["$defs"][format!("tools:{tool}.result")].is_object(),
                "{tool}: {output}"
            );
            for schema in [&arguments, &output] {
                assert!(
                    !schema.to_string().contains(schemas::ID_PREFIX),
                    "{tool}: {schema}"
                );
                jsonschema::draft202012::new(schema).unwrap_or_else(|e| panic!("{tool}: {e}"));
            }
        }
    }

    #[test]
    fn issues_name_the_argument() {
        let issues = ToolName::GetWork
            .validate_arguments(&json!({ "limit": "ten", "colour": 1 }))
            .unwrap_err();
        assert!(
            issues.contains(&"limit: expected integer".to_owned()),
            "{issues:?}"
        );
        assert!(
            issues.contains(&"colour: not a known argument".to_owned()),
            "{issues:?}"
        );

        let issues = ToolName::Claim
            .validate_arguments(&json!({ "runId": "r_1" }))
            .unwrap_err();
        assert_eq!(issues, ["stepId: missing", "requestId: missing"]);

        let issues = ToolName::Submit
            .validate_arguments(&json!({
                "token": "t", "output": {}, "summary": "s", "requestId": "q",
                "evidence": [ { "kind": "photo", "ref": "x" } ]
            }))
            .unwrap_err();
        assert_eq!(issues.len(), 1);
        assert!(issues[0].starts_with("evidence[0].kind: "), "{issues:?}");
    }

    #[test]
    fn a_valid_call_has_no_issues() {
        assert_eq!(ToolName::Describe.validate_arguments(&json!({})), Ok(()));
        assert_eq!(
            ToolName::StartRun.validate_arguments(&json!({
                "process": "p", "inputs": { "amount": 48000 }, "requestId": "q"
            })),
            Ok(())
        );
    }
}
