//! `agentprocess runs list`: the organization's runs through `GET /admin/v1/runs`.

use super::table::{age, parse_duration, table};
use super::{Connection, Outcome, get, with_query};
use agentprocess_gateway::admin_ops_model::{RUNS_PATH, RunsPage, RunsQuery};
use clap::{Args, ValueEnum};

/// The filters and paging of `runs list` (its help is on [`super::RunsCommand::List`]).
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only runs of this process.
    #[arg(long, value_name = "NAME")]
    process: Option<String>,
    /// Only runs in this state: active, waiting, ended or cancelled.
    #[arg(long, value_name = "STATE")]
    state: Option<String>,
    /// Only runs whose input NAME equals VALUE (repeatable): `--input amount=48000` matches the
    /// number, `--input 'code="007"'` the text.
    #[arg(long = "input", value_name = "NAME=VALUE", value_parser = parse_input)]
    inputs: Vec<(String, String)>,
    /// Only runs with an overdue step.
    #[arg(long)]
    overdue: bool,
    /// Only live or only test runs.
    #[arg(long, value_enum)]
    mode: Option<Mode>,
    /// Only runs with an agent step ready and unclaimed for longer than this (90s, 10m, 1h30m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    stuck: Option<u64>,
    /// Runs per page, 1 to 100 (default 20).
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    /// The next page: the cursor the previous page printed.
    #[arg(long, value_name = "CURSOR")]
    cursor: Option<String>,
    /// Print the server's answer as it is: {"items": [...], "nextCursor"}.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    connection: Connection,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    Live,
    Test,
}

fn parse_input(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => Ok((name.trim().to_owned(), value.to_owned())),
        _ => Err(format!("{text:?} is not NAME=VALUE")),
    }
}

impl ListArgs {
    fn query(&self) -> RunsQuery {
        RunsQuery {
            process: self.process.clone(),
            state: self.state.clone(),
            inputs: self.inputs.clone(),
            overdue: self.overdue.then_some(true),
            mode: self.mode.map(|mode| match mode {
                Mode::Live => "live".to_owned(),
                Mode::Test => "test".to_owned(),
            }),
            stuck_seconds: self.stuck,
            limit: self.limit,
            cursor: self.cursor.clone(),
        }
    }
}

pub fn run(args: &ListArgs) -> Outcome {
    let client = args.connection.client()?;
    let (answer, page): (_, RunsPage) = get(&client, &with_query(RUNS_PATH, &args.query().to_query()))?;
    if args.json {
        println!("{answer}");
        return Ok(());
    }
    print!("{}", runs_table(&page, args.stuck.is_some()));
    Ok(())
}

/// The page as people read it; with `stuck`, each run's stuck step and how long it has waited.
fn runs_table(page: &RunsPage, stuck: bool) -> String {
    if page.items.is_empty() {
        return match &page.next_cursor {
            None => "no runs match\n".to_owned(),
            Some(cursor) => format!("no runs match on this page; the next: --cursor {cursor}\n"),
        };
    }
    let mut header = vec!["RUN", "PROCESS", "VERSION", "STATE", "STARTED", "UPDATED"];
    if stuck {
        header.extend(["STUCK STEP", "READY SINCE", "WAITING"]);
    }
    let rows: Vec<Vec<String>> = page
        .items
        .iter()
        .map(|run| {
            let mut row = vec![
                run.id.clone(),
                run.process.clone(),
                run.version.to_string(),
                run.state.clone(),
                run.started_at.clone(),
                run.updated_at.clone(),
            ];
            if let Some(step) = &run.stuck {
                row.extend([
                    step.step_id.clone(),
                    step.ready_since.clone(),
                    age(step.age_seconds),
                ]);
            }
            row
        })
        .collect();
    let mut text = table(&header, &rows);
    if let Some(cursor) = &page.next_cursor {
        text.push_str(&format!("more: --cursor {cursor}\n"));
    }
    text
}
