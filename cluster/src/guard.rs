//! An actor host's face to the cluster: a run's call is admitted only while this host owns the
//! run's shard, and counted in flight so that a shard is handed over only once it is quiet.

use crate::membership::ActorMembership;
use crate::shards::shard_of;
use agentprocess_service::{
    Caller, GetWork, ListRuns, OrgId, ReadySteps, RunId, RunService, ServiceError, ToolOutcome, Upload,
    Write, run_routing_key,
};
use async_trait::async_trait;
use std::sync::Arc;

/// Wraps the host's own run service: calls of a run whose shard this host does not own (or is
/// handing over) are answered [`ServiceError::NotOwner`] without reaching it, so the caller's
/// router looks the owner up again. Calls that belong to no run (reads from the indexes,
/// uploads, tokens that name no run) are served by any host.
#[derive(Debug)]
pub struct ShardGuard {
    inner: Arc<dyn RunService>,
    membership: Arc<ActorMembership>,
    shards: u32,
}

impl ShardGuard {
    pub fn new(inner: Arc<dyn RunService>, membership: Arc<ActorMembership>, shards: u32) -> ShardGuard {
        ShardGuard {
            inner,
            membership,
            shards,
        }
    }

    fn admit(&self, routing_key: &str) -> Result<crate::membership::ShardPermit, ServiceError> {
        self.membership
            .admit(shard_of(routing_key, self.shards))
            .map_err(|not_owner| ServiceError::NotOwner(not_owner.to_string()))
    }
}

#[async_trait]
impl RunService for ShardGuard {
    async fn execute(
        &self,
        caller: &Caller,
        write: Write,
        request_id: &str,
    ) -> Result<ToolOutcome, ServiceError> {
        let _permit = match write.routing_key(&caller.organization, request_id) {
            Some(key) => Some(self.admit(&key)?),
            None => None,
        };
        self.inner.execute(caller, write, request_id).await
    }

    async fn fire_timer(
        &self,
        organization: &OrgId,
        run_id: &RunId,
        timer_id: &str,
    ) -> Result<(), ServiceError> {
        let _permit = self.admit(run_routing_key(run_id.as_str()))?;
        self.inner.fire_timer(organization, run_id, timer_id).await
    }

    async fn get_run(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, ServiceError> {
        let _permit = self.admit(run_routing_key(run_id.as_str()))?;
        self.inner.get_run(caller, run_id).await
    }

    async fn run_history(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, ServiceError> {
        let _permit = self.admit(run_routing_key(run_id.as_str()))?;
        self.inner.run_history(caller, run_id).await
    }

    async fn inspect_run(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, ServiceError> {
        let _permit = self.admit(run_routing_key(run_id.as_str()))?;
        self.inner.inspect_run(caller, run_id).await
    }

    async fn get_work(&self, caller: &Caller, request: GetWork) -> Result<ToolOutcome, ServiceError> {
        self.inner.get_work(caller, request).await
    }

    async fn list_runs(&self, caller: &Caller, request: ListRuns) -> Result<ToolOutcome, ServiceError> {
        self.inner.list_runs(caller, request).await
    }

    async fn ready_steps(&self, caller: &Caller, request: ReadySteps) -> Result<ToolOutcome, ServiceError> {
        self.inner.ready_steps(caller, request).await
    }

    async fn list_processes(
        &self,
        caller: &Caller,
        cursor: Option<String>,
    ) -> Result<ToolOutcome, ServiceError> {
        self.inner.list_processes(caller, cursor).await
    }

    async fn upload(
        &self,
        caller: &Caller,
        upload: Upload,
        request_id: &str,
    ) -> Result<ToolOutcome, ServiceError> {
        self.inner.upload(caller, upload, request_id).await
    }
}
