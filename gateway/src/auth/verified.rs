//! Bearer tokens already verified, remembered with their identity until they stop being valid,
//! so that a caller's next call skips the signature check and the claims parse.
//!
//! An entry lasts no longer than the token would verify: until its `exp` plus the clock-skew
//! leeway, and, for a token verified with keys fetched from the identity provider, no longer
//! than those keys are used without a refetch. A key the provider withdraws thus stops
//! admitting its tokens exactly when it would without this cache. The tokens themselves are held
//! in memory, in a map of bounded size; `Debug` never shows them.

use super::identity::Identity;
use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

/// How many verified tokens are remembered at most. Well above the callers one gateway serves at
/// once; past it, expired entries go first, then all of them.
pub const MAX_VERIFIED_TOKENS: usize = 8192;

/// Verified tokens and the identities they give, each valid before a unix second.
pub(crate) struct VerifiedTokens {
    capacity: usize,
    entries: Mutex<HashMap<Box<str>, Verified>>,
}

#[derive(Debug, Clone)]
struct Verified {
    identity: Identity,
    /// The first unix second at which the entry no longer stands for a verification.
    valid_before: u64,
}

impl fmt::Debug for VerifiedTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifiedTokens")
            .field("capacity", &self.capacity)
            .field("remembered", &self.lock().len())
            .finish()
    }
}

impl VerifiedTokens {
    pub(crate) fn new(capacity: usize) -> Self {
        VerifiedTokens {
            capacity,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The identity `token` gave when it was verified, if that still holds at `now` (unix seconds).
    pub(crate) fn get(&self, token: &str, now: u64) -> Option<Identity> {
        let entries = self.lock();
        let verified = entries.get(token)?;
        (now < verified.valid_before).then(|| verified.identity.clone())
    }

    /// Remembers that `token` verified as `identity`, valid before `valid_before` (unix seconds).
    /// When the map is full, expired entries are dropped; if none were, every entry is.
    pub(crate) fn insert(&self, token: &str, identity: Identity, valid_before: u64, now: u64) {
        if valid_before <= now || self.capacity == 0 {
            return;
        }
        let mut entries = self.lock();
        if entries.len() >= self.capacity && !entries.contains_key(token) {
            entries.retain(|_, verified| now < verified.valid_before);
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        entries.insert(
            token.into(),
            Verified {
                identity,
                valid_before,
            },
        );
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Box<str>, Verified>> {
        // A panic while holding the lock cannot leave an entry half-written: use the map as is.
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Until when a token verified at `now` may be remembered (exclusive, unix seconds): before its
/// `exp` plus `leeway`, and before the verifying keys need a refetch (`keys_fresh_for`, for keys
/// fetched from the identity provider). `None` when it may not be remembered at all (no integer
/// `exp`, or keys already due for a refetch).
pub(crate) fn remember_until(
    exp: Option<u64>,
    leeway_seconds: u64,
    now: u64,
    keys_fresh_for: Option<Duration>,
) -> Option<u64> {
    let mut until = exp?.saturating_add(leeway_seconds);
    if let Some(fresh_for) = keys_fresh_for {
        until = until.min(now.saturating_add(fresh_for.as_secs()));
    }
    (until > now).then_some(until)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::IdentityKind;

    fn agent(id: &str) -> Identity {
        Identity {
            organization: "acme".into(),
            kind: IdentityKind::Agent { id: id.into() },
            operator: false,
        }
    }

    #[test]
    fn an_entry_holds_only_before_its_end() {
        let verified = VerifiedTokens::new(4);
        verified.insert("t1", agent("a"), 100, 50);
        assert_eq!(verified.get("t1", 99), Some(agent("a")));
        assert_eq!(verified.get("t1", 100), None, "expired");
        assert_eq!(verified.get("t2", 50), None, "never verified");
        verified.insert("t3", agent("c"), 50, 50);
        assert_eq!(verified.get("t3", 50), None, "already expired when verified");
    }

    #[test]
    fn the_map_stays_within_its_capacity_dropping_expired_entries_first() {
        let verified = VerifiedTokens::new(3);
        verified.insert("old", agent("o"), 20, 10);
        verified.insert("t1", agent("1"), 1000, 10);
        verified.insert("t2", agent("2"), 1000, 10);
        // Full: the expired entry makes room.
        verified.insert("t3", agent("3"), 1000, 30);
        assert_eq!(verified.lock().len(), 3);
        assert_eq!(verified.get("t1", 30), Some(agent("1")));
        assert_eq!(verified.get("t3", 30), Some(agent("3")));
        // Full of live entries: all go, the new one stays.
        verified.insert("t4", agent("4"), 1000, 30);
        assert_eq!(verified.lock().len(), 1);
        assert_eq!(verified.get("t4", 30), Some(agent("4")));
        assert_eq!(verified.get("t1", 30), None);
    }

    #[test]
    fn its_debug_form_shows_no_token() {
        let verified = VerifiedTokens::new(3);
        verified.insert("secret-token", agent("a"), 1000, 10);
        let shown = format!("{verified:?}");
        assert!(!shown.contains("secret-token"), "{shown}");
    }

    #[test]
    fn a_token_is_remembered_until_it_expires_or_its_keys_need_a_refetch() {
        // exp + leeway.
        assert_eq!(remember_until(Some(1000), 60, 500, None), Some(1060));
        // Keys fetched from the provider: no longer than they are fresh.
        assert_eq!(
            remember_until(Some(1000), 60, 500, Some(Duration::from_secs(100))),
            Some(600)
        );
        // Keys kept past their age while the provider is unreachable: not remembered.
        assert_eq!(remember_until(Some(1000), 60, 500, Some(Duration::ZERO)), None);
        // Expired (within the leeway it still verifies, but no second is left to remember it).
        assert_eq!(remember_until(Some(440), 60, 500, None), None);
        assert_eq!(remember_until(None, 60, 500, None), None);
    }
}
