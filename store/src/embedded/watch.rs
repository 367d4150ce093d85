//! Watches of the embedded store: a bounded history of recent changes that every watcher reads
//! at its own pace.
//!
//! The writer appends each committed revision's events to the history after the batch is
//! committed to the engine, then announces the new revision. Each watch is a task that reads the
//! history from its own cursor and feeds the watch's channel, waiting when the channel is full. So
//! a slow watcher costs no memory of its own; if it falls so far behind that the history has dropped revisions it
//! has not read, its stream ends with [`StoreError::Compacted`] instead of skipping them. The same
//! history serves watches that start at a past revision.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch};

use super::apply::{deleted_key_value, key_value};
use super::engine::Stored;
use crate::error::StoreError;
use crate::types::{EventKind, KeyRange, WatchEvent};

/// One change, sharing the stored value with the map.
#[derive(Debug, Clone)]
pub(crate) struct HistoryEvent {
    key: Vec<u8>,
    /// `None` for a delete.
    kv: Option<Stored>,
}

impl HistoryEvent {
    pub fn put(key: Vec<u8>, kv: Stored) -> Self {
        HistoryEvent { key, kv: Some(kv) }
    }

    pub fn delete(key: Vec<u8>) -> Self {
        HistoryEvent { key, kv: None }
    }

    fn size(&self) -> usize {
        64 + self.key.len() + self.kv.as_ref().map_or(0, |kv| kv.value.len())
    }

    fn to_event(&self, revision: i64) -> WatchEvent {
        match &self.kv {
            Some(kv) => WatchEvent {
                kind: EventKind::Put,
                kv: key_value(&self.key, kv),
            },
            None => WatchEvent {
                kind: EventKind::Delete,
                kv: deleted_key_value(&self.key, revision),
            },
        }
    }
}

#[derive(Debug)]
struct Revision {
    revision: i64,
    events: Vec<HistoryEvent>,
}

/// The most recent revisions' events, bounded in bytes.
#[derive(Debug)]
pub(crate) struct History {
    revisions: VecDeque<Revision>,
    bytes: usize,
    limit_bytes: usize,
    /// Events at this revision and older are gone.
    compacted: i64,
}

impl History {
    /// An empty history after `compacted` (whose events, if any, are not kept).
    pub fn new(limit_bytes: usize, compacted: i64) -> Self {
        History {
            revisions: VecDeque::new(),
            bytes: 0,
            limit_bytes,
            compacted,
        }
    }

    pub fn compacted(&self) -> i64 {
        self.compacted
    }

    pub fn push(&mut self, revision: i64, events: Vec<HistoryEvent>) {
        self.bytes += events.iter().map(HistoryEvent::size).sum::<usize>();
        self.revisions.push_back(Revision { revision, events });
        while self.bytes > self.limit_bytes && self.revisions.len() > 1 {
            let dropped = self.revisions.pop_front().expect("non-empty history");
            self.bytes -= dropped.events.iter().map(HistoryEvent::size).sum::<usize>();
            self.compacted = dropped.revision;
        }
    }

    /// Events in `range` of up to `max_revisions` revisions from `cursor` on; moves the cursor
    /// past every revision looked at. The flag says whether the cursor caught up.
    fn read(
        &self,
        cursor: &mut i64,
        range: &KeyRange,
        max_revisions: usize,
    ) -> Result<(Vec<WatchEvent>, bool), StoreError> {
        if *cursor <= self.compacted {
            return Err(StoreError::Compacted {
                compact_revision: self.compacted,
            });
        }
        let first = self.revisions.partition_point(|r| r.revision < *cursor);
        let mut out = Vec::new();
        let caught_up = self.revisions.len() - first <= max_revisions;
        for revision in self.revisions.range(first..).take(max_revisions) {
            out.extend(
                revision
                    .events
                    .iter()
                    .filter(|e| range.contains(&e.key))
                    .map(|e| e.to_event(revision.revision)),
            );
            *cursor = revision.revision + 1;
        }
        Ok((out, caught_up))
    }
}

/// Feeds one watch's channel from the history, starting at `cursor`, until the store closes, the
/// watcher goes away, or the watcher falls behind the history.
pub(crate) async fn pump(
    history: Arc<Mutex<History>>,
    mut committed: watch::Receiver<i64>,
    range: KeyRange,
    mut cursor: i64,
    events: mpsc::Sender<Result<WatchEvent, StoreError>>,
) {
    loop {
        // Mark the announced revision seen BEFORE reading, so one announced while reading
        // wakes the wait below.
        let store_open = committed.has_changed().is_ok();
        committed.borrow_and_update();
        let read = history.lock().unwrap().read(&mut cursor, &range, 64);
        match read {
            Err(error) => {
                let _ = events.send(Err(error)).await;
                return;
            }
            Ok((found, caught_up)) if !found.is_empty() || !caught_up => {
                for event in found {
                    if events.send(Ok(event)).await.is_err() {
                        return;
                    }
                }
            }
            Ok(_) if !store_open => return,
            Ok(_) => {
                tokio::select! {
                    changed = committed.changed() => {
                        if changed.is_err() {
                            // The store closed: deliver what is left, then end.
                            continue;
                        }
                    }
                    () = events.closed() => return,
                }
            }
        }
    }
}
