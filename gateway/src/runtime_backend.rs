//! The tool backend over a [`RunService`]: tool arguments to runtime calls, outcomes to results.
//!
//! The gateway has checked every argument against the tool's schema before a call reaches this
//! module, so reading an argument can only fail where the schema cannot say enough (base64
//! text, the size of an upload); those are `invalid` with an issue naming the argument. A
//! protocol refusal from the runtime keeps its code, message and issues; an infrastructure
//! failure becomes `retry`, which is always safe to follow with the same `requestId` (both
//! written by [`crate::respond`]).

use crate::auth::{Identity, IdentityKind};
use crate::mcp::{
    ErrorCode, RunRead, ToolBackend, ToolData, ToolError, ToolName, ToolResult, WORK_PAGE_LIMIT, WorkWait,
};
use crate::respond;
use agentprocess_service::{
    Caller, CallerKind, Decision, EvidenceItem, GetWork, ListRuns, MAX_WAIT_FOR_WORK, Mode, OrgId, RunId,
    RunService, ServiceError, StepId, Submission, ToolOutcome, Upload, Write,
};
use base64::Engine as _;
use serde_json::{Map, Value};
use std::sync::Arc;

/// Runs every tool but `describe` on a [`RunService`]: in process under `serve`, remote in a
/// cluster.
#[derive(Debug, Clone)]
pub struct RuntimeBackend {
    service: Arc<dyn RunService>,
    decorate: Option<Arc<dyn DecorateResult>>,
}

/// Rewrites the `data` of a successful result before it leaves the gateway (signed file URLs).
pub trait DecorateResult: Send + Sync + std::fmt::Debug {
    fn decorate(&self, organization: &OrgId, data: &mut Value);
}

impl RuntimeBackend {
    pub fn new(service: Arc<dyn RunService>) -> Self {
        RuntimeBackend {
            service,
            decorate: None,
        }
    }

    /// Passes every successful result's `data` through `decorate`.
    pub fn with_decoration(mut self, decorate: Arc<dyn DecorateResult>) -> Self {
        self.decorate = Some(decorate);
        self
    }

    async fn dispatch(&self, caller: &Caller, tool: ToolName, args: Args) -> Result<ToolOutcome, Failure> {
        let service = &self.service;
        let outcome = match tool {
            ToolName::Describe => {
                return Err(Failure::Refused(ToolError::new(
                    ErrorCode::Invalid,
                    "describe is answered by the gateway",
                )));
            }
            ToolName::ListProcesses => service.list_processes(caller, args.opt_string("cursor")?).await,
            ToolName::GetRun => service.get_run(caller, &args.run_id("runId")?).await,
            ToolName::GetWork => {
                let request = GetWork {
                    limit: args.opt_limit("limit")?,
                    cursor: args.opt_string("cursor")?,
                    process: args.opt_string("process")?,
                    wait: args.opt_wait("waitSeconds")?,
                    only_new: false,
                };
                service.get_work(caller, request).await
            }
            ToolName::ListRuns => {
                let request = ListRuns {
                    process: args.opt_string("process")?,
                    state: args.opt_string("state")?,
                    inputs: args.opt_object("inputs")?,
                    limit: args.opt_limit("limit")?,
                    cursor: args.opt_string("cursor")?,
                };
                service.list_runs(caller, request).await
            }
            ToolName::Upload => {
                let upload = Upload {
                    file_name: args.string("fileName")?,
                    content_type: args.string("contentType")?,
                    bytes: args.base64("contentBase64")?,
                };
                service.upload(caller, upload, &args.string("requestId")?).await
            }
            _ => {
                let request_id = args.string("requestId")?;
                let write = args.write(tool)?;
                service.execute(caller, write, &request_id).await
            }
        };
        outcome.map_err(Failure::Infrastructure)
    }
}

impl ToolBackend for RuntimeBackend {
    async fn call(&self, identity: &Identity, tool: ToolName, arguments: Value) -> ToolResult {
        let caller = caller_of(identity);
        let args = match arguments {
            Value::Object(map) => Args(map),
            _ => {
                return Err(ToolError::new(
                    ErrorCode::Invalid,
                    "the arguments must be an object",
                ));
            }
        };
        match self.dispatch(&caller, tool, args).await {
            Ok(ToolOutcome::Ok(mut data)) => {
                if let Some(decorate) = &self.decorate {
                    decorate.decorate(&identity.organization, &mut data);
                }
                Ok(ToolData::Value(data))
            }
            // Holds no file evidence (see `RenderedData`): nothing to decorate.
            Ok(ToolOutcome::Rendered(data)) => Ok(ToolData::Rendered(data)),
            Ok(ToolOutcome::Refused(refusal)) => Err(respond::refused(refusal)),
            Err(Failure::Refused(error)) => Err(error),
            Err(Failure::Infrastructure(ServiceError::Overloaded {
                limit,
                retry_after_ms,
            })) => Err(respond::overloaded(&limit, retry_after_ms)),
            Err(Failure::Infrastructure(error)) => {
                tracing::error!(tool = tool.as_str(), %error, "tool call failed in the runtime");
                Err(respond::tool_failed())
            }
        }
    }

    async fn work_page(&self, identity: &Identity, wait: WorkWait) -> ToolResult {
        let request = GetWork {
            limit: Some(WORK_PAGE_LIMIT),
            cursor: None,
            process: wait.process,
            wait: wait.wait.map(|wait| wait.min(MAX_WAIT_FOR_WORK)),
            only_new: wait.only_new,
        };
        match self.service.get_work(&caller_of(identity), request).await {
            Ok(ToolOutcome::Ok(data)) => Ok(ToolData::Value(data)),
            // Work items hold no file evidence: nothing to decorate.
            Ok(ToolOutcome::Rendered(data)) => Ok(ToolData::Rendered(data)),
            Ok(ToolOutcome::Refused(refusal)) => Err(respond::refused(refusal)),
            Err(ServiceError::Overloaded {
                limit,
                retry_after_ms,
            }) => Err(respond::overloaded(&limit, retry_after_ms)),
            Err(error) => {
                tracing::error!(%error, "a work page failed in the runtime");
                Err(respond::tool_failed())
            }
        }
    }

    async fn read_run(&self, identity: &Identity, read: RunRead, run_id: &str) -> ToolResult {
        let caller = caller_of(identity);
        let run_id = RunId::from(run_id);
        let outcome = match read {
            RunRead::History => self.service.run_history(&caller, &run_id).await,
            RunRead::Inspection => self.service.inspect_run(&caller, &run_id).await,
        };
        // Neither holds file evidence: nothing to decorate.
        match outcome {
            Ok(ToolOutcome::Ok(data)) => Ok(ToolData::Value(data)),
            Ok(ToolOutcome::Rendered(data)) => Ok(ToolData::Rendered(data)),
            Ok(ToolOutcome::Refused(refusal)) => Err(respond::refused(refusal)),
            Err(error) => {
                tracing::error!(read = read.as_str(), %error, "run read failed in the runtime");
                Err(respond::tool_failed())
            }
        }
    }
}

/// Why a call produced no outcome.
enum Failure {
    /// The arguments cannot be used (beyond what the schema says).
    Refused(ToolError),
    Infrastructure(ServiceError),
}

/// The runtime's view of a verified identity.
pub fn caller_of(identity: &Identity) -> Caller {
    Caller {
        organization: identity.organization.clone(),
        kind: match &identity.kind {
            IdentityKind::Agent { id } => CallerKind::Agent { id: id.clone() },
            IdentityKind::Person { email, groups } => CallerKind::Person {
                email: email.clone(),
                groups: groups.clone(),
            },
        },
        operator: identity.operator,
    }
}

/// A tool call's arguments, already checked against the tool's schema.
struct Args(Map<String, Value>);

fn invalid(name: &str, why: &str) -> Failure {
    Failure::Refused(
        ToolError::new(ErrorCode::Invalid, format!("{name}: {why}"))
            .with_issues(vec![format!("{name}: {why}")]),
    )
}

impl Args {
    fn opt_string(&self, name: &str) -> Result<Option<String>, Failure> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(invalid(name, "must be a string")),
        }
    }

    fn string(&self, name: &str) -> Result<String, Failure> {
        self.opt_string(name)?.ok_or_else(|| invalid(name, "is required"))
    }

    /// A run id as sent: any text; the run service answers for one that names no run.
    fn run_id(&self, name: &str) -> Result<RunId, Failure> {
        self.string(name).map(RunId::from)
    }

    /// A step id as sent, unchecked: the run answers for one that names no step.
    fn step_id(&self, name: &str) -> Result<StepId, Failure> {
        self.string(name).map(StepId::from_wire)
    }

    fn opt_object(&self, name: &str) -> Result<Option<Map<String, Value>>, Failure> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(map)) => Ok(Some(map.clone())),
            Some(_) => Err(invalid(name, "must be an object")),
        }
    }

    fn opt_limit(&self, name: &str) -> Result<Option<usize>, Failure> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => value
                .as_u64()
                .filter(|&limit| limit >= 1)
                .map(|limit| Some(usize::try_from(limit).unwrap_or(usize::MAX)))
                .ok_or_else(|| invalid(name, "must be a positive integer")),
        }
    }

    /// `waitSeconds` of the `x-wait-1` profile: 1 to 20 seconds.
    fn opt_wait(&self, name: &str) -> Result<Option<std::time::Duration>, Failure> {
        let longest = MAX_WAIT_FOR_WORK.as_secs();
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => value
                .as_u64()
                .filter(|seconds| (1..=longest).contains(seconds))
                .map(|seconds| Some(std::time::Duration::from_secs(seconds)))
                .ok_or_else(|| invalid(name, &format!("must be an integer from 1 to {longest}"))),
        }
    }

    fn base64(&self, name: &str) -> Result<Vec<u8>, Failure> {
        let text = self.string(name)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(|e| invalid(name, &format!("is not valid base64 ({e})")))
    }

    fn evidence(&self, name: &str) -> Result<Option<Vec<EvidenceItem>>, Failure> {
        let items = match self.0.get(name) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Array(items)) => items,
            Some(_) => return Err(invalid(name, "must be an array")),
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let field = |key: &str| item.get(key).and_then(Value::as_str).map(str::to_owned);
                match (field("kind"), field("ref")) {
                    (Some(kind), Some(reference)) => Ok(EvidenceItem { kind, reference }),
                    _ => Err(invalid(&format!("{name}[{i}]"), "must be { kind, ref }")),
                }
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    fn decision(&self) -> Result<Decision, Failure> {
        match self.string("decision")?.as_str() {
            "completed" => Ok(Decision::Completed),
            "approved" => Ok(Decision::Approved),
            "rejected" => Ok(Decision::Rejected),
            "returned" => Ok(Decision::Returned),
            "failed" => Ok(Decision::Failed),
            other => Err(invalid("decision", &format!("{other:?} is not a decision"))),
        }
    }

    fn mode(&self) -> Result<Mode, Failure> {
        match self.opt_string("mode")?.as_deref() {
            None | Some("live") => Ok(Mode::Live),
            Some("test") => Ok(Mode::Test),
            Some(other) => Err(invalid("mode", &format!("{other:?} is not live or test"))),
        }
    }

    /// The write a write tool's arguments describe (without `requestId`).
    fn write(&self, tool: ToolName) -> Result<Write, Failure> {
        Ok(match tool {
            ToolName::StartRun => Write::StartRun {
                process: self.string("process")?,
                version: match self.0.get("version") {
                    None | Some(Value::Null) => None,
                    Some(value) => Some(
                        value
                            .as_u64()
                            .ok_or_else(|| invalid("version", "must be a positive integer"))?,
                    ),
                },
                inputs: Value::Object(self.opt_object("inputs")?.unwrap_or_default()),
                mode: self.mode()?,
            },
            ToolName::Claim => Write::Claim {
                run_id: self.run_id("runId")?,
                step: self.step_id("stepId")?,
            },
            ToolName::Renew => Write::Renew {
                token: self.string("token")?,
                progress: self.opt_string("progress")?,
            },
            ToolName::Submit => Write::Submit {
                token: self.string("token")?,
                submission: Submission {
                    output: self.opt_object("output")?,
                    evidence: self.evidence("evidence")?.unwrap_or_default(),
                    summary: self.opt_string("summary")?,
                    next: self.opt_string("next")?,
                    reason: self.opt_string("reason")?,
                },
            },
            ToolName::Escalate => Write::Escalate {
                token: self.string("token")?,
                note: self.string("note")?,
            },
            ToolName::Decide => Write::Decide {
                run_id: self.run_id("runId")?,
                work_item: self.string("workItemId")?,
                snapshot: self.string("snapshot")?,
                decision: self.decision()?,
                output: self.opt_object("output")?,
                evidence: self.evidence("evidence")?,
                summary: self.opt_string("summary")?,
                next: self.opt_string("next")?,
                reason: self.opt_string("reason")?,
                note: self.opt_string("note")?,
            },
            ToolName::Cancel => Write::Cancel {
                run_id: self.run_id("runId")?,
                reason: self.string("reason")?,
            },
            ToolName::SendEvent => Write::SendEvent {
                run_id: self.run_id("runId")?,
                name: self.string("name")?,
                data: self.opt_object("data")?,
            },
            other => {
                return Err(Failure::Refused(ToolError::new(
                    ErrorCode::Invalid,
                    format!("{} is not a write", other.as_str()),
                )));
            }
        })
    }
}
