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
//! progress token, a 2026-07-28 request whose per-request metadata or standard headers are not
//! plainly what that revision asks for, a quoted or weighted `Accept`, a `Host` not plainly
//! allowed), goes to rmcp unchanged.

use super::backend::ToolBackend;
use super::server::ProtocolServer;
use crate::auth::Identity;
use crate::respond;
use crate::tool::names::ToolName;
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
/// The revisions this path answers without per-request metadata or standard headers.
const DIRECT_PROTOCOL_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The revision whose requests carry their client's context in `_meta` and name their method
/// and tool in standard headers, and whose results say `resultType: "complete"`.
const SELF_CONTAINED_REVISION: &str = "2026-07-28";
/// The one `_meta` key this path takes before 2026-07-28: a progress token, which a tool call
/// never reports on.
const PROGRESS_TOKEN: &str = "progressToken";
/// The `_meta` keys of a 2026-07-28 request: the two it must carry, and the client's name.
const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// A caller's W3C trace context, which a 2026-07-28 request may carry in `_meta`.
const META_TRACEPARENT: &str = "traceparent";
/// The standard headers of a 2026-07-28 request (SEP-2243).
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";
const PARAM_HEADER_PREFIX: &str = "mcp-param-";

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
        let revision = self.plainly_accepted_revision(&parts.headers)?;
        let identity = parts.extensions.get::<Identity>()?;
        let call = ToolsCall::parse(body, revision)?;
        if revision == Revision::SelfContained && !standard_headers_name(&parts.headers, call.tool) {
            return None;
        }
        let server = self.server.clone();
        let identity = identity.clone();
        let ToolsCall {
            id,
            tool,
            arguments,
            traceparent,
        } = call;
        // Like rmcp, which runs each handler in a task of its own: a call, once started, runs to
        // its end (and is counted) even if the client goes away.
        let trace = super::server::trace_of_call(&parts.headers, traceparent.as_ref());
        let call = tokio::spawn(
            async move { server.answer(&identity, tool, arguments, trace).await }.in_current_span(),
        );
        let response = match call.await {
            Ok(result) => json_response(
                StatusCode::OK,
                respond::tool_call_response(&id, result, revision == Revision::SelfContained),
            ),
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

    /// The revision of a request whose headers rmcp's stateless JSON mode would take as they
    /// are: the `Host` check, an `Accept` of both JSON and event streams, a JSON `Content-Type`,
    /// and a protocol revision (or none, which rmcp reads as 2025-03-26) this path answers. The
    /// transport is configured without an `Origin` allow-list, so rmcp checks no `Origin`.
    fn plainly_accepted_revision(&self, headers: &HeaderMap) -> Option<Revision> {
        if !(self.hosts.allow(headers)
            && accepts_json_and_event_stream(headers)
            && content_type_is_json(headers))
        {
            return None;
        }
        protocol_revision(headers)
    }
}

/// How a request this path answers is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Revision {
    /// Before 2026-07-28: no per-request metadata but a progress token; no `resultType`.
    Session,
    /// 2026-07-28: the client's context in `_meta`, standard headers, `resultType` in the result.
    SelfContained,
}

/// A `tools/call` request this path answers.
#[derive(Debug, PartialEq)]
struct ToolsCall {
    id: RequestId,
    tool: ToolName,
    arguments: Option<Map<String, Value>>,
    /// The `_meta` that may carry a caller's `traceparent` (2026-07-28).
    traceparent: Option<Map<String, Value>>,
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
    /// with an integer or string id, and the `_meta` of its revision: none but a progress token
    /// before 2026-07-28; on 2026-07-28 the revision and the client's capabilities, and maybe its
    /// name and a trace context. `None` for anything else.
    fn parse(body: &[u8], revision: Revision) -> Option<ToolsCall> {
        let body: ToolsCallBody = serde_json::from_slice(body).ok()?;
        if body.jsonrpc != "2.0" || body.method != "tools/call" {
            return None;
        }
        let traceparent = match revision {
            Revision::Session if body.params.meta.as_ref().is_none_or(is_only_a_progress_token) => None,
            Revision::SelfContained if body.params.meta.as_ref().is_some_and(is_plain_client_context) => {
                body.params.meta
            }
            _ => return None,
        };
        Some(ToolsCall {
            id: request_id(&body.id)?,
            tool: body.params.name.parse().ok()?,
            arguments: body.params.arguments,
            traceparent,
        })
    }
}

/// Whether a 2026-07-28 `_meta` is plainly valid: this revision named, the client's capabilities
/// an object, and nothing else but the client's name and version and a trace context.
fn is_plain_client_context(meta: &Map<String, Value>) -> bool {
    let client_info_is_plain = |info: &Value| {
        info.as_object().is_some_and(|info| {
            info.len() == 2
                && info.get("name").is_some_and(Value::is_string)
                && info.get("version").is_some_and(Value::is_string)
        })
    };
    meta.get(META_PROTOCOL_VERSION).and_then(Value::as_str) == Some(SELF_CONTAINED_REVISION)
        && meta.get(META_CLIENT_CAPABILITIES).is_some_and(Value::is_object)
        && meta.iter().all(|(key, value)| match key.as_str() {
            META_PROTOCOL_VERSION | META_CLIENT_CAPABILITIES => true,
            META_CLIENT_INFO => client_info_is_plain(value),
            META_TRACEPARENT => value.is_string(),
            _ => false,
        })
}

/// Whether a 2026-07-28 request's standard headers plainly name a `tools/call` of `tool`: each
/// once, as plain text, and no parameter headers (our tools declare none).
fn standard_headers_name(headers: &HeaderMap, tool: ToolName) -> bool {
    only_value(headers, METHOD_HEADER) == Some("tools/call")
        && only_value(headers, NAME_HEADER) == Some(tool.as_str())
        && !headers
            .keys()
            .any(|name| name.as_str().starts_with(PARAM_HEADER_PREFIX))
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

/// The revision of a request naming none (rmcp reads 2025-03-26), or naming once one this path
/// answers; `None` for any other.
fn protocol_revision(headers: &HeaderMap) -> Option<Revision> {
    let mut values = headers.get_all(PROTOCOL_VERSION_HEADER).iter();
    match (values.next(), values.next()) {
        (None, _) => Some(Revision::Session),
        (Some(version), None) => match version.to_str().ok()? {
            SELF_CONTAINED_REVISION => Some(Revision::SelfContained),
            version if DIRECT_PROTOCOL_VERSIONS.contains(&version) => Some(Revision::Session),
            _ => None,
        },
        (Some(_), Some(_)) => None,
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
