//! A copy in memory of one key prefix of the store, kept current by a watch.
//!
//! [`Mirror::load`] reads the prefix with one range; [`Mirror::follow`] then applies every
//! change a watch reports from the revision after the load. A watch that ends (the store
//! closed, a member failed for good, the history was compacted) is replaced by a fresh load and
//! a new watch from that load's revision, so no change is ever missed for long: the state is in
//! the store, and a load reads it whole.
//!
//! The prefixes mirrored here (hosts, shard owners) hold a few hundred keys at most, so one
//! range without a limit reads a consistent copy at one revision.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentprocess_store::{EventKind, KeyRange, KeyValue, RangeRequest, Store, StoreError, WatchEvent};
use tokio::sync::Notify;

/// How long to wait before loading again after a load or a watch failed to open.
const REOPEN_AFTER: Duration = Duration::from_millis(500);

/// The keys of one range, as of [`Mirror::revision`].
#[derive(Debug)]
pub(crate) struct Mirror {
    store: Arc<dyn Store>,
    range: KeyRange,
    contents: Mutex<Contents>,
    /// Notified (one stored permit) after every change to the copy's keys.
    changed: Arc<Notify>,
}

#[derive(Debug, Default)]
struct Contents {
    entries: BTreeMap<Vec<u8>, KeyValue>,
    /// The revision of the last load: events at or before it are already in `entries`.
    loaded_at: i64,
    /// The newest revision `entries` reflects (a load's, or the last event's).
    revision: i64,
}

impl Mirror {
    /// An empty mirror of `range`; nothing is read until [`Mirror::load`] or
    /// [`Mirror::follow`]. `changed` is notified after each change.
    pub(crate) fn new(store: Arc<dyn Store>, range: KeyRange, changed: Arc<Notify>) -> Self {
        Mirror {
            store,
            range,
            contents: Mutex::new(Contents::default()),
            changed,
        }
    }

    /// Reads the whole range now. The copy takes the answer unless it already reflects a newer
    /// revision (a watch delivered changes after the revision this read was served at).
    /// Returns the revision the copy reflects afterwards.
    pub(crate) async fn load(&self) -> Result<i64, StoreError> {
        self.read(false).await
    }

    /// Reads the whole range and takes the answer even when the copy looked newer: after a
    /// watch broke, the copy may miss part of its last revision.
    async fn reload(&self) -> Result<i64, StoreError> {
        self.read(true).await
    }

    async fn read(&self, replace_newer: bool) -> Result<i64, StoreError> {
        let answer = self.store.range(RangeRequest::new(self.range.clone())).await?;
        let mut copy = self.contents.lock().unwrap();
        if replace_newer || answer.revision >= copy.revision {
            let entries: BTreeMap<Vec<u8>, KeyValue> =
                answer.kvs.into_iter().map(|kv| (kv.key.clone(), kv)).collect();
            if entries != copy.entries {
                copy.entries = entries;
                self.changed.notify_one();
            }
            copy.loaded_at = answer.revision;
            copy.revision = answer.revision;
        }
        Ok(copy.revision)
    }

    /// Applies one watched change, unless the last load already saw it.
    fn apply(&self, event: WatchEvent) {
        let mut copy = self.contents.lock().unwrap();
        let revision = event.kv.mod_revision;
        if revision <= copy.loaded_at {
            return;
        }
        match event.kind {
            EventKind::Put => {
                copy.entries.insert(event.kv.key.clone(), event.kv);
            }
            EventKind::Delete => {
                copy.entries.remove(&event.kv.key);
            }
        }
        copy.revision = copy.revision.max(revision);
        self.changed.notify_one();
    }

    /// Keeps the copy current for as long as the task runs. `loaded` is the revision of a load
    /// just done (the watch starts after it); `None` loads first.
    pub(crate) async fn follow(self: Arc<Self>, mut loaded: Option<i64>) {
        loop {
            let revision = match loaded.take() {
                Some(revision) => revision,
                None => match self.reload().await {
                    Ok(revision) => revision,
                    Err(error) => {
                        tracing::warn!(%error, "cannot read the cluster's keys; trying again");
                        tokio::time::sleep(REOPEN_AFTER).await;
                        continue;
                    }
                },
            };
            let mut events = match self.store.watch(self.range.clone(), Some(revision + 1)).await {
                Ok(events) => events,
                Err(error) => {
                    tracing::warn!(%error, "cannot watch the cluster's keys; trying again");
                    tokio::time::sleep(REOPEN_AFTER).await;
                    continue;
                }
            };
            loop {
                match events.next().await {
                    Some(Ok(event)) => self.apply(event),
                    Some(Err(error)) => {
                        tracing::info!(%error, "a watch on the cluster's keys ended; reading them again");
                        break;
                    }
                    None => {
                        tokio::time::sleep(REOPEN_AFTER).await;
                        break;
                    }
                }
            }
        }
    }

    /// The key's entry, if the copy has it.
    pub(crate) fn get(&self, key: &[u8]) -> Option<KeyValue> {
        self.contents.lock().unwrap().entries.get(key).cloned()
    }

    /// Every entry, in key order, and the revision they reflect.
    pub(crate) fn entries(&self) -> (Vec<KeyValue>, i64) {
        let copy = self.contents.lock().unwrap();
        (copy.entries.values().cloned().collect(), copy.revision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentprocess_store::{EmbeddedOptions, EmbeddedStore, Txn, TxnOp};

    fn mirror_of(store: &Arc<dyn Store>, prefix: &str) -> Arc<Mirror> {
        Arc::new(Mirror::new(
            store.clone(),
            KeyRange::prefix(prefix),
            Arc::new(Notify::new()),
        ))
    }

    async fn put(store: &Arc<dyn Store>, op: TxnOp) -> i64 {
        store
            .txn(Txn::new().and_then([op]))
            .await
            .expect("write")
            .revision
    }

    fn keys(mirror: &Mirror) -> Vec<String> {
        let (entries, _) = mirror.entries();
        entries
            .iter()
            .map(|kv| String::from_utf8_lossy(&kv.key).into_owned())
            .collect()
    }

    async fn wait_for(mirror: &Mirror, expected: &[&str]) {
        for _ in 0..200 {
            if keys(mirror) == expected {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(keys(mirror), expected);
    }

    /// The copy follows puts and deletes, several deletes of one revision (a revoked lease)
    /// included, and nothing outside the prefix.
    #[tokio::test(start_paused = true)]
    async fn follows_puts_and_deletes_in_the_prefix() {
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::in_memory(EmbeddedOptions::default()));
        put(&store, TxnOp::put("p/a", "1")).await;
        let mirror = mirror_of(&store, "p/");
        let loaded = mirror.load().await.expect("load");
        assert_eq!(keys(&mirror), ["p/a"]);
        let follower = tokio::spawn(mirror.clone().follow(Some(loaded)));

        let lease = store.lease_grant(10).await.expect("grant");
        put(&store, TxnOp::put_with_lease("p/b", "2", lease.id)).await;
        put(&store, TxnOp::put_with_lease("p/c", "3", lease.id)).await;
        put(&store, TxnOp::put("q/x", "4")).await;
        wait_for(&mirror, &["p/a", "p/b", "p/c"]).await;
        store.lease_revoke(lease.id).await.expect("revoke");
        wait_for(&mirror, &["p/a"]).await;
        assert_eq!(mirror.get(b"p/a").map(|kv| kv.value), Some(b"1".to_vec()));
        follower.abort();
    }

    /// A load never takes the copy back to an older revision, and an event the last load
    /// already saw is not applied again.
    #[tokio::test(start_paused = true)]
    async fn loads_and_events_never_take_the_copy_back() {
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::in_memory(EmbeddedOptions::default()));
        let written = put(&store, TxnOp::put("p/a", "1")).await;
        let mirror = mirror_of(&store, "p/");
        mirror.load().await.expect("load");

        // An event the load already saw (a delete at the load's revision) changes nothing.
        let (entries, _) = mirror.entries();
        let mut deleted = entries[0].clone();
        deleted.mod_revision = written;
        mirror.apply(WatchEvent {
            kind: EventKind::Delete,
            kv: deleted,
        });
        assert_eq!(keys(&mirror), ["p/a"]);

        // A newer event than the store has yet: a load at the store's revision is older, and
        // is not taken; a reload after a broken watch is.
        let mut future = entries[0].clone();
        future.key = b"p/z".to_vec();
        future.mod_revision = written + 100;
        mirror.apply(WatchEvent {
            kind: EventKind::Put,
            kv: future,
        });
        assert_eq!(mirror.load().await.expect("load"), written + 100);
        assert_eq!(keys(&mirror), ["p/a", "p/z"]);
        assert_eq!(mirror.reload().await.expect("reload"), written);
        assert_eq!(keys(&mirror), ["p/a"]);
    }
}
