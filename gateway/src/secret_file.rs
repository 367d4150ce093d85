//! Secrets the gateway keeps in its data folder: random bytes in hex, in a file of mode 0600.

use std::io::{self, Write};
use std::path::Path;

/// Reads the secret at `path`, or creates the folder and a new secret of `bytes` random bytes
/// (mode 0600) when there is none. Two processes racing to create it end up sharing one, and
/// neither ever reads it half written: the secret is written whole to a file of this writer's
/// own, then linked into place only if nothing is there yet. `what` names the secret in errors
/// ("a dev signing key").
pub(crate) fn load_or_create(path: &Path, bytes: usize, what: &str) -> io::Result<Vec<u8>> {
    if let Some(secret) = load(path, bytes, what)? {
        return Ok(secret);
    }
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", folder.display())))?;
    }
    let mut secret = vec![0u8; bytes];
    getrandom::fill(&mut secret).map_err(io::Error::other)?;
    // A name of this writer's own: this process, and random bits for its threads.
    let mut unique = [0u8; 8];
    getrandom::fill(&mut unique).map_err(io::Error::other)?;
    let mut partial_name = path.file_name().unwrap_or_default().to_owned();
    partial_name.push(format!(".partial-{}-{}", std::process::id(), hex(&unique)));
    let partial = path.with_file_name(partial_name);
    let at = |e: io::Error, place: &Path| io::Error::new(e.kind(), format!("{}: {e}", place.display()));
    let written = create_private_file(&partial).and_then(|mut file| {
        file.write_all(format!("{}\n", hex(&secret)).as_bytes())?;
        file.sync_all()
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(at(e, &partial));
    }
    let linked = std::fs::hard_link(&partial, path);
    let _ = std::fs::remove_file(&partial);
    match linked {
        Ok(()) => Ok(secret),
        // Another process linked its secret first: use theirs, which is whole.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let text = std::fs::read_to_string(path).map_err(|e| at(e, path))?;
            parse(path, &text, bytes, what)
        }
        Err(e) => Err(at(e, path)),
    }
}

/// Reads the secret at `path`; `None` when there is no such file. Never creates one.
pub(crate) fn load(path: &Path, bytes: usize, what: &str) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(path, &text, bytes, what).map(Some),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

/// A secret written as hex: at least `bytes` bytes, surrounding whitespace ignored.
pub(crate) fn parse_hex(text: &str, bytes: usize) -> Option<Vec<u8>> {
    unhex(text.trim()).filter(|secret| secret.len() >= bytes)
}

fn parse(path: &Path, text: &str, bytes: usize, what: &str) -> io::Result<Vec<u8>> {
    parse_hex(text, bytes).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not {what} (expected {bytes} bytes in hex)", path.display()),
        )
    })
}

#[cfg(unix)]
fn create_private_file(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn create_private_file(path: &Path) -> io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_created_once_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data").join("secret");
        let first = load_or_create(&path, 32, "a test secret").unwrap();
        assert_eq!(first.len(), 32);
        assert_eq!(load_or_create(&path, 32, "a test secret").unwrap(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(load(&path, 32, "a test secret").unwrap(), Some(first));
        assert_eq!(load(&dir.path().join("none"), 32, "a test secret").unwrap(), None);
        std::fs::write(&path, "abcd\n").unwrap();
        let short = load_or_create(&path, 32, "a test secret").unwrap_err();
        assert!(short.to_string().contains("not a test secret"), "{short}");
    }

    #[test]
    fn hex_secrets_parse_only_when_long_enough_and_hex() {
        assert_eq!(parse_hex(" 00ff10 \n", 3), Some(vec![0, 255, 16]));
        assert_eq!(parse_hex("00ff10", 4), None);
        assert_eq!(parse_hex("00ff1", 2), None);
        assert_eq!(parse_hex("zz", 1), None);
    }

    /// Many creators racing on one path all get the same whole secret; none sees a part.
    #[test]
    fn racing_creators_share_one_whole_secret() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys").join("shared-key");
        let secrets: Vec<Vec<u8>> = std::thread::scope(|scope| {
            let racers: Vec<_> = (0..16)
                .map(|_| scope.spawn(|| load_or_create(&path, 32, "a test key").unwrap()))
                .collect();
            racers.into_iter().map(|racer| racer.join().unwrap()).collect()
        });
        assert!(
            secrets
                .iter()
                .all(|secret| secret == &secrets[0] && secret.len() == 32)
        );
        assert_eq!(load(&path, 32, "a test key").unwrap(), Some(secrets[0].clone()));
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no partial file is left behind");
    }
}
