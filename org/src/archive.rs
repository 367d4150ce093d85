//! The archive: ended runs moved out of the hot store into the blob store, compressed, with a
//! per-process index that `list_runs` pages through in start order.
//!
//! ```text
//! archive/<org>/run/<shard>/<runId>                              the run record, zstd-compressed
//! archive/<org>/index/<process>/<t1>/<t2>/<t3>/<t4>/<startedAt>_<runId>   its list_runs item
//! archive/<org>/inputs/<process>/<input>/<digest>/<t1>/.../<startedAt>_<runId>
//!                                                                the same, by an input's value
//! ```
//!
//! Organization, process, input and run ids are hex-encoded (any id makes a safe path); `<shard>` is
//! the first byte of the run id's SHA-256, so no folder holds more than a 256th of the runs.
//! The index path spells the start time (ms, 20 digits) four times coarser first — `t1` =
//! ms / 10^9, then the hundreds digit pairs of ms / 10^7, ms / 10^5 and ms / 10^3 — so every
//! folder but the last holds at most 100 entries and the last one holds the runs of one process
//! started within one second. A page of the index therefore reads a few small folders and
//! `limit` objects, however many runs were ever archived.
//!
//! Writes are grouped: runs archived at the same moment by different actors are written together
//! and made durable with one sync ([`BlobStore::put_all`]). A run's actor deletes its hot copy
//! only after [`Archive::store`] returned, so a crash leaves a run hot, or hot and archived (hot
//! wins, and the next archiving overwrites the same objects), or archived: never lost.

use crate::OrgError;
use crate::uploads::BlobStore;
use agentprocess_ids::{OrgId, RunId};
use agentprocess_vocab::hex;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// Most runs one grouped write carries.
const MAX_GROUP: usize = 512;
/// zstd level: fast, and most of the gain on JSON.
const COMPRESSION_LEVEL: i32 = 3;

/// One ended run on its way to the archive.
#[derive(Debug, Clone)]
pub struct ArchivedRun {
    pub organization: OrgId,
    pub run_id: RunId,
    pub process: String,
    pub started_at_ms: u64,
    /// The run record as the hot store holds it.
    pub record: Vec<u8>,
    /// Its `list_runs` item.
    pub summary: Vec<u8>,
    /// Each input the item is filed under, with the digest of its value (the caller's: equal
    /// values must have equal digests).
    pub inputs: Vec<(String, String)>,
}

/// One entry of a process's archive index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveEntry {
    pub started_at_ms: u64,
    pub run_id: RunId,
    /// The run's `list_runs` item.
    pub summary: Vec<u8>,
}

type Group = (Vec<(String, Vec<u8>)>, oneshot::Sender<Result<(), String>>);

/// The archive over a blob store. Cheap to clone; must be created inside a tokio runtime.
#[derive(Debug, Clone)]
pub struct Archive {
    blobs: Arc<dyn BlobStore>,
    writer: mpsc::Sender<Group>,
}

impl Archive {
    pub fn new(blobs: Arc<dyn BlobStore>) -> Self {
        let (writer, queue) = mpsc::channel(4 * MAX_GROUP);
        tokio::spawn(write_groups(blobs.clone(), queue));
        Archive { blobs, writer }
    }

    /// Stores `runs` durably: each run's record and its index entry.
    pub async fn store(&self, runs: &[ArchivedRun]) -> Result<(), OrgError> {
        let mut objects = Vec::with_capacity(2 * runs.len());
        for run in runs {
            let record = zstd::bulk::compress(&run.record, COMPRESSION_LEVEL)
                .map_err(|e| OrgError::Blobs(format!("compressing run {}: {e}", run.run_id)))?;
            objects.push((run_path(&run.organization, &run.run_id), record));
            objects.push((
                index_path(&run.organization, &run.process, run.started_at_ms, &run.run_id),
                run.summary.clone(),
            ));
            for (input, digest) in &run.inputs {
                let root = input_index_root(&run.organization, &run.process, input, digest);
                let suffix = index_suffix(run.started_at_ms, &run.run_id);
                objects.push((format!("{root}/{suffix}"), run.summary.clone()));
            }
        }
        let (done, written) = oneshot::channel();
        self.writer
            .send((objects, done))
            .await
            .map_err(|_| OrgError::Blobs("the archive writer stopped".into()))?;
        written
            .await
            .map_err(|_| OrgError::Blobs("the archive writer stopped".into()))?
            .map_err(OrgError::Blobs)
    }

    /// The archived record of run `run_id`, decompressed; `None` when it is not archived.
    pub async fn run_record(
        &self,
        organization: &OrgId,
        run_id: &RunId,
    ) -> Result<Option<Vec<u8>>, OrgError> {
        let path = run_path(organization, run_id);
        let Some(compressed) = self.blobs.get(&path).await.map_err(OrgError::Blobs)? else {
            return Ok(None);
        };
        zstd::stream::decode_all(compressed.as_slice())
            .map(Some)
            .map_err(|e| OrgError::Corrupt(format!("archived run {run_id}: {e}")))
    }

    /// Up to `limit` index entries of `process`, in start order (then run id), after the run
    /// `after` (its start time and id) when given.
    pub async fn runs_after(
        &self,
        organization: &OrgId,
        process: &str,
        after: Option<(u64, &RunId)>,
        limit: usize,
    ) -> Result<Vec<ArchiveEntry>, OrgError> {
        self.entries_after(index_root(organization, process), after, limit)
            .await
    }

    /// [`Archive::runs_after`] for the runs of `process` filed under input `input` with a value
    /// of digest `digest`.
    pub async fn runs_with_input_after(
        &self,
        organization: &OrgId,
        process: &str,
        (input, digest): (&str, &str),
        after: Option<(u64, &RunId)>,
        limit: usize,
    ) -> Result<Vec<ArchiveEntry>, OrgError> {
        let root = input_index_root(organization, process, input, digest);
        self.entries_after(root, after, limit).await
    }

    /// Files every archived run of every organization under its inputs' values, as
    /// [`Archive::store`] files the runs it archives: `inputs_of` reads the input (name,
    /// digest) pairs from a run's `list_runs` item. For runs archived before such filing
    /// existed; writing a filing again changes nothing. Answers how many runs were read.
    pub async fn file_every_run_by_inputs(
        &self,
        inputs_of: impl Fn(&[u8]) -> Vec<(String, String)>,
    ) -> Result<usize, OrgError> {
        const PAGE: usize = 512;
        let blobs = self.blobs.as_ref();
        let mut filed = 0;
        let organizations = blobs.list_folder("archive").await.map_err(OrgError::Blobs)?;
        for organization in organizations.folders {
            let index = format!("archive/{organization}/index");
            let processes = blobs.list_folder(&index).await.map_err(OrgError::Blobs)?;
            for process in processes.folders {
                let root = format!("{index}/{process}");
                let mut after: Option<String> = None;
                loop {
                    let names = walk_after(blobs, &root, after.as_deref(), PAGE)
                        .await
                        .map_err(OrgError::Blobs)?;
                    let mut objects = Vec::new();
                    for relative in &names {
                        let path = format!("{root}/{relative}");
                        let Some(summary) = blobs.get(&path).await.map_err(OrgError::Blobs)? else {
                            continue;
                        };
                        for (input, digest) in inputs_of(&summary) {
                            let filing = format!(
                                "archive/{organization}/inputs/{process}/{}/{}/{relative}",
                                hex(input.as_bytes()),
                                hex(digest.as_bytes())
                            );
                            objects.push((filing, summary.clone()));
                        }
                        filed += 1;
                    }
                    blobs.put_all(objects).await.map_err(OrgError::Blobs)?;
                    if names.len() < PAGE {
                        break;
                    }
                    after = names.last().cloned();
                }
            }
        }
        Ok(filed)
    }

    /// Up to `limit` entries of the index under `root`, after the run `after`.
    async fn entries_after(
        &self,
        root: String,
        after: Option<(u64, &RunId)>,
        limit: usize,
    ) -> Result<Vec<ArchiveEntry>, OrgError> {
        let after = after.map(|(at, run_id)| index_suffix(at, run_id));
        let names = walk_after(self.blobs.as_ref(), &root, after.as_deref(), limit)
            .await
            .map_err(OrgError::Blobs)?;
        let mut entries = Vec::with_capacity(names.len());
        for relative in names {
            let leaf = relative.rsplit('/').next().unwrap_or_default();
            let Some((started_at_ms, run_id)) = parse_leaf(leaf) else {
                continue;
            };
            let path = format!("{root}/{relative}");
            // Gone between the listing and the read: nothing to list.
            let Some(summary) = self.blobs.get(&path).await.map_err(OrgError::Blobs)? else {
                continue;
            };
            entries.push(ArchiveEntry {
                started_at_ms,
                run_id: RunId::from(run_id),
                summary,
            });
        }
        Ok(entries)
    }
}

/// Writes queued groups together: takes everything queued, writes it with one `put_all`, and
/// answers every group with the outcome.
async fn write_groups(blobs: Arc<dyn BlobStore>, mut queue: mpsc::Receiver<Group>) {
    while let Some(first) = queue.recv().await {
        let mut groups = vec![first];
        while groups.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(group) => groups.push(group),
                Err(_) => break,
            }
        }
        let objects = groups
            .iter_mut()
            .flat_map(|(objects, _)| std::mem::take(objects))
            .collect();
        let outcome = blobs.put_all(objects).await;
        if let Err(error) = &outcome {
            tracing::warn!(%error, "ended runs could not be archived now; they stay in the hot store");
        }
        for (_, done) in groups {
            let _ = done.send(outcome.clone());
        }
    }
}

fn run_path(organization: &OrgId, run_id: &RunId) -> String {
    let shard = Sha256::digest(run_id.as_str().as_bytes())[0];
    format!(
        "archive/{}/run/{shard:02x}/{}",
        hex(organization.as_str().as_bytes()),
        hex(run_id.as_str().as_bytes())
    )
}

fn index_root(organization: &OrgId, process: &str) -> String {
    format!(
        "archive/{}/index/{}",
        hex(organization.as_str().as_bytes()),
        hex(process.as_bytes())
    )
}

fn input_index_root(organization: &OrgId, process: &str, input: &str, digest: &str) -> String {
    format!(
        "archive/{}/inputs/{}/{}/{}",
        hex(organization.as_str().as_bytes()),
        hex(process.as_bytes()),
        hex(input.as_bytes()),
        hex(digest.as_bytes())
    )
}

/// The path of an index entry below its process's root.
fn index_suffix(started_at_ms: u64, run_id: &RunId) -> String {
    format!(
        "{:010}/{:02}/{:02}/{:02}/{started_at_ms:020}_{}",
        started_at_ms / 1_000_000_000,
        started_at_ms / 10_000_000 % 100,
        started_at_ms / 100_000 % 100,
        started_at_ms / 1_000 % 100,
        hex(run_id.as_str().as_bytes())
    )
}

fn index_path(organization: &OrgId, process: &str, started_at_ms: u64, run_id: &RunId) -> String {
    format!(
        "{}/{}",
        index_root(organization, process),
        index_suffix(started_at_ms, run_id)
    )
}

fn parse_leaf(leaf: &str) -> Option<(u64, String)> {
    let (time, run) = leaf.split_once('_')?;
    if time.len() != 20 || run.len() % 2 != 0 {
        return None;
    }
    let bytes = (0..run.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(run.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some((time.parse().ok()?, String::from_utf8(bytes).ok()?))
}

/// Up to `limit` object paths under `root` (relative to it) that sort after `after`, in byte
/// order of their paths. Walks folders depth first in that order, skipping every folder whose
/// whole content sorts before `after`, so its cost is the folders on the way plus `limit`.
async fn walk_after(
    blobs: &dyn BlobStore,
    root: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    // Folders still to read (relative paths, "" for the root), last to read first.
    let mut pending: Vec<Entry> = vec![Entry::Folder(String::new())];
    while let Some(entry) = pending.pop() {
        if found.len() >= limit {
            break;
        }
        match entry {
            Entry::Object(path) => found.push(path),
            Entry::Folder(folder) => {
                let listed = blobs.list_folder(&join(root, &folder)).await?;
                // Sort as full paths sort: a folder `a` holds `a/...`, after the object `a-b`.
                let mut children: Vec<(String, Entry)> = listed
                    .folders
                    .into_iter()
                    .map(|name| {
                        let path = join(&folder, &name);
                        (format!("{path}/"), Entry::Folder(path))
                    })
                    .chain(listed.objects.into_iter().map(|name| {
                        let path = join(&folder, &name);
                        (path.clone(), Entry::Object(path))
                    }))
                    .filter(|(sort_key, entry)| match (after, entry) {
                        (None, _) => true,
                        (Some(after), Entry::Object(path)) => path.as_str() > after,
                        // Keep a folder unless everything in it sorts before `after`.
                        (Some(after), Entry::Folder(_)) => {
                            after.starts_with(sort_key.as_str()) || sort_key.as_str() > after
                        }
                    })
                    .collect();
                children.sort_by(|a, b| a.0.cmp(&b.0));
                pending.extend(children.into_iter().rev().map(|(_, entry)| entry));
            }
        }
    }
    Ok(found)
}

enum Entry {
    Folder(String),
    Object(String),
}

/// `folder/name`, or the one that is not empty.
fn join(folder: &str, name: &str) -> String {
    match (folder.is_empty(), name.is_empty()) {
        (true, _) => name.to_string(),
        (false, true) => folder.to_string(),
        (false, false) => format!("{folder}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LocalBlobs, ObjectBlobs};

    fn run(org: &str, process: &str, at: u64, id: &str) -> ArchivedRun {
        ArchivedRun {
            organization: org.into(),
            run_id: id.into(),
            process: process.into(),
            started_at_ms: at,
            record: format!(r#"{{"id":"{id}","pad":"{}"}}"#, "x".repeat(2000)).into_bytes(),
            summary: format!(r#"{{"id":"{id}"}}"#).into_bytes(),
            inputs: Vec::new(),
        }
    }

    async fn pages_come_back_in_start_order_after_any_cursor(blobs: Arc<dyn BlobStore>) {
        let archive = Archive::new(blobs);
        // Times that cross every folder level, and two runs in the same millisecond.
        let times = [
            5u64,
            999,
            1_000,
            99_999,
            100_000,
            9_999_999,
            10_000_000,
            999_999_999,
            1_000_000_000,
            1_700_000_000_000,
            1_700_000_000_000,
            1_700_000_000_001,
        ];
        let runs: Vec<ArchivedRun> = times
            .iter()
            .enumerate()
            .map(|(i, &at)| run("acme", "invoice", at, &format!("r_{i:02}")))
            .collect();
        // Stored in an order that is not the index's.
        let mut shuffled = runs.clone();
        shuffled.reverse();
        archive.store(&shuffled[..5]).await.unwrap();
        archive.store(&shuffled[5..]).await.unwrap();
        archive
            .store(&[run("acme", "other", 7, "r_x"), run("beta", "invoice", 7, "r_y")])
            .await
            .unwrap();

        let acme = OrgId::from("acme");
        let all = archive.runs_after(&acme, "invoice", None, 100).await.unwrap();
        let expected: Vec<(u64, RunId)> = runs.iter().map(|r| (r.started_at_ms, r.run_id.clone())).collect();
        assert_eq!(
            all.iter()
                .map(|e| (e.started_at_ms, e.run_id.clone()))
                .collect::<Vec<_>>(),
            expected
        );
        assert_eq!(all[3].summary, br#"{"id":"r_03"}"#);
        for cut in 0..expected.len() {
            let (at, id) = &expected[cut];
            let rest = archive
                .runs_after(&acme, "invoice", Some((*at, id)), 3)
                .await
                .unwrap();
            let wanted: Vec<_> = expected[cut + 1..].iter().take(3).cloned().collect();
            assert_eq!(
                rest.iter()
                    .map(|e| (e.started_at_ms, e.run_id.clone()))
                    .collect::<Vec<_>>(),
                wanted,
                "after {at}/{id}"
            );
        }
        for r in &runs {
            assert_eq!(
                archive.run_record(&acme, &r.run_id).await.unwrap(),
                Some(r.record.clone())
            );
        }
        assert_eq!(
            archive.run_record(&"beta".into(), &"r_00".into()).await.unwrap(),
            None
        );
        assert_eq!(archive.runs_after(&acme, "none", None, 10).await.unwrap(), vec![]);
    }

    #[tokio::test]
    async fn runs_filed_under_an_input_page_by_its_value_alone() {
        let dir = tempfile::tempdir().unwrap();
        let archive = Archive::new(Arc::new(LocalBlobs::new(dir.path())));
        let acme = OrgId::from("acme");
        let filed = |at: u64, id: &str, vendor: &str| ArchivedRun {
            inputs: vec![("vendor".into(), vendor.into()), ("region".into(), "eu".into())],
            ..run("acme", "invoice", at, id)
        };
        archive
            .store(&[
                filed(3, "r_3", "d_acme"),
                filed(1, "r_1", "d_acme"),
                filed(2, "r_2", "d_other"),
                filed(4_000_000_000_000, "r_4", "d_acme"),
            ])
            .await
            .unwrap();
        let ids = |entries: Vec<ArchiveEntry>| {
            entries
                .into_iter()
                .map(|entry| entry.run_id.to_string())
                .collect::<Vec<_>>()
        };
        let acme_vendor = ("vendor", "d_acme");
        let all = archive
            .runs_with_input_after(&acme, "invoice", acme_vendor, None, 10)
            .await
            .unwrap();
        assert_eq!(all[0].summary, br#"{"id":"r_1"}"#);
        assert_eq!(ids(all), ["r_1", "r_3", "r_4"]);
        let after = archive
            .runs_with_input_after(&acme, "invoice", acme_vendor, Some((1, &"r_1".into())), 1)
            .await
            .unwrap();
        assert_eq!(ids(after), ["r_3"]);
        let other = archive
            .runs_with_input_after(&acme, "invoice", ("vendor", "d_other"), None, 10)
            .await
            .unwrap();
        assert_eq!(ids(other), ["r_2"]);
        let region = archive
            .runs_with_input_after(&acme, "invoice", ("region", "eu"), None, 10)
            .await
            .unwrap();
        assert_eq!(region.len(), 4);
        // The process's own index is unchanged by them.
        assert_eq!(
            ids(archive.runs_after(&acme, "invoice", None, 10).await.unwrap()).len(),
            4
        );
    }

    #[tokio::test]
    async fn runs_archived_before_filing_are_filed_by_their_items_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let archive = Archive::new(Arc::new(LocalBlobs::new(dir.path())));
        assert_eq!(archive.file_every_run_by_inputs(|_| Vec::new()).await.unwrap(), 0);
        let acme = OrgId::from("acme");
        let unfiled = |org: &str, at: u64, id: &str, vendor: &str| ArchivedRun {
            summary: format!(r#"{{"id":"{id}","vendor":"{vendor}"}}"#).into_bytes(),
            ..run(org, "invoice", at, id)
        };
        archive
            .store(&[
                unfiled("acme", 1, "r_1", "d_acme"),
                unfiled("acme", 2, "r_2", "d_other"),
                unfiled("beta", 3, "r_3", "d_acme"),
            ])
            .await
            .unwrap();
        let vendor_of = |summary: &[u8]| {
            let item: serde_json::Value = serde_json::from_slice(summary).unwrap();
            vec![("vendor".to_string(), item["vendor"].as_str().unwrap().to_string())]
        };
        let found = || archive.runs_with_input_after(&acme, "invoice", ("vendor", "d_acme"), None, 10);
        assert!(found().await.unwrap().is_empty(), "not filed yet");
        assert_eq!(archive.file_every_run_by_inputs(vendor_of).await.unwrap(), 3);
        let filed = found().await.unwrap();
        assert_eq!(filed.len(), 1);
        assert_eq!(filed[0].run_id, RunId::from("r_1"));
        assert_eq!(filed[0].summary, br#"{"id":"r_1","vendor":"d_acme"}"#);
        // Again: nothing changes.
        assert_eq!(archive.file_every_run_by_inputs(vendor_of).await.unwrap(), 3);
        assert_eq!(found().await.unwrap(), filed);
    }

    #[tokio::test]
    async fn a_local_archive_pages_in_start_order() {
        let dir = tempfile::tempdir().unwrap();
        pages_come_back_in_start_order_after_any_cursor(Arc::new(LocalBlobs::new(dir.path()))).await;
        // Records are compressed on disk.
        let archive = Archive::new(Arc::new(LocalBlobs::new(dir.path())));
        let (acme, run) = (OrgId::from("acme"), RunId::from("r_00"));
        let path = dir.path().join(run_path(&acme, &run));
        assert!(std::fs::metadata(&path).unwrap().len() < 200);
        assert!(archive.run_record(&acme, &run).await.unwrap().unwrap().len() > 2000);
    }

    #[tokio::test]
    async fn an_object_store_archive_pages_in_start_order() {
        let url = url::Url::parse("memory:///").unwrap();
        pages_come_back_in_start_order_after_any_cursor(Arc::new(ObjectBlobs::from_url(&url).unwrap())).await;
    }

    #[tokio::test]
    async fn a_walk_orders_folders_as_their_paths_sort() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = LocalBlobs::new(dir.path());
        for path in ["r/a/x", "r/a-b", "r/a/y", "r/b", "r/0"] {
            blobs.put(path, b"").await.unwrap();
        }
        let all = walk_after(&blobs, "r", None, 10).await.unwrap();
        assert_eq!(all, ["0", "a-b", "a/x", "a/y", "b"]);
        assert_eq!(
            walk_after(&blobs, "r", Some("a-b"), 10).await.unwrap(),
            ["a/x", "a/y", "b"]
        );
        assert_eq!(walk_after(&blobs, "r", Some("a/x"), 1).await.unwrap(), ["a/y"]);
        assert_eq!(walk_after(&blobs, "r", Some("a/y"), 10).await.unwrap(), ["b"]);
    }

    #[test]
    fn index_leaves_parse_back() {
        let suffix = index_suffix(1_700_000_000_123, &RunId::from("r_1/odd"));
        let leaf = suffix.rsplit('/').next().unwrap();
        assert_eq!(parse_leaf(leaf), Some((1_700_000_000_123, "r_1/odd".into())));
        assert_eq!(parse_leaf("123_ab"), None);
        assert_eq!(parse_leaf("00000000000000000001_zz"), None);
    }
}
