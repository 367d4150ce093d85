//! Claim tokens: `apt1.<runId>.<secret>`. The run id travels in the clear so a token routes to
//! its run without a lookup; the secret is 32 random bytes in hex, of which only the SHA-256 is
//! kept in run state.

use super::ctx::hex;
use super::state::TokenHash;
use sha2::{Digest, Sha256};

const PREFIX: &str = "apt1.";

/// Makes a token for `run_id` from a fresh secret; returns it with the hash to store.
pub fn mint(run_id: &str, secret: [u8; 32]) -> (String, TokenHash) {
    let token = format!("{PREFIX}{run_id}.{}", hex(&secret));
    (token, TokenHash(Sha256::digest(secret).into()))
}

/// The run id a token names, for routing; `None` when it is not a token at all.
pub fn run_id(token: &str) -> Option<&str> {
    parse(token).map(|(run_id, _)| run_id)
}

/// The run id and the hash of the secret of a well-formed token.
pub fn parse(token: &str) -> Option<(&str, TokenHash)> {
    let rest = token.strip_prefix(PREFIX)?;
    let (run_id, secret_hex) = rest.rsplit_once('.')?;
    if run_id.is_empty() || secret_hex.len() != 64 {
        return None;
    }
    let mut secret = [0u8; 32];
    for (i, byte) in secret.iter_mut().enumerate() {
        *byte = u8::from_str_radix(secret_hex.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some((run_id, TokenHash(Sha256::digest(secret).into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_carries_its_run_and_verifies_by_hash() {
        let (token, hash) = mint("r_1.x", [7; 32]);
        assert_eq!(run_id(&token), Some("r_1.x"));
        assert_eq!(parse(&token).unwrap().1, hash);
        assert!(parse("apt1.r_1.zz").is_none());
        assert!(parse("r_1.0707").is_none());
    }
}
