//! Dev mode: a local signing key in the data folder, and the tokens `agentprocess token` mints.
//!
//! Used only when no identity provider is configured. The key is an HMAC secret created on first
//! use with file mode 0600; tokens signed with it name the server's own URL as issuer and audience.
//! A dev-mode server records that URL beside the key, so that `agentprocess token --data DIR`
//! mints for the server that uses DIR, whatever port it listens on. The gateways of a cluster
//! share one key file instead (`--dev-key PATH`), and one public URL.

use super::identity::IdentityKind;
use crate::secret_file;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header};
use serde_json::{Value, json};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The dev key's file name inside the data folder.
pub const DEV_KEY_FILE: &str = "dev-signing-key";
/// The file beside the dev key holding the public URL of the server that uses it (one line).
pub const SERVER_URL_FILE: &str = "dev-server-url";
/// The `kid` header of dev tokens.
pub const DEV_KEY_ID: &str = "agentprocess-dev";
/// Bytes of randomness in a dev key.
const KEY_BYTES: usize = 32;

/// The dev signing key. Never printed: its `Debug` shows only where it lives.
pub struct DevKey {
    path: PathBuf,
    secret: Vec<u8>,
}

impl fmt::Debug for DevKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DevKey")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Where dev mode keeps its signing key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DevKeyLocation {
    /// In a server's data folder (`serve`), beside the URL the server records for
    /// `agentprocess token --data DIR`.
    DataDir(PathBuf),
    /// A file every gateway of a cluster is given (`--dev-key PATH`); nothing is recorded
    /// beside it, since the gateways share one public URL.
    File(PathBuf),
}

impl DevKeyLocation {
    /// The key file.
    pub fn key_path(&self) -> PathBuf {
        match self {
            DevKeyLocation::DataDir(dir) => dir.join(DEV_KEY_FILE),
            DevKeyLocation::File(path) => path.clone(),
        }
    }

    /// The `agentprocess token` flag that mints with this key.
    pub fn token_flag(&self) -> String {
        match self {
            DevKeyLocation::DataDir(dir) => format!("--data {}", dir.display()),
            DevKeyLocation::File(path) => format!("--dev-key {}", path.display()),
        }
    }
}

/// What a dev token says about its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevTokenRequest {
    pub organization: String,
    pub kind: IdentityKind,
    pub operator: bool,
    pub ttl: Duration,
}

impl DevKey {
    /// Reads the key from `data_dir`, creating the folder and a new key (mode 0600) if absent.
    pub fn load_or_create(data_dir: &Path) -> io::Result<DevKey> {
        let path = data_dir.join(DEV_KEY_FILE);
        let secret = secret_file::load_or_create(&path, KEY_BYTES, "a dev signing key")?;
        Ok(DevKey { path, secret })
    }

    /// Reads the key file at `path`, creating it (and its folder) with a new key if absent.
    pub fn load_or_create_file(path: &Path) -> io::Result<DevKey> {
        let secret = secret_file::load_or_create(path, KEY_BYTES, "a dev signing key")?;
        Ok(DevKey {
            path: path.to_owned(),
            secret,
        })
    }

    /// Reads the key file at `path`; `None` when there is none. Never creates one.
    pub fn load_file(path: &Path) -> io::Result<Option<DevKey>> {
        let secret = secret_file::load(path, KEY_BYTES, "a dev signing key")?;
        Ok(secret.map(|secret| DevKey {
            path: path.to_owned(),
            secret,
        }))
    }

    /// Reads the key from `data_dir`; `None` when the folder holds none. Never creates one.
    pub fn load(data_dir: &Path) -> io::Result<Option<DevKey>> {
        let path = data_dir.join(DEV_KEY_FILE);
        let secret = secret_file::load(&path, KEY_BYTES, "a dev signing key")?;
        Ok(secret.map(|secret| DevKey { path, secret }))
    }

    /// Where the key lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Mints a token for `request`, issued by and for the server at `server_url`.
    pub fn mint(&self, server_url: &str, request: &DevTokenRequest) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("the clock is after 1970")
            .as_secs();
        let mut claims = json!({
            "iss": server_url,
            "aud": server_url,
            "iat": now,
            "nbf": now,
            "exp": now + request.ttl.as_secs(),
            "org": request.organization,
            "operator": request.operator,
        });
        match &request.kind {
            IdentityKind::Agent { id } => {
                claims["kind"] = json!("agent");
                claims["sub"] = json!(id);
            }
            IdentityKind::Person { email, groups } => {
                claims["kind"] = json!("person");
                claims["sub"] = json!(email);
                claims["email"] = json!(email);
                claims["groups"] = json!(groups);
            }
        }
        self.sign(&claims)
    }

    /// Signs arbitrary claims with the dev key (HS256).
    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(DEV_KEY_ID.to_owned());
        let key = EncodingKey::from_secret(&self.secret).expect("an HMAC key of any length");
        jsonwebtoken::encode(&header, claims, &key).expect("JSON claims always encode")
    }

    pub(crate) fn decoding_key(&self) -> DecodingKey {
        DecodingKey::from_secret(&self.secret).expect("an HMAC key of any length")
    }
}

/// Records `server_url` as the URL of the dev-mode server whose data folder is `data_dir`,
/// replacing what an earlier start recorded. Written to a temporary file and renamed, so a reader
/// sees the old URL or the new one, never a part.
pub fn record_server_url(data_dir: &Path, server_url: &str) -> io::Result<()> {
    let path = data_dir.join(SERVER_URL_FILE);
    let partial = data_dir.join(format!("{SERVER_URL_FILE}.partial"));
    let context = |e: io::Error, at: &Path| io::Error::new(e.kind(), format!("{}: {e}", at.display()));
    std::fs::write(&partial, format!("{server_url}\n")).map_err(|e| context(e, &partial))?;
    std::fs::rename(&partial, &path).map_err(|e| context(e, &path))
}

/// The URL the dev-mode server using `data_dir` recorded; `None` when no server recorded one.
pub fn recorded_server_url(data_dir: &Path) -> io::Result<Option<String>> {
    let path = data_dir.join(SERVER_URL_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => Ok(Some(text.trim().to_owned())),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

/// Parses a token lifetime: a positive integer followed by `m`, `h` or `d` (`30m`, `12h`, `7d`).
pub fn parse_ttl(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!("{text:?} is not a duration: write a whole number followed by m, h or d, like 30m, 12h or 7d")
    };
    let unit_at = text.len().checked_sub(1).ok_or_else(bad)?;
    let (number, unit) = text.split_at(unit_at);
    let seconds_per_unit = match unit {
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let count: u64 = number.parse().map_err(|_| bad())?;
    if count == 0 {
        return Err(format!("{text:?}: a token must live longer than zero"));
    }
    count
        .checked_mul(seconds_per_unit)
        .map(Duration::from_secs)
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_forms() {
        assert_eq!(parse_ttl("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_ttl("12h"), Ok(Duration::from_secs(43_200)));
        assert_eq!(parse_ttl("7d"), Ok(Duration::from_secs(604_800)));
        for bad in [
            "",
            "h",
            "12",
            "12s",
            "-1h",
            "1.5h",
            "0h",
            " 1h",
            "99999999999999999999d",
        ] {
            assert!(parse_ttl(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_key_is_created_once_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let first = DevKey::load_or_create(&data).unwrap();
        let second = DevKey::load_or_create(&data).unwrap();
        assert_eq!(first.secret, second.secret);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(first.path()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(DevKey::load(&data).unwrap().unwrap().secret, first.secret);
        assert!(DevKey::load(dir.path()).unwrap().is_none());
        std::fs::write(first.path(), "not hex\n").unwrap();
        assert!(DevKey::load_or_create(&data).is_err());
    }

    #[test]
    fn the_server_url_is_recorded_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(recorded_server_url(dir.path()).unwrap(), None);
        record_server_url(dir.path(), "http://127.0.0.1:9001").unwrap();
        assert_eq!(
            recorded_server_url(dir.path()).unwrap().as_deref(),
            Some("http://127.0.0.1:9001")
        );
        record_server_url(dir.path(), "https://ap.example.com").unwrap();
        assert_eq!(
            recorded_server_url(dir.path()).unwrap().as_deref(),
            Some("https://ap.example.com")
        );
    }
}
