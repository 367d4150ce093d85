//! The run actors' metric names, each defined once, and the instruments that record them.

use opentelemetry::KeyValue;
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
/// Bytes an actor host's copies of the work indexes hold (`cluster.index_mirror_max_bytes`).
pub const INDEX_MIRROR_BYTES: &str = "agentprocess.run_actor.index_mirror_bytes";
/// Runs started, by `process`.
pub const RUNS_STARTED: &str = "agentprocess.run_actor.runs_started";
/// Runs ended, by `process` and `outcome`: the finish outcome (`done`, `rejected`, `failed`, or
/// a process's own), or `cancelled`.
pub const RUNS_ENDED: &str = "agentprocess.run_actor.runs_ended";
/// Claims granted (`claim`).
pub const CLAIMS_GRANTED: &str = "agentprocess.run_actor.claims_granted";
/// Claims renewed (`renew`).
pub const CLAIMS_RENEWED: &str = "agentprocess.run_actor.claims_renewed";
/// Claims whose lease ran out before they were renewed or submitted.
pub const LEASE_EXPIRIES: &str = "agentprocess.run_actor.lease_expiries";

/// The attribute naming a run's process.
pub const ATTRIBUTE_PROCESS: &str = "process";
/// The attribute naming how a run ended.
pub const ATTRIBUTE_OUTCOME: &str = "outcome";
/// The outcome of a cancelled run.
pub const OUTCOME_CANCELLED: &str = "cancelled";

/// The run actors' instruments. Cheap to clone.
#[derive(Debug, Clone)]
pub struct RunActorMetrics {
    pub(crate) commits: Counter<u64>,
    pub(crate) commit_duration: Histogram<f64>,
    pub(crate) raced_batches: Counter<u64>,
    pub(crate) runs_archived: Counter<u64>,
    pub(crate) live_actors: UpDownCounter<i64>,
    pub(crate) index_mirror_bytes: UpDownCounter<i64>,
    runs_started: Counter<u64>,
    runs_ended: Counter<u64>,
    claims_granted: Counter<u64>,
    claims_renewed: Counter<u64>,
    lease_expiries: Counter<u64>,
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
            index_mirror_bytes: meter
                .i64_up_down_counter(INDEX_MIRROR_BYTES)
                .with_description("Bytes the copies of the work indexes hold.")
                .build(),
            runs_started: meter
                .u64_counter(RUNS_STARTED)
                .with_description("Runs started, by process.")
                .build(),
            runs_ended: meter
                .u64_counter(RUNS_ENDED)
                .with_description("Runs ended, by process and outcome.")
                .build(),
            claims_granted: meter
                .u64_counter(CLAIMS_GRANTED)
                .with_description("Claims granted.")
                .build(),
            claims_renewed: meter
                .u64_counter(CLAIMS_RENEWED)
                .with_description("Claims renewed.")
                .build(),
            lease_expiries: meter
                .u64_counter(LEASE_EXPIRIES)
                .with_description("Claims whose lease ran out.")
                .build(),
        }
    }

    /// The instruments of the process-wide meter provider (none installed: they record nothing).
    /// The claim counters start at 0, so a scrape shows them before the first claim.
    pub fn global() -> Self {
        static GLOBAL: LazyLock<RunActorMetrics> = LazyLock::new(|| {
            let metrics = RunActorMetrics::new(&opentelemetry::global::meter(METER));
            for counter in [
                &metrics.claims_granted,
                &metrics.claims_renewed,
                &metrics.lease_expiries,
            ] {
                counter.add(0, &[]);
            }
            metrics
        });
        GLOBAL.clone()
    }

    /// Records a claim granted.
    pub(crate) fn record_claim_granted(&self) {
        self.claims_granted.add(1, &[]);
    }

    /// Records a claim renewed.
    pub(crate) fn record_claim_renewed(&self) {
        self.claims_renewed.add(1, &[]);
    }

    /// Records a run of `process` started.
    pub(crate) fn record_run_started(&self, process: &str) {
        self.runs_started
            .add(1, &[KeyValue::new(ATTRIBUTE_PROCESS, process.to_owned())]);
    }

    /// Records a run of `process` ended with `outcome` (`None`: cancelled).
    pub(crate) fn record_run_ended(&self, process: &str, outcome: Option<&str>) {
        self.runs_ended.add(
            1,
            &[
                KeyValue::new(ATTRIBUTE_PROCESS, process.to_owned()),
                KeyValue::new(ATTRIBUTE_OUTCOME, outcome.unwrap_or(OUTCOME_CANCELLED).to_owned()),
            ],
        );
    }

    /// Records a claim's lease that ran out.
    pub(crate) fn record_lease_expired(&self) {
        self.lease_expiries.add(1, &[]);
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
