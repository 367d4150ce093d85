//! `agentprocess runs|work|escalations ...`: an operator's commands on a running server's runs,
//! over the admin API (`/admin/v1/runs`, `/admin/v1/work`, `/admin/v1/escalations`) with the
//! types of [`agentprocess_gateway::admin_ops_model`] and [`agentprocess_gateway::admin_model`],
//! through the client of [`crate::process_admin`].
//!
//! ```text
//! runs_cmd/list.rs          runs list
//! runs_cmd/cancel.rs        runs cancel
//! runs_cmd/inspect.rs       runs show, runs history
//! runs_cmd/work.rs          work list
//! runs_cmd/escalations.rs   escalations list
//! runs_cmd/table.rs         aligned tables, ages (4m12s) and durations (10m) for people
//! ```
//!
//! Exit status, the same for every verb: 0 done; 1 the server refused the request (its code,
//! message and every issue on stderr); 2 a usage error, a token refused or without the rights
//! (401, 403), or a server that cannot be reached or failed.

mod cancel;
mod escalations;
mod inspect;
mod list;
mod table;
mod work;

use crate::process_admin::{AdminClient, Failure};
use agentprocess_gateway::auth::dev::{DevKey, DevTokenRequest, recorded_server_url};
use agentprocess_gateway::{DEFAULT_PUBLIC_URL, IdentityKind, resource_uri};
use clap::{Args, Subcommand};
use serde::de::DeserializeOwned;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Exit code when done.
const EXIT_DONE: u8 = 0;
/// Exit code when the server refused the request.
const EXIT_REFUSED: u8 = 1;
/// Exit code for a usage error, a refused token, or a server that cannot be reached or failed.
const EXIT_USAGE: u8 = 2;
/// The person a token minted with `--data` names.
const DATA_OPERATOR: &str = "operator@localhost";
/// How long a token minted with `--data` lives: one command.
const DATA_TOKEN_TTL: Duration = Duration::from_secs(600);

/// The exit status every verb documents.
const EXIT_STATUS_HELP: &str = "Exit status: 0 done; 1 the server refused (its code, message and \
every issue on stderr); 2 a usage error, a token refused or without the rights (401, 403), or a \
server that cannot be reached or failed.";

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List runs: list_runs' filters and paging, plus --overdue, --mode and --stuck.
    ///
    /// Runs as list_runs shows them to an operator, in start order, a page at a time (--cursor
    /// for the next). With --stuck, only runs with an agent step ready and unclaimed for longer
    /// than that, one line per such step, the longest waiting first.
    #[command(after_help = EXIT_STATUS_HELP)]
    List(list::ListArgs),
    /// Cancel a run with a reason everyone who reads the run then sees (spec §3.5).
    ///
    /// Every rule of the protocol's cancel holds: an ended run is refused (conflict, run_ended),
    /// as is a run of another organization (not_found).
    #[command(after_help = EXIT_STATUS_HELP)]
    Cancel(cancel::CancelArgs),
    /// Show a run as an operator sees it: state, each step with who holds its claim until when
    /// and how often its lease expired, and the open work items.
    #[command(after_help = EXIT_STATUS_HELP)]
    Show(inspect::ShowArgs),
    /// Every change of a run, oldest first: when, who, and what (claims, submissions, check
    /// verdicts, escalations and returns with their notes, decisions, timers, events, the end),
    /// archived runs included.
    #[command(after_help = EXIT_STATUS_HELP)]
    History(inspect::HistoryArgs),
}

#[derive(Debug, Subcommand)]
pub enum WorkCommand {
    /// List the agent steps that are ready and not claimed, oldest first, each with how many
    /// times a claim of it lapsed.
    #[command(after_help = EXIT_STATUS_HELP)]
    List(work::WorkListArgs),
}

#[derive(Debug, Subcommand)]
pub enum EscalationsCommand {
    /// List the open escalations, oldest first: run, step, who escalated and their note.
    ///
    /// Needs a person operator's token: only people decide escalations.
    #[command(after_help = EXIT_STATUS_HELP)]
    List(escalations::EscalationsListArgs),
}

pub fn run_runs(command: RunsCommand) -> ExitCode {
    match command {
        RunsCommand::List(args) => finish("runs list", list::run(&args)),
        RunsCommand::Cancel(args) => finish("runs cancel", cancel::run(&args)),
        RunsCommand::Show(args) => finish("runs show", inspect::show(&args)),
        RunsCommand::History(args) => finish("runs history", inspect::history(&args)),
    }
}

pub fn run_work(command: WorkCommand) -> ExitCode {
    match command {
        WorkCommand::List(args) => finish("work list", work::run(&args)),
    }
}

pub fn run_escalations(command: EscalationsCommand) -> ExitCode {
    match command {
        EscalationsCommand::List(args) => finish("escalations list", escalations::run(&args)),
    }
}

/// Where the server is and who calls it: a token, or the server's data folder to mint one.
#[derive(Debug, Args)]
pub struct Connection {
    /// The server's URL. Default: the URL the server recorded in --data, else
    /// http://127.0.0.1:8080.
    #[arg(long, value_name = "URL", env = "AGENTPROCESS_URL")]
    server: Option<String>,
    /// An operator's bearer token. For a server in dev mode, mint one with
    /// `agentprocess token --org ORG --person EMAIL --operator`, or pass --data and --org.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "AGENTPROCESS_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
    /// A dev-mode server's data folder: mint an operator token (a person, operator@localhost)
    /// with its dev signing key, for the URL it recorded there, instead of using --token.
    #[arg(long, value_name = "DIR", requires = "org")]
    data: Option<PathBuf>,
    /// The organization a token minted with --data acts in.
    #[arg(long, value_name = "ORG", requires = "data")]
    org: Option<String>,
}

impl Connection {
    /// A client of the server, with the given token or one minted with the data folder's key.
    fn client(&self) -> Result<AdminClient, Failure> {
        let Some(data) = &self.data else {
            let server = self.server.as_deref().unwrap_or(DEFAULT_PUBLIC_URL);
            return AdminClient::connect(server, self.token.as_deref());
        };
        let organization = self.org.clone().unwrap_or_default();
        if organization.trim().is_empty() {
            return Err(Failure::Usage("--org needs a non-empty organization".into()));
        }
        let key = match DevKey::load(data) {
            Ok(Some(key)) => key,
            Ok(None) => {
                return Err(Failure::Usage(format!(
                    "no dev signing key in {}: pass --data with the folder of a server in dev mode, or --token",
                    data.display()
                )));
            }
            Err(e) => return Err(Failure::Usage(format!("dev signing key: {e}"))),
        };
        let recorded =
            recorded_server_url(data).map_err(|e| Failure::Usage(format!("the server's URL: {e}")))?;
        let server = match (&self.server, &recorded) {
            (Some(server), _) => server.clone(),
            (None, Some(recorded)) => recorded.clone(),
            (None, None) => DEFAULT_PUBLIC_URL.to_owned(),
        };
        // The token names the server's public URL, which it recorded; else the URL called.
        let audience = resource_uri(recorded.as_deref().unwrap_or(&server));
        let token = key.mint(
            &audience,
            &DevTokenRequest {
                organization,
                kind: IdentityKind::Person {
                    email: DATA_OPERATOR.to_owned(),
                    groups: Vec::new(),
                },
                operator: true,
                ttl: DATA_TOKEN_TTL,
            },
        );
        AdminClient::connect(&server, Some(&token))
    }
}

/// What a verb printed, or why it could not.
type Outcome = Result<(), Failure>;

/// The exit status of `outcome`, its failure written to stderr.
fn finish(verb: &str, outcome: Outcome) -> ExitCode {
    let Err(failure) = outcome else {
        return ExitCode::from(EXIT_DONE);
    };
    match &failure {
        Failure::Refused {
            code: Some(code),
            message,
            issues,
            ..
        } => {
            eprintln!("agentprocess {verb}: refused ({code}): {message}");
            issues.iter().for_each(|issue| eprintln!("{issue}"));
        }
        _ => eprintln!("agentprocess {verb}: {failure}"),
    }
    ExitCode::from(exit_code(&failure))
}

/// 1 for what the server refused; 2 for what a better command or token would fix, or the server.
fn exit_code(failure: &Failure) -> u8 {
    match failure {
        Failure::Refused { .. } | Failure::DraftOnly { .. } => EXIT_REFUSED,
        Failure::Usage(_)
        | Failure::Unreachable { .. }
        | Failure::Unauthenticated(_)
        | Failure::Forbidden(_)
        | Failure::ServerFailed(_) => EXIT_USAGE,
    }
}

/// A GET of `path` (with its query) as JSON: the answer as it came, and read as `T`.
fn get<T: DeserializeOwned>(client: &AdminClient, path: &str) -> Result<(serde_json::Value, T), Failure> {
    let answer = client.call(reqwest::Method::GET, path, Vec::new())?;
    let read = serde_json::from_value(answer.clone())
        .map_err(|e| Failure::ServerFailed(format!("the answer to GET {path} does not read: {e}")))?;
    Ok((answer, read))
}

/// `path?query`, or `path` for an empty query.
fn with_query(path: &str, query: &str) -> String {
    if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    }
}
