//! `agentprocess store restore`: a backup file, checked whole first, written into a staging
//! folder beside the target and renamed into place when complete, so a failure leaves nothing.

use super::format::{BackupReader, Header, Record};
use super::{Failure, sync_folder};
use agentprocess_store::{StoreError, StoreImport};
use anyhow::{Context, anyhow};
use clap::Args;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The backup file (written by `agentprocess store backup`).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The data folder to restore into: empty or missing.
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
}

pub fn run_restore(args: RestoreArgs) -> ExitCode {
    match restore(&args) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(failure) => failure.report("store restore"),
    }
}

fn restore(args: &RestoreArgs) -> Result<String, Failure> {
    let data = &args.data;
    refuse_a_folder_in_use(data)?;
    let mut reader = BackupReader::open(&args.file)
        .map_err(|e| Failure::Refused(anyhow!("{} cannot be restored: {e}", args.file.display())))?;
    let header = reader.header;
    let name = data
        .file_name()
        .ok_or_else(|| Failure::Refused(anyhow!("{} names no folder", data.display())))?;
    let parent = match data.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).with_context(|| format!("cannot create {}", parent.display()))?;
    let staging = parent.join(format!(
        ".{}.restoring-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    std::fs::create_dir(&staging).with_context(|| format!("cannot create {}", staging.display()))?;
    let restored = write_records(&mut reader, &staging).and_then(|()| {
        std::fs::rename(&staging, data)
            .and_then(|()| sync_folder(&parent))
            .with_context(|| format!("cannot move {} to {}", staging.display(), data.display()))
            .map_err(Failure::Failed)
    });
    if let Err(failure) = restored {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(failure);
    }
    Ok(summary(&header, data))
}

/// Restore writes only into an empty or missing folder.
fn refuse_a_folder_in_use(data: &Path) -> Result<(), Failure> {
    match std::fs::read_dir(data) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Failure::Refused(anyhow!(
                    "{} is not empty: restore writes only into an empty or missing folder",
                    data.display()
                )));
            }
            Ok(())
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(Failure::Refused(anyhow!(
            "{} cannot be used: {error}",
            data.display()
        ))),
    }
}

/// Writes every record of the backup under `staging`: the store, the data folder's files, the
/// uploads.
fn write_records(reader: &mut BackupReader, staging: &Path) -> Result<(), Failure> {
    let damaged = |error: StoreError| match error {
        StoreError::Corrupt(_) | StoreError::InvalidRequest(_) => {
            Failure::Refused(anyhow!("the backup is damaged: {error}"))
        }
        other => Failure::Failed(anyhow!("cannot write the store: {other}")),
    };
    let header = reader.header;
    let mut import = StoreImport::create(&staging.join("store"), header.revision, header.next_lease_id)
        .map_err(damaged)?;
    loop {
        let record = reader
            .next_record()
            .map_err(|e| Failure::Refused(anyhow!("the backup cannot be restored: {e}")))?;
        match record {
            None => break,
            Some(Record::Key(key)) => import.key(key).map_err(damaged)?,
            Some(Record::Lease(lease)) => import.lease(lease).map_err(damaged)?,
            Some(Record::File { path, mode, contents }) => {
                let target = staging.join(safe_relative(&path, true)?);
                write_file(&target, mode & 0o777, &contents)?;
            }
            Some(Record::Upload { path, contents }) => {
                let target = staging.join("uploads").join(safe_relative(&path, false)?);
                if let Some(folder) = target.parent() {
                    std::fs::create_dir_all(folder)
                        .with_context(|| format!("cannot create {}", folder.display()))?;
                }
                write_file(&target, 0o644, &contents)?;
            }
            Some(Record::End) => unreachable!("the reader ends at End"),
        }
    }
    import.finish().map_err(damaged)?;
    Ok(())
}

/// `path` as a relative path of plain names (one name when `single`): a backup never writes
/// outside the folder it is restored into.
fn safe_relative(path: &str, single: bool) -> Result<PathBuf, Failure> {
    let relative = Path::new(path);
    let plain = !path.is_empty() && relative.components().all(|c| matches!(c, Component::Normal(_)));
    if !plain || (single && relative.components().count() != 1) {
        return Err(Failure::Refused(anyhow!(
            "the backup is damaged: it names the path {path:?}"
        )));
    }
    Ok(relative.to_path_buf())
}

fn write_file(target: &Path, mode: u32, contents: &[u8]) -> Result<(), Failure> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(target)
        .with_context(|| format!("cannot create {}", target.display()))?;
    file.write_all(contents)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", target.display()))?;
    Ok(())
}

fn summary(header: &Header, data: &Path) -> String {
    let taken = std::time::UNIX_EPOCH + std::time::Duration::from_millis(header.created_at_ms);
    let mut summary = format!(
        "restored the backup taken {} at revision {} into {}: {} keys, {} leases, {} files, {} uploads",
        humantime::format_rfc3339_seconds(taken),
        header.revision,
        data.display(),
        header.counts.keys,
        header.counts.leases,
        header.counts.files,
        header.counts.uploads,
    );
    if !header.uploads_included {
        summary.push_str(
            "\nthe backup does not hold the uploads (they were in object storage): point `uploads` at that blob store",
        );
    }
    summary.push_str(&format!(
        "\nstart it with: agentprocess serve --data {}",
        data.display()
    ));
    summary
}
