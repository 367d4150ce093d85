//! Store leases shared by claims that end near the same time. A claim key is attached to a
//! store lease only so that the store removes it if nobody else does; the actor's `expiresAt`
//! is the truth. One lease per claim cost a grant and a revoke (two raft writes on etcd) per
//! claim; sharing one lease among the claims that end in the same window costs one grant per
//! window, and nothing when a claim ends (its key is deleted in the run's transaction and the
//! lease lapses by itself).

use agentprocess_store::{LeaseId, Store, StoreError};
use std::collections::BTreeMap;
use tokio::sync::Mutex;

/// Claims whose expiries fall in one window of this many milliseconds share a lease.
const WINDOW_MS: u64 = 10_000;
/// A shared lease outlives the end of its window by this many seconds, so that clock skew
/// between this host and the store never removes a claim key before its claim ends.
const MARGIN_SECONDS: i64 = 30;

/// The host's shared claim leases, by the end of their window (in the host's clock).
#[derive(Debug, Default)]
pub(crate) struct ClaimLeases {
    by_window_end: Mutex<BTreeMap<u64, LeaseId>>,
}

impl ClaimLeases {
    /// A lease that lasts at least until `expires_at_ms` (and the margin), granted the first time
    /// a window is asked for and shared after that. `now_ms` is the host's clock.
    pub(crate) async fn lease_until(
        &self,
        store: &dyn Store,
        now_ms: u64,
        expires_at_ms: u64,
    ) -> Result<LeaseId, StoreError> {
        let window_end = expires_at_ms.div_ceil(WINDOW_MS).saturating_mul(WINDOW_MS);
        let mut leases = self.by_window_end.lock().await;
        // Windows that ended are not handed out again: their leases lapse on their own.
        leases.retain(|&end, _| end >= now_ms);
        if let Some(lease) = leases.get(&window_end) {
            return Ok(*lease);
        }
        let ttl = i64::try_from(window_end.saturating_sub(now_ms).div_ceil(1000))
            .unwrap_or(i64::MAX / 2)
            .saturating_add(MARGIN_SECONDS);
        let lease = store.lease_grant(ttl).await?.id;
        leases.insert(window_end, lease);
        Ok(lease)
    }

    /// Stops handing out `lease`: the store no longer knows it (it was revoked, or a restore
    /// lost it).
    pub(crate) async fn forget(&self, lease: LeaseId) {
        self.by_window_end.lock().await.retain(|_, held| *held != lease);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentprocess_store::{EmbeddedOptions, EmbeddedStore};

    #[tokio::test]
    async fn claims_ending_in_one_window_share_a_lease_that_outlives_them() {
        let store = EmbeddedStore::in_memory(EmbeddedOptions::default());
        let leases = ClaimLeases::default();
        let now = 1_000_000;
        let a = leases.lease_until(&store, now, now + 600_500).await.unwrap();
        let b = leases.lease_until(&store, now, now + 601_000).await.unwrap();
        assert_eq!(a, b, "one window, one lease");
        let later = leases.lease_until(&store, now, now + 612_000).await.unwrap();
        assert_ne!(a, later, "the next window has its own");
        let status = store.lease_time_to_live(a).await.unwrap().expect("granted");
        assert!(status.granted_ttl >= 610 + MARGIN_SECONDS, "{status:?}");

        leases.forget(a).await;
        let again = leases.lease_until(&store, now, now + 600_500).await.unwrap();
        assert_ne!(again, a, "a forgotten lease is not handed out");
    }

    #[tokio::test]
    async fn a_window_that_ended_is_never_handed_out_again() {
        let store = EmbeddedStore::in_memory(EmbeddedOptions::default());
        let leases = ClaimLeases::default();
        let first = leases.lease_until(&store, 0, 5_000).await.unwrap();
        let after = leases.lease_until(&store, 20_000, 25_000).await.unwrap();
        assert_ne!(first, after);
        assert_eq!(
            leases.by_window_end.lock().await.len(),
            1,
            "the ended window was dropped"
        );
    }
}
