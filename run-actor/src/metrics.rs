//! The run actors' metric names, each defined once, and the instruments that record them.

use opentelemetry::metrics::{Counter, Histogram, Meter, UpDownCounter};
use std::sync::LazyLock;
use std::time::Duration;

/// The meter the run actors' instruments come from.
pub const METER: &str = "agentprocess-run-actor";
/// Batches of commands committed, each in one store transaction.
pub const COMMITS: &str = "agentprocess.run_actor.commits";
/// How long a batch's commit transaction took, in seconds.
pub const COMMIT_DURATION: &str = "agentprocess.run_actor.commit.duration";
/// Batches whose transaction found the run changed by another writer: nothing was written and
/// the batch is applied again.
pub const RACED_BATCHES: &str = "agentprocess.run_actor.raced_batches";
/// Ended runs moved from the hot store to the archive.
pub const RUNS_ARCHIVED: &str = "agentprocess.run_actor.runs_archived";
/// Run actors in memory.
pub const LIVE_ACTORS: &str = "agentprocess.run_actor.live_actors";

/// The run actors' instruments. Cheap to clone.
#[derive(Debug, Clone)]
pub struct RunActorMetrics {
    pub(crate) commits: Counter<u64>,
    pub(crate) commit_duration: Histogram<f64>,
    pub(crate) raced_batches: Counter<u64>,
    pub(crate) runs_archived: Counter<u64>,
    pub(crate) live_actors: UpDownCounter<i64>,
}

impl RunActorMetrics {
    /// The instruments, from `meter`.
    pub fn new(meter: &Meter) -> Self {
        RunActorMetrics {
            commits: meter
                .u64_counter(COMMITS)
                .with_description("Batches of commands committed, each in one transaction.")
                .build(),
            commit_duration: meter
                .f64_histogram(COMMIT_DURATION)
                .with_description("How long a batch's commit transaction took.")
                .with_unit("s")
                .build(),
            raced_batches: meter
                .u64_counter(RACED_BATCHES)
                .with_description("Batches whose transaction found the run changed meanwhile.")
                .build(),
            runs_archived: meter
                .u64_counter(RUNS_ARCHIVED)
                .with_description("Ended runs moved from the hot store to the archive.")
                .build(),
            live_actors: meter
                .i64_up_down_counter(LIVE_ACTORS)
                .with_description("Run actors in memory.")
                .build(),
        }
    }

    /// The instruments of the process-wide meter provider (none installed: they record nothing).
    pub fn global() -> Self {
        static GLOBAL: LazyLock<RunActorMetrics> =
            LazyLock::new(|| RunActorMetrics::new(&opentelemetry::global::meter(METER)));
        GLOBAL.clone()
    }

    /// Records one commit transaction: committed or raced, and how long it took.
    pub(crate) fn record_commit(&self, committed: bool, took: Duration) {
        self.commit_duration.record(took.as_secs_f64(), &[]);
        if committed {
            self.commits.add(1, &[]);
        } else {
            self.raced_batches.add(1, &[]);
        }
    }
}
