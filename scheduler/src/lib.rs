//! Fires timers, due dates and claim expiry, and delivers the notification outbox.
//!
//! ```text
//! timers.rs    a bounded window of the earliest timers, loaded in order from the timer index
//! outbox.rs    at-least-once webhook delivery: HMAC-signed POSTs, backoff, dead letters
//! cleanup.rs   removes idempotency records past their retention
//! hints.rs     hints from a watch on the store, for a scheduler in another process than the runs
//! ```
//!
//! Everything the scheduler works from is in the store (the timer index, the outbox, the
//! idempotency expiry index), so a restart resumes every timer and every undelivered
//! notification. It is built from [`SchedulerParts`]: a store, the cluster's key layout, a
//! clock, a run-service handle and a source of hints. It reaches runs only through
//! [`RunService::fire_timer`]; firing is idempotent because a timer names the generation (or
//! claim lease) it was armed for and the run ignores stale ones. Hints come through memory when
//! the runs are in this process, or from a watch on the store ([`StoreWatchHints`]) when they are
//! not.
//!
//! [`RunService::fire_timer`]: agentprocess_service::RunService::fire_timer

mod cleanup;
mod hints;
pub mod metrics;
mod outbox;
mod timers;

pub use hints::StoreWatchHints;
pub use metrics::SchedulerMetrics;

/// Webhooks and dead letters are organization-level state, which the gateway shares.
pub use agentprocess_org::{Webhook, configure_webhook, dead_letters, remove_webhook, webhooks};
pub use outbox::{DELIVERY_HEADER, DeliveryError, HttpTransport, SIGNATURE_HEADER, Transport, sign};

use agentprocess_org::Clock;
use agentprocess_service::{Hints, RunService, Timestamp};
use agentprocess_store::Store;
use agentprocess_store::keys::Keys;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};

/// Settings of a scheduler. [`SchedulerConfig::default`] suits a single machine.
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// How many of the earliest timers are kept in memory.
    pub timer_window: usize,
    /// Most timer firings in flight at once.
    pub max_firing: usize,
    /// Delivery attempts of a notification before it becomes a dead letter.
    pub max_attempts: u32,
    /// The wait before the second attempt; it doubles after each failure.
    pub first_backoff: Duration,
    pub max_backoff: Duration,
    /// How often the outbox is looked at without a hint.
    pub outbox_poll: Duration,
    /// The least time between two looks at the outbox. Under load, one look, one read of each
    /// organization's webhooks and one delete serve every notification written in between;
    /// after a quiet spell the first notification goes at once.
    pub outbox_gather: Duration,
    /// How often expired idempotency records are removed.
    pub cleanup_every: Duration,
    /// How long `stop` waits for the tasks to end by themselves (one may be in a store call
    /// that waits out its timeout, or retrying a store that is down) before it aborts them.
    pub stop_patience: Duration,
    /// Where the scheduler records its metrics: the process-wide meter provider by default.
    pub metrics: SchedulerMetrics,
}

/// Attempts before a notification becomes a dead letter, by default.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 8;
/// The wait before a notification's second attempt, by default.
pub const DEFAULT_FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The least time between two looks at the outbox, by default.
pub const DEFAULT_OUTBOX_GATHER: Duration = Duration::from_millis(50);
/// The longest wait between attempts, by default.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(300);

impl Default for SchedulerConfig {
    /// The defaults, recording into the process-wide meter provider: make it only once that
    /// provider is installed (the instruments bind to the provider of the moment).
    fn default() -> Self {
        SchedulerConfig {
            timer_window: 1024,
            max_firing: 256,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            first_backoff: DEFAULT_FIRST_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
            outbox_poll: Duration::from_secs(5),
            outbox_gather: DEFAULT_OUTBOX_GATHER,
            cleanup_every: Duration::from_secs(60),
            stop_patience: Duration::from_secs(5),
            metrics: SchedulerMetrics::global(),
        }
    }
}

/// What a scheduler works with: no runtime, only handles that can live in another process.
#[derive(Debug, Clone)]
pub struct SchedulerParts {
    /// The store that holds the timer index, the outbox and the idempotency expiry index.
    pub store: Arc<dyn Store>,
    /// The cluster's key layout.
    pub keys: Keys,
    pub clock: Clock,
    /// Where timers are fired.
    pub runs: Arc<dyn RunService>,
    /// When to look sooner: the runtime's in-memory hints, or [`StoreWatchHints`].
    pub hints: Arc<dyn Hints>,
}

/// Whether a scheduler's tasks are all still running: none ended (by a panic, or after `stop`).
#[derive(Debug, Clone)]
pub struct SchedulerLiveness {
    tasks: Arc<[AbortHandle]>,
    stopped: watch::Receiver<bool>,
}

impl SchedulerLiveness {
    pub fn is_running(&self) -> bool {
        !*self.stopped.borrow() && self.tasks.iter().all(|task| !task.is_finished())
    }
}

/// A running scheduler: its timer, outbox and cleanup tasks.
#[derive(Debug)]
pub struct Scheduler {
    stop: watch::Sender<bool>,
    stop_patience: Duration,
    tasks: Vec<JoinHandle<()>>,
    timers: Arc<timers::WindowStats>,
    swept_at_ms: Arc<AtomicI64>,
}

impl Scheduler {
    /// Starts the scheduler's tasks over `parts`, delivering notifications with `transport`.
    pub fn start(parts: SchedulerParts, transport: Arc<dyn Transport>, config: SchedulerConfig) -> Scheduler {
        let (stop, stopped) = watch::channel(false);
        let timer_stats = Arc::new(timers::WindowStats::default());
        let swept_at_ms = Arc::new(AtomicI64::new(0));
        let parts = Arc::new(parts);
        let stop_patience = config.stop_patience;
        let tasks = vec![
            tokio::spawn(timers::run(
                parts.clone(),
                config.clone(),
                timer_stats.clone(),
                stopped.clone(),
            )),
            tokio::spawn(outbox::run(
                parts.clone(),
                transport,
                config.clone(),
                stopped.clone(),
            )),
            tokio::spawn(cleanup::run(parts, config, swept_at_ms.clone(), stopped)),
        ];
        Scheduler {
            stop,
            stop_patience,
            tasks,
            timers: timer_stats,
            swept_at_ms,
        }
    }

    /// A handle that tells whether this scheduler is still running, for readiness checks.
    pub fn liveness(&self) -> SchedulerLiveness {
        SchedulerLiveness {
            tasks: self.tasks.iter().map(JoinHandle::abort_handle).collect(),
            stopped: self.stop.subscribe(),
        }
    }

    /// How many timers the window holds in memory now.
    pub fn timers_in_memory(&self) -> usize {
        self.timers.in_memory()
    }

    /// The clock time read by the last pass of the timer window that left nothing due unfired and
    /// no firing in flight: every timer due by then has fired. The epoch before the first pass.
    pub fn timers_settled_at(&self) -> Timestamp {
        self.timers.settled_at()
    }

    /// How many times the timer window was read from the timer index since the start.
    pub fn timer_window_reloads(&self) -> u64 {
        self.timers.reloads()
    }

    /// The clock time of the last finished sweep: every idempotency record expired by then is
    /// gone. The epoch before the first sweep.
    pub fn swept_at(&self) -> Timestamp {
        Timestamp::from_millis(self.swept_at_ms.load(Ordering::Acquire))
    }

    /// Stops every task and waits for them: each ends at its next look at the stop signal, and
    /// those still running after `stop_patience` (stuck in a store that does not answer) are
    /// aborted. Nothing is lost either way: a timer whose firing was cut off is still in the
    /// index, a notification whose delivery was cut off is still in the outbox (delivery is at
    /// least once), and a sweep cut off is done again by the next.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let deadline = tokio::time::Instant::now() + self.stop_patience;
        for mut task in self.tasks {
            if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
                task.abort();
                let _ = task.await;
            }
        }
    }
}
