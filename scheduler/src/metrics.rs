//! The scheduler's metric names, each defined once, and the instruments that record them.

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter};
use std::sync::LazyLock;

/// The meter the scheduler's instruments come from.
pub const METER: &str = "agentprocess-scheduler";
/// Timers handed to the run service, by `kind`.
pub const TIMERS_FIRED: &str = "agentprocess.scheduler.timers_fired";
/// How long after its time a timer was fired, in seconds, by `kind`.
pub const FIRE_LATENESS: &str = "agentprocess.scheduler.fire_lateness";
/// Notifications a webhook took (one per notification and webhook).
pub const NOTIFICATIONS_DELIVERED: &str = "agentprocess.scheduler.notifications_delivered";
/// Notifications a webhook did not take, one per attempt and webhook (the notification is tried
/// again, or becomes a dead letter).
pub const NOTIFICATIONS_FAILED: &str = "agentprocess.scheduler.notifications_failed";
/// Notifications moved to the dead letters after their last attempt.
pub const NOTIFICATIONS_DEAD_LETTERED: &str = "agentprocess.scheduler.notifications_dead_lettered";

/// The attribute naming a timer's kind: the first segment of its id.
pub const ATTRIBUTE_KIND: &str = "kind";
/// The timer kinds the runtime writes; any other id counts as [`OTHER_KIND`], so that the
/// attribute stays bounded.
pub const TIMER_KINDS: [&str; 5] = ["wait", "wait_for_timeout", "due", "claim", "archive"];
/// The kind of a timer id none of [`TIMER_KINDS`] starts.
pub const OTHER_KIND: &str = "other";

/// The kind of `timer_id` as the metrics name it: one of [`TIMER_KINDS`] or [`OTHER_KIND`].
pub fn timer_kind(timer_id: &str) -> &'static str {
    let first = timer_id.split('.').next().unwrap_or_default();
    TIMER_KINDS
        .into_iter()
        .find(|kind| *kind == first)
        .unwrap_or(OTHER_KIND)
}

/// The scheduler's instruments. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SchedulerMetrics {
    timers_fired: Counter<u64>,
    fire_lateness: Histogram<f64>,
    pub(crate) notifications_delivered: Counter<u64>,
    pub(crate) notifications_failed: Counter<u64>,
    pub(crate) notifications_dead_lettered: Counter<u64>,
}

impl SchedulerMetrics {
    /// The instruments, from `meter`.
    pub fn new(meter: &Meter) -> Self {
        SchedulerMetrics {
            timers_fired: meter
                .u64_counter(TIMERS_FIRED)
                .with_description("Timers handed to the run service, by kind.")
                .build(),
            fire_lateness: meter
                .f64_histogram(FIRE_LATENESS)
                .with_description("How long after its time a timer was fired, by kind.")
                .with_unit("s")
                .build(),
            notifications_delivered: meter
                .u64_counter(NOTIFICATIONS_DELIVERED)
                .with_description("Notifications a webhook took.")
                .build(),
            notifications_failed: meter
                .u64_counter(NOTIFICATIONS_FAILED)
                .with_description("Notifications a webhook did not take, per attempt.")
                .build(),
            notifications_dead_lettered: meter
                .u64_counter(NOTIFICATIONS_DEAD_LETTERED)
                .with_description("Notifications moved to the dead letters.")
                .build(),
        }
    }

    /// The instruments of the process-wide meter provider (none installed: they record nothing).
    /// Its counters start at 0 (timers for each kind), so a scrape shows them before the first
    /// timer or delivery.
    pub fn global() -> Self {
        static GLOBAL: LazyLock<SchedulerMetrics> = LazyLock::new(|| {
            let metrics = SchedulerMetrics::new(&opentelemetry::global::meter(METER));
            for kind in TIMER_KINDS.into_iter().chain([OTHER_KIND]) {
                metrics
                    .timers_fired
                    .add(0, &[KeyValue::new(ATTRIBUTE_KIND, kind)]);
            }
            for counter in [
                &metrics.notifications_delivered,
                &metrics.notifications_failed,
                &metrics.notifications_dead_lettered,
            ] {
                counter.add(0, &[]);
            }
            metrics
        });
        GLOBAL.clone()
    }

    /// Records one timer handed to the run service, `late_ms` after its time.
    pub(crate) fn record_timer_fired(&self, timer_id: &str, late_ms: i64) {
        let kind = [KeyValue::new(ATTRIBUTE_KIND, timer_kind(timer_id))];
        self.timers_fired.add(1, &kind);
        // Milliseconds to seconds; a timer fired early (clock skew) counts as on time.
        self.fire_lateness.record(late_ms.max(0) as f64 / 1000.0, &kind);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_kinds_are_bounded_to_what_the_runtime_writes() {
        assert_eq!(timer_kind("wait.3.review"), "wait");
        assert_eq!(timer_kind("claim.7.screen"), "claim");
        assert_eq!(timer_kind("archive"), "archive");
        assert_eq!(timer_kind("run_0123.anything"), OTHER_KIND);
    }
}
