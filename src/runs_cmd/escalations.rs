//! `agentprocess escalations list`: the open escalations, through `GET /admin/v1/escalations`.

use super::table::table;
use super::{Connection, Outcome, get, with_query};
use agentprocess_gateway::admin_ops_model::{ESCALATIONS_PATH, EscalationsPage, EscalationsQuery};
use clap::Args;

/// The options of `escalations list` (its help is on [`super::EscalationsCommand::List`]).
#[derive(Debug, Args)]
pub struct EscalationsListArgs {
    /// At most this many, 1 to 500 (default 100).
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    /// Print the server's answer as it is: {"items": [...], "truncated"}.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    connection: Connection,
}

pub fn run(args: &EscalationsListArgs) -> Outcome {
    let client = args.connection.client()?;
    let query = EscalationsQuery { limit: args.limit };
    let (answer, page): (_, EscalationsPage) =
        get(&client, &with_query(ESCALATIONS_PATH, &query.to_query()))?;
    if args.json {
        println!("{answer}");
        return Ok(());
    }
    print!("{}", escalations_table(&page));
    Ok(())
}

fn escalations_table(page: &EscalationsPage) -> String {
    if page.items.is_empty() {
        return "no escalation is open\n".to_owned();
    }
    let rows: Vec<Vec<String>> = page
        .items
        .iter()
        .map(|escalation| {
            vec![
                escalation.run_id.clone(),
                escalation.process.clone(),
                escalation.step_id.clone(),
                escalation.work_item_id.clone(),
                escalation.escalated_by.clone(),
                escalation.opened_at.clone(),
                // One line per escalation, whatever the note holds.
                escalation.note.split_whitespace().collect::<Vec<_>>().join(" "),
            ]
        })
        .collect();
    let header = ["RUN", "PROCESS", "STEP", "WORK ITEM", "BY", "OPENED", "NOTE"];
    let mut text = table(&header, &rows);
    if page.truncated {
        text.push_str("more escalations are open than listed: --limit raises how many\n");
    }
    text
}
