//! Where outcomes meet the wire: every refusal and failure becomes a tool result or an HTTP error here.
//!
//! In the manner of linkerd2-proxy's `errors/respond.rs`: handlers say WHAT happened (a
//! [`ToolRefusal`] from the run service, a [`ToolError`] of the gateway's own, an infrastructure
//! failure, an [`HttpFailure`]) and log what they know about it; this module alone decides how
//! it is written:
//!
//! - a tool call: `{ ok: true, data }` or `{ ok: false, error: { code, message, issues? } }`, as
//!   structured content and as text, flagged as an error when refused ([`tool_result`]);
//! - the HTTP APIs (admin API, file links): a status and `{ "error": { code, message, issues? } }`
//!   ([`HttpFailure`]);
//! - with the cluster, a gRPC status for the same outcomes.
//!
//! Codes are the protocol's [`ErrorCode`]s, plus the few that only the HTTP APIs write
//! ([`HttpErrorCode`]).

use crate::tool::{ErrorCode, ToolData, ToolError, ToolResult};
use agentprocess_service::ToolRefusal;
use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::model::{CallToolResult, RequestId};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// What `Retry-After` says when a file cannot be read right now, in seconds.
const FILE_RETRY_AFTER_SECONDS: &str = "5";

/// A protocol refusal from the runtime as the tool contract writes it: code, message and issues
/// kept.
pub fn refused(refusal: ToolRefusal) -> ToolError {
    ToolError::new(refusal.code, refusal.message).with_issues(refusal.issues)
}

/// What a tool call that failed in the infrastructure answers: `retry`, which is always safe to
/// follow with the same `requestId`. The caller logs the failure; the message does not repeat it.
pub fn tool_failed() -> ToolError {
    ToolError::server_failure(
        ErrorCode::Retry,
        "the server could not complete the call right now; retry with the same requestId",
    )
}

/// What a call answers when the actor host it reached is at `limit`: `retry` at once, the
/// issues naming the limit and when to call again (as the gateway's own admission limits do).
pub fn overloaded(limit: &str, retry_after_ms: u64) -> ToolError {
    ToolError::new(
        ErrorCode::Retry,
        format!(
            "the server is at its limit ({limit}): call again in {retry_after_ms} ms with the same requestId"
        ),
    )
    .with_issues(vec![
        format!("limit: {limit}"),
        format!("retry_after_ms: {retry_after_ms}"),
    ])
}

/// The envelope a tool result travels in: `{ "ok": true, "data": … }` or
/// `{ "ok": false, "error": { "code", "message", "issues"? } }`. The data moves in: a run view
/// or a page of work items is not copied on its way to the wire.
pub fn envelope(result: ToolResult) -> Value {
    match result {
        Ok(data) => {
            let mut envelope = Map::with_capacity(2);
            envelope.insert("ok".to_owned(), Value::Bool(true));
            envelope.insert("data".to_owned(), data.into_value());
            Value::Object(envelope)
        }
        Err(error) => json!({ "ok": false, "error": error }),
    }
}

/// The envelope as JSON text: rendered data is spliced in as it came, anything else written once.
fn envelope_json(result: ToolResult) -> String {
    match result {
        Ok(ToolData::Rendered(data)) => {
            let data = data.json();
            let mut envelope = String::with_capacity(data.len() + 20);
            envelope.push_str(r#"{"ok":true,"data":"#);
            envelope.push_str(data);
            envelope.push('}');
            envelope
        }
        other => envelope(other).to_string(),
    }
}

/// The MCP result of a tool call: its envelope as structured content, an error result when refused.
pub fn tool_result(result: ToolResult) -> CallToolResult {
    let refused = result.is_err();
    let body = envelope(result);
    if refused {
        CallToolResult::structured_error(body)
    } else {
        CallToolResult::structured(body)
    }
}

/// The JSON-RPC response to a `tools/call` answered without the MCP library, byte for byte what
/// the library writes for [`tool_result`]: with `resultType: "complete"` for a client of
/// 2026-07-28 (`with_result_type`), without it for one of an earlier revision. The envelope is
/// rendered ONCE, and those bytes are the text content (as a JSON string) and
/// `structuredContent` (as they are).
pub fn tool_call_response(id: &RequestId, result: ToolResult, with_result_type: bool) -> Vec<u8> {
    let refused = result.is_err();
    let envelope = envelope_json(result);
    // Sized once: a page of work items renders to tens of kilobytes, and growing the buffer would
    // copy it again.
    let mut body = Vec::with_capacity(escaped_len(&envelope) + envelope.len() + 128);
    body.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    write_json(&mut body, id);
    body.extend_from_slice(if with_result_type {
        br#","result":{"resultType":"complete","content":[{"type":"text","text":"#
    } else {
        br#","result":{"content":[{"type":"text","text":"#
    });
    write_json(&mut body, &envelope);
    body.extend_from_slice(br#"}],"structuredContent":"#);
    body.extend_from_slice(envelope.as_bytes());
    body.extend_from_slice(if refused {
        br#","isError":true}}"#
    } else {
        br#","isError":false}}"#
    });
    body
}

/// The length of `text` written as a JSON string, quotes included, as serde_json escapes it: a
/// quote, a backslash and the short-form controls take two bytes, other controls six.
fn escaped_len(text: &str) -> usize {
    let escapes: usize = text
        .bytes()
        .map(|byte| match byte {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
            0x00..=0x1f => 5,
            _ => 0,
        })
        .sum();
    text.len() + escapes + 2
}

/// Appends `value` as JSON, written by serde_json as the MCP library writes it.
fn write_json(body: &mut Vec<u8>, value: &(impl Serialize + ?Sized)) {
    serde_json::to_writer(body, value).expect("a request id or a string always renders as JSON");
}

/// The `code` of an HTTP API's error body: a protocol code, or one for what the protocol has no
/// word for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpErrorCode {
    Protocol(ErrorCode),
    /// Admin API: the store failed; nothing is known to have changed; try again.
    Unavailable,
    /// File links: the link's lifetime is over; read the run again for a fresh one.
    Expired,
    /// File links: not a link this server signed, or one changed since.
    InvalidLink,
}

impl HttpErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            HttpErrorCode::Protocol(code) => code.as_str(),
            HttpErrorCode::Unavailable => "unavailable",
            HttpErrorCode::Expired => "expired",
            HttpErrorCode::InvalidLink => "invalid_link",
        }
    }
}

/// Why an HTTP API request failed, by what the caller can do about it, with the message for it.
/// Each kind has exactly one status and one code, given here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpFailure {
    /// 400 `invalid`: the request is malformed.
    Malformed(String),
    /// 413 `invalid`: the body is larger than the limit.
    TooLarge(String),
    /// 401 `forbidden`: no identity reached a handler that needs one.
    Unauthenticated(String),
    /// 403 `forbidden`: this identity may not do this.
    Forbidden(String),
    /// 422 `invalid` with every issue: the request was understood and refused; nothing changed.
    Refused { message: String, issues: Vec<String> },
    /// 404 `not_found`.
    NotFound(String),
    /// 409 `conflict`: the current state does not allow it.
    Conflict(String),
    /// 503 `unavailable` (admin API): the store failed; try again.
    Unavailable(String),
    /// 410 `expired` (file links).
    LinkExpired(String),
    /// 403 `invalid_link` (file links).
    InvalidLink(String),
    /// 503 `retry` with `Retry-After` (file links): the file cannot be read right now.
    Retry(String),
    /// Admin API: a tool called for the operator refused; its code, message and issues as the
    /// protocol gives them, with the status of [`tool_refusal_status`].
    ToolRefused(ToolError),
}

/// The HTTP status of a tool's refusal in the admin API: `invalid` 400, `not_accepted` 422,
/// `stale` and `conflict` 409, `forbidden` 403, `not_found` 404, `retry` 503.
pub fn tool_refusal_status(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::Invalid => StatusCode::BAD_REQUEST,
        ErrorCode::NotAccepted => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorCode::Stale | ErrorCode::Conflict => StatusCode::CONFLICT,
        ErrorCode::Forbidden => StatusCode::FORBIDDEN,
        ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::Retry => StatusCode::SERVICE_UNAVAILABLE,
    }
}

impl HttpFailure {
    pub fn status(&self) -> StatusCode {
        match self {
            HttpFailure::Malformed(_) => StatusCode::BAD_REQUEST,
            HttpFailure::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            HttpFailure::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            HttpFailure::Forbidden(_) | HttpFailure::InvalidLink(_) => StatusCode::FORBIDDEN,
            HttpFailure::Refused { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            HttpFailure::NotFound(_) => StatusCode::NOT_FOUND,
            HttpFailure::Conflict(_) => StatusCode::CONFLICT,
            HttpFailure::Unavailable(_) | HttpFailure::Retry(_) => StatusCode::SERVICE_UNAVAILABLE,
            HttpFailure::LinkExpired(_) => StatusCode::GONE,
            HttpFailure::ToolRefused(error) => tool_refusal_status(error.code),
        }
    }

    pub fn code(&self) -> HttpErrorCode {
        match self {
            HttpFailure::Malformed(_) | HttpFailure::TooLarge(_) | HttpFailure::Refused { .. } => {
                HttpErrorCode::Protocol(ErrorCode::Invalid)
            }
            HttpFailure::Unauthenticated(_) | HttpFailure::Forbidden(_) => {
                HttpErrorCode::Protocol(ErrorCode::Forbidden)
            }
            HttpFailure::NotFound(_) => HttpErrorCode::Protocol(ErrorCode::NotFound),
            HttpFailure::Conflict(_) => HttpErrorCode::Protocol(ErrorCode::Conflict),
            HttpFailure::Retry(_) => HttpErrorCode::Protocol(ErrorCode::Retry),
            HttpFailure::Unavailable(_) => HttpErrorCode::Unavailable,
            HttpFailure::LinkExpired(_) => HttpErrorCode::Expired,
            HttpFailure::InvalidLink(_) => HttpErrorCode::InvalidLink,
            HttpFailure::ToolRefused(error) => HttpErrorCode::Protocol(error.code),
        }
    }

    /// The body: `{ "error": { code, message, issues? } }`, `issues` only for [`HttpFailure::Refused`]
    /// and a tool's refusal that has some.
    pub fn body(&self) -> Value {
        let (message, issues) = match self {
            HttpFailure::Refused { message, issues } => (message, Some(issues)),
            HttpFailure::ToolRefused(error) => {
                (&error.message, Some(&error.issues).filter(|i| !i.is_empty()))
            }
            HttpFailure::Malformed(message)
            | HttpFailure::TooLarge(message)
            | HttpFailure::Unauthenticated(message)
            | HttpFailure::Forbidden(message)
            | HttpFailure::NotFound(message)
            | HttpFailure::Conflict(message)
            | HttpFailure::Unavailable(message)
            | HttpFailure::LinkExpired(message)
            | HttpFailure::InvalidLink(message)
            | HttpFailure::Retry(message) => (message, None),
        };
        let mut error = json!({ "code": self.code().as_str(), "message": message });
        if let Some(issues) = issues {
            error["issues"] = json!(issues);
        }
        json!({ "error": error })
    }
}

impl IntoResponse for HttpFailure {
    fn into_response(self) -> Response {
        let mut response = (self.status(), Json(self.body())).into_response();
        if let HttpFailure::Retry(_) = self {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(FILE_RETRY_AFTER_SECONDS),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ServerJsonRpcMessage, ServerResult};

    #[test]
    fn envelopes_follow_the_contract() {
        assert_eq!(
            envelope(Ok(json!({ "consumedBy": null }).into())),
            json!({ "ok": true, "data": { "consumedBy": null } })
        );
        assert_eq!(
            envelope(Err(ToolError::new(ErrorCode::NotFound, "no such run"))),
            json!({ "ok": false, "error": { "code": "not_found", "message": "no such run" } })
        );
        assert_eq!(
            envelope(Err(ToolError::new(ErrorCode::Conflict, "the run has ended")
                .with_issues(vec!["run_ended".into()]))),
            json!({ "ok": false, "error": { "code": "conflict", "message": "the run has ended", "issues": ["run_ended"] } })
        );
    }

    /// What the MCP library writes for a `tools/call` answered with [`tool_result`]: to a client
    /// of a revision before 2026-07-28 its handler drops `resultType: "complete"`.
    fn written_by_the_library(id: RequestId, result: ToolResult, legacy_peer: bool) -> Vec<u8> {
        let mut result = ServerResult::CallToolResult(tool_result(result));
        if legacy_peer {
            result.strip_result_type_for_legacy_peer();
        }
        serde_json::to_vec(&ServerJsonRpcMessage::response(result, id)).unwrap()
    }

    #[test]
    fn a_spliced_tools_call_response_is_the_librarys_byte_for_byte() {
        use agentprocess_service::RenderedData;
        use serde_json::value::RawValue;
        let data = json!({
            "text": "quotes \" and \\ backslashes, a line\nbreak, a tab\t, \u{1} and é ✓ 😀",
            "numbers": [0, -1, 1.5, 12345678901234567890u64, 1e-7],
            "nested": { "z": null, "a": [true, false, {}], "empty": "" },
        });
        let refusal = ToolError::new(ErrorCode::Conflict, "the run has \"ended\"")
            .with_issues(vec!["run_ended".into(), "line\nbreak".into()]);
        let arbitrary_precision: Value = serde_json::from_str(r#"{"n": 1.000000000000000000001}"#).unwrap();
        for id in [
            RequestId::Number(7),
            RequestId::Number(-3),
            RequestId::Number(i64::MAX),
            RequestId::String("call \"1\"/é".into()),
            RequestId::String("".into()),
        ] {
            let rendered = |value: &Value| {
                Ok(ToolData::Rendered(RenderedData::new(
                    RawValue::from_string(value.to_string()).unwrap(),
                )))
            };
            for result in [
                Ok(data.clone().into()),
                Ok(json!({}).into()),
                Ok(Value::Null.into()),
                Ok(arbitrary_precision.clone().into()),
                // Data the run service rendered goes out spliced, as the library writes its value.
                rendered(&data),
                rendered(&json!({ "items": [], "nextCursor": null })),
                rendered(&arbitrary_precision),
                Err(refusal.clone()),
                Err(ToolError::new(ErrorCode::NotFound, "no such run")),
            ] {
                for with_result_type in [false, true] {
                    let spliced = tool_call_response(&id, result.clone(), with_result_type);
                    let library = written_by_the_library(id.clone(), result.clone(), !with_result_type);
                    assert_eq!(
                        String::from_utf8(spliced).unwrap(),
                        String::from_utf8(library).unwrap()
                    );
                }
            }
        }
    }

    #[test]
    fn the_escaped_length_is_what_serde_json_writes() {
        for text in [
            "",
            "plain",
            "quote \" backslash \\ line\nbreak\r\t\u{8}\u{c}",
            "\u{1}\u{1f} é ✓ 😀",
        ] {
            assert_eq!(
                escaped_len(text),
                serde_json::to_string(text).unwrap().len(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn a_run_service_refusal_keeps_its_code_message_and_issues() {
        let error = refused(ToolRefusal {
            code: ErrorCode::Conflict,
            message: "the run has ended".into(),
            issues: vec!["run_ended".into()],
        });
        assert_eq!(
            error,
            ToolError::new(ErrorCode::Conflict, "the run has ended").with_issues(vec!["run_ended".into()])
        );
        assert_eq!(tool_failed().code, ErrorCode::Retry);
        assert!(tool_failed().is_server_failure());
    }

    #[test]
    fn http_failures_carry_one_status_and_code_each() {
        let cases = [
            (HttpFailure::Malformed("m".into()), 400, "invalid"),
            (HttpFailure::TooLarge("m".into()), 413, "invalid"),
            (HttpFailure::Unauthenticated("m".into()), 401, "forbidden"),
            (HttpFailure::Forbidden("m".into()), 403, "forbidden"),
            (
                HttpFailure::Refused {
                    message: "m".into(),
                    issues: vec![],
                },
                422,
                "invalid",
            ),
            (HttpFailure::NotFound("m".into()), 404, "not_found"),
            (HttpFailure::Conflict("m".into()), 409, "conflict"),
            (HttpFailure::Unavailable("m".into()), 503, "unavailable"),
            (HttpFailure::LinkExpired("m".into()), 410, "expired"),
            (HttpFailure::InvalidLink("m".into()), 403, "invalid_link"),
            (HttpFailure::Retry("m".into()), 503, "retry"),
            (
                HttpFailure::ToolRefused(ToolError::new(ErrorCode::Invalid, "m")),
                400,
                "invalid",
            ),
            (
                HttpFailure::ToolRefused(ToolError::new(ErrorCode::NotAccepted, "m")),
                422,
                "not_accepted",
            ),
            (
                HttpFailure::ToolRefused(ToolError::new(ErrorCode::Stale, "m")),
                409,
                "stale",
            ),
            (
                HttpFailure::ToolRefused(ToolError::new(ErrorCode::Conflict, "m")),
                409,
                "conflict",
            ),
            (
                HttpFailure::ToolRefused(ToolError::new(ErrorCode::Forbidden, "m")),
                403,
                "forbidden",
            ),
            (
                HttpFailure::ToolRefused(ToolError::new(ErrorCode::NotFound, "m")),
                404,
                "not_found",
            ),
            (
                HttpFailure::ToolRefused(ToolError::new(ErrorCode::Retry, "m")),
                503,
                "retry",
            ),
        ];
        for (failure, status, code) in cases {
            assert_eq!(failure.status().as_u16(), status, "{failure:?}");
            assert_eq!(failure.body()["error"]["code"], code, "{failure:?}");
        }
        let refused = HttpFailure::Refused {
            message: "1 issue(s) found; nothing was changed".into(),
            issues: vec!["url: missing".into()],
        };
        assert_eq!(
            refused.body(),
            json!({ "error": { "code": "invalid", "message": "1 issue(s) found; nothing was changed", "issues": ["url: missing"] } })
        );
        assert_eq!(
            HttpFailure::ToolRefused(
                ToolError::new(ErrorCode::Conflict, "the run has ended")
                    .with_issues(vec!["run_ended".into()])
            )
            .body(),
            json!({ "error": { "code": "conflict", "message": "the run has ended", "issues": ["run_ended"] } })
        );
        assert_eq!(
            HttpFailure::NotFound("gone".into()).body(),
            json!({ "error": { "code": "not_found", "message": "gone" } })
        );
    }

    #[test]
    fn only_a_file_retry_says_when_to_retry() {
        let retry = HttpFailure::Retry("later".into()).into_response();
        assert_eq!(retry.headers()[header::RETRY_AFTER], "5");
        let unavailable = HttpFailure::Unavailable("later".into()).into_response();
        assert!(unavailable.headers().get(header::RETRY_AFTER).is_none());
    }
}
