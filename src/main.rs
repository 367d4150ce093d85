//! The `agentprocess` binary: the server's roles and the operator commands.

mod backup;
mod conformance;
mod conformance_cmd;
mod fixtures_cmd;
mod health;
mod load_cmd;
mod process_admin;
mod process_cmd;
mod process_map;
mod roles;
mod runs_cmd;
mod serve_cmd;
mod settings;
mod store_cmd;
mod telemetry;
mod token_cmd;
mod web;

use clap::{Parser, Subcommand};

/// The server allocates and frees many small JSON values per call; glibc's allocator spent about
/// a third of the server's CPU on them under load, mimalloc a fraction of that. Version 2 of it
/// (the crate's `v2` feature): under v3 a cluster's scheduler leader grew without end, in pages
/// v3 held as abandoned (BENCHMARKS.md, "Thirty minutes through the cluster").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::process::ExitCode;

/// A process server for the Agent Process protocol.
#[derive(Debug, Parser)]
#[command(name = "agentprocess", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Work with PROCESS.md files: check, hash and map them; import, publish and list them on a server.
    #[command(subcommand)]
    Process(process_cmd::ProcessCommand),
    /// Run the server: MCP endpoint, admin API, run actors and scheduler in one process.
    Serve(serve_cmd::ServeArgs),
    /// Run an MCP gateway of a cluster on etcd: routes each run's calls to its actor host.
    Gateway(roles::gateway::GatewayArgs),
    /// Run an actor host of a cluster on etcd: owns shards of runs and applies their writes.
    Actor(roles::actor::ActorArgs),
    /// Run a scheduler of a cluster on etcd: leader-elected; fires timers, delivers webhooks.
    Scheduler(roles::scheduler::SchedulerArgs),
    /// Print a dev bearer token signed with the local dev key.
    Token(token_cmd::TokenArgs),
    /// Check any Agent Process server against the protocol, or write the processes the checks use.
    Conformance(conformance_cmd::ConformanceArgs),
    /// Drive a server with concurrent agents and people; print throughput and latency.
    Load(load_cmd::LoadArgs),
    /// Fill a stopped server's store with open, waiting, ended and timer runs, for measurements.
    Fixtures(fixtures_cmd::FixturesArgs),
    /// Look into a stopped server's store (keys and bytes per key family); back a store up and restore it.
    #[command(subcommand)]
    Store(store_cmd::StoreCommand),
    /// List runs (stuck ones too) and cancel them on a server, as an operator.
    #[command(subcommand)]
    Runs(runs_cmd::RunsCommand),
    /// List the agent steps no agent has claimed on a server, as an operator.
    #[command(subcommand)]
    Work(runs_cmd::WorkCommand),
    /// List the open escalations on a server, as an operator.
    #[command(subcommand)]
    Escalations(runs_cmd::EscalationsCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Process(command) => process_cmd::run(command),
        Command::Token(args) => token_cmd::run(args),
        Command::Serve(args) => serve_cmd::run(args),
        Command::Gateway(args) => roles::gateway::run(args),
        Command::Actor(args) => roles::actor::run(args),
        Command::Scheduler(args) => roles::scheduler::run(args),
        Command::Conformance(args) => conformance_cmd::run(args),
        Command::Load(args) => load_cmd::run(args),
        Command::Fixtures(args) => fixtures_cmd::run(args),
        Command::Store(command) => store_cmd::run(command),
        Command::Runs(command) => runs_cmd::run_runs(command),
        Command::Work(command) => runs_cmd::run_work(command),
        Command::Escalations(command) => runs_cmd::run_escalations(command),
    }
}
