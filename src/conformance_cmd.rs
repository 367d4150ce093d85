//! `agentprocess conformance`: check any Agent Process server over MCP against core-2 and its
//! profiles, and write the processes the checks use.

use crate::conformance::client::Revision;
use crate::conformance::{self, Clock, Context, Identities, processes, report};
use crate::process_admin::{AdminClient, PublishStop, publish_with_bindings};
use agentprocess_gateway::auth::dev::{DevKey, DevTokenRequest, recorded_server_url};
use agentprocess_gateway::{IdentityKind, resource_uri};
use anyhow::{Context as _, anyhow, bail};
use clap::{Args, Subcommand};
use serde::Deserialize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Every check passed (some may not have run).
const EXIT_PASSED: u8 = 0;
/// At least one check failed.
const EXIT_FAILED_CHECKS: u8 = 1;
/// The runner could not run: bad arguments, no server, tokens refused.
const EXIT_CANNOT_RUN: u8 = 2;
/// How long tokens minted with --data or --dev-key live.
const MINTED_TTL: Duration = Duration::from_secs(2 * 3_600);

/// Check a server against the Agent Process protocol (core-2, parallel-1, check-1).
///
/// The runner brings its own processes (`conformance processes --out DIR` writes them with the
/// role bindings they need); the server must have them published. It acts as two agents, an
/// operator, a person in every group the processes bind, a person in none, and (optionally) an
/// agent of another organization: give their tokens in a JSON file (--tokens) or as flags, or for
/// a server in dev mode mint them with --data or --dev-key.
///
/// Checks that need time to pass run when the server offers our test clock (its admin API's
/// `/admin/v1/clock`); otherwise they are reported "not run", never passed.
///
/// Exit status: 0 when no check failed, 1 when one did, 2 when the runner could not run.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ConformanceArgs {
    #[command(subcommand)]
    command: Option<ConformanceCommand>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum ConformanceCommand {
    /// Write the runner's processes to DIR/NAME/PROCESS.md and their role bindings to
    /// DIR/bindings.json, for the operator of the server to import and publish.
    Processes {
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The server's base URL; the MCP endpoint is URL/mcp.
    #[arg(long, value_name = "URL", env = "AGENTPROCESS_URL")]
    url: Option<String>,
    /// A JSON file of tokens: { "agent", "secondAgent", "operator", "person": { "token", "email" },
    /// "outsider": { "token", "email" }, "foreignAgent" }. Flags override it.
    #[arg(long, value_name = "FILE")]
    tokens: Option<PathBuf>,
    /// The first agent's bearer token.
    #[arg(long, value_name = "TOKEN")]
    agent_token: Option<String>,
    /// A second agent's token (of the same organization).
    #[arg(long, value_name = "TOKEN")]
    second_agent_token: Option<String>,
    /// An operator's token (a person with operator rights).
    #[arg(long, value_name = "TOKEN")]
    operator_token: Option<String>,
    /// A person in every group the runner's processes bind.
    #[arg(long, value_name = "TOKEN", requires = "person_email")]
    person_token: Option<String>,
    /// The person value the server knows that person by (with `person.format: email`, their email).
    #[arg(long, value_name = "EMAIL")]
    person_email: Option<String>,
    /// A person in none of those groups.
    #[arg(long, value_name = "TOKEN", requires = "outsider_email")]
    outsider_token: Option<String>,
    #[arg(long, value_name = "EMAIL")]
    outsider_email: Option<String>,
    /// An agent of another organization, for the isolation check.
    #[arg(long, value_name = "TOKEN")]
    foreign_agent_token: Option<String>,
    /// A dev-mode server's data folder: mint every identity with its dev signing key.
    #[arg(long, value_name = "DIR", conflicts_with = "dev_key")]
    data: Option<PathBuf>,
    /// A cluster's dev signing key file: mint every identity with it, for --public-url.
    #[arg(long, value_name = "PATH")]
    dev_key: Option<PathBuf>,
    /// The URL minted tokens name (default: the one the server recorded in --data, else --url).
    #[arg(long, value_name = "URL")]
    public_url: Option<String>,
    /// The organization minted identities act in; the other organization is ORG-other.
    #[arg(long, value_name = "ORG", default_value = "conformance")]
    org: String,
    /// Import, bind and publish the runner's processes first, through the admin API (an
    /// agentprocess server), as the operator.
    #[arg(long)]
    publish: bool,
    /// The MCP revision to speak.
    #[arg(long, value_name = "REVISION", value_enum, default_value = "2025-11-25")]
    mcp_revision: Revision,
    /// Never move the server's clock: checks that need time are not run.
    #[arg(long)]
    no_clock: bool,
    /// Also write the results as JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

pub fn run(args: ConformanceArgs) -> ExitCode {
    if let Some(ConformanceCommand::Processes { out }) = args.command {
        return match processes::write_all(&out) {
            Ok(()) => {
                println!(
                    "wrote {} processes and bindings.json to {}",
                    processes::PROCESSES.len(),
                    out.display()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("agentprocess conformance processes: {}: {e}", out.display());
                ExitCode::from(EXIT_CANNOT_RUN)
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("agentprocess conformance: cannot start: {e}");
            return ExitCode::from(EXIT_CANNOT_RUN);
        }
    };
    match runtime.block_on(check_server(&args.run)) {
        Ok(failed) => ExitCode::from(if failed { EXIT_FAILED_CHECKS } else { EXIT_PASSED }),
        Err(e) => {
            eprintln!("agentprocess conformance: {e:#}");
            ExitCode::from(EXIT_CANNOT_RUN)
        }
    }
}

/// Runs every check and writes the reports; whether any check failed.
async fn check_server(args: &RunArgs) -> anyhow::Result<bool> {
    let url = args
        .url
        .clone()
        .context("--url is required: the server's base URL (its MCP endpoint is URL/mcp)")?;
    let url = url.trim_end_matches('/').to_owned();
    let identities = identities(args, &url)?;
    if args.publish {
        let server = url.clone();
        let operator = identities.operator.clone();
        tokio::task::spawn_blocking(move || publish_all(&server, &operator))
            .await
            .context("publishing stopped")??;
    }
    let clock = if args.no_clock {
        None
    } else {
        let clock = Clock::new(&url, &identities.operator);
        clock.advance(0).await.ok().map(|_| clock)
    };
    let mut ctx = Context::connect(&format!("{url}/mcp"), args.mcp_revision, &identities, clock)
        .await
        .map_err(|e| anyhow!("cannot connect to {url}/mcp: {e}"))?;
    let results = conformance::checks::run_all(&mut ctx).await;
    let calls = ctx.shared.calls.load(std::sync::atomic::Ordering::Relaxed);
    print!(
        "{}",
        report::table(&results, &url, args.mcp_revision.as_str(), calls)
    );
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report::json(&results, &url)).expect("a report serializes");
        std::fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.junit {
        std::fs::write(path, report::junit(&results, &url))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let (_, failed, _) = report::counts(&results);
    Ok(failed > 0)
}

/// The tokens file's shape.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TokensFile {
    agent: Option<String>,
    second_agent: Option<String>,
    operator: Option<String>,
    person: Option<PersonToken>,
    outsider: Option<PersonToken>,
    foreign_agent: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PersonToken {
    token: String,
    email: String,
}

/// The identities: from flags, the tokens file, or minted with a dev key, in that order.
fn identities(args: &RunArgs, url: &str) -> anyhow::Result<Identities> {
    let file: TokensFile = match &args.tokens {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_str(&text).with_context(|| format!("{} is not a tokens file", path.display()))?
        }
        None => TokensFile::default(),
    };
    let minter = minter(args, url)?;
    let org = args.org.trim();
    if org.is_empty() {
        bail!("--org needs a non-empty organization");
    }
    let person_email = format!("member@{org}.test");
    let outsider_email = format!("outsider@{org}.test");
    let mint = |organization: &str, kind: IdentityKind, operator: bool| -> anyhow::Result<String> {
        let (key, audience) = minter.as_ref().context(
            "no token for every identity: give --tokens FILE or the --*-token flags, or --data / --dev-key to mint them",
        )?;
        Ok(key.mint(
            audience,
            &DevTokenRequest {
                organization: organization.to_owned(),
                kind,
                operator,
                ttl: MINTED_TTL,
            },
        ))
    };
    let agent_kind = |id: &str| IdentityKind::Agent { id: id.to_owned() };
    let pick = |flag: &Option<String>, from_file: &Option<String>| flag.clone().or_else(|| from_file.clone());
    let agent = match pick(&args.agent_token, &file.agent) {
        Some(token) => token,
        None => mint(org, agent_kind("conformance-agent-1"), false)?,
    };
    let second_agent = match pick(&args.second_agent_token, &file.second_agent) {
        Some(token) => token,
        None => mint(org, agent_kind("conformance-agent-2"), false)?,
    };
    let operator = match pick(&args.operator_token, &file.operator) {
        Some(token) => token,
        None => mint(
            org,
            IdentityKind::Person {
                email: format!("operator@{org}.test"),
                groups: Vec::new(),
            },
            true,
        )?,
    };
    let (person, person_email) = match (&args.person_token, &args.person_email, &file.person) {
        (Some(token), Some(email), _) => (token.clone(), email.clone()),
        (_, _, Some(person)) => (person.token.clone(), person.email.clone()),
        _ => (
            mint(
                org,
                IdentityKind::Person {
                    email: person_email.clone(),
                    groups: processes::all_groups(),
                },
                false,
            )?,
            person_email,
        ),
    };
    let (outsider, outsider_email) = match (&args.outsider_token, &args.outsider_email, &file.outsider) {
        (Some(token), Some(email), _) => (token.clone(), email.clone()),
        (_, _, Some(outsider)) => (outsider.token.clone(), outsider.email.clone()),
        _ => (
            mint(
                org,
                IdentityKind::Person {
                    email: outsider_email.clone(),
                    groups: vec!["conformance-outsiders".to_owned()],
                },
                false,
            )?,
            outsider_email,
        ),
    };
    let foreign_agent = match pick(&args.foreign_agent_token, &file.foreign_agent) {
        Some(token) => Some(token),
        None if minter.is_some() => Some(mint(
            &format!("{org}-other"),
            agent_kind("conformance-agent-1"),
            false,
        )?),
        None => None,
    };
    Ok(Identities {
        agent,
        second_agent,
        operator,
        person,
        person_email,
        outsider,
        outsider_email,
        foreign_agent,
    })
}

/// The dev key and the URL its tokens name, when --data or --dev-key is given.
fn minter(args: &RunArgs, url: &str) -> anyhow::Result<Option<(DevKey, String)>> {
    if let Some(data) = &args.data {
        let key = DevKey::load(data)
            .with_context(|| format!("reading the dev signing key in {}", data.display()))?
            .with_context(|| {
                format!(
                    "no dev signing key in {}: is it a dev-mode server's data folder?",
                    data.display()
                )
            })?;
        let recorded = recorded_server_url(data)
            .with_context(|| format!("reading the server's URL in {}", data.display()))?;
        let audience = args
            .public_url
            .clone()
            .or(recorded)
            .unwrap_or_else(|| url.to_owned());
        return Ok(Some((key, resource_uri(&audience))));
    }
    if let Some(path) = &args.dev_key {
        let key = DevKey::load_file(path)
            .with_context(|| format!("reading the dev signing key {}", path.display()))?
            .with_context(|| format!("no dev signing key at {}", path.display()))?;
        let audience = args.public_url.clone().unwrap_or_else(|| url.to_owned());
        return Ok(Some((key, resource_uri(&audience))));
    }
    Ok(None)
}

/// Imports, binds and publishes every process of the runner; content the server already has
/// published is fine, and a process the server refuses to import (one needing a profile it does
/// not offer) is left out, the checks that need it then reported "not run".
fn publish_all(server: &str, operator: &str) -> anyhow::Result<()> {
    let client = AdminClient::connect(server, Some(operator)).map_err(|f| anyhow!("{f}"))?;
    for (name, text) in processes::PROCESSES {
        match publish_with_bindings(&client, name, text, &processes::bindings(name)) {
            Ok(_) => {}
            Err(PublishStop::Import(failure)) => {
                eprintln!("agentprocess conformance: {name} not imported: {failure}");
            }
            Err(stop) => return Err(anyhow!("{name}: {stop}")),
        }
    }
    Ok(())
}
