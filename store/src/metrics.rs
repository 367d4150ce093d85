//! The store's metric names, each defined once, and the instruments that record them.

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter};
use std::sync::LazyLock;
use std::time::Duration;

/// The meter the store's instruments come from.
pub const METER: &str = "agentprocess-store";
/// How long a commit took to be durable, in seconds: one journal append and sync of the embedded
/// store, or one (merged) transaction in etcd.
pub const COMMIT_DURATION: &str = "agentprocess.store.commit.duration";
/// Transactions made durable by one commit: the embedded store's batch per journal sync, or the
/// transactions group commit merged into one etcd transaction.
pub const COMMIT_BATCH_SIZE: &str = "agentprocess.store.commit.batch_size";
/// etcd requests tried again (on the next member, after a failure that left nothing applied or
/// a read).
pub const ETCD_RETRIES: &str = "agentprocess.store.etcd.retries";
/// etcd requests that failed, by `kind`: `unreachable` (not sent; tried again), `unknown` (a
/// write whose outcome is unknown), `timeout` (no member answered in time), `refused` (etcd said
/// no: a full quota, refused credentials).
pub const ETCD_REQUEST_ERRORS: &str = "agentprocess.store.etcd.request_errors";

/// The attribute naming how an etcd request failed.
pub const ATTRIBUTE_KIND: &str = "kind";
/// The attribute naming the store a commit went to: `embedded` or `etcd`.
pub const ATTRIBUTE_STORE: &str = "store";

/// Bucket bounds of [`COMMIT_BATCH_SIZE`]: powers of two up to etcd's 128 operations.
const BATCH_BUCKETS: [f64; 9] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// How an etcd request failed, as [`ETCD_REQUEST_ERRORS`] counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EtcdFailure {
    Unreachable,
    Unknown,
    Timeout,
    Refused,
}

impl EtcdFailure {
    fn as_str(self) -> &'static str {
        match self {
            EtcdFailure::Unreachable => "unreachable",
            EtcdFailure::Unknown => "unknown",
            EtcdFailure::Timeout => "timeout",
            EtcdFailure::Refused => "refused",
        }
    }
}

/// The store's instruments. Cheap to clone.
#[derive(Debug, Clone)]
pub struct StoreMetrics {
    commit_duration: Histogram<f64>,
    commit_batch_size: Histogram<u64>,
    etcd_retries: Counter<u64>,
    etcd_request_errors: Counter<u64>,
}

impl StoreMetrics {
    /// The instruments, from `meter`.
    pub fn new(meter: &Meter) -> Self {
        StoreMetrics {
            commit_duration: meter
                .f64_histogram(COMMIT_DURATION)
                .with_description("How long a commit took to be durable.")
                .with_unit("s")
                .build(),
            commit_batch_size: meter
                .u64_histogram(COMMIT_BATCH_SIZE)
                .with_description("Transactions made durable by one commit.")
                .with_boundaries(BATCH_BUCKETS.to_vec())
                .build(),
            etcd_retries: meter
                .u64_counter(ETCD_RETRIES)
                .with_description("etcd requests tried again.")
                .build(),
            etcd_request_errors: meter
                .u64_counter(ETCD_REQUEST_ERRORS)
                .with_description("etcd requests that failed, by kind.")
                .build(),
        }
    }

    /// The instruments of the process-wide meter provider (none installed: they record nothing).
    /// The etcd counters start at 0 (errors for each kind), so a scrape shows them before the
    /// first failure.
    pub fn global() -> Self {
        static GLOBAL: LazyLock<StoreMetrics> = LazyLock::new(|| {
            let metrics = StoreMetrics::new(&opentelemetry::global::meter(METER));
            metrics.etcd_retries.add(0, &[]);
            for failure in [
                EtcdFailure::Unreachable,
                EtcdFailure::Unknown,
                EtcdFailure::Timeout,
                EtcdFailure::Refused,
            ] {
                metrics
                    .etcd_request_errors
                    .add(0, &[KeyValue::new(ATTRIBUTE_KIND, failure.as_str())]);
            }
            metrics
        });
        GLOBAL.clone()
    }

    /// Records one commit of `transactions` to `store`, durable after `took`.
    pub(crate) fn record_commit(&self, store: &'static str, transactions: usize, took: Duration) {
        let store = [KeyValue::new(ATTRIBUTE_STORE, store)];
        self.commit_duration.record(took.as_secs_f64(), &store);
        self.commit_batch_size
            .record(u64::try_from(transactions).unwrap_or(u64::MAX), &store);
    }

    pub(crate) fn record_etcd_retry(&self) {
        self.etcd_retries.add(1, &[]);
    }

    pub(crate) fn record_etcd_failure(&self, failure: EtcdFailure) {
        self.etcd_request_errors
            .add(1, &[KeyValue::new(ATTRIBUTE_KIND, failure.as_str())]);
    }
}
