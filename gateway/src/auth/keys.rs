//! Verification keys: configured inline or in PEM files, or fetched from a JWKS URL and cached.
//!
//! Each key carries the one algorithm it verifies, fixed when the key is loaded. A token's `alg`
//! header only selects among keys of that algorithm; it never decides how a key is used. That is
//! what refuses algorithm confusion (an HS256 token "signed" with an RSA public key): no HMAC key
//! exists unless it is the dev key.

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// The asymmetric algorithms accepted from an identity provider. HMAC is only for the dev key.
pub const PROVIDER_ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// A key that verifies signatures of exactly one algorithm.
#[derive(Clone)]
pub struct VerifyKey {
    pub kid: Option<String>,
    pub algorithm: Algorithm,
    pub key: DecodingKey,
}

impl fmt::Debug for VerifyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifyKey")
            .field("kid", &self.kid)
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

impl VerifyKey {
    /// Whether this key may verify a token with these header values. A token without `kid`
    /// may be tried against every key of its algorithm.
    pub fn fits(&self, algorithm: Algorithm, kid: Option<&str>) -> bool {
        self.algorithm == algorithm && (kid.is_none() || self.kid.as_deref() == kid)
    }
}

/// A configured key that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("key file {path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("JWKS key {kid:?}: {message}")]
    Jwk { kid: Option<String>, message: String },
    #[error("JWKS document: {0}")]
    JwkSet(String),
    #[error("algorithm {0:?} is not accepted from an identity provider; use RS*, PS*, ES256, ES384 or EdDSA")]
    Algorithm(String),
}

/// Parses an algorithm name from configuration, refusing the symmetric ones.
pub fn provider_algorithm(name: &str) -> Result<Algorithm, KeyError> {
    name.parse::<Algorithm>()
        .ok()
        .filter(|algorithm| PROVIDER_ALGORITHMS.contains(algorithm))
        .ok_or_else(|| KeyError::Algorithm(name.to_owned()))
}

/// Loads a public key in PEM form for one algorithm.
pub fn key_from_pem(path: PathBuf, algorithm: Algorithm, kid: Option<String>) -> Result<VerifyKey, KeyError> {
    let fail = |message: String| KeyError::File {
        path: path.clone(),
        message,
    };
    let pem = std::fs::read(&path).map_err(|e| fail(e.to_string()))?;
    let key = match algorithm {
        Algorithm::ES256 | Algorithm::ES384 => DecodingKey::from_ec_pem(&pem),
        Algorithm::EdDSA => DecodingKey::from_ed_pem(&pem),
        _ => DecodingKey::from_rsa_pem(&pem),
    }
    .map_err(|e| fail(e.to_string()))?;
    Ok(VerifyKey { kid, algorithm, key })
}

/// The signature keys of a JWKS document. Keys marked for encryption are left out; a key of an
/// unsupported type is an error, so a misconfiguration shows at once.
pub fn keys_from_jwks(document: &serde_json::Value) -> Result<Vec<VerifyKey>, KeyError> {
    let set: JwkSet =
        serde_json::from_value(document.clone()).map_err(|e| KeyError::JwkSet(e.to_string()))?;
    set.keys
        .iter()
        .filter(|jwk| !matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)))
        .map(key_from_jwk)
        .collect()
}

fn key_from_jwk(jwk: &Jwk) -> Result<VerifyKey, KeyError> {
    let kid = jwk.common.key_id.clone();
    let fail = |message: String| KeyError::Jwk {
        kid: kid.clone(),
        message,
    };
    let algorithm = match jwk.common.key_algorithm {
        Some(named) => {
            let name = format!("{named:?}");
            if matches!(
                named,
                KeyAlgorithm::HS256 | KeyAlgorithm::HS384 | KeyAlgorithm::HS512
            ) {
                return Err(KeyError::Algorithm(name));
            }
            provider_algorithm(&name)?
        }
        None => match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => Algorithm::RS256,
            AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
                EllipticCurve::P256 => Algorithm::ES256,
                EllipticCurve::P384 => Algorithm::ES384,
                _ => return Err(fail("unsupported curve".into())),
            },
            AlgorithmParameters::OctetKeyPair(_) => Algorithm::EdDSA,
            _ => return Err(fail("not a public signature key".into())),
        },
    };
    if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
        return Err(fail(
            "symmetric keys are not accepted from an identity provider".into(),
        ));
    }
    let key = DecodingKey::from_jwk(jwk).map_err(|e| fail(e.to_string()))?;
    Ok(VerifyKey { kid, algorithm, key })
}

/// A JWKS URL's keys, fetched on first use and cached. A token with an unknown `kid` triggers a
/// refetch (key rotation), at most once per [`JwksCache::MIN_REFETCH`].
#[derive(Debug)]
pub struct JwksCache {
    url: reqwest::Url,
    client: reqwest::Client,
    cached: Mutex<Cached>,
}

#[derive(Debug, Default)]
struct Cached {
    keys: Arc<Vec<VerifyKey>>,
    fetched_at: Option<Instant>,
}

/// Keys from the identity provider that fit a token.
#[derive(Debug)]
pub struct FetchedKeys {
    pub keys: Vec<VerifyKey>,
    /// How long these keys are used before they are fetched again: zero for keys kept past their
    /// age because the provider is unreachable.
    pub fresh_for: Duration,
}

/// How long keys fetched at `fetched_at` are used before a refetch.
fn fresh_for(fetched_at: Option<Instant>) -> Duration {
    fetched_at.map_or(Duration::ZERO, |at| {
        JwksCache::MAX_AGE.saturating_sub(at.elapsed())
    })
}

/// The keys could not be fetched; tokens cannot be verified until they are.
#[derive(Debug, thiserror::Error)]
#[error("cannot fetch the identity provider's keys from {url}: {message}")]
pub struct FetchError {
    pub url: String,
    pub message: String,
}

impl JwksCache {
    /// Keys older than this are refetched before use.
    pub const MAX_AGE: Duration = Duration::from_secs(600);
    /// A refetch for an unknown `kid` happens at most this often.
    pub const MIN_REFETCH: Duration = Duration::from_secs(30);

    pub fn new(url: reqwest::Url) -> Result<Self, String> {
        // The TLS stack needs a process-wide crypto provider; another part of the process may
        // have installed one already, which is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(JwksCache {
            url,
            client,
            cached: Mutex::new(Cached::default()),
        })
    }

    /// The cached keys that fit the token's header, refetching when they are stale or none fits,
    /// and how long they are used before the next refetch.
    pub async fn keys_for(&self, algorithm: Algorithm, kid: Option<&str>) -> Result<FetchedKeys, FetchError> {
        let mut cached = self.cached.lock().await;
        let age = cached.fetched_at.map(|at| at.elapsed());
        let fitting = |keys: &[VerifyKey]| -> Vec<VerifyKey> {
            keys.iter()
                .filter(|key| key.fits(algorithm, kid))
                .cloned()
                .collect()
        };
        let found = fitting(&cached.keys);
        let stale = age.is_none_or(|age| age > Self::MAX_AGE);
        let may_refetch = age.is_none_or(|age| age > Self::MIN_REFETCH);
        if stale || (found.is_empty() && may_refetch) {
            match self.fetch().await {
                Ok(keys) => {
                    cached.keys = Arc::new(keys);
                    cached.fetched_at = Some(Instant::now());
                }
                // Keep using keys we have rather than refuse every caller while the provider
                // is briefly unreachable.
                Err(error) if !cached.keys.is_empty() => {
                    tracing::warn!(%error, "keeping the cached identity provider keys");
                }
                Err(error) => return Err(error),
            }
            return Ok(FetchedKeys {
                keys: fitting(&cached.keys),
                fresh_for: fresh_for(cached.fetched_at),
            });
        }
        Ok(FetchedKeys {
            keys: found,
            fresh_for: fresh_for(cached.fetched_at),
        })
    }

    async fn fetch(&self) -> Result<Vec<VerifyKey>, FetchError> {
        let fail = |message: String| FetchError {
            url: self.url.to_string(),
            message,
        };
        let response = self
            .client
            .get(self.url.clone())
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| fail(e.to_string()))?;
        let document: serde_json::Value = response.json().await.map_err(|e| fail(e.to_string()))?;
        keys_from_jwks(&document).map_err(|e| fail(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn symmetric_keys_are_refused_from_a_provider() {
        let oct = json!({ "keys": [ { "kty": "oct", "k": "c2VjcmV0", "kid": "s" } ] });
        assert!(keys_from_jwks(&oct).is_err());
        let named = json!({ "keys": [ { "kty": "oct", "k": "c2VjcmV0", "alg": "HS256" } ] });
        assert!(matches!(keys_from_jwks(&named), Err(KeyError::Algorithm(_))));
        for name in ["HS256", "HS512", "none", "rs256"] {
            assert!(provider_algorithm(name).is_err(), "{name}");
        }
        assert_eq!(provider_algorithm("EdDSA").unwrap(), Algorithm::EdDSA);
    }

    #[test]
    fn encryption_keys_are_left_out() {
        let set = json!({ "keys": [ {
            "kty": "EC", "crv": "P-256", "use": "enc", "kid": "e",
            "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
            "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"
        } ] });
        assert!(keys_from_jwks(&set).unwrap().is_empty());
        let mut signing = set.clone();
        signing["keys"][0]["use"] = json!("sig");
        let keys = keys_from_jwks(&signing).unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].algorithm, Algorithm::ES256);
        assert!(keys[0].fits(Algorithm::ES256, Some("e")));
        assert!(keys[0].fits(Algorithm::ES256, None));
        assert!(!keys[0].fits(Algorithm::HS256, Some("e")));
        assert!(!keys[0].fits(Algorithm::ES256, Some("other")));
    }
}
