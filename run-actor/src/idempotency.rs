//! Idempotency, all in one place (spec §4: repeating a write with the same arguments returns the
//! original result; other arguments under the same `requestId` is a `conflict`): what "the same
//! arguments" means, the record a write commits, and the replay a retry gets.
//!
//! A fingerprint is the SHA-256 of the RFC 8785 canonical JSON of `{ tool, caller, arguments }`,
//! with the arguments under their names on the wire. Canonical JSON makes the order of keys and
//! the spelling of a number (`1.5`, `1.50`, `15e-1`) irrelevant, as they are to JSON itself.

use crate::call::{RuntimeError, ToolOutcome};
use crate::machine::{Caller, CallerKind, OrgId, Refusal, Timestamp, hex};
use crate::packed::decompress;
use crate::pinned::PinnedProcesses;
use agentprocess_process::hash::canonical_json;
use agentprocess_service::{EvidenceItem, Submission, Upload, Write};
use agentprocess_store::keys::Keys;
use agentprocess_store::{Store, TxnOp};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::borrow::Cow;

/// The first byte of a record in the compact format, which kept the payload under the
/// `requestId`. Older builds still wrote the whole record as JSON, whose first byte is `{`. Both
/// are read; only [`SPLIT_FORMAT`] is written.
const COMPACT_FORMAT: u8 = 1;
/// The first byte of a record in the split format: the fingerprint and the expiry under the
/// `requestId`, the payload under the record's expiry entry.
const SPLIT_FORMAT: u8 = 2;
/// The bytes of a split record: its format byte, the fingerprint, the expiry (ms, big-endian).
const SPLIT_RECORD_BYTES: usize = 1 + 32 + 8;
/// How a zstd frame begins. Builds before LZ4 wrote the compact payload as a zstd frame under
/// the same format byte; as an LZ4 block's size these bytes would read over 4 GB, so a payload
/// that begins with them is a zstd frame, still read.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// The SHA-256 of a call's canonical `{ tool, caller, arguments }` (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fingerprint(pub [u8; 32]);

/// The `requestId` of a write and the fingerprint of its arguments.
#[derive(Debug, Clone)]
pub(crate) struct RequestKey {
    pub id: String,
    pub fingerprint: Fingerprint,
}

/// The body of the process version a run pins, which run views and claim results carry. A
/// published version never changes, so a record names the version instead of storing its body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PinnedBody<'a> {
    pub process: &'a str,
    pub version: u64,
    pub body: &'a str,
}

/// An idempotency record, under the organization's `requestId`: what the first call answered.
/// A retry with the same fingerprint is answered `data` again, byte for byte; one with another
/// fingerprint is a `conflict`.
///
/// Stored split in two, both written by the write's own transaction and removed together by the
/// sweep that reads the expiry index:
/// - under the `requestId`, 41 bytes: the format byte [`SPLIT_FORMAT`], the 32 bytes of the
///   fingerprint and the expiry in milliseconds (8 bytes, big-endian), which names the second
///   key. Every write checks this key; a `conflict` is answered from it alone.
/// - under the expiry entry (`idemexpiry/<expiresAt>/<org>/<requestId>`): an LZ4 block of the
///   JSON [`Payload`] after its size (4 bytes, little-endian), read only by a replay. `data`'s
///   top-level `body`, when it is the pinned process's, is stored as `null` in its place and
///   the payload names the process version, whose body a replay puts back.
///
/// Why split: request ids are random, so the records under them are spread over the whole key
/// space, and each new one lands on a random page. With only 41 bytes there, those pages hold
/// many times more records and stay in the cache; the payloads go under keys ordered by time,
/// which fill the last pages one after another. (Builds before wrote the block after the
/// fingerprint under the `requestId`, [`COMPACT_FORMAT`]; still read.)
///
/// LZ4 rather than zstd: on the load processes' records (BENCHMARKS.md) zstd level 1 kept 55%
/// of the payload's bytes and LZ4 71%, but zstd cost the server 5 to 9% more CPU per run and
/// LZ4 nothing measurable. Every write pays the compression; only a retry reads it back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IdempotencyRecord<'a> {
    /// The fingerprint of the call: tool, arguments without `requestId`, and caller.
    pub fingerprint: &'a Fingerprint,
    /// The run the call wrote to; none for an `upload`, which writes to no run.
    pub run_id: Option<&'a str>,
    /// When the call was committed.
    pub at: Timestamp,
    /// The original result's `data`.
    pub data: &'a Value,
    /// The body of the process the run pins, if any: left out of the stored `data`.
    pub pinned_body: Option<PinnedBody<'a>>,
}

/// The compressed part of a compact record. Its field names are stored: NEVER rename them.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Payload<'a, D> {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run_id: Option<Cow<'a, str>>,
    #[serde(with = "crate::rfc3339")]
    at: Timestamp,
    /// The process version whose body `data.body` is, when the body was left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body_of: Option<BodyOf<'a>>,
    data: D,
}

/// A process version, by name and number, in the organization of the record.
#[derive(Debug, Serialize, Deserialize)]
struct BodyOf<'a> {
    process: Cow<'a, str>,
    version: u64,
}

/// A record as older builds wrote it: JSON, the fingerprint in hex. Read, never written.
#[derive(Debug, Deserialize)]
struct JsonRecord {
    fingerprint: String,
    data: Value,
}

impl IdempotencyRecord<'_> {
    /// The two puts of the record, kept until `expires_at`: under `request_id` and under its
    /// expiry entry (see the type's doc).
    pub(crate) fn puts(
        self,
        keys: &Keys,
        organization: &OrgId,
        request_id: &str,
        expires_at: Timestamp,
    ) -> [TxnOp; 2] {
        let expires_at_ms = u64::try_from(expires_at.as_millis()).unwrap_or(0);
        let mut record = Vec::with_capacity(SPLIT_RECORD_BYTES);
        record.push(SPLIT_FORMAT);
        record.extend_from_slice(&self.fingerprint.0);
        record.extend_from_slice(&expires_at_ms.to_be_bytes());
        [
            TxnOp::put(keys.idempotency(organization, request_id), record),
            TxnOp::put(
                keys.idempotency_expiry(expires_at_ms, organization, request_id),
                self.payload_block(),
            ),
        ]
    }

    /// The payload: an LZ4 block of its JSON, after the JSON's size.
    fn payload_block(self) -> Vec<u8> {
        let body_of = self
            .pinned_body
            .filter(|pinned| self.data.get("body").and_then(Value::as_str) == Some(pinned.body));
        let payload = Payload {
            run_id: self.run_id.map(Cow::Borrowed),
            at: self.at,
            body_of: body_of.map(|pinned| BodyOf {
                process: Cow::Borrowed(pinned.process),
                version: pinned.version,
            }),
            data: DataWithoutBody {
                data: self.data,
                without_body: body_of.is_some(),
            },
        };
        let json = serde_json::to_vec(&payload).expect("JSON values always serialize");
        lz4_flex::block::compress_prepend_size(&json)
    }
}

/// `data` with its top-level `body` written as `null`, keeping the key in its place so that a
/// replay puts the body back where it was (objects keep their key order).
struct DataWithoutBody<'a> {
    data: &'a Value,
    without_body: bool,
}

impl Serialize for DataWithoutBody<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (Value::Object(entries), true) = (self.data, self.without_body) else {
            return self.data.serialize(serializer);
        };
        let mut map = serializer.serialize_map(Some(entries.len()))?;
        for (key, value) in entries {
            if key == "body" {
                map.serialize_entry(key, &Value::Null)?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// A stored record, read in whichever format it was written.
enum StoredRecord<'a> {
    Json(JsonRecord),
    Compact {
        fingerprint: &'a [u8],
        compression: Compression,
        payload: &'a [u8],
    },
    Split {
        fingerprint: &'a [u8],
        expires_at_ms: u64,
    },
}

/// How a compact record's payload is compressed: LZ4, or zstd in records from before LZ4.
#[derive(Debug, Clone, Copy)]
enum Compression {
    Lz4,
    Zstd,
}

impl<'a> StoredRecord<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Self, String> {
        match bytes.first() {
            Some(b'{') => serde_json::from_slice(bytes)
                .map(StoredRecord::Json)
                .map_err(|e| e.to_string()),
            Some(&COMPACT_FORMAT) if bytes.len() > 33 => Ok(StoredRecord::Compact {
                fingerprint: &bytes[1..33],
                compression: if bytes[33..].starts_with(&ZSTD_MAGIC) {
                    Compression::Zstd
                } else {
                    Compression::Lz4
                },
                payload: &bytes[33..],
            }),
            Some(&SPLIT_FORMAT) if bytes.len() == SPLIT_RECORD_BYTES => Ok(StoredRecord::Split {
                fingerprint: &bytes[1..33],
                expires_at_ms: u64::from_be_bytes(bytes[33..].try_into().expect("8 bytes")),
            }),
            Some(format) => Err(format!("unknown format {format} or truncated record")),
            None => Err("empty record".into()),
        }
    }

    fn is_of(&self, fingerprint: &Fingerprint) -> bool {
        match self {
            StoredRecord::Json(record) => record.fingerprint == hex(&fingerprint.0),
            StoredRecord::Compact {
                fingerprint: stored, ..
            }
            | StoredRecord::Split {
                fingerprint: stored, ..
            } => *stored == fingerprint.0.as_slice(),
        }
    }
}

/// The answer recorded for `request_id`: the original result for the same arguments,
/// `conflict` for other arguments; `None` when there is no record (also when the sweep removed
/// it between the reads of its two halves). A body left out of the record is read from the
/// pinned process version it names.
pub(crate) async fn replay(
    store: &dyn Store,
    keys: &Keys,
    pinned: &PinnedProcesses,
    organization: &OrgId,
    request_id: &str,
    fingerprint: &Fingerprint,
) -> Result<Option<ToolOutcome>, RuntimeError> {
    let (record, _) = store.get(&keys.idempotency(organization, request_id)).await?;
    let Some(record) = record else { return Ok(None) };
    let corrupt = |why: String| RuntimeError::Corrupt(format!("idempotency record {request_id}: {why}"));
    let stored = StoredRecord::parse(&record.value).map_err(corrupt)?;
    if !stored.is_of(fingerprint) {
        return Ok(Some(ToolOutcome::Refused(Refusal::conflict(
            "request_id_reused",
            "this requestId was used with other arguments",
        ))));
    }
    let json = match stored {
        StoredRecord::Json(record) => return Ok(Some(ToolOutcome::Ok(record.data))),
        StoredRecord::Split { expires_at_ms, .. } => {
            let (payload, _) = store
                .get(&keys.idempotency_expiry(expires_at_ms, organization, request_id))
                .await?;
            match payload {
                Some(payload) => decompress(&payload.value).map_err(corrupt)?,
                None => {
                    // One transaction removes both halves: with the first gone too, the sweep
                    // ran between the reads; with it still there, the payload is missing.
                    let (again, _) = store.get(&keys.idempotency(organization, request_id)).await?;
                    return match again {
                        None => Ok(None),
                        Some(_) => Err(corrupt("its payload under the expiry entry is missing".into())),
                    };
                }
            }
        }
        StoredRecord::Compact {
            compression: Compression::Lz4,
            payload,
            ..
        } => decompress(payload).map_err(corrupt)?,
        StoredRecord::Compact {
            compression: Compression::Zstd,
            payload,
            ..
        } => zstd::stream::decode_all(payload).map_err(|e| corrupt(e.to_string()))?,
    };
    let payload: Payload<Value> = serde_json::from_slice(&json).map_err(|e| corrupt(e.to_string()))?;
    let mut data = payload.data;
    if let Some(BodyOf { process, version }) = payload.body_of {
        let found = pinned
            .get(organization, &process, version)
            .await?
            .ok_or_else(|| corrupt(format!("it names {process} v{version}, which is not published")))?;
        match data.get_mut("body") {
            Some(body) => *body = Value::String(found.body.clone()),
            None => return Err(corrupt("its data has no body to put back".into())),
        }
    }
    Ok(Some(ToolOutcome::Ok(data)))
}

/// The fingerprint of a protocol write by `caller`.
pub(crate) fn of_write(caller: &Caller, write: &Write) -> Fingerprint {
    let (tool, arguments) = write_arguments(write);
    fingerprint(tool, caller, arguments)
}

/// The fingerprint of an `upload` by `caller`; the content stands in by its SHA-256.
pub(crate) fn of_upload(caller: &Caller, upload: &Upload, content_sha256: &str) -> Fingerprint {
    let arguments = json!({
        "fileName": upload.file_name,
        "contentType": upload.content_type,
        "contentSha256": content_sha256,
    });
    fingerprint("upload", caller, arguments)
}

fn fingerprint(tool: &str, caller: &Caller, arguments: Value) -> Fingerprint {
    let value = json!({ "tool": tool, "caller": caller_identity(caller), "arguments": arguments });
    let mut canonical = canonical_json(&value);
    if canonical.is_empty() {
        // A number beyond a double has no canonical form: fall back to the numbers' text as
        // sent, with keys sorted, so such arguments still compare by value and never collide.
        canonical = serde_json::to_vec(&sorted_keys(value)).expect("a JSON value serializes");
    }
    Fingerprint(Sha256::digest(&canonical).into())
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
    use agentprocess_org::{Catalog, Clock};
    use agentprocess_service::Mode;
    use agentprocess_store::{EmbeddedOptions, EmbeddedStore, TxnOp};
    use std::sync::Arc;

    const SOURCE: &str = "---\nname: p\ndescription: d\nsteps:\n  - id: a\n    agent: Do it.\n  - id: done\n    finish: done\n---\n\n# P\n\nThe body, which every run view and claim result carries.\n";

    /// A store with [`SOURCE`] published as `p` v1 in `acme`, and the pinned processes over it.
    async fn published() -> (Arc<dyn Store>, Keys, PinnedProcesses) {
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::in_memory(EmbeddedOptions::default()));
        let keys = Keys::new("default");
        let catalog = Catalog::new(store.clone(), keys.clone(), Clock::starting_at(at()));
        let version = catalog
            .publish(&"acme".into(), SOURCE.as_bytes(), indexmap::IndexMap::new())
            .await
            .unwrap();
        assert_eq!(version, 1);
        (store, keys, PinnedProcesses::new(catalog))
    }

    fn at() -> Timestamp {
        Timestamp::parse_rfc3339("2030-01-01T00:00:00Z").unwrap()
    }

    /// A claim result's shape: `body` between other keys, a number whose text matters.
    fn claim_result(body: &str) -> Value {
        serde_json::from_str(&format!(
            r#"{{"token":"t_1","expiresAt":"2030-01-01T00:10:00Z","handoff":null,"body":{},"data":{{"inputs":{{"n":1.50}},"steps":{{}}}}}}"#,
            Value::from(body)
        ))
        .unwrap()
    }

    async fn put(store: &dyn Store, keys: &Keys, request_id: &str, bytes: Vec<u8>) {
        let txn = agentprocess_store::Txn::new()
            .and_then([TxnOp::put(keys.idempotency(&"acme".into(), request_id), bytes)]);
        assert!(store.txn(txn).await.unwrap().succeeded);
    }

    /// Commits `record` as a write does: both halves, kept a day.
    async fn commit(store: &dyn Store, keys: &Keys, request_id: &str, record: IdempotencyRecord<'_>) {
        let puts = record.puts(keys, &"acme".into(), request_id, at().plus_seconds(86_400));
        let txn = agentprocess_store::Txn::new().and_then(puts);
        assert!(store.txn(txn).await.unwrap().succeeded);
    }

    /// `record` in the compact format of the builds before the split: one value.
    fn compact(record: IdempotencyRecord<'_>) -> Vec<u8> {
        let mut bytes = vec![COMPACT_FORMAT];
        bytes.extend_from_slice(&record.fingerprint.0);
        bytes.extend_from_slice(&record.payload_block());
        bytes
    }

    async fn replayed(
        store: &dyn Store,
        keys: &Keys,
        pinned: &PinnedProcesses,
        request_id: &str,
        fingerprint: &Fingerprint,
    ) -> ToolOutcome {
        replay(store, keys, pinned, &"acme".into(), request_id, fingerprint)
            .await
            .unwrap()
            .expect("a record")
    }

    fn text(outcome: ToolOutcome) -> String {
        match outcome {
            ToolOutcome::Ok(data) => serde_json::to_string(&data).unwrap(),
            ToolOutcome::Refused(refusal) => panic!("refused: {refusal}"),
        }
    }

    fn is_conflict(outcome: &ToolOutcome) -> bool {
        matches!(outcome, ToolOutcome::Refused(refusal) if refusal.issues == ["request_id_reused"])
    }

    /// Spec §4 across an upgrade: a record written as JSON by an older build replays the
    /// original result byte for byte, and other arguments under its `requestId` still conflict.
    #[tokio::test]
    async fn a_record_from_before_the_compact_format_replays_byte_for_byte() {
        let (store, keys, pinned) = published().await;
        let fingerprint = Fingerprint([0x9f; 32]);
        let data = serde_json::to_string(&claim_result("# An older body\n")).unwrap();
        let older = format!(
            r#"{{"fingerprint":"{}","runId":"r_1","at":"2030-01-01T00:00:00Z","data":{data}}}"#,
            hex(&fingerprint.0)
        );
        put(store.as_ref(), &keys, "c-1", older.into_bytes()).await;
        let answer = replayed(store.as_ref(), &keys, &pinned, "c-1", &fingerprint).await;
        assert_eq!(text(answer), data, "same keys, same order, numbers as written");
        let other = replayed(store.as_ref(), &keys, &pinned, "c-1", &Fingerprint([1; 32])).await;
        assert!(is_conflict(&other));

        let older_upload = r#"{"fingerprint":"77aa","at":"2030-01-01T00:00:00Z","data":{"id":"f_1","sha256":"ab","bytes":8}}"#;
        put(store.as_ref(), &keys, "u-1", older_upload.as_bytes().to_vec()).await;
        let other = replayed(store.as_ref(), &keys, &pinned, "u-1", &fingerprint).await;
        assert!(is_conflict(&other), "a hex fingerprint compares with the raw one");
    }

    /// The record of a write to a run of `p` v1, whose pinned body is `body`.
    fn record_of_p1<'a>(
        fingerprint: &'a Fingerprint,
        data: &'a Value,
        body: &'a str,
    ) -> IdempotencyRecord<'a> {
        IdempotencyRecord {
            fingerprint,
            run_id: Some("r_1"),
            at: at(),
            data,
            pinned_body: Some(PinnedBody {
                process: "p",
                version: 1,
                body,
            }),
        }
    }

    /// The record is split: 41 bytes under the `requestId` (format, fingerprint, expiry), the
    /// payload under the expiry entry. The pinned process's body is left out of the payload and
    /// put back in its place by a replay.
    #[tokio::test]
    async fn a_record_keeps_its_payload_under_its_expiry_and_names_the_pinned_body() {
        let (store, keys, pinned) = published().await;
        let process = pinned.get(&"acme".into(), "p", 1).await.unwrap().unwrap();
        let data = claim_result(&process.body);
        let fingerprint = Fingerprint([7; 32]);
        let expires_at = at().plus_seconds(86_400);
        let [under_request, under_expiry] =
            record_of_p1(&fingerprint, &data, &process.body).puts(&keys, &"acme".into(), "c-1", expires_at);
        let expires_at_ms = u64::try_from(expires_at.as_millis()).unwrap();
        let TxnOp::Put { key, value, .. } = &under_request else {
            panic!("{under_request:?}")
        };
        assert_eq!(key, &keys.idempotency(&"acme".into(), "c-1"));
        assert_eq!(value.len(), SPLIT_RECORD_BYTES);
        assert_eq!(value[0], SPLIT_FORMAT);
        assert_eq!(&value[1..33], &fingerprint.0);
        assert_eq!(value[33..], expires_at_ms.to_be_bytes());
        let TxnOp::Put { key, value, .. } = &under_expiry else {
            panic!("{under_expiry:?}")
        };
        assert_eq!(
            key,
            &keys.idempotency_expiry(expires_at_ms, &"acme".into(), "c-1")
        );
        let payload = String::from_utf8(decompress(value).unwrap()).unwrap();
        assert!(!payload.contains("every run view"), "{payload}");
        assert!(
            payload.contains(r#""bodyOf":{"process":"p","version":1}"#),
            "{payload}"
        );
        commit(
            store.as_ref(),
            &keys,
            "c-1",
            record_of_p1(&fingerprint, &data, &process.body),
        )
        .await;

        // A cold cache, as after a restart: the body comes from the published version.
        let cold = PinnedProcesses::new(Catalog::new(
            store.clone(),
            keys.clone(),
            Clock::starting_at(at()),
        ));
        let answer = replayed(store.as_ref(), &keys, &cold, "c-1", &fingerprint).await;
        assert_eq!(text(answer), serde_json::to_string(&data).unwrap());
        let other = replayed(store.as_ref(), &keys, &cold, "c-1", &Fingerprint([8; 32])).await;
        assert!(is_conflict(&other));
    }

    /// Spec §4 across an upgrade: a record in one value, as builds before the split wrote it,
    /// replays byte for byte with its body put back; other arguments still conflict.
    #[tokio::test]
    async fn a_compact_record_from_before_the_split_replays_byte_for_byte() {
        let (store, keys, pinned) = published().await;
        let process = pinned.get(&"acme".into(), "p", 1).await.unwrap().unwrap();
        let data = claim_result(&process.body);
        let fingerprint = Fingerprint([7; 32]);
        let older = compact(record_of_p1(&fingerprint, &data, &process.body));
        put(store.as_ref(), &keys, "c-1", older).await;
        let answer = replayed(store.as_ref(), &keys, &pinned, "c-1", &fingerprint).await;
        assert_eq!(text(answer), serde_json::to_string(&data).unwrap());
        let other = replayed(store.as_ref(), &keys, &pinned, "c-1", &Fingerprint([8; 32])).await;
        assert!(is_conflict(&other));
    }

    /// A record whose payload is a zstd frame, as builds before LZ4 wrote it, replays byte for
    /// byte with its body put back.
    #[tokio::test]
    async fn a_record_with_a_zstd_payload_from_before_lz4_replays_byte_for_byte() {
        let (store, keys, pinned) = published().await;
        let process = pinned.get(&"acme".into(), "p", 1).await.unwrap().unwrap();
        let data = claim_result(&process.body);
        let fingerprint = Fingerprint([7; 32]);
        let payload = decompress(&record_of_p1(&fingerprint, &data, &process.body).payload_block()).unwrap();
        let mut older = vec![COMPACT_FORMAT];
        older.extend_from_slice(&fingerprint.0);
        older.extend_from_slice(&zstd::bulk::compress(&payload, 1).unwrap());
        put(store.as_ref(), &keys, "c-1", older).await;
        let answer = replayed(store.as_ref(), &keys, &pinned, "c-1", &fingerprint).await;
        assert_eq!(text(answer), serde_json::to_string(&data).unwrap());
        let other = replayed(store.as_ref(), &keys, &pinned, "c-1", &Fingerprint([8; 32])).await;
        assert!(is_conflict(&other));
    }

    /// Only the pinned body is left out: a `body` with other text is stored as it is.
    #[tokio::test]
    async fn a_body_that_is_not_the_pinned_one_is_kept_in_the_record() {
        let (store, keys, pinned) = published().await;
        let data = claim_result("not the published body");
        let fingerprint = Fingerprint([7; 32]);
        let record = record_of_p1(&fingerprint, &data, "the published body");
        commit(store.as_ref(), &keys, "c-1", record).await;
        let answer = replayed(store.as_ref(), &keys, &pinned, "c-1", &fingerprint).await;
        assert_eq!(text(answer), serde_json::to_string(&data).unwrap());
    }

    /// An unknown format, a compact record whose block claims more than it can hold, and a
    /// split record whose payload is missing are `Corrupt`, read without allocating what the
    /// block claims.
    #[tokio::test]
    async fn a_record_in_no_known_format_or_with_a_broken_block_is_corrupt() {
        let (store, keys, pinned) = published().await;
        let fingerprint = Fingerprint([0; 32]);
        let mut oversized = vec![COMPACT_FORMAT];
        oversized.extend_from_slice(&fingerprint.0);
        oversized.extend_from_slice(&u32::MAX.to_le_bytes());
        oversized.push(0);
        let record = IdempotencyRecord {
            fingerprint: &fingerprint,
            run_id: None,
            at: at(),
            data: &claim_result("b"),
            pinned_body: None,
        };
        let mut truncated = compact(record);
        truncated.truncate(truncated.len() - 8);
        let [
            TxnOp::Put {
                value: without_payload,
                ..
            },
            _,
        ] = record.puts(&keys, &"acme".into(), "c-1", at())
        else {
            panic!("two puts")
        };
        for bytes in [vec![9, 1, 2, 3], oversized, truncated, without_payload] {
            put(store.as_ref(), &keys, "c-1", bytes).await;
            let error = replay(
                store.as_ref(),
                &keys,
                &pinned,
                &"acme".into(),
                "c-1",
                &fingerprint,
            )
            .await
            .unwrap_err();
            assert!(matches!(error, RuntimeError::Corrupt(_)), "{error}");
        }
    }

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
