//! Backups of the embedded store: every key of a running store at one revision ([`StoreExport`]),
//! and a new store written from such a copy ([`StoreImport`]).
//!
//! An export is one read snapshot (an engine read transaction seen through the acknowledged
//! batches the engine does not hold yet, as every read is): the writer never waits for it, and
//! it sees exactly the writes acknowledged when it was taken, however long the copy takes.
//! Leases are emulated in memory ([`super::lease`]), so an export carries the leases its keys are
//! attached to, each with its granted TTL: a restored store restarts their countdowns, as any
//! reopened store does, and removes their keys when they lapse. A lease whose time was up (or
//! that was revoked) by the time the export read the lease table is exported with a TTL of one
//! second: the running store removed its keys right after the snapshot, and the restored one
//! removes them at once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use tokio::time::Instant;

use super::engine::{Commit, ENGINE_FILE, Engine, Overlay, Stored};
use super::{EmbeddedStore, Snapshot, journal, lease, sync_dir};
use crate::error::StoreError;
use crate::types::KeyRange;

/// Keys read from the snapshot per range.
const EXPORT_PAGE: usize = 4096;
/// An import commits its keys to the engine in transactions of about this many bytes.
const IMPORT_COMMIT_BYTES: usize = 8 << 20;
/// Page cache of the engine an import writes.
const IMPORT_CACHE_BYTES: usize = 64 << 20;
/// The TTL given to a lease whose time was up when the export read the lease table.
const LAPSED_LEASE_TTL: i64 = 1;

/// One key of a store with everything etcd's semantics attach to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedKey {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub version: i64,
    /// The lease the key is attached to; `0` for none.
    pub lease: i64,
}

/// A lease keys of an export are attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportedLease {
    pub id: i64,
    /// Its granted TTL, in seconds.
    pub ttl: i64,
}

/// A running store as of one revision, read while the store goes on taking writes. Holding it
/// keeps the engine's pages of that revision alive (the engine file may grow meanwhile); drop it
/// once the copy is done.
pub struct StoreExport {
    /// Keeps the engine open for as long as the snapshot is read, even if the store closes.
    _engine: Arc<Engine>,
    snapshot: Snapshot,
    /// Granted TTLs of the leases alive when the snapshot was taken.
    live_leases: HashMap<i64, i64>,
    next_lease_id: i64,
}

impl std::fmt::Debug for StoreExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreExport")
            .field("revision", &self.snapshot.revision)
            .field("next_lease_id", &self.next_lease_id)
            .finish_non_exhaustive()
    }
}

impl EmbeddedStore {
    /// Takes a snapshot of every acknowledged write, to copy with [`StoreExport::for_each_key`].
    /// Writes go on meanwhile and are not in it.
    pub fn export(&self) -> Result<StoreExport, StoreError> {
        self.check_open()?;
        let engine = self.shared.engine()?;
        let snapshot = self.shared.snapshot(&engine)?;
        let (live_leases, next_lease_id) = {
            let table = self.shared.leases.lock().unwrap();
            (table.live_ttls(Instant::now()), table.next_id())
        };
        Ok(StoreExport {
            _engine: engine,
            snapshot,
            live_leases,
            next_lease_id,
        })
    }
}

impl StoreExport {
    /// The store revision the export holds.
    pub fn revision(&self) -> i64 {
        self.snapshot.revision
    }

    /// A lease id above every lease the export's keys are attached to: a restored store grants
    /// its new leases from there.
    pub fn next_lease_id(&self) -> i64 {
        self.next_lease_id
    }

    /// Hands every key to `visit`, in key order, then returns the leases they are attached to.
    /// Reads the engine's file: call it off the async threads. Stops at the first error.
    pub fn for_each_key<E: From<StoreError>>(
        &self,
        mut visit: impl FnMut(ExportedKey) -> Result<(), E>,
    ) -> Result<Vec<ExportedLease>, E> {
        let view = self.snapshot.view();
        let mut attached = BTreeSet::new();
        let mut start = Vec::new();
        loop {
            let (page, more) = view.range(&KeyRange::from(start.clone()), EXPORT_PAGE)?;
            if let Some((last, _)) = page.last() {
                start = last.clone();
                start.push(0);
            }
            for (key, kv) in page {
                if kv.lease != 0 {
                    attached.insert(kv.lease);
                }
                visit(ExportedKey {
                    key,
                    value: kv.value.to_vec(),
                    create_revision: kv.create_revision,
                    mod_revision: kv.mod_revision,
                    version: kv.version,
                    lease: kv.lease,
                })?;
            }
            if !more {
                break;
            }
        }
        Ok(attached
            .into_iter()
            .map(|id| ExportedLease {
                id,
                ttl: self.live_leases.get(&id).copied().unwrap_or(LAPSED_LEASE_TTL),
            })
            .collect())
    }
}

/// What an import wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportReport {
    pub revision: i64,
    pub keys: u64,
    pub leases: u64,
}

/// A new store being written from an export: keys in key order, then their leases, then
/// [`StoreImport::finish`]. Until `finish` returns, the directory holds no store that opens as
/// one a restored server may use: the caller removes it if anything fails. Blocking: run it off
/// the async threads.
pub struct StoreImport {
    engine: Engine,
    dir: std::path::PathBuf,
    revision: i64,
    next_lease_id: i64,
    overlay: Overlay,
    overlay_bytes: usize,
    last_key: Option<Vec<u8>>,
    attached: BTreeSet<i64>,
    leases: BTreeMap<i64, i64>,
    keys: u64,
}

impl std::fmt::Debug for StoreImport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreImport")
            .field("dir", &self.dir)
            .field("revision", &self.revision)
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

impl StoreImport {
    /// Starts a store in `dir` (created if missing) at `revision`, granting new leases from
    /// `next_lease_id`. Refuses a directory that already holds a store.
    pub fn create(dir: &Path, revision: i64, next_lease_id: i64) -> Result<StoreImport, StoreError> {
        if revision < 1 || next_lease_id < 1 {
            return Err(StoreError::Corrupt(format!(
                "an export at revision {revision} with next lease {next_lease_id}"
            )));
        }
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io("creating the store directory", e))?;
        if dir.join(ENGINE_FILE).exists() || !journal::generations(dir)?.is_empty() {
            return Err(StoreError::InvalidRequest(format!(
                "{} already holds a store",
                dir.display()
            )));
        }
        let engine = Engine::open(&dir.join(ENGINE_FILE), IMPORT_CACHE_BYTES)?;
        Ok(StoreImport {
            engine,
            dir: dir.to_path_buf(),
            revision,
            next_lease_id,
            overlay: Overlay::new(),
            overlay_bytes: 0,
            last_key: None,
            attached: BTreeSet::new(),
            leases: BTreeMap::new(),
            keys: 0,
        })
    }

    /// Adds the next key. Keys come in strictly increasing order, each with revisions the
    /// export's revision covers.
    pub fn key(&mut self, key: ExportedKey) -> Result<(), StoreError> {
        if self.last_key.as_ref().is_some_and(|last| *last >= key.key) {
            return Err(StoreError::Corrupt(format!(
                "key {:?} is out of order",
                String::from_utf8_lossy(&key.key)
            )));
        }
        let revisions_hold = 1 <= key.create_revision
            && key.create_revision <= key.mod_revision
            && key.mod_revision <= self.revision
            && key.version >= 1;
        if !revisions_hold || key.lease < 0 || key.lease >= self.next_lease_id {
            return Err(StoreError::Corrupt(format!(
                "key {:?} has revisions {}..{}, version {} and lease {} in an export at revision {}",
                String::from_utf8_lossy(&key.key),
                key.create_revision,
                key.mod_revision,
                key.version,
                key.lease,
                self.revision
            )));
        }
        if key.lease != 0 {
            self.attached.insert(key.lease);
        }
        self.overlay_bytes += 48 + key.key.len() + key.value.len();
        self.last_key = Some(key.key.clone());
        self.overlay.insert(
            key.key,
            Some(Stored {
                value: Arc::from(key.value),
                create_revision: key.create_revision,
                mod_revision: key.mod_revision,
                version: key.version,
                lease: key.lease,
            }),
        );
        self.keys += 1;
        if self.overlay_bytes >= IMPORT_COMMIT_BYTES {
            self.commit(None)?;
        }
        Ok(())
    }

    /// Adds a lease the keys are attached to.
    pub fn lease(&mut self, lease: ExportedLease) -> Result<(), StoreError> {
        if lease.id < 1 || lease.id >= self.next_lease_id || !(1..=lease::MAX_TTL).contains(&lease.ttl) {
            return Err(StoreError::Corrupt(format!(
                "lease {} with a TTL of {} s",
                lease.id, lease.ttl
            )));
        }
        if self.leases.insert(lease.id, lease.ttl).is_some() {
            return Err(StoreError::Corrupt(format!("lease {} comes twice", lease.id)));
        }
        Ok(())
    }

    /// Writes what is left and makes the store durable (a checkpoint). Refuses an export whose
    /// keys name a lease it does not carry.
    pub fn finish(mut self) -> Result<ImportReport, StoreError> {
        if let Some(missing) = self.attached.iter().find(|id| !self.leases.contains_key(id)) {
            return Err(StoreError::Corrupt(format!(
                "keys are attached to lease {missing}, which the export does not carry"
            )));
        }
        self.commit(Some(0))?;
        sync_dir(&self.dir)?;
        Ok(ImportReport {
            revision: self.revision,
            keys: self.keys,
            leases: self.leases.len() as u64,
        })
    }

    /// Commits the keys gathered so far; `checkpoint` (the last commit) adds the leases and
    /// syncs the file.
    fn commit(&mut self, checkpoint: Option<u64>) -> Result<(), StoreError> {
        let lease_changes: Vec<(i64, Option<i64>)> = match checkpoint {
            Some(_) => self.leases.iter().map(|(id, ttl)| (*id, Some(*ttl))).collect(),
            None => Vec::new(),
        };
        self.engine.commit(&Commit {
            overlays: &[&self.overlay],
            lease_changes: &lease_changes,
            revision: self.revision,
            next_lease_id: self.next_lease_id,
            checkpoint,
        })?;
        self.overlay.clear();
        self.overlay_bytes = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::types::{RangeRequest, Txn, TxnOp};
    use crate::{EmbeddedOptions, EmbeddedStore};

    async fn put(store: &EmbeddedStore, key: &str, value: &str) {
        store
            .txn(Txn::new().and_then([TxnOp::put(key, value)]))
            .await
            .unwrap();
    }

    /// Every key of the store and its metadata, in key order.
    async fn everything(store: &EmbeddedStore) -> Vec<crate::types::KeyValue> {
        store
            .range(RangeRequest::new(KeyRange::from(Vec::new())))
            .await
            .unwrap()
            .kvs
    }

    /// An export holds the store as of the moment it was taken, with each key's revisions,
    /// version and lease, while writes after it go on and are not in it; the store imported
    /// from it reads back the same keys at the same revision, keeps the lease (its keys go when
    /// it is revoked) and grants new leases above the exported ones.
    #[tokio::test]
    async fn an_export_taken_while_writes_go_on_imports_as_the_store_was() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = EmbeddedStore::open(dir.path().join("live"), EmbeddedOptions::default())
            .await
            .unwrap();
        put(&store, "a", "1").await;
        put(&store, "a", "2").await;
        put(&store, "b", "kept").await;
        let lease = store.lease_grant(60).await.unwrap().id;
        store
            .txn(Txn::new().and_then([TxnOp::put_with_lease("claim", "held", lease)]))
            .await
            .unwrap();
        put(&store, "gone", "soon").await;
        store
            .txn(Txn::new().and_then([TxnOp::delete("gone")]))
            .await
            .unwrap();
        let before = everything(&store).await;
        let export = store.export().unwrap();
        put(&store, "after", "not in the export").await;
        put(&store, "a", "3").await;
        let revision = export.revision();
        assert_eq!(revision, store.get(b"b").await.unwrap().1 - 2);

        let restored_dir = dir.path().join("restored");
        let mut import = StoreImport::create(&restored_dir, revision, export.next_lease_id()).unwrap();
        let leases = export.for_each_key(|key| import.key(key)).unwrap();
        assert_eq!(leases, [ExportedLease { id: lease.0, ttl: 60 }]);
        for exported in leases {
            import.lease(exported).unwrap();
        }
        let report = import.finish().unwrap();
        assert_eq!((report.keys, report.leases), (3, 1));
        store.close().await;

        let (restored, recovery) = EmbeddedStore::open(&restored_dir, EmbeddedOptions::default())
            .await
            .unwrap();
        assert_eq!(recovery.revision, revision);
        assert_eq!(everything(&restored).await, before);
        let status = restored
            .lease_time_to_live(lease)
            .await
            .unwrap()
            .expect("the lease is back");
        assert_eq!(status.keys, [b"claim".to_vec()]);
        let newer = restored.lease_grant(5).await.unwrap().id;
        assert!(newer.0 > lease.0, "{newer:?} after {lease:?}");
        restored.lease_revoke(lease).await.unwrap();
        assert_eq!(restored.get(b"claim").await.unwrap().0, None);
        restored.close().await;
    }

    /// A lease revoked (or lapsed) before the export read the lease table, while its keys are
    /// still in the snapshot (the revoke is applied, its batch not yet durable), is exported
    /// with the shortest TTL: its keys lapse at once in the restored store, as they did in the
    /// live one.
    #[tokio::test]
    async fn a_lease_revoked_as_the_snapshot_is_taken_lapses_at_once_after_the_import() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = EmbeddedStore::open(dir.path(), EmbeddedOptions::default())
            .await
            .unwrap();
        let lease = store.lease_grant(600).await.unwrap().id;
        store
            .txn(Txn::new().and_then([TxnOp::put_with_lease("claim", "held", lease)]))
            .await
            .unwrap();
        store
            .shared
            .journal_switch
            .hold
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let revoking = tokio::spawn({
            let store = store.clone();
            async move { store.lease_revoke(lease).await }
        });
        for _ in 0..2500 {
            if store.lease_time_to_live(lease).await.unwrap().is_none() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        let export = store.export().unwrap();
        store
            .shared
            .journal_switch
            .hold
            .store(false, std::sync::atomic::Ordering::Relaxed);
        revoking.await.unwrap().unwrap();
        let mut keys = Vec::new();
        let leases = export
            .for_each_key(|key| {
                keys.push(key.key);
                Ok::<(), StoreError>(())
            })
            .unwrap();
        assert_eq!(
            keys,
            [b"claim".to_vec()],
            "the revoke was not durable at the snapshot"
        );
        assert_eq!(leases, [ExportedLease { id: lease.0, ttl: 1 }]);
        store.close().await;
    }

    /// An import refuses what no export produces: keys out of order, revisions past the
    /// export's, a lease its keys name but it does not carry, and a directory holding a store.
    #[tokio::test]
    async fn an_import_refuses_what_no_export_produces() {
        let dir = tempfile::tempdir().unwrap();
        let key = |name: &str, revision: i64, lease: i64| ExportedKey {
            key: name.as_bytes().to_vec(),
            value: b"v".to_vec(),
            create_revision: revision,
            mod_revision: revision,
            version: 1,
            lease,
        };
        let mut import = StoreImport::create(&dir.path().join("order"), 10, 5).unwrap();
        import.key(key("b", 3, 0)).unwrap();
        assert!(matches!(import.key(key("a", 3, 0)), Err(StoreError::Corrupt(_))));
        assert!(matches!(import.key(key("c", 11, 0)), Err(StoreError::Corrupt(_))));
        assert!(matches!(import.key(key("d", 3, 5)), Err(StoreError::Corrupt(_))));
        import.key(key("e", 3, 4)).unwrap();
        assert!(matches!(import.finish(), Err(StoreError::Corrupt(_))));

        let mut done = StoreImport::create(&dir.path().join("done"), 10, 5).unwrap();
        done.key(key("a", 3, 0)).unwrap();
        done.finish().unwrap();
        assert!(matches!(
            StoreImport::create(&dir.path().join("done"), 10, 5),
            Err(StoreError::InvalidRequest(_))
        ));
    }
}
