//! The service layer's types to their wire messages and back; the only place the two meet.

use crate::wire;
use agentprocess_service::{
    Caller, CallerKind, Decision, ErrorCode, EvidenceItem, GetWork, ListRuns, Mode, ReadySteps, Submission,
    ToolOutcome, ToolRefusal, Write,
};
use agentprocess_service::{RunId, StepId};
use serde_json::{Map, Value};

/// A message that does not say what the service's types need: a peer of another version, or a
/// broken one. Never the protocol's refusal: that travels as a [`wire::Refusal`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed run service message: {0}")]
pub struct WireError(pub String);

fn missing(what: &str) -> WireError {
    WireError(format!("{what} is missing"))
}

/// The bytes of the JSON text of `value`, a JSON value or object.
fn json_bytes(value: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(value).expect("JSON values always serialize")
}

fn json_of(bytes: &[u8], what: &str) -> Result<Value, WireError> {
    serde_json::from_slice(bytes).map_err(|e| WireError(format!("{what} is not JSON: {e}")))
}

fn object_of(bytes: &[u8], what: &str) -> Result<Map<String, Value>, WireError> {
    match json_of(bytes, what)? {
        Value::Object(map) => Ok(map),
        _ => Err(WireError(format!("{what} is not a JSON object"))),
    }
}

pub(crate) fn caller_to_wire(caller: &Caller) -> wire::Caller {
    wire::Caller {
        organization: caller.organization.as_str().to_string(),
        operator: caller.operator,
        kind: Some(match &caller.kind {
            CallerKind::Agent { id } => wire::caller::Kind::Agent(wire::Agent { id: id.clone() }),
            CallerKind::Person { email, groups } => wire::caller::Kind::Person(wire::Person {
                email: email.clone(),
                groups: groups.clone(),
            }),
        }),
    }
}

pub(crate) fn caller_of(caller: Option<wire::Caller>) -> Result<Caller, WireError> {
    let caller = caller.ok_or_else(|| missing("the caller"))?;
    let kind = match caller.kind.ok_or_else(|| missing("the caller's kind"))? {
        wire::caller::Kind::Agent(agent) => CallerKind::Agent { id: agent.id },
        wire::caller::Kind::Person(person) => CallerKind::Person {
            email: person.email,
            groups: person.groups,
        },
    };
    if caller.organization.is_empty() {
        return Err(missing("the caller's organization"));
    }
    Ok(Caller {
        organization: caller.organization.into(),
        kind,
        operator: caller.operator,
    })
}

fn mode_to_wire(mode: Mode) -> wire::Mode {
    match mode {
        Mode::Live => wire::Mode::Live,
        Mode::Test => wire::Mode::Test,
    }
}

fn mode_of(mode: i32) -> Result<Mode, WireError> {
    match wire::Mode::try_from(mode) {
        Ok(wire::Mode::Live) => Ok(Mode::Live),
        Ok(wire::Mode::Test) => Ok(Mode::Test),
        _ => Err(WireError(format!("mode {mode} is not live or test"))),
    }
}

fn decision_to_wire(decision: Decision) -> wire::Decision {
    match decision {
        Decision::Completed => wire::Decision::Completed,
        Decision::Approved => wire::Decision::Approved,
        Decision::Rejected => wire::Decision::Rejected,
        Decision::Returned => wire::Decision::Returned,
        Decision::Failed => wire::Decision::Failed,
    }
}

fn decision_of(decision: i32) -> Result<Decision, WireError> {
    match wire::Decision::try_from(decision) {
        Ok(wire::Decision::Completed) => Ok(Decision::Completed),
        Ok(wire::Decision::Approved) => Ok(Decision::Approved),
        Ok(wire::Decision::Rejected) => Ok(Decision::Rejected),
        Ok(wire::Decision::Returned) => Ok(Decision::Returned),
        Ok(wire::Decision::Failed) => Ok(Decision::Failed),
        _ => Err(WireError(format!(
            "decision {decision} is not one the protocol knows"
        ))),
    }
}

fn evidence_to_wire(evidence: &[EvidenceItem]) -> Vec<wire::EvidenceItem> {
    evidence
        .iter()
        .map(|item| wire::EvidenceItem {
            kind: item.kind.clone(),
            reference: item.reference.clone(),
        })
        .collect()
}

fn evidence_of(evidence: Vec<wire::EvidenceItem>) -> Vec<EvidenceItem> {
    evidence
        .into_iter()
        .map(|item| EvidenceItem {
            kind: item.kind,
            reference: item.reference,
        })
        .collect()
}

pub(crate) fn write_to_wire(write: Write) -> wire::execute_request::Write {
    use wire::execute_request::Write as W;
    match write {
        Write::StartRun {
            process,
            version,
            inputs,
            mode,
        } => W::StartRun(wire::StartRun {
            process,
            version,
            inputs: json_bytes(&inputs),
            mode: mode_to_wire(mode).into(),
        }),
        Write::Claim { run_id, step } => W::Claim(wire::Claim {
            run_id: run_id.as_str().to_string(),
            step_id: step.as_str().to_string(),
        }),
        Write::Renew { token, progress } => W::Renew(wire::Renew { token, progress }),
        Write::Submit { token, submission } => W::Submit(wire::Submit {
            token,
            submission: Some(wire::Submission {
                output: submission.output.as_ref().map(json_bytes),
                evidence: evidence_to_wire(&submission.evidence),
                summary: submission.summary,
                next: submission.next,
                reason: submission.reason,
            }),
        }),
        Write::Escalate { token, note } => W::Escalate(wire::Escalate { token, note }),
        Write::Decide {
            run_id,
            work_item,
            snapshot,
            decision,
            output,
            evidence,
            summary,
            next,
            reason,
            note,
        } => W::Decide(wire::Decide {
            run_id: run_id.as_str().to_string(),
            work_item,
            snapshot,
            decision: decision_to_wire(decision).into(),
            output: output.as_ref().map(json_bytes),
            evidence: evidence.map(|items| wire::EvidenceList {
                items: evidence_to_wire(&items),
            }),
            summary,
            next,
            reason,
            note,
        }),
        Write::Cancel { run_id, reason } => W::Cancel(wire::Cancel {
            run_id: run_id.as_str().to_string(),
            reason,
        }),
        Write::SendEvent { run_id, name, data } => W::SendEvent(wire::SendEvent {
            run_id: run_id.as_str().to_string(),
            name,
            data: data.as_ref().map(json_bytes),
        }),
    }
}

pub(crate) fn write_of(write: Option<wire::execute_request::Write>) -> Result<Write, WireError> {
    use wire::execute_request::Write as W;
    Ok(match write.ok_or_else(|| missing("the write"))? {
        W::StartRun(start) => Write::StartRun {
            process: start.process,
            version: start.version,
            inputs: json_of(&start.inputs, "start_run's inputs")?,
            mode: mode_of(start.mode)?,
        },
        W::Claim(claim) => Write::Claim {
            run_id: RunId::from(claim.run_id),
            step: StepId::from_wire(claim.step_id),
        },
        W::Renew(renew) => Write::Renew {
            token: renew.token,
            progress: renew.progress,
        },
        W::Submit(submit) => {
            let submission = submit.submission.ok_or_else(|| missing("submit's submission"))?;
            Write::Submit {
                token: submit.token,
                submission: Submission {
                    output: submission
                        .output
                        .map(|bytes| object_of(&bytes, "submit's output"))
                        .transpose()?,
                    evidence: evidence_of(submission.evidence),
                    summary: submission.summary,
                    next: submission.next,
                    reason: submission.reason,
                },
            }
        }
        W::Escalate(escalate) => Write::Escalate {
            token: escalate.token,
            note: escalate.note,
        },
        W::Decide(decide) => Write::Decide {
            run_id: RunId::from(decide.run_id),
            work_item: decide.work_item,
            snapshot: decide.snapshot,
            decision: decision_of(decide.decision)?,
            output: decide
                .output
                .map(|bytes| object_of(&bytes, "decide's output"))
                .transpose()?,
            evidence: decide.evidence.map(|list| evidence_of(list.items)),
            summary: decide.summary,
            next: decide.next,
            reason: decide.reason,
            note: decide.note,
        },
        W::Cancel(cancel) => Write::Cancel {
            run_id: RunId::from(cancel.run_id),
            reason: cancel.reason,
        },
        W::SendEvent(event) => Write::SendEvent {
            run_id: RunId::from(event.run_id),
            name: event.name,
            data: event
                .data
                .map(|bytes| object_of(&bytes, "send_event's data"))
                .transpose()?,
        },
    })
}

pub(crate) fn get_work_to_wire(caller: &Caller, request: GetWork) -> wire::GetWorkRequest {
    wire::GetWorkRequest {
        caller: Some(caller_to_wire(caller)),
        limit: request.limit.map(|limit| limit as u64),
        cursor: request.cursor,
        process: request.process,
        wait_ms: request
            .wait
            .map(|wait| u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)),
        only_new: request.only_new,
    }
}

pub(crate) fn get_work_of(request: wire::GetWorkRequest) -> Result<(Caller, GetWork), WireError> {
    Ok((
        caller_of(request.caller)?,
        GetWork {
            limit: request.limit.map(size_of).transpose()?,
            cursor: request.cursor,
            process: request.process,
            // A wait is capped here too: a peer cannot hold a host's call past the longest.
            wait: request
                .wait_ms
                .map(|ms| std::time::Duration::from_millis(ms).min(agentprocess_service::MAX_WAIT_FOR_WORK)),
            only_new: request.only_new,
        },
    ))
}

pub(crate) fn ready_steps_to_wire(caller: &Caller, request: ReadySteps) -> wire::ReadyStepsRequest {
    wire::ReadyStepsRequest {
        caller: Some(caller_to_wire(caller)),
        limit: request.limit.map(|limit| limit as u64),
        cursor: request.cursor,
        ready_until_ms: request.ready_until_ms,
    }
}

pub(crate) fn ready_steps_of(request: wire::ReadyStepsRequest) -> Result<(Caller, ReadySteps), WireError> {
    Ok((
        caller_of(request.caller)?,
        ReadySteps {
            limit: request.limit.map(size_of).transpose()?,
            cursor: request.cursor,
            ready_until_ms: request.ready_until_ms,
        },
    ))
}

pub(crate) fn list_runs_to_wire(caller: &Caller, request: ListRuns) -> wire::ListRunsRequest {
    wire::ListRunsRequest {
        caller: Some(caller_to_wire(caller)),
        process: request.process,
        state: request.state,
        inputs: request.inputs.as_ref().map(json_bytes),
        limit: request.limit.map(|limit| limit as u64),
        cursor: request.cursor,
    }
}

pub(crate) fn list_runs_of(request: wire::ListRunsRequest) -> Result<(Caller, ListRuns), WireError> {
    Ok((
        caller_of(request.caller)?,
        ListRuns {
            process: request.process,
            state: request.state,
            inputs: request
                .inputs
                .map(|bytes| object_of(&bytes, "list_runs' inputs"))
                .transpose()?,
            limit: request.limit.map(size_of).transpose()?,
            cursor: request.cursor,
        },
    ))
}

fn size_of(limit: u64) -> Result<usize, WireError> {
    usize::try_from(limit).map_err(|_| WireError(format!("limit {limit} does not fit this machine")))
}

pub(crate) fn answer_to_wire(outcome: ToolOutcome) -> wire::ToolAnswer {
    wire::ToolAnswer {
        answer: Some(match outcome {
            ToolOutcome::Ok(data) => wire::tool_answer::Answer::Ok(json_bytes(&data)),
            ToolOutcome::Rendered(data) => wire::tool_answer::Answer::Ok(data.json().as_bytes().to_vec()),
            ToolOutcome::Refused(refusal) => wire::tool_answer::Answer::Refused(wire::Refusal {
                code: refusal.code.as_str().to_string(),
                message: refusal.message,
                issues: refusal.issues,
            }),
        }),
    }
}

pub(crate) fn answer_of(answer: wire::ToolAnswer) -> Result<ToolOutcome, WireError> {
    match answer.answer.ok_or_else(|| missing("the answer"))? {
        wire::tool_answer::Answer::Ok(bytes) => Ok(ToolOutcome::Ok(json_of(&bytes, "the result")?)),
        wire::tool_answer::Answer::Refused(refusal) => {
            let code = ErrorCode::ALL
                .into_iter()
                .find(|code| code.as_str() == refusal.code)
                .ok_or_else(|| WireError(format!("error code {:?} is not the protocol's", refusal.code)))?;
            Ok(ToolOutcome::Refused(ToolRefusal {
                code,
                message: refusal.message,
                issues: refusal.issues,
            }))
        }
    }
}
