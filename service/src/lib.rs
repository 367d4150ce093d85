//! The interfaces every role uses to reach another, in types of their own: what a gateway or the
//! scheduler knows of the actor host. The actor host implements them in process (`serve`); a
//! cluster implements them over gRPC (mirrored in `proto/`). Gateways and the scheduler import
//! these types, never the machine's, so a change inside the machine stops at the actor host.
//!
//! ```text
//! run.rs             RunService: protocol writes, fired timers, reads, uploads; their arguments and outcomes
//! hints.rs           Hints: "look sooner" from writers to the scheduler, in memory or from a store watch
//! trace.rs           the W3C trace context of the call being served, carried between roles
//! exported_spans.rs  the layer that makes exported spans and hands them to OpenTelemetry's SDK
//! ```
//!
//! Two values are the protocol's own vocabulary and come from the machine unchanged: the error
//! codes ([`ErrorCode`]) and points in time ([`Timestamp`]). The ids ([`OrgId`], [`RunId`],
//! [`StepId`]) are every layer's, the store's keys included.

pub mod exported_spans;
mod hints;
pub mod overview;
mod run;
pub mod trace;

pub use agentprocess_ids::{OrgId, RunId, StepId};
pub use agentprocess_vocab::{ErrorCode, Timestamp, run_routing_key, start_routing_key};

/// The run a claim token belongs to, read from the token itself (it carries its run id in the
/// clear so that any role can route it without a lookup); `None` when it is not a claim token.
/// Says nothing about whether the token verifies: only the run's actor knows that.
pub fn run_id_of_token(token: &str) -> Option<&str> {
    agentprocess_vocab::token::run_id(token)
}
pub use hints::{Hints, LocalHints, NoHints};
pub use overview::{OVERVIEW_HOURS, OrgOverview, Overview, ProcessOverview};
pub use run::{
    Caller, CallerKind, Decision, EvidenceItem, GetWork, ListRuns, MAX_WAIT_FOR_WORK, Mode, ReadySteps,
    RenderedData, RunService, ServiceError, Submission, ToolOutcome, ToolRefusal, Upload, WAIT_PROFILE,
    Write,
};

/// An error and its sources, joined with `: `: an HTTP client's own message alone rarely says
/// what went wrong.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_routes_by_the_run_it_reaches() {
        let acme = OrgId::from("acme");
        let start = Write::StartRun {
            process: "p".into(),
            version: None,
            inputs: serde_json::json!({}),
            mode: Mode::Live,
        };
        assert_eq!(
            start.routing_key(&acme, "req-1"),
            Some(start_routing_key(&acme, "req-1"))
        );
        let run_id = "r_0190000000a0123456789abcdef";
        let claim = Write::Claim {
            run_id: RunId::from(run_id),
            step: StepId::from_wire("s"),
        };
        assert_eq!(
            claim.routing_key(&acme, "req-2").as_deref(),
            Some("0123456789abcdef")
        );
        let renew = Write::Renew {
            token: format!("apt1.{run_id}.3.{}", "ab".repeat(32)),
            progress: None,
        };
        assert_eq!(
            renew.routing_key(&acme, "req-3").as_deref(),
            Some("0123456789abcdef")
        );
        let forged = Write::Renew {
            token: "not-a-token".into(),
            progress: None,
        };
        assert_eq!(forged.routing_key(&acme, "req-4"), None);
    }

    #[test]
    fn a_claim_token_names_its_run_and_anything_else_names_none() {
        let token = format!("apt1.r_8f2.3.{}", "ab".repeat(32));
        assert_eq!(run_id_of_token(&token), Some("r_8f2"));
        assert_eq!(run_id_of_token("eyJhbGciOi.x.y"), None);
        assert_eq!(run_id_of_token(""), None);
    }
}
