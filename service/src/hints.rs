//! Hints from run writes (and the admin API) to the scheduler: "a timer was armed", "the outbox
//! has something new". A hint only makes the scheduler look sooner; it never carries the work,
//! which is always in the store, so a lost hint costs latency, never correctness.
//!
//! In one process, [`LocalHints`] passes them through memory. Across processes the scheduler
//! watches the store instead (the scheduler crate's store-watch hints), and writers need not
//! send anything.

use async_trait::async_trait;
use std::sync::atomic::{AtomicI64, Ordering};
use tokio::sync::Notify;

/// Both ends of the hints: writers call `timer_armed` and `outbox_written`; the scheduler waits
/// on `next_timer_hint` and `next_outbox_hint`. Each wait returns once per burst of hints given
/// since the previous return (hints coalesce).
#[async_trait]
pub trait Hints: Send + Sync + std::fmt::Debug {
    /// A write armed a timer that fires at `fire_at_ms`.
    fn timer_armed(&self, fire_at_ms: i64);
    /// A write put entries into the notification outbox.
    fn outbox_written(&self);
    /// Waits for timer hints; returns the earliest fire time (ms) armed since the last return.
    async fn next_timer_hint(&self) -> i64;
    /// Waits for an outbox hint.
    async fn next_outbox_hint(&self);
}

/// Hints within one process: a notify per kind, and the earliest armed fire time.
#[derive(Debug)]
pub struct LocalHints {
    /// The earliest fire time (ms) of timers armed since the scheduler last looked.
    earliest_timer: AtomicI64,
    timers: Notify,
    outbox: Notify,
}

impl LocalHints {
    pub fn new() -> Self {
        LocalHints {
            earliest_timer: AtomicI64::new(i64::MAX),
            timers: Notify::new(),
            outbox: Notify::new(),
        }
    }
}

impl Default for LocalHints {
    fn default() -> Self {
        LocalHints::new()
    }
}

#[async_trait]
impl Hints for LocalHints {
    fn timer_armed(&self, fire_at_ms: i64) {
        self.earliest_timer.fetch_min(fire_at_ms, Ordering::AcqRel);
        self.timers.notify_one();
    }

    fn outbox_written(&self) {
        self.outbox.notify_one();
    }

    async fn next_timer_hint(&self) -> i64 {
        self.timers.notified().await;
        self.earliest_timer.swap(i64::MAX, Ordering::AcqRel)
    }

    async fn next_outbox_hint(&self) {
        self.outbox.notified().await;
    }
}

/// Hints that go nowhere: for writers whose scheduler watches the store instead.
#[derive(Debug, Default)]
pub struct NoHints;

#[async_trait]
impl Hints for NoHints {
    fn timer_armed(&self, _fire_at_ms: i64) {}

    fn outbox_written(&self) {}

    async fn next_timer_hint(&self) -> i64 {
        std::future::pending().await
    }

    async fn next_outbox_hint(&self) {
        std::future::pending().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn local_hints_coalesce_and_report_the_earliest_timer() {
        let hints = LocalHints::new();
        hints.timer_armed(500);
        hints.timer_armed(300);
        hints.timer_armed(900);
        assert_eq!(hints.next_timer_hint().await, 300);
        let again = tokio::time::timeout(Duration::from_millis(50), hints.next_timer_hint()).await;
        assert!(again.is_err(), "one return per burst");
        hints.outbox_written();
        hints.outbox_written();
        hints.next_outbox_hint().await;
        let again = tokio::time::timeout(Duration::from_millis(50), hints.next_outbox_hint()).await;
        assert!(again.is_err(), "one return per burst");
    }
}
