//! `agentprocess runs cancel`: the protocol's `cancel` through `POST /admin/v1/runs/{runId}/cancel`.

use super::{Connection, Outcome};
use crate::process_admin::Failure;
use agentprocess_gateway::admin_ops_model::{CancelRequest, RunViewHeader, cancel_path};
use clap::Args;

/// What `runs cancel` sends (its help is on [`super::RunsCommand::Cancel`]).
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The run's id.
    run: String,
    /// Why the run is cancelled.
    #[arg(long, value_name = "TEXT")]
    reason: String,
    /// The requestId of the cancel: the same one again returns the first answer. Default: a new
    /// UUID.
    #[arg(long, value_name = "ID")]
    request_id: Option<String>,
    /// Print the server's answer as it is: the run view.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    connection: Connection,
}

pub fn run(args: &CancelArgs) -> Outcome {
    let client = args.connection.client()?;
    let request = CancelRequest {
        reason: Some(args.reason.clone()),
        request_id: Some(
            args.request_id
                .clone()
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        ),
    };
    let body = serde_json::to_vec(&request).expect("a cancel request is JSON");
    let answer = client.call(reqwest::Method::POST, &cancel_path(&args.run), body)?;
    if args.json {
        println!("{answer}");
        return Ok(());
    }
    let view: RunViewHeader = serde_json::from_value(answer)
        .map_err(|e| Failure::ServerFailed(format!("the answer is not a run view: {e}")))?;
    let run = &view.run;
    match &run.ended {
        Some(ended) => println!(
            "{}: {} ({} v{}) by {} at {}: {}",
            run.id,
            run.state,
            run.process,
            run.version,
            ended.by,
            ended.at,
            ended.note.as_deref().unwrap_or_default()
        ),
        None => println!("{}: {} ({} v{})", run.id, run.state, run.process, run.version),
    }
    Ok(())
}
