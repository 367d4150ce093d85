//! `agentprocess process import|list`: an operator's commands against a running server's admin
//! API (`/admin/v1/processes`), over HTTP with a bearer token.

use agentprocess_gateway::DEFAULT_PUBLIC_URL;
use agentprocess_org::ProcessEntry;
use agentprocess_process::{Issue, parse_document};
use clap::Args;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Exit code when every request succeeded.
const EXIT_DONE: u8 = 0;
/// Exit code when the server refused a request (invalid, forbidden, not found, conflict).
const EXIT_REFUSED: u8 = 1;
/// Exit code for a usage error, a server that cannot be reached or failed, or a refused token.
const EXIT_USAGE: u8 = 2;

/// Where the server is and who calls it.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// The server's URL.
    #[arg(long, value_name = "URL", env = "AGENTPROCESS_URL", default_value = DEFAULT_PUBLIC_URL)]
    server: String,
    /// An operator's bearer token. For a server in dev mode, mint one with
    /// `agentprocess token --org ORG --person EMAIL --operator`.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "AGENTPROCESS_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
}

/// Import a PROCESS.md into a server as a draft, bind its roles to groups, and publish it.
///
/// The file becomes the draft of its process (replacing an earlier draft, whose bindings are kept
/// for roles that still exist). Every role named in a step's `person:` must be bound to a group of
/// the identity provider before the draft can be published; `--publish` makes it the next
/// numbered version. Publishing a draft identical to the latest version (same content hash and
/// bindings) is refused as a conflict.
///
/// Exit status: 0 when done, 1 when the server refused (every issue is printed to stderr, one per
/// line), 2 on a usage error, a refused token, or a server that cannot be reached.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// A PROCESS.md file, or a folder holding one (the folder's name must equal the process name).
    path: PathBuf,
    /// Bind a role to a group of the identity provider (repeatable): `--bind cfo=g_finance_leads`.
    #[arg(long = "bind", value_name = "ROLE=GROUP", value_parser = parse_binding)]
    bindings: Vec<(String, String)>,
    /// Publish the draft as the next version after importing (and binding) it.
    #[arg(long)]
    publish: bool,
    /// Print the server's answers as one JSON object {"import", "bindings", "publish"} instead of
    /// a summary (a step not taken is null).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    server: ServerArgs,
}

/// List the organization's processes on a server: latest version, versions, and drafts.
///
/// DRAFT is `yes` when the process has a draft that differs from its latest version (in content
/// or bindings), that is, one that publishing would make a new version of.
///
/// Exit status: 0 when listed, 1 when the server refused, 2 on a usage error, a refused token, or
/// a server that cannot be reached.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print the server's answer as JSON: {"processes": [{"name", "description",
    /// "latestVersion", "versions", "draft"}]}.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    server: ServerArgs,
}

fn parse_binding(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((role, group)) if !role.trim().is_empty() && !group.trim().is_empty() => {
            Ok((role.trim().to_owned(), group.trim().to_owned()))
        }
        _ => Err(format!("{text:?} is not ROLE=GROUP")),
    }
}

/// Why a request did not give an answer to go on with.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Bad arguments or input, found before any request.
    Usage(String),
    /// No HTTP answer at all.
    Unreachable { url: String, reason: String },
    /// 401: the bearer layer refused the token.
    Unauthenticated(String),
    /// 403: not an operator.
    Forbidden(String),
    /// Any other refusal: the message and every issue; the HTTP status (4xx) when the server
    /// refused, none when it was found before any request; the error body's `code` when it had one.
    Refused {
        status: Option<u16>,
        code: Option<String>,
        message: String,
        issues: Vec<String>,
    },
    /// 5xx: the server failed; a retry may work.
    ServerFailed(String),
    /// The file was imported as a draft, and binding or publishing it failed: the draft stays,
    /// unpublished. `unbound` are the roles still without a group.
    DraftOnly {
        name: String,
        unbound: Vec<String>,
        cause: Box<Failure>,
    },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Usage(message) => f.write_str(message),
            Failure::Unreachable { url, reason } => write!(f, "cannot reach the server at {url}: {reason}"),
            Failure::Unauthenticated(message) => write!(f, "the server did not accept the token: {message}"),
            Failure::Forbidden(message) => write!(
                f,
                "refused: {message}\n\
                 an operator token is needed; for a server in dev mode mint one with \
                 `agentprocess token --org ORG --person EMAIL --operator`"
            ),
            Failure::Refused { message, issues, .. } => {
                write!(f, "refused: {message}")?;
                issues.iter().try_for_each(|issue| write!(f, "\n{issue}"))
            }
            Failure::ServerFailed(message) => write!(f, "the server failed: {message}"),
            Failure::DraftOnly { name, unbound, cause } => {
                write!(f, "{cause}\n{name} is imported as a draft, not published")?;
                if !unbound.is_empty() {
                    write!(f, "; bind every role first: {}", missing_bind_flags(unbound))?;
                }
                Ok(())
            }
        }
    }
}

impl Failure {
    fn report(&self, what: &str) -> ExitCode {
        eprintln!("agentprocess process {what}: {self}");
        ExitCode::from(self.exit_code())
    }

    fn exit_code(&self) -> u8 {
        match self {
            Failure::Forbidden(_) | Failure::Refused { .. } => EXIT_REFUSED,
            Failure::Usage(_)
            | Failure::Unreachable { .. }
            | Failure::Unauthenticated(_)
            | Failure::ServerFailed(_) => EXIT_USAGE,
            Failure::DraftOnly { cause, .. } => cause.exit_code(),
        }
    }
}

/// The admin API of one server, called as one operator.
pub(crate) struct AdminClient {
    base: String,
    token: String,
    http: reqwest::blocking::Client,
}

impl AdminClient {
    fn new(args: &ServerArgs) -> Result<AdminClient, Failure> {
        AdminClient::connect(&args.server, args.token.as_deref())
    }

    /// A client of the server at `server` (its base URL) calling with the bearer `token`.
    pub(crate) fn connect(server: &str, token: Option<&str>) -> Result<AdminClient, Failure> {
        let base = server.trim_end_matches('/').to_owned();
        match reqwest::Url::parse(&base) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {}
            _ => {
                return Err(Failure::Usage(format!(
                    "--server {server:?} is not an http(s) URL"
                )));
            }
        }
        let token = match token.map(str::trim) {
            Some(token) if !token.is_empty() => token.to_owned(),
            _ => {
                return Err(Failure::Usage(
                    "no token: pass --token or set AGENTPROCESS_TOKEN to an operator's bearer token \
                     (for a server in dev mode: `agentprocess token --org ORG --person EMAIL --operator`)"
                        .into(),
                ));
            }
        };
        // reqwest's TLS uses rustls without a built-in crypto provider, as the server does.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::blocking::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| Failure::Usage(format!("cannot make an HTTP client: {e}")))?;
        Ok(AdminClient { base, token, http })
    }

    /// One request to `path` (under the base URL): the JSON answer of a 2xx, else the failure.
    pub(crate) fn call(&self, method: reqwest::Method, path: &str, body: Vec<u8>) -> Result<Value, Failure> {
        let response = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .body(body)
            .send()
            .map_err(|error| Failure::Unreachable {
                url: self.base.clone(),
                reason: agentprocess_gateway::error_chain(&error),
            })?;
        let status = response.status();
        let text = response.text().map_err(|error| Failure::Unreachable {
            url: self.base.clone(),
            reason: agentprocess_gateway::error_chain(&error),
        })?;
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        // Admin errors are {"error": {message, issues}}; the bearer layer's are
        // {"error": code, "error_description": text}.
        let message = body["error"]["message"]
            .as_str()
            .or(body["error_description"].as_str())
            .map(str::to_owned)
            .unwrap_or_else(|| format!("HTTP {status}: {}", text.trim()));
        let issues = body["error"]["issues"]
            .as_array()
            .map(|issues| {
                issues
                    .iter()
                    .filter_map(|i| i.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        Err(match status.as_u16() {
            401 => Failure::Unauthenticated(message),
            403 => Failure::Forbidden(message),
            status @ 400..=499 => Failure::Refused {
                status: Some(status),
                code: body["error"]["code"].as_str().map(str::to_owned),
                message,
                issues,
            },
            _ => Failure::ServerFailed(message),
        })
    }
}

/// Where [`publish_with_bindings`] stopped.
#[derive(Debug)]
pub(crate) enum PublishStop {
    Import(Failure),
    Bind(Failure),
    Publish(Failure),
    /// The publication answered without a version number.
    NoVersion(Value),
}

impl std::fmt::Display for PublishStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PublishStop::Import(failure) => write!(f, "importing: {failure}"),
            PublishStop::Bind(failure) => write!(f, "binding the roles: {failure}"),
            PublishStop::Publish(failure) => write!(f, "publishing: {failure}"),
            PublishStop::NoVersion(body) => write!(f, "publishing: the answer has no version: {body}"),
        }
    }
}

/// Imports the process `name` (its `PROCESS.md` text), binds `bindings` (role to group) when
/// there are any, and publishes it, as one operator through the admin API (blocking). Content the
/// server already holds, imported or published (`409 Conflict`), is not an error: the version
/// published, or `None` when it was already.
pub(crate) fn publish_with_bindings(
    client: &AdminClient,
    name: &str,
    text: &str,
    bindings: &std::collections::BTreeMap<String, String>,
) -> Result<Option<u64>, PublishStop> {
    let already_held = |failure: &Failure| {
        matches!(
            failure,
            Failure::Refused {
                status: Some(409),
                ..
            }
        )
    };
    match client.call(
        reqwest::Method::POST,
        "/admin/v1/processes",
        text.as_bytes().to_vec(),
    ) {
        Err(failure) if !already_held(&failure) => return Err(PublishStop::Import(failure)),
        _ => {}
    }
    if !bindings.is_empty() {
        let body = json!({ "bindings": bindings }).to_string().into_bytes();
        client
            .call(
                reqwest::Method::PUT,
                &format!("/admin/v1/processes/{name}/bindings"),
                body,
            )
            .map_err(PublishStop::Bind)?;
    }
    match client.call(
        reqwest::Method::POST,
        &format!("/admin/v1/processes/{name}/publish"),
        Vec::new(),
    ) {
        Ok(body) => body["version"]
            .as_u64()
            .map(Some)
            .ok_or(PublishStop::NoVersion(body)),
        Err(failure) if already_held(&failure) => Ok(None),
        Err(failure) => Err(PublishStop::Publish(failure)),
    }
}

/// The `--bind` flags that would bind `roles`, with `GROUP` for the group to choose.
fn missing_bind_flags(roles: &[String]) -> String {
    roles
        .iter()
        .map(|role| format!("--bind {role}=GROUP"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The roles a draft view (`{ roles, bindings, unbound }`) lists as unbound.
fn unbound_roles(draft: &Value) -> Vec<String> {
    draft["unbound"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|role| role.as_str().map(str::to_owned))
        .collect()
}

/// Reads the file, or the PROCESS.md of a folder whose name must equal the process name.
fn read_process(path: &std::path::Path) -> Result<Vec<u8>, Failure> {
    let crate::process_cmd::Input {
        bytes, folder_name, ..
    } = crate::process_cmd::read_input(path).map_err(Failure::Usage)?;
    // The server validates everything else; only the folder is known here (spec §2.1).
    if let (Some(folder), Ok(document)) = (folder_name, parse_document(&bytes))
        && let Some(name) = document.frontmatter.get("name").and_then(Value::as_str)
        && name != folder
    {
        return Err(Failure::Refused {
            status: None,
            code: None,
            message: format!("{} is not the folder of its process", path.display()),
            issues: vec![
                Issue::new(
                    "name",
                    format!("{} does not equal the folder name {}", json!(name), json!(folder)),
                )
                .to_string(),
            ],
        });
    }
    Ok(bytes)
}

pub fn import(args: ImportArgs) -> ExitCode {
    match try_import(&args) {
        Ok(()) => ExitCode::from(EXIT_DONE),
        Err(failure) => failure.report("import"),
    }
}

fn try_import(args: &ImportArgs) -> Result<(), Failure> {
    let client = AdminClient::new(&args.server)?;
    let source = read_process(&args.path)?;
    let imported = client.call(reqwest::Method::POST, "/admin/v1/processes", source)?;
    let name = imported["name"].as_str().unwrap_or_default().to_owned();
    let mut draft = imported.clone();
    let draft_only = |draft: &Value| {
        let name = name.clone();
        let unbound = unbound_roles(&draft["draft"]);
        move |cause: Failure| Failure::DraftOnly {
            name,
            unbound,
            cause: Box::new(cause),
        }
    };
    let bound = if args.bindings.is_empty() {
        None
    } else {
        let bindings: serde_json::Map<String, Value> = args
            .bindings
            .iter()
            .map(|(role, group)| (role.clone(), json!(group)))
            .collect();
        let body = json!({ "bindings": bindings }).to_string().into_bytes();
        let bound = client
            .call(
                reqwest::Method::PUT,
                &format!("/admin/v1/processes/{name}/bindings"),
                body,
            )
            .map_err(draft_only(&draft))?;
        draft = bound.clone();
        Some(bound)
    };
    let published = if args.publish {
        let published = client
            .call(
                reqwest::Method::POST,
                &format!("/admin/v1/processes/{name}/publish"),
                Vec::new(),
            )
            .map_err(draft_only(&draft))?;
        Some(published)
    } else {
        None
    };
    if args.json {
        println!(
            "{}",
            json!({ "import": imported, "bindings": bound, "publish": published })
        );
        return Ok(());
    }
    let view = &draft["draft"];
    println!(
        "{name}: draft imported, content hash {}",
        view["contentHash"].as_str().unwrap_or_default()
    );
    for role in view["roles"].as_array().into_iter().flatten() {
        let role = role.as_str().unwrap_or_default();
        match view["bindings"][role].as_str() {
            Some(group) => println!("  role {role} -> group {group}"),
            None => println!("  role {role}: unbound"),
        }
    }
    match &published {
        Some(published) => println!(
            "{name}: published version {} ({})",
            published["version"],
            published["publishedAt"].as_str().unwrap_or_default()
        ),
        None => {
            let unbound = unbound_roles(view);
            let flags = if unbound.is_empty() {
                "--publish".to_owned()
            } else {
                format!("{} --publish", missing_bind_flags(&unbound))
            };
            println!("{name}: imported as a draft, not published; to publish it, run again with {flags}")
        }
    }
    Ok(())
}

pub fn list(args: ListArgs) -> ExitCode {
    let listed = AdminClient::new(&args.server)
        .and_then(|client| client.call(reqwest::Method::GET, "/admin/v1/processes", Vec::new()));
    let listed = match listed {
        Ok(listed) => listed,
        Err(failure) => return failure.report("list"),
    };
    if args.json {
        println!("{listed}");
        return ExitCode::from(EXIT_DONE);
    }
    let processes: Vec<ProcessEntry> = match serde_json::from_value(listed["processes"].clone()) {
        Ok(processes) => processes,
        Err(error) => {
            return Failure::ServerFailed(format!("its process list cannot be read: {error}")).report("list");
        }
    };
    if processes.is_empty() {
        println!("no processes in this organization");
        return ExitCode::from(EXIT_DONE);
    }
    let rows: Vec<[String; 4]> = processes
        .iter()
        .map(|process| {
            [
                process.name.clone(),
                process
                    .latest_version
                    .map_or_else(|| "-".to_owned(), |v| v.to_string()),
                process.versions.len().to_string(),
                // The draft stays after publication: "yes" only when it has something new.
                if process.unpublished_draft().is_some() {
                    "yes"
                } else {
                    "no"
                }
                .to_owned(),
            ]
        })
        .collect();
    let header = ["NAME", "LATEST", "VERSIONS", "DRAFT"].map(str::to_owned);
    let widths: Vec<usize> = (0..4)
        .map(|column| {
            rows.iter()
                .chain([&header])
                .map(|row| row[column].len())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in [&header].into_iter().chain(&rows) {
        let line = format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
        println!("{}", line.trim_end());
    }
    ExitCode::from(EXIT_DONE)
}
