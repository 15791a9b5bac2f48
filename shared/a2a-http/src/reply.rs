//! Building responses: JSON documents, JSON-RPC envelopes, REST error bodies, SSE headers.
//!
//! Why a module: the content types and status rules are easy to get subtly wrong (JSON-RPC is
//! always 200; REST success is `application/a2a+json` but REST errors `application/json`, TCK
//! gotcha 5), so every response is made here.

use a2a::{JsonRpcId, JsonRpcResponse};
use bytes::Bytes;
use futures::stream::BoxStream;
use http::header::{ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, Response, StatusCode};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::body::Body;
use crate::error::ProtocolError;

pub(crate) const APPLICATION_JSON: &str = "application/json";
pub(crate) const APPLICATION_A2A_JSON: &str = "application/a2a+json";
pub(crate) const TEXT_EVENT_STREAM: &str = "text/event-stream";

/// The last-resort body if serializing a JSON document fails (it cannot for `Value`s).
const INTERNAL_BODY: &str =
    r#"{"error":{"code":500,"status":"INTERNAL","message":"internal error"}}"#;

pub(crate) fn json<T: Serialize + ?Sized>(
    status: StatusCode,
    content_type: &'static str,
    value: &T,
) -> Response<Body> {
    json_sized(status, content_type, value, 128)
}

/// [`json`] into a buffer of `capacity` bytes to begin with: a document around a result
/// serialized already is written without the buffer growing on the way.
fn json_sized<T: Serialize + ?Sized>(
    status: StatusCode,
    content_type: &'static str,
    value: &T,
    capacity: usize,
) -> Response<Body> {
    let mut buffer = Vec::with_capacity(capacity);
    let (status, bytes) = match serde_json::to_writer(&mut buffer, value) {
        Ok(()) => (status, Bytes::from(buffer)),
        Err(e) => {
            tracing::error!(error = %e, "serializing a response failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                Bytes::from_static(INTERNAL_BODY.as_bytes()),
            )
        }
    };
    let mut resp = Response::new(Body::Full(bytes));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// A REST error: the HTTP status of the table, `{"error": google.rpc.Status}`, `application/json`.
pub(crate) fn rest_error(err: &ProtocolError) -> Response<Body> {
    with_retry_after(
        json(err.http_status(), APPLICATION_JSON, &err.to_rest_body()),
        err,
    )
}

/// `Retry-After` on a rate-limited answer.
fn with_retry_after(mut resp: Response<Body>, err: &ProtocolError) -> Response<Body> {
    if let Some(secs) = err.retry_after_secs {
        resp.headers_mut()
            .insert(http::header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

/// A 405 with the `Allow` header.
pub(crate) fn method_not_allowed(err: &ProtocolError, allow: &'static str) -> Response<Body> {
    let mut resp = rest_error(err);
    resp.headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    resp
}

/// A REST success: 200, the document, in the media type [`rest_success_type`] chose.
pub(crate) fn rest_ok(result: &RawValue, content_type: &'static str) -> Response<Body> {
    json_sized(StatusCode::OK, content_type, result, result.get().len())
}

/// The media type of a REST success: `application/a2a+json` (A2A 1.0.1) unless the client
/// spoke plain `application/json` and did not ask for `application/a2a+json` in `Accept`;
/// clients written to 1.0.0 (and its conformance suite) expect `application/json` then.
pub(crate) fn rest_success_type(headers: &http::HeaderMap) -> &'static str {
    let accepts_a2a = headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains(APPLICATION_A2A_JSON));
    let sent_plain_json = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(APPLICATION_JSON));
    if sent_plain_json && !accepts_a2a {
        APPLICATION_JSON
    } else {
        APPLICATION_A2A_JSON
    }
}

/// A JSON-RPC 2.0 success envelope around a result serialized once, embedded as is (what
/// `JsonRpcResponse::success` writes, without first turning the result into a `Value`).
#[derive(Serialize)]
pub(crate) struct RpcSuccess<'a> {
    jsonrpc: &'static str,
    id: &'a JsonRpcId,
    result: &'a RawValue,
}

impl<'a> RpcSuccess<'a> {
    pub(crate) fn new(id: &'a JsonRpcId, result: &'a RawValue) -> Self {
        Self {
            jsonrpc: "2.0",
            id,
            result,
        }
    }
}

/// A JSON-RPC success (HTTP 200).
pub(crate) fn rpc_result(id: &JsonRpcId, result: &RawValue) -> Response<Body> {
    // The envelope adds `{"jsonrpc":"2.0","id":…,"result":…}`: 40 bytes and the id.
    let id_len = match id {
        JsonRpcId::String(id) => id.len() + 2,
        _ => 20,
    };
    json_sized(
        StatusCode::OK,
        APPLICATION_JSON,
        &RpcSuccess::new(id, result),
        result.get().len() + id_len + 40,
    )
}

/// A JSON-RPC error: HTTP 200, as JSON-RPC over HTTP always is, except for a rate limit,
/// which is 429 with `Retry-After` so that clients and proxies back off.
pub(crate) fn rpc_error(id: JsonRpcId, err: &ProtocolError) -> Response<Body> {
    let status = if err.kind == crate::ErrorKind::RateLimited {
        StatusCode::TOO_MANY_REQUESTS
    } else {
        StatusCode::OK
    };
    with_retry_after(
        json(
            status,
            APPLICATION_JSON,
            &JsonRpcResponse::error(id, err.to_jsonrpc_error()),
        ),
        err,
    )
}

/// An SSE response: 200, `text/event-stream`, not cached, not buffered by proxies.
pub(crate) fn sse(frames: BoxStream<'static, Bytes>) -> Response<Body> {
    let mut resp = Response::new(Body::Stream(frames));
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(TEXT_EVENT_STREAM));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    resp
}

/// Echoes the activated extensions in `A2A-Extensions` (nothing when none were activated).
pub(crate) fn with_extensions(mut resp: Response<Body>, extensions: &[String]) -> Response<Body> {
    if !extensions.is_empty()
        && let Ok(value) = HeaderValue::from_str(&extensions.join(","))
    {
        resp.headers_mut()
            .insert(HeaderName::from_static("a2a-extensions"), value);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, HeaderValue::from_static(v));
        }
        map
    }

    #[test]
    fn rest_successes_come_back_in_the_media_type_the_client_spoke() {
        assert_eq!(rest_success_type(&headers(&[])), APPLICATION_A2A_JSON);
        assert_eq!(
            rest_success_type(&headers(&[("content-type", "application/json")])),
            APPLICATION_JSON
        );
        assert_eq!(
            rest_success_type(&headers(&[(
                "content-type",
                "Application/JSON; charset=utf-8"
            )])),
            APPLICATION_JSON
        );
        assert_eq!(
            rest_success_type(&headers(&[("content-type", "application/a2a+json")])),
            APPLICATION_A2A_JSON
        );
        let asks = headers(&[
            ("content-type", "application/json"),
            ("accept", "application/a2a+json, application/json"),
        ]);
        assert_eq!(rest_success_type(&asks), APPLICATION_A2A_JSON);
        assert_eq!(
            rest_success_type(&headers(&[("accept", "*/*")])),
            APPLICATION_A2A_JSON
        );
    }
}
