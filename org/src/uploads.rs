//! Uploads: the bytes go to a blob store, their SHA-256 and size to an upload record of the
//! organization. File evidence names an upload id; [`Uploads::verify`] says whether it exists in
//! the organization and whether the stored bytes still match the recorded hash, and
//! [`Uploads::read`] serves the bytes of a file link.

use crate::OrgError;
use agentprocess_ids::OrgId;
use agentprocess_store::Store;
use agentprocess_store::keys::Keys;
use agentprocess_vocab::{UploadStatus, hex};
use async_trait::async_trait;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
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
    /// Stores every object durably: when this returns, all of them survive a crash. An
    /// implementation may make them durable together (one sync for the lot).
    async fn put_all(&self, objects: Vec<(String, Vec<u8>)>) -> Result<(), String> {
        for (path, bytes) in objects {
            self.put(&path, &bytes).await?;
        }
        Ok(())
    }
    /// The names directly under the folder `dir` (`""` for the root): sub-folders and objects,
    /// in no particular order. A folder that does not exist is empty.
    async fn list_folder(&self, dir: &str) -> Result<Folder, String>;
}

/// What one folder of a blob store holds: names, not paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Folder {
    pub folders: Vec<String>,
    pub objects: Vec<String>,
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

    /// Writes each object to a temporary file renamed into place, then syncs the file system
    /// once: one sync for the whole batch instead of two per object.
    async fn put_all(&self, objects: Vec<(String, Vec<u8>)>) -> Result<(), String> {
        if objects.is_empty() {
            return Ok(());
        }
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || -> Result<(), String> {
            for (path, bytes) in &objects {
                let target = dir.join(path);
                let temporary = target.with_extension("partial");
                let write = || -> std::io::Result<()> {
                    if let Some(parent) = target.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    std::fs::write(&temporary, bytes)?;
                    std::fs::rename(&temporary, &target)
                };
                write().map_err(|e| format!("writing {path}: {e}"))?;
            }
            let root = std::fs::File::open(&dir).map_err(|e| format!("opening {}: {e}", dir.display()))?;
            rustix::fs::syncfs(&root).map_err(|e| format!("syncing {}: {e}", dir.display()))
        })
        .await
        .map_err(|e| e.to_string())?
    }

    async fn list_folder(&self, dir: &str) -> Result<Folder, String> {
        let path = self.dir.join(dir);
        tokio::task::spawn_blocking(move || -> Result<Folder, String> {
            let mut folder = Folder::default();
            let entries = match std::fs::read_dir(&path) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(folder),
                Err(e) => return Err(format!("listing {}: {e}", path.display())),
            };
            for entry in entries {
                let entry = entry.map_err(|e| format!("listing {}: {e}", path.display()))?;
                let Ok(name) = entry.file_name().into_string() else {
                    continue;
                };
                let kind = entry
                    .file_type()
                    .map_err(|e| format!("listing {}: {e}", path.display()))?;
                if kind.is_dir() {
                    folder.folders.push(name);
                } else if !name.ends_with(".partial") {
                    folder.objects.push(name);
                }
            }
            Ok(folder)
        })
        .await
        .map_err(|e| e.to_string())?
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

    /// Every object is durable once its put returns; they are written a few at a time.
    async fn put_all(&self, objects: Vec<(String, Vec<u8>)>) -> Result<(), String> {
        use futures_util::StreamExt;
        let mut puts = futures_util::stream::iter(objects)
            .map(|(path, bytes)| async move { self.put(&path, &bytes).await })
            .buffer_unordered(16);
        while let Some(put) = puts.next().await {
            put?;
        }
        Ok(())
    }

    async fn list_folder(&self, dir: &str) -> Result<Folder, String> {
        let location = if dir.is_empty() {
            self.prefix.clone()
        } else {
            self.location(dir)
        };
        let listed = self
            .store
            .list_with_delimiter(Some(&location))
            .await
            .map_err(|e| format!("listing {dir}: {e}"))?;
        let name = |path: &ObjectPath| path.filename().map(str::to_string);
        Ok(Folder {
            folders: listed.common_prefixes.iter().filter_map(name).collect(),
            objects: listed
                .objects
                .iter()
                .filter_map(|meta| name(&meta.location))
                .collect(),
        })
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

/// Where an upload's bytes go in the blob store: under the organization, hex-encoded so any
/// organization id makes a safe path.
pub fn blob_path(organization: &OrgId, id: &str) -> String {
    format!("{}/{id}", hex(organization.as_str().as_bytes()))
}

/// The organizations' uploads: records in the store, bytes in the blob store.
#[derive(Debug, Clone)]
pub struct Uploads {
    store: Arc<dyn Store>,
    keys: Keys,
    blobs: Arc<dyn BlobStore>,
}

impl Uploads {
    pub fn new(store: Arc<dyn Store>, keys: Keys, blobs: Arc<dyn BlobStore>) -> Self {
        Uploads { store, keys, blobs }
    }

    /// The blob store the bytes live in.
    pub fn blobs(&self) -> &Arc<dyn BlobStore> {
        &self.blobs
    }

    /// The record of `upload_id` in the organization, or `None` when it has no such upload.
    pub async fn record(
        &self,
        organization: &OrgId,
        upload_id: &str,
    ) -> Result<Option<UploadRecord>, OrgError> {
        let (record, _) = self.store.get(&self.keys.upload(organization, upload_id)).await?;
        record
            .map(|record| {
                serde_json::from_slice(&record.value)
                    .map_err(|e| OrgError::Corrupt(format!("upload {upload_id}: {e}")))
            })
            .transpose()
    }

    /// Whether `upload_id` exists in the organization and its stored bytes still match.
    pub async fn verify(&self, organization: &OrgId, upload_id: &str) -> Result<UploadStatus, OrgError> {
        let Some(record) = self.record(organization, upload_id).await? else {
            return Ok(UploadStatus::NotFound);
        };
        let bytes = self.blobs.get(&record.path).await.map_err(OrgError::Blobs)?;
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
    pub async fn read(
        &self,
        organization: &OrgId,
        upload_id: &str,
    ) -> Result<Option<(UploadRecord, Vec<u8>)>, OrgError> {
        let Some(record) = self.record(organization, upload_id).await? else {
            return Ok(None);
        };
        let bytes = self
            .blobs
            .get(&record.path)
            .await
            .map_err(OrgError::Blobs)?
            .ok_or_else(|| OrgError::Blobs(format!("upload {upload_id}: no bytes at {}", record.path)))?;
        if hex(&Sha256::digest(&bytes)) != record.sha256 {
            return Err(OrgError::Corrupt(format!(
                "upload {upload_id}: the stored bytes do not match the recorded sha256"
            )));
        }
        Ok(Some((record, bytes)))
    }
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
