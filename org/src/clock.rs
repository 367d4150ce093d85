//! Wall-clock time for the machine, read through tokio's clock so that a paused tokio runtime
//! pauses it too, plus an offset tests can move forward ([`Clock::advance`]) to jump over hours
//! and days without waiting.

use agentprocess_vocab::Timestamp;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;
use tokio::time::Instant;

/// Milliseconds since the epoch: `base_ms` + the tokio time elapsed since `base` + the offset.
///
/// The scheduler sleeps until [`Clock::instant_at`] and wakes on [`Clock::jumps`], so moving
/// the offset fires whatever fell due.
#[derive(Debug, Clone)]
pub struct Clock {
    base_ms: i64,
    base: Instant,
    offset_ms: Arc<AtomicI64>,
    /// Counts [`Clock::advance`] calls; a receiver held across waits misses none of them.
    jumps: Arc<watch::Sender<u64>>,
}

impl Clock {
    /// Starts at the current wall time.
    pub fn system() -> Self {
        let base_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        Clock::starting_at(Timestamp::from_millis(base_ms))
    }

    /// Starts at `at` now (tests pass a fixed instant).
    pub fn starting_at(at: Timestamp) -> Self {
        Clock {
            base_ms: at.as_millis(),
            base: Instant::now(),
            offset_ms: Arc::new(AtomicI64::new(0)),
            jumps: Arc::new(watch::Sender::new(0)),
        }
    }

    pub fn now(&self) -> Timestamp {
        let elapsed = i64::try_from(self.base.elapsed().as_millis()).unwrap_or(i64::MAX);
        Timestamp::from_millis(
            self.base_ms
                .saturating_add(elapsed)
                .saturating_add(self.offset_ms.load(Ordering::Acquire)),
        )
    }

    /// Moves this clock (and every clone) forward by `by`, and wakes whoever waits on
    /// [`Clock::jumps`].
    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.offset_ms.fetch_add(by, Ordering::AcqRel);
        self.jumps.send_modify(|count| *count += 1);
    }

    /// A receiver whose `changed()` completes once the clock has been moved by
    /// [`Clock::advance`] since the receiver last looked. Take it BEFORE reading the clock and
    /// keep it across waits, so that a jump between the read and the wait is not lost.
    pub fn jumps(&self) -> watch::Receiver<u64> {
        self.jumps.subscribe()
    }

    /// The tokio instant at which this clock reads `at`, as far as known now (now, for
    /// instants in the past).
    pub fn instant_at(&self, at: Timestamp) -> Instant {
        let ahead = at.as_millis().saturating_sub(self.now().as_millis());
        Instant::now() + Duration::from_millis(u64::try_from(ahead).unwrap_or(0))
    }
}
