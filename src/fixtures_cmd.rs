//! `agentprocess fixtures`: fill a stopped server's store with runs (open, waiting on people,
//! ended, waiting on a timer), written exactly as their actors would have written them.

mod driver;
mod processes;
mod writer;

use crate::load_cmd::processes as load;
use crate::serve_cmd::{offer, open_store};
use crate::settings::{FlagSettings, Settings};
use agentprocess_gateway::DEFAULT_DATA_DIR;
use agentprocess_run_actor::fixtures::run_writes;
use agentprocess_run_actor::machine::{OrgId, PinnedProcess, Timestamp};
use agentprocess_run_actor::runtime::{Catalog, Clock, RuntimeConfig};
use agentprocess_store::keys::Keys;
use agentprocess_store::{Store, Txn, TxnOp};
use anyhow::{Context, bail};
use clap::Args;
use driver::{Driver, Until};
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use writer::Writer;

/// How often progress is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Fill a stopped server's store with runs, for measurements at scale.
///
/// Each run is built by applying real commands with the run machine (start; claims and
/// submissions of agent steps; approvals of work items) and written with the record and index
/// entries its actor would have committed, in transactions of at most 128 operations. Open runs
/// have an agent step ready; runs waiting on people have a work item open (for the group
/// load-approvers with the default process); ended runs finished; timer runs wait until a time
/// spread over --timers-within. The processes are published first if needed, as `agentprocess
/// load` publishes them. The server must be stopped: the store is opened as `serve` opens it.
#[derive(Debug, Args)]
pub struct FixturesArgs {
    /// The server's data folder.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_DATA_DIR)]
    data: PathBuf,
    /// The server's TOML settings file (its store and limit settings apply).
    #[arg(long, value_name = "FILE", env = "AGENTPROCESS_CONFIG")]
    config: Option<PathBuf>,
    /// Runs with an agent step ready.
    #[arg(long, value_name = "N", default_value_t = 0)]
    open: u64,
    /// Runs with a work item open for people.
    #[arg(long, value_name = "N", default_value_t = 0)]
    waiting_on_people: u64,
    /// Runs that ended.
    #[arg(long, value_name = "N", default_value_t = 0)]
    ended: u64,
    /// Runs waiting on a timer (process fixture-wait): one pending timer each.
    #[arg(long, value_name = "N", default_value_t = 0)]
    timers: u64,
    /// The timers fire evenly spread from now to now plus this (e.g. 6h, 10m).
    #[arg(long, value_name = "DURATION", default_value = "6h", value_parser = humantime::parse_duration)]
    timers_within: Duration,
    /// The published process of the open, waiting and ended runs, driven with sample values.
    /// Default: load-agent-step for open and ended runs, load-approval for runs waiting on people.
    #[arg(long, value_name = "NAME")]
    process: Option<String>,
    /// The organization the runs belong to.
    #[arg(long, value_name = "ORG", default_value = "load")]
    org: String,
    /// Also write, for each run, the idempotency records of the calls that made it (a start,
    /// each claim, submission and decision), kept for the configured retention, as a server
    /// that ran those calls holds them.
    #[arg(long)]
    idempotency_records: bool,
}

pub fn run(args: FixturesArgs) -> ExitCode {
    match populate(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("agentprocess fixtures: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// How many runs of each kind to write.
#[derive(Debug, Clone, Copy)]
struct Counts {
    open: u64,
    waiting: u64,
    ended: u64,
    timers: u64,
}

impl Counts {
    fn total(self) -> u64 {
        self.open + self.waiting + self.ended + self.timers
    }
}

fn populate(args: FixturesArgs) -> anyhow::Result<()> {
    let counts = Counts {
        open: args.open,
        waiting: args.waiting_on_people,
        ended: args.ended,
        timers: args.timers,
    };
    if counts.total() == 0 {
        bail!("nothing to write: give --open, --waiting-on-people, --ended or --timers a number above 0");
    }
    if args.org.trim().is_empty() {
        bail!("--org needs a non-empty organization");
    }
    if counts.timers > 0 && args.timers_within.is_zero() {
        bail!("--timers-within must be longer than zero");
    }
    let flags = FlagSettings {
        data_dir: Some(args.data.clone()),
        ..FlagSettings::default()
    };
    let settings = Settings::load(args.config.as_deref(), flags).context("the settings cannot be used")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(write_fixtures(&args, &settings, counts))
}

async fn write_fixtures(args: &FixturesArgs, settings: &Settings, counts: Counts) -> anyhow::Result<()> {
    let (store, recovery) = open_store(settings).await?;
    eprintln!(
        "store in {}: {} keys at revision {}",
        settings.data_dir.join("store").display(),
        recovery.keys,
        recovery.revision
    );
    let mut written = write_runs(args, settings, counts, &store).await;
    if recovery.keys == 0 && written.is_ok() {
        // A new store whose every run was filed by input as it was written: nothing for the
        // server's one-time filing to do.
        let marker = Keys::new(&RuntimeConfig::default().cluster).runs_filed_by_input();
        let put = Txn::new().and_then([TxnOp::put(marker, b"done".to_vec())]);
        if let Err(error) = store.txn(put).await {
            written = Err(anyhow::anyhow!("marking the new store's runs filed: {error}"));
        }
    }
    store.close().await;
    let (runs, elapsed) = written?;
    println!(
        "wrote {runs} runs ({} open, {} waiting on people, {} ended, {} waiting on a timer) in \
         {:.1} s: {:.0} runs/s",
        counts.open,
        counts.waiting,
        counts.ended,
        counts.timers,
        elapsed.as_secs_f64(),
        runs as f64 / elapsed.as_secs_f64().max(1e-9)
    );
    Ok(())
}

/// Publishes what is needed, then builds and writes every run; the runs written and how long
/// building and writing them took.
async fn write_runs(
    args: &FixturesArgs,
    settings: &Settings,
    counts: Counts,
    store: &agentprocess_store::EmbeddedStore,
) -> anyhow::Result<(u64, Duration)> {
    // What `serve` runs with, where it shapes what a commit writes (the archive timer).
    let config = RuntimeConfig {
        archive_ended_runs_after: settings.archive_ended_runs_after(),
        ..RuntimeConfig::default()
    };
    let keys = Keys::new(&config.cluster);
    let shared: Arc<dyn Store> = Arc::new(store.clone());
    let catalog = Catalog::new(shared, keys.clone(), Clock::system());
    let offer = offer(settings);
    let org = OrgId::from(args.org.as_str());
    let org = &org;
    let resolve = |name: String, needed: bool| {
        let (catalog, offer) = (&catalog, &offer);
        async move {
            if !needed {
                return Ok(None);
            }
            let resolved = processes::resolve(catalog, org, &name, offer).await?;
            let pinned = &resolved.pinned;
            if resolved.newly_published {
                eprintln!("published {name} version {}", pinned.version);
            }
            anyhow::Ok(Some(resolved.pinned))
        }
    };
    let agent_step = args.process.clone().unwrap_or(load::AGENT_STEP.to_owned());
    let approval = args.process.clone().unwrap_or(load::APPROVAL.to_owned());
    let agent_step = resolve(agent_step, counts.open + counts.ended > 0).await?;
    let approval = resolve(approval, counts.waiting > 0).await?;
    let timer = resolve(processes::TIMER.to_owned(), counts.timers > 0).await?;

    let mut driver = Driver::new(
        org.as_str(),
        settings.limits(),
        config.person_format,
        settings.escalate_to(),
        args.idempotency_records,
    );
    let mut writer = Writer::new(store.clone());
    let mut progress = Progress::new(counts.total());
    let clock = Clock::system();
    let kinds: [(u64, Option<&Arc<PinnedProcess>>, Kind); 4] = [
        (counts.open, agent_step.as_ref(), Kind::Open),
        (counts.waiting, approval.as_ref(), Kind::WaitingOnPeople),
        (counts.ended, agent_step.as_ref(), Kind::Ended),
        (counts.timers, timer.as_ref(), Kind::Timer),
    ];
    let within_ms = u64::try_from(args.timers_within.as_millis()).unwrap_or(u64::MAX);
    for (count, process, kind) in kinds {
        let Some(process) = process.filter(|_| count > 0) else {
            continue;
        };
        for i in 0..count {
            let now = clock.now();
            let run = match kind {
                Kind::Open => driver.start(process, None, now)?,
                Kind::WaitingOnPeople => {
                    let run = driver.start(process, None, now)?;
                    driver.drive(process, run, Until::PersonWork, now)?
                }
                Kind::Ended => {
                    let run = driver.start(process, None, now)?;
                    driver.drive(process, run, Until::Ended, now)?
                }
                Kind::Timer => {
                    // Evenly spread over (now, now + within]: the i-th of `count` fires at (i+1)/count.
                    let offset = u128::from(within_ms) * u128::from(i + 1) / u128::from(count);
                    let fire_at = Timestamp::from_millis(
                        now.as_millis() + i64::try_from(offset).unwrap_or(i64::MAX / 2),
                    );
                    let mut inputs = Map::new();
                    inputs.insert("fireAt".into(), Value::String(fire_at.to_rfc3339()));
                    driver.start(process, Some(inputs), now)?
                }
            };
            let writes = run_writes(&keys, &config, process, &run, driver.take_answered(), now)
                .with_context(|| format!("writing run {}", run.id))?;
            writer.add(writes).await?;
            progress.tick(writer.committed);
        }
    }
    writer.finish().await?;
    Ok((writer.committed, progress.started.elapsed()))
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Open,
    WaitingOnPeople,
    Ended,
    Timer,
}

/// Prints how far the writing got, now and then.
#[derive(Debug)]
struct Progress {
    total: u64,
    started: Instant,
    last: Instant,
}

impl Progress {
    fn new(total: u64) -> Self {
        let now = Instant::now();
        Progress {
            total,
            started: now,
            last: now,
        }
    }

    fn tick(&mut self, committed: u64) {
        if self.last.elapsed() < PROGRESS_EVERY {
            return;
        }
        self.last = Instant::now();
        let seconds = self.started.elapsed().as_secs_f64();
        eprintln!(
            "{committed} of {} runs written in {seconds:.0} s ({:.0} runs/s)",
            self.total,
            committed as f64 / seconds.max(1e-9)
        );
    }
}
