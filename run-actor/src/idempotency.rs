//! Idempotency, all in one place (spec §4: repeating a write with the same arguments returns the
//! original result; other arguments under the same `requestId` is a `conflict`): what "the same
//! arguments" means, the record a write commits, and the replay a retry gets.
//!
//! A fingerprint is the SHA-256 of the RFC 8785 canonical JSON of `{ tool, caller, arguments }`,
//! with the arguments under their names on the wire. Canonical JSON makes the order of keys and
//! the spelling of a number (`1.5`, `1.50`, `15e-1`) irrelevant, as they are to JSON itself.

use crate::call::{RuntimeError, ToolOutcome};
use crate::machine::{Caller, CallerKind, OrgId, Refusal, Timestamp, hex};
use agentprocess_process::hash::canonical_json;
use agentprocess_service::{EvidenceItem, Submission, Upload, Write};
use agentprocess_store::Store;
use agentprocess_store::keys::Keys;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::borrow::Cow;

/// The `requestId` of a write and the fingerprint of its arguments.
#[derive(Debug, Clone)]
pub(crate) struct RequestKey {
    pub id: String,
    pub fingerprint: String,
}

/// An idempotency record, under the organization's `requestId`: what the first call answered.
/// A retry with the same fingerprint is answered `data` again; one with another is a `conflict`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct IdempotencyRecord<'a> {
    /// The fingerprint of the call: tool, arguments without `requestId`, and caller.
    pub fingerprint: Cow<'a, str>,
    /// The run the call wrote to; none for an `upload`, which writes to no run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<Cow<'a, str>>,
    /// When the call was committed, RFC 3339.
    #[serde(with = "crate::rfc3339")]
    pub at: Timestamp,
    /// The original result's `data`.
    pub data: Cow<'a, Value>,
}

impl IdempotencyRecord<'_> {
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("JSON values always serialize")
    }
}

/// The answer recorded for `request_id`: the original result for the same arguments,
/// `conflict` for other arguments; `None` when there is no record.
pub(crate) async fn replay(
    store: &dyn Store,
    keys: &Keys,
    organization: &OrgId,
    request_id: &str,
    fingerprint: &str,
) -> Result<Option<ToolOutcome>, RuntimeError> {
    let (record, _) = store.get(&keys.idempotency(organization, request_id)).await?;
    let Some(record) = record else { return Ok(None) };
    let record: IdempotencyRecord = serde_json::from_slice(&record.value)
        .map_err(|e| RuntimeError::Corrupt(format!("idempotency record {request_id}: {e}")))?;
    if record.fingerprint == fingerprint {
        Ok(Some(ToolOutcome::Ok(record.data.into_owned())))
    } else {
        Ok(Some(ToolOutcome::Refused(Refusal::conflict(
            "request_id_reused",
            "this requestId was used with other arguments",
        ))))
    }
}

/// The fingerprint of a protocol write by `caller`.
pub(crate) fn of_write(caller: &Caller, write: &Write) -> String {
    let (tool, arguments) = write_arguments(write);
    fingerprint(tool, caller, arguments)
}

/// The fingerprint of an `upload` by `caller`; the content stands in by its SHA-256.
pub(crate) fn of_upload(caller: &Caller, upload: &Upload, content_sha256: &str) -> String {
    let arguments = json!({
        "fileName": upload.file_name,
        "contentType": upload.content_type,
        "contentSha256": content_sha256,
    });
    fingerprint("upload", caller, arguments)
}

fn fingerprint(tool: &str, caller: &Caller, arguments: Value) -> String {
    let value = json!({ "tool": tool, "caller": caller_identity(caller), "arguments": arguments });
    let mut canonical = canonical_json(&value);
    if canonical.is_empty() {
        // A number beyond a double has no canonical form: fall back to the numbers' text as
        // sent, with keys sorted, so such arguments still compare by value and never collide.
        canonical = serde_json::to_vec(&sorted_keys(value)).expect("a JSON value serializes");
    }
    hex(&Sha256::digest(&canonical))
}

/// Who calls: the organization, the agent or person and whether it acts as an operator. A
/// person's groups are left out: they are permissions that may change between a call and its
/// retry, not identity. The keys are part of every stored fingerprint: NEVER rename them.
fn caller_identity(caller: &Caller) -> Value {
    let who = match &caller.kind {
        CallerKind::Agent { id } => json!({ "agent": id }),
        CallerKind::Person { email, .. } => json!({ "person": email }),
    };
    json!({
        "organization": caller.organization,
        "actor": who,
        "operator": caller.operator,
    })
}

/// The tool's name and its arguments as JSON (without `requestId`). An absent optional argument
/// is left out, so it reads the same as one that is not sent.
fn write_arguments(write: &Write) -> (&'static str, Value) {
    let mut arguments = Map::new();
    let tool = match write {
        Write::StartRun {
            process,
            version,
            inputs,
            mode,
        } => {
            arguments.insert("process".into(), json!(process));
            insert_some(&mut arguments, "version", version.map(Value::from));
            arguments.insert("inputs".into(), inputs.clone());
            arguments.insert("mode".into(), json!(mode.as_str()));
            "start_run"
        }
        Write::Claim { run_id, step } => {
            arguments.insert("runId".into(), json!(run_id));
            arguments.insert("step".into(), json!(step));
            "claim"
        }
        Write::Renew { token, progress } => {
            arguments.insert("token".into(), json!(token));
            insert_some(&mut arguments, "progress", progress.clone().map(Value::from));
            "renew"
        }
        Write::Submit { token, submission } => {
            arguments.insert("token".into(), json!(token));
            submission_arguments(&mut arguments, submission);
            "submit"
        }
        Write::Escalate { token, note } => {
            arguments.insert("token".into(), json!(token));
            arguments.insert("note".into(), json!(note));
            "escalate"
        }
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
        } => {
            arguments.insert("runId".into(), json!(run_id));
            arguments.insert("workItem".into(), json!(work_item));
            arguments.insert("snapshot".into(), json!(snapshot));
            arguments.insert("decision".into(), json!(decision.as_str()));
            insert_some(&mut arguments, "output", output.clone().map(Value::Object));
            insert_some(&mut arguments, "evidence", evidence.as_deref().map(evidence_json));
            insert_some(&mut arguments, "summary", summary.clone().map(Value::from));
            insert_some(&mut arguments, "next", next.clone().map(Value::from));
            insert_some(&mut arguments, "reason", reason.clone().map(Value::from));
            insert_some(&mut arguments, "note", note.clone().map(Value::from));
            "decide"
        }
        Write::Cancel { run_id, reason } => {
            arguments.insert("runId".into(), json!(run_id));
            arguments.insert("reason".into(), json!(reason));
            "cancel"
        }
        Write::SendEvent { run_id, name, data } => {
            arguments.insert("runId".into(), json!(run_id));
            arguments.insert("name".into(), json!(name));
            insert_some(&mut arguments, "data", data.clone().map(Value::Object));
            "send_event"
        }
    };
    (tool, Value::Object(arguments))
}

fn submission_arguments(arguments: &mut Map<String, Value>, submission: &Submission) {
    insert_some(arguments, "output", submission.output.clone().map(Value::Object));
    arguments.insert("evidence".into(), evidence_json(&submission.evidence));
    insert_some(arguments, "summary", submission.summary.clone().map(Value::from));
    insert_some(arguments, "next", submission.next.clone().map(Value::from));
    insert_some(arguments, "reason", submission.reason.clone().map(Value::from));
}

fn evidence_json(evidence: &[EvidenceItem]) -> Value {
    evidence
        .iter()
        .map(|item| json!({ "kind": item.kind, "ref": item.reference }))
        .collect()
}

fn insert_some(arguments: &mut Map<String, Value>, name: &str, value: Option<Value>) {
    if let Some(value) = value {
        arguments.insert(name.into(), value);
    }
}

/// `value` with the keys of every object in sorted order (objects keep insertion order).
fn sorted_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(key, value)| (key, sorted_keys(value)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted_keys).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::StepId;
    use agentprocess_service::Mode;

    fn agent() -> Caller {
        Caller {
            organization: "acme".into(),
            kind: CallerKind::Agent { id: "a1".into() },
            operator: false,
        }
    }

    fn start(inputs: Value) -> Write {
        Write::StartRun {
            process: "p".into(),
            version: None,
            inputs,
            mode: Mode::Live,
        }
    }

    #[test]
    fn key_order_and_number_spelling_do_not_change_the_fingerprint() {
        let one: Value = serde_json::from_str(r#"{"a": 1.50, "b": {"x": 1, "y": [2, 3]}}"#).unwrap();
        let other: Value = serde_json::from_str(r#"{"b": {"y": [2, 3], "x": 1}, "a": 1.5}"#).unwrap();
        assert_eq!(
            of_write(&agent(), &start(one.clone())),
            of_write(&agent(), &start(other))
        );
        let changed: Value = serde_json::from_str(r#"{"a": 1.5, "b": {"x": 2, "y": [2, 3]}}"#).unwrap();
        assert_ne!(
            of_write(&agent(), &start(one)),
            of_write(&agent(), &start(changed))
        );
    }

    #[test]
    fn the_tool_and_the_caller_are_part_of_the_fingerprint() {
        let claim = Write::Claim {
            run_id: "r_1".into(),
            step: StepId::from_wire("s"),
        };
        let cancel = Write::Cancel {
            run_id: "r_1".into(),
            reason: "s".into(),
        };
        assert_ne!(of_write(&agent(), &claim), of_write(&agent(), &cancel));
        let mut operator = agent();
        operator.operator = true;
        assert_ne!(of_write(&agent(), &claim), of_write(&operator, &claim));
        let mut elsewhere = agent();
        elsewhere.organization = "other".into();
        assert_ne!(of_write(&agent(), &claim), of_write(&elsewhere, &claim));
    }

    #[test]
    fn numbers_beyond_a_double_still_tell_arguments_apart() {
        let one: Value = serde_json::from_str(r#"{"n": 1e400, "a": 1}"#).unwrap();
        let same: Value = serde_json::from_str(r#"{"a": 1, "n": 1e400}"#).unwrap();
        let other: Value = serde_json::from_str(r#"{"n": 2e400, "a": 1}"#).unwrap();
        assert_eq!(
            of_write(&agent(), &start(one.clone())),
            of_write(&agent(), &start(same))
        );
        assert_ne!(of_write(&agent(), &start(one)), of_write(&agent(), &start(other)));
    }
}
