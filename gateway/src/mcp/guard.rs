//! Checks on a POST to the MCP endpoint before the MCP transport sees it: the body size limit, and
//! that the body is a JSON-RPC message. Both refusals are JSON-RPC errors a client can read. A
//! plain `tools/call` is answered on the direct path instead, between the two.

use super::backend::ToolBackend;
use super::direct::DirectCalls;
use axum::Json;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::ClientJsonRpcMessage;
use serde_json::{Value, json};
use std::sync::Arc;

/// JSON-RPC 2.0 error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

/// What stands in front of the MCP transport.
#[derive(Debug)]
pub(crate) struct Guard<B> {
    /// The largest body taken.
    pub max_bytes: usize,
    /// The direct path, when the router answers plain `tools/call`s itself.
    pub direct: Option<DirectCalls<B>>,
}

/// Buffers the body up to `max_bytes`, answers it on the direct path when that path takes it,
/// and otherwise checks it is one JSON-RPC message before rmcp sees it.
pub(crate) async fn check_jsonrpc_body<B: ToolBackend>(
    State(guard): State<Arc<Guard<B>>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let max_bytes = guard.max_bytes;
    let (parts, body) = request.into_parts();
    let Ok(bytes) = to_bytes(body, max_bytes).await else {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            Value::Null,
            INVALID_REQUEST,
            format!("the request body is larger than this server's limit of {max_bytes} bytes"),
        );
    };
    if let Some(direct) = &guard.direct
        && let Some(response) = direct.answer(&parts, &bytes).await
    {
        return response;
    }
    let value: Value = match serde_json::from_slice(&bytes) {
        Ok(value) => value,
        Err(e) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                Value::Null,
                PARSE_ERROR,
                format!("the request body is not JSON: {e}"),
            );
        }
    };
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    if let Err(e) = serde_json::from_value::<ClientJsonRpcMessage>(value) {
        return refuse(
            StatusCode::BAD_REQUEST,
            id,
            INVALID_REQUEST,
            format!("the request body is not a JSON-RPC 2.0 message this server understands: {e}"),
        );
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

fn refuse(status: StatusCode, id: Value, code: i64, message: String) -> Response {
    let id = match id {
        Value::String(_) | Value::Number(_) => id,
        _ => Value::Null,
    };
    let body = json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } });
    (status, Json(body)).into_response()
}
