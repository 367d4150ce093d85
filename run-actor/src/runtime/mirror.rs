//! Watch-fed copies of organizations' ready-step and work-item indexes on a cluster's actor host,
//! so that `get_work` pages are read from memory instead of from etcd.
//!
//! A copy opens with the first page read of its index on this host, and serves once it holds the
//! whole index: read in pages, then kept by a watch from the revision of the first page on (every
//! change after that revision is applied in order, so the copy ends exact whatever the pages read
//! meanwhile). It closes when unread for a while, and is dropped (reads go to the store again)
//! while the host's copies together would pass their memory bound, or after its watch was cut
//! until it is whole again.
//!
//! A copy may trail the store by a watch's delay: an item it lists may have been claimed since
//! (the claim answers `conflict`, never a second claim), and an item made ready on another host
//! may not be listed yet. So a page the copy finds empty is read from the store: a caller never
//! hears "no work" while the store holds some.

use agentprocess_store::{EventKind, KeyRange, RangeRequest, Store, StoreError};
use opentelemetry::metrics::UpDownCounter;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;
use tokio::time::Instant;

/// Entries read per page while a copy fills.
const FILL_PAGE: usize = 512;
/// What one entry costs beyond its key's and value's bytes: the map's node share, the two
/// vectors' headers and the allocator's rounding. Measured: a copy of 1,000,000 ready steps grew
/// the process by 638 bytes per entry of 343 (BENCHMARKS.md, "`get_work` pages from copies of
/// the work indexes").
const ENTRY_OVERHEAD: usize = 296;
/// How long to wait before filling a copy again after its watch was cut or its fill failed.
const REFILL_AFTER: Duration = Duration::from_millis(500);
/// How long a copy that did not fit waits before it tries again.
const RETRY_OVERSIZED_AFTER: Duration = Duration::from_secs(30);

/// Settings of a host's index copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MirrorLimits {
    /// Most bytes all copies of one host hold together (keys, values and their bookkeeping).
    pub max_bytes: usize,
    /// How long a copy nobody reads stays open.
    pub idle_close: Duration,
}

impl Default for MirrorLimits {
    fn default() -> Self {
        MirrorLimits {
            max_bytes: 64 << 20,
            idle_close: Duration::from_secs(60),
        }
    }
}

/// One host's copies, by the index range each mirrors.
#[derive(Debug)]
pub(crate) struct IndexMirrors {
    store: Arc<dyn Store>,
    limits: MirrorLimits,
    mirrors: Mutex<HashMap<Vec<u8>, Arc<Mirror>>>,
    /// Bytes held by every copy of this host.
    held: Arc<AtomicUsize>,
    /// The same, as a metric.
    held_metric: UpDownCounter<i64>,
}

/// One index's copy.
#[derive(Debug)]
struct Mirror {
    range: KeyRange,
    state: RwLock<State>,
    last_read: Mutex<Instant>,
}

#[derive(Debug)]
enum State {
    /// Being read, or waiting to be read again: pages go to the store.
    Filling,
    /// Whole, and kept by the watch.
    Live {
        entries: BTreeMap<Vec<u8>, Vec<u8>>,
        bytes: usize,
    },
}

/// Entries of a page read from a copy, as (key, value), and whether more follow in the range.
pub(crate) type MirroredPage = (Vec<(Vec<u8>, Vec<u8>)>, bool);

fn entry_bytes(key: &[u8], value: &[u8]) -> usize {
    key.len() + value.len() + ENTRY_OVERHEAD
}

impl IndexMirrors {
    pub(crate) fn new(store: Arc<dyn Store>, limits: MirrorLimits, held_metric: UpDownCounter<i64>) -> Self {
        IndexMirrors {
            store,
            limits,
            mirrors: Mutex::default(),
            held: Arc::default(),
            held_metric,
        }
    }

    /// Bytes every copy of this host holds now.
    pub(crate) fn held_bytes(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Whether this host's copy of `mirrored` is whole now; starts filling it when not, and
    /// counts as a read (a copy nobody reads closes).
    pub(crate) fn is_whole(self: &Arc<Self>, mirrored: &KeyRange) -> bool {
        let mirror = self.mirror_of(mirrored);
        *mirror.last_read.lock().unwrap() = Instant::now();
        matches!(*mirror.state.read().unwrap(), State::Live { .. })
    }

    /// Up to `page` entries of `mirrored` (an index this host copies) in `[start, end)`, where
    /// `[start, end)` lies inside it, or `None` when its copy is not whole (it starts filling
    /// then, for the next read).
    pub(crate) fn read(
        self: &Arc<Self>,
        mirrored: &KeyRange,
        start: &[u8],
        end: &[u8],
        page: usize,
    ) -> Option<MirroredPage> {
        let mirror = self.mirror_of(mirrored);
        *mirror.last_read.lock().unwrap() = Instant::now();
        let state = mirror.state.read().unwrap();
        let State::Live { entries, .. } = &*state else {
            return None;
        };
        let mut found = entries.range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)));
        let taken: Vec<(Vec<u8>, Vec<u8>)> = found
            .by_ref()
            .take(page)
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        let more = found.next().is_some();
        Some((taken, more))
    }

    /// The copy of `range`, made (and set filling) on first use.
    fn mirror_of(self: &Arc<Self>, range: &KeyRange) -> Arc<Mirror> {
        let mut mirrors = self.mirrors.lock().unwrap();
        if let Some(mirror) = mirrors.get(&range.start) {
            return mirror.clone();
        }
        let mirror = Arc::new(Mirror {
            range: range.clone(),
            state: RwLock::new(State::Filling),
            last_read: Mutex::new(Instant::now()),
        });
        mirrors.insert(range.start.clone(), mirror.clone());
        tokio::spawn(keep(Arc::downgrade(self), mirror.clone()));
        mirror
    }

    /// Drops `mirror`'s entries (it is filling again), giving its bytes back.
    fn empty(&self, mirror: &Mirror) {
        let mut state = mirror.state.write().unwrap();
        if let State::Live { bytes, .. } = std::mem::replace(&mut *state, State::Filling) {
            self.give_back(bytes);
        }
    }

    /// Takes `bytes` from the host's bound; `false` (and nothing taken) when they do not fit.
    fn take(&self, bytes: usize) -> bool {
        let taken = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                (held + bytes <= self.limits.max_bytes).then_some(held + bytes)
            })
            .is_ok();
        if taken {
            self.held_metric.add(bytes as i64, &[]);
        }
        taken
    }

    fn give_back(&self, bytes: usize) {
        self.held.fetch_sub(bytes, Ordering::AcqRel);
        self.held_metric.add(-(bytes as i64), &[]);
    }

    /// Forgets `mirror` when nobody read it for `idle_close`; says whether it did.
    fn close_if_idle(&self, mirror: &Arc<Mirror>) -> bool {
        let mut mirrors = self.mirrors.lock().unwrap();
        if mirror.last_read.lock().unwrap().elapsed() < self.limits.idle_close {
            return false;
        }
        if mirrors
            .get(&mirror.range.start)
            .is_some_and(|kept| Arc::ptr_eq(kept, mirror))
        {
            mirrors.remove(&mirror.range.start);
        }
        drop(mirrors);
        self.empty(mirror);
        true
    }
}

/// Why a copy stopped being kept.
enum Cut {
    /// Its watch or a fill read failed: fill again soon.
    Store(StoreError),
    /// It did not fit the host's bound: try again later.
    Oversized,
    /// Nobody reads it any more, or its host is gone.
    Closed,
}

/// Fills `mirror` and keeps it by its watch until it closes; fills it again after each cut.
async fn keep(mirrors: Weak<IndexMirrors>, mirror: Arc<Mirror>) {
    loop {
        let cut = fill_and_follow(&mirrors, &mirror).await;
        let Some(host) = mirrors.upgrade() else { return };
        host.empty(&mirror);
        let pause = match cut {
            Cut::Closed => return,
            Cut::Store(error) => {
                tracing::debug!(%error, "an index copy was cut; reading it again");
                REFILL_AFTER
            }
            Cut::Oversized => {
                tracing::info!(
                    max_bytes = host.limits.max_bytes,
                    "an index copy does not fit cluster.index_mirror_max_bytes; its pages are read from the store"
                );
                RETRY_OVERSIZED_AFTER
            }
        };
        drop(host);
        tokio::time::sleep(pause).await;
        let Some(host) = mirrors.upgrade() else { return };
        if host.close_if_idle(&mirror) {
            return;
        }
    }
}

async fn fill_and_follow(mirrors: &Weak<IndexMirrors>, mirror: &Arc<Mirror>) -> Cut {
    let Some(host) = mirrors.upgrade() else {
        return Cut::Closed;
    };
    let store = host.store.clone();
    let idle_close = host.limits.idle_close;
    drop(host);
    let range = mirror.range.clone();
    // The first page's revision: the watch replays every change after it, so pages read at
    // later revisions are corrected to the end.
    let first = match store
        .range(RangeRequest::new(range.clone()).with_limit(FILL_PAGE))
        .await
    {
        Ok(first) => first,
        Err(error) => return Cut::Store(error),
    };
    let mut events = match store.watch(range.clone(), Some(first.revision + 1)).await {
        Ok(events) => events,
        Err(error) => return Cut::Store(error),
    };
    let mut entries = BTreeMap::new();
    let mut bytes = 0;
    let mut more = first.more;
    let mut page = first.kvs;
    loop {
        let next_start = page.last().map(|kv| {
            let mut next = kv.key.clone();
            next.push(0);
            next
        });
        for kv in page {
            bytes += entry_bytes(&kv.key, &kv.value);
            entries.insert(kv.key, kv.value);
        }
        let Some(host) = mirrors.upgrade() else {
            return Cut::Closed;
        };
        // Filling holds its entries before they are counted: stop as soon as they could not fit
        // beside what the host's other copies hold.
        if bytes + host.held_bytes() > host.limits.max_bytes {
            return Cut::Oversized;
        }
        drop(host);
        let Some(next_start) = next_start.filter(|_| more) else {
            break;
        };
        let request = KeyRange {
            start: next_start,
            end: range.end.clone(),
        };
        match store
            .range(RangeRequest::new(request).with_limit(FILL_PAGE))
            .await
        {
            Ok(read) => {
                more = read.more;
                page = read.kvs;
            }
            Err(error) => return Cut::Store(error),
        }
    }
    {
        let Some(host) = mirrors.upgrade() else {
            return Cut::Closed;
        };
        if !host.take(bytes) {
            return Cut::Oversized;
        }
        *mirror.state.write().unwrap() = State::Live { entries, bytes };
    }
    let mut idle = tokio::time::interval(idle_close / 2);
    idle.tick().await;
    loop {
        tokio::select! {
            event = events.next() => {
                let event = match event {
                    Some(Ok(event)) => event,
                    Some(Err(error)) => return Cut::Store(error),
                    None => return Cut::Store(StoreError::Closed),
                };
                let Some(host) = mirrors.upgrade() else { return Cut::Closed };
                if !apply(&host, mirror, event.kind, event.kv.key, event.kv.value) {
                    return Cut::Oversized;
                }
            }
            _ = idle.tick() => {
                let Some(host) = mirrors.upgrade() else { return Cut::Closed };
                if host.close_if_idle(mirror) {
                    return Cut::Closed;
                }
            }
        }
    }
}

/// Applies one change to a whole copy; `false` when it would pass the host's bound.
fn apply(host: &IndexMirrors, mirror: &Mirror, kind: EventKind, key: Vec<u8>, value: Vec<u8>) -> bool {
    let mut state = mirror.state.write().unwrap();
    let State::Live { entries, bytes } = &mut *state else {
        return true;
    };
    match kind {
        EventKind::Put => {
            let added = entry_bytes(&key, &value);
            let replaced = entries.get(&key).map_or(0, |old| entry_bytes(&key, old));
            if added > replaced && !host.take(added - replaced) {
                return false;
            }
            if replaced > added {
                host.give_back(replaced - added);
            }
            *bytes = *bytes + added - replaced;
            entries.insert(key, value);
        }
        EventKind::Delete => {
            if let Some(old) = entries.remove(&key) {
                let freed = entry_bytes(&key, &old);
                host.give_back(freed);
                *bytes -= freed;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentprocess_store::{EmbeddedOptions, EmbeddedStore, Txn, TxnOp};

    fn key(n: usize) -> Vec<u8> {
        format!("index/{n:05}").into_bytes()
    }

    async fn write(store: &Arc<dyn Store>, op: TxnOp) {
        store.txn(Txn::new().and_then([op])).await.expect("written");
    }

    /// What the copy of `range` holds, when it is whole.
    fn copied(mirrors: &IndexMirrors, range: &KeyRange) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        let mirror = mirrors.mirrors.lock().unwrap().get(&range.start)?.clone();
        let state = mirror.state.read().unwrap();
        match &*state {
            State::Live { entries, .. } => {
                Some(entries.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            }
            State::Filling => None,
        }
    }

    /// Filled in pages at rising revisions while another writer puts and deletes, the copy ends
    /// equal to the store: the watch from the first page's revision corrects every later page.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_copy_filled_beside_writes_ends_equal_to_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = EmbeddedStore::open(dir.path(), EmbeddedOptions::default())
            .await
            .unwrap();
        let store: Arc<dyn Store> = Arc::new(store);
        let range = KeyRange::prefix(b"index/".to_vec());
        for n in 0..3 * FILL_PAGE {
            write(&store, TxnOp::put(key(n), b"first".to_vec())).await;
        }
        let writer = store.clone();
        let writing = tokio::spawn(async move {
            for round in 0..2_000usize {
                let n = round * 7 % (3 * FILL_PAGE);
                let op = match round % 3 {
                    0 => TxnOp::delete(key(n)),
                    _ => TxnOp::put(key(n), format!("round {round}").into_bytes()),
                };
                write(&writer, op).await;
                tokio::task::yield_now().await;
            }
        });
        let metric = opentelemetry::global::meter("test")
            .i64_up_down_counter("held")
            .build();
        let mirrors = Arc::new(IndexMirrors::new(store.clone(), MirrorLimits::default(), metric));
        assert!(
            !mirrors.is_whole(&range),
            "a copy is not whole before it was filled"
        );
        let whole_while_writing = loop {
            if mirrors.is_whole(&range) {
                break !writing.is_finished();
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        writing.await.unwrap();
        let stored: Vec<(Vec<u8>, Vec<u8>)> = store
            .range(RangeRequest::new(range.clone()))
            .await
            .unwrap()
            .kvs
            .into_iter()
            .map(|kv| (kv.key, kv.value))
            .collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        while copied(&mirrors, &range).as_ref() != Some(&stored) {
            assert!(
                Instant::now() < deadline,
                "the copy never came to equal the store"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let expected: usize = stored.iter().map(|(k, v)| entry_bytes(k, v)).sum();
        assert_eq!(mirrors.held_bytes(), expected, "the bytes held are the entries'");
        assert!(whole_while_writing, "the fill overlapped the writes");
    }
}
