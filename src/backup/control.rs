//! The control socket `serve` opens in its data folder (`control.sock`, mode 0600): how a
//! command on the same machine reaches the store a running server holds locked.
//!
//! Whoever can read the data folder can read the store anyway, so the socket's file permission
//! is its access control, and no bearer token (an operator's is one organization's) opens it.
//! One request, one line: `store-export 1\n`. The answer is `ok\n`, the snapshot's revision and
//! next lease id (i64 LE each), then the snapshot's records ([`Record::Key`]s in key order, the
//! [`Record::Lease`]s they are attached to, [`Record::End`]), uncompressed; or `error <why>\n`. A
//! connection that ends before `End` is a failed export.

use super::format::{FormatError, Record, encode_record, read_record};
use agentprocess_store::{EmbeddedStore, StoreError};
use anyhow::Context;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;

/// The socket's name in the data folder.
pub const CONTROL_SOCKET: &str = "control.sock";
/// The one request the socket answers, with the version of its answer's layout.
const EXPORT_REQUEST: &str = "store-export 1";
/// How long a client may take to send its request line.
const REQUEST_PATIENCE: Duration = Duration::from_secs(10);
/// Bytes of encoded records the export hands to the socket at a time.
const CHUNK_BYTES: usize = 256 << 10;

/// The longest path bound or connected to as it is: a Unix socket's address holds at most 108
/// bytes.
const MAX_SOCKET_PATH: usize = 100;

/// The path to bind or connect to for the socket `name` in `folder`: the path itself when it is
/// short enough for a socket address, else the same file reached through the open folder
/// (`/proc/self/fd/N/name`), which the returned handle keeps open while the path is used.
fn socket_path(folder: &Path, name: &str) -> std::io::Result<(PathBuf, Option<std::fs::File>)> {
    let direct = folder.join(name);
    if direct.as_os_str().len() <= MAX_SOCKET_PATH {
        return Ok((direct, None));
    }
    let open = std::fs::File::open(folder)?;
    let through = PathBuf::from(format!(
        "/proc/self/fd/{}/{name}",
        std::os::fd::AsRawFd::as_raw_fd(&open)
    ));
    Ok((through, Some(open)))
}

/// The listening socket of a running server. [`ControlSocket::close`] removes it.
#[derive(Debug)]
pub struct ControlSocket {
    path: PathBuf,
    accepting: tokio::task::JoinHandle<()>,
}

impl ControlSocket {
    /// Listens on `data_dir/control.sock`, readable and writable by the server's user only.
    /// The socket is bound in a private folder and renamed into place, so it is never reachable
    /// with looser permissions; a socket a stopped server left behind is replaced.
    pub fn open(data_dir: &Path, store: EmbeddedStore) -> anyhow::Result<ControlSocket> {
        let path = data_dir.join(CONTROL_SOCKET);
        let private = data_dir.join(format!(".control-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&private);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&private)
            .with_context(|| format!("cannot create {}", private.display()))?;
        let (bound, _held) = socket_path(&private, CONTROL_SOCKET)
            .with_context(|| format!("cannot open {}", private.display()))?;
        let listener =
            UnixListener::bind(&bound).with_context(|| format!("cannot listen on {}", bound.display()));
        let placed = listener.and_then(|listener| {
            std::fs::set_permissions(&bound, std::fs::Permissions::from_mode(0o600))
                .and_then(|()| std::fs::rename(&bound, &path))
                .with_context(|| format!("cannot place the control socket at {}", path.display()))?;
            Ok(listener)
        });
        let _ = std::fs::remove_dir_all(&private);
        let listener = placed?;
        let accepting = tokio::spawn(accept(listener, store));
        Ok(ControlSocket { path, accepting })
    }

    /// Stops answering and removes the socket.
    pub fn close(self) {
        self.accepting.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

async fn accept(listener: UnixListener, store: EmbeddedStore) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(answer(stream, store.clone()));
            }
            Err(error) => {
                tracing::warn!(%error, "the control socket failed to accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Answers one connection: reads its request, streams the export.
async fn answer(stream: UnixStream, store: EmbeddedStore) {
    let (reading, mut writing) = stream.into_split();
    let mut request = String::new();
    let mut reading = tokio::io::BufReader::new(reading).take(256);
    let read = tokio::time::timeout(REQUEST_PATIENCE, reading.read_line(&mut request)).await;
    let refusal = match read {
        Ok(Ok(_)) if request.trim_end() == EXPORT_REQUEST => None,
        Ok(Ok(_)) => Some(format!("unknown request {:?}", request.trim_end())),
        Ok(Err(error)) => Some(format!("cannot read the request: {error}")),
        Err(_) => Some("no request within 10 s".to_owned()),
    };
    if let Some(refusal) = refusal {
        let _ = writing.write_all(format!("error {refusal}\n").as_bytes()).await;
        return;
    }
    if let Err(error) = export(&store, &mut writing).await {
        tracing::warn!(
            error = format!("{error:#}"),
            "a store export over the control socket failed"
        );
    }
}

/// Streams the store's snapshot to `out`: keys read off the async threads, handed over in chunks.
async fn export(store: &EmbeddedStore, out: &mut (impl AsyncWriteExt + Unpin)) -> anyhow::Result<()> {
    let export = match store.export() {
        Ok(export) => export,
        Err(error) => {
            out.write_all(format!("error the store cannot be read: {error}\n").as_bytes())
                .await?;
            return Err(error.into());
        }
    };
    let mut head = b"ok\n".to_vec();
    head.extend_from_slice(&export.revision().to_le_bytes());
    head.extend_from_slice(&export.next_lease_id().to_le_bytes());
    out.write_all(&head).await?;
    let (chunks, mut receiving) = mpsc::channel::<Vec<u8>>(4);
    let reading = tokio::task::spawn_blocking(move || {
        let mut chunk = Vec::with_capacity(CHUNK_BYTES);
        let send = |chunk: &mut Vec<u8>| -> Result<(), ExportStopped> {
            let full = std::mem::replace(chunk, Vec::with_capacity(CHUNK_BYTES));
            chunks.blocking_send(full).map_err(|_| ExportStopped::ClientGone)
        };
        let leases = export.for_each_key(|key| {
            encode_record(&Record::Key(key), &mut chunk);
            if chunk.len() >= CHUNK_BYTES {
                send(&mut chunk)?;
            }
            Ok::<(), ExportStopped>(())
        })?;
        for lease in leases {
            encode_record(&Record::Lease(lease), &mut chunk);
        }
        encode_record(&Record::End, &mut chunk);
        send(&mut chunk)
    });
    while let Some(chunk) = receiving.recv().await {
        out.write_all(&chunk).await?;
    }
    reading.await.context("the export task failed")??;
    out.flush().await?;
    Ok(())
}

/// Why an export stopped before its end.
#[derive(Debug, thiserror::Error)]
enum ExportStopped {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the client went away")]
    ClientGone,
}

/// What asking a data folder's control socket for an export found.
pub enum Reached {
    /// A running server answered; its snapshot's records follow on the stream.
    Server(ExportStream),
    /// No server answers there (no socket, or nobody listening on it).
    NoServer,
}

/// A running server's snapshot, as it streams in.
pub struct ExportStream {
    pub revision: i64,
    pub next_lease_id: i64,
    input: BufReader<std::os::unix::net::UnixStream>,
}

impl ExportStream {
    /// The next record (the last is [`Record::End`]).
    pub fn next_record(&mut self) -> Result<Record, FormatError> {
        read_record(&mut self.input).map_err(|error| match error {
            FormatError::Malformed(_) => FormatError::Malformed(
                "the server stopped sending its snapshot before its end (see its log)".into(),
            ),
            other => other,
        })
    }
}

/// Asks the server whose data folder is `data_dir` for an export of its store.
pub fn request_export(data_dir: &Path) -> anyhow::Result<Reached> {
    let path = data_dir.join(CONTROL_SOCKET);
    let (address, _held) = match socket_path(data_dir, CONTROL_SOCKET) {
        Ok(found) => found,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Reached::NoServer),
        Err(error) => return Err(error).with_context(|| format!("cannot open {}", data_dir.display())),
    };
    let mut stream = match std::os::unix::net::UnixStream::connect(&address) {
        Ok(stream) => stream,
        Err(error)
            if matches!(
                error.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Ok(Reached::NoServer);
        }
        Err(error) => {
            return Err(error).with_context(|| format!("cannot connect to {}", path.display()));
        }
    };
    stream
        .write_all(format!("{EXPORT_REQUEST}\n").as_bytes())
        .with_context(|| format!("cannot write to {}", path.display()))?;
    let mut input = BufReader::with_capacity(1 << 20, stream);
    let mut status = Vec::new();
    (&mut input)
        .take(4096)
        .read_until(b'\n', &mut status)
        .with_context(|| format!("cannot read from {}", path.display()))?;
    let status = String::from_utf8_lossy(&status);
    match status.trim_end() {
        "ok" => {}
        "" => anyhow::bail!(
            "the server at {} closed the connection without answering",
            path.display()
        ),
        other => anyhow::bail!(
            "the server at {} refused the export: {}",
            path.display(),
            other.strip_prefix("error ").unwrap_or(other)
        ),
    }
    let mut numbers = [0u8; 16];
    input
        .read_exact(&mut numbers)
        .with_context(|| format!("the server at {} answered too little", path.display()))?;
    Ok(Reached::Server(ExportStream {
        revision: i64::from_le_bytes(numbers[..8].try_into().expect("8 bytes")),
        next_lease_id: i64::from_le_bytes(numbers[8..].try_into().expect("8 bytes")),
        input,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentprocess_store::{EmbeddedOptions, Store, Txn, TxnOp};

    /// A server's socket answers an export of its store at one revision, in key order, with
    /// the leases; it is the server user's alone (0600); an unknown request is refused; and a
    /// folder whose socket nobody answers is told apart from a failure.
    /// A data folder by its path, read as a temporary folder is.
    struct DataFolder(PathBuf);

    impl DataFolder {
        fn path(&self) -> &Path {
            &self.0
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_socket_streams_the_store_and_only_to_its_owner() {
        let root = tempfile::tempdir().unwrap();
        // Longer than a socket address holds: bound and reached through the open folder.
        let dir = root
            .path()
            .join("a-data-folder-whose-path-is-longer-than-a-unix-socket-address-holds-".repeat(2));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(dir.join(CONTROL_SOCKET).as_os_str().len() > 108);
        let dir = DataFolder(dir);
        let (store, _) = EmbeddedStore::open(dir.path().join("store"), EmbeddedOptions::default())
            .await
            .unwrap();
        let lease = store.lease_grant(60).await.unwrap().id;
        store
            .txn(Txn::new().and_then([TxnOp::put("b", "2"), TxnOp::put_with_lease("a", "1", lease)]))
            .await
            .unwrap();
        let socket = ControlSocket::open(dir.path(), store.clone()).unwrap();
        let mode = std::fs::metadata(dir.path().join(CONTROL_SOCKET))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);

        let data = dir.path().to_path_buf();
        let records = tokio::task::spawn_blocking(move || {
            let Reached::Server(mut stream) = request_export(&data).unwrap() else {
                panic!("the server answers");
            };
            let mut records = vec![];
            loop {
                match stream.next_record().unwrap() {
                    Record::End => return (stream.revision, records),
                    record => records.push(record),
                }
            }
        })
        .await
        .unwrap();
        let (revision, records) = records;
        assert_eq!(revision, store.get(b"a").await.unwrap().1);
        let names: Vec<Vec<u8>> = records
            .iter()
            .filter_map(|r| match r {
                Record::Key(key) => Some(key.key.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(names, [b"a".to_vec(), b"b".to_vec()]);
        assert!(
            records.contains(&Record::Lease(agentprocess_store::ExportedLease {
                id: lease.0,
                ttl: 60
            }))
        );

        let (address, _held) = socket_path(dir.path(), CONTROL_SOCKET).unwrap();
        let mut other = UnixStream::connect(address).await.unwrap();
        other.write_all(b"shutdown\n").await.unwrap();
        let mut answer = String::new();
        other.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("error unknown request"), "{answer}");

        socket.close();
        let data = dir.path().to_path_buf();
        let reached = tokio::task::spawn_blocking(move || request_export(&data).unwrap())
            .await
            .unwrap();
        assert!(matches!(reached, Reached::NoServer));
        store.close().await;
    }
}
