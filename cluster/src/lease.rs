//! Keeping a lease alive, and noticing when it is gone.

use std::time::Duration;

use agentprocess_store::{LeaseGrant, Store, StoreError};
use tokio::time::Instant;

/// The longest wait before trying again after a keep-alive failed.
const RETRY_AFTER_FAILURE: Duration = Duration::from_millis(500);

/// Why a lease is to be taken as gone.
#[derive(Debug)]
pub(crate) enum LeaseLoss {
    /// The store says the lease does not exist: it expired or was revoked.
    NotFound,
    /// No keep-alive was answered for a whole TTL: the store may have expired the lease.
    Unanswered(Option<StoreError>),
}

impl std::fmt::Display for LeaseLoss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeaseLoss::NotFound => write!(f, "the store no longer has the lease"),
            LeaseLoss::Unanswered(None) => write!(f, "no keep-alive was answered for a whole TTL"),
            LeaseLoss::Unanswered(Some(error)) => {
                write!(
                    f,
                    "no keep-alive was answered for a whole TTL (last error: {error})"
                )
            }
        }
    }
}

/// A lease's TTL as a duration (at least one second).
pub(crate) fn ttl(grant: &LeaseGrant) -> Duration {
    Duration::from_secs(u64::try_from(grant.ttl).unwrap_or(0).max(1))
}

/// Keeps `grant` alive, one keep-alive every TTL/3, until it is lost; returns why.
///
/// `granted_at` is when the grant was asked for: the lease may run out from then on. The lease
/// counts as lost when the store says it is gone, or when no keep-alive sent within the last
/// TTL was answered: by then the store may have expired it, and someone else may hold what it
/// held.
pub(crate) async fn keep_alive(store: &dyn Store, grant: LeaseGrant, granted_at: Instant) -> LeaseLoss {
    let ttl = ttl(&grant);
    let every = ttl / 3;
    // The start of the last keep-alive that was answered: the lease lives at least a TTL after.
    let mut alive_since = granted_at;
    let mut last_error = None;
    loop {
        let wait = if last_error.is_some() {
            every.min(RETRY_AFTER_FAILURE)
        } else {
            every
        };
        tokio::time::sleep(wait).await;
        let sent = Instant::now();
        let deadline = alive_since + ttl;
        if sent >= deadline {
            return LeaseLoss::Unanswered(last_error);
        }
        match tokio::time::timeout_at(deadline, store.lease_keep_alive(grant.id)).await {
            Ok(Ok(_)) => {
                alive_since = sent;
                last_error = None;
            }
            Ok(Err(StoreError::LeaseNotFound(_))) => return LeaseLoss::NotFound,
            Ok(Err(error)) => {
                tracing::warn!(lease = %grant.id, %error, "a lease keep-alive failed; trying again");
                last_error = Some(error);
            }
            Err(_) => return LeaseLoss::Unanswered(last_error),
        }
    }
}
