//! Authentication: the gateway as an OAuth 2.1 resource server.
//!
//! A bearer JWT is verified for signature, issuer, audience (this server's resource URI) and
//! lifetime, and its claims become an [`Identity`]. The token stays here: only the identity moves
//! on. With no identity provider configured the gateway runs in dev mode and accepts tokens signed
//! with the local dev key (see [`dev`]).

pub mod dev;
mod http;
pub mod identity;
pub mod keys;
mod shape;
mod verified;

pub use http::{metadata_document, metadata_path, metadata_url, protected_resource_metadata, require_bearer};
pub use identity::{ClaimError, ClaimNames, Identity, IdentityKind, KindClaim};

pub use dev::DevKeyLocation;
use dev::{DEV_KEY_ID, DevKey, DevTokenRequest};
use jsonwebtoken::{Algorithm, Validation};
use keys::{JwksCache, KeyError, VerifyKey};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::path::PathBuf;
pub use verified::MAX_VERIFIED_TOKENS;
use verified::VerifiedTokens;

/// Seconds of clock skew allowed on `exp` and `nbf` unless configured.
pub const DEFAULT_LEEWAY_SECONDS: u64 = 60;

/// How callers are authenticated.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// The identity provider. `None` is dev mode: the local dev key, and nothing else.
    pub provider: Option<ProviderConfig>,
    /// Which claims give the identity.
    pub claims: ClaimNames,
    /// Seconds of clock skew allowed on `exp` and `nbf`: a token is accepted until this long
    /// after it expired, and from this long before its `nbf`. Default [`DEFAULT_LEEWAY_SECONDS`].
    pub leeway_seconds: Option<u64>,
}

/// An OAuth 2.1 authorization server whose access tokens this gateway accepts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The `iss` its tokens carry.
    pub issuer: String,
    /// Listed in the protected resource metadata. Default: the issuer alone.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// Where its signing keys are published (fetched, cached, refetched on rotation).
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// Signing keys given inline as a JWKS document.
    #[serde(default)]
    pub jwks: Option<Value>,
    /// Signing keys given as PEM public key files.
    #[serde(default)]
    pub key_files: Vec<KeyFile>,
    /// Scopes listed in the protected resource metadata. None are required by the gateway.
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// The web UI's client at the provider: with it, people sign in to `/ui` through the
    /// provider (OpenID Connect, authorization code with PKCE). Without it, only bearer tokens.
    #[serde(default)]
    pub client_id: Option<String>,
    /// The client's secret, for a confidential client; none for a public one.
    #[serde(default)]
    pub client_secret: Option<String>,
    /// The redirect URI registered with the provider. Default `{public_url}/ui/sign-in/callback`.
    #[serde(default)]
    pub redirect_url: Option<String>,
    /// The scopes the sign-in asks for. Default `openid`.
    #[serde(default)]
    pub sign_in_scopes: Vec<String>,
}

/// A PEM public key and the one algorithm it verifies.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyFile {
    pub path: PathBuf,
    /// `RS256`, `ES256`, `EdDSA`, ...
    pub algorithm: String,
    #[serde(default)]
    pub kid: Option<String>,
}

/// Configuration that cannot work. Reported at start, never per request.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("identity provider {issuer}: no keys: set jwks_url, jwks or key_files")]
    NoKeys { issuer: String },
    #[error("identity provider {issuer}: jwks_url {url:?}: {message}")]
    JwksUrl {
        issuer: String,
        url: String,
        message: String,
    },
    #[error("dev signing key: {0}")]
    DevKey(std::io::Error),
    #[error("cannot record the server's URL beside the dev signing key: {0}")]
    DevServerUrl(std::io::Error),
}

/// Why a request was not authenticated. The HTTP layer turns this into a 401 (or a 503).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No bearer token at all: a 401 without an `error` attribute (RFC 6750 §3.1).
    #[error("a bearer token is required")]
    Missing,
    /// A token that does not verify or does not make an identity: `invalid_token`.
    #[error("{0}")]
    InvalidToken(String),
    /// The provider's keys cannot be fetched, so no token can be checked right now.
    #[error(transparent)]
    KeysUnavailable(#[from] keys::FetchError),
}

/// Where the keys that verify tokens come from.
#[derive(Debug)]
enum Keys {
    Fixed(Vec<VerifyKey>),
    Jwks { fixed: Vec<VerifyKey>, cache: JwksCache },
}

/// Verifies bearer tokens and reads identities from them. Built once at start.
#[derive(Debug)]
pub struct Authenticator {
    resource: String,
    issuer: String,
    authorization_servers: Vec<String>,
    scopes_supported: Vec<String>,
    keys: Keys,
    claims: ClaimNames,
    leeway_seconds: u64,
    /// Dev mode: where the key that signs the accepted tokens lives, named in refusals so the
    /// caller knows which `agentprocess token` command mints a token this server takes.
    dev_key: Option<DevKeyLocation>,
    /// Dev mode: the key itself, which mints the tokens of dev sign-in.
    dev_minter: Option<DevKey>,
    /// Tokens verified before, with their identities, until they stop being valid.
    verified: VerifiedTokens,
}

impl Authenticator {
    /// Builds the authenticator for the server whose resource URI is `resource`. In dev mode the
    /// dev key is read from (or created at) `dev_key` and `resource` is also the issuer; a key in
    /// a data folder gets `resource` recorded beside it for `agentprocess token` to find.
    pub fn new(
        config: &AuthConfig,
        resource: &str,
        dev_key: &DevKeyLocation,
    ) -> Result<Self, AuthConfigError> {
        let leeway_seconds = config.leeway_seconds.unwrap_or(DEFAULT_LEEWAY_SECONDS);
        let Some(provider) = &config.provider else {
            let key = match dev_key {
                DevKeyLocation::DataDir(data_dir) => {
                    let key = DevKey::load_or_create(data_dir).map_err(AuthConfigError::DevKey)?;
                    dev::record_server_url(data_dir, resource).map_err(AuthConfigError::DevServerUrl)?;
                    key
                }
                DevKeyLocation::File(path) => {
                    DevKey::load_or_create_file(path).map_err(AuthConfigError::DevKey)?
                }
            };
            let verify = VerifyKey {
                kid: Some(DEV_KEY_ID.to_owned()),
                algorithm: Algorithm::HS256,
                key: key.decoding_key(),
            };
            // In dev mode the server is its own authorization server (the dev sign-in).
            return Ok(Authenticator {
                resource: resource.to_owned(),
                issuer: resource.to_owned(),
                authorization_servers: vec![resource.to_owned()],
                scopes_supported: Vec::new(),
                keys: Keys::Fixed(vec![verify]),
                claims: config.claims.clone(),
                leeway_seconds,
                dev_key: Some(dev_key.clone()),
                dev_minter: Some(key),
                verified: VerifiedTokens::new(MAX_VERIFIED_TOKENS),
            });
        };
        let mut fixed = Vec::new();
        if let Some(document) = &provider.jwks {
            fixed.extend(keys::keys_from_jwks(document)?);
        }
        for file in &provider.key_files {
            let algorithm = keys::provider_algorithm(&file.algorithm)?;
            fixed.push(keys::key_from_pem(
                file.path.clone(),
                algorithm,
                file.kid.clone(),
            )?);
        }
        let keys = match &provider.jwks_url {
            Some(url) => {
                let fail = |message: String| AuthConfigError::JwksUrl {
                    issuer: provider.issuer.clone(),
                    url: url.clone(),
                    message,
                };
                let parsed = reqwest::Url::parse(url).map_err(|e| fail(e.to_string()))?;
                Keys::Jwks {
                    fixed,
                    cache: JwksCache::new(parsed).map_err(fail)?,
                }
            }
            None if fixed.is_empty() => {
                return Err(AuthConfigError::NoKeys {
                    issuer: provider.issuer.clone(),
                });
            }
            None => Keys::Fixed(fixed),
        };
        let authorization_servers = if provider.authorization_servers.is_empty() {
            vec![provider.issuer.clone()]
        } else {
            provider.authorization_servers.clone()
        };
        Ok(Authenticator {
            resource: resource.to_owned(),
            issuer: provider.issuer.clone(),
            authorization_servers,
            scopes_supported: provider.scopes_supported.clone(),
            keys,
            claims: config.claims.clone(),
            leeway_seconds,
            dev_key: None,
            dev_minter: None,
            verified: VerifiedTokens::new(MAX_VERIFIED_TOKENS),
        })
    }

    /// This server's resource URI: the audience tokens must name.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The issuer whose tokens this server accepts: the identity provider, or in dev mode this
    /// server itself.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Whether this is dev mode: no identity provider, tokens signed with the dev key.
    pub fn is_dev(&self) -> bool {
        self.dev_minter.is_some()
    }

    /// In dev mode, a token for `request` that this server (and every gateway sharing its dev
    /// key and public URL) accepts; `None` with an identity provider.
    pub fn mint_dev(&self, request: &DevTokenRequest) -> Option<String> {
        self.dev_minter
            .as_ref()
            .map(|key| key.mint(&self.resource, request))
    }

    /// Verifies `token` and reads the caller's identity from it. A token verified before gives
    /// the same identity without a second check while it would still verify (see [`verified`]).
    pub async fn authenticate(&self, token: &str) -> Result<Identity, AuthError> {
        let now = jsonwebtoken::get_current_timestamp();
        if let Some(identity) = self.verified.get(token, now) {
            return Ok(identity);
        }
        let invalid = |message: String| AuthError::InvalidToken(message);
        // `alg: none`, unknown algorithms and anything that is not a JWT stop here.
        if let Some(malformed) = shape::malformed(token) {
            return Err(invalid(malformed.to_string()));
        }
        let header = jsonwebtoken::decode_header(token).map_err(|e| {
            invalid(format!(
                "the bearer token's header cannot be read: {}",
                describe_jwt_error(&e)
            ))
        })?;
        // Keys given in the configuration stay for the life of the process; keys fetched from
        // the provider only until their next refetch.
        let (candidates, keys_fresh_for) = match &self.keys {
            Keys::Fixed(keys) => (fitting(keys, header.alg, header.kid.as_deref()), None),
            Keys::Jwks { fixed, cache } => {
                let candidates = fitting(fixed, header.alg, header.kid.as_deref());
                if candidates.is_empty() {
                    let fetched = cache.keys_for(header.alg, header.kid.as_deref()).await?;
                    (fetched.keys, Some(fetched.fresh_for))
                } else {
                    (candidates, None)
                }
            }
        };
        if candidates.is_empty() {
            return Err(invalid(format!(
                "no key of this server verifies {:?} tokens{}: {}",
                header.alg,
                header
                    .kid
                    .map(|kid| format!(" with kid {kid:?}"))
                    .unwrap_or_default(),
                self.where_tokens_come_from()
            )));
        }
        let mut last_error = None;
        for key in &candidates {
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &self.validation(key.algorithm))
            {
                Ok(data) => {
                    let identity = self
                        .claims
                        .identity(&data.claims)
                        .map_err(|e| invalid(e.to_string()))?;
                    let exp = data.claims.get("exp").and_then(Value::as_u64);
                    if let Some(until) =
                        verified::remember_until(exp, self.leeway_seconds, now, keys_fresh_for)
                    {
                        self.verified.insert(token, identity.clone(), until, now);
                    }
                    return Ok(identity);
                }
                Err(error) => last_error = Some(error),
            }
        }
        let error = last_error.expect("at least one key was tried");
        Err(invalid(self.describe_refusal(&error, token)))
    }

    /// A token refusal in words a caller can act on: what was expected, and where a token that
    /// meets it comes from. Claims are quoted only for refusals found after the signature
    /// verified (expiry, issuer, audience), so they are the issuer's words, not a forger's; the
    /// token itself is never echoed.
    fn describe_refusal(&self, error: &jsonwebtoken::errors::Error, token: &str) -> String {
        use jsonwebtoken::errors::ErrorKind;
        let claims = || {
            jsonwebtoken::dangerous::insecure_decode_claims::<Map<String, Value>>(token).unwrap_or_default()
        };
        let seconds_from_now = |claim: &str| {
            let now = i64::try_from(jsonwebtoken::get_current_timestamp()).unwrap_or(i64::MAX);
            claims().get(claim).and_then(Value::as_i64).map(|at| at - now)
        };
        let remedy = self.where_tokens_come_from();
        let leeway = self.leeway_seconds;
        match error.kind() {
            ErrorKind::ExpiredSignature => {
                let ago = seconds_from_now("exp")
                    .map(|s| format!(" {} s ago", -s))
                    .unwrap_or_default();
                format!("the token expired{ago}, beyond the {leeway} s allowed for clock skew: {remedy}")
            }
            ErrorKind::ImmatureSignature => {
                let until = seconds_from_now("nbf")
                    .map(|s| format!(" for another {s} s"))
                    .unwrap_or_default();
                format!(
                    "the token is not valid yet (nbf){until}, beyond the {leeway} s allowed for clock \
                     skew: check the clocks of the machine that minted it and of this server"
                )
            }
            // In dev mode the issuer is the server's own URL: a token for another server.
            ErrorKind::InvalidIssuer if self.dev_key.is_some() => format!(
                "the token was minted for {}, not for this server, {}: {remedy}",
                claim_text(&claims(), "iss"),
                self.resource
            ),
            ErrorKind::InvalidIssuer => format!(
                "the token was issued by {}, not by {}, whose tokens this server accepts: {remedy}",
                claim_text(&claims(), "iss"),
                self.issuer
            ),
            ErrorKind::InvalidAudience => format!(
                "the token is for {} (aud), not for this server, {}: {remedy}",
                claim_text(&claims(), "aud"),
                self.resource
            ),
            ErrorKind::InvalidSignature => format!(
                "the token's signature does not verify with {}: {remedy}",
                match &self.dev_key {
                    Some(location) => format!("this server's dev key ({})", location.key_path().display()),
                    None => format!("the keys of {}", self.issuer),
                }
            ),
            _ => describe_jwt_error(error),
        }
    }

    /// Where a token this server accepts comes from: in dev mode the exact `agentprocess token`
    /// command, else the identity provider and the audience to ask it for.
    fn where_tokens_come_from(&self) -> String {
        match &self.dev_key {
            Some(location) => format!(
                "this server is in dev mode; mint a token with `agentprocess token {} --url {} ...`",
                location.token_flag(),
                self.resource
            ),
            None => format!(
                "get a token from the identity provider {} with audience {}",
                self.issuer, self.resource
            ),
        }
    }

    /// The checks every token passes. Bound to the KEY's algorithm, never the token's say-so.
    fn validation(&self, algorithm: Algorithm) -> Validation {
        let mut validation = Validation::new(algorithm);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = self.leeway_seconds;
        validation
    }
}

fn fitting(keys: &[VerifyKey], algorithm: Algorithm, kid: Option<&str>) -> Vec<VerifyKey> {
    keys.iter()
        .filter(|key| key.fits(algorithm, kid))
        .cloned()
        .collect()
}

/// A claim's value for a message: a string as it is, anything else as JSON, absence said so.
fn claim_text(claims: &Map<String, Value>, claim: &str) -> String {
    match claims.get(claim) {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => "nothing".to_owned(),
    }
}

/// A token refusal in words a caller can act on, without echoing the token.
fn describe_jwt_error(error: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match error.kind() {
        ErrorKind::ExpiredSignature => "the token has expired".into(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        ErrorKind::InvalidIssuer => "the token's issuer is not accepted here".into(),
        ErrorKind::InvalidAudience => "the token is not for this server (aud)".into(),
        ErrorKind::InvalidSignature => "the token's signature does not verify".into(),
        ErrorKind::InvalidAlgorithm => "the token's algorithm does not match the key".into(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no {claim:?} claim"),
        ErrorKind::InvalidClaimFormat(claim) => format!("the token's {claim:?} claim has the wrong type"),
        ErrorKind::InvalidToken => {
            "the token is not a JWT: expected three base64url parts separated by dots".into()
        }
        ErrorKind::Base64(_) => "a part of the token is not base64url".into(),
        ErrorKind::Json(_) | ErrorKind::Utf8(_) => "a part of the token is not the JSON a JWT holds".into(),
        // Every other kind is about this server's keys, not the caller's token: never the
        // library's own names for them.
        _ => "the token does not verify with the keys of this server".into(),
    }
}
