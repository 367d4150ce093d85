//! The run service over gRPC between gateways, the scheduler and actor hosts: its wire messages
//! (`proto/agentprocess/run/v1/run.proto`), a client that is a `RunService`, and a server around one.
//!
//! ```text
//! convert.rs   the service layer's types to wire messages and back (the only place they meet)
//! client.rs    GrpcRunService: RunService over a tonic channel; every failure is `retry`
//! server.rs    run_service_server: any RunService behind a tonic server
//! tls.rs       RoleTls: mutual TLS between roles (actor hosts require callers' certificates)
//! ```

mod client;
mod convert;
mod server;
mod tls;

/// The generated messages and service stubs of `agentprocess.run.v1`.
#[allow(
    missing_docs,
    missing_debug_implementations,
    unused_qualifications,
    clippy::all
)]
pub mod wire {
    tonic::include_proto!("agentprocess.run.v1");
}

pub use client::{BadUrl, ClientOptions, GrpcRunService};
pub use convert::WireError;
pub use server::{RunServiceHost, run_service_server};
pub use tls::{BadTls, RoleTls};

/// The largest message either side accepts by default: an upload of the gateway's default
/// limit (10 MiB) travels in one message, with room to spare.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The gRPC metadata key that carries the caller's W3C trace context.
pub const TRACEPARENT: &str = "traceparent";
/// The gRPC metadata keys of a host at its limit: which limit, and when to call again.
pub const OVERLOAD_LIMIT: &str = "x-agentprocess-limit";
pub const RETRY_AFTER_MS: &str = "x-agentprocess-retry-after-ms";
