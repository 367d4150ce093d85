//! Serving a [`RunService`] over gRPC: what an actor host puts behind its listener.

use crate::convert::{self, WireError};
use crate::wire;
use crate::wire::run_service_server::{RunService as WireRunService, RunServiceServer};
use agentprocess_service::trace::TraceParent;
use agentprocess_service::{OrgId, RunId, RunService, ServiceError, ToolOutcome, Upload};
use std::future::Future;
use std::sync::Arc;
use tonic::{Request, Response, Status};
use tracing::Instrument;

/// The gRPC face of a run service.
#[derive(Debug, Clone)]
pub struct RunServiceHost {
    service: Arc<dyn RunService>,
}

/// `service` as a tonic service, accepting messages of up to `max_message_bytes`; add it to a
/// `tonic::transport::Server`.
pub fn run_service_server(
    service: Arc<dyn RunService>,
    max_message_bytes: usize,
) -> RunServiceServer<RunServiceHost> {
    RunServiceServer::new(RunServiceHost { service })
        .max_decoding_message_size(max_message_bytes)
        .max_encoding_message_size(max_message_bytes)
}

fn malformed(error: WireError) -> Status {
    Status::invalid_argument(error.to_string())
}

/// The infrastructure failed behind the service (`UNAVAILABLE`: the caller's client turns it
/// into `retry`), this host does not own the run's shard (`FAILED_PRECONDITION`, which the
/// client turns back into [`ServiceError::NotOwner`]; no other answer uses that code), or it is
/// at a limit (`RESOURCE_EXHAUSTED` with the limit and the hint in metadata, which the client
/// turns back into [`ServiceError::Overloaded`]).
fn failed(error: ServiceError) -> Status {
    match error {
        ServiceError::Unavailable(message) => Status::unavailable(message),
        ServiceError::NotOwner(message) => Status::failed_precondition(message),
        ServiceError::Overloaded {
            limit,
            retry_after_ms,
        } => {
            let mut status = Status::resource_exhausted(format!("at the limit {limit}"));
            let metadata = status.metadata_mut();
            if let (Ok(limit), Ok(after)) = (limit.parse(), retry_after_ms.to_string().parse()) {
                metadata.insert(crate::OVERLOAD_LIMIT, limit);
                metadata.insert(crate::RETRY_AFTER_MS, after);
            }
            status
        }
    }
}

/// The caller's W3C trace context, from the request's `traceparent` metadata.
fn trace_of<T>(request: &Request<T>) -> Option<TraceParent> {
    request
        .metadata()
        .get(crate::TRACEPARENT)?
        .to_str()
        .ok()
        .and_then(TraceParent::parse)
}

/// Runs `call` in a `run_service` span naming the method and the trace, a child of the
/// caller's span (the gRPC hop of the trace), with its context as the current one, so this
/// host's log lines and spans of the call carry the trace id the gateway's do.
async fn in_trace<F: Future>(method: &'static str, trace: Option<TraceParent>, call: F) -> F::Output {
    let span = tracing::info_span!(
        "run_service",
        method,
        traceId = tracing::field::Empty,
        spanId = tracing::field::Empty,
    );
    match trace {
        Some(trace) => {
            let random = agentprocess_service::trace::random_ids();
            let trace = agentprocess_service::trace::join(&span, Some(trace), random);
            agentprocess_service::trace::scope(trace, call.instrument(span)).await
        }
        None => call.instrument(span).await,
    }
}

fn answered(result: Result<ToolOutcome, ServiceError>) -> Result<Response<wire::ToolAnswer>, Status> {
    result
        .map(|outcome| Response::new(convert::answer_to_wire(outcome)))
        .map_err(failed)
}

#[tonic::async_trait]
impl WireRunService for RunServiceHost {
    async fn execute(
        &self,
        request: Request<wire::ExecuteRequest>,
    ) -> Result<Response<wire::ToolAnswer>, Status> {
        let trace = trace_of(&request);
        let request = request.into_inner();
        let caller = convert::caller_of(request.caller).map_err(malformed)?;
        let write = convert::write_of(request.write).map_err(malformed)?;
        answered(
            in_trace(
                "execute",
                trace,
                self.service.execute(&caller, write, &request.request_id),
            )
            .await,
        )
    }

    async fn fire_timer(
        &self,
        request: Request<wire::FireTimerRequest>,
    ) -> Result<Response<wire::FireTimerResponse>, Status> {
        let trace = trace_of(&request);
        let request = request.into_inner();
        let organization = OrgId::from(request.organization);
        let run_id = RunId::from(request.run_id);
        let fired = self.service.fire_timer(&organization, &run_id, &request.timer_id);
        in_trace("fire_timer", trace, fired).await.map_err(failed)?;
        Ok(Response::new(wire::FireTimerResponse {}))
    }

    async fn get_run(
        &self,
        request: Request<wire::GetRunRequest>,
    ) -> Result<Response<wire::ToolAnswer>, Status> {
        let trace = trace_of(&request);
        let request = request.into_inner();
        let caller = convert::caller_of(request.caller).map_err(malformed)?;
        answered(
            in_trace(
                "get_run",
                trace,
                self.service.get_run(&caller, &RunId::from(request.run_id)),
            )
            .await,
        )
    }

    async fn run_history(
        &self,
        request: Request<wire::RunHistoryRequest>,
    ) -> Result<Response<wire::ToolAnswer>, Status> {
        let trace = trace_of(&request);
        let request = request.into_inner();
        let caller = convert::caller_of(request.caller).map_err(malformed)?;
        let run_id = RunId::from(request.run_id);
        answered(in_trace("run_history", trace, self.service.run_history(&caller, &run_id)).await)
    }

    async fn inspect_run(
        &self,
        request: Request<wire::InspectRunRequest>,
    ) -> Result<Response<wire::ToolAnswer>, Status> {
        let trace = trace_of(&request);
        let request = request.into_inner();
        let caller = convert::caller_of(request.caller).map_err(malformed)?;
        let run_id = RunId::from(request.run_id);
        answered(in_trace("inspect_run", trace, self.service.inspect_run(&caller, &run_id)).await)
    }

    async fn get_work(
        &self,
        request: Request<wire::GetWorkRequest>,
    ) -> Result<Response<wire::ToolAnswer>, Status> {
        let trace = trace_of(&request);
        let (caller, request) = convert::get_work_of(request.into_inner()).map_err(malformed)?;
        answered(in_trace("get_work", trace, self.service.get_work(&caller, request)).await)
    }

    async fn ready_steps(
        &self,
        request: Request<wire::ReadyStepsRequest>,
    ) -> Result<Response<wire::ToolAnswer>, Status> {
        let trace = trace_of(&request);
        let (caller, request) = convert::ready_steps_of(request.into_inner()).map_err(malformed)?;
        answered(in_trace("ready_steps", trace, self.service.ready_steps(&caller, request)).await)
    }

    async fn list_runs(
        &self,
        request: Request<wire::ListRunsRequest>,
    ) -> Result<Response<wire::ToolAnswer>, Status> {
        let trace = trace_of(&request);
        let (caller, request) = convert::list_runs_of(request.into_inner()).map_err(malformed)?;
        answered(in_trace("list_runs", trace, self.service.list_runs(&caller, request)).await)
    }

    async fn list_processes(
        &self,
        request: Request<wire::ListProcessesRequest>,
    ) -> Result<Response<wire::ToolAnswer>, Status> {
        let trace = trace_of(&request);
        let request = request.into_inner();
        let caller = convert::caller_of(request.caller).map_err(malformed)?;
        answered(
            in_trace(
                "list_processes",
                trace,
                self.service.list_processes(&caller, request.cursor),
            )
            .await,
        )
    }

    async fn upload(
        &self,
        request: Request<wire::UploadRequest>,
    ) -> Result<Response<wire::ToolAnswer>, Status> {
        let trace = trace_of(&request);
        let request = request.into_inner();
        let caller = convert::caller_of(request.caller).map_err(malformed)?;
        let upload = Upload {
            file_name: request.file_name,
            content_type: request.content_type,
            bytes: request.content,
        };
        answered(
            in_trace(
                "upload",
                trace,
                self.service.upload(&caller, upload, &request.request_id),
            )
            .await,
        )
    }
}
