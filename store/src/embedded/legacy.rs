//! The embedded store's former on-disk format, read once to import it into the engine.
//!
//! Before the engine, a store directory held `snapshot` (the whole state at the start of log
//! generation `G`, absent until the first compaction) and `wal-<G>.log` files (one framed record
//! per committed change set since that snapshot). Opening a directory in that format replays it
//! with the recovery code below, writes the result into the engine's file, then moves the old
//! files into `legacy-<unix seconds>/` beside it (see [`import`]).
//!
//! Its logs are made of the journal's frames (see [`super::journal`]).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::apply::{Change, Entry};
use super::engine::{Commit, ENGINE_FILE, Engine, Overlay, Stored};
use super::journal::decode_log;
#[cfg(test)]
use super::journal::{put_bytes, put_i64, put_u32};
use super::sync_dir;
use crate::error::StoreError;

/// The keys of a replayed store, in order.
pub(crate) type KeyMap = BTreeMap<Vec<u8>, Stored>;

const SNAPSHOT_MAGIC: &[u8; 8] = b"APSNAP01";

pub(crate) const SNAPSHOT_FILE: &str = "snapshot";
const SNAPSHOT_TMP: &str = "snapshot.tmp";

pub(crate) fn wal_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("wal-{generation:020}.log"))
}

fn parse_wal_name(name: &str) -> Option<u64> {
    name.strip_prefix("wal-")?.strip_suffix(".log")?.parse().ok()
}

/// The state a snapshot holds.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    pub revision: i64,
    pub next_lease_id: i64,
    /// The log generation that continues from this snapshot.
    pub generation: u64,
    /// Live leases: id and TTL in seconds.
    pub leases: Vec<(i64, i64)>,
    pub kvs: KeyMap,
}

/// Writes a snapshot durably: temporary file, `fsync`, rename, `fsync` of the directory.
/// Returns its size in bytes. The former writer, kept for the tests of the reader.
#[cfg(test)]
pub(crate) fn write_snapshot(
    dir: &Path,
    revision: i64,
    next_lease_id: i64,
    generation: u64,
    leases: &[(i64, i64)],
    kvs: &KeyMap,
) -> Result<u64, StoreError> {
    use std::io::{BufWriter, Write};
    let tmp = dir.join(SNAPSHOT_TMP);
    let io = |e| StoreError::io("writing the snapshot", e);
    let file = File::create(&tmp).map_err(io)?;
    let mut out = CrcWriter {
        inner: BufWriter::with_capacity(1 << 20, file),
        crc: 0,
        len: 0,
    };
    out.inner.write_all(SNAPSHOT_MAGIC).map_err(io)?;
    let mut buf = Vec::with_capacity(64);
    put_i64(&mut buf, revision);
    put_i64(&mut buf, next_lease_id);
    buf.extend_from_slice(&generation.to_le_bytes());
    put_u32(&mut buf, leases.len() as u32);
    for (id, ttl) in leases {
        put_i64(&mut buf, *id);
        put_i64(&mut buf, *ttl);
    }
    buf.extend_from_slice(&(kvs.len() as u64).to_le_bytes());
    out.write(&buf).map_err(io)?;
    for (key, kv) in kvs {
        buf.clear();
        put_bytes(&mut buf, key);
        put_bytes(&mut buf, &kv.value);
        put_i64(&mut buf, kv.create_revision);
        put_i64(&mut buf, kv.mod_revision);
        put_i64(&mut buf, kv.version);
        put_i64(&mut buf, kv.lease);
        out.write(&buf).map_err(io)?;
    }
    let crc = out.crc;
    out.inner.write_all(&crc.to_le_bytes()).map_err(io)?;
    let size = out.len + SNAPSHOT_MAGIC.len() as u64 + 4;
    let file = out.inner.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    drop(file);
    fs::rename(&tmp, dir.join(SNAPSHOT_FILE)).map_err(io)?;
    sync_dir(dir)?;
    Ok(size)
}

/// Accumulates the checksum and length of what a snapshot writer writes.
#[cfg(test)]
struct CrcWriter {
    inner: std::io::BufWriter<File>,
    crc: u32,
    len: u64,
}

#[cfg(test)]
impl CrcWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.len += bytes.len() as u64;
        self.inner.write_all(bytes)
    }
}

/// Reads a snapshot as a stream (the file is never held in memory whole), checking its checksum.
fn read_snapshot(path: &Path) -> Result<Snapshot, StoreError> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("snapshot {}: {what}", path.display()));
    let io = |e| StoreError::io("reading the snapshot", e);
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let framing = (SNAPSHOT_MAGIC.len() + 4) as u64;
    let mut r = SnapshotReader {
        inner: std::io::BufReader::with_capacity(1 << 20, file),
        crc: 0,
        remaining: len.saturating_sub(framing),
    };
    if len < framing {
        return Err(corrupt("not a snapshot"));
    }
    let mut magic = [0; 8];
    r.inner.read_exact(&mut magic).map_err(io)?;
    if &magic != SNAPSHOT_MAGIC {
        return Err(corrupt("not a snapshot"));
    }
    let parse = |r: &mut SnapshotReader| -> Result<Option<Snapshot>, std::io::Error> {
        let revision = r.i64()?;
        let next_lease_id = r.i64()?;
        let generation = r.i64()? as u64;
        let lease_count = u32::from_le_bytes(r.array()?);
        let mut leases = Vec::with_capacity(lease_count.min(1 << 16) as usize);
        for _ in 0..lease_count {
            leases.push((r.i64()?, r.i64()?));
        }
        let kv_count = r.i64()? as u64;
        let mut kvs = Vec::with_capacity(kv_count.min(r.remaining / 40) as usize);
        for _ in 0..kv_count {
            let Some(key) = r.bytes()? else {
                return Ok(None);
            };
            let Some(value) = r.bytes()? else {
                return Ok(None);
            };
            let kv = Stored {
                value: Arc::from(value),
                create_revision: r.i64()?,
                mod_revision: r.i64()?,
                version: r.i64()?,
                lease: r.i64()?,
            };
            kvs.push((key, kv));
        }
        if r.remaining != 0 {
            return Ok(None);
        }
        Ok(Some(Snapshot {
            revision,
            next_lease_id,
            generation,
            leases,
            // Keys were written in order: this builds the map with full nodes.
            kvs: kvs.into_iter().collect(),
        }))
    };
    let snapshot = match parse(&mut r) {
        Ok(Some(snapshot)) => snapshot,
        Ok(None) => return Err(corrupt("malformed contents")),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            return Err(corrupt("cut short"));
        }
        Err(e) => return Err(io(e)),
    };
    let mut trailer = [0; 4];
    r.inner.read_exact(&mut trailer).map_err(io)?;
    if u32::from_le_bytes(trailer) != r.crc {
        return Err(corrupt("checksum mismatch"));
    }
    Ok(snapshot)
}

/// Reads a snapshot's body, keeping its checksum and refusing to read past its end.
struct SnapshotReader {
    inner: std::io::BufReader<File>,
    crc: u32,
    remaining: u64,
}

impl SnapshotReader {
    fn fill(&mut self, buf: &mut [u8]) -> std::io::Result<()> {
        if buf.len() as u64 > self.remaining {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.inner.read_exact(buf)?;
        self.remaining -= buf.len() as u64;
        self.crc = crc32c::crc32c_append(self.crc, buf);
        Ok(())
    }

    fn array<const N: usize>(&mut self) -> std::io::Result<[u8; N]> {
        let mut buf = [0; N];
        self.fill(&mut buf)?;
        Ok(buf)
    }

    fn i64(&mut self) -> std::io::Result<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    /// A length-prefixed byte string; `None` if its length runs past the end.
    fn bytes(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        let len = u32::from_le_bytes(self.array()?) as u64;
        if len > self.remaining {
            return Ok(None);
        }
        let mut buf = vec![0; len as usize];
        self.fill(&mut buf)?;
        Ok(Some(buf))
    }
}

/// What recovery found on disk.
#[derive(Debug)]
pub(crate) struct Recovered {
    pub snapshot: Snapshot,
    /// Log entries after the snapshot, in order.
    pub entries: Vec<Entry>,
    /// Bytes after the last whole record of the newest log (a torn, unacknowledged write).
    pub torn_bytes: u64,
}

/// Reads the snapshot and the logs after it, without changing any file: a torn tail of the
/// newest log is left out, logs the snapshot covers and a half-written `snapshot.tmp` are
/// ignored.
pub(crate) fn recover(dir: &Path) -> Result<Recovered, StoreError> {
    let io = |context: &'static str| move |e| StoreError::io(context, e);
    let snapshot_path = dir.join(SNAPSHOT_FILE);
    let snapshot = if snapshot_path.exists() {
        read_snapshot(&snapshot_path)?
    } else {
        Snapshot {
            revision: 1,
            next_lease_id: 1,
            ..Snapshot::default()
        }
    };
    let mut live = Vec::new();
    for generation in generations(dir)? {
        if generation >= snapshot.generation {
            live.push(generation);
        }
    }
    let mut entries = Vec::new();
    let mut torn_bytes = 0;
    for (i, generation) in live.iter().enumerate() {
        let path = wal_path(dir, *generation);
        let bytes = fs::read(&path).map_err(io("reading the log"))?;
        let (mut found, valid) = decode_log(&bytes);
        if valid < bytes.len() {
            if i + 1 < live.len() {
                return Err(StoreError::Corrupt(format!(
                    "log {} is damaged at byte {valid} and a newer log follows it",
                    path.display()
                )));
            }
            torn_bytes = (bytes.len() - valid) as u64;
        }
        entries.append(&mut found);
    }
    Ok(Recovered {
        snapshot,
        entries,
        torn_bytes,
    })
}

/// The log generations in the directory, in order.
fn generations(dir: &Path) -> Result<Vec<u64>, StoreError> {
    let io = |e| StoreError::io("listing the store directory", e);
    let mut generations = Vec::new();
    for item in fs::read_dir(dir).map_err(io)? {
        let item = item.map_err(io)?;
        if let Some(generation) = item.file_name().to_str().and_then(parse_wal_name) {
            generations.push(generation);
        }
    }
    generations.sort_unstable();
    Ok(generations)
}

/// The files of the former format in the directory.
fn legacy_files(dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let mut files: Vec<PathBuf> = generations(dir)?.into_iter().map(|g| wal_path(dir, g)).collect();
    for name in [SNAPSHOT_FILE, SNAPSHOT_TMP] {
        if dir.join(name).exists() {
            files.push(dir.join(name));
        }
    }
    Ok(files)
}

/// The state a snapshot and its logs add up to.
#[derive(Debug)]
pub(crate) struct Replayed {
    pub revision: i64,
    pub next_lease_id: i64,
    pub leases: BTreeMap<i64, i64>,
    pub kvs: KeyMap,
}

/// Applies the logged entries on top of the snapshot.
pub(crate) fn replay(recovered: Recovered) -> Result<Replayed, StoreError> {
    let Recovered {
        snapshot, entries, ..
    } = recovered;
    let mut kvs = snapshot.kvs;
    let mut leases: BTreeMap<i64, i64> = snapshot.leases.into_iter().collect();
    let mut next_lease_id = snapshot.next_lease_id;
    let mut revision = snapshot.revision;
    for entry in entries {
        if entry.revision < revision {
            return Err(StoreError::Corrupt(format!(
                "log revision {} after revision {revision}",
                entry.revision
            )));
        }
        revision = entry.revision;
        for change in entry.changes {
            match change {
                Change::Put { key, kv } => {
                    kvs.insert(key, kv);
                }
                Change::Delete { key } => {
                    kvs.remove(&key);
                }
                Change::LeaseGrant { id, ttl } => {
                    leases.insert(id, ttl);
                    next_lease_id = next_lease_id.max(id + 1);
                }
                Change::LeaseRevoke { id } => {
                    leases.remove(&id);
                }
            }
        }
    }
    Ok(Replayed {
        revision,
        next_lease_id,
        leases,
        kvs,
    })
}

/// What importing a directory of the former format did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyImport {
    /// Log records replayed on top of the snapshot.
    pub replayed_records: usize,
    /// Bytes after the last whole record of the newest log: a write torn by a crash, never
    /// acknowledged, and not imported.
    pub torn_bytes: u64,
    /// Where the former files are now.
    pub moved_to: PathBuf,
}

/// How many keys go into one commit of an import: bounds the engine's dirty pages.
const IMPORT_KEYS_PER_COMMIT: usize = 50_000;
const IMPORT_FILE: &str = "store.redb.import";

/// Imports a directory of the former format into the engine's file, if the directory holds
/// one and the file does not exist yet; then moves the former files into `legacy-<unix
/// seconds>/`. Crash-safe at every step: the engine's file is written under a temporary name
/// and renamed into place whole, and former files left beside an engine's file (a crash before
/// they were moved) are moved on the next open.
pub(crate) fn import(dir: &Path, cache_bytes: usize) -> Result<Option<LegacyImport>, StoreError> {
    let io = |context: &'static str| move |e| StoreError::io(context, e);
    let files = legacy_files(dir)?;
    if files.is_empty() {
        return Ok(None);
    }
    let engine_path = dir.join(ENGINE_FILE);
    let mut report = LegacyImport {
        replayed_records: 0,
        torn_bytes: 0,
        moved_to: PathBuf::new(),
    };
    if !engine_path.exists() {
        let recovered = recover(dir)?;
        report.replayed_records = recovered.entries.len();
        report.torn_bytes = recovered.torn_bytes;
        let replayed = replay(recovered)?;
        let importing = dir.join(IMPORT_FILE);
        if importing.exists() {
            fs::remove_file(&importing).map_err(io("removing an unfinished import"))?;
        }
        let engine = Engine::open(&importing, cache_bytes)?;
        let leases: Vec<(i64, Option<i64>)> = replayed
            .leases
            .iter()
            .map(|(id, ttl)| (*id, Some(*ttl)))
            .collect();
        let mut keys = replayed.kvs.into_iter().peekable();
        let mut first = true;
        while first || keys.peek().is_some() {
            let chunk: Overlay = keys
                .by_ref()
                .take(IMPORT_KEYS_PER_COMMIT)
                .map(|(key, kv)| (key, Some(kv)))
                .collect();
            engine.commit(&Commit {
                overlays: &[&chunk],
                lease_changes: if first { &leases } else { &[] },
                revision: replayed.revision,
                next_lease_id: replayed.next_lease_id,
                checkpoint: Some(0),
            })?;
            first = false;
        }
        drop(engine);
        fs::rename(&importing, &engine_path).map_err(io("moving the imported store into place"))?;
        sync_dir(dir)?;
    }
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let moved_to = dir.join(format!("legacy-{seconds}"));
    fs::create_dir_all(&moved_to).map_err(io("creating the folder for the former files"))?;
    for file in files {
        let name = file.file_name().expect("a file name");
        fs::rename(&file, moved_to.join(name)).map_err(io("moving a former file aside"))?;
    }
    sync_dir(&moved_to)?;
    sync_dir(dir)?;
    report.moved_to = moved_to;
    Ok(Some(report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::journal::encode_entry;

    fn sample() -> Vec<Entry> {
        vec![
            Entry {
                revision: 2,
                changes: vec![
                    Change::LeaseGrant { id: 1, ttl: 10 },
                    Change::Put {
                        key: b"a".to_vec(),
                        kv: Stored {
                            value: Arc::from(&b"one"[..]),
                            create_revision: 2,
                            mod_revision: 2,
                            version: 1,
                            lease: 1,
                        },
                    },
                ],
            },
            Entry {
                revision: 3,
                changes: vec![
                    Change::Delete { key: b"a".to_vec() },
                    Change::LeaseRevoke { id: 1 },
                ],
            },
        ]
    }

    #[test]
    fn entries_round_trip() {
        let mut buf = Vec::new();
        for entry in sample() {
            encode_entry(&entry, &mut buf);
        }
        let (entries, valid) = decode_log(&buf);
        assert_eq!(valid, buf.len());
        assert_eq!(entries, sample());
    }

    #[test]
    fn every_cut_of_the_last_frame_is_detected_as_torn() {
        let mut buf = Vec::new();
        let entries = sample();
        encode_entry(&entries[0], &mut buf);
        let first_len = buf.len();
        encode_entry(&entries[1], &mut buf);
        for cut in first_len..buf.len() {
            let (found, valid) = decode_log(&buf[..cut]);
            assert_eq!(found.len(), 1, "cut at {cut}");
            assert_eq!(valid, first_len);
        }
        let mut flipped = buf.clone();
        *flipped.last_mut().unwrap() ^= 0x40;
        assert_eq!(decode_log(&flipped).1, first_len);
    }

    fn write_log(dir: &Path, generation: u64, entries: &[Entry]) {
        let mut buf = Vec::new();
        for entry in entries {
            encode_entry(entry, &mut buf);
        }
        fs::write(wal_path(dir, generation), buf).unwrap();
    }

    /// A crash in the middle of a compaction left the old snapshot, the old log and the new one
    /// (and maybe a half-written snapshot): recovery replays both logs, in order.
    #[test]
    fn recovery_replays_every_log_after_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let entries = sample();
        write_log(dir.path(), 0, &entries[..1]);
        write_log(dir.path(), 1, &entries[1..]);
        fs::write(dir.path().join(SNAPSHOT_TMP), b"half a snapshot").unwrap();
        let recovered = recover(dir.path()).unwrap();
        assert_eq!(recovered.entries, entries);
        assert_eq!(recovered.torn_bytes, 0);
    }

    /// Once the snapshot of generation 1 is in place, the log of generation 0 is covered by it:
    /// recovery does not replay it.
    #[test]
    fn recovery_skips_logs_the_snapshot_covers() {
        let dir = tempfile::tempdir().unwrap();
        let entries = sample();
        write_log(dir.path(), 0, &entries[..1]);
        write_log(dir.path(), 1, &entries[1..]);
        let mut kvs = KeyMap::new();
        if let Change::Put { key, kv } = &entries[0].changes[1] {
            kvs.insert(key.clone(), kv.clone());
        }
        write_snapshot(dir.path(), 2, 2, 1, &[(1, 10)], &kvs).unwrap();
        let recovered = recover(dir.path()).unwrap();
        assert_eq!(recovered.snapshot.revision, 2);
        assert_eq!(recovered.snapshot.kvs, kvs);
        assert_eq!(recovered.snapshot.leases, vec![(1, 10)]);
        assert_eq!(recovered.entries, entries[1..]);
    }

    /// A damaged record in a log that a newer log follows cannot be a torn write: it is
    /// reported, not cut off.
    #[test]
    fn damage_before_the_newest_log_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let entries = sample();
        write_log(dir.path(), 0, &entries);
        let path = wal_path(dir.path(), 0);
        let len = fs::metadata(&path).unwrap().len();
        fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 3)
            .unwrap();
        write_log(dir.path(), 1, &[]);
        assert!(matches!(recover(dir.path()), Err(StoreError::Corrupt(_))));
    }

    #[test]
    fn snapshots_round_trip_and_cut_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut kvs = KeyMap::new();
        for i in 0..100u32 {
            let kv = Stored {
                value: Arc::from(i.to_string().into_bytes()),
                create_revision: 2,
                mod_revision: 3 + i64::from(i),
                version: 1,
                lease: i64::from(i % 3),
            };
            kvs.insert(format!("k{i:03}").into_bytes(), kv);
        }
        write_snapshot(dir.path(), 200, 7, 4, &[(1, 10), (2, 20)], &kvs).unwrap();
        let path = dir.path().join(SNAPSHOT_FILE);
        let read = read_snapshot(&path).unwrap();
        assert_eq!((read.revision, read.next_lease_id, read.generation), (200, 7, 4));
        assert_eq!(read.leases, vec![(1, 10), (2, 20)]);
        assert_eq!(read.kvs, kvs);
        let bytes = fs::read(&path).unwrap();
        for cut in [0, 5, 8, 20, bytes.len() / 2, bytes.len() - 1] {
            fs::write(&path, &bytes[..cut]).unwrap();
            assert!(
                matches!(read_snapshot(&path), Err(StoreError::Corrupt(_))),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn a_damaged_snapshot_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write_snapshot(dir.path(), 2, 2, 0, &[], &KeyMap::new()).unwrap();
        let path = dir.path().join(SNAPSHOT_FILE);
        let mut bytes = fs::read(&path).unwrap();
        bytes[10] ^= 1;
        fs::write(&path, bytes).unwrap();
        assert!(matches!(recover(dir.path()), Err(StoreError::Corrupt(_))));
    }
}
