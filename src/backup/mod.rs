//! `agentprocess store backup` and `store restore`: a consistent backup of `serve`'s data folder
//! (its store at one revision, the files that make tokens and signed links work, the local
//! uploads), taken while the server runs, and a new data folder restored from one.

pub mod control;
pub mod format;
mod restore;
mod take;

pub use restore::{RestoreArgs, run_restore};
pub use take::{BackupArgs, run_backup};

use std::process::ExitCode;

/// How a backup or restore did not happen.
#[derive(Debug)]
enum Failure {
    /// What was asked cannot be done (no store there, a folder not empty, a damaged file): exit 2.
    Refused(anyhow::Error),
    /// It could be done, and failed (a write, the server's answer): exit 1.
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Self {
        Failure::Failed(error)
    }
}

impl Failure {
    /// Prints the failure after `command` and returns its exit code.
    fn report(self, command: &str) -> ExitCode {
        match self {
            Failure::Refused(error) => {
                eprintln!("agentprocess {command}: {error:#}");
                ExitCode::from(2)
            }
            Failure::Failed(error) => {
                eprintln!("agentprocess {command}: {error:#}");
                ExitCode::FAILURE
            }
        }
    }
}

/// Syncs a folder, so that the files renamed into it stay after a crash.
fn sync_folder(folder: &std::path::Path) -> std::io::Result<()> {
    std::fs::File::open(folder)?.sync_all()
}
