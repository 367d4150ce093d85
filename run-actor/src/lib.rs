//! The run state machine (pure) and the runtime that loads runs, applies commands and commits.
//!
//! [`machine`] is the protocol's heart: [`machine::apply`] takes a pinned process version, the
//! run's state, one command and a context (time, fresh randomness, limits, lookups), and returns
//! either a [`machine::Transition`] (new state, effects as data, the rendered reply) or a
//! [`machine::Refusal`]. The runtime persists the new state with the index entries, timers,
//! leases and outbox entries the effects name, in one transaction, and only then acts on them.
//! A submission on a step with a `check` (`check-1`) goes through `apply` twice: first it answers
//! [`machine::Reply::NeedsEvaluation`] and changes nothing, then the runtime applies the same
//! command with the evaluator's outcome attached ([`machine::Command::with_evaluation`]).
//! [`machine::render`] renders the run view, work items, `get_work` items and `snapshot` for
//! reads that do not go through `apply`.
//!
//! ```text
//! machine/
//!   mod.rs        apply, Transition, Reply
//!   command.rs    Command and its arguments       ctx.rs       Ctx, Caller, PinnedProcess, UploadLookup
//!   state.rs      RunState and what it holds      effect.rs    Effect, Notification
//!   refusal.rs    Refusal { code, message, issues }
//!   check.rs      check-1: evaluator request and outcome, verdicts, what a verdict does
//!   start.rs claim.rs renew.rs submit.rs escalate.rs decide.rs cancel.rs send_event.rs timer.rs
//!   advance.rs    readiness, completion, routes, rework, joins, run end
//!   acceptance.rs output, evidence, summary, next/reason and the run-data cap
//!   render.rs     run view, run data, snapshot, work items, get_work items, claim, handoff
//!   token.rs      claim tokens: run id in the clear, hashed secret
//!   time.rs       Timestamp: milliseconds since the epoch, RFC 3339
//! ```
//!
//! [`runtime`] is the host around it: [`runtime::Runtime`] implements [`runtime::RunService`],
//! routes each write to the actor of its run ([`actor`]), which applies commands one at a time
//! and commits each batch in one store transaction, and serves reads from the indexes.

pub mod actor;
pub mod machine;
pub mod runtime;
