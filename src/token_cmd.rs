//! `agentprocess token ...`: mint a dev bearer token with the local dev signing key.

use agentprocess_gateway::auth::dev::{
    DEV_KEY_FILE, DevKey, DevTokenRequest, SERVER_URL_FILE, parse_ttl, recorded_server_url,
};
use agentprocess_gateway::{DEFAULT_DATA_DIR, DEFAULT_PUBLIC_URL, IdentityKind, resource_uri};
use clap::{ArgGroup, Args};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Exit code for a usage error, a folder without server data, or a key that cannot be read.
const EXIT_FAILED: u8 = 2;

/// What operator rights give an agent, and what they never do, as `--operator` explains.
const AGENT_OPERATOR_RIGHTS: &str = "operator rights give this agent the admin API (import, bind \
and publish processes; webhooks; dead letters); send_event needs none, every agent may send \
events; and an agent can never decide or cancel, whatever its rights: those are for people";

/// Print a dev bearer token, for a server running without an identity provider.
///
/// The token is signed with the dev key in the data folder and names the server's URL as issuer
/// and audience, so only the server with that data folder and URL accepts it. A server in dev
/// mode records its URL in its data folder, so `--data` is enough: run this after the server
/// started. With `--url`, the token is minted for that URL instead, and a data folder without a
/// key gets a new one (for a server started later with the same `--data` and URL).
///
/// For a cluster, `--dev-key PATH` names the key file its gateways were started with; the token
/// is for `--url`, by default the public URL every gateway uses when none is given.
///
/// `--operator` gives a person the operator's rights: the admin API, send_event, cancel, and the
/// organization's escalations to decide. It gives an agent the admin API only: every agent may
/// call send_event anyway, and no agent ever decides or cancels.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("actor").required(true).args(["agent", "person"])))]
pub struct TokenArgs {
    /// The server's data folder, which holds the dev signing key and the server's URL.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_DATA_DIR)]
    data: PathBuf,
    /// A cluster's dev signing key file, the one its gateways were started with (`--dev-key`);
    /// the token is for `--url`, by default the gateways' default public URL.
    #[arg(long, value_name = "PATH", conflicts_with = "data")]
    dev_key: Option<PathBuf>,
    /// The organization the caller acts in.
    #[arg(long, value_name = "ORG")]
    org: String,
    /// Mint a token for an agent with this id.
    #[arg(long, value_name = "ID")]
    agent: Option<String>,
    /// Mint a token for the person with this email.
    #[arg(long, value_name = "EMAIL")]
    person: Option<String>,
    /// A group the person belongs to (repeatable).
    #[arg(long = "group", value_name = "G", requires = "person")]
    groups: Vec<String>,
    /// Give the caller operator rights (for an agent: the admin API; never decide or cancel).
    #[arg(long)]
    operator: bool,
    /// How long the token lives: a number followed by m, h or d.
    #[arg(long, value_name = "DURATION", default_value = "12h", value_parser = parse_ttl_arg)]
    ttl: Duration,
    /// The server's public URL (its issuer and audience). Default: the URL the server recorded
    /// in --data when it started.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
}

fn parse_ttl_arg(text: &str) -> Result<Duration, String> {
    parse_ttl(text)
}

pub fn run(args: TokenArgs) -> ExitCode {
    let kind = match (args.agent, args.person) {
        (Some(id), None) if !id.trim().is_empty() => IdentityKind::Agent { id },
        (None, Some(email)) if looks_like_email(&email) => IdentityKind::Person {
            email,
            groups: args.groups,
        },
        (None, Some(email)) => return fail(&format!("--person {email:?} is not an email address")),
        _ => return fail("--agent needs a non-empty id"),
    };
    if args.org.trim().is_empty() {
        return fail("--org needs a non-empty organization");
    }
    let (url, key) = match (&args.dev_key, &args.url) {
        (Some(path), url) => {
            let url = resource_uri(url.as_deref().unwrap_or(DEFAULT_PUBLIC_URL));
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return fail(&format!("--url {url:?} is not an http(s) URL"));
            }
            match cluster_key(path) {
                Ok(key) => (url, key),
                Err(message) => return fail(&message),
            }
        }
        (None, Some(url)) => {
            let url = resource_uri(url);
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return fail(&format!("--url {url:?} is not an http(s) URL"));
            }
            match key_for_given_url(&args.data) {
                Ok(key) => (url, key),
                Err(message) => return fail(&message),
            }
        }
        (None, None) => match recorded_server(&args.data) {
            Ok(found) => found,
            Err(message) => return fail(&message),
        },
    };
    if args.operator && matches!(kind, IdentityKind::Agent { .. }) {
        eprintln!("agentprocess token: {AGENT_OPERATOR_RIGHTS}");
    }
    let token = key.mint(
        &url,
        &DevTokenRequest {
            organization: args.org,
            kind,
            operator: args.operator,
            ttl: args.ttl,
        },
    );
    println!("{token}");
    ExitCode::SUCCESS
}

/// The key to mint with for an explicit `--url`: the folder's key, or a new one when it has
/// none (said on stderr, since only a server started with this folder will accept the token).
fn key_for_given_url(data: &Path) -> Result<DevKey, String> {
    match DevKey::load(data) {
        Ok(Some(key)) => Ok(key),
        Ok(None) => {
            let key = DevKey::load_or_create(data).map_err(|e| format!("dev signing key: {e}"))?;
            eprintln!(
                "agentprocess token: created a new dev signing key at {}; start the server with \
                 --data {} for it to accept this token",
                key.path().display(),
                data.display()
            );
            Ok(key)
        }
        Err(e) => Err(format!("dev signing key: {e}")),
    }
}

/// A cluster's shared dev key at `path`, created when absent (said on stderr: only gateways
/// started with `--dev-key` naming it accept the token).
fn cluster_key(path: &Path) -> Result<DevKey, String> {
    match DevKey::load_file(path) {
        Ok(Some(key)) => Ok(key),
        Ok(None) => {
            let key = DevKey::load_or_create_file(path).map_err(|e| format!("dev signing key: {e}"))?;
            eprintln!(
                "agentprocess token: created a new dev signing key at {}; start the gateways with \
                 --dev-key {} for them to accept this token",
                key.path().display(),
                path.display()
            );
            Ok(key)
        }
        Err(e) => Err(format!("dev signing key: {e}")),
    }
}

/// The URL and key a dev-mode server recorded in `data`. Without them no token can be minted
/// that a server accepts, so nothing is created: the message says where it looked.
fn recorded_server(data: &Path) -> Result<(String, DevKey), String> {
    let shown = std::path::absolute(data).unwrap_or_else(|_| data.to_owned());
    let url = recorded_server_url(data).map_err(|e| format!("the server's URL: {e}"))?;
    let key = DevKey::load(data).map_err(|e| format!("dev signing key: {e}"))?;
    match (url, key) {
        (Some(url), Some(key)) => Ok((url, key)),
        (None, Some(_)) => Err(format!(
            "{} holds a dev signing key but no server URL ({SERVER_URL_FILE}): no server in dev \
             mode has started with --data {} yet; start it, or pass --url with the URL it will \
             have",
            shown.display(),
            data.display()
        )),
        (_, None) => Err(format!(
            "no server data in {} (looked for {DEV_KEY_FILE} and {SERVER_URL_FILE}): pass --data \
             with the folder the server uses (its banner prints the token command; the default \
             is {DEFAULT_DATA_DIR} in the folder it was started in), or --url to mint for a \
             server that will start with --data {}",
            shown.display(),
            data.display()
        )),
    }
}

/// The person value is an email (`describe.person.format`); this catches typos, not more.
fn looks_like_email(text: &str) -> bool {
    text.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty() && !domain.is_empty() && !text.contains(char::is_whitespace)
    })
}

fn fail(message: &str) -> ExitCode {
    eprintln!("agentprocess token: {message}");
    ExitCode::from(EXIT_FAILED)
}
