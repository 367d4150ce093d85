//! `agentprocess runs show` and `runs history`: one run as an operator sees it (who holds each
//! claim until when, the open work) and every change of it, through `GET /admin/v1/runs/{runId}`
//! and `GET /admin/v1/runs/{runId}/history`.

use super::table::table;
use super::{Connection, Outcome, get};
use agentprocess_gateway::admin_model::{Assignee, RunHistory, RunInspection, history_path, run_path};
use clap::Args;

/// What `runs show` asks (its help is on [`super::RunsCommand::Show`]).
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The run's id.
    run: String,
    /// Print the server's answer as it is: {"run", "steps", "workItems"}.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    connection: Connection,
}

/// What `runs history` asks (its help is on [`super::RunsCommand::History`]).
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The run's id.
    run: String,
    /// Print the server's answer as it is: {"runId", "events", "dropped"}.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    connection: Connection,
}

pub fn show(args: &ShowArgs) -> Outcome {
    let client = args.connection.client()?;
    let (answer, inspection): (_, RunInspection) = get(&client, &run_path(&args.run))?;
    if args.json {
        println!("{answer}");
        return Ok(());
    }
    print!("{}", inspection_text(&inspection));
    Ok(())
}

pub fn history(args: &HistoryArgs) -> Outcome {
    let client = args.connection.client()?;
    let (answer, history): (_, RunHistory) = get(&client, &history_path(&args.run))?;
    if args.json {
        println!("{answer}");
        return Ok(());
    }
    print!("{}", history_text(&history));
    Ok(())
}

/// The run's header, its steps (state, ready since, claim holder and until, lease expiries, due)
/// and its open work items.
fn inspection_text(inspection: &RunInspection) -> String {
    let run = &inspection.run;
    let mut text = format!(
        "run {}  {} v{}  {} ({})\nstarted {} by {}; updated {}\n",
        run.id, run.process, run.version, run.state, run.mode, run.started_at, run.started_by, run.updated_at
    );
    if let Some(end) = &run.end {
        let how = if end.cancelled { "cancelled" } else { "ended" };
        text.push_str(&format!("{how} {} by {}", end.at, end.by));
        if let Some(outcome) = &end.outcome {
            text.push_str(&format!(", outcome {outcome}"));
        }
        if let Some(note) = &end.note {
            text.push_str(&format!(": {note}"));
        }
        text.push('\n');
    }
    text.push('\n');
    let steps: Vec<Vec<String>> = inspection
        .steps
        .iter()
        .map(|step| {
            let (holder, until) = match &step.claim {
                Some(claim) => (claim.holder.clone(), claim.expires_at.clone()),
                None => (String::new(), String::new()),
            };
            vec![
                step.id.clone(),
                step.state.clone().unwrap_or_else(|| "not reached".to_owned()),
                step.ready_since.clone().unwrap_or_default(),
                holder,
                until,
                step.lease_expiries.to_string(),
                step.due.clone().unwrap_or_default(),
            ]
        })
        .collect();
    text.push_str(&table(
        &[
            "STEP",
            "STATE",
            "READY SINCE",
            "CLAIMED BY",
            "UNTIL",
            "LEASE EXPIRIES",
            "DUE",
        ],
        &steps,
    ));
    if inspection.work_items.is_empty() {
        text.push_str("\nno open work item\n");
        return text;
    }
    let items: Vec<Vec<String>> = inspection
        .work_items
        .iter()
        .map(|item| {
            vec![
                item.id.clone(),
                item.kind.clone(),
                item.step.clone(),
                assignee(&item.assigned_to),
                item.opened_at.clone(),
                item.note.clone().unwrap_or_default(),
            ]
        })
        .collect();
    text.push('\n');
    text.push_str(&table(
        &["WORK ITEM", "KIND", "STEP", "ASSIGNED TO", "OPENED", "NOTE"],
        &items,
    ));
    text
}

/// Who a work item waits for, in words.
fn assignee(assignee: &Assignee) -> String {
    let mut who = Vec::new();
    if assignee.operators {
        who.push("operators".to_owned());
    }
    if let Some(group) = &assignee.group {
        who.push(format!("group {group}"));
    }
    if let Some(person) = &assignee.person {
        who.push(person.clone());
    }
    who.join(", ")
}

/// Every event, oldest first: when, who, what; and how many older ones the server dropped.
fn history_text(history: &RunHistory) -> String {
    let mut text = String::new();
    if history.dropped > 0 {
        text.push_str(&format!(
            "{} older events were dropped (limits.history_events_per_run)\n",
            history.dropped
        ));
    }
    let rows: Vec<Vec<String>> = history
        .events
        .iter()
        .map(|event| vec![event.at.clone(), event.by.clone(), event.kind.to_string()])
        .collect();
    text.push_str(&table(&["AT", "BY", "WHAT"], &rows));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentprocess_gateway::admin_model::{
        ClaimInspection, HistoryEvent, HistoryKind, RunHeader, StepInspection, WorkItemInspection,
    };

    #[test]
    fn a_run_shows_who_holds_each_claim_until_when_and_the_open_work() {
        let inspection = RunInspection {
            run: RunHeader {
                id: "r_1".into(),
                process: "purchase-request".into(),
                version: 2,
                state: "waiting".into(),
                mode: "live".into(),
                started_at: "2026-12-01T10:00:00.000Z".into(),
                started_by: "a_ap".into(),
                updated_at: "2026-12-01T10:05:00.000Z".into(),
                end: None,
            },
            steps: vec![
                StepInspection {
                    id: "assess".into(),
                    state: Some("claimed".into()),
                    ready_since: Some("2026-12-01T10:00:00.000Z".into()),
                    claim: Some(ClaimInspection {
                        holder: "a_ap".into(),
                        expires_at: "2026-12-01T10:10:00.000Z".into(),
                    }),
                    lease_expiries: 2,
                    due: None,
                },
                StepInspection {
                    id: "place_order".into(),
                    state: None,
                    ready_since: None,
                    claim: None,
                    lease_expiries: 0,
                    due: None,
                },
            ],
            work_items: vec![WorkItemInspection {
                id: "w_1".into(),
                kind: "escalation".into(),
                step: "assess".into(),
                assigned_to: Assignee {
                    operators: true,
                    group: Some("finance".into()),
                    person: None,
                },
                opened_at: "2026-12-01T10:04:00.000Z".into(),
                note: Some("In EUR.".into()),
            }],
        };
        let text = inspection_text(&inspection);
        assert!(
            text.starts_with("run r_1  purchase-request v2  waiting (live)\n"),
            "{text}"
        );
        let step = text.lines().find(|line| line.starts_with("assess")).unwrap();
        for part in ["claimed", "a_ap", "2026-12-01T10:10:00.000Z", "  2"] {
            assert!(step.contains(part), "{part} in {step:?}");
        }
        assert!(
            text.lines()
                .any(|line| line.starts_with("place_order") && line.contains("not reached"))
        );
        let item = text.lines().find(|line| line.starts_with("w_1")).unwrap();
        assert!(
            item.contains("operators, group finance") && item.ends_with("In EUR."),
            "{item}"
        );
    }

    #[test]
    fn a_history_lists_every_event_and_says_what_was_dropped() {
        let history = RunHistory {
            run_id: "r_1".into(),
            events: vec![
                HistoryEvent {
                    at: "2026-12-01T10:00:00.000Z".into(),
                    by: "a_ap".into(),
                    kind: HistoryKind::Escalated {
                        step: "assess".into(),
                        work_item: "w_1".into(),
                        note: "In EUR.".into(),
                    },
                },
                HistoryEvent {
                    at: "2026-12-01T10:04:00.000Z".into(),
                    by: "ops@acme.test".into(),
                    kind: HistoryKind::Returned {
                        step: "assess".into(),
                        work_item: "w_1".into(),
                        note: "Use 4350 USD.".into(),
                    },
                },
            ],
            dropped: 3,
        };
        let text = history_text(&history);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "3 older events were dropped (limits.history_events_per_run)"
        );
        assert!(lines[1].starts_with("AT"));
        assert!(
            lines[2].contains("a_ap") && lines[2].contains("note: In EUR."),
            "{}",
            lines[2]
        );
        assert!(lines[3].contains("ops@acme.test") && lines[3].contains("note: Use 4350 USD."));
    }
}
