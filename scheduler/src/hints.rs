//! Hints from a watch on the store: what a scheduler uses when the runs are written by other
//! processes. Every put into the timer index is a timer hint with its fire time, every put into
//! the outbox an outbox hint; writers send nothing.
//!
//! A watch that ends (the store closed or compacted past it) is opened again from the current
//! revision, with one hint of each kind so the scheduler looks at both indexes afresh: nothing
//! written in between is missed, since the work is in the store and the hints only say "look".

use agentprocess_service::{Hints, LocalHints};
use agentprocess_store::keys::Keys;
use agentprocess_store::{EventKind, KeyRange, Store, WatchStream};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// How long to wait before opening a watch again after it failed to open.
const REOPEN_AFTER: Duration = Duration::from_millis(500);

/// [`Hints`] fed by watches on the timer index and the outbox. Stops watching when dropped.
#[derive(Debug)]
pub struct StoreWatchHints {
    hints: Arc<LocalHints>,
    watches: Vec<JoinHandle<()>>,
}

impl StoreWatchHints {
    /// Starts watching `store`'s timer index and outbox under `keys`. Must be called inside a
    /// tokio runtime.
    pub fn start(store: Arc<dyn Store>, keys: Keys) -> Arc<StoreWatchHints> {
        let hints = Arc::new(LocalHints::new());
        let timer_keys = keys.clone();
        let on_timer = {
            let hints = hints.clone();
            move |key: &[u8]| {
                if let Some(timer) = timer_keys.parse_timer(key) {
                    hints.timer_armed(i64::try_from(timer.fire_at_ms).unwrap_or(i64::MAX));
                }
            }
        };
        let on_outbox = {
            let hints = hints.clone();
            move |_: &[u8]| hints.outbox_written()
        };
        let watches = vec![
            tokio::spawn(watch_puts(store.clone(), keys.timers(), hints.clone(), on_timer)),
            tokio::spawn(watch_puts(store, keys.outbox_entries(), hints.clone(), on_outbox)),
        ];
        Arc::new(StoreWatchHints { hints, watches })
    }
}

impl Drop for StoreWatchHints {
    fn drop(&mut self) {
        for watch in &self.watches {
            watch.abort();
        }
    }
}

#[async_trait]
impl Hints for StoreWatchHints {
    fn timer_armed(&self, fire_at_ms: i64) {
        self.hints.timer_armed(fire_at_ms);
    }

    fn outbox_written(&self) {
        self.hints.outbox_written();
    }

    async fn next_timer_hint(&self) -> i64 {
        self.hints.next_timer_hint().await
    }

    async fn next_outbox_hint(&self) {
        self.hints.next_outbox_hint().await
    }
}

/// Calls `on_put` with the key of every put in `range`, for as long as the task runs, opening the
/// watch again whenever it ends.
async fn watch_puts(
    store: Arc<dyn Store>,
    range: KeyRange,
    hints: Arc<LocalHints>,
    on_put: impl Fn(&[u8]) + Send + 'static,
) {
    loop {
        let mut events: WatchStream = match store.watch(range.clone(), None).await {
            Ok(events) => events,
            Err(error) => {
                tracing::warn!(%error, "cannot watch the store for scheduler hints; trying again");
                tokio::time::sleep(REOPEN_AFTER).await;
                continue;
            }
        };
        // Whatever was written while no watch was open: look at everything once.
        hints.timer_armed(i64::MIN);
        hints.outbox_written();
        loop {
            match events.next().await {
                Some(Ok(event)) if event.kind == EventKind::Put => on_put(&event.kv.key),
                Some(Ok(_)) => {}
                Some(Err(error)) => {
                    tracing::info!(%error, "a scheduler hint watch ended; opening it again");
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
