//! File evidence over HTTP: short-lived signed URLs added to every `file` evidence item in tool
//! results, and `GET /files/{link}` that serves the uploaded bytes behind them (spec §5).
//!
//! A link is base64url of `version ‖ expiry ‖ organization ‖ upload id ‖ HMAC-SHA256` under a
//! key every gateway of a deployment shares. The link is the capability: it is handed only to
//! callers who may read the run (members of its organization), names exactly one upload of one
//! organization, and stops working when it expires. Nothing in it can be changed without the key.
//!
//! Wiring: [`FileUrlSigner::from_config`] at startup; [`file_routes`] merged into the gateway's
//! router; [`add_file_urls`] applied to the `data` of every successful tool result, with the
//! caller's organization and the runtime clock's `now`.

use crate::respond::HttpFailure;
use agentprocess_org::{Clock, Uploads};
use agentprocess_service::{OrgId, Timestamp};
use axum::Router;
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use serde::Deserialize;
use serde_json::Value;
use sha2::Sha256;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The signing key's file name inside the data folder, when the config gives no key.
pub const FILE_URL_KEY_FILE: &str = "file-url-key";
/// How long a signed URL works when the config does not say: five minutes.
pub const DEFAULT_FILE_URL_TTL_SECONDS: u64 = 300;
/// The longest lifetime a signed URL may be given: a day. These links are meant to be short-lived.
pub const MAX_FILE_URL_TTL_SECONDS: u64 = 86_400;
/// The route [`file_routes`] serves; a signed URL is `{public_url}/files/{link}`.
pub const FILES_ROUTE: &str = "/files/{link}";

/// Bytes of randomness in a generated key, and the fewest a configured key may have.
const KEY_BYTES: usize = 32;
/// The first byte of every link: the layout below. A new layout takes a new number.
const LINK_VERSION: u8 = 1;
/// Bytes of the MAC at the end of a link.
const MAC_BYTES: usize = 32;
/// Version, expiry (u64 seconds) and organization length (u32), before the organization.
const HEADER_BYTES: usize = 1 + 8 + 4;
/// Signed in front of every link, so that the key signs nothing else by accident.
const MAC_CONTEXT: &[u8] = b"agentprocess file url\0";
/// Signed URLs expire on whole multiples of this many seconds (of the TTL when it is shorter).
pub const EXPIRY_STEP_SECONDS: u64 = 60;

/// How file URLs are signed. Every gateway serving one deployment needs the same key.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileUrlConfig {
    /// The signing key: at least 32 random bytes in hex. `None`: a key in the data folder
    /// ([`FILE_URL_KEY_FILE`]), created on first start, which suits a single gateway.
    pub key: Option<String>,
    /// Seconds a signed URL works, 1 to [`MAX_FILE_URL_TTL_SECONDS`]. Default 300.
    pub ttl_seconds: u64,
}

impl Default for FileUrlConfig {
    fn default() -> Self {
        FileUrlConfig {
            key: None,
            ttl_seconds: DEFAULT_FILE_URL_TTL_SECONDS,
        }
    }
}

/// A file URL configuration the gateway cannot start with.
#[derive(Debug, thiserror::Error)]
pub enum FileUrlConfigError {
    #[error("the file URL key is not usable: give at least {KEY_BYTES} random bytes in hex ({} hex digits)", KEY_BYTES * 2)]
    Key,
    #[error("file URLs must live between 1 and {MAX_FILE_URL_TTL_SECONDS} seconds, not {0}")]
    Ttl(u64),
    #[error("the file URL key file: {0}")]
    KeyFile(#[source] std::io::Error),
}

/// Signs and checks file URLs. Never prints its key.
pub struct FileUrlSigner {
    key: Vec<u8>,
    ttl_seconds: u64,
}

impl fmt::Debug for FileUrlSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileUrlSigner")
            .field("ttl_seconds", &self.ttl_seconds)
            .finish_non_exhaustive()
    }
}

/// What a valid link names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedFile {
    pub organization: OrgId,
    pub upload_id: String,
    /// The first instant at which the link no longer works.
    pub expires_at: Timestamp,
}

/// Why a link does not open a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileUrlError {
    /// Not a link this server makes: bad base64url, too short, or an unknown layout.
    #[error("not a file link")]
    Malformed,
    /// The MAC does not match: changed, or signed with another key.
    #[error("the file link's signature does not match")]
    BadSignature,
    #[error("the file link expired at {}", .expired_at.to_rfc3339())]
    Expired { expired_at: Timestamp },
}

impl FileUrlSigner {
    /// A signer with `key` (at least 32 bytes) whose URLs live `ttl` (whole seconds, 1 s to a day).
    pub fn new(key: &[u8], ttl: Duration) -> Result<Self, FileUrlConfigError> {
        if key.len() < KEY_BYTES {
            return Err(FileUrlConfigError::Key);
        }
        let ttl_seconds = ttl.as_secs();
        if !(1..=MAX_FILE_URL_TTL_SECONDS).contains(&ttl_seconds) || ttl.subsec_nanos() != 0 {
            return Err(FileUrlConfigError::Ttl(ttl_seconds));
        }
        Ok(FileUrlSigner {
            key: key.to_vec(),
            ttl_seconds,
        })
    }

    /// A signer with the key kept in `data_dir` ([`FILE_URL_KEY_FILE`], mode 0600), created with
    /// 32 random bytes on first use.
    pub fn load_or_create(data_dir: &Path, ttl: Duration) -> Result<Self, FileUrlConfigError> {
        let key = crate::secret_file::load_or_create(
            &data_dir.join(FILE_URL_KEY_FILE),
            KEY_BYTES,
            "a file URL signing key",
        )
        .map_err(FileUrlConfigError::KeyFile)?;
        Self::new(&key, ttl)
    }

    /// The signer `config` describes: its key when it gives one, else the data folder's.
    pub fn from_config(config: &FileUrlConfig, data_dir: &Path) -> Result<Self, FileUrlConfigError> {
        let ttl = Duration::from_secs(config.ttl_seconds);
        match &config.key {
            Some(text) => {
                let key = crate::secret_file::parse_hex(text, KEY_BYTES).ok_or(FileUrlConfigError::Key)?;
                Self::new(&key, ttl)
            }
            None => Self::load_or_create(data_dir, ttl),
        }
    }

    /// A key for another use, derived from this signer's key (HMAC-SHA256 of `purpose`), so that
    /// the gateways sharing the file URL key share it too without a second secret to hand out.
    /// Nothing signed with it passes as a file link, nor the other way round.
    pub fn derive_key(&self, purpose: &str) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key).expect("HMAC takes any key");
        mac.update(b"agentprocess derived key\0");
        mac.update(purpose.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// How long a URL signed now works.
    pub fn ttl(&self) -> Duration {
        Duration::from_secs(self.ttl_seconds)
    }

    /// An absolute URL under `public_url` that serves upload `upload_id` of `organization` until
    /// `now` plus the TTL, rounded up to the next [`EXPIRY_STEP_SECONDS`] (or TTL, if shorter):
    /// `{public_url}/files/{link}`. The rounding makes every rendering of one answer within a step
    /// the same URL, so a replayed result carries the links of the original.
    pub fn sign(&self, public_url: &str, organization: &str, upload_id: &str, now: Timestamp) -> String {
        let earliest = u64::try_from(now.as_millis().div_euclid(1000))
            .unwrap_or(0)
            .saturating_add(self.ttl_seconds);
        let step = self.ttl_seconds.min(EXPIRY_STEP_SECONDS);
        let expires = earliest.div_ceil(step).saturating_mul(step);
        format!(
            "{}/files/{}",
            public_url.trim_end_matches('/'),
            self.link(organization, upload_id, expires)
        )
    }

    fn link(&self, organization: &str, upload_id: &str, expires_seconds: u64) -> String {
        let organization_length =
            u32::try_from(organization.len()).expect("an organization name is shorter than 4 GiB");
        let mut bytes = Vec::with_capacity(HEADER_BYTES + organization.len() + upload_id.len() + MAC_BYTES);
        bytes.push(LINK_VERSION);
        bytes.extend_from_slice(&expires_seconds.to_be_bytes());
        bytes.extend_from_slice(&organization_length.to_be_bytes());
        bytes.extend_from_slice(organization.as_bytes());
        bytes.extend_from_slice(upload_id.as_bytes());
        let mac = self.mac(&bytes).finalize().into_bytes();
        bytes.extend_from_slice(&mac);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    fn mac(&self, signed: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key).expect("HMAC takes any key");
        mac.update(MAC_CONTEXT);
        mac.update(signed);
        mac
    }

    /// What `link` (the last path segment of a signed URL) names, if it was signed with this
    /// key, is unchanged, and has not expired at `now`. The MAC is checked in constant time and
    /// before anything else in the link is believed.
    pub fn verify(&self, link: &str, now: Timestamp) -> Result<SignedFile, FileUrlError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(link)
            .map_err(|_| FileUrlError::Malformed)?;
        if bytes.len() < HEADER_BYTES + MAC_BYTES || bytes[0] != LINK_VERSION {
            return Err(FileUrlError::Malformed);
        }
        let (signed, mac) = bytes.split_at(bytes.len() - MAC_BYTES);
        self.mac(signed)
            .verify_slice(mac)
            .map_err(|_| FileUrlError::BadSignature)?;
        let expires_seconds = u64::from_be_bytes(signed[1..9].try_into().expect("eight bytes"));
        let organization_length =
            u32::from_be_bytes(signed[9..HEADER_BYTES].try_into().expect("four bytes")) as usize;
        let names = &signed[HEADER_BYTES..];
        if names.len() < organization_length {
            return Err(FileUrlError::Malformed);
        }
        let (organization, upload_id) = names.split_at(organization_length);
        let (Ok(organization), Ok(upload_id)) =
            (std::str::from_utf8(organization), std::str::from_utf8(upload_id))
        else {
            return Err(FileUrlError::Malformed);
        };
        let expires_at = Timestamp::from_millis(0).plus_seconds(expires_seconds);
        if now >= expires_at {
            return Err(FileUrlError::Expired {
                expired_at: expires_at,
            });
        }
        Ok(SignedFile {
            organization: OrgId::from(organization),
            upload_id: upload_id.to_owned(),
            expires_at,
        })
    }
}

/// Adds a signed `url` to every `file` evidence item in `data`, the `data` of a successful tool
/// result returned to a caller of `organization`, and leaves everything else as it is.
///
/// File evidence items sit exactly where the protocol's schemas put them, and nowhere else is
/// touched (run inputs and step outputs may hold look-alikes that are plain values):
///
/// - run data (`data` of the run view and of `claim`): `steps.<id>.evidence[]` and
///   `steps.<id>.history[].evidence[]`;
/// - work items (`workItems[]` of the run view, `items[].workItem` of a person's `get_work`):
///   `escalation.candidate.evidence[]`, the submission a check was unsure of.
///
/// A work item's own `evidence` is the list of required kinds, not items, and stays as it is.
/// Pure: `now` comes in, so the same arguments give the same URLs.
pub fn add_file_urls(
    data: &mut Value,
    organization: &str,
    signer: &FileUrlSigner,
    public_url: &str,
    now: Timestamp,
) {
    let signing = Signing {
        organization,
        signer,
        public_url,
        now,
    };
    if let Some(run_data) = data.get_mut("data") {
        signing.in_run_data(run_data);
    }
    if let Some(Value::Array(work_items)) = data.get_mut("workItems") {
        work_items.iter_mut().for_each(|item| signing.in_work_item(item));
    }
    if let Some(Value::Array(items)) = data.get_mut("items") {
        for item in items {
            if let Some(work_item) = item.get_mut("workItem") {
                signing.in_work_item(work_item);
            }
        }
    }
}

/// One caller's signing of the file items in one result.
struct Signing<'a> {
    organization: &'a str,
    signer: &'a FileUrlSigner,
    public_url: &'a str,
    now: Timestamp,
}

impl Signing<'_> {
    fn in_run_data(&self, run_data: &mut Value) {
        let Some(Value::Object(steps)) = run_data.get_mut("steps") else {
            return;
        };
        for step in steps.values_mut() {
            self.in_evidence(step.get_mut("evidence"));
            if let Some(Value::Array(history)) = step.get_mut("history") {
                for record in history {
                    self.in_evidence(record.get_mut("evidence"));
                }
            }
        }
    }

    fn in_work_item(&self, work_item: &mut Value) {
        let candidate = work_item
            .get_mut("escalation")
            .and_then(|escalation| escalation.get_mut("candidate"));
        if let Some(candidate) = candidate {
            self.in_evidence(candidate.get_mut("evidence"));
        }
    }

    fn in_evidence(&self, evidence: Option<&mut Value>) {
        let Some(Value::Array(items)) = evidence else {
            return;
        };
        for item in items {
            let Value::Object(item) = item else { continue };
            if item.get("kind").and_then(Value::as_str) != Some("file") {
                continue;
            }
            let Some(upload_id) = item.get("ref").and_then(Value::as_str) else {
                continue;
            };
            let url = self
                .signer
                .sign(self.public_url, self.organization, upload_id, self.now);
            item.insert("url".into(), Value::String(url));
        }
    }
}

/// `GET /files/{link}`: the bytes of the upload a signed link names, as an attachment with its
/// recorded content type. Expired links are `410`, links that do not verify `403`, a missing
/// upload `404`, and a store or blob failure (including bytes that no longer match their
/// hash) `503`. Every error is a JSON `{ "error": { "code", "message" } }`.
pub fn file_routes(uploads: Uploads, clock: Clock, signer: Arc<FileUrlSigner>) -> Router {
    Router::new()
        .route(FILES_ROUTE, get(serve_file))
        .with_state(FileRoutes {
            uploads,
            clock,
            signer,
        })
}

#[derive(Debug, Clone)]
struct FileRoutes {
    uploads: Uploads,
    clock: Clock,
    signer: Arc<FileUrlSigner>,
}

async fn serve_file(State(files): State<FileRoutes>, UrlPath(link): UrlPath<String>) -> Response {
    let now = files.clock.now();
    let signed = match files.signer.verify(&link, now) {
        Ok(signed) => signed,
        Err(FileUrlError::Expired { expired_at }) => {
            return file_error(HttpFailure::LinkExpired(format!(
                "this file link expired at {}; read the run again for a fresh link",
                expired_at.to_rfc3339()
            )));
        }
        Err(FileUrlError::Malformed | FileUrlError::BadSignature) => {
            return file_error(HttpFailure::InvalidLink(
                "this is not a valid file link; read the run again for a fresh one".into(),
            ));
        }
    };
    let (record, bytes) = match files.uploads.read(&signed.organization, &signed.upload_id).await {
        Ok(Some(found)) => found,
        Ok(None) => {
            return file_error(HttpFailure::NotFound(
                "the file this link names does not exist".into(),
            ));
        }
        Err(e) => {
            tracing::error!(upload = %signed.upload_id, error = %e, "serving a file failed");
            return file_error(HttpFailure::Retry(
                "the file cannot be read right now; try again".into(),
            ));
        }
    };
    // Whole seconds the link still works, rounded down so no cache outlives it.
    let remaining = (signed.expires_at.as_millis() - now.as_millis()) / 1000;
    let headers = [
        (header::CONTENT_TYPE, content_type(&record.content_type)),
        (header::CONTENT_LENGTH, HeaderValue::from(bytes.len())),
        (
            header::CONTENT_DISPOSITION,
            content_disposition(&record.file_name),
        ),
        (
            header::CACHE_CONTROL,
            HeaderValue::from_str(&format!("private, max-age={remaining}"))
                .expect("digits are a header value"),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        // The bytes are whatever someone uploaded: never let a browser run them as a page of ours.
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'none'; sandbox"),
        ),
    ];
    (headers, Body::from(bytes)).into_response()
}

/// An error answer of a file link: never cached, since a fresh link may work where this failed.
fn file_error(failure: HttpFailure) -> Response {
    let mut response = failure.into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The recorded content type when it is a well-formed `type/subtype` (parameters allowed),
/// else `application/octet-stream`.
fn content_type(recorded: &str) -> HeaderValue {
    let is_token = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    let essence = recorded.split(';').next().unwrap_or_default().trim();
    let well_formed = essence
        .split_once('/')
        .is_some_and(|(kind, subtype)| is_token(kind) && is_token(subtype));
    match HeaderValue::from_str(recorded) {
        Ok(value) if well_formed && recorded.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) => value,
        _ => HeaderValue::from_static("application/octet-stream"),
    }
}

/// `attachment` with the file name twice (RFC 6266): `filename*` carries it exactly,
/// percent-encoded UTF-8 (RFC 8187); `filename` is a plain ASCII stand-in for old clients, with
/// anything unsafe in a quoted string or a path replaced by `_`.
fn content_disposition(file_name: &str) -> HeaderValue {
    let file_name = if file_name.is_empty() { "file" } else { file_name };
    let fallback: String = file_name
        .chars()
        .map(|c| match c {
            ' ' => ' ',
            '"' | '\\' | '%' | '/' => '_',
            c if c.is_ascii_graphic() => c,
            _ => '_',
        })
        .collect();
    let mut encoded = String::new();
    for byte in file_name.bytes() {
        if byte.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    HeaderValue::from_str(&format!(
        "attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}"
    ))
    .expect("visible ASCII is a header value")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PUBLIC_URL: &str = "https://ap.example";
    /// 2026-10-01T00:00:00Z.
    const NOW: Timestamp = Timestamp::from_millis(1_790_812_800_000);

    fn signer() -> FileUrlSigner {
        FileUrlSigner::new(&[7; 32], Duration::from_secs(300)).unwrap()
    }

    fn link_of(url: &str) -> &str {
        url.strip_prefix("https://ap.example/files/")
            .expect("a file URL of the gateway")
    }

    fn decoded(url: &str) -> Vec<u8> {
        URL_SAFE_NO_PAD.decode(link_of(url)).unwrap()
    }

    /// Re-encodes `bytes` with a correct MAC under `signer`'s key: what a holder of the key can
    /// make, to reach the checks after the MAC.
    fn resigned(signer: &FileUrlSigner, signed: &[u8]) -> String {
        let mut bytes = signed.to_vec();
        bytes.extend_from_slice(&signer.mac(signed).finalize().into_bytes());
        URL_SAFE_NO_PAD.encode(bytes)
    }

    #[test]
    fn a_signed_url_is_an_absolute_gateway_url_whose_link_verifies() {
        let signer = signer();
        let url = signer.sign("https://ap.example/", "acme", "f_0123456789abcdef0123", NOW);
        let link = link_of(&url);
        assert!(
            link.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "base64url without padding: {link}"
        );
        assert_eq!(
            signer.verify(link, NOW),
            Ok(SignedFile {
                organization: "acme".into(),
                upload_id: "f_0123456789abcdef0123".into(),
                expires_at: NOW.plus_seconds(300),
            })
        );
        assert_eq!(
            url,
            signer.sign(PUBLIC_URL, "acme", "f_0123456789abcdef0123", NOW),
            "one trailing slash of the public URL makes no difference"
        );
    }

    #[test]
    fn a_link_works_until_its_expiry_and_not_at_it() {
        let signer = signer();
        let url = signer.sign(PUBLIC_URL, "acme", "f_1", NOW);
        let expiry = NOW.plus_seconds(300);
        let just_before = Timestamp::from_millis(expiry.as_millis() - 1);
        assert!(signer.verify(link_of(&url), just_before).is_ok());
        assert_eq!(
            signer.verify(link_of(&url), expiry),
            Err(FileUrlError::Expired { expired_at: expiry })
        );
        assert_eq!(
            signer.verify(link_of(&url), expiry.plus_seconds(3600)),
            Err(FileUrlError::Expired { expired_at: expiry })
        );
    }

    #[test]
    fn the_expiry_rounds_up_to_the_minute_so_renderings_within_it_agree() {
        let signer = signer();
        let first = signer.sign(PUBLIC_URL, "acme", "f_1", NOW.plus_seconds(1));
        assert_eq!(
            signer.verify(link_of(&first), NOW).unwrap().expires_at,
            NOW.plus_seconds(360)
        );
        assert_eq!(
            signer.sign(PUBLIC_URL, "acme", "f_1", NOW.plus_seconds(60)),
            first
        );
        assert_ne!(
            signer.sign(PUBLIC_URL, "acme", "f_1", NOW.plus_seconds(61)),
            first
        );
        // A TTL shorter than the step rounds to itself.
        let short = FileUrlSigner::new(&[7; KEY_BYTES], Duration::from_secs(7)).unwrap();
        let url = short.sign(PUBLIC_URL, "acme", "f_1", NOW.plus_seconds(1));
        assert_eq!(
            short.verify(link_of(&url), NOW).unwrap().expires_at,
            NOW.plus_seconds(14)
        );
    }

    #[test]
    fn the_expiry_counts_from_the_whole_second_of_now() {
        let signer = signer();
        let url = signer.sign(
            PUBLIC_URL,
            "acme",
            "f_1",
            Timestamp::from_millis(NOW.as_millis() + 999),
        );
        assert_eq!(
            signer.verify(link_of(&url), NOW).unwrap().expires_at,
            NOW.plus_seconds(300)
        );
    }

    #[test]
    fn changing_any_part_of_a_link_breaks_its_signature() {
        let signer = signer();
        let url = signer.sign(PUBLIC_URL, "acme", "f_1", NOW);
        let bytes = decoded(&url);
        let organization_at = HEADER_BYTES;
        let id_at = HEADER_BYTES + "acme".len();
        let mac_at = bytes.len() - MAC_BYTES;
        for (part, at) in [
            ("expiry", 8),
            ("organization length", 12),
            ("organization", organization_at),
            ("upload id", id_at + 2),
            ("mac", mac_at),
            ("last mac byte", bytes.len() - 1),
        ] {
            let mut changed = bytes.clone();
            changed[at] ^= 1;
            assert_eq!(
                signer.verify(&URL_SAFE_NO_PAD.encode(&changed), NOW),
                Err(FileUrlError::BadSignature),
                "{part} changed"
            );
        }
        let mut other_version = bytes.clone();
        other_version[0] = 2;
        assert_eq!(
            signer.verify(&URL_SAFE_NO_PAD.encode(&other_version), NOW),
            Err(FileUrlError::Malformed)
        );
        let truncated = &bytes[..bytes.len() - 1];
        assert_eq!(
            signer.verify(&URL_SAFE_NO_PAD.encode(truncated), NOW),
            Err(FileUrlError::BadSignature)
        );
        assert_eq!(signer.verify("", NOW), Err(FileUrlError::Malformed));
        assert_eq!(signer.verify("not base64!", NOW), Err(FileUrlError::Malformed));
        assert_eq!(
            signer.verify(&format!("{}=", link_of(&url)), NOW),
            Err(FileUrlError::Malformed),
            "padding is not part of the form"
        );
    }

    #[test]
    fn a_link_cannot_be_moved_to_another_organization_or_upload() {
        let signer = signer();
        let url = signer.sign(PUBLIC_URL, "acme", "f_1", NOW);
        let mut bytes = decoded(&url);
        let mac = bytes.split_off(bytes.len() - MAC_BYTES);
        // Same MAC, the boundary between organization and id moved: "acm" + "ef_1".
        let mut moved = bytes.clone();
        moved[9..13].copy_from_slice(&3u32.to_be_bytes());
        moved.extend_from_slice(&mac);
        assert_eq!(
            signer.verify(&URL_SAFE_NO_PAD.encode(&moved), NOW),
            Err(FileUrlError::BadSignature)
        );
        // Same MAC, another organization's name of the same length.
        let mut other = bytes.clone();
        other[HEADER_BYTES..HEADER_BYTES + 4].copy_from_slice(b"evil");
        other.extend_from_slice(&mac);
        assert_eq!(
            signer.verify(&URL_SAFE_NO_PAD.encode(&other), NOW),
            Err(FileUrlError::BadSignature)
        );
        // Links of two organizations for the same upload id differ.
        assert_ne!(
            link_of(&signer.sign(PUBLIC_URL, "acme", "f_1", NOW)),
            link_of(&signer.sign(PUBLIC_URL, "globex", "f_1", NOW))
        );
    }

    #[test]
    fn a_link_signed_with_another_key_does_not_verify() {
        let url = signer().sign(PUBLIC_URL, "acme", "f_1", NOW);
        let other = FileUrlSigner::new(&[8; 32], Duration::from_secs(300)).unwrap();
        assert_eq!(other.verify(link_of(&url), NOW), Err(FileUrlError::BadSignature));
    }

    #[test]
    fn a_correctly_signed_link_with_an_impossible_layout_is_refused() {
        let signer = signer();
        let mut signed = vec![LINK_VERSION];
        signed.extend_from_slice(&u64::MAX.to_be_bytes());
        signed.extend_from_slice(&100u32.to_be_bytes());
        signed.extend_from_slice(b"acme");
        assert_eq!(
            signer.verify(&resigned(&signer, &signed), NOW),
            Err(FileUrlError::Malformed)
        );
        let mut not_utf8 = vec![LINK_VERSION];
        not_utf8.extend_from_slice(&u64::MAX.to_be_bytes());
        not_utf8.extend_from_slice(&1u32.to_be_bytes());
        not_utf8.extend_from_slice(&[0xff, b'f']);
        assert_eq!(
            signer.verify(&resigned(&signer, &not_utf8), NOW),
            Err(FileUrlError::Malformed)
        );
    }

    #[test]
    fn keys_and_lifetimes_are_checked_when_the_signer_is_made() {
        assert!(matches!(
            FileUrlSigner::new(&[1; 31], Duration::from_secs(300)),
            Err(FileUrlConfigError::Key)
        ));
        for ttl in [
            Duration::ZERO,
            Duration::from_millis(1500),
            Duration::from_secs(MAX_FILE_URL_TTL_SECONDS + 1),
        ] {
            assert!(
                matches!(FileUrlSigner::new(&[1; 32], ttl), Err(FileUrlConfigError::Ttl(_))),
                "{ttl:?}"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let short_key = FileUrlConfig {
            key: Some("00ff".into()),
            ttl_seconds: 300,
        };
        let error = FileUrlSigner::from_config(&short_key, dir.path()).unwrap_err();
        assert!(error.to_string().contains("64 hex digits"), "{error}");
        assert!(format!("{:?}", signer()).contains("ttl_seconds: 300"));
        assert!(
            !format!("{:?}", signer()).contains("[7, 7"),
            "the key is never printed"
        );
    }

    #[test]
    fn gateways_given_one_key_verify_each_others_links() {
        let dir = tempfile::tempdir().unwrap();
        let config = FileUrlConfig {
            key: Some("ab".repeat(32)),
            ttl_seconds: 60,
        };
        let first = FileUrlSigner::from_config(&config, &dir.path().join("one")).unwrap();
        let second = FileUrlSigner::from_config(&config, &dir.path().join("two")).unwrap();
        assert_eq!(first.ttl(), Duration::from_secs(60));
        let url = first.sign(PUBLIC_URL, "acme", "f_1", NOW);
        assert!(second.verify(link_of(&url), NOW).is_ok());
        assert!(
            !dir.path().join("one").exists(),
            "a configured key writes no key file"
        );
    }

    #[test]
    fn without_a_configured_key_the_data_folder_keeps_one() {
        let dir = tempfile::tempdir().unwrap();
        let first = FileUrlSigner::from_config(&FileUrlConfig::default(), dir.path()).unwrap();
        let again = FileUrlSigner::from_config(&FileUrlConfig::default(), dir.path()).unwrap();
        assert_eq!(first.ttl(), Duration::from_secs(DEFAULT_FILE_URL_TTL_SECONDS));
        let url = first.sign(PUBLIC_URL, "acme", "f_1", NOW);
        assert!(
            again.verify(link_of(&url), NOW).is_ok(),
            "the same key after a restart"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let key_file = dir.path().join(FILE_URL_KEY_FILE);
            let mode = std::fs::metadata(key_file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn the_config_reads_from_toml_like_json_and_refuses_unknown_keys() {
        let config: FileUrlConfig = serde_json::from_value(json!({ "ttl_seconds": 120 })).unwrap();
        assert_eq!((config.key, config.ttl_seconds), (None, 120));
        assert!(serde_json::from_value::<FileUrlConfig>(json!({ "ttl": 120 })).is_err());
    }

    #[test]
    fn only_file_items_where_the_schemas_put_evidence_get_a_url() {
        let signer = signer();
        let look_alike = json!([{ "kind": "file", "ref": "f_in_output" }]);
        let mut data = json!({
            "run": { "id": "r_1" },
            "data": {
                "inputs": { "attachments": look_alike },
                "steps": {
                    "prepare": {
                        "output": { "evidence": look_alike },
                        "evidence": [
                            { "kind": "file", "ref": "f_now", "sha256": "aa" },
                            { "kind": "link", "ref": "https://docs.example/1" }
                        ],
                        "history": [
                            { "evidence": [{ "kind": "file", "ref": "f_before", "sha256": "bb" }], "by": "x", "at": "t" }
                        ]
                    },
                    "approve": { "decision": "approved", "history": [] }
                }
            },
            "workItems": [{
                "evidence": ["file"],
                "escalation": {
                    "note": "unsure",
                    "candidate": { "evidence": [{ "kind": "file", "ref": "f_held", "sha256": "cc" }] }
                }
            }],
        });
        add_file_urls(&mut data, "acme", &signer, PUBLIC_URL, NOW);
        let url_of = |item: &Value| {
            let url = item["url"].as_str().expect("a url");
            signer.verify(link_of(url), NOW).unwrap().upload_id
        };
        let steps = &data["data"]["steps"];
        assert_eq!(url_of(&steps["prepare"]["evidence"][0]), "f_now");
        assert!(
            steps["prepare"]["evidence"][1].get("url").is_none(),
            "a link item"
        );
        assert_eq!(url_of(&steps["prepare"]["history"][0]["evidence"][0]), "f_before");
        assert_eq!(
            url_of(&data["workItems"][0]["escalation"]["candidate"]["evidence"][0]),
            "f_held"
        );
        assert_eq!(data["workItems"][0]["evidence"], json!(["file"]));
        assert_eq!(data["data"]["inputs"]["attachments"], look_alike);
        assert_eq!(steps["prepare"]["output"]["evidence"], look_alike);
        assert_eq!(steps["approve"], json!({ "decision": "approved", "history": [] }));
    }

    #[test]
    fn a_persons_work_items_from_get_work_get_urls_too() {
        let signer = signer();
        let mut data = json!({
            "items": [{
                "runId": "r_1",
                "workItem": { "escalation": { "candidate": { "evidence": [{ "kind": "file", "ref": "f_held" }] } } }
            }],
            "nextCursor": null
        });
        add_file_urls(&mut data, "acme", &signer, PUBLIC_URL, NOW);
        let url = data["items"][0]["workItem"]["escalation"]["candidate"]["evidence"][0]["url"]
            .as_str()
            .unwrap();
        assert_eq!(signer.verify(link_of(url), NOW).unwrap().organization, "acme");
    }

    #[test]
    fn results_without_file_evidence_are_left_alone() {
        let signer = signer();
        for original in [
            json!({ "id": "f_1", "sha256": "aa", "bytes": 3 }),
            json!({ "consumedBy": null }),
            json!({ "items": [{ "id": "r_1", "inputs": { "kind": "file", "ref": "x" } }], "nextCursor": null }),
            json!({ "items": [{ "runId": "r_1", "handoff": null, "claim": {} }], "nextCursor": null }),
            json!({ "token": "t", "expiresAt": "e" }),
            Value::Null,
        ] {
            let mut data = original.clone();
            add_file_urls(&mut data, "acme", &signer, PUBLIC_URL, NOW);
            assert_eq!(data, original);
        }
    }

    #[test]
    fn a_recorded_content_type_is_sent_only_when_well_formed() {
        for (recorded, sent) in [
            ("application/pdf", "application/pdf"),
            ("text/plain; charset=utf-8", "text/plain; charset=utf-8"),
            ("", "application/octet-stream"),
            ("pdf", "application/octet-stream"),
            ("text/", "application/octet-stream"),
            ("text/html\r\nSet-Cookie: a=b", "application/octet-stream"),
            ("bild/ä", "application/octet-stream"),
        ] {
            assert_eq!(content_type(recorded), sent, "{recorded:?}");
        }
    }

    #[test]
    fn the_file_name_is_sent_exactly_and_safely() {
        assert_eq!(
            content_disposition("report.pdf"),
            "attachment; filename=\"report.pdf\"; filename*=UTF-8''report.pdf"
        );
        assert_eq!(
            content_disposition("Rechnung März \"final\".pdf"),
            "attachment; filename=\"Rechnung M_rz _final_.pdf\"; \
             filename*=UTF-8''Rechnung%20M%C3%A4rz%20%22final%22.pdf"
        );
        assert_eq!(
            content_disposition("../a\\b\r\nX-Evil: 1;%.txt"),
            "attachment; filename=\".._a_b__X-Evil: 1;_.txt\"; \
             filename*=UTF-8''..%2Fa%5Cb%0D%0AX-Evil%3A%201%3B%25.txt"
        );
        assert_eq!(
            content_disposition(""),
            "attachment; filename=\"file\"; filename*=UTF-8''file"
        );
    }
}

/// Signs the file items of every result the tool backend returns (see [`add_file_urls`]), with
/// the runtime's clock.
#[derive(Debug, Clone)]
pub struct SignedFileUrls {
    pub signer: Arc<FileUrlSigner>,
    /// The gateway's public URL, which the links point at.
    pub public_url: String,
    pub clock: Clock,
}

impl crate::runtime_backend::DecorateResult for SignedFileUrls {
    fn decorate(&self, organization: &OrgId, data: &mut Value) {
        add_file_urls(
            data,
            organization.as_str(),
            &self.signer,
            &self.public_url,
            self.clock.now(),
        );
    }
}
