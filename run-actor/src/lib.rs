//! The actor host: the runtime that loads runs, applies commands with the run machine and
//! commits each write in one store transaction.
//!
//! [`machine`] (its own crate, `agentprocess-machine`, re-exported here) is the protocol's heart:
//! [`machine::apply`] takes a pinned process version, the run's state, one command and a context
//! (time, fresh randomness, limits, lookups), and returns either a [`machine::Transition`] (new
//! state, effects as data, the rendered reply) or a [`machine::Refusal`]. The runtime persists
//! the new state with the index entries, timers, leases and outbox entries the effects name, in
//! one transaction, and only then acts on them. A submission on a step with a `check`
//! (`check-1`) goes through `apply` twice: first it answers [`machine::Reply::NeedsEvaluation`]
//! and changes nothing, then the runtime applies the same command with the evaluator's outcome
//! attached ([`machine::Command::with_evaluation`]). [`machine::render`] renders the run view,
//! work items, `get_work` items and `snapshot` for reads that do not go through `apply`.
//!
//! [`fixtures`] writes runs straight into a stopped server's store, as their actors would.
//!
//! [`evaluator`] is the `check-1` client the actor host asks (an OpenAI-compatible endpoint).
//!
//! [`runtime`] is the host around it: [`runtime::Runtime`] routes each write to the actor of its
//! run ([`actor`]), which applies commands one at a time and commits each batch in one store
//! transaction, and serves reads from the indexes. Modules depend one way, with no cycle:
//!
//! ```text
//! runtime   → actor → (call, config, idempotency, pinned, rfc3339) → machine
//! call         ToolOutcome, RuntimeError: a call's answer (the call is the service's Write)
//! config       RuntimeConfig, Evaluator, RunFence
//! idempotency  fingerprints, the stored record, replays
//! pinned       the processes runs pin, cached by version
//! ```

pub use agentprocess_machine as machine;

pub mod actor;
pub mod backlog;
mod call;
mod config;
pub mod evaluator;
pub mod fixtures;
mod idempotency;
pub mod metrics;
pub mod overview;
pub mod packed;
mod pinned;
mod rfc3339;
pub mod runtime;

pub use agentprocess_service::error_chain;
pub use config::RunFence;
pub use evaluator::{EvaluatorConfig, EvaluatorConfigError, OpenAiEvaluator};
pub use runtime::mirror::MirrorLimits;
