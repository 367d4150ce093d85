//! Which shard a run belongs to, and which live host should own a shard: pure functions.
//!
//! Both are hashes that every process computes alike, with no coordination: a gateway routes a
//! call, and an actor host decides which shards to take, from nothing but a routing key (the
//! `runId`) and the list of live host ids.

use sha2::{Digest, Sha256};

/// The number of shards of a cluster unless it was created with another. Fixed for the
/// cluster's lifetime: runs never move between shards, only shards between hosts.
pub const DEFAULT_SHARDS: u32 = 256;

/// The shard of `routing_key` among `shards`: the first 8 bytes of the key's SHA-256 read as a
/// big-endian `u64`, modulo `shards`.
///
/// STABLE FOREVER: every run stored in a cluster was placed by this function. Changing it (or
/// the shard count of a live cluster) moves runs to shards whose owners do not have them.
///
/// Panics when `shards` is 0.
pub fn shard_of(routing_key: &str, shards: u32) -> u32 {
    assert!(shards > 0, "a cluster has at least one shard");
    let digest = Sha256::digest(routing_key.as_bytes());
    let shard = first_u64(&digest) % u64::from(shards);
    u32::try_from(shard).expect("a remainder modulo a u32 fits in a u32")
}

/// The host that should own `shard` among `hosts` (live host ids), by rendezvous hashing: the
/// host with the highest score, the first 8 bytes (big-endian) of
/// SHA-256(host id, a `0` byte, shard as a big-endian `u32`); equal scores go to the smaller
/// host id. `None` when `hosts` is empty.
///
/// Each host's score for a shard does not depend on the other hosts, so a host that joins
/// takes only the shards it now wins (about 1/n of them with n hosts), and a host that leaves
/// gives up only its own: every other shard keeps its owner. The order of `hosts` does not
/// matter.
pub fn rendezvous_owner(shard: u32, hosts: &[String]) -> Option<&str> {
    hosts
        .iter()
        .map(|host| (score(shard, host), host))
        .max_by(|(score_a, host_a), (score_b, host_b)| score_a.cmp(score_b).then_with(|| host_b.cmp(host_a)))
        .map(|(_, host)| host.as_str())
}

/// A host's rendezvous score for a shard.
fn score(shard: u32, host: &str) -> u64 {
    let digest = Sha256::new()
        .chain_update(host.as_bytes())
        .chain_update([0u8])
        .chain_update(shard.to_be_bytes())
        .finalize();
    first_u64(&digest)
}

fn first_u64(digest: &[u8]) -> u64 {
    let first: [u8; 8] = digest[..8].try_into().expect("SHA-256 is 32 bytes");
    u64::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|id| id.to_string()).collect()
    }

    fn owners(hosts: &[String]) -> Vec<String> {
        (0..DEFAULT_SHARDS)
            .map(|shard| rendezvous_owner(shard, hosts).expect("a host").to_string())
            .collect()
    }

    /// The placement of runs may never change: these values pin the hash, byte order and all.
    #[test]
    fn shard_of_is_pinned_to_sha256_big_endian_modulo() {
        // SHA-256("") = e3b0c44298fc1c14...; 0xe3b0c44298fc1c14 % 256 = 0x14.
        assert_eq!(shard_of("", 256), 0x14);
        assert_eq!(shard_of("", 1), 0);
        assert_eq!(shard_of("", 1000), (0xe3b0_c442_98fc_1c14_u64 % 1000) as u32);
        // SHA-256("abc") = ba7816bf8f01cfea...
        assert_eq!(shard_of("abc", 256), 0xea);
        assert_eq!(shard_of("abc", 7), (0xba78_16bf_8f01_cfea_u64 % 7) as u32);
    }

    #[test]
    fn shard_of_spreads_run_ids_over_every_shard() {
        let mut counts = vec![0u32; DEFAULT_SHARDS as usize];
        for i in 0..25_600 {
            counts[shard_of(&format!("run-{i}"), DEFAULT_SHARDS) as usize] += 1;
        }
        // 100 expected per shard; a fair hash stays well inside these bounds.
        assert!(counts.iter().all(|&n| (50..=160).contains(&n)), "{counts:?}");
    }

    #[test]
    fn rendezvous_owner_is_deterministic_and_ignores_host_order() {
        let forward = hosts(&["actor-a", "actor-b", "actor-c"]);
        let backward = hosts(&["actor-c", "actor-b", "actor-a"]);
        assert_eq!(owners(&forward), owners(&forward));
        assert_eq!(owners(&forward), owners(&backward));
        assert_eq!(rendezvous_owner(3, &[]), None);
        assert_eq!(rendezvous_owner(3, &hosts(&["only"])), Some("only"));
        // Every host wins some shards.
        let placed = owners(&forward);
        for host in &forward {
            assert!(placed.contains(host), "{host} owns nothing");
        }
    }

    #[test]
    fn equal_scores_go_to_the_smaller_host_id() {
        // The same id twice scores the same: the tie-break must still pick one, the same one.
        let twice = hosts(&["b", "b"]);
        assert_eq!(rendezvous_owner(0, &twice), Some("b"));
    }

    #[test]
    fn a_joining_host_takes_only_the_shards_it_wins_about_one_in_n() {
        let before = hosts(&["actor-a", "actor-b", "actor-c"]);
        let mut after = before.clone();
        after.push("actor-d".to_string());
        let (old, new) = (owners(&before), owners(&after));
        let mut moved = 0;
        for shard in 0..DEFAULT_SHARDS as usize {
            if old[shard] != new[shard] {
                assert_eq!(new[shard], "actor-d", "shard {shard} moved between old hosts");
                moved += 1;
            }
        }
        // 1/4 of 256 is 64.
        assert!((40..=90).contains(&moved), "{moved} shards moved");
    }

    #[test]
    fn a_leaving_host_gives_up_only_its_own_shards() {
        let before = hosts(&["actor-a", "actor-b", "actor-c", "actor-d"]);
        let after = hosts(&["actor-a", "actor-b", "actor-d"]);
        let (old, new) = (owners(&before), owners(&after));
        for shard in 0..DEFAULT_SHARDS as usize {
            if old[shard] == "actor-c" {
                assert_ne!(new[shard], "actor-c");
            } else {
                assert_eq!(new[shard], old[shard], "shard {shard} moved without reason");
            }
        }
    }
}
