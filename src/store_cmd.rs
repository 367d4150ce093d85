//! `agentprocess store stats`: what a stopped server's store holds, in keys and bytes per key
//! family and per organization. `store backup` and `store restore` live in [`crate::backup`].

use crate::serve_cmd::open_store;
use crate::settings::{FlagSettings, Settings};
use agentprocess_gateway::DEFAULT_DATA_DIR;
use agentprocess_run_actor::runtime::RuntimeConfig;
use agentprocess_store::keys::{KeyFamily, Keys};
use agentprocess_store::{KeyRange, RangeRequest, Store};
use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Keys read per range call.
const PAGE: usize = 10_000;
/// The row of keys that belong to no family of the layout (another cluster's, or foreign).
const OTHER: &str = "other";
/// The row of keys that name no organization (shards, hosts, the scheduler election).
const CLUSTER: &str = "(cluster)";

/// Look into a stopped server's store; back a store up and restore it.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Count keys and bytes (key + value) per key family and per organization, and in total.
    Stats(StatsArgs),
    /// Back up a data folder (store at one revision, keys, local uploads) into one file, while
    /// its server runs (through its control socket) or not.
    Backup(crate::backup::BackupArgs),
    /// Restore a backup file into an empty or missing data folder.
    Restore(crate::backup::RestoreArgs),
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The server's data folder.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_DATA_DIR)]
    data: PathBuf,
    /// The server's TOML settings file (its store settings apply).
    #[arg(long, value_name = "FILE", env = "AGENTPROCESS_CONFIG")]
    config: Option<PathBuf>,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    json: bool,
}

pub fn run(command: StoreCommand) -> ExitCode {
    let args = match command {
        StoreCommand::Stats(args) => args,
        StoreCommand::Backup(args) => return crate::backup::run_backup(args),
        StoreCommand::Restore(args) => return crate::backup::run_restore(args),
    };
    match stats(&args) {
        Ok(report) => {
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string(&report).expect("numbers and strings serialize")
                );
            } else {
                print!("{}", report.table());
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("agentprocess store stats: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Keys and their bytes.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Tally {
    keys: u64,
    key_bytes: u64,
    value_bytes: u64,
    /// Key and value bytes together.
    bytes: u64,
}

impl Tally {
    fn add(&mut self, key: usize, value: usize) {
        self.keys += 1;
        self.key_bytes += key as u64;
        self.value_bytes += value as u64;
        self.bytes += (key + value) as u64;
    }

    fn merge(&mut self, other: &Tally) {
        self.keys += other.keys;
        self.key_bytes += other.key_bytes;
        self.value_bytes += other.value_bytes;
        self.bytes += other.bytes;
    }
}

/// One family's row.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct FamilyRow {
    family: &'static str,
    #[serde(flatten)]
    tally: Tally,
}

/// One organization's row: its families summed, and each family.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct OrganizationRow {
    organization: String,
    #[serde(flatten)]
    tally: Tally,
    families: Vec<FamilyRow>,
}

/// What `store stats` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    store: String,
    revision: i64,
    /// Bytes of the store's files (snapshot and log): what the key map replays from at start.
    disk_bytes: u64,
    families: Vec<FamilyRow>,
    organizations: Vec<OrganizationRow>,
    total: Tally,
}

/// A family's name, or [`OTHER`].
fn family_name(family: Option<KeyFamily>) -> &'static str {
    family.map_or(OTHER, KeyFamily::name)
}

fn rows(tallies: &BTreeMap<Option<KeyFamily>, Tally>) -> Vec<FamilyRow> {
    // Families in layout order, keys of no family last.
    let mut ordered: Vec<(Option<KeyFamily>, Tally)> = tallies.iter().map(|(f, t)| (*f, *t)).collect();
    ordered.sort_by_key(|(family, _)| family.map_or(usize::MAX, |f| f as usize));
    ordered
        .into_iter()
        .map(|(family, tally)| FamilyRow {
            family: family_name(family),
            tally,
        })
        .collect()
}

fn stats(args: &StatsArgs) -> anyhow::Result<Report> {
    let flags = FlagSettings {
        data_dir: Some(args.data.clone()),
        ..FlagSettings::default()
    };
    let settings = Settings::load(args.config.as_deref(), flags).context("the settings cannot be used")?;
    let dir = settings.data_dir.join("store");
    if !dir.is_dir() {
        bail!(
            "no store in {}: pass --data with a server's data folder",
            dir.display()
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let (revision, families, organizations) = runtime.block_on(async {
        let (store, recovery) = open_store(&settings).await?;
        let counted = count(&store).await;
        store.close().await;
        counted.map(|(families, organizations)| (recovery.revision, families, organizations))
    })?;
    let mut total = Tally::default();
    for tally in families.values() {
        total.merge(tally);
    }
    Ok(Report {
        store: dir.display().to_string(),
        revision,
        disk_bytes: disk_bytes(&dir)?,
        families: rows(&families),
        organizations: organizations
            .into_iter()
            .map(|(organization, tallies)| {
                let mut tally = Tally::default();
                for family in tallies.values() {
                    tally.merge(family);
                }
                OrganizationRow {
                    organization,
                    tally,
                    families: rows(&tallies),
                }
            })
            .collect(),
        total,
    })
}

type FamilyTallies = BTreeMap<Option<KeyFamily>, Tally>;

/// Reads every key of the store in pages: tallies per family, and per organization and family.
async fn count(store: &dyn Store) -> anyhow::Result<(FamilyTallies, BTreeMap<String, FamilyTallies>)> {
    let keys = Keys::new(&RuntimeConfig::default().cluster);
    let mut families = FamilyTallies::new();
    let mut organizations: BTreeMap<String, FamilyTallies> = BTreeMap::new();
    let mut start = Vec::new();
    loop {
        let page = store
            .range(RangeRequest::new(KeyRange::from(start.clone())).with_limit(PAGE))
            .await
            .context("reading the store")?;
        for kv in &page.kvs {
            let owner = keys.family_of(&kv.key);
            let family = owner.as_ref().map(|o| o.family);
            let organization = match &owner {
                Some(owner) => owner
                    .organization
                    .clone()
                    .map_or_else(|| CLUSTER.to_owned(), |org| org.into_string()),
                None => OTHER.to_owned(),
            };
            families
                .entry(family)
                .or_default()
                .add(kv.key.len(), kv.value.len());
            organizations
                .entry(organization)
                .or_default()
                .entry(family)
                .or_default()
                .add(kv.key.len(), kv.value.len());
        }
        match page.kvs.last() {
            Some(last) if page.more => {
                start = last.key.clone();
                start.push(0);
            }
            _ => return Ok((families, organizations)),
        }
    }
}

/// The bytes of the files in the store's folder.
fn disk_bytes(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let metadata = entry
            .and_then(|entry| entry.metadata())
            .with_context(|| format!("reading {}", dir.display()))?;
        if metadata.is_file() {
            total += metadata.len();
        }
    }
    Ok(total)
}

impl Report {
    fn table(&self) -> String {
        let mut out = format!(
            "store {} at revision {}: {} keys, {} bytes of keys and values; {} bytes on disk\n\n",
            self.store, self.revision, self.total.keys, self.total.bytes, self.disk_bytes
        );
        let header = |first: &str| {
            format!(
                "{first:<16} {:>12} {:>14} {:>14} {:>14} {:>10}\n",
                "keys", "key bytes", "value bytes", "bytes", "bytes/key"
            )
        };
        let line = |name: &str, tally: &Tally| {
            format!(
                "{name:<16} {:>12} {:>14} {:>14} {:>14} {:>10.0}\n",
                tally.keys,
                tally.key_bytes,
                tally.value_bytes,
                tally.bytes,
                tally.bytes as f64 / tally.keys.max(1) as f64
            )
        };
        out.push_str(&header("family"));
        for row in &self.families {
            out.push_str(&line(row.family, &row.tally));
        }
        out.push_str(&line("total", &self.total));
        out.push('\n');
        out.push_str(&header("organization"));
        for row in &self.organizations {
            out.push_str(&line(&row.organization, &row.tally));
        }
        out
    }
}
