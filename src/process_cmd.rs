//! `agentprocess process ...`: check, hash and map PROCESS.md files on disk ([`crate::process_map`]
//! for the map); import and list them on a server ([`crate::process_admin`]).

use crate::process_admin::{self, ImportArgs, ListArgs};
use crate::process_map::{self, MapArgs};
use agentprocess_process::{Issue, Offer, Process, parse_document, validate, warnings};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Exit code when every input is valid.
pub(crate) const EXIT_VALID: u8 = 0;
/// Exit code when at least one input is refused.
pub(crate) const EXIT_REFUSED: u8 = 1;
/// Exit code for a usage error: bad arguments, or a path that holds no PROCESS.md.
pub(crate) const EXIT_USAGE: u8 = 2;

#[derive(Debug, Subcommand)]
pub enum ProcessCommand {
    /// Check PROCESS.md files against every publication rule and print every issue.
    ///
    /// Exit status: 0 when all are valid, 1 when any is refused, 2 on a usage error.
    Check(CheckArgs),
    /// Print the content hash of a PROCESS.md (hex SHA-256 of the canonical frontmatter, a
    /// newline, then the body).
    Hash {
        /// A PROCESS.md file, or a folder holding one.
        path: PathBuf,
    },
    /// Draw the process map of a PROCESS.md as SVG, as a server shows it beside a published
    /// version: lanes per performer, a card per step, routes, approvals, joins and ends.
    ///
    /// A document that does not pass the publication rules gets no map: its issues go to
    /// stderr. Exit status: 0 with a map, 1 when refused, 2 on a usage error.
    Map(MapArgs),
    Import(ImportArgs),
    List(ListArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// PROCESS.md files, or folders each holding one (a folder's name must equal the process name).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Print one JSON object per input, one a line (fields in the long help, --help).
    ///
    /// Each object holds:
    ///   "path"      the file or folder as given
    ///   "name"      the process name; null when the file does not parse
    ///   "hash"      the content hash (hex SHA-256, spec 6.5); null when the file does not parse
    ///   "valid"     true when every publication rule holds
    ///   "issues"    each rule broken, as "where: what" texts; empty when valid
    ///   "warnings"  what a valid process allows but probably does not mean, as "where: what"
    ///   "requires"  {"systems": [...]}, what the process says it depends on; null when it names none
    #[arg(long, verbatim_doc_comment)]
    json: bool,
    #[command(flatten)]
    offer: OfferArgs,
}

/// What the publishing server offers, for checking as that server would.
#[derive(Debug, Args)]
pub struct OfferArgs {
    /// Profiles the server offers (repeatable). Default: every profile this server implements.
    #[arg(long = "profile", value_enum)]
    profiles: Vec<Profile>,
    /// Check as for a server that offers no profile at all.
    #[arg(long, conflicts_with = "profiles")]
    no_profiles: bool,
    /// Check as for a server that does not offer the `upload` tool (refuses `evidence: [file]`).
    #[arg(long)]
    no_upload: bool,
    /// Check as for a server that does not offer `send_event` (refuses `wait_for`).
    #[arg(long)]
    no_send_event: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Profile {
    #[value(name = "parallel-1")]
    Parallel,
    #[value(name = "check-1")]
    Check,
}

impl OfferArgs {
    pub(crate) fn offer(&self) -> Offer {
        let all_profiles = self.profiles.is_empty() && !self.no_profiles;
        Offer {
            parallel: all_profiles || self.profiles.contains(&Profile::Parallel),
            check: all_profiles || self.profiles.contains(&Profile::Check),
            upload: !self.no_upload,
            send_event: !self.no_send_event,
        }
    }
}

pub fn run(command: ProcessCommand) -> ExitCode {
    match command {
        ProcessCommand::Check(args) => check(&args),
        ProcessCommand::Hash { path } => hash(&path),
        ProcessCommand::Map(args) => process_map::map(&args),
        ProcessCommand::Import(args) => process_admin::import(args),
        ProcessCommand::List(args) => process_admin::list(args),
    }
}

/// One input read from disk: where it came from and the folder name it must match, if any.
pub(crate) struct Input {
    pub shown_path: String,
    pub bytes: Vec<u8>,
    pub folder_name: Option<String>,
}

/// Reads a PROCESS.md file or a folder holding one.
pub(crate) fn read_input(path: &Path) -> Result<Input, String> {
    let (file, folder_name) = if path.is_dir() {
        let name = path
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        (path.join("PROCESS.md"), name)
    } else {
        (path.to_path_buf(), None)
    };
    let bytes = std::fs::read(&file).map_err(|e| format!("{}: cannot read: {e}", file.display()))?;
    Ok(Input {
        shown_path: path.display().to_string(),
        bytes,
        folder_name,
    })
}

/// What checking one input found.
pub(crate) struct Checked {
    name: Option<String>,
    hash: Option<String>,
    pub issues: Vec<Issue>,
    /// What a valid process allows but probably does not mean.
    pub warnings: Vec<Issue>,
    /// The process, when it passes validation; `issues` may still hold the folder name rule.
    pub process: Option<Process>,
}

impl Checked {
    /// `requires.systems` of a valid process (spec §2.1).
    fn required_systems(&self) -> &[String] {
        self.process
            .as_ref()
            .map_or(&[], |p| p.required_systems.as_slice())
    }
}

/// Checks one input against every publication rule for `offer`, and its folder name.
pub(crate) fn check_one(input: &Input, offer: &Offer) -> Checked {
    let document = match parse_document(&input.bytes) {
        Ok(document) => document,
        Err(issues) => {
            return Checked {
                name: None,
                hash: None,
                issues,
                warnings: Vec::new(),
                process: None,
            };
        }
    };
    let name = document
        .frontmatter
        .get("name")
        .and_then(|n| n.as_str())
        .map(str::to_string);
    let hash = agentprocess_process::content_hash(&document.frontmatter, &document.body).to_hex();
    let (mut issues, warnings, process) = match validate(&document.frontmatter, offer) {
        Ok(process) => (Vec::new(), warnings(&process), Some(process)),
        Err(issues) => (issues, Vec::new(), None),
    };
    if let (Some(folder), Some(name)) = (&input.folder_name, &name)
        && folder != name
    {
        issues.push(Issue::new(
            "name",
            format!("{} does not equal the folder name {}", json!(name), json!(folder)),
        ));
    }
    Checked {
        name,
        hash: Some(hash),
        issues,
        warnings,
        process,
    }
}

fn check(args: &CheckArgs) -> ExitCode {
    let offer = args.offer.offer();
    let mut inputs = Vec::new();
    let mut unreadable = Vec::new();
    for path in &args.paths {
        match read_input(path) {
            Ok(input) => inputs.push(input),
            Err(message) => unreadable.push(message),
        }
    }
    if !unreadable.is_empty() {
        for message in unreadable {
            eprintln!("error: {message}");
        }
        return ExitCode::from(EXIT_USAGE);
    }
    let mut all_valid = true;
    for input in &inputs {
        let checked = check_one(input, &offer);
        let valid = checked.issues.is_empty();
        all_valid &= valid;
        if args.json {
            let issues: Vec<String> = checked.issues.iter().map(Issue::to_string).collect();
            let warnings: Vec<String> = checked.warnings.iter().map(Issue::to_string).collect();
            let requires = (!checked.required_systems().is_empty())
                .then(|| json!({ "systems": checked.required_systems() }));
            let line = json!({
                "path": input.shown_path,
                "name": checked.name,
                "hash": checked.hash,
                "valid": valid,
                "issues": issues,
                "warnings": warnings,
                "requires": requires,
            });
            println!("{line}");
        } else if valid {
            println!(
                "{}: valid ({})",
                input.shown_path,
                checked.hash.as_deref().unwrap_or_default()
            );
            if !checked.required_systems().is_empty() {
                println!("  requires systems: {}", checked.required_systems().join(", "));
            }
            for warning in &checked.warnings {
                println!("  warning: {warning}");
            }
        } else {
            println!("{}: refused, {} issue(s)", input.shown_path, checked.issues.len());
            for issue in &checked.issues {
                println!("  {issue}");
            }
        }
    }
    ExitCode::from(if all_valid { EXIT_VALID } else { EXIT_REFUSED })
}

fn hash(path: &Path) -> ExitCode {
    let input = match read_input(path) {
        Ok(input) => input,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match parse_document(&input.bytes) {
        Ok(document) => {
            println!(
                "{}",
                agentprocess_process::content_hash(&document.frontmatter, &document.body)
            );
            ExitCode::from(EXIT_VALID)
        }
        Err(issues) => {
            for issue in issues {
                eprintln!("{}: {issue}", input.shown_path);
            }
            ExitCode::from(EXIT_REFUSED)
        }
    }
}
