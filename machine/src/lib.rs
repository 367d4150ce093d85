//! The run state machine: applies one command to one run and returns the new state, the effects
//! the runtime must carry out, and the reply; or a refusal that changes nothing.
//!
//! PURE: no clock, no IO, no randomness. Time, fresh randomness, limits and lookups come in
//! through [`Ctx`]. A write returns only after every automatic transition it triggered (finish
//! reached, `wait_until` already past, held event consumed) was applied. A checked submission
//! (`check-1`) is the one write that takes two applications: see [`check`].
//!
//! Its own crate so that Cargo, not review, keeps it pure: its dependencies are the process
//! model, the shared vocabulary (time, error codes, run ids, tokens), serde, sha2 and indexmap,
//! nothing that does IO.
//!
//! ```text
//! lib.rs        apply, Transition, Reply
//! command.rs    Command and its arguments       ctx.rs       Ctx, Caller, PinnedProcess, UploadLookup
//! state.rs      RunState and what it holds      effect.rs    Effect, Notification
//! refusal.rs    Refusal { code, message, issues }
//! check.rs      check-1: evaluator request and outcome, verdicts, what a verdict does
//! start.rs claim.rs renew.rs submit.rs escalate.rs decide.rs cancel.rs send_event.rs timer.rs
//! advance.rs    readiness, completion, routes, rework, joins, run end
//! acceptance.rs output, evidence, summary, next/reason and the run-data cap
//! render.rs     run view, run data, snapshot, work items, get_work items, claim, handoff
//! history.rs    the run's history: every change as an event, appended in the change's own write
//! inspect.rs    an operator's inspection of a run: claims, lease expiries, open work items
//! ```

mod acceptance;
mod advance;
mod cancel;
pub mod check;
mod claim;
mod command;
mod ctx;
mod decide;
mod effect;
mod escalate;
pub mod history;
pub mod inspect;
mod refusal;
pub mod render;
mod renew;
mod send_event;
mod start;
mod state;
mod submit;
mod timer;

pub use check::{
    CheckAnswer, CheckVerdict, EvaluatorAnswer, EvaluatorOutcome, EvaluatorQuestion, EvaluatorRequest,
    Probability, QuestionResult, QuestionVerdict, Verdict,
};
pub use command::{Command, Decide, Decision, EvidenceItem, StartRun, Submission};
pub use ctx::{Caller, CallerKind, Ctx, Limits, NoUploads, PinnedProcess, UploadLookup};
pub use effect::{Effect, Notification, Recipient};
pub use history::{CheckAction, HistoryEvent, HistoryKind};
pub use refusal::Refusal;
pub use state::*;

pub use agentprocess_ids::{OrgId, RunId, StepId};
pub use agentprocess_vocab::{
    ErrorCode, Fresh, Timestamp, UploadStatus, hex, run_routing_key, start_routing_key, start_run_id,
    start_seed, token,
};

use advance::Tx;
use serde_json::Value;

/// The result of an applied command.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub state: RunState,
    pub effects: Vec<Effect>,
    pub reply: Reply,
}

/// What the caller gets back: the tool result's `data`, already rendered from the new state.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `start_run`, `submit`, `escalate`, `decide`, `cancel`.
    RunView(Value),
    Claim(Value),
    Renew(Value),
    SendEvent(Value),
    /// Scheduler commands answer nothing.
    None,
    /// `check-1`: a checked submission passed the objective rules and the evaluator must be
    /// asked. NOTHING CHANGED (the transition carries the state as it was and no effects), so
    /// the runtime commits nothing and records no idempotency entry; it asks the evaluator
    /// (retrying once on error) and applies the same command again with
    /// [`Command::with_evaluation`].
    NeedsEvaluation(Box<EvaluatorRequest>),
}

impl Reply {
    /// The `data` of the tool result; `Value::Null` for scheduler commands.
    pub fn data(&self) -> &Value {
        match self {
            Reply::RunView(v) | Reply::Claim(v) | Reply::Renew(v) | Reply::SendEvent(v) => v,
            Reply::None | Reply::NeedsEvaluation(_) => &Value::Null,
        }
    }

    /// [`Reply::data`], moved out rather than copied.
    pub fn into_data(self) -> Value {
        match self {
            Reply::RunView(v) | Reply::Claim(v) | Reply::Renew(v) | Reply::SendEvent(v) => v,
            Reply::None | Reply::NeedsEvaluation(_) => Value::Null,
        }
    }
}

/// What a command handler asks `finish` to render once every automatic transition is applied.
#[derive(Debug)]
pub(crate) enum Answer {
    RunView,
    Claim {
        step: StepId,
        token: String,
    },
    Renew {
        token: String,
        expires_at: Timestamp,
    },
    SendEvent {
        consumed_by: Option<String>,
    },
    /// A scheduler command that no longer applies (stale generation, renewed lease, ended run):
    /// nothing changes.
    Ignored,
    /// A scheduler command that was applied.
    Applied,
    /// `check-1`: ask the evaluator; nothing changes.
    NeedsEvaluation(Box<EvaluatorRequest>),
}

/// The refusal for a command whose run does not exist in the caller's organization: a token
/// naming such a run does not verify (`invalid`, spec §4.3: never `not_found`, which would tell
/// a made-up token from a real one); any other command is `not_found`.
pub fn no_such_run(command: &Command) -> Refusal {
    match command {
        Command::Renew { .. } | Command::Submit { .. } | Command::Escalate { .. } => {
            Refusal::invalid("the token does not verify")
        }
        _ => Refusal::not_found("no such run in this organization"),
    }
}

/// Applies `command` to `run` (`None` only for `StartRun`).
pub fn apply(
    process: &PinnedProcess,
    run: Option<&RunState>,
    command: Command,
    ctx: &Ctx<'_>,
) -> Result<Transition, Refusal> {
    let run = match (command, run) {
        (Command::StartRun(start), None) => return start::start(process, start, ctx),
        (Command::StartRun(_), Some(_)) => {
            return Err(Refusal::conflict("run_exists", "this run already exists"));
        }
        (command, None) => return Err(no_such_run(&command)),
        (command, Some(run)) => (command, run),
    };
    let (command, run) = run;
    if let Some(caller) = caller_of(&command)
        && caller.organization != run.organization
    {
        return Err(no_such_run(&command));
    }
    let mut tx = Tx::new(process, ctx, run.clone());
    let answer = match command {
        Command::StartRun(_) => unreachable!("handled above"),
        Command::Claim { caller, step } => claim::claim(&mut tx, &caller, &step)?,
        Command::Renew {
            caller,
            token,
            progress,
        } => renew::renew(&mut tx, &caller, &token, progress)?,
        Command::Submit {
            caller,
            token,
            submission,
            evaluation,
        } => submit::submit(&mut tx, &caller, &token, submission, evaluation)?,
        Command::Escalate { caller, token, note } => escalate::escalate(&mut tx, &caller, &token, note)?,
        Command::Decide(decide) => decide::decide(&mut tx, decide)?,
        Command::Cancel { caller, reason } => cancel::cancel(&mut tx, &caller, reason)?,
        Command::SendEvent { caller, name, data } => send_event::send_event(&mut tx, &caller, &name, data)?,
        Command::TimerFired {
            step,
            kind,
            generation,
        } => timer::timer_fired(&mut tx, &step, kind, generation),
        Command::ClaimExpired { step, lease } => timer::claim_expired(&mut tx, &step, lease),
    };
    if let Answer::NeedsEvaluation(request) = answer {
        return Ok(Transition {
            state: run.clone(),
            effects: Vec::new(),
            reply: Reply::NeedsEvaluation(request),
        });
    }
    Ok(tx.finish(answer))
}

fn caller_of(command: &Command) -> Option<&Caller> {
    match command {
        Command::StartRun(StartRun { caller, .. })
        | Command::Claim { caller, .. }
        | Command::Renew { caller, .. }
        | Command::Submit { caller, .. }
        | Command::Escalate { caller, .. }
        | Command::Decide(Decide { caller, .. })
        | Command::Cancel { caller, .. }
        | Command::SendEvent { caller, .. } => Some(caller),
        Command::TimerFired { .. } | Command::ClaimExpired { .. } => None,
    }
}
