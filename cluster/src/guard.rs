//! An actor host's face to the cluster: a run's call is admitted only while this host owns the
//! run's shard, and counted in flight so that a shard is handed over only once it is quiet; past
//! `cluster.max_in_flight_calls_per_host` calls at once, a call is answered at once with when to
//! come back, never queued.

use crate::membership::ActorMembership;
use crate::shards::shard_of;
use agentprocess_service::{
    Caller, GetWork, ListRuns, OrgId, ReadySteps, RunId, RunService, ServiceError, ToolOutcome, Upload,
    Write, run_routing_key,
};
use async_trait::async_trait;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The setting a call refused at the host's limit names.
pub const MAX_IN_FLIGHT_SETTING: &str = "cluster.max_in_flight_calls_per_host";
/// When a call refused at the host's limit is told to come back.
const RETRY_AFTER_MS: u64 = 100;

/// Wraps the host's own run service: calls of a run whose shard this host does not own (or is
/// handing over) are answered [`ServiceError::NotOwner`] without reaching it, so the caller's
/// router looks the owner up again. Calls that belong to no run (reads from the indexes,
/// uploads, tokens that name no run) are served by any host.
#[derive(Debug)]
pub struct ShardGuard {
    inner: Arc<dyn RunService>,
    membership: Arc<ActorMembership>,
    shards: u32,
    /// Calls this host works on at once, when bounded.
    in_flight: Option<Arc<Semaphore>>,
}

impl ShardGuard {
    pub fn new(inner: Arc<dyn RunService>, membership: Arc<ActorMembership>, shards: u32) -> ShardGuard {
        ShardGuard {
            inner,
            membership,
            shards,
            in_flight: None,
        }
    }

    /// Bounds the calls this host works on at once to `max` (0: no bound). Timer firings are not
    /// counted (they come back by themselves), nor `get_work` calls that wait for work (bounded
    /// by the gateways' own admission limits).
    pub fn with_max_in_flight(mut self, max: usize) -> ShardGuard {
        self.in_flight = (max > 0).then(|| Arc::new(Semaphore::new(max)));
        self
    }

    /// A place among the calls in flight, or the answer that there is none.
    fn take_place(&self) -> Result<Option<OwnedSemaphorePermit>, ServiceError> {
        let Some(in_flight) = &self.in_flight else {
            return Ok(None);
        };
        in_flight
            .clone()
            .try_acquire_owned()
            .map(Some)
            .map_err(|_| ServiceError::Overloaded {
                limit: MAX_IN_FLIGHT_SETTING.to_owned(),
                retry_after_ms: RETRY_AFTER_MS,
            })
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
        let _place = self.take_place()?;
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
        let _place = self.take_place()?;
        let _permit = self.admit(run_routing_key(run_id.as_str()))?;
        self.inner.get_run(caller, run_id).await
    }

    async fn run_history(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, ServiceError> {
        let _place = self.take_place()?;
        let _permit = self.admit(run_routing_key(run_id.as_str()))?;
        self.inner.run_history(caller, run_id).await
    }

    async fn inspect_run(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, ServiceError> {
        let _place = self.take_place()?;
        let _permit = self.admit(run_routing_key(run_id.as_str()))?;
        self.inner.inspect_run(caller, run_id).await
    }

    async fn get_work(&self, caller: &Caller, request: GetWork) -> Result<ToolOutcome, ServiceError> {
        let _place = match request.wait {
            Some(_) => None,
            None => self.take_place()?,
        };
        self.inner.get_work(caller, request).await
    }

    async fn list_runs(&self, caller: &Caller, request: ListRuns) -> Result<ToolOutcome, ServiceError> {
        let _place = self.take_place()?;
        self.inner.list_runs(caller, request).await
    }

    async fn ready_steps(&self, caller: &Caller, request: ReadySteps) -> Result<ToolOutcome, ServiceError> {
        let _place = self.take_place()?;
        self.inner.ready_steps(caller, request).await
    }

    async fn list_processes(
        &self,
        caller: &Caller,
        cursor: Option<String>,
    ) -> Result<ToolOutcome, ServiceError> {
        let _place = self.take_place()?;
        self.inner.list_processes(caller, cursor).await
    }

    async fn upload(
        &self,
        caller: &Caller,
        upload: Upload,
        request_id: &str,
    ) -> Result<ToolOutcome, ServiceError> {
        let _place = self.take_place()?;
        self.inner.upload(caller, upload, request_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentprocess_service::CallerKind;
    use tokio::sync::Notify;

    /// A run service whose reads of the work queue wait until released.
    #[derive(Debug, Default)]
    struct Held {
        release: Notify,
    }

    #[async_trait]
    impl RunService for Held {
        async fn execute(&self, _: &Caller, _: Write, _: &str) -> Result<ToolOutcome, ServiceError> {
            unreachable!("not called")
        }
        async fn fire_timer(&self, _: &OrgId, _: &RunId, _: &str) -> Result<(), ServiceError> {
            unreachable!("not called")
        }
        async fn get_run(&self, _: &Caller, _: &RunId) -> Result<ToolOutcome, ServiceError> {
            unreachable!("not called")
        }
        async fn run_history(&self, _: &Caller, _: &RunId) -> Result<ToolOutcome, ServiceError> {
            unreachable!("not called")
        }
        async fn inspect_run(&self, _: &Caller, _: &RunId) -> Result<ToolOutcome, ServiceError> {
            unreachable!("not called")
        }
        async fn get_work(&self, _: &Caller, _: GetWork) -> Result<ToolOutcome, ServiceError> {
            self.release.notified().await;
            Ok(ToolOutcome::Ok(
                serde_json::json!({ "items": [], "nextCursor": null }),
            ))
        }
        async fn list_runs(&self, _: &Caller, _: ListRuns) -> Result<ToolOutcome, ServiceError> {
            Ok(ToolOutcome::Ok(
                serde_json::json!({ "items": [], "nextCursor": null }),
            ))
        }
        async fn ready_steps(&self, _: &Caller, _: ReadySteps) -> Result<ToolOutcome, ServiceError> {
            unreachable!("not called")
        }
        async fn list_processes(&self, _: &Caller, _: Option<String>) -> Result<ToolOutcome, ServiceError> {
            unreachable!("not called")
        }
        async fn upload(&self, _: &Caller, _: Upload, _: &str) -> Result<ToolOutcome, ServiceError> {
            unreachable!("not called")
        }
    }

    fn agent() -> Caller {
        Caller {
            organization: OrgId::from("acme"),
            kind: CallerKind::Agent { id: "a_1".into() },
            operator: false,
        }
    }

    #[tokio::test]
    async fn past_its_limit_a_host_answers_at_once_with_when_to_come_back() {
        let held = Arc::new(Held::default());
        let store: Arc<dyn agentprocess_store::Store> = Arc::new(
            agentprocess_store::EmbeddedStore::in_memory(agentprocess_store::EmbeddedOptions::default()),
        );
        let host = crate::membership::HostRecord {
            id: "h_1".into(),
            url: "http://127.0.0.1:1".into(),
        };
        let membership = ActorMembership::join(
            store,
            agentprocess_store::keys::Keys::new("guard"),
            host,
            crate::membership::MembershipOptions::default(),
        )
        .await
        .unwrap();
        let guard = Arc::new(ShardGuard::new(held.clone(), membership, 256).with_max_in_flight(1));
        let first = {
            let guard = guard.clone();
            tokio::spawn(async move { guard.get_work(&agent(), GetWork::default()).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let refused = guard.list_runs(&agent(), ListRuns::default()).await;
        assert_eq!(
            refused,
            Err(ServiceError::Overloaded {
                limit: MAX_IN_FLIGHT_SETTING.to_owned(),
                retry_after_ms: RETRY_AFTER_MS,
            })
        );
        // A call that waits for work is not counted: it is not refused, and takes no place.
        let waiting = {
            let guard = guard.clone();
            let request = GetWork {
                wait: Some(std::time::Duration::from_secs(5)),
                ..GetWork::default()
            };
            tokio::spawn(async move { guard.get_work(&agent(), request).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        held.release.notify_waiters();
        assert!(first.await.unwrap().is_ok());
        assert!(waiting.await.unwrap().is_ok());
        // The place is free again.
        assert!(guard.list_runs(&agent(), ListRuns::default()).await.is_ok());
    }
}
