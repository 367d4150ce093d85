//! Uploads: the bytes go to a blob store, their SHA-256 and size to an upload record of the
//! organization. File evidence names an upload id; the machine's lookup asks whether it exists
//! in the organization and whether the stored bytes still match the recorded hash.

use super::{Inner, RuntimeError, ToolOutcome, hex};
use crate::actor::{self};
use crate::machine::{Caller, Refusal, UploadStatus};
use agentprocess_store::{Compare, Txn, TxnOp};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// Where uploaded bytes live. Paths are relative, made of `[0-9a-z_/]` only.
#[async_trait]
pub trait BlobStore: Send + Sync + std::fmt::Debug {
    /// Stores `bytes` at `path` durably, replacing what was there.
    async fn put(&self, path: &str, bytes: &[u8]) -> Result<(), String>;
    /// The bytes at `path`, or `None` when there are none.
    async fn get(&self, path: &str) -> Result<Option<Vec<u8>>, String>;
}

/// A blob store in a local directory: the default for a single machine.
#[derive(Debug, Clone)]
pub struct LocalBlobs {
    dir: PathBuf,
}

impl LocalBlobs {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        LocalBlobs { dir: dir.into() }
    }
}

#[async_trait]
impl BlobStore for LocalBlobs {
    async fn put(&self, path: &str, bytes: &[u8]) -> Result<(), String> {
        let target = self.dir.join(path);
        let temporary = target.with_extension("partial");
        let bytes = bytes.to_vec();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            use std::io::Write;
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let mut file = std::fs::File::create(&temporary)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            std::fs::rename(&temporary, &target)?;
            if let Some(parent) = target.parent() {
                std::fs::File::open(parent)?.sync_all()?;
            }
            Ok(())
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("writing {path}: {e}"))
    }

    async fn get(&self, path: &str) -> Result<Option<Vec<u8>>, String> {
        match tokio::fs::read(self.dir.join(path)).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("reading {path}: {e}")),
        }
    }
}

/// The `upload` tool's arguments, with the content already decoded from base64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    pub file_name: String,
    pub content_type: String,
    pub bytes: Vec<u8>,
}

/// What is recorded about an upload, under the organization's keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UploadRecord {
    pub id: String,
    pub file_name: String,
    pub content_type: String,
    pub sha256: String,
    pub bytes: u64,
    /// Where the bytes are in the blob store.
    pub path: String,
    pub by: String,
}

fn blob_path(organization: &str, id: &str) -> String {
    format!("{}/{id}", hex(organization.as_bytes()))
}

pub(super) async fn upload(
    inner: &Inner,
    caller: &Caller,
    upload: Upload,
    request_id: &str,
) -> Result<ToolOutcome, RuntimeError> {
    let organization = caller.organization.as_str();
    let max = inner.config.max_upload_bytes;
    if upload.bytes.len() > max {
        return Ok(ToolOutcome::Refused(
            Refusal::invalid(format!("the file is larger than maxUploadBytes ({max})"))
                .with_issues(vec![format!("contentBase64: larger than {max} bytes")]),
        ));
    }
    let sha256 = hex(&Sha256::digest(&upload.bytes));
    let fingerprint = super::fingerprint::of_upload(caller, &upload, &sha256);
    if let Some(answer) = actor::replay(inner, organization, request_id, &fingerprint).await? {
        return Ok(answer);
    }
    // The id comes from the request, so a retry writes the same blob and finds the same record.
    let id = {
        let mut hasher = Sha256::new();
        hasher.update(organization.as_bytes());
        hasher.update([0]);
        hasher.update(request_id.as_bytes());
        format!("f_{}", &hex(&hasher.finalize())[..20])
    };
    let path = blob_path(organization, &id);
    inner
        .blobs
        .put(&path, &upload.bytes)
        .await
        .map_err(RuntimeError::Blobs)?;
    let record = UploadRecord {
        id: id.clone(),
        file_name: upload.file_name,
        content_type: upload.content_type,
        sha256: sha256.clone(),
        bytes: upload.bytes.len() as u64,
        path,
        by: caller.name().to_string(),
    };
    let data = json!({ "id": id, "sha256": sha256, "bytes": record.bytes });
    let now = inner.clock.now();
    let expires = now.plus_seconds(inner.config.idempotency_retention.as_secs());
    let idempotency = inner.keys.idempotency(organization, request_id);
    let txn = Txn::new().when([Compare::absent(idempotency.clone())]).and_then([
        TxnOp::put(
            inner.keys.upload(organization, &id),
            serde_json::to_vec(&record).expect("an upload record serializes"),
        ),
        TxnOp::put(
            idempotency,
            json!({ "fingerprint": fingerprint, "at": now.to_rfc3339(), "data": data }).to_string(),
        ),
        TxnOp::put(
            inner.keys.idempotency_expiry(
                u64::try_from(expires.as_millis()).unwrap_or(0),
                organization,
                request_id,
            ),
            Vec::new(),
        ),
    ]);
    if inner.store.txn(txn).await?.succeeded {
        return Ok(ToolOutcome::Ok(data));
    }
    Ok(actor::replay(inner, organization, request_id, &fingerprint)
        .await?
        .unwrap_or(ToolOutcome::Ok(data)))
}

/// Whether `upload_id` exists in the organization and its stored bytes still match.
pub(super) async fn verify(
    inner: &Inner,
    organization: &str,
    upload_id: &str,
) -> Result<UploadStatus, RuntimeError> {
    let (record, _) = inner
        .store
        .get(&inner.keys.upload(organization, upload_id))
        .await?;
    let Some(record) = record else {
        return Ok(UploadStatus::NotFound);
    };
    let record: UploadRecord = serde_json::from_slice(&record.value)
        .map_err(|e| RuntimeError::Corrupt(format!("upload {upload_id}: {e}")))?;
    let bytes = inner.blobs.get(&record.path).await.map_err(RuntimeError::Blobs)?;
    Ok(match bytes {
        Some(bytes) if hex(&Sha256::digest(&bytes)) == record.sha256 => UploadStatus::Verified {
            sha256: record.sha256,
        },
        _ => UploadStatus::HashMismatch,
    })
}
