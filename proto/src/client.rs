//! [`RunService`] over gRPC: what a gateway or the scheduler holds when the actors run elsewhere.

use crate::convert::{self, WireError};
use crate::tls::RoleTls;
use crate::wire;
use crate::wire::run_service_client::RunServiceClient;
use agentprocess_service::{
    Caller, GetWork, ListRuns, OrgId, ReadySteps, RunId, RunService, ServiceError, ToolOutcome, Upload,
    Write, trace,
};
use async_trait::async_trait;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

/// A run service reached over gRPC. A host that does not own the run's shard answers
/// [`ServiceError::NotOwner`]. Every other failure to get an answer — the host unreachable, the
/// call timed out, the host's own infrastructure failed, or a message this build cannot read —
/// is [`ServiceError::Unavailable`]: the caller sees `retry`, and a write retried with the same
/// `requestId` is safe. The protocol's refusals arrive as answers, never as errors.
#[derive(Debug, Clone)]
pub struct GrpcRunService {
    client: RunServiceClient<Channel>,
}

/// How a [`GrpcRunService`] connects.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// How long one call may take, answer included.
    pub request_timeout: Duration,
    /// The largest message sent or received (an upload travels in one message).
    pub max_message_bytes: usize,
    /// Mutual TLS to actor hosts (`https://` URLs); `None`: plain HTTP/2 (`http://` URLs).
    pub tls: Option<RoleTls>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            max_message_bytes: crate::DEFAULT_MAX_MESSAGE_BYTES,
            tls: None,
        }
    }
}

/// A URL that cannot name a run service.
#[derive(Debug, thiserror::Error)]
#[error("{url:?} is not a run service URL: {reason}")]
pub struct BadUrl {
    pub url: String,
    pub reason: String,
}

impl GrpcRunService {
    /// A client of the run service at `url`: `https://host:port` with TLS between roles,
    /// `http://host:port` without. It connects on first use and again after the host went away,
    /// so it can be made before the host is up.
    pub fn new(url: &str, options: &ClientOptions) -> Result<Self, BadUrl> {
        let bad = |reason: String| BadUrl {
            url: url.to_string(),
            reason,
        };
        let mut endpoint = Endpoint::from_shared(url.to_string())
            .map_err(|e| bad(e.to_string()))?
            .connect_timeout(options.connect_timeout)
            .timeout(options.request_timeout);
        match (&options.tls, endpoint.uri().scheme_str()) {
            (Some(tls), Some("https")) => {
                endpoint = endpoint
                    .tls_config(tls.client_config())
                    .map_err(|e| bad(e.to_string()))?;
            }
            (None, Some("http")) => {}
            (Some(_), _) => {
                return Err(bad(
                    "TLS between roles is on, so actor hosts must be reached at https:// URLs".into(),
                ));
            }
            (None, _) => {
                return Err(bad(
                    "an https:// actor host needs the cluster's TLS settings between roles \
                     (cluster.grpc_ca_file, grpc_cert_file, grpc_key_file)"
                        .into(),
                ));
            }
        }
        let client = RunServiceClient::new(endpoint.connect_lazy())
            .max_decoding_message_size(options.max_message_bytes)
            .max_encoding_message_size(options.max_message_bytes);
        Ok(GrpcRunService { client })
    }
}

/// A failed call: `FAILED_PRECONDITION` is the host saying it does not own the run's shard
/// (see the server's mapping); any other status is the infrastructure failing.
fn unavailable(status: tonic::Status) -> ServiceError {
    if status.code() == tonic::Code::FailedPrecondition {
        return ServiceError::NotOwner(status.message().to_string());
    }
    // RESOURCE_EXHAUSTED is also gRPC's own answer to a message too large: only one that names
    // our limit is the host at its limit.
    if status.code() == tonic::Code::ResourceExhausted {
        let metadata = status.metadata();
        let text = |name: &str| metadata.get(name).and_then(|value| value.to_str().ok());
        if let (Some(limit), Some(after)) = (text(crate::OVERLOAD_LIMIT), text(crate::RETRY_AFTER_MS))
            && let Ok(retry_after_ms) = after.parse()
        {
            return ServiceError::Overloaded {
                limit: limit.to_owned(),
                retry_after_ms,
            };
        }
    }
    let mut message = format!(
        "the run service answered {:?}: {}",
        status.code(),
        status.message()
    );
    // A transport failure says only "transport error"; its causes say what failed (a refused
    // certificate, a reset connection).
    let mut cause = std::error::Error::source(&status);
    while let Some(error) = cause {
        let text = error.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = error.source();
    }
    ServiceError::Unavailable(message)
}

/// `message` as a request carrying the trace context of the call being served, if any, in
/// the `traceparent` metadata (W3C Trace Context over gRPC).
fn traced<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(trace) = trace::current()
        && let Ok(value) = trace.to_string().parse()
    {
        request.metadata_mut().insert(crate::TRACEPARENT, value);
    }
    request
}

fn unreadable(error: WireError) -> ServiceError {
    ServiceError::Unavailable(error.to_string())
}

fn answer(
    result: Result<tonic::Response<wire::ToolAnswer>, tonic::Status>,
) -> Result<ToolOutcome, ServiceError> {
    let answer = result.map_err(unavailable)?.into_inner();
    convert::answer_of(answer).map_err(unreadable)
}

#[async_trait]
impl RunService for GrpcRunService {
    async fn execute(
        &self,
        caller: &Caller,
        write: Write,
        request_id: &str,
    ) -> Result<ToolOutcome, ServiceError> {
        let request = wire::ExecuteRequest {
            caller: Some(convert::caller_to_wire(caller)),
            request_id: request_id.to_string(),
            write: Some(convert::write_to_wire(write)),
        };
        answer(self.client.clone().execute(traced(request)).await)
    }

    async fn fire_timer(
        &self,
        organization: &OrgId,
        run_id: &RunId,
        timer_id: &str,
    ) -> Result<(), ServiceError> {
        let request = wire::FireTimerRequest {
            organization: organization.as_str().to_string(),
            run_id: run_id.as_str().to_string(),
            timer_id: timer_id.to_string(),
        };
        self.client
            .clone()
            .fire_timer(traced(request))
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn get_run(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, ServiceError> {
        let request = wire::GetRunRequest {
            caller: Some(convert::caller_to_wire(caller)),
            run_id: run_id.as_str().to_string(),
        };
        answer(self.client.clone().get_run(traced(request)).await)
    }

    async fn run_history(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, ServiceError> {
        let request = wire::RunHistoryRequest {
            caller: Some(convert::caller_to_wire(caller)),
            run_id: run_id.as_str().to_string(),
        };
        answer(self.client.clone().run_history(traced(request)).await)
    }

    async fn inspect_run(&self, caller: &Caller, run_id: &RunId) -> Result<ToolOutcome, ServiceError> {
        let request = wire::InspectRunRequest {
            caller: Some(convert::caller_to_wire(caller)),
            run_id: run_id.as_str().to_string(),
        };
        answer(self.client.clone().inspect_run(traced(request)).await)
    }

    async fn get_work(&self, caller: &Caller, request: GetWork) -> Result<ToolOutcome, ServiceError> {
        answer(
            self.client
                .clone()
                .get_work(traced(convert::get_work_to_wire(caller, request)))
                .await,
        )
    }

    async fn ready_steps(&self, caller: &Caller, request: ReadySteps) -> Result<ToolOutcome, ServiceError> {
        answer(
            self.client
                .clone()
                .ready_steps(traced(convert::ready_steps_to_wire(caller, request)))
                .await,
        )
    }

    async fn list_runs(&self, caller: &Caller, request: ListRuns) -> Result<ToolOutcome, ServiceError> {
        answer(
            self.client
                .clone()
                .list_runs(traced(convert::list_runs_to_wire(caller, request)))
                .await,
        )
    }

    async fn list_processes(
        &self,
        caller: &Caller,
        cursor: Option<String>,
    ) -> Result<ToolOutcome, ServiceError> {
        let request = wire::ListProcessesRequest {
            caller: Some(convert::caller_to_wire(caller)),
            cursor,
        };
        answer(self.client.clone().list_processes(traced(request)).await)
    }

    async fn upload(
        &self,
        caller: &Caller,
        upload: Upload,
        request_id: &str,
    ) -> Result<ToolOutcome, ServiceError> {
        let request = wire::UploadRequest {
            caller: Some(convert::caller_to_wire(caller)),
            request_id: request_id.to_string(),
            file_name: upload.file_name,
            content_type: upload.content_type,
            content: upload.bytes,
        };
        answer(self.client.clone().upload(traced(request)).await)
    }
}
