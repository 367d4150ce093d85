//! The direct path: a stateless `tools/call` answered here, without rmcp's per-call machinery,
//! its envelope rendered once; every other request goes to rmcp as it came.
//!
//! rmcp answers a stateless call by spawning a serve loop with a one-shot transport, a
//! cancellation token and a request context, parses the body again, and renders the result's
//! envelope twice (as text content, then as `structuredContent`). For the common case (ONE
//! JSON-RPC request, `tools/call` of a known tool, headers rmcp would accept as they are) this
//! module parses the body once, calls the same [`ProtocolServer::answer`], and writes the answer
//! rmcp would write, byte for byte ([`respond::tool_call_response`]).
//!
//! The rule that keeps every transport rule and every error rmcp's: this path takes a request
//! only when it is CLEARLY one rmcp would answer with a tool result. Anything else, doubtful or
//! not (a batch, a notification, another method, an unknown tool, a `_meta` other than a
//! progress token, the 2026-07-28 revision with its per-request metadata and standard headers, a
//! quoted or weighted `Accept`, a `Host` not plainly allowed), goes to rmcp unchanged.

use super::backend::ToolBackend;
use super::server::ProtocolServer;
use super::tools::ToolName;
use crate::auth::Identity;
use crate::respond;
use axum::body::{Body, Bytes};
use axum::http::header::{ACCEPT, CONTENT_TYPE, HOST};
use axum::http::request::Parts;
use axum::http::uri::Authority;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use rmcp::model::RequestId;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::borrow::Cow;
use tracing::Instrument;

/// The media type of a JSON body.
const JSON_MEDIA_TYPE: &str = "application/json";
/// The media type of a server-sent event stream.
const EVENT_STREAM_MEDIA_TYPE: &str = "text/event-stream";
/// The header a Streamable HTTP client names its protocol revision in.
const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
/// The revisions this path answers: those rmcp serves with its stateless handler without
/// per-request metadata or standard headers (from 2026-07-28 on, rmcp checks both).
const DIRECT_PROTOCOL_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The one `_meta` key this path takes: a progress token, which a tool call never reports on.
const PROGRESS_TOKEN: &str = "progressToken";

/// Answers the stateless `tools/call`s it can answer exactly as rmcp would.
#[derive(Debug)]
pub(crate) struct DirectCalls<B> {
    server: ProtocolServer<B>,
    hosts: AllowedHosts,
}

impl<B: ToolBackend> DirectCalls<B> {
    /// `allowed_hosts` is the list rmcp's transport is configured with: empty allows any host.
    pub(crate) fn new(server: ProtocolServer<B>, allowed_hosts: &[String]) -> Self {
        DirectCalls {
            server,
            hosts: AllowedHosts::new(allowed_hosts),
        }
    }

    /// The answer to a POST with these parts and this body, when it is a call this path takes;
    /// `None` hands the request to rmcp.
    pub(crate) async fn answer(&self, parts: &Parts, body: &[u8]) -> Option<Response> {
        if !self.headers_are_plainly_accepted(&parts.headers) {
            return None;
        }
        let identity = parts.extensions.get::<Identity>()?;
        let call = ToolsCall::parse(body)?;
        let server = self.server.clone();
        let identity = identity.clone();
        let ToolsCall { id, tool, arguments } = call;
        // Like rmcp, which runs each handler in a task of its own: a call, once started, runs to
        // its end (and is counted) even if the client goes away.
        let trace = super::server::trace_of_call(&parts.headers, None);
        let call = tokio::spawn(
            async move { server.answer(&identity, tool, arguments, trace).await }.in_current_span(),
        );
        let response = match call.await {
            Ok(result) => json_response(StatusCode::OK, respond::tool_call_response(&id, result)),
            Err(failure) => {
                tracing::error!(%failure, tool = tool.as_str(), "a tool call ended without an answer");
                Response::builder()
                    .status(StatusCode::INTERNAL_SERVER_ERROR)
                    .body(Body::from(
                        "Internal Server Error: the tool call ended without an answer",
                    ))
                    .expect("a static response is valid")
            }
        };
        Some(response)
    }

    /// Whether rmcp's stateless JSON mode would take these headers as they are: the `Host`
    /// check, an `Accept` of both JSON and event streams, a JSON `Content-Type`, and a protocol
    /// revision (or none, which rmcp reads as 2025-03-26) it serves without further checks. The
    /// transport is configured without an `Origin` allow-list, so rmcp checks no `Origin`.
    fn headers_are_plainly_accepted(&self, headers: &HeaderMap) -> bool {
        self.hosts.allow(headers)
            && accepts_json_and_event_stream(headers)
            && content_type_is_json(headers)
            && protocol_version_is_direct(headers)
    }
}

/// A `tools/call` request this path answers.
#[derive(Debug, PartialEq)]
struct ToolsCall {
    id: RequestId,
    tool: ToolName,
    arguments: Option<Map<String, Value>>,
}

/// The body of a `tools/call`, as this path reads it: no member it does not know.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsCallBody<'a> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    id: Value,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: ToolsCallParams<'a>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsCallParams<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    arguments: Option<Map<String, Value>>,
    #[serde(rename = "_meta")]
    meta: Option<Map<String, Value>>,
}

impl ToolsCall {
    /// Parses `body` once: ONE JSON-RPC 2.0 request of `tools/call` of one of the fourteen tools,
    /// with an integer or string id, and no `_meta` but a progress token. `None` for anything else.
    fn parse(body: &[u8]) -> Option<ToolsCall> {
        let body: ToolsCallBody = serde_json::from_slice(body).ok()?;
        if body.jsonrpc != "2.0" || body.method != "tools/call" {
            return None;
        }
        if !body.params.meta.as_ref().is_none_or(is_only_a_progress_token) {
            return None;
        }
        Some(ToolsCall {
            id: request_id(&body.id)?,
            tool: body.params.name.parse().ok()?,
            arguments: body.params.arguments,
        })
    }
}

/// A JSON-RPC id as rmcp reads and writes it: a string, or an integer written as one.
fn request_id(id: &Value) -> Option<RequestId> {
    match id {
        Value::String(id) => Some(RequestId::String(id.as_str().into())),
        Value::Number(number) => number.as_i64().map(RequestId::Number),
        _ => None,
    }
}

fn is_only_a_progress_token(meta: &Map<String, Value>) -> bool {
    meta.iter()
        .all(|(key, value)| key == PROGRESS_TOKEN && request_id(value).is_some())
}

/// The `Host` values rmcp's DNS rebinding check lets through: each entry a host with an
/// optional port, compared without brackets and case.
#[derive(Debug)]
enum AllowedHosts {
    Any,
    Only(Vec<HostAndPort>),
}

#[derive(Debug, PartialEq)]
struct HostAndPort {
    host: String,
    port: Option<u16>,
}

impl HostAndPort {
    fn new(host: &str, port: Option<u16>) -> Self {
        HostAndPort {
            host: host.trim_matches('[').trim_matches(']').to_ascii_lowercase(),
            port,
        }
    }
}

impl AllowedHosts {
    fn new(allowed: &[String]) -> Self {
        if allowed.is_empty() {
            return AllowedHosts::Any;
        }
        let entries = allowed
            .iter()
            .map(|entry| entry.trim())
            .filter(|entry| !entry.is_empty())
            .map(|entry| match Authority::try_from(entry) {
                Ok(authority) => HostAndPort::new(authority.host(), authority.port_u16()),
                Err(_) => HostAndPort::new(entry, None),
            })
            .collect();
        AllowedHosts::Only(entries)
    }

    /// Whether the request's one `Host` header names an allowed host (and port, where the entry
    /// has one). A request without one is left to rmcp.
    fn allow(&self, headers: &HeaderMap) -> bool {
        let AllowedHosts::Only(entries) = self else {
            return true;
        };
        let Some(host) = only_value(headers, HOST.as_str()) else {
            return false;
        };
        let Ok(authority) = Authority::try_from(host) else {
            return false;
        };
        let host = HostAndPort::new(authority.host(), authority.port_u16());
        entries.iter().any(|allowed| {
            allowed.host == host.host && allowed.port.is_none_or(|port| host.port == Some(port))
        })
    }
}

/// The value of a header sent once, as text.
fn only_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}

/// Whether `Accept` plainly names both JSON and event streams: media ranges without quoted
/// parameters or a weight (those are left to rmcp's parser).
fn accepts_json_and_event_stream(headers: &HeaderMap) -> bool {
    let mut json = false;
    let mut event_stream = false;
    for value in headers.get_all(ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        if value.contains('"') {
            return false;
        }
        for range in value.split(',') {
            let mut parts = range.split(';');
            let essence = parts.next().unwrap_or_default().trim();
            let weighted = parts.any(|parameter| {
                parameter
                    .split_once('=')
                    .is_some_and(|(name, _)| name.trim().eq_ignore_ascii_case("q"))
            });
            if weighted {
                return false;
            }
            json |= essence.eq_ignore_ascii_case(JSON_MEDIA_TYPE);
            event_stream |= essence.eq_ignore_ascii_case(EVENT_STREAM_MEDIA_TYPE);
        }
    }
    json && event_stream
}

/// Whether the one `Content-Type` is JSON, parameters aside.
fn content_type_is_json(headers: &HeaderMap) -> bool {
    only_value(headers, CONTENT_TYPE.as_str()).is_some_and(|value| {
        let essence = value.split_once(';').map_or(value, |(essence, _)| essence);
        essence.trim().eq_ignore_ascii_case(JSON_MEDIA_TYPE)
    })
}

/// Whether the request names no protocol revision, or once one this path answers.
fn protocol_version_is_direct(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(PROTOCOL_VERSION_HEADER).iter();
    match (values.next(), values.next()) {
        (None, _) => true,
        (Some(version), None) => version
            .to_str()
            .is_ok_and(|version| DIRECT_PROTOCOL_VERSIONS.contains(&version)),
        (Some(_), Some(_)) => false,
    }
}

/// A response with a JSON body, as rmcp writes one.
fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(JSON_MEDIA_TYPE));
    response
}

#[cfg(test)]
mod tests;
