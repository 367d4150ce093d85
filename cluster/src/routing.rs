//! The run service as a gateway or the scheduler sees it in a cluster: each call goes over gRPC
//! to the actor host that owns its run's shard, found again and retried while shards move.

use crate::map::ShardMap;
use crate::shards::shard_of;
use agentprocess_proto::{ClientOptions, GrpcRunService};
use agentprocess_service::{
    Caller, GetWork, ListRuns, OrgId, ReadySteps, RunId, RunService, ServiceError, ToolOutcome, Upload,
    Write, run_routing_key,
};
use async_trait::async_trait;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The first wait before a call is tried again; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(20);
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// How a [`RoutedRunService`] routes.
#[derive(Debug, Clone)]
pub struct RoutingOptions {
    /// The cluster's number of virtual shards.
    pub shards: u32,
    /// How long a call keeps looking for its run's owner (a host that says it is not the owner,
    /// or cannot be reached) before its caller sees the failure (`retry`). A crashed host's
    /// shards move once its lease expires, so this should exceed the host lease TTL.
    pub patience: Duration,
    /// How each actor host is reached.
    pub client: ClientOptions,
}

/// Where a call goes.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// The owner of this shard.
    Shard(u32),
    /// Any live host: calls that belong to no run (reads from the indexes, uploads) and tokens
    /// that name no run (every host refuses them alike).
    AnyHost,
}

/// A [`RunService`] whose calls reach, over gRPC, the actor host that owns each run's shard.
///
/// A call answered [`ServiceError::NotOwner`] (the shard moved) or
/// [`ServiceError::Unavailable`] (the host is gone, or its store failed) is routed again after
/// the shard map is refreshed, with backoff, until [`RoutingOptions::patience`] runs out: every
/// write is idempotent on its `requestId` and every timer on its generation, so a retry never
/// applies anything twice. Only then does the caller see the last failure.
#[derive(Debug)]
pub struct RoutedRunService {
    map: Arc<ShardMap>,
    options: RoutingOptions,
    /// One client (one HTTP/2 connection) per actor host URL.
    clients: Mutex<HashMap<String, GrpcRunService>>,
}

impl RoutedRunService {
    pub fn new(map: Arc<ShardMap>, options: RoutingOptions) -> RoutedRunService {
        RoutedRunService {
            map,
            options,
            clients: Mutex::new(HashMap::new()),
        }
    }

    fn shard_of_run(&self, run_id: &RunId) -> Target {
        Target::Shard(shard_of(run_routing_key(run_id.as_str()), self.options.shards))
    }

    fn client(&self, url: &str) -> Result<GrpcRunService, ServiceError> {
        let mut clients = self.clients.lock().unwrap();
        if let Some(client) = clients.get(url) {
            return Ok(client.clone());
        }
        let client = GrpcRunService::new(url, &self.options.client)
            .map_err(|e| ServiceError::Unavailable(format!("an actor host registered a bad URL: {e}")))?;
        clients.insert(url.to_owned(), client.clone());
        Ok(client)
    }

    /// Runs `call` against the host `target` names now, again after each failure that routing
    /// can cure, until it answers or patience runs out.
    async fn call<T, F, Fut>(&self, target: Target, call: F) -> Result<T, ServiceError>
    where
        F: Fn(GrpcRunService) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let deadline = Instant::now() + self.options.patience;
        let mut backoff = FIRST_BACKOFF;
        loop {
            let host = match target {
                Target::Shard(shard) => self.map.route(shard),
                Target::AnyHost => self.map.any_host(),
            };
            let outcome = match host {
                Some(host) => match self.client(&host.url) {
                    Ok(client) => call(client).await,
                    Err(error) => Err(error),
                },
                None => Err(ServiceError::Unavailable(
                    "no actor host is registered in the cluster".into(),
                )),
            };
            let error = match outcome {
                Ok(answer) => return Ok(answer),
                // A host at its limit said when to come back: the caller hears it now, instead of
                // the call waiting here in a queue of its own.
                Err(error @ ServiceError::Overloaded { .. }) => return Err(error),
                Err(error) => error,
            };
            if Instant::now() + backoff > deadline {
                tracing::warn!(%error, ?target, "no owner answered within the routing patience");
                return Err(error);
            }
            tracing::debug!(%error, ?target, "routing again");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
            if let Err(error) = self.map.refresh().await {
                tracing::debug!(%error, "the shard map could not be refreshed; routing with the one we have");
            }
        }
    }
}

#[async_trait]
impl RunService for RoutedRunService {
    async fn execute(
        &self,
        caller: &Caller,
        write: Write,
        request_id: &str,
    ) -> Result<ToolOutcome, ServiceError> {
        let target = match write.routing_key(&caller.organization, request_id) {
            Some(key) => Target::Shard(shard_of(&key, self.options.shards)),
            None => Target::AnyHost,
        };
        self.call(target, |host| {
            let write = write.clone();
            async move { host.execute(caller, write, request_id).await }
        })
        .await
    }

    async fn fire_timer(
        &self,
        organization: &OrgId,
        run_id: &RunId,
        timer_id: &str,
    ) -> Result<(), ServiceError> {
        self.call(self.shard_of_run(run_id), |host| async move {
            host.fire_timer(organization, run_id, timer_id).await
        })
        .await
    }

    async fn get_run(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, ServiceError> {
        self.call(self.shard_of_run(run_id), |host| async move {
            host.get_run(caller, run_id).await
        })
        .await
    }

    async fn run_history(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, ServiceError> {
        self.call(self.shard_of_run(run_id), |host| async move {
            host.run_history(caller, run_id).await
        })
        .await
    }

    async fn inspect_run(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, ServiceError> {
        self.call(self.shard_of_run(run_id), |host| async move {
            host.inspect_run(caller, run_id).await
        })
        .await
    }

    async fn get_work(&self, caller: &Caller, request: GetWork) -> Result<ToolOutcome, ServiceError> {
        self.call(Target::AnyHost, |host| {
            let request = request.clone();
            async move { host.get_work(caller, request).await }
        })
        .await
    }

    async fn list_runs(&self, caller: &Caller, request: ListRuns) -> Result<ToolOutcome, ServiceError> {
        self.call(Target::AnyHost, |host| {
            let request = request.clone();
            async move { host.list_runs(caller, request).await }
        })
        .await
    }

    async fn ready_steps(&self, caller: &Caller, request: ReadySteps) -> Result<ToolOutcome, ServiceError> {
        self.call(Target::AnyHost, |host| {
            let request = request.clone();
            async move { host.ready_steps(caller, request).await }
        })
        .await
    }

    async fn list_processes(
        &self,
        caller: &Caller,
        cursor: Option<String>,
    ) -> Result<ToolOutcome, ServiceError> {
        self.call(Target::AnyHost, |host| {
            let cursor = cursor.clone();
            async move { host.list_processes(caller, cursor).await }
        })
        .await
    }

    async fn upload(
        &self,
        caller: &Caller,
        upload: Upload,
        request_id: &str,
    ) -> Result<ToolOutcome, ServiceError> {
        self.call(Target::AnyHost, |host| {
            let upload = upload.clone();
            async move { host.upload(caller, upload, request_id).await }
        })
        .await
    }
}
