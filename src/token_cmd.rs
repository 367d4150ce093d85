//! `agentprocess token ...`: mint a dev bearer token with the local dev signing key.

use agentprocess_gateway::auth::dev::{DevKey, DevTokenRequest, parse_ttl};
use agentprocess_gateway::{DEFAULT_DATA_DIR, DEFAULT_PUBLIC_URL, IdentityKind, resource_uri};
use clap::{ArgGroup, Args};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Exit code for a usage error or a key that cannot be read or created.
const EXIT_FAILED: u8 = 2;

/// Print a dev bearer token, for a server running without an identity provider.
///
/// The token is signed with the dev key in the data folder (created if absent) and names the
/// server's URL as issuer and audience, so only a server with the same data folder and URL
/// accepts it.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("actor").required(true).args(["agent", "person"])))]
pub struct TokenArgs {
    /// The server's data folder, which holds the dev signing key.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_DATA_DIR)]
    data: PathBuf,
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
    /// Give the caller operator rights.
    #[arg(long)]
    operator: bool,
    /// How long the token lives: a number followed by m, h or d.
    #[arg(long, value_name = "DURATION", default_value = "12h", value_parser = parse_ttl_arg)]
    ttl: Duration,
    /// The server's public URL (its issuer and audience).
    #[arg(long, value_name = "URL", default_value = DEFAULT_PUBLIC_URL)]
    url: String,
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
    let url = resource_uri(&args.url);
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return fail(&format!("--url {:?} is not an http(s) URL", args.url));
    }
    let key = match DevKey::load_or_create(&args.data) {
        Ok(key) => key,
        Err(e) => return fail(&format!("dev signing key: {e}")),
    };
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
