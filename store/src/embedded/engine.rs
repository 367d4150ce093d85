//! The embedded store's durable state: keys, revision and leases in one `redb` file on disk.
//!
//! `redb` is a copy-on-write B-tree with MVCC: a read transaction sees the state of the last
//! commit when it began, for as long as it lives, and never waits for the writer; a write
//! transaction's commit is atomic. Batches are committed without a sync
//! ([`redb::Durability::None`]: their pages stay in the engine's write buffer or reach the file
//! unsynced) because the journal already made them durable (see [`super::journal`]); a
//! checkpoint is a commit at [`redb::Durability::Immediate`] with quick repair (the allocator
//! state saved with it), which makes everything before it durable and lets a crash reopen at
//! once, on that checkpoint. Only the pages a read touches are read, through a cache of bounded
//! size: memory does not grow with the number of keys.
//!
//! Tables:
//!
//! - `kvs`: key → [`Stored`], encoded as `create_revision | mod_revision | version | lease`
//!   (each `i64` little endian) followed by the value;
//! - `meta`: `revision` (the store revision), `next_lease_id`, and `journal_generation` (the
//!   first journal a checkpoint does not hold);
//! - `leases`: lease id → TTL in seconds;
//! - `lease_keys`: lease id → the keys attached to it, so that opening the store rebuilds the
//!   lease table without reading every key.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use redb::{
    Database, MultimapTableDefinition, ReadOnlyTable, ReadableDatabase, ReadableMultimapTable, ReadableTable,
    ReadableTableMetadata, TableDefinition,
};

use super::apply::KeyState;
use crate::error::StoreError;

/// The name of the engine's file in the store directory.
pub(crate) const ENGINE_FILE: &str = "store.redb";

const KVS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("kvs");
const META: TableDefinition<&str, i64> = TableDefinition::new("meta");
const LEASES: TableDefinition<i64, i64> = TableDefinition::new("leases");
const LEASE_KEYS: MultimapTableDefinition<i64, &[u8]> = MultimapTableDefinition::new("lease_keys");
const REVISION: &str = "revision";
const NEXT_LEASE_ID: &str = "next_lease_id";
const JOURNAL_GENERATION: &str = "journal_generation";
/// The revision of a store nothing was ever written to (etcd's too).
const FIRST_REVISION: i64 = 1;

/// A key's state as the embedded store keeps it. `lease` is `0` for no lease (etcd's encoding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    pub value: Arc<[u8]>,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub version: i64,
    pub lease: i64,
}

const STORED_HEADER: usize = 32;

impl Stored {
    fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        for field in [self.create_revision, self.mod_revision, self.version, self.lease] {
            out.extend_from_slice(&field.to_le_bytes());
        }
        out.extend_from_slice(&self.value);
    }

    fn decode(bytes: &[u8]) -> Result<Stored, StoreError> {
        if bytes.len() < STORED_HEADER {
            return Err(StoreError::Corrupt(format!(
                "a stored key of {} bytes, shorter than its header",
                bytes.len()
            )));
        }
        let field = |i: usize| i64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        Ok(Stored {
            create_revision: field(0),
            mod_revision: field(1),
            version: field(2),
            lease: field(3),
            value: Arc::from(&bytes[STORED_HEADER..]),
        })
    }

    /// The lease of an encoded state, without decoding the value.
    fn lease_of(bytes: &[u8]) -> i64 {
        bytes
            .get(24..32)
            .map_or(0, |b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
}

/// Pending changes of a batch, in key order: `None` marks a delete.
pub(crate) type Overlay = BTreeMap<Vec<u8>, Option<Stored>>;

/// A key range as the maps and tables take it.
pub(crate) type KeyBounds<'r> = (Bound<&'r [u8]>, Bound<&'r [u8]>);

/// Maps an engine failure onto the store's errors.
fn engine_error(context: &'static str) -> impl Fn(redb::Error) -> StoreError {
    move |error| match error {
        redb::Error::Corrupted(what) => StoreError::Corrupt(format!("{context}: {what}")),
        redb::Error::Io(io) => StoreError::io(context, io),
        other => StoreError::io(context, std::io::Error::other(other)),
    }
}

/// Shorthand: `result.map_err(into(context))` for any `redb` error type.
fn into<E: Into<redb::Error>>(context: &'static str) -> impl Fn(E) -> StoreError {
    let map = engine_error(context);
    move |error| map(error.into())
}

/// Everything one or more batches change, committed in one write transaction.
#[derive(Debug)]
pub(crate) struct Commit<'a> {
    /// The batches' changes, oldest first: a later batch's state of a key wins.
    pub overlays: &'a [&'a Overlay],
    /// Lease grants (`Some(ttl)`) and revokes (`None`), in order.
    pub lease_changes: &'a [(i64, Option<i64>)],
    pub revision: i64,
    pub next_lease_id: i64,
    /// `Some(generation)`: a checkpoint, synced when the commit returns, after which replay
    /// starts at journal `generation`. `None`: an ordinary batch, not synced (the journal holds
    /// it).
    pub checkpoint: Option<u64>,
}

/// What the engine holds when the store opens.
#[derive(Debug)]
pub(crate) struct Recovered {
    pub revision: i64,
    pub next_lease_id: i64,
    /// Live leases: id and TTL in seconds.
    pub leases: Vec<(i64, i64)>,
    /// Keys attached to a lease: lease id and key.
    pub lease_keys: Vec<(i64, Vec<u8>)>,
    pub keys: u64,
    /// The first journal generation the last checkpoint does not hold.
    pub journal_generation: u64,
}

/// The engine: one `redb` database. Dropping it closes the file.
pub(crate) struct Engine {
    db: Database,
    /// Whether a journal holds the batches (a file on disk), so that they are committed without
    /// a sync. An engine in memory commits them as they come.
    journaled: bool,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

impl Engine {
    /// Opens (creating if needed) the engine's file, with a page cache of at most `cache_bytes`.
    pub fn open(path: &Path, cache_bytes: usize) -> Result<Engine, StoreError> {
        let db = redb::Builder::new()
            .set_cache_size(cache_bytes)
            .create(path)
            .map_err(|e| match e {
                redb::DatabaseError::DatabaseAlreadyOpen => StoreError::Locked(path.to_path_buf()),
                other => into("opening the store file")(other),
            })?;
        Engine::with_tables(db, true)
    }

    /// An engine whose pages live in memory: nothing survives it.
    pub fn in_memory(cache_bytes: usize) -> Result<Engine, StoreError> {
        let db = redb::Builder::new()
            .set_cache_size(cache_bytes)
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(into("creating the store in memory"))?;
        Engine::with_tables(db, false)
    }

    /// Creates the tables of a new file (a no-op on an existing one), so reads can count on them.
    fn with_tables(db: Database, journaled: bool) -> Result<Engine, StoreError> {
        let context = "creating the store tables";
        let txn = db.begin_write().map_err(into(context))?;
        {
            txn.open_table(KVS).map_err(into(context))?;
            txn.open_table(LEASES).map_err(into(context))?;
            txn.open_multimap_table(LEASE_KEYS).map_err(into(context))?;
            let mut meta = txn.open_table(META).map_err(into(context))?;
            if meta.get(REVISION).map_err(into(context))?.is_none() {
                meta.insert(REVISION, FIRST_REVISION).map_err(into(context))?;
                meta.insert(NEXT_LEASE_ID, 1).map_err(into(context))?;
            }
        }
        txn.commit().map_err(into(context))?;
        Ok(Engine { db, journaled })
    }

    /// Reads what opening the store needs: revision, leases and their keys, and the key count.
    pub fn recover(&self) -> Result<Recovered, StoreError> {
        let context = "reading the store at open";
        let txn = self.db.begin_read().map_err(into(context))?;
        let meta = txn.open_table(META).map_err(into(context))?;
        let read_meta = |name: &str| -> Result<i64, StoreError> {
            Ok(meta
                .get(name)
                .map_err(into(context))?
                .ok_or_else(|| StoreError::Corrupt(format!("the store file has no {name}")))?
                .value())
        };
        let revision = read_meta(REVISION)?;
        let next_lease_id = read_meta(NEXT_LEASE_ID)?;
        let journal_generation = meta
            .get(JOURNAL_GENERATION)
            .map_err(into(context))?
            .map_or(0, |g| u64::try_from(g.value()).unwrap_or(0));
        let mut leases = Vec::new();
        for item in txn
            .open_table(LEASES)
            .map_err(into(context))?
            .iter()
            .map_err(into(context))?
        {
            let (id, ttl) = item.map_err(into(context))?;
            leases.push((id.value(), ttl.value()));
        }
        let mut lease_keys = Vec::new();
        let attached = txn.open_multimap_table(LEASE_KEYS).map_err(into(context))?;
        for item in attached.iter().map_err(into(context))? {
            let (lease, keys) = item.map_err(into(context))?;
            for key in keys {
                lease_keys.push((lease.value(), key.map_err(into(context))?.value().to_vec()));
            }
        }
        let keys = txn
            .open_table(KVS)
            .map_err(into(context))?
            .len()
            .map_err(into(context))?;
        Ok(Recovered {
            revision,
            next_lease_id,
            leases,
            lease_keys,
            keys,
            journal_generation,
        })
    }

    /// A consistent view of the last commit; it never waits for the writer.
    pub fn read(&self) -> Result<ReadView, StoreError> {
        let context = "reading the store";
        let txn = self.db.begin_read().map_err(into(context))?;
        let revision = txn
            .open_table(META)
            .map_err(into(context))?
            .get(REVISION)
            .map_err(into(context))?
            .map_or(FIRST_REVISION, |r| r.value());
        let kvs = txn.open_table(KVS).map_err(into(context))?;
        Ok(ReadView { kvs, revision })
    }

    /// Commits one batch in one write transaction, synced if it is a checkpoint. Keeps
    /// `lease_keys` in step with the keys' leases.
    pub fn commit(&self, batch: &Commit<'_>) -> Result<(), StoreError> {
        let context = "committing to the store";
        let mut txn = self.db.begin_write().map_err(into(context))?;
        match batch.checkpoint {
            Some(_) => txn.set_quick_repair(true),
            None if self.journaled => txn
                .set_durability(redb::Durability::None)
                .map_err(into(context))?,
            None => {}
        }
        {
            let mut kvs = txn.open_table(KVS).map_err(into(context))?;
            let mut lease_keys = txn.open_multimap_table(LEASE_KEYS).map_err(into(context))?;
            let mut buf = Vec::new();
            // Several batches: each key once, in key order, in the state of the last batch.
            let mut merged: BTreeMap<&Vec<u8>, &Option<Stored>> = BTreeMap::new();
            let changes: Box<dyn Iterator<Item = (&Vec<u8>, &Option<Stored>)>> = match batch.overlays {
                [one] => Box::new(one.iter()),
                several => {
                    for (key, state) in several.iter().flat_map(|overlay| overlay.iter()) {
                        merged.insert(key, state);
                    }
                    Box::new(merged.iter().map(|(key, state)| (*key, *state)))
                }
            };
            for (key, state) in changes {
                let previous_lease = match state {
                    Some(kv) => {
                        kv.encode(&mut buf);
                        kvs.insert(key.as_slice(), buf.as_slice())
                            .map_err(into(context))?
                            .map_or(0, |old| Stored::lease_of(old.value()))
                    }
                    None => kvs
                        .remove(key.as_slice())
                        .map_err(into(context))?
                        .map_or(0, |old| Stored::lease_of(old.value())),
                };
                let lease = state.as_ref().map_or(0, |kv| kv.lease);
                if previous_lease != 0 && previous_lease != lease {
                    lease_keys
                        .remove(previous_lease, key.as_slice())
                        .map_err(into(context))?;
                }
                if lease != 0 {
                    lease_keys.insert(lease, key.as_slice()).map_err(into(context))?;
                }
            }
            let mut leases = txn.open_table(LEASES).map_err(into(context))?;
            for &(id, ttl) in batch.lease_changes {
                match ttl {
                    Some(ttl) => {
                        leases.insert(id, ttl).map_err(into(context))?;
                    }
                    None => {
                        leases.remove(id).map_err(into(context))?;
                        lease_keys.remove_all(id).map_err(into(context))?;
                    }
                }
            }
            let mut meta = txn.open_table(META).map_err(into(context))?;
            meta.insert(REVISION, batch.revision).map_err(into(context))?;
            meta.insert(NEXT_LEASE_ID, batch.next_lease_id)
                .map_err(into(context))?;
            if let Some(generation) = batch.checkpoint {
                let generation = i64::try_from(generation).map_err(|_| {
                    StoreError::Corrupt(format!("journal generation {generation} out of range"))
                })?;
                meta.insert(JOURNAL_GENERATION, generation)
                    .map_err(into(context))?;
            }
        }
        txn.commit().map_err(into(context))
    }
}

impl Engine {
    /// Makes every commit so far durable, recording that replay starts at journal `generation`.
    pub fn checkpoint(&self, generation: u64) -> Result<(), StoreError> {
        let context = "checkpointing the store";
        let generation = i64::try_from(generation)
            .map_err(|_| StoreError::Corrupt(format!("journal generation {generation} out of range")))?;
        let mut txn = self.db.begin_write().map_err(into(context))?;
        txn.set_quick_repair(true);
        txn.open_table(META)
            .map_err(into(context))?
            .insert(JOURNAL_GENERATION, generation)
            .map_err(into(context))?;
        txn.commit().map_err(into(context))
    }
}

/// The keys as of one commit, and that commit's store revision.
pub(crate) struct ReadView {
    kvs: ReadOnlyTable<&'static [u8], &'static [u8]>,
    pub revision: i64,
}

impl std::fmt::Debug for ReadView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadView")
            .field("revision", &self.revision)
            .finish_non_exhaustive()
    }
}

impl ReadView {
    pub fn get(&self, key: &[u8]) -> Result<Option<Stored>, StoreError> {
        match self.kvs.get(key).map_err(into("reading a key"))? {
            Some(found) => Ok(Some(Stored::decode(found.value())?)),
            None => Ok(None),
        }
    }

    /// Keys in `bounds`, in order, read as the iterator goes.
    pub fn range(
        &self,
        bounds: KeyBounds<'_>,
    ) -> Result<impl Iterator<Item = Result<KeyState, StoreError>> + '_, StoreError> {
        let range = self.kvs.range::<&[u8]>(bounds).map_err(into("reading a range"))?;
        Ok(range.map(|item| {
            let (key, kv) = item.map_err(into("reading a range"))?;
            Ok((key.value().to_vec(), Stored::decode(kv.value())?))
        }))
    }
}
