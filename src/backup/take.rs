//! `agentprocess store backup`: the store first (from the running server through its control
//! socket, or opened here when the server is stopped), then the data folder's files and the
//! local uploads, into one file written as `FILE.partial` and renamed when complete.

use super::control::{Reached, request_export};
use super::format::{BackupWriter, Finish, Header, Record};
use super::{Failure, sync_folder};
use crate::serve_cmd::open_store;
use crate::settings::{FlagSettings, Settings};
use agentprocess_gateway::DEFAULT_DATA_DIR;
use anyhow::{Context, anyhow};
use clap::Args;
use std::ffi::OsString;
use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The uploads folder in a data folder, when `uploads` is not set.
const LOCAL_UPLOADS: &str = "uploads";
/// The page cache of a stopped server's store opened for a backup.
const EXPORT_CACHE_BYTES: u64 = 32 << 20;
/// Files being written by the blob store or the server (renamed into place when whole).
const PARTIAL_SUFFIX: &str = ".partial";

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The server's data folder.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_DATA_DIR)]
    data: PathBuf,
    /// The backup file to write (as FILE.partial until it is complete). Not inside the data folder.
    #[arg(long, value_name = "FILE")]
    to: PathBuf,
    /// The server's TOML settings file (its store and uploads settings apply).
    #[arg(long, value_name = "FILE", env = "AGENTPROCESS_CONFIG")]
    config: Option<PathBuf>,
}

pub fn run_backup(args: BackupArgs) -> ExitCode {
    match backup(&args) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(failure) => failure.report("store backup"),
    }
}

/// Where the store's snapshot came from.
#[derive(Debug, Clone, Copy)]
enum Source {
    RunningServer,
    StoppedStore,
}

fn backup(args: &BackupArgs) -> Result<String, Failure> {
    let flags = FlagSettings {
        data_dir: Some(args.data.clone()),
        ..FlagSettings::default()
    };
    let settings = Settings::load(args.config.as_deref(), flags)
        .map_err(|e| Failure::Refused(anyhow!("the settings cannot be used: {e}")))?;
    let data_dir = settings.data_dir.clone();
    if !data_dir.join("store").is_dir() {
        return Err(Failure::Refused(anyhow!(
            "no store in {}: pass --data with a server's data folder",
            data_dir.join("store").display()
        )));
    }
    refuse_a_target_inside(&data_dir, &args.to)?;
    let mut partial_name = args.to.file_name().map(OsString::from).unwrap_or_default();
    partial_name.push(PARTIAL_SUFFIX);
    let partial = args.to.with_file_name(partial_name);
    let file = File::create(&partial).with_context(|| format!("cannot create {}", partial.display()))?;
    let written = write_backup(&settings, file).and_then(|written| {
        std::fs::rename(&partial, &args.to)
            .and_then(|()| sync_folder(parent_of(&args.to)))
            .with_context(|| format!("cannot rename {} to {}", partial.display(), args.to.display()))?;
        Ok(written)
    });
    let (header, source) = match written {
        Ok(written) => written,
        Err(error) => {
            let _ = std::fs::remove_file(&partial);
            return Err(Failure::Failed(error));
        }
    };
    let from = match source {
        Source::RunningServer => "from the running server",
        Source::StoppedStore => "from the stopped server's store",
    };
    let bytes = std::fs::metadata(&args.to).map_or(0, |m| m.len());
    let mut summary = format!(
        "backed up {} at revision {} ({from}) to {}: {} keys, {} leases, {} files, {} uploads, {bytes} bytes",
        data_dir.display(),
        header.revision,
        args.to.display(),
        header.counts.keys,
        header.counts.leases,
        header.counts.files,
        header.counts.uploads,
    );
    if let Some(uploads) = &settings.uploads {
        summary.push_str(&format!(
            "\nthe uploads and the archive of ended runs ({uploads}) are not in the backup: back that blob store up by its own means"
        ));
    }
    Ok(summary)
}

/// The folder a path is in (`.` for a bare file name).
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// A backup file inside the data folder would be copied into the next backup: refused.
fn refuse_a_target_inside(data_dir: &Path, target: &Path) -> Result<(), Failure> {
    let folder = parent_of(target);
    let folder = folder
        .canonicalize()
        .map_err(|e| Failure::Refused(anyhow!("the folder of {} cannot be used: {e}", target.display())))?;
    let data = data_dir
        .canonicalize()
        .with_context(|| format!("cannot read {}", data_dir.display()))?;
    if folder.starts_with(&data) {
        return Err(Failure::Refused(anyhow!(
            "{} is inside the data folder {}: write the backup elsewhere",
            target.display(),
            data_dir.display()
        )));
    }
    Ok(())
}

/// Writes the whole backup into `file`: the store's snapshot first, then the data folder's
/// files and the uploads, so that everything the snapshot names is there.
fn write_backup(settings: &Settings, file: File) -> anyhow::Result<(Header, Source)> {
    let created_at_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX));
    let mut writer = BackupWriter::new(file).context("cannot write the backup")?;
    let data_dir = &settings.data_dir;
    let (revision, next_lease_id, source) = match request_export(data_dir)? {
        Reached::Server(mut stream) => {
            loop {
                match stream.next_record().context("reading the server's snapshot")? {
                    Record::End => break,
                    record @ (Record::Key(_) | Record::Lease(_)) => {
                        writer.write(&record).context("cannot write the backup")?
                    }
                    other => anyhow::bail!("the server sent {other:?} in its snapshot"),
                }
            }
            (stream.revision, stream.next_lease_id, Source::RunningServer)
        }
        Reached::NoServer => {
            let (revision, next_lease_id) = export_stopped_store(settings, &mut writer)?;
            (revision, next_lease_id, Source::StoppedStore)
        }
    };
    for record in data_folder_files(data_dir)? {
        writer.write(&record).context("cannot write the backup")?;
    }
    let uploads_included = settings.uploads.is_none();
    if uploads_included {
        let root = data_dir.join(LOCAL_UPLOADS);
        if root.is_dir() {
            copy_uploads(&root, &root, &mut writer)?;
        }
    }
    let header = writer
        .finish(Finish {
            revision,
            next_lease_id,
            created_at_ms,
            uploads_included,
        })
        .context("cannot write the backup")?;
    Ok((header, source))
}

/// Opens the stopped server's store and writes its keys and leases. One pass in key order gains
/// nothing from a large page cache: the store is opened with a small one.
fn export_stopped_store(settings: &Settings, writer: &mut BackupWriter) -> anyhow::Result<(i64, i64)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let mut settings = settings.clone();
    settings.store.cache_bytes = settings.store.cache_bytes.min(EXPORT_CACHE_BYTES);
    let store = runtime.block_on(async { open_store(&settings).await.map(|(store, _)| store) })?;
    let exported = store.export().map_err(anyhow::Error::from).and_then(|export| {
        let leases =
            export.for_each_key(|key| writer.write(&Record::Key(key)).context("cannot write the backup"))?;
        for lease in leases {
            writer
                .write(&Record::Lease(lease))
                .context("cannot write the backup")?;
        }
        Ok((export.revision(), export.next_lease_id()))
    });
    runtime.block_on(store.close());
    exported
}

/// The regular files at the top of the data folder (the dev signing key, the file link key, the
/// recorded URL), with their permissions; files being written are left out.
fn data_folder_files(data_dir: &Path) -> anyhow::Result<Vec<Record>> {
    let mut records = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(data_dir)
        .with_context(|| format!("cannot list {}", data_dir.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("cannot list {}", data_dir.display()))?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            anyhow::bail!("{} holds a file whose name is not UTF-8", data_dir.display());
        };
        if !entry.file_type()?.is_file() || name.ends_with(PARTIAL_SUFFIX) {
            continue;
        }
        let path = entry.path();
        let contents = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let mode = entry.metadata()?.permissions().mode() & 0o777;
        records.push(Record::File {
            path: name.to_owned(),
            mode,
            contents,
        });
    }
    Ok(records)
}

/// Writes every object under `folder` (paths relative to `root`), in path order. An object
/// removed while the copy runs is left out; one being written (`.partial`) is not copied.
fn copy_uploads(root: &Path, folder: &Path, writer: &mut BackupWriter) -> anyhow::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(folder)
        .with_context(|| format!("cannot list {}", folder.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("cannot list {}", folder.display()))?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_uploads(root, &path, writer)?;
            continue;
        }
        if !kind.is_file() || path.to_string_lossy().ends_with(PARTIAL_SUFFIX) {
            continue;
        }
        let contents = match std::fs::read(&path) {
            Ok(contents) => contents,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => return Err(error).with_context(|| format!("cannot read {}", path.display())),
        };
        let relative = path
            .strip_prefix(root)
            .expect("walked from the root")
            .to_str()
            .ok_or_else(|| anyhow!("{} has a name that is not UTF-8", path.display()))?
            .to_owned();
        writer
            .write(&Record::Upload {
                path: relative,
                contents,
            })
            .context("cannot write the backup")?;
    }
    Ok(())
}
