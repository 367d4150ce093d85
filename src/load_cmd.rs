//! `agentprocess load`: drive a server over MCP HTTP with concurrent agents and people, and print
//! runs/s, tool calls/s and latency percentiles per tool.

mod admin;
mod etcd_puts;
mod idle;
mod mcp_client;
pub(crate) mod processes;
#[cfg(test)]
mod record_sizes;
mod stats;
mod workers;

use agentprocess_gateway::auth::dev::{DEV_KEY_FILE, DevKey, DevTokenRequest};
use agentprocess_gateway::{DEFAULT_DATA_DIR, DEFAULT_PUBLIC_URL, IdentityKind, ToolName, resource_uri};
use anyhow::{Context, bail};
use clap::Args;
use mcp_client::{CallOutcome, McpClient};
use serde::Serialize;
use serde_json::json;
use stats::{Report, Window};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use workers::LoadContext;

/// Exit code when the load ran but no run completed in the measured window.
const EXIT_NO_RUNS: u8 = 1;
/// Exit code for a usage error, or a server that cannot be set up for the load.
const EXIT_FAILED: u8 = 2;
/// How long the minted tokens live: longer than any sensible load run.
const TOKEN_TTL: Duration = Duration::from_secs(12 * 3600);

/// Run concurrent agents (and people) against a server and print throughput and latency.
///
/// Agents loop start_run → get_work → claim → submit; people loop get_work → decide (approve).
/// The load generator first publishes its benchmark processes (load-agent-step, and
/// load-approval when there are people) through the admin API, then measures for --duration
/// after --warmup.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The server's URL (without /mcp).
    #[arg(long, value_name = "URL", env = "AGENTPROCESS_URL", default_value = DEFAULT_PUBLIC_URL)]
    server: String,
    /// The MCP revision the callers speak: 2025-11-25, or 2026-07-28 (each request with its own
    /// `_meta` and the standard headers).
    #[arg(long, value_name = "REVISION", value_enum, default_value = "2025-11-25")]
    mcp_revision: crate::conformance::client::Revision,
    /// The server's public URL, which minted tokens name as issuer and audience. Default: --server.
    #[arg(long, value_name = "URL")]
    public_url: Option<String>,
    /// Concurrent agents.
    #[arg(long, value_name = "N", default_value_t = 64)]
    agents: usize,
    /// Concurrent people approving.
    #[arg(long, value_name = "N", default_value_t = 4)]
    people: usize,
    /// Percent of the agents' runs that need a person's approval (when --people is above 0).
    #[arg(long, value_name = "PERCENT", default_value_t = 25,
          value_parser = clap::value_parser!(u8).range(0..=100))]
    approvals: u8,
    /// How long to measure, after the warmup (e.g. 30s, 2m).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// How long to run before measuring.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = humantime::parse_duration)]
    warmup: Duration,
    /// The server's data folder, whose dev signing key mints the callers' tokens.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_DATA_DIR)]
    data: PathBuf,
    /// Use this bearer token for every agent instead of minting one per agent.
    #[arg(long, value_name = "TOKEN")]
    agent_token: Option<String>,
    /// Use this bearer token for every person (in the group load-approvers).
    #[arg(long, value_name = "TOKEN")]
    person_token: Option<String>,
    /// Use this operator bearer token to publish the benchmark processes.
    #[arg(long, value_name = "TOKEN")]
    operator_token: Option<String>,
    /// The organization the callers act in.
    #[arg(long, value_name = "ORG", default_value = "load")]
    org: String,
    /// Do not publish the benchmark processes: the server already has them.
    #[arg(long)]
    no_publish: bool,
    /// Start at most this many runs per second in total (each agent starts one run every
    /// agents/rate seconds, staggered), instead of as fast as the answers come: latency at a
    /// given load rather than at saturation. Default: no pacing.
    #[arg(long, value_name = "RUNS_PER_SECOND")]
    rate: Option<f64>,
    /// Threads of the load generator's runtime.
    #[arg(long, value_name = "N", default_value_t = 1)]
    threads: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// A cluster's dev signing key file (the one its gateways were started with): mint the
    /// callers' tokens with it instead of the key in --data.
    #[arg(long, value_name = "PATH", conflicts_with = "data")]
    dev_key: Option<PathBuf>,
    /// Every `get_work` of the agents and people waits up to this long for work when its page
    /// holds nothing (the server's `x-wait-1` profile), instead of being asked again at once.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=20))]
    wait_seconds: Option<u64>,
    /// Run this many idle agents instead of the load: each asks `get_work` for work of a process
    /// that has none (load-wake), waiting (--wait-seconds) or polling every --idle-poll; prints
    /// their calls/s and latency. No other agent or person runs.
    #[arg(long, value_name = "N", default_value_t = 0)]
    idle_agents: usize,
    /// How often an idle agent that does not wait asks again.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = humantime::parse_duration)]
    idle_poll: Duration,
    /// With --idle-agents: start a run of load-wake this often (through --wake-server), and
    /// print how long from each start's answer until an idle agent's page listed it.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, requires = "idle_agents")]
    wake_every: Option<Duration>,
    /// The server the runs of --wake-every start through (another gateway of a cluster).
    /// Default: --server.
    #[arg(long, value_name = "URL", requires = "wake_every")]
    wake_server: Option<String>,
    /// Measure etcd's raw write rate instead of a server's: --agents workers each commit
    /// one-put transactions to this etcd (client URLs, comma-separated) back to back, for the
    /// warmup and then --duration; prints transactions/s and p50/p99. The yardstick for a
    /// cluster's figures, taken with the same client and concurrency.
    #[arg(long, value_name = "URL[,URL...]", value_delimiter = ',')]
    etcd_puts: Vec<String>,
}

/// The bearer tokens of every caller.
#[derive(Debug)]
struct Tokens {
    agents: Vec<String>,
    people: Vec<String>,
    operator: Option<String>,
}

/// What was run, echoed in the output.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Settings {
    server: String,
    organization: String,
    agents: usize,
    people: usize,
    approval_percent: u8,
    warmup_seconds: f64,
    duration_seconds: f64,
    threads: usize,
    /// Runs per second the agents are paced to start; `None`: as fast as they can.
    rate: Option<f64>,
    /// `waitSeconds` of every `get_work`; `None`: asked again at once.
    wait_seconds: Option<u64>,
}

pub fn run(args: LoadArgs) -> ExitCode {
    match run_load(args) {
        Ok(0) => {
            eprintln!("agentprocess load: nothing completed in the measured window");
            ExitCode::from(EXIT_NO_RUNS)
        }
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agentprocess load: {e:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// Runs the load (or the raw etcd measurement) and prints its report; how many runs (or
/// transactions) completed in the measured window.
fn run_load(args: LoadArgs) -> anyhow::Result<u64> {
    if args.agents == 0 && args.idle_agents == 0 {
        bail!("--agents must be at least 1");
    }
    if args.idle_poll.is_zero() {
        bail!("--idle-poll must be longer than zero");
    }
    if args.wake_every.is_some_and(|every| every.is_zero()) {
        bail!("--wake-every must be longer than zero");
    }
    if args.duration.is_zero() {
        bail!("--duration must be longer than zero");
    }
    if args.threads == 0 {
        bail!("--threads must be at least 1");
    }
    if args.rate.is_some_and(|rate| !(rate.is_finite() && rate > 0.0)) {
        bail!("--rate must be a positive number of runs per second");
    }
    if args.org.trim().is_empty() {
        bail!("--org needs a non-empty organization");
    }
    if !args.etcd_puts.is_empty() {
        return raw_etcd_puts(&args);
    }
    if args.idle_agents > 0 {
        return idle_agents(&args);
    }
    let tokens = tokens(&args)?;
    let settings = Settings {
        server: args.server.clone(),
        organization: args.org.clone(),
        agents: args.agents,
        people: args.people,
        approval_percent: if args.people > 0 { args.approvals } else { 0 },
        warmup_seconds: args.warmup.as_secs_f64(),
        duration_seconds: args.duration.as_secs_f64(),
        threads: args.threads,
        rate: args.rate,
        wait_seconds: args.wait_seconds,
    };
    let runtime = if args.threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.threads)
            .enable_all()
            .build()
    }
    .context("starting the runtime")?;
    let report = runtime.block_on(drive(&args, &settings, tokens))?;
    if args.json {
        let mut output = serde_json::to_value(&report).context("serializing the report")?;
        output["settings"] = serde_json::to_value(&settings).context("serializing the settings")?;
        println!("{output}");
    } else {
        println!(
            "agentprocess load: {} agents, {} people ({}% of runs approved), org {}, server {}",
            settings.agents,
            settings.people,
            settings.approval_percent,
            settings.organization,
            settings.server
        );
        println!(
            "measured {:.0} s after a {:.0} s warmup, {} runtime thread(s)",
            settings.duration_seconds, settings.warmup_seconds, settings.threads
        );
        println!();
        print!("{}", report.table());
    }
    Ok(report.runs)
}

/// `--idle-agents`: agents with nothing to do, waiting or polling, and the prober's runs they
/// must hear of.
fn idle_agents(args: &LoadArgs) -> anyhow::Result<u64> {
    let key = match &args.dev_key {
        Some(path) => DevKey::load_file(path)
            .with_context(|| format!("reading the dev signing key {}", path.display()))?
            .with_context(|| format!("no dev signing key at {}", path.display()))?,
        None => DevKey::load_or_create(&args.data).context("reading the dev signing key")?,
    };
    let url = resource_uri(args.public_url.as_deref().unwrap_or(&args.server));
    let mint = |kind: IdentityKind, operator: bool| {
        key.mint(
            &url,
            &DevTokenRequest {
                organization: args.org.clone(),
                kind,
                operator,
                ttl: TOKEN_TTL,
            },
        )
    };
    let agent = |id: String| mint(IdentityKind::Agent { id }, false);
    let tokens: Vec<String> = (0..args.idle_agents)
        .map(|i| agent(format!("load-idle-{i}")))
        .collect();
    let prober = agent("load-prober".to_owned());
    let operator = mint(
        IdentityKind::Person {
            email: "operator@load.example".to_owned(),
            groups: Vec::new(),
        },
        true,
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let report = runtime.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = McpClient::new(&args.server, args.mcp_revision).context("building the HTTP client")?;
        let wake_server = args.wake_server.as_deref().unwrap_or(&args.server);
        let wake_client =
            McpClient::new(wake_server, args.mcp_revision).context("building the HTTP client")?;
        match client
            .call(&prober, ToolName::Describe.as_str(), &json!({}))
            .await
        {
            CallOutcome::Ok(_) => {}
            CallOutcome::Refused(refusal) => bail!("describe at {}: {refusal}", args.server),
            CallOutcome::Failed(failure) => bail!("describe at {}: {failure}", args.server),
        }
        if !args.no_publish {
            let server = args.server.clone();
            tokio::task::spawn_blocking(move || admin::publish(&server, &operator, processes::WAKE))
                .await
                .context("the publishing task failed")??;
        }
        let window = Window::after_warmup(Instant::now(), args.warmup, args.duration);
        let options = idle::IdleOptions {
            wait_seconds: args.wait_seconds,
            poll: args.idle_poll,
            wake_every: args.wake_every,
        };
        Ok(idle::drive(client, wake_client, tokens, prober, options, window).await)
    })?;
    if args.json {
        println!(
            "{}",
            serde_json::to_value(&report).context("serializing the report")?
        );
    } else {
        print!("{}", report.table());
    }
    Ok(report.get_work_calls)
}

/// `--etcd-puts`: etcd's raw write rate at the same concurrency, printed like a load report.
fn raw_etcd_puts(args: &LoadArgs) -> anyhow::Result<u64> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let report = runtime.block_on(etcd_puts::measure(
        &args.etcd_puts,
        args.agents,
        args.warmup,
        args.duration,
    ))?;
    if args.json {
        println!(
            "{}",
            serde_json::to_value(&report).context("serializing the report")?
        );
    } else {
        println!(
            "etcd raw puts: {} workers, {:.0} s measured: {} one-put transactions = {:.1}/s, p50 {:.2} ms, p99 {:.2} ms, {} errors",
            report.workers,
            report.seconds,
            report.transactions,
            report.transactions_per_second,
            report.p50_ms,
            report.p99_ms,
            report.errors
        );
    }
    Ok(report.transactions)
}

/// The given tokens, or tokens minted with the dev key in the data folder (or `--dev-key`).
fn tokens(args: &LoadArgs) -> anyhow::Result<Tokens> {
    let needs_key = args.agent_token.is_none()
        || (args.people > 0 && args.person_token.is_none())
        || (!args.no_publish && args.operator_token.is_none());
    let key = if needs_key && let Some(path) = &args.dev_key {
        let key = DevKey::load_file(path)
            .with_context(|| format!("reading the dev signing key {}", path.display()))?;
        Some(key.with_context(|| format!("no dev signing key at {}", path.display()))?)
    } else if needs_key {
        let path = args.data.join(DEV_KEY_FILE);
        if !path.is_file() {
            bail!(
                "no dev signing key at {}: pass --data with the server's data folder, or the tokens \
                 (--agent-token, --person-token, --operator-token)",
                path.display()
            );
        }
        Some(DevKey::load_or_create(&args.data).context("reading the dev signing key")?)
    } else {
        None
    };
    let url = resource_uri(args.public_url.as_deref().unwrap_or(&args.server));
    let mint = |kind: IdentityKind, operator: bool| {
        let key = key.as_ref().expect("a key is read whenever a token is minted");
        key.mint(
            &url,
            &DevTokenRequest {
                organization: args.org.clone(),
                kind,
                operator,
                ttl: TOKEN_TTL,
            },
        )
    };
    let agents = (0..args.agents)
        .map(|i| match &args.agent_token {
            Some(token) => token.clone(),
            None => mint(
                IdentityKind::Agent {
                    id: format!("load-agent-{i}"),
                },
                false,
            ),
        })
        .collect();
    let people = (0..args.people)
        .map(|i| match &args.person_token {
            Some(token) => token.clone(),
            None => mint(
                IdentityKind::Person {
                    email: format!("person-{i}@load.example"),
                    groups: vec![processes::APPROVERS_GROUP.to_owned()],
                },
                false,
            ),
        })
        .collect();
    let operator = match (&args.operator_token, args.no_publish) {
        (_, true) => None,
        (Some(token), false) => Some(token.clone()),
        (None, false) => Some(mint(
            IdentityKind::Person {
                email: "operator@load.example".to_owned(),
                groups: Vec::new(),
            },
            true,
        )),
    };
    Ok(Tokens {
        agents,
        people,
        operator,
    })
}

/// Checks the server answers, publishes the processes, runs the callers and merges their samples.
async fn drive(args: &LoadArgs, settings: &Settings, tokens: Tokens) -> anyhow::Result<Report> {
    // reqwest is built without a bundled TLS crypto provider, as the gateway is; an https server
    // URL needs one installed. Another caller may have installed one first.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = McpClient::new(&args.server, args.mcp_revision).context("building the HTTP client")?;

    match client
        .call(&tokens.agents[0], ToolName::Describe.as_str(), &json!({}))
        .await
    {
        CallOutcome::Ok(_) => {}
        CallOutcome::Refused(refusal) => bail!("describe at {}: {refusal}", args.server),
        CallOutcome::Failed(failure) => bail!("describe at {}: {failure}", args.server),
    }
    if let Some(operator) = &tokens.operator {
        let mut names = vec![processes::AGENT_STEP];
        if settings.approval_percent > 0 {
            names.push(processes::APPROVAL);
        }
        for name in names {
            let (server, operator) = (args.server.clone(), operator.clone());
            let published = tokio::task::spawn_blocking(move || admin::publish(&server, &operator, name))
                .await
                .context("the publishing task failed")??;
            if !args.json {
                match published.version {
                    Some(version) => eprintln!("published {} version {version}", published.name),
                    None => eprintln!("{} was already published", published.name),
                }
            }
        }
    }

    let window = Window::after_warmup(Instant::now(), args.warmup, args.duration);
    let context = Arc::new(LoadContext {
        client,
        window,
        approval_percent: settings.approval_percent,
        agents: settings.agents,
        run_interval: settings
            .rate
            .map(|rate| Duration::from_secs_f64(settings.agents as f64 / rate)),
        agents_running: std::sync::atomic::AtomicUsize::new(settings.agents),
        wait_seconds: args.wait_seconds,
    });
    if !args.json {
        eprintln!(
            "running: {:.0} s warmup, then {:.0} s measured",
            settings.warmup_seconds, settings.duration_seconds
        );
    }
    let mut tasks = Vec::new();
    for (index, token) in tokens.agents.into_iter().enumerate() {
        tasks.push(tokio::spawn(workers::agent(context.clone(), index, token)));
    }
    if settings.approval_percent > 0 {
        for (index, token) in tokens.people.into_iter().enumerate() {
            tasks.push(tokio::spawn(workers::person(context.clone(), index, token)));
        }
    }
    let mut merged = stats::Recorder::new(window);
    for task in tasks {
        merged.merge(task.await.context("a caller task panicked")?);
    }
    Ok(merged.report())
}
