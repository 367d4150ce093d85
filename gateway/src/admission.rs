//! Admission of tool calls: how many a gateway works on at once, and how fast one identity and
//! one organization may call; past a limit the call is answered `retry` at once, naming the
//! limit and when to come back, never queued.

use crate::auth::{Identity, IdentityKind};
use crate::tool::{ErrorCode, ToolError};
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Buckets kept per kind of limit before full ones (as good as new) are let go.
const BUCKETS_KEPT: usize = 100_000;

/// The limits, as settings give them (`[admission]`); `0` turns one off.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdmissionLimits {
    /// Tool calls one gateway works on at once.
    pub max_in_flight_calls: usize,
    /// Tool calls per second one identity (an agent, or a person) may make, on average.
    pub calls_per_second_per_identity: f64,
    /// Calls one identity may make at once above its rate; default twice the rate, at least 1.
    pub burst_per_identity: Option<f64>,
    /// Tool calls per second one organization may make, all its identities together.
    pub calls_per_second_per_organization: f64,
    /// Calls one organization may make at once above its rate; default twice the rate.
    pub burst_per_organization: Option<f64>,
}

impl AdmissionLimits {
    /// What is wrong with these limits, each problem named by its setting.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (name, value) in [
            (
                "calls_per_second_per_identity",
                Some(self.calls_per_second_per_identity),
            ),
            ("burst_per_identity", self.burst_per_identity),
            (
                "calls_per_second_per_organization",
                Some(self.calls_per_second_per_organization),
            ),
            ("burst_per_organization", self.burst_per_organization),
        ] {
            if let Some(value) = value
                && !(value.is_finite() && value >= 0.0)
            {
                problems.push(format!("admission.{name} must be a number of 0 or more"));
            }
        }
        for (name, burst) in [
            ("burst_per_identity", self.burst_per_identity),
            ("burst_per_organization", self.burst_per_organization),
        ] {
            if burst.is_some_and(|burst| burst > 0.0 && burst < 1.0) {
                problems.push(format!("admission.{name} must be at least 1 (one call)"));
            }
        }
        problems
    }

    fn identity_rate(&self) -> Option<Rate> {
        Rate::of(self.calls_per_second_per_identity, self.burst_per_identity)
    }

    fn organization_rate(&self) -> Option<Rate> {
        Rate::of(
            self.calls_per_second_per_organization,
            self.burst_per_organization,
        )
    }
}

/// A rate limit: `per_second` on average, `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: f64,
}

impl Rate {
    fn of(per_second: f64, burst: Option<f64>) -> Option<Rate> {
        (per_second > 0.0).then(|| Rate {
            per_second,
            burst: burst
                .filter(|burst| *burst >= 1.0)
                .unwrap_or((2.0 * per_second).max(1.0)),
        })
    }
}

/// A token bucket: the calls it may still take now, as of `at`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub tokens: f64,
    pub at: Instant,
}

impl Bucket {
    /// A bucket that was full at `at`.
    pub fn full(rate: Rate, at: Instant) -> Bucket {
        Bucket {
            tokens: rate.burst,
            at,
        }
    }

    /// The bucket refilled at `rate` until `now`.
    pub fn refilled(self, rate: Rate, now: Instant) -> Bucket {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        Bucket {
            tokens: (self.tokens + elapsed * rate.per_second).min(rate.burst),
            at: now.max(self.at),
        }
    }

    /// How long until the bucket holds one call: zero when it holds one now.
    pub fn wait(&self, rate: Rate) -> Duration {
        if self.tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - self.tokens) / rate.per_second)
        }
    }
}

/// The buckets of one kind of limit, by who they limit.
#[derive(Debug, Default)]
struct Buckets(Mutex<HashMap<String, Bucket>>);

impl Buckets {
    /// The bucket of `who` as of `now`.
    fn read(&self, who: &str, rate: Rate, now: Instant) -> Bucket {
        let buckets = self.0.lock().expect("admission buckets");
        buckets
            .get(who)
            .map_or(Bucket::full(rate, now), |bucket| bucket.refilled(rate, now))
    }

    /// Takes one call out of the bucket of `who`, refilled as of `now`.
    fn take(&self, who: &str, rate: Rate, now: Instant) {
        let mut buckets = self.0.lock().expect("admission buckets");
        if buckets.len() >= BUCKETS_KEPT && !buckets.contains_key(who) {
            buckets.retain(|_, bucket| bucket.refilled(rate, now).tokens < rate.burst);
        }
        let bucket = buckets
            .get(who)
            .map_or(Bucket::full(rate, now), |bucket| bucket.refilled(rate, now));
        buckets.insert(
            who.to_owned(),
            Bucket {
                tokens: bucket.tokens - 1.0,
                ..bucket
            },
        );
    }
}

/// A gateway's admission of tool calls.
#[derive(Debug, Default)]
pub struct Admission {
    limits: AdmissionLimits,
    in_flight: AtomicUsize,
    identities: Buckets,
    organizations: Buckets,
    /// Serializes reading and taking from the two kinds of buckets, so a call refused by one
    /// limit takes nothing from the other.
    taking: Mutex<()>,
}

/// A call refused: the limit it was past (its setting's name) and the answer it gets.
#[derive(Debug)]
pub struct Refused {
    pub limit: &'static str,
    pub error: ToolError,
}

/// A call admitted: it counts as in flight until this is dropped.
#[derive(Debug)]
pub struct Admitted<'a> {
    in_flight: &'a AtomicUsize,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How long a caller refused for calls in flight is told to wait: about one call's time.
const IN_FLIGHT_RETRY_AFTER: Duration = Duration::from_millis(50);

impl Admission {
    pub fn new(limits: AdmissionLimits) -> Self {
        Admission {
            limits,
            ..Admission::default()
        }
    }

    /// Admits a call from `identity` at `now`, or answers the `retry` refusal of the limit it
    /// hit: the limit's setting and value in the message and in `issues`, with
    /// `retry_after_ms`.
    pub fn admit(&self, identity: &Identity, now: Instant) -> Result<Admitted<'_>, Refused> {
        let in_flight = self.in_flight.fetch_add(1, Ordering::Relaxed);
        let admitted = Admitted {
            in_flight: &self.in_flight,
        };
        let max = self.limits.max_in_flight_calls;
        if max > 0 && in_flight >= max {
            return Err(refusal(
                "max_in_flight_calls",
                &format!("this gateway is working on {max} calls, its limit"),
                IN_FLIGHT_RETRY_AFTER,
            ));
        }
        let identity_rate = self.limits.identity_rate();
        let organization_rate = self.limits.organization_rate();
        if identity_rate.is_none() && organization_rate.is_none() {
            return Ok(admitted);
        }
        let who = identity_key(identity);
        let organization = identity.organization.as_str();
        let _taking = self.taking.lock().expect("admission");
        if let Some(rate) = identity_rate {
            let wait = self.identities.read(&who, rate, now).wait(rate);
            if !wait.is_zero() {
                return Err(refusal(
                    "calls_per_second_per_identity",
                    &format!("this identity is over its {} calls per second", rate.per_second),
                    wait,
                ));
            }
        }
        if let Some(rate) = organization_rate {
            let wait = self.organizations.read(organization, rate, now).wait(rate);
            if !wait.is_zero() {
                return Err(refusal(
                    "calls_per_second_per_organization",
                    &format!(
                        "this organization is over its {} calls per second",
                        rate.per_second
                    ),
                    wait,
                ));
            }
        }
        if let Some(rate) = identity_rate {
            self.identities.take(&who, rate, now);
        }
        if let Some(rate) = organization_rate {
            self.organizations.take(organization, rate, now);
        }
        Ok(admitted)
    }
}

/// Who a per-identity limit counts: the organization and the agent or person.
fn identity_key(identity: &Identity) -> String {
    let organization = identity.organization.as_str();
    match &identity.kind {
        IdentityKind::Agent { id } => format!("{organization}\u{0}agent\u{0}{id}"),
        IdentityKind::Person { email, .. } => format!("{organization}\u{0}person\u{0}{email}"),
    }
}

fn refusal(setting: &'static str, why: &str, wait: Duration) -> Refused {
    let retry_after_ms = wait.as_millis().max(1);
    let error = ToolError::new(
        ErrorCode::Retry,
        format!("{why} (admission.{setting}): call again in {retry_after_ms} ms with the same requestId"),
    )
    .with_issues(vec![
        format!("limit: admission.{setting}"),
        format!("retry_after_ms: {retry_after_ms}"),
    ]);
    Refused {
        limit: setting,
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentprocess_service::OrgId;

    fn agent(organization: &str, id: &str) -> Identity {
        Identity {
            organization: OrgId::from(organization),
            kind: IdentityKind::Agent { id: id.into() },
            operator: false,
        }
    }

    fn limit_of(refused: &Refused) -> &str {
        refused.error.issues[0].as_str()
    }

    fn retry_after_ms(refused: &Refused) -> u64 {
        refused.error.issues[1]
            .strip_prefix("retry_after_ms: ")
            .unwrap()
            .parse()
            .unwrap()
    }

    #[test]
    fn a_bucket_refills_at_its_rate_up_to_its_burst() {
        let rate = Rate {
            per_second: 10.0,
            burst: 2.0,
        };
        let start = Instant::now();
        let empty = Bucket {
            tokens: 0.0,
            at: start,
        };
        assert_eq!(empty.wait(rate), Duration::from_millis(100));
        let later = empty.refilled(rate, start + Duration::from_millis(50));
        assert!((later.tokens - 0.5).abs() < 1e-9);
        assert_eq!(later.wait(rate), Duration::from_millis(50));
        let much_later = empty.refilled(rate, start + Duration::from_secs(60));
        assert_eq!(much_later.tokens, 2.0, "never above its burst");
        assert_eq!(much_later.wait(rate), Duration::ZERO);
    }

    #[test]
    fn an_identity_over_its_rate_is_told_to_retry_naming_the_limit_and_when() {
        let admission = Admission::new(AdmissionLimits {
            calls_per_second_per_identity: 10.0,
            burst_per_identity: Some(3.0),
            ..AdmissionLimits::default()
        });
        let now = Instant::now();
        let busy = agent("acme", "a_busy");
        for _ in 0..3 {
            drop(admission.admit(&busy, now).unwrap());
        }
        let refused = admission.admit(&busy, now).unwrap_err();
        assert_eq!(refused.error.code, ErrorCode::Retry);
        assert_eq!(refused.limit, "calls_per_second_per_identity");
        assert_eq!(
            limit_of(&refused),
            "limit: admission.calls_per_second_per_identity"
        );
        assert_eq!(retry_after_ms(&refused), 100);
        let message = &refused.error.message;
        assert!(message.contains("10 calls per second"), "{message}");
        // Another identity of the same organization is not held back.
        drop(admission.admit(&agent("acme", "a_other"), now).unwrap());
        // A tenth of a second later, one more call.
        let later = now + Duration::from_millis(100);
        drop(admission.admit(&busy, later).unwrap());
        assert!(admission.admit(&busy, later).is_err());
    }

    #[test]
    fn an_organization_over_its_rate_holds_back_all_its_identities_and_no_other() {
        let admission = Admission::new(AdmissionLimits {
            calls_per_second_per_organization: 4.0,
            burst_per_organization: Some(4.0),
            calls_per_second_per_identity: 100.0,
            ..AdmissionLimits::default()
        });
        let now = Instant::now();
        for n in 0..4 {
            drop(admission.admit(&agent("flood", &format!("a_{n}")), now).unwrap());
        }
        let refused = admission.admit(&agent("flood", "a_new"), now).unwrap_err();
        assert_eq!(
            limit_of(&refused),
            "limit: admission.calls_per_second_per_organization"
        );
        assert_eq!(retry_after_ms(&refused), 250);
        drop(admission.admit(&agent("quiet", "a_1"), now).unwrap());
        // The refused call took nothing from its identity's bucket either: a fresh identity of
        // another organization at the same instant is admitted, and so is the refused one later.
        drop(
            admission
                .admit(&agent("flood", "a_new"), now + Duration::from_millis(250))
                .unwrap(),
        );
    }

    #[test]
    fn calls_past_the_in_flight_limit_are_refused_at_once_until_one_ends() {
        let admission = Admission::new(AdmissionLimits {
            max_in_flight_calls: 2,
            ..AdmissionLimits::default()
        });
        let now = Instant::now();
        let caller = agent("acme", "a_1");
        let first = admission.admit(&caller, now).unwrap();
        let _second = admission.admit(&caller, now).unwrap();
        let refused = admission.admit(&caller, now).unwrap_err();
        assert_eq!(limit_of(&refused), "limit: admission.max_in_flight_calls");
        assert_eq!(retry_after_ms(&refused), 50);
        drop(first);
        let _third = admission.admit(&caller, now).unwrap();
    }

    #[test]
    fn no_limit_set_admits_everything() {
        let admission = Admission::default();
        let now = Instant::now();
        let held: Vec<_> = (0..1000)
            .map(|_| admission.admit(&agent("acme", "a_1"), now).unwrap())
            .collect();
        assert_eq!(held.len(), 1000);
    }

    #[test]
    fn settings_out_of_range_are_named() {
        let limits = AdmissionLimits {
            calls_per_second_per_identity: -1.0,
            burst_per_organization: Some(0.5),
            ..AdmissionLimits::default()
        };
        assert_eq!(
            limits.problems(),
            [
                "admission.calls_per_second_per_identity must be a number of 0 or more",
                "admission.burst_per_organization must be at least 1 (one call)"
            ]
        );
        assert!(AdmissionLimits::default().problems().is_empty());
    }
}
