//! `agentprocess work list`: the agent steps no agent has claimed, through `GET /admin/v1/work`.

use super::table::{age, parse_duration, table};
use super::{Connection, Outcome, get, with_query};
use agentprocess_gateway::admin_ops_model::{WORK_PATH, WorkPage, WorkQuery};
use clap::Args;

/// The filters and paging of `work list` (its help is on [`super::WorkCommand::List`]).
#[derive(Debug, Args)]
pub struct WorkListArgs {
    /// Only steps ready for longer than this (90s, 10m, 1h30m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    older_than: Option<u64>,
    /// Only steps whose claims lapsed more than N times (a page then holds the steps of the
    /// page read that pass, so it can be short with more to come).
    #[arg(long, value_name = "N")]
    lease_expired_more_than: Option<u64>,
    /// Steps per page, 1 to 100 (default 20).
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

pub fn run(args: &WorkListArgs) -> Outcome {
    let client = args.connection.client()?;
    let query = WorkQuery {
        older_than_seconds: args.older_than,
        lease_expired_more_than: args.lease_expired_more_than,
        limit: args.limit,
        cursor: args.cursor.clone(),
    };
    let (answer, page): (_, WorkPage) = get(&client, &with_query(WORK_PATH, &query.to_query()))?;
    if args.json {
        println!("{answer}");
        return Ok(());
    }
    print!("{}", work_table(&page));
    Ok(())
}

fn work_table(page: &WorkPage) -> String {
    if page.items.is_empty() {
        return "no agent step is waiting to be claimed\n".to_owned();
    }
    let rows: Vec<Vec<String>> = page
        .items
        .iter()
        .map(|step| {
            vec![
                step.run_id.clone(),
                step.process.clone(),
                step.version.to_string(),
                step.step_id.clone(),
                step.mode.clone(),
                step.ready_since.clone(),
                age(step.age_seconds),
                step.lease_expiries.to_string(),
            ]
        })
        .collect();
    let header = [
        "RUN",
        "PROCESS",
        "VERSION",
        "STEP",
        "MODE",
        "READY SINCE",
        "WAITING",
        "LAPSED",
    ];
    let mut text = table(&header, &rows);
    if let Some(cursor) = &page.next_cursor {
        text.push_str(&format!("more: --cursor {cursor}\n"));
    }
    text
}
