//! Run ids and where they route: a started run's id from its time and seed, the seed of a
//! `start_run`, and the routing key that places a run on a shard of a cluster.

use crate::Timestamp;
use crate::hex::hex;
use agentprocess_ids::{OrgId, RunId};
use sha2::{Digest, Sha256};

/// Derives fresh values from the command's seed, each distinct by a purpose and a counter.
#[derive(Debug)]
pub struct Fresh {
    seed: [u8; 32],
    counter: u64,
}

impl Fresh {
    pub fn new(seed: [u8; 32]) -> Self {
        Fresh { seed, counter: 0 }
    }

    pub fn bytes(&mut self, purpose: &str) -> [u8; 32] {
        self.counter += 1;
        let mut hasher = Sha256::new();
        hasher.update(self.seed);
        hasher.update(purpose.as_bytes());
        hasher.update(self.counter.to_be_bytes());
        hasher.finalize().into()
    }
}

/// The id of a run started at `started_at` by a command whose context carries `seed`: `r_`,
/// the start time in milliseconds as 11 hex digits, then 16 hex digits of the seed's fresh
/// value for purpose `run`.
///
/// The time comes first so that new runs sit together at the end of the store's key order:
/// a run's record and its updates share the last pages of the run table instead of landing on a
/// random page of a table that holds every run not yet archived. The part after the time is
/// fixed by the seed, which the runtime derives from the organization and the `requestId` for a
/// start, so every retry of one start names the same suffix (a retry at another millisecond gets
/// another time part; its idempotency record, keyed by `requestId`, still answers it).
pub fn start_run_id(seed: [u8; 32], started_at: Timestamp) -> RunId {
    let millis = u64::try_from(started_at.as_millis()).unwrap_or(0);
    RunId::from(format!("r_{millis:011x}{}", start_run_suffix(seed)))
}

/// The part of a started run's id after its time: 16 hex digits fixed by the seed.
fn start_run_suffix(seed: [u8; 32]) -> String {
    let mut suffix = hex(&Fresh::new(seed).bytes("run"));
    suffix.truncate(16);
    suffix
}

/// The seed of a `start_run`: derived from the organization and the `requestId`, so that every
/// retry names the same run id suffix (see [`start_run_id`]). A retry is answered from the
/// idempotency record, keyed by `requestId`, whichever run id its time part gives it.
pub fn start_seed(organization: &OrgId, request_id: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(b"agentprocess start_run\0");
    hasher.update(organization.as_str().as_bytes());
    hasher.update([0]);
    hasher.update(request_id.as_bytes());
    hasher.finalize().into()
}

/// What places a run on a shard of a cluster: the part of its id that does not depend on when
/// it started, so that every retry of one `start_run` (same organization, same `requestId`)
/// lands on the same shard, whatever millisecond each retry reaches the actor at. For an id of
/// [`start_run_id`]'s shape that is its last 16 hex digits; any other id is its own key.
pub fn run_routing_key(run_id: &str) -> &str {
    let shaped =
        run_id.len() == 29 && run_id.starts_with("r_") && run_id[2..].bytes().all(|b| b.is_ascii_hexdigit());
    if shaped { &run_id[13..] } else { run_id }
}

/// The routing key (see [`run_routing_key`]) of the run a `start_run` of `organization` with
/// `request_id` creates, known before the run exists.
pub fn start_routing_key(organization: &OrgId, request_id: &str) -> String {
    start_run_suffix(start_seed(organization, request_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_retry_of_a_start_names_the_same_run_id_suffix_and_routing_key() {
        let acme = OrgId::from("acme");
        let first = start_run_id(start_seed(&acme, "req-1"), Timestamp::from_millis(1_000));
        let retry = start_run_id(start_seed(&acme, "req-1"), Timestamp::from_millis(61_000));
        let other_request = start_run_id(start_seed(&acme, "req-2"), Timestamp::from_millis(1_000));
        let other_org = start_run_id(
            start_seed(&OrgId::from("globex"), "req-1"),
            Timestamp::from_millis(1_000),
        );
        assert_ne!(first, retry, "the time part moves with the clock");
        assert_eq!(run_routing_key(first.as_str()), run_routing_key(retry.as_str()));
        assert_eq!(run_routing_key(first.as_str()), start_routing_key(&acme, "req-1"));
        assert_eq!(run_routing_key(first.as_str()), &first.as_str()[13..]);
        assert_ne!(
            run_routing_key(first.as_str()),
            run_routing_key(other_request.as_str())
        );
        assert_ne!(
            run_routing_key(first.as_str()),
            run_routing_key(other_org.as_str())
        );
    }

    #[test]
    fn a_run_id_of_another_shape_is_its_own_routing_key() {
        for id in [
            "r_8f2",
            "run-1",
            "",
            "r_0000000000g0123456789abcdef",
            "x_00000000000123456789abcdef0",
        ] {
            assert_eq!(run_routing_key(id), id);
        }
    }

    #[test]
    fn a_run_id_is_its_start_time_then_sixteen_hex_digits_of_its_seed() {
        let id = start_run_id([3; 32], Timestamp::from_millis(1_796_000_000_123));
        let id = id.as_str();
        assert_eq!(id.len(), 2 + 11 + 16, "{id}");
        assert!(id.starts_with("r_1a2"), "{id}");
        assert_eq!(&id[2..13], format!("{:011x}", 1_796_000_000_123_u64));
        assert!(
            id[13..]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_eq!(&id[13..], &hex(&Fresh::new([3; 32]).bytes("run"))[..16]);
    }

    #[test]
    fn later_runs_sort_after_earlier_ones_whatever_their_seeds() {
        let mut ids: Vec<(i64, RunId)> = (0..200_i64)
            .map(|i| {
                let seed = [u8::try_from(i % 251).unwrap(); 32];
                (
                    1_700_000_000_000 + i * 997,
                    start_run_id(seed, Timestamp::from_millis(1_700_000_000_000 + i * 997)),
                )
            })
            .collect();
        ids.reverse();
        ids.sort_by(|a, b| a.1.as_str().cmp(b.1.as_str()));
        assert!(ids.windows(2).all(|pair| pair[0].0 < pair[1].0));
    }

    #[test]
    fn a_time_before_the_epoch_counts_as_the_epoch() {
        let id = start_run_id([5; 32], Timestamp::from_millis(-5));
        assert!(id.as_str().starts_with("r_00000000000"), "{}", id.as_str());
    }
}
