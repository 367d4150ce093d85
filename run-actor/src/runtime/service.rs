//! The in-process run service: the service layer's types in, the machine's types to the actors,
//! and back. This is the only place the two vocabularies meet: `Runtime::execute` takes the
//! service's `Write` and turns its parts into a machine command with the functions here.

use super::{Runtime, reads};
use crate::call::{RuntimeError, ToolOutcome};
use crate::error_chain;
use crate::machine::{Caller, CallerKind, Decision, EvidenceItem, Mode, OrgId, Refusal, RunId, Submission};
use agentprocess_service as service;
use async_trait::async_trait;

#[async_trait]
impl service::RunService for Runtime {
    async fn execute(
        &self,
        caller: &service::Caller,
        write: service::Write,
        request_id: &str,
    ) -> Result<service::ToolOutcome, service::ServiceError> {
        outcome(Runtime::execute(self, &caller_of(caller), write, request_id).await)
    }

    async fn fire_timer(
        &self,
        organization: &OrgId,
        run_id: &RunId,
        timer_id: &str,
    ) -> Result<(), service::ServiceError> {
        Runtime::fire_timer(self, organization, run_id, timer_id)
            .await
            .map_err(failure)
    }

    async fn get_run(
        &self,
        caller: &service::Caller,
        run_id: &RunId,
    ) -> Result<service::ToolOutcome, service::ServiceError> {
        outcome(Runtime::get_run(self, &caller_of(caller), run_id).await)
    }

    async fn run_history(
        &self,
        caller: &service::Caller,
        run_id: &RunId,
    ) -> Result<service::ToolOutcome, service::ServiceError> {
        outcome(Runtime::run_history(self, &caller_of(caller), run_id).await)
    }

    async fn inspect_run(
        &self,
        caller: &service::Caller,
        run_id: &RunId,
    ) -> Result<service::ToolOutcome, service::ServiceError> {
        outcome(Runtime::inspect_run(self, &caller_of(caller), run_id).await)
    }

    async fn get_work(
        &self,
        caller: &service::Caller,
        request: service::GetWork,
    ) -> Result<service::ToolOutcome, service::ServiceError> {
        let caller = caller_of(caller);
        match super::waiting::work_page(&self.inner.host, &caller, request).await {
            // A person's items may hold file evidence (an escalation's candidate), whose links
            // the gateway adds to values: theirs leave parsed.
            Ok(Ok(page)) if matches!(caller.kind, CallerKind::Agent { .. }) => {
                Ok(service::ToolOutcome::Rendered(page))
            }
            Ok(Ok(page)) => Ok(service::ToolOutcome::Ok(page.to_value())),
            Ok(Err(refusal)) => Ok(service::ToolOutcome::Refused(refusal_of(refusal))),
            Err(error) => Err(failure(error)),
        }
    }

    async fn ready_steps(
        &self,
        caller: &service::Caller,
        request: service::ReadySteps,
    ) -> Result<service::ToolOutcome, service::ServiceError> {
        // Agents' items: no file evidence, so they leave as stored.
        match reads::ready_steps_page(&self.inner.host, &caller_of(caller), request).await {
            Ok(Ok(page)) => Ok(service::ToolOutcome::Rendered(page)),
            Ok(Err(refusal)) => Ok(service::ToolOutcome::Refused(refusal_of(refusal))),
            Err(error) => Err(failure(error)),
        }
    }

    async fn list_runs(
        &self,
        caller: &service::Caller,
        request: service::ListRuns,
    ) -> Result<service::ToolOutcome, service::ServiceError> {
        outcome(Runtime::list_runs(self, &caller_of(caller), request).await)
    }

    async fn list_processes(
        &self,
        caller: &service::Caller,
        cursor: Option<String>,
    ) -> Result<service::ToolOutcome, service::ServiceError> {
        outcome(Runtime::list_processes(self, &caller_of(caller), cursor).await)
    }

    async fn upload(
        &self,
        caller: &service::Caller,
        upload: service::Upload,
        request_id: &str,
    ) -> Result<service::ToolOutcome, service::ServiceError> {
        outcome(Runtime::upload(self, &caller_of(caller), upload, request_id).await)
    }
}

/// An infrastructure failure as the service layer reports it, with every cause.
fn failure(error: RuntimeError) -> service::ServiceError {
    match error {
        RuntimeError::NotOwner(why) => service::ServiceError::NotOwner(why),
        RuntimeError::Store(agentprocess_store::StoreError::Overloaded {
            limit,
            retry_after_ms,
        }) => service::ServiceError::Overloaded {
            limit,
            retry_after_ms,
        },
        error => service::ServiceError::Unavailable(error_chain(&error)),
    }
}

fn outcome(result: Result<ToolOutcome, RuntimeError>) -> Result<service::ToolOutcome, service::ServiceError> {
    match result.map_err(failure)? {
        ToolOutcome::Ok(data) => Ok(service::ToolOutcome::Ok(data)),
        ToolOutcome::Refused(refusal) => Ok(service::ToolOutcome::Refused(refusal_of(refusal))),
    }
}

/// A machine refusal as the caller gets it. What a refusal remembers for the run stays behind.
fn refusal_of(refusal: Refusal) -> service::ToolRefusal {
    service::ToolRefusal {
        code: refusal.code,
        message: refusal.message,
        issues: refusal.issues,
    }
}

fn caller_of(caller: &service::Caller) -> Caller {
    Caller {
        organization: caller.organization.clone(),
        kind: match &caller.kind {
            service::CallerKind::Agent { id } => CallerKind::Agent { id: id.clone() },
            service::CallerKind::Person { email, groups } => CallerKind::Person {
                email: email.clone(),
                groups: groups.clone(),
            },
        },
        operator: caller.operator,
    }
}

pub(super) fn mode_of(mode: service::Mode) -> Mode {
    match mode {
        service::Mode::Live => Mode::Live,
        service::Mode::Test => Mode::Test,
    }
}

pub(super) fn decision_of(decision: service::Decision) -> Decision {
    match decision {
        service::Decision::Completed => Decision::Completed,
        service::Decision::Approved => Decision::Approved,
        service::Decision::Rejected => Decision::Rejected,
        service::Decision::Returned => Decision::Returned,
        service::Decision::Failed => Decision::Failed,
    }
}

pub(super) fn evidence_of(items: Vec<service::EvidenceItem>) -> Vec<EvidenceItem> {
    items
        .into_iter()
        .map(|item| EvidenceItem {
            kind: item.kind,
            reference: item.reference,
        })
        .collect()
}

pub(super) fn submission_of(submission: service::Submission) -> Submission {
    Submission {
        output: submission.output,
        evidence: evidence_of(submission.evidence),
        summary: submission.summary,
        next: submission.next,
        reason: submission.reason,
    }
}
