//! The backup file: a fixed header (magic, format version, revision, counts, checksums), then a
//! zstd-compressed stream of records (the store's keys, their leases, the data folder's files,
//! the uploads).
//!
//! ```text
//! offset  size  field
//!      0     8  magic "APBACKUP"
//!      8     4  format version (u32 LE), 1
//!     12     4  flags (u32 LE): bit 0 set when the uploads are in the file
//!     16     8  store revision (i64 LE)
//!     24     8  next lease id (i64 LE)
//!     32     8  when the backup was taken, Unix ms (u64 LE)
//!     40    32  keys, leases, files, uploads (u64 LE each)
//!     72     8  body length in bytes (u64 LE)
//!     80    32  SHA-256 of the body
//!    112    32  SHA-256 of the header's first 112 bytes
//!    144        body: zstd stream of records, the last one `End`
//! ```
//!
//! A record is a tag byte and its fields; byte strings are a length (u32 LE, u64 LE for file
//! contents) and the bytes. The same records, uncompressed, carry a running store's snapshot over
//! the control socket ([`super::control`]).

use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use agentprocess_store::{ExportedKey, ExportedLease};

/// The first bytes of every backup file.
pub const MAGIC: &[u8; 8] = b"APBACKUP";
/// The format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes of the header.
pub const HEADER_BYTES: usize = 144;
/// Header flag: the uploads blob store is in the file.
const FLAG_UPLOADS: u32 = 1;
/// zstd level: fast, and most of the gain on compressed JSON and keys.
const COMPRESSION_LEVEL: i32 = 3;
/// The longest path a file record may name.
const MAX_PATH_BYTES: usize = 4096;

const TAG_END: u8 = 0;
const TAG_KEY: u8 = 1;
const TAG_LEASE: u8 = 2;
const TAG_FILE: u8 = 3;
const TAG_UPLOAD: u8 = 4;

/// One record of a backup's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A key of the store, with its revisions, version and lease.
    Key(ExportedKey),
    /// A lease the store's keys are attached to.
    Lease(ExportedLease),
    /// A file of the data folder (keys, the recorded URL), by its path relative to the folder.
    File {
        path: String,
        mode: u32,
        contents: Vec<u8>,
    },
    /// An object of the uploads blob store, by its path relative to the store's root.
    Upload { path: String, contents: Vec<u8> },
    /// The last record.
    End,
}

/// What the header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub revision: i64,
    pub next_lease_id: i64,
    pub created_at_ms: u64,
    pub uploads_included: bool,
    pub counts: Counts,
    pub body_bytes: u64,
}

/// How many records of each kind a backup holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub keys: u64,
    pub leases: u64,
    pub files: u64,
    pub uploads: u64,
}

impl Counts {
    fn add(&mut self, record: &Record) {
        match record {
            Record::Key(_) => self.keys += 1,
            Record::Lease(_) => self.leases += 1,
            Record::File { .. } => self.files += 1,
            Record::Upload { .. } => self.uploads += 1,
            Record::End => {}
        }
    }
}

/// Why a file cannot be read as a backup.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("not a backup file (it does not start with {MAGIC:?})")]
    NotABackup,
    #[error("backup format version {found}; this agentprocess reads version {FORMAT_VERSION}")]
    UnsupportedVersion { found: u32 },
    #[error("the backup's header is damaged (its checksum does not match)")]
    DamagedHeader,
    #[error("the backup is truncated: its body has {found} of {expected} bytes")]
    Truncated { expected: u64, found: u64 },
    #[error("the backup is damaged: its body does not match its checksum")]
    DamagedBody,
    #[error("the backup is damaged: {0}")]
    Malformed(String),
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Appends `record`'s encoding to `out`.
pub fn encode_record(record: &Record, out: &mut Vec<u8>) {
    match record {
        Record::Key(key) => {
            out.push(TAG_KEY);
            put_bytes32(out, &key.key);
            put_bytes32(out, &key.value);
            for field in [key.create_revision, key.mod_revision, key.version, key.lease] {
                out.extend_from_slice(&field.to_le_bytes());
            }
        }
        Record::Lease(lease) => {
            out.push(TAG_LEASE);
            out.extend_from_slice(&lease.id.to_le_bytes());
            out.extend_from_slice(&lease.ttl.to_le_bytes());
        }
        Record::File { path, mode, contents } => {
            out.push(TAG_FILE);
            put_bytes32(out, path.as_bytes());
            out.extend_from_slice(&mode.to_le_bytes());
            put_bytes64(out, contents);
        }
        Record::Upload { path, contents } => {
            out.push(TAG_UPLOAD);
            put_bytes32(out, path.as_bytes());
            put_bytes64(out, contents);
        }
        Record::End => out.push(TAG_END),
    }
}

fn put_bytes32(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).expect("keys, values and paths are far below 4 GiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(bytes);
}

fn put_bytes64(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Reads one record. A stream that ends inside a record, or an unknown tag, is an error.
pub fn read_record(input: &mut impl Read) -> Result<Record, FormatError> {
    let tag = read_array::<1>(input)?[0];
    Ok(match tag {
        TAG_END => Record::End,
        TAG_KEY => {
            let key = read_bytes32(input)?;
            let value = read_bytes32(input)?;
            Record::Key(ExportedKey {
                key,
                value,
                create_revision: read_i64(input)?,
                mod_revision: read_i64(input)?,
                version: read_i64(input)?,
                lease: read_i64(input)?,
            })
        }
        TAG_LEASE => Record::Lease(ExportedLease {
            id: read_i64(input)?,
            ttl: read_i64(input)?,
        }),
        TAG_FILE => {
            let path = read_path(input)?;
            let mode = u32::from_le_bytes(read_array(input)?);
            Record::File {
                path,
                mode,
                contents: read_bytes64(input)?,
            }
        }
        TAG_UPLOAD => {
            let path = read_path(input)?;
            Record::Upload {
                path,
                contents: read_bytes64(input)?,
            }
        }
        other => {
            return Err(FormatError::Malformed(format!(
                "a record of unknown kind {other}"
            )));
        }
    })
}

fn read_array<const N: usize>(input: &mut impl Read) -> Result<[u8; N], FormatError> {
    let mut bytes = [0; N];
    input.read_exact(&mut bytes).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => FormatError::Malformed("a record is cut short".into()),
        _ => FormatError::Io(e),
    })?;
    Ok(bytes)
}

fn read_i64(input: &mut impl Read) -> Result<i64, FormatError> {
    Ok(i64::from_le_bytes(read_array(input)?))
}

/// Reads `len` bytes, growing the buffer as they come (a damaged length cannot make it allocate
/// more than the stream holds).
fn read_exactly(input: &mut impl Read, len: u64) -> Result<Vec<u8>, FormatError> {
    let mut bytes = Vec::new();
    let read = input.take(len).read_to_end(&mut bytes)?;
    if read as u64 != len {
        return Err(FormatError::Malformed("a record is cut short".into()));
    }
    Ok(bytes)
}

fn read_bytes32(input: &mut impl Read) -> Result<Vec<u8>, FormatError> {
    let len = u32::from_le_bytes(read_array(input)?);
    read_exactly(input, u64::from(len))
}

fn read_bytes64(input: &mut impl Read) -> Result<Vec<u8>, FormatError> {
    let len = u64::from_le_bytes(read_array(input)?);
    read_exactly(input, len)
}

fn read_path(input: &mut impl Read) -> Result<String, FormatError> {
    let len = u32::from_le_bytes(read_array(input)?) as usize;
    if len > MAX_PATH_BYTES {
        return Err(FormatError::Malformed(format!("a path of {len} bytes")));
    }
    String::from_utf8(read_exactly(input, len as u64)?)
        .map_err(|_| FormatError::Malformed("a path that is not UTF-8".into()))
}

impl Header {
    fn encode(&self, body_sha256: &[u8; 32]) -> [u8; HEADER_BYTES] {
        let mut out = Vec::with_capacity(HEADER_BYTES);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        let flags = if self.uploads_included { FLAG_UPLOADS } else { 0 };
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&self.revision.to_le_bytes());
        out.extend_from_slice(&self.next_lease_id.to_le_bytes());
        for field in [
            self.created_at_ms,
            self.counts.keys,
            self.counts.leases,
            self.counts.files,
            self.counts.uploads,
            self.body_bytes,
        ] {
            out.extend_from_slice(&field.to_le_bytes());
        }
        out.extend_from_slice(body_sha256);
        let header_sha256: [u8; 32] = Sha256::digest(&out).into();
        out.extend_from_slice(&header_sha256);
        out.try_into().expect("the header's fields add up to its size")
    }

    /// The header and the body's checksum, from a file's first bytes.
    fn decode(bytes: &[u8; HEADER_BYTES]) -> Result<(Header, [u8; 32]), FormatError> {
        if &bytes[..8] != MAGIC {
            return Err(FormatError::NotABackup);
        }
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let version = u32_at(8);
        if version != FORMAT_VERSION {
            return Err(FormatError::UnsupportedVersion { found: version });
        }
        let header_sha256: [u8; 32] = Sha256::digest(&bytes[..112]).into();
        if header_sha256[..] != bytes[112..] {
            return Err(FormatError::DamagedHeader);
        }
        let header = Header {
            uploads_included: u32_at(12) & FLAG_UPLOADS != 0,
            revision: u64_at(16) as i64,
            next_lease_id: u64_at(24) as i64,
            created_at_ms: u64_at(32),
            counts: Counts {
                keys: u64_at(40),
                leases: u64_at(48),
                files: u64_at(56),
                uploads: u64_at(64),
            },
            body_bytes: u64_at(72),
        };
        Ok((header, bytes[80..112].try_into().expect("32 bytes")))
    }
}

/// A writer that hashes and counts what goes through it.
struct Hashing<W> {
    inner: W,
    sha256: Sha256,
    bytes: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let written = self.inner.write(buf)?;
        self.sha256.update(&buf[..written]);
        self.bytes += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes a backup file: records go into the compressed body as they come; the header, written
/// last, says how many there are and what the body's checksum is.
pub struct BackupWriter {
    body: zstd::stream::Encoder<'static, Hashing<BufWriter<File>>>,
    counts: Counts,
    buffer: Vec<u8>,
    ended: bool,
}

impl std::fmt::Debug for BackupWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupWriter")
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

/// What the header of a finished backup says, besides its counts.
#[derive(Debug, Clone, Copy)]
pub struct Finish {
    pub revision: i64,
    pub next_lease_id: i64,
    pub created_at_ms: u64,
    pub uploads_included: bool,
}

impl BackupWriter {
    /// Starts a backup in `file` (empty, opened for writing), leaving room for the header.
    pub fn new(mut file: File) -> io::Result<BackupWriter> {
        file.write_all(&[0; HEADER_BYTES])?;
        let hashing = Hashing {
            inner: BufWriter::with_capacity(1 << 20, file),
            sha256: Sha256::new(),
            bytes: 0,
        };
        Ok(BackupWriter {
            body: zstd::stream::Encoder::new(hashing, COMPRESSION_LEVEL)?,
            counts: Counts::default(),
            buffer: Vec::new(),
            ended: false,
        })
    }

    pub fn write(&mut self, record: &Record) -> io::Result<()> {
        if self.ended {
            return Err(io::Error::other("a record after the end of a backup"));
        }
        self.buffer.clear();
        encode_record(record, &mut self.buffer);
        self.body.write_all(&self.buffer)?;
        self.counts.add(record);
        self.ended = *record == Record::End;
        Ok(())
    }

    /// Ends the body, writes the header and syncs the file. Returns the header written.
    pub fn finish(mut self, finish: Finish) -> io::Result<Header> {
        if !self.ended {
            self.write(&Record::End)?;
        }
        let hashing = self.body.finish()?;
        let body_sha256: [u8; 32] = hashing.sha256.finalize().into();
        let mut file = hashing.inner.into_inner().map_err(|e| e.into_error())?;
        let header = Header {
            revision: finish.revision,
            next_lease_id: finish.next_lease_id,
            created_at_ms: finish.created_at_ms,
            uploads_included: finish.uploads_included,
            counts: self.counts,
            body_bytes: hashing.bytes,
        };
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&header.encode(&body_sha256))?;
        file.sync_all()?;
        Ok(header)
    }
}

/// Reads a backup file whose header and checksum were verified when it was opened.
pub struct BackupReader {
    pub header: Header,
    body: zstd::stream::Decoder<'static, BufReader<io::Take<File>>>,
    counts: Counts,
    ended: bool,
}

impl std::fmt::Debug for BackupReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupReader")
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

impl BackupReader {
    /// Opens `path` and checks it whole: magic, version, header checksum, length and the body's
    /// checksum (one read of the file), before a record is handed out.
    pub fn open(path: &Path) -> Result<BackupReader, FormatError> {
        let mut file = File::open(path)?;
        let mut header_bytes = [0; HEADER_BYTES];
        let mut read = 0;
        while read < HEADER_BYTES {
            match file.read(&mut header_bytes[read..])? {
                0 => break,
                n => read += n,
            }
        }
        if read < MAGIC.len() || &header_bytes[..MAGIC.len()] != MAGIC {
            return Err(FormatError::NotABackup);
        }
        if read < HEADER_BYTES {
            return Err(FormatError::Truncated {
                expected: HEADER_BYTES as u64,
                found: read as u64,
            });
        }
        let (header, body_sha256) = Header::decode(&header_bytes)?;
        let found = file.metadata()?.len().saturating_sub(HEADER_BYTES as u64);
        if found != header.body_bytes {
            return Err(FormatError::Truncated {
                expected: header.body_bytes,
                found,
            });
        }
        let mut sha256 = Sha256::new();
        let mut chunk = vec![0; 1 << 20];
        loop {
            match file.read(&mut chunk)? {
                0 => break,
                n => sha256.update(&chunk[..n]),
            }
        }
        let computed: [u8; 32] = sha256.finalize().into();
        if computed != body_sha256 {
            return Err(FormatError::DamagedBody);
        }
        file.seek(SeekFrom::Start(HEADER_BYTES as u64))?;
        let body = zstd::stream::Decoder::new(file.take(header.body_bytes))
            .map_err(|e| FormatError::Malformed(format!("its body does not decompress: {e}")))?;
        Ok(BackupReader {
            header,
            body,
            counts: Counts::default(),
            ended: false,
        })
    }

    /// The next record; `None` after `End`, once the counts were found to match the header's.
    pub fn next_record(&mut self) -> Result<Option<Record>, FormatError> {
        if self.ended {
            return Ok(None);
        }
        let record = read_record(&mut self.body)?;
        self.counts.add(&record);
        if record == Record::End {
            self.ended = true;
            if self.counts != self.header.counts {
                return Err(FormatError::Malformed(format!(
                    "it holds {:?}, its header says {:?}",
                    self.counts, self.header.counts
                )));
            }
            return Ok(None);
        }
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records() -> Vec<Record> {
        vec![
            Record::Key(ExportedKey {
                key: b"ap/acme/run/r1".to_vec(),
                value: vec![7; 3000],
                create_revision: 3,
                mod_revision: 9,
                version: 4,
                lease: 0,
            }),
            Record::Key(ExportedKey {
                key: b"ap/acme/claim/r1".to_vec(),
                value: b"held".to_vec(),
                create_revision: 9,
                mod_revision: 9,
                version: 1,
                lease: 5,
            }),
            Record::Lease(ExportedLease { id: 5, ttl: 640 }),
            Record::File {
                path: "dev-signing-key".into(),
                mode: 0o600,
                contents: b"00ff\n".to_vec(),
            },
            Record::Upload {
                path: "archive/61636d65/run/0a/7231".into(),
                contents: vec![1, 2, 3],
            },
        ]
    }

    fn finish() -> Finish {
        Finish {
            revision: 9,
            next_lease_id: 6,
            created_at_ms: 1_700_000_000_000,
            uploads_included: true,
        }
    }

    /// Writes `records()` to a file in `dir`; returns its path.
    fn written(dir: &Path) -> std::path::PathBuf {
        let path = dir.join("backup");
        let mut writer = BackupWriter::new(File::create(&path).unwrap()).unwrap();
        for record in records() {
            writer.write(&record).unwrap();
        }
        writer.finish(finish()).unwrap();
        path
    }

    fn read_all(path: &Path) -> Result<(Header, Vec<Record>), FormatError> {
        let mut reader = BackupReader::open(path)?;
        let mut found = Vec::new();
        while let Some(record) = reader.next_record()? {
            found.push(record);
        }
        Ok((reader.header, found))
    }

    #[test]
    fn a_backup_reads_back_every_record_and_its_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = written(dir.path());
        let (header, found) = read_all(&path).unwrap();
        assert_eq!(found, records());
        assert_eq!(
            header.counts,
            Counts {
                keys: 2,
                leases: 1,
                files: 1,
                uploads: 1
            }
        );
        assert_eq!(
            (header.revision, header.next_lease_id, header.created_at_ms),
            (9, 6, 1_700_000_000_000)
        );
        assert!(header.uploads_included);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], MAGIC);
        assert!(
            bytes.len() < HEADER_BYTES + 500,
            "the body is compressed: {}",
            bytes.len()
        );
    }

    #[test]
    fn a_truncated_backup_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = written(dir.path());
        let bytes = std::fs::read(&path).unwrap();
        for keep in [bytes.len() - 1, HEADER_BYTES + 3, HEADER_BYTES, 100] {
            std::fs::write(&path, &bytes[..keep]).unwrap();
            assert!(
                matches!(read_all(&path), Err(FormatError::Truncated { .. })),
                "{keep} bytes: {:?}",
                read_all(&path)
            );
        }
        std::fs::write(&path, &bytes[..4]).unwrap();
        assert!(matches!(read_all(&path), Err(FormatError::NotABackup)));
    }

    #[test]
    fn a_flipped_byte_anywhere_is_refused_by_a_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let path = written(dir.path());
        let bytes = std::fs::read(&path).unwrap();
        for at in [
            16,
            40,
            72,
            90,
            120,
            HEADER_BYTES,
            HEADER_BYTES + 10,
            bytes.len() - 1,
        ] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            std::fs::write(&path, &damaged).unwrap();
            let refused = read_all(&path);
            assert!(
                matches!(
                    refused,
                    Err(FormatError::DamagedHeader
                        | FormatError::DamagedBody
                        | FormatError::Truncated { .. })
                ),
                "byte {at}: {refused:?}"
            );
        }
    }

    #[test]
    fn another_format_version_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = written(dir.path());
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let refused = read_all(&path).unwrap_err();
        assert!(matches!(refused, FormatError::UnsupportedVersion { found: 2 }));
        assert!(refused.to_string().contains("version 2"), "{refused}");
    }

    #[test]
    fn a_body_whose_counts_differ_from_the_header_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("backup");
        let mut writer = BackupWriter::new(File::create(&path).unwrap()).unwrap();
        writer.write(&records()[0]).unwrap();
        writer.counts.keys = 2;
        writer.finish(finish()).unwrap();
        assert!(matches!(read_all(&path), Err(FormatError::Malformed(_))));
    }

    #[test]
    fn records_survive_the_wire_encoding_and_a_cut_one_is_an_error() {
        let mut wire = Vec::new();
        for record in records().iter().chain([&Record::End]) {
            encode_record(record, &mut wire);
        }
        let mut input = wire.as_slice();
        let mut found = Vec::new();
        loop {
            match read_record(&mut input).unwrap() {
                Record::End => break,
                record => found.push(record),
            }
        }
        assert_eq!(found, records());
        let mut cut = &wire[..wire.len() / 2];
        let outcome = std::iter::from_fn(|| Some(read_record(&mut cut)))
            .find(|r| r.is_err() || matches!(r, Ok(Record::End)))
            .unwrap();
        assert!(matches!(outcome, Err(FormatError::Malformed(_))), "{outcome:?}");
    }
}
