//! Uploads: the bytes go to a blob store, their SHA-256 and size to an upload record of the
//! organization. File evidence names an upload id; the machine's lookup asks whether it exists
//! in the organization and whether the stored bytes still match the recorded hash.

use super::{Inner, RuntimeError, ToolOutcome, hex};
use crate::actor::{self, IdempotencyRecord};
use crate::machine::{Caller, Refusal, UploadStatus};
use agentprocess_store::{Compare, Txn, TxnOp};
use async_trait::async_trait;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;
use url::Url;

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

/// A blob store over object storage: S3, Google Cloud Storage, Azure Blob Storage, a local
/// file system or memory, chosen by URL. Paths are laid out under the URL's prefix exactly as
/// [`LocalBlobs`] lays them out under its directory.
#[derive(Debug)]
pub struct ObjectBlobs {
    store: Box<dyn ObjectStore>,
    prefix: ObjectPath,
}

impl ObjectBlobs {
    /// The object store that `url` names (`s3://bucket/prefix`, `gs://bucket/prefix`,
    /// `az://container/prefix`, `file:///dir`, `memory:///`). Credentials and settings come from
    /// the environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`), as object_store's builders read them.
    pub fn from_url(url: &Url) -> Result<Self, BlobUrlError> {
        let settings = std::env::vars().filter(|(key, _)| {
            ["AWS_", "GOOGLE_", "AZURE_"]
                .iter()
                .any(|prefix| key.starts_with(prefix))
        });
        let (store, prefix) = object_store::parse_url_opts(url, settings)?;
        Ok(ObjectBlobs { store, prefix })
    }

    fn location(&self, path: &str) -> ObjectPath {
        path.split('/')
            .fold(self.prefix.clone(), |location, part| location.join(part))
    }
}

#[async_trait]
impl BlobStore for ObjectBlobs {
    async fn put(&self, path: &str, bytes: &[u8]) -> Result<(), String> {
        self.store
            .put(&self.location(path), PutPayload::from(bytes.to_vec()))
            .await
            .map(|_| ())
            .map_err(|e| format!("writing {path}: {e}"))
    }

    async fn get(&self, path: &str) -> Result<Option<Vec<u8>>, String> {
        let read = async { self.store.get(&self.location(path)).await?.bytes().await };
        match read.await {
            Ok(bytes) => Ok(Some(bytes.to_vec())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(format!("reading {path}: {e}")),
        }
    }
}

/// Why a blob store location does not open.
#[derive(Debug, thiserror::Error)]
pub enum BlobUrlError {
    #[error("not a blob store location: {0}")]
    Url(#[from] url::ParseError),
    #[error(transparent)]
    ObjectStore(#[from] object_store::Error),
}

/// The blob store at `location`: a URL with a scheme opens an [`ObjectBlobs`]; a plain path is
/// a [`LocalBlobs`] directory.
pub fn blob_store_from_url(location: &str) -> Result<Arc<dyn BlobStore>, BlobUrlError> {
    match Url::parse(location) {
        Ok(url) => Ok(Arc::new(ObjectBlobs::from_url(&url)?)),
        Err(url::ParseError::RelativeUrlWithoutBase) => Ok(Arc::new(LocalBlobs::new(location))),
        Err(e) => Err(e.into()),
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
            IdempotencyRecord {
                fingerprint: Cow::Borrowed(&fingerprint),
                run_id: None,
                at: now,
                data: Cow::Borrowed(&data),
            }
            .to_bytes(),
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

/// The record of `upload_id` in the organization, or `None` when it has no such upload.
async fn record(
    inner: &Inner,
    organization: &str,
    upload_id: &str,
) -> Result<Option<UploadRecord>, RuntimeError> {
    let (record, _) = inner
        .store
        .get(&inner.keys.upload(organization, upload_id))
        .await?;
    record
        .map(|record| {
            serde_json::from_slice(&record.value)
                .map_err(|e| RuntimeError::Corrupt(format!("upload {upload_id}: {e}")))
        })
        .transpose()
}

/// Whether `upload_id` exists in the organization and its stored bytes still match.
pub(super) async fn verify(
    inner: &Inner,
    organization: &str,
    upload_id: &str,
) -> Result<UploadStatus, RuntimeError> {
    let Some(record) = record(inner, organization, upload_id).await? else {
        return Ok(UploadStatus::NotFound);
    };
    let bytes = inner.blobs.get(&record.path).await.map_err(RuntimeError::Blobs)?;
    Ok(match bytes {
        Some(bytes) if hex(&Sha256::digest(&bytes)) == record.sha256 => UploadStatus::Verified {
            sha256: record.sha256,
        },
        _ => UploadStatus::HashMismatch,
    })
}

/// The record and bytes of `upload_id` in the organization, or `None` when it has no such
/// upload. Bytes that are missing or no longer match the recorded SHA-256 are an
/// infrastructure error, NEVER a silently different file.
pub(super) async fn read(
    inner: &Inner,
    organization: &str,
    upload_id: &str,
) -> Result<Option<(UploadRecord, Vec<u8>)>, RuntimeError> {
    let Some(record) = record(inner, organization, upload_id).await? else {
        return Ok(None);
    };
    let bytes = inner
        .blobs
        .get(&record.path)
        .await
        .map_err(RuntimeError::Blobs)?
        .ok_or_else(|| RuntimeError::Blobs(format!("upload {upload_id}: no bytes at {}", record.path)))?;
    if hex(&Sha256::digest(&bytes)) != record.sha256 {
        return Err(RuntimeError::Corrupt(format!(
            "upload {upload_id}: the stored bytes do not match the recorded sha256"
        )));
    }
    Ok(Some((record, bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_object_store_keeps_blobs_under_its_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let url = Url::from_directory_path(dir.path()).unwrap();
        let blobs = blob_store_from_url(url.as_str()).unwrap();
        assert_eq!(blobs.get("6163/f_1").await.unwrap(), None);
        blobs.put("6163/f_1", b"bytes").await.unwrap();
        assert_eq!(blobs.get("6163/f_1").await.unwrap(), Some(b"bytes".to_vec()));
        assert_eq!(std::fs::read(dir.path().join("6163/f_1")).unwrap(), b"bytes");
    }

    #[tokio::test]
    async fn a_plain_path_is_a_local_directory() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = blob_store_from_url(dir.path().to_str().unwrap()).unwrap();
        blobs.put("6163/f_1", b"bytes").await.unwrap();
        assert_eq!(std::fs::read(dir.path().join("6163/f_1")).unwrap(), b"bytes");
        assert!(format!("{blobs:?}").starts_with("LocalBlobs"));
    }

    #[tokio::test]
    async fn memory_blobs_read_back_what_was_written() {
        let blobs = blob_store_from_url("memory:///").unwrap();
        assert_eq!(blobs.get("6163/f_1").await.unwrap(), None);
        blobs.put("6163/f_1", b"bytes").await.unwrap();
        assert_eq!(blobs.get("6163/f_1").await.unwrap(), Some(b"bytes".to_vec()));
    }
}
