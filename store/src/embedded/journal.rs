//! The embedded store's journal: every committed batch, appended and synced before it is acknowledged.
//!
//! The engine's commits are not synced one by one (see [`super::engine`]): a batch is durable
//! once its frames are appended to the journal and the journal is synced, which costs one
//! sequential write of the batch's changes. Now and then the writer makes the engine's state
//! durable in one synced commit, a **checkpoint**, which records the journal generation that
//! follows it; the journals before that generation are then removed. Opening the store replays
//! the journals from the generation the engine recorded on, so a crash loses no acknowledged
//! batch however far the engine's file is behind.
//!
//! A store directory holds `journal-<G>.log` files, one frame per change set. A frame is
//! `len: u32 LE | crc32c(payload): u32 LE | payload`; the payload is the change set's revision
//! and the resulting state of each key it touched (not the request), so replay needs no logic
//! beyond "set" and "remove" and replaying a frame twice changes nothing. A frame cut short or
//! failing its checksum at the end of the newest journal is a write that was never acknowledged
//! (torn by a crash): replay stops there. The store's former format (see [`super::legacy`]) used
//! the same frames in files named `wal-<G>.log`.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::apply::{Change, Entry};
use super::engine::Stored;
use super::sync_dir;
use crate::error::StoreError;

const TAG_PUT: u8 = 1;
const TAG_DELETE: u8 = 2;
const TAG_GRANT: u8 = 3;
const TAG_REVOKE: u8 = 4;
const FRAME_HEADER: usize = 8;

/// Appends `entry` as one frame to `out`.
pub(crate) fn encode_entry(entry: &Entry, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER]);
    put_i64(out, entry.revision);
    put_u32(out, entry.changes.len() as u32);
    for change in &entry.changes {
        match change {
            Change::Put { key, kv } => {
                out.push(TAG_PUT);
                put_bytes(out, key);
                put_bytes(out, &kv.value);
                put_i64(out, kv.create_revision);
                put_i64(out, kv.version);
                put_i64(out, kv.lease);
            }
            Change::Delete { key } => {
                out.push(TAG_DELETE);
                put_bytes(out, key);
            }
            Change::LeaseGrant { id, ttl } => {
                out.push(TAG_GRANT);
                put_i64(out, *id);
                put_i64(out, *ttl);
            }
            Change::LeaseRevoke { id } => {
                out.push(TAG_REVOKE);
                put_i64(out, *id);
            }
        }
    }
    let payload = &out[start + FRAME_HEADER..];
    let len = payload.len() as u32;
    let crc = crc32c::crc32c(payload);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

fn decode_entry(payload: &[u8]) -> Option<Entry> {
    let mut r = Reader(payload);
    let revision = r.i64()?;
    let count = r.u32()?;
    let mut changes = Vec::with_capacity(count.min(1024) as usize);
    for _ in 0..count {
        let change = match r.u8()? {
            TAG_PUT => {
                let key = r.bytes()?.to_vec();
                let value: Arc<[u8]> = Arc::from(r.bytes()?);
                Change::Put {
                    key,
                    kv: Stored {
                        value,
                        create_revision: r.i64()?,
                        mod_revision: revision,
                        version: r.i64()?,
                        lease: r.i64()?,
                    },
                }
            }
            TAG_DELETE => Change::Delete {
                key: r.bytes()?.to_vec(),
            },
            TAG_GRANT => Change::LeaseGrant {
                id: r.i64()?,
                ttl: r.i64()?,
            },
            TAG_REVOKE => Change::LeaseRevoke { id: r.i64()? },
            _ => return None,
        };
        changes.push(change);
    }
    r.0.is_empty().then_some(Entry { revision, changes })
}

/// Splits a log's bytes into entries. Returns them and the length of the valid prefix: bytes
/// after it are a torn or corrupt tail.
pub(crate) fn decode_log(bytes: &[u8]) -> (Vec<Entry>, usize) {
    let mut entries = Vec::new();
    let mut offset = 0;
    while bytes.len() - offset >= FRAME_HEADER {
        let len = u32::from_le_bytes(bytes[offset..offset + 4].try_into().unwrap()) as usize;
        let crc = u32::from_le_bytes(bytes[offset + 4..offset + 8].try_into().unwrap());
        let Some(payload) = bytes.get(offset + FRAME_HEADER..offset + FRAME_HEADER + len) else {
            break;
        };
        if crc32c::crc32c(payload) != crc {
            break;
        }
        let Some(entry) = decode_entry(payload) else {
            break;
        };
        entries.push(entry);
        offset += FRAME_HEADER + len;
    }
    (entries, offset)
}

pub(crate) fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u32(out, bytes.len() as u32);
    out.extend_from_slice(bytes);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }
}

/// The path of journal generation `generation` in `dir`.
pub(crate) fn journal_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("journal-{generation:020}.log"))
}

fn parse_journal_name(name: &str) -> Option<u64> {
    name.strip_prefix("journal-")?.strip_suffix(".log")?.parse().ok()
}

/// The journal generations in `dir`, in order.
pub(crate) fn generations(dir: &Path) -> Result<Vec<u64>, StoreError> {
    let io = |e| StoreError::io("listing the store directory", e);
    let mut generations = Vec::new();
    for item in fs::read_dir(dir).map_err(io)? {
        let item = item.map_err(io)?;
        if let Some(generation) = item.file_name().to_str().and_then(parse_journal_name) {
            generations.push(generation);
        }
    }
    generations.sort_unstable();
    Ok(generations)
}

/// What the journals from a generation on hold.
#[derive(Debug, Default)]
pub(crate) struct Replay {
    pub entries: Vec<Entry>,
    /// Bytes after the last whole frame of the newest journal: a write torn by a crash, never
    /// acknowledged, and not replayed.
    pub torn_bytes: u64,
    /// The newest generation found, if any.
    pub last_generation: Option<u64>,
}

/// Reads every journal of generation `from` or later, in order, without changing any file.
/// Damage anywhere but at the end of the newest journal is corruption: a frame after it was
/// acknowledged.
pub(crate) fn read_from(dir: &Path, from: u64) -> Result<Replay, StoreError> {
    let live: Vec<u64> = generations(dir)?.into_iter().filter(|g| *g >= from).collect();
    let mut replay = Replay {
        last_generation: live.last().copied(),
        ..Replay::default()
    };
    for (i, generation) in live.iter().enumerate() {
        let path = journal_path(dir, *generation);
        let bytes = fs::read(&path).map_err(|e| StoreError::io("reading the journal", e))?;
        let (mut found, valid) = decode_log(&bytes);
        if valid < bytes.len() {
            if i + 1 < live.len() {
                return Err(StoreError::Corrupt(format!(
                    "journal {} is damaged at byte {valid} and a newer journal follows it",
                    path.display()
                )));
            }
            replay.torn_bytes = (bytes.len() - valid) as u64;
        }
        replay.entries.append(&mut found);
    }
    Ok(replay)
}

/// The journal being appended to: one file, synced after each batch.
#[derive(Debug)]
pub(crate) struct Journal {
    dir: PathBuf,
    generation: u64,
    file: File,
    /// Bytes appended since the last checkpoint.
    appended: u64,
}

impl Journal {
    /// Starts generation `generation` as a new, empty file (replacing one a crash left behind
    /// before any frame of it was acknowledged), and syncs the directory so it stays.
    pub fn create(dir: &Path, generation: u64) -> Result<Journal, StoreError> {
        let path = journal_path(dir, generation);
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| StoreError::io("creating a journal", e))?;
        sync_dir(dir)?;
        Ok(Journal {
            dir: dir.to_path_buf(),
            generation,
            file,
            appended: 0,
        })
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Bytes appended since the journal was started.
    pub fn appended(&self) -> u64 {
        self.appended
    }

    /// Appends encoded frames and syncs them: the batch is durable when this returns.
    pub fn append(&mut self, frames: &[u8]) -> Result<(), StoreError> {
        self.file
            .write_all(frames)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| StoreError::io("writing the journal", e))?;
        self.appended += frames.len() as u64;
        Ok(())
    }

    /// Starts the next generation; the caller then checkpoints the engine on it and calls
    /// [`Journal::remove_before`].
    pub fn rotate(&mut self) -> Result<(), StoreError> {
        *self = Journal::create(&self.dir, self.generation + 1)?;
        Ok(())
    }

    /// Removes the journals before the current generation: a checkpoint holds all they say.
    pub fn remove_before(&self) -> Result<(), StoreError> {
        remove_before(&self.dir, self.generation)
    }
}

/// Removes the journals in `dir` before generation `generation`: a checkpoint at `generation`
/// holds all they say.
pub(crate) fn remove_before(dir: &Path, generation: u64) -> Result<(), StoreError> {
    for older in generations(dir)? {
        if older < generation {
            fs::remove_file(journal_path(dir, older))
                .map_err(|e| StoreError::io("removing a checkpointed journal", e))?;
        }
    }
    Ok(())
}
