//! The cluster's metric names, each defined once, and the instruments that record them.

use crate::ActorMembership;
use opentelemetry::metrics::{Counter, Meter, ObservableGauge};
use std::sync::{Arc, LazyLock};

/// The meter the cluster's instruments come from.
pub const METER: &str = "agentprocess-cluster";
/// Shards this actor host owns now.
pub const SHARDS_OWNED: &str = "agentprocess.cluster.shards_owned";
/// Shards this actor host took (at start, and as hosts come and go).
pub const SHARDS_TAKEN: &str = "agentprocess.cluster.shards_taken";
/// Shards this actor host gave up to another host.
pub const SHARDS_GIVEN_UP: &str = "agentprocess.cluster.shards_given_up";

/// The cluster's instruments. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ClusterMetrics {
    pub(crate) shards_taken: Counter<u64>,
    pub(crate) shards_given_up: Counter<u64>,
}

impl ClusterMetrics {
    /// The instruments, from `meter`.
    pub fn new(meter: &Meter) -> Self {
        ClusterMetrics {
            shards_taken: meter
                .u64_counter(SHARDS_TAKEN)
                .with_description("Shards this actor host took.")
                .build(),
            shards_given_up: meter
                .u64_counter(SHARDS_GIVEN_UP)
                .with_description("Shards this actor host gave up.")
                .build(),
        }
    }

    /// The instruments of the process-wide meter provider (none installed: they record nothing).
    /// Its counters start at 0, so a scrape shows them before the first move.
    pub fn global() -> Self {
        static GLOBAL: LazyLock<ClusterMetrics> = LazyLock::new(|| {
            let metrics = ClusterMetrics::new(&opentelemetry::global::meter(METER));
            metrics.shards_taken.add(0, &[]);
            metrics.shards_given_up.add(0, &[]);
            metrics
        });
        GLOBAL.clone()
    }
}

/// Reports how many shards `membership` owns, whenever scraped, while it exists (the gauge does
/// not keep it: dropping the last handle still stops it).
pub fn shards_owned_gauge(membership: &Arc<ActorMembership>) -> ObservableGauge<u64> {
    let membership = Arc::downgrade(membership);
    opentelemetry::global::meter(METER)
        .u64_observable_gauge(SHARDS_OWNED)
        .with_description("Shards this actor host owns now.")
        .with_callback(move |gauge| {
            if let Some(membership) = membership.upgrade() {
                gauge.observe(membership.held().len() as u64, &[]);
            }
        })
        .build()
}
