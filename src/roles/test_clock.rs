//! Testing only (`testing.clock_control`): one clock for the whole cluster.
//!
//! `serve` moves its one [`Clock`] when an operator posts `/admin/v1/clock`. A cluster has a
//! clock in every process, so the move goes through the store: the key [`Keys::test_clock`]
//! holds the seconds the cluster's clock was moved forward in all. Every role started with
//! clock control follows it ([`follow`]): it applies the total at start, then each increase it
//! watches, and records what it has applied under its acknowledgement key, attached to a lease
//! it keeps alive (so a role that is gone stops counting once its lease ends). A gateway adds to
//! the total ([`advance`]) and waits until every acknowledgement shows it ([`wait_for_acks`]),
//! so the cluster has moved as one before the caller acts on it.

use agentprocess_run_actor::runtime::Clock;
use agentprocess_store::keys::Keys;
use agentprocess_store::{Compare, EventKind, KeyRange, LeaseId, RangeRequest, Store, Txn, TxnOp};
use anyhow::Context;
use std::sync::Arc;
use std::time::Duration;

/// How long a role waits before it tries again after the store failed it.
const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// Says loudly that this process's clock can be moved, as `serve` does.
pub fn warn_clock_control(role: &str) {
    tracing::warn!(
        "testing.clock_control is on: this {role} follows the cluster's test clock, which operators can move"
    );
}

/// A stored total: decimal seconds.
fn parse_total(value: &[u8]) -> anyhow::Result<u64> {
    std::str::from_utf8(value)
        .ok()
        .and_then(|text| text.parse().ok())
        .with_context(|| {
            format!(
                "the test clock holds {:?}, not a number of seconds",
                String::from_utf8_lossy(value)
            )
        })
}

/// The cluster's total (0 when never moved) and the store revision it was read at.
async fn read_total(store: &dyn Store, keys: &Keys) -> anyhow::Result<(u64, i64)> {
    let (found, revision) = store
        .get(&keys.test_clock())
        .await
        .context("cannot read the test clock")?;
    let total = match found {
        Some(kv) => parse_total(&kv.value)?,
        None => 0,
    };
    Ok((total, revision))
}

/// Moves `clock` by the cluster's total now, records it under `role_id`'s acknowledgement, and
/// keeps following the total (and the acknowledgement's lease of `lease_seconds`) for as long
/// as the process runs.
pub async fn follow(
    store: Arc<dyn Store>,
    keys: Keys,
    clock: Clock,
    role_id: String,
    lease_seconds: i64,
) -> anyhow::Result<()> {
    let (total, revision) = read_total(store.as_ref(), &keys).await?;
    clock.advance(Duration::from_secs(total));
    let lease = store
        .lease_grant(lease_seconds)
        .await
        .context("cannot take a lease for the test clock's acknowledgement")?;
    let mut follower = Follower {
        store,
        keys,
        clock,
        role_id,
        applied: total,
        lease: lease.id,
        lease_seconds,
        acknowledged: false,
    };
    follower.acknowledge().await?;
    tokio::spawn(follower.run(revision));
    Ok(())
}

struct Follower {
    store: Arc<dyn Store>,
    keys: Keys,
    clock: Clock,
    role_id: String,
    /// The total this process's clock has been moved by.
    applied: u64,
    lease: LeaseId,
    lease_seconds: i64,
    /// Whether the acknowledgement in the store shows `applied`.
    acknowledged: bool,
}

impl Follower {
    async fn acknowledge(&mut self) -> anyhow::Result<()> {
        let put = TxnOp::put_with_lease(
            self.keys.test_clock_ack(&self.role_id),
            self.applied.to_string(),
            self.lease,
        );
        self.acknowledged = false;
        self.store
            .txn(Txn::new().and_then([put]))
            .await
            .context("cannot record the test clock's acknowledgement")?;
        self.acknowledged = true;
        Ok(())
    }

    /// Moves the clock up to `total` (never back) and says so.
    async fn apply(&mut self, total: u64) {
        if total > self.applied {
            self.clock.advance(Duration::from_secs(total - self.applied));
            self.applied = total;
            tracing::info!(total, "the cluster's test clock moved");
            if let Err(error) = self.acknowledge().await {
                tracing::warn!("{error:#}; trying again");
            }
        }
    }

    /// Renews the lease; a lease that ended (the store lost it, or this process was paused past
    /// it) is replaced and the acknowledgement written again under the new one.
    async fn keep_alive(&mut self) {
        if self.store.lease_keep_alive(self.lease).await.is_err() {
            match self.store.lease_grant(self.lease_seconds).await {
                Ok(lease) => {
                    self.lease = lease.id;
                    self.acknowledged = false;
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot renew the test clock's lease");
                    return;
                }
            }
        }
        if !self.acknowledged
            && let Err(error) = self.acknowledge().await
        {
            tracing::warn!("{error:#}; trying again");
        }
    }

    /// Catches up with the stored total after the watch was lost; the revision to watch from.
    async fn resync(&mut self) -> Option<i64> {
        match read_total(self.store.as_ref(), &self.keys).await {
            Ok((total, revision)) => {
                self.apply(total).await;
                Some(revision)
            }
            Err(error) => {
                tracing::warn!("{error:#}; trying again");
                None
            }
        }
    }

    async fn run(mut self, mut revision: i64) {
        let period = Duration::from_millis(u64::try_from(self.lease_seconds.max(1)).unwrap_or(1) * 1000 / 3);
        let mut renew = tokio::time::interval(period);
        loop {
            let mut watch = match self
                .store
                .watch(KeyRange::single(self.keys.test_clock()), Some(revision + 1))
                .await
            {
                Ok(watch) => watch,
                Err(error) => {
                    tracing::warn!(%error, "cannot watch the test clock; trying again");
                    tokio::time::sleep(RETRY_PAUSE).await;
                    if let Some(at) = self.resync().await {
                        revision = at;
                    }
                    continue;
                }
            };
            loop {
                tokio::select! {
                    _ = renew.tick() => self.keep_alive().await,
                    event = watch.next() => match event {
                        Some(Ok(event)) => {
                            revision = event.kv.mod_revision;
                            if event.kind == EventKind::Put {
                                match parse_total(&event.kv.value) {
                                    Ok(total) => self.apply(total).await,
                                    Err(error) => tracing::warn!("{error:#}"),
                                }
                            }
                        }
                        Some(Err(_)) | None => break,
                    },
                }
            }
            tokio::time::sleep(RETRY_PAUSE).await;
            if let Some(at) = self.resync().await {
                revision = at;
            }
        }
    }
}

/// Adds `seconds` to the cluster's total (compare-and-swap, so concurrent moves add up);
/// returns the new total.
pub async fn advance(store: &dyn Store, keys: &Keys, seconds: u64) -> anyhow::Result<u64> {
    let key = keys.test_clock();
    loop {
        let (found, _) = store.get(&key).await.context("cannot read the test clock")?;
        let (current, unchanged) = match found {
            Some(kv) => (
                parse_total(&kv.value)?,
                Compare::mod_revision_is(key.clone(), kv.mod_revision),
            ),
            None => (0, Compare::absent(key.clone())),
        };
        let total = current
            .checked_add(seconds)
            .context("the test clock cannot move that far")?;
        let swapped = store
            .txn(
                Txn::new()
                    .when([unchanged])
                    .and_then([TxnOp::put(key.clone(), total.to_string())]),
            )
            .await
            .context("cannot move the test clock")?;
        if swapped.succeeded {
            return Ok(total);
        }
    }
}

/// Waits until every role's acknowledgement shows at least `total`; after `patience`, the
/// roles that lag (with what they applied) as the error.
pub async fn wait_for_acks(
    store: &dyn Store,
    keys: &Keys,
    total: u64,
    patience: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + patience;
    let prefix = keys.test_clock_acks();
    loop {
        let acks = store
            .range(RangeRequest::new(prefix.clone()))
            .await
            .context("cannot read the test clock's acknowledgements")?;
        let lagging: Vec<String> = acks
            .kvs
            .iter()
            .filter_map(|kv| {
                let applied = parse_total(&kv.value).ok();
                (applied.is_none_or(|applied| applied < total)).then(|| {
                    let role = String::from_utf8_lossy(kv.key.get(prefix.start.len()..).unwrap_or_default());
                    format!("{role} at {}", String::from_utf8_lossy(&kv.value))
                })
            })
            .collect();
        if lagging.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!(
                "the cluster's clock was moved to {total} s, but not every role applied it within {} s: {}",
                patience.as_secs(),
                lagging.join(", ")
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentprocess_run_actor::machine::Timestamp;
    use agentprocess_store::{EmbeddedOptions, EmbeddedStore};

    const START: i64 = 1_700_000_000_000;

    async fn store(dir: &std::path::Path) -> Arc<dyn Store> {
        let (store, _) = EmbeddedStore::open(dir, EmbeddedOptions::default())
            .await
            .unwrap();
        Arc::new(store)
    }

    /// A clock at `START`, and one never moved that started with it.
    fn clocks() -> (Clock, Clock) {
        let start = Timestamp::from_millis(START);
        (Clock::starting_at(start), Clock::starting_at(start))
    }

    /// How far `clock` was moved, in whole seconds: how far it is ahead of `still`.
    fn moved((clock, still): &(Clock, Clock)) -> i64 {
        (clock.now().as_millis() - still.now().as_millis() + 500).div_euclid(1000)
    }

    #[tokio::test]
    async fn every_follower_applies_the_total_at_start_and_each_move_before_the_move_is_answered() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path()).await;
        let keys = Keys::new("default");
        let patience = Duration::from_secs(10);
        // Nobody follows yet: nothing to wait for.
        wait_for_acks(store.as_ref(), &keys, 0, patience).await.unwrap();

        // A move before anyone follows: a role started later applies it at once.
        assert_eq!(advance(store.as_ref(), &keys, 60).await.unwrap(), 60);
        let early = clocks();
        follow(store.clone(), keys.clone(), early.0.clone(), "actor:a".into(), 5)
            .await
            .unwrap();
        assert_eq!(moved(&early), 60);
        let late = clocks();
        follow(store.clone(), keys.clone(), late.0.clone(), "gateway:b".into(), 5)
            .await
            .unwrap();
        assert_eq!(moved(&late), 60);

        // Moves add up, and each is applied by both before the acknowledgements show it.
        assert_eq!(advance(store.as_ref(), &keys, 3600).await.unwrap(), 3660);
        assert_eq!(advance(store.as_ref(), &keys, 40).await.unwrap(), 3700);
        wait_for_acks(store.as_ref(), &keys, 3700, patience)
            .await
            .unwrap();
        assert_eq!(moved(&early), 3700);
        assert_eq!(moved(&late), 3700);
        let acks = store
            .range(RangeRequest::new(keys.test_clock_acks()))
            .await
            .unwrap()
            .kvs;
        let applied: Vec<&[u8]> = acks.iter().map(|kv| kv.value.as_slice()).collect();
        assert_eq!(applied, [b"3700".as_slice(), b"3700".as_slice()]);
        assert!(acks.iter().all(|kv| kv.lease.is_some()), "on leases: {acks:?}");
    }

    #[tokio::test]
    async fn a_role_that_does_not_apply_the_move_is_named_once_patience_runs_out() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path()).await;
        let keys = Keys::new("default");
        let clock = clocks();
        follow(store.clone(), keys.clone(), clock.0.clone(), "actor:a".into(), 5)
            .await
            .unwrap();
        // A role that acknowledged 0 and stopped following (its lease still runs).
        let lease = store.lease_grant(600).await.unwrap().id;
        store
            .txn(Txn::new().and_then([TxnOp::put_with_lease(
                keys.test_clock_ack("scheduler:s"),
                "0",
                lease,
            )]))
            .await
            .unwrap();
        let total = advance(store.as_ref(), &keys, 30).await.unwrap();
        let error = wait_for_acks(store.as_ref(), &keys, total, Duration::from_secs(1))
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("scheduler:s at 0"), "{error}");
        assert!(!error.contains("actor:a"), "{error}");
        assert_eq!(moved(&clock), 30);

        // Once its lease ends, it no longer holds the cluster back.
        store.lease_revoke(lease).await.unwrap();
        wait_for_acks(store.as_ref(), &keys, total, Duration::from_secs(10))
            .await
            .unwrap();
    }

    #[test]
    fn a_total_is_decimal_seconds() {
        assert_eq!(parse_total(b"3600").unwrap(), 3600);
        assert!(parse_total(b"-1").is_err());
        assert!(parse_total(b"soon").is_err());
    }
}
