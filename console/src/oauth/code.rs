//! Authorization codes: signed, short-lived, bound to the client, the redirect URI and the PKCE
//! challenge, and redeemed once per gateway.

use crate::UiKey;
use crate::signing::random_text;
use agentprocess_gateway::auth::Identity;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;

/// What a code is signed for.
const CODE_PURPOSE: &str = "oauth code";
/// How long a code can be exchanged: one minute (RFC 6749 §4.1.2 recommends at most ten).
pub const CODE_TTL_SECONDS: u64 = 60;

/// What an authorization code says. It travels through the browser: signed, not encrypted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeGrant {
    /// The SHA-256 of the client id it was issued to.
    #[serde(rename = "c")]
    pub client: String,
    /// The redirect URI it was sent to.
    #[serde(rename = "r")]
    pub redirect_uri: String,
    /// The PKCE S256 challenge the verifier must meet.
    #[serde(rename = "p")]
    pub code_challenge: String,
    /// Who signed in and allowed the client.
    #[serde(rename = "i")]
    pub identity: Identity,
    /// The first second at which it no longer works.
    #[serde(rename = "e")]
    pub expires_at: u64,
    /// Random: tells codes apart, so each is redeemed once.
    #[serde(rename = "n")]
    pub nonce: String,
}

impl CodeGrant {
    /// A grant for `identity` to the client `client_id`, expiring [`CODE_TTL_SECONDS`] from now.
    pub fn new(
        client_id: &str,
        redirect_uri: &str,
        code_challenge: &str,
        identity: Identity,
        now_seconds: u64,
    ) -> CodeGrant {
        CodeGrant {
            client: client_fingerprint(client_id),
            redirect_uri: redirect_uri.to_owned(),
            code_challenge: code_challenge.to_owned(),
            identity,
            expires_at: now_seconds + CODE_TTL_SECONDS,
            nonce: random_text(16),
        }
    }

    /// The code: this grant, signed.
    pub fn code(&self, key: &UiKey) -> String {
        key.sign(
            CODE_PURPOSE,
            &serde_json::to_vec(self).expect("a grant serializes"),
        )
    }

    /// The grant a code carries, if the UI key signed it. Its expiry is not checked here.
    pub fn from_code(key: &UiKey, code: &str) -> Option<CodeGrant> {
        serde_json::from_slice(&key.open(CODE_PURPOSE, code)?).ok()
    }

    /// Whether this grant was issued to `client_id`.
    pub fn is_for_client(&self, client_id: &str) -> bool {
        self.client == client_fingerprint(client_id)
    }
}

fn client_fingerprint(client_id: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(client_id.as_bytes()))
}

/// Whether `verifier` meets the S256 `challenge` (RFC 7636 §4.6), and is a verifier at all:
/// 43 to 128 unreserved characters (§4.1).
pub fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    let well_formed = (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
    well_formed && URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes())) == challenge
}

/// Whether `challenge` looks like an S256 challenge: 43 base64url characters.
pub fn is_s256_challenge(challenge: &str) -> bool {
    challenge.len() == 43
        && challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

/// The codes this gateway redeemed that have not expired yet, so none is redeemed twice here.
/// Holds at most the codes of one [`CODE_TTL_SECONDS`]: expired ones are dropped as new ones come.
#[derive(Debug, Default)]
pub struct RedeemedCodes {
    nonces: Mutex<HashMap<String, u64>>,
}

impl RedeemedCodes {
    /// Records `grant` as redeemed at `now_seconds`; `false` when it was already.
    pub fn redeem(&self, grant: &CodeGrant, now_seconds: u64) -> bool {
        let mut nonces = self.nonces.lock().expect("never poisoned");
        nonces.retain(|_, expires_at| *expires_at > now_seconds);
        nonces.insert(grant.nonce.clone(), grant.expires_at).is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentprocess_gateway::auth::IdentityKind;

    fn grant(now: u64) -> CodeGrant {
        CodeGrant::new(
            "client-1",
            "http://127.0.0.1:5000/cb",
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
            Identity {
                organization: "acme".into(),
                kind: IdentityKind::Agent { id: "a".into() },
                operator: false,
            },
            now,
        )
    }

    /// RFC 7636 Appendix B's example verifier and challenge.
    #[test]
    fn pkce_s256_matches_the_rfc_example() {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert!(is_s256_challenge(challenge));
        assert!(pkce_matches(verifier, challenge));
        assert!(!pkce_matches(
            "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXK",
            challenge
        ));
        assert!(!pkce_matches(challenge, challenge));
        assert!(!pkce_matches("short", challenge));
    }

    #[test]
    fn a_code_carries_its_grant_and_names_its_client() {
        let key = UiKey::new([5; 32]);
        let grant = grant(1000);
        let code = grant.code(&key);
        let opened = CodeGrant::from_code(&key, &code).unwrap();
        assert_eq!(opened, grant);
        assert_eq!(opened.expires_at, 1000 + CODE_TTL_SECONDS);
        assert!(opened.is_for_client("client-1"));
        assert!(!opened.is_for_client("client-2"));
        assert_eq!(CodeGrant::from_code(&UiKey::new([6; 32]), &code), None);
    }

    /// RFC 6749 §4.1.2: a code is used once.
    #[test]
    fn a_code_is_redeemed_once() {
        let redeemed = RedeemedCodes::default();
        let first = grant(1000);
        assert!(redeemed.redeem(&first, 1001));
        assert!(!redeemed.redeem(&first, 1002));
        assert!(redeemed.redeem(&grant(1000), 1002), "another code");
        // Expired entries go as new ones come.
        assert!(redeemed.redeem(&grant(2000), 2000));
        assert_eq!(redeemed.nonces.lock().unwrap().len(), 1);
    }
}
