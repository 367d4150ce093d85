//! The timer window: the earliest `timer_window` timers of the timer index in memory, fired at
//! their time by sending their command to the run.
//!
//! The window is reloaded from the start of the index (earliest first) when it runs empty, when
//! a timer the runtime armed inside it comes due, and after firings settle. A fired timer's
//! entry is removed by the run's own commit; one that is still there later (its firing failed,
//! or the run ignored it) is held back with a growing delay, so a stuck entry never spins.
//! Memory holds only the window and those held back, whatever the number of pending timers.

use crate::{SchedulerConfig, SchedulerParts};
use agentprocess_service::Timestamp;
use agentprocess_store::RangeRequest;
use agentprocess_store::keys::TimerKey;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Counters of the window, for tests and metrics.
#[derive(Debug, Default)]
pub(crate) struct WindowStats {
    in_memory: AtomicUsize,
    /// The clock time (ms) read by the last pass that left nothing due unfired and nothing in
    /// flight.
    settled_at_ms: AtomicI64,
    /// How many times the window was read from the timer index.
    reloads: AtomicU64,
}

impl WindowStats {
    pub(crate) fn in_memory(&self) -> usize {
        self.in_memory.load(Ordering::Relaxed)
    }

    pub(crate) fn settled_at(&self) -> Timestamp {
        Timestamp::from_millis(self.settled_at_ms.load(Ordering::Acquire))
    }

    pub(crate) fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::Relaxed)
    }
}

/// A timer fired earlier, held back until `not_before`.
#[derive(Debug)]
struct HeldBack {
    attempts: u32,
    not_before: Instant,
}

struct Window {
    parts: Arc<SchedulerParts>,
    config: SchedulerConfig,
    /// Timer key → parsed key, earliest first.
    timers: BTreeMap<Vec<u8>, TimerKey>,
    /// The window holds every timer of the index (no more were left out).
    complete: bool,
    /// The fire time of the last timer loaded, when the window is not complete.
    last_fire_at: u64,
    in_flight: HashMap<Vec<u8>, ()>,
    held_back: HashMap<Vec<u8>, HeldBack>,
    reload: bool,
    /// The earliest fire time (ms) named by a hint since the last reload for a timer that may
    /// belong in the window. The window is reloaded when that time comes, not at every hint: a
    /// busy server arms a claim-expiry timer with every claim, and reading the window again
    /// for each one cost about a tenth of the server's CPU. A reload reads every timer the
    /// hints named, so one reload answers them all.
    pending_hint: Option<i64>,
}

pub(crate) async fn run(
    parts: Arc<SchedulerParts>,
    config: SchedulerConfig,
    stats: Arc<WindowStats>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut window = Window {
        parts,
        config,
        timers: BTreeMap::new(),
        complete: false,
        last_fire_at: 0,
        in_flight: HashMap::new(),
        held_back: HashMap::new(),
        reload: true,
        pending_hint: None,
    };
    // Each firing ends with its key. Fired or not, the entry is held back: the run's own commit
    // removes a fired timer's entry, so one still there at the next reload is retried later.
    let mut firing: JoinSet<Vec<u8>> = JoinSet::new();
    // Taken before the first read of the clock, so no jump between a read and a wait is missed.
    let mut jumps = window.parts.clock.jumps();
    loop {
        // Each pass looks at the stop signal first: the select below may find other branches
        // ready as well, pass after pass.
        if stopped.has_changed().unwrap_or(true) {
            firing.shutdown().await;
            return;
        }
        // One reading of the clock per pass: a timer a hint named is in the window before the
        // timers due at that reading fire.
        let clock = window.parts.clock.clone();
        let now = clock.now();
        if window.pending_hint.is_some_and(|at| at <= now.as_millis()) {
            window.reload = true;
        }
        if window.reload {
            if let Err(error) = window.load().await {
                tracing::warn!(%error, "the timer index cannot be read; retrying in 500 ms");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(500)) => continue,
                    _ = stopped.changed() => {
                        firing.shutdown().await;
                        return;
                    }
                }
            }
            window.reload = false;
            window.pending_hint = None;
            stats.reloads.fetch_add(1, Ordering::Relaxed);
        }
        stats
            .in_memory
            .store(window.timers.len() + window.held_back.len(), Ordering::Relaxed);
        // Fire what is due.
        while firing.len() < window.config.max_firing {
            let Some((key, timer)) = window.timers.first_key_value() else {
                break;
            };
            if i64::try_from(timer.fire_at_ms).unwrap_or(i64::MAX) > now.as_millis() {
                break;
            }
            let (key, timer) = (key.clone(), timer.clone());
            window.timers.remove(&key);
            window.in_flight.insert(key.clone(), ());
            let runs = window.parts.runs.clone();
            let late_ms = now
                .as_millis()
                .saturating_sub(i64::try_from(timer.fire_at_ms).unwrap_or(i64::MAX));
            window.config.metrics.record_timer_fired(&timer.timer_id, late_ms);
            tracing::debug!(
                kind = crate::metrics::timer_kind(&timer.timer_id),
                late_ms,
                "timer fired"
            );
            firing.spawn(async move {
                let fired = runs.fire_timer(&timer.org, &timer.run_id, &timer.timer_id).await;
                if let Err(error) = &fired {
                    tracing::warn!(
                        run_id = %timer.run_id, timer = %timer.timer_id, %error,
                        "a timer could not be fired; it is held back and tried again"
                    );
                }
                key
            });
        }
        if firing.is_empty() {
            stats.settled_at_ms.fetch_max(now.as_millis(), Ordering::AcqRel);
        }
        let next_fire = window.timers.first_key_value().map(|(_, t)| {
            clock.instant_at(Timestamp::from_millis(
                i64::try_from(t.fire_at_ms).unwrap_or(i64::MAX),
            ))
        });
        let next_retry = window.held_back.values().map(|h| h.not_before).min();
        let next_hinted = window
            .pending_hint
            .map(|at| clock.instant_at(Timestamp::from_millis(at)));
        let wake = [next_fire, next_retry, next_hinted].into_iter().flatten().min();
        let can_fire = firing.len() < window.config.max_firing;
        tokio::select! {
            _ = stopped.changed() => {
                firing.shutdown().await;
                return;
            }
            _ = async { tokio::time::sleep_until(wake.expect("guarded")).await }, if wake.is_some() && can_fire => {
                if next_retry.is_some_and(|r| r <= Instant::now()) {
                    window.reload = true;
                }
                if window.timers.is_empty() && !window.complete {
                    window.reload = true;
                }
            }
            _ = jumps.changed() => {}
            earliest = window.parts.hints.next_timer_hint() => {
                if window.complete || u64::try_from(earliest).unwrap_or(0) <= window.last_fire_at {
                    window.pending_hint = Some(window.pending_hint.map_or(earliest, |at| at.min(earliest)));
                }
            }
            Some(done) = firing.join_next(), if !firing.is_empty() => {
                if let Ok(key) = done {
                    window.in_flight.remove(&key);
                    let held = window.held_back.entry(key).or_insert(HeldBack { attempts: 0, not_before: Instant::now() });
                    held.attempts += 1;
                    let backoff = window.config.first_backoff.saturating_mul(1 << held.attempts.min(16));
                    held.not_before = Instant::now() + backoff.min(window.config.max_backoff);
                }
                if window.timers.is_empty() && !window.complete {
                    window.reload = true;
                }
            }
        }
    }
}

impl Window {
    /// Reloads the earliest timers, leaving out those in flight or held back.
    async fn load(&mut self) -> Result<(), agentprocess_store::StoreError> {
        let keys = self.parts.keys.clone();
        let store = self.parts.store.clone();
        let capacity = self.config.timer_window.max(1);
        let now = Instant::now();
        let mut timers = BTreeMap::new();
        let mut seen_held = Vec::new();
        let mut range = keys.timers();
        let complete = loop {
            let page = store
                .range(RangeRequest::new(range.clone()).with_limit(capacity))
                .await?;
            for kv in &page.kvs {
                if timers.len() >= capacity {
                    break;
                }
                if self.in_flight.contains_key(&kv.key) {
                    continue;
                }
                if let Some(held) = self.held_back.get(&kv.key) {
                    seen_held.push(kv.key.clone());
                    if held.not_before > now {
                        continue;
                    }
                }
                if let Some(timer) = keys.parse_timer(&kv.key) {
                    timers.insert(kv.key.clone(), timer);
                }
            }
            if timers.len() >= capacity {
                break false;
            }
            if !page.more {
                break true;
            }
            let mut next = page.kvs.last().expect("a page with more has keys").key.clone();
            next.push(0);
            range.start = next;
        };
        // Held-back entries that are gone from the index are done with.
        let last_key = timers.keys().next_back().cloned();
        self.held_back.retain(|key, _| {
            seen_held.contains(key) || (!complete && last_key.as_ref().is_some_and(|last| key > last))
        });
        self.last_fire_at = timers.values().next_back().map_or(0, |t| t.fire_at_ms);
        self.timers = timers;
        self.complete = complete;
        Ok(())
    }
}
