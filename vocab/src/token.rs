//! Claim tokens: `apt1.<runId>.<generation>.<secret>`. The run id travels in the clear so a token
//! routes to its run without a lookup; the generation numbers the tokens a run ever issued (one
//! per claim and per renew), so an old token is told apart from a forged one without keeping
//! every old hash; the secret is 32 random bytes in hex, of which only the SHA-256 is kept in run
//! state.

use crate::hex::hex;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// SHA-256 of a token's secret part. Stored as 64 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenHash(pub [u8; 32]);

impl Serialize for TokenHash {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&hex(&self.0))
    }
}

impl<'de> Deserialize<'de> for TokenHash {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let mut bytes = [0u8; 32];
        if text.len() != 64 || !text.is_ascii() {
            return Err(serde::de::Error::custom("a token hash is 64 hex digits"));
        }
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[i * 2..i * 2 + 2], 16)
                .map_err(|_| serde::de::Error::custom("a token hash is 64 hex digits"))?;
        }
        Ok(TokenHash(bytes))
    }
}

const PREFIX: &str = "apt1.";

/// A well-formed token, taken apart. Nothing here says the token verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed<'a> {
    pub run_id: &'a str,
    /// Which token of the run this claims to be; 0 is never issued by a run.
    pub generation: u64,
    pub hash: TokenHash,
}

/// Makes a token of generation 0 for `run_id` from a fresh secret; returns it with the hash to
/// store. Runs issue tokens through [`mint_at`]; generation 0 is never current on a run.
pub fn mint(run_id: &str, secret: [u8; 32]) -> (String, TokenHash) {
    mint_at(run_id, 0, secret)
}

/// Makes the token of `generation` for `run_id` from a fresh secret; returns it with the hash
/// to store.
pub fn mint_at(run_id: &str, generation: u64, secret: [u8; 32]) -> (String, TokenHash) {
    let token = format!("{PREFIX}{run_id}.{generation}.{}", hex(&secret));
    (token, TokenHash(Sha256::digest(secret).into()))
}

/// The run id a token names, for routing; `None` when it is not a token at all.
pub fn run_id(token: &str) -> Option<&str> {
    take_apart(token).map(|parsed| parsed.run_id)
}

/// The run id and the hash of the secret of a well-formed token.
pub fn parse(token: &str) -> Option<(&str, TokenHash)> {
    take_apart(token).map(|parsed| (parsed.run_id, parsed.hash))
}

/// Every part of a well-formed token.
pub fn take_apart(token: &str) -> Option<Parsed<'_>> {
    let rest = token.strip_prefix(PREFIX)?;
    let (rest, secret_hex) = rest.rsplit_once('.')?;
    let (run_id, generation) = rest.rsplit_once('.')?;
    if run_id.is_empty() || secret_hex.len() != 64 {
        return None;
    }
    if generation.is_empty() || !generation.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let generation = generation.parse().ok()?;
    let mut secret = [0u8; 32];
    for (i, byte) in secret.iter_mut().enumerate() {
        *byte = u8::from_str_radix(secret_hex.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(Parsed {
        run_id,
        generation,
        hash: TokenHash(Sha256::digest(secret).into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_carries_its_run_and_generation_and_verifies_by_hash() {
        let (token, hash) = mint_at("r_1.x", 7, [7; 32]);
        assert_eq!(run_id(&token), Some("r_1.x"));
        assert_eq!(parse(&token).unwrap().1, hash);
        assert_eq!(take_apart(&token).unwrap().generation, 7);
        assert_eq!(take_apart(&mint("r_2", [1; 32]).0).unwrap().generation, 0);
        assert!(parse("apt1.r_1.zz").is_none());
        assert!(
            parse(&format!("apt1.r_1.{}", "07".repeat(32))).is_none(),
            "no generation"
        );
        assert!(parse(&format!("apt1.r_1.x1.{}", "07".repeat(32))).is_none());
        assert!(parse("r_1.0707").is_none());
    }
}
