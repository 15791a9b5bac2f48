//! The JSON-RPC 2.0 binding (A2A §9): one POST endpoint, the method in the body.
//!
//! Why the order of checks: the request `Content-Type` is checked before the body is parsed (a
//! `text/plain` body must get -32005, not -32700; TCK gotcha 4); the envelope is read next so
//! that every later error echoes the request's `id`; then the common preflight (version,
//! extensions, capabilities), the parameters, the service. Every answer is HTTP 200 — an error
//! is a JSON-RPC error object — except a wrong HTTP method on the endpoint (405).

use a2a::JsonRpcId;
use a2a_service::A2aApi;
use bytes::Bytes;
use http::{Method as HttpMethod, Request, Response};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::body::Body;
use crate::error::{ErrorKind, ProtocolError};
use crate::ops::{self, Method, Outcome};
use crate::sse::{self, Framing};
use crate::{Caller, HttpConfig, headers, params, reply};

/// A valid request envelope.
struct Envelope {
    id: JsonRpcId,
    method: String,
    params: Map<String, Value>,
}

/// The envelope's members, read straight into their places when the body is an object with
/// `params` an object (or absent, or null) and no member twice: nearly every request. Any
/// other body is read as a `Value` first ([`parse`]), so that it gets the same answer as
/// before this shortcut (a batch, a scalar, a repeated member: the last one counts).
#[derive(Deserialize)]
struct Members {
    jsonrpc: Option<Value>,
    id: Option<Value>,
    method: Option<Value>,
    params: Option<Map<String, Value>>,
}

/// Reads the body into the envelope's members, or answers why it cannot.
fn parse(body: &[u8]) -> Result<Envelope, (JsonRpcId, ProtocolError)> {
    // Only an object: serde would also read the members from an array of four, which is a
    // batch here.
    let object = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if object && let Ok(members) = serde_json::from_slice::<Members>(body) {
        return envelope(members);
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        let err = ProtocolError::new(ErrorKind::ParseError, format!("invalid JSON payload: {e}"));
        (JsonRpcId::Null, err)
    })?;
    let invalid = |message: &str| {
        (
            JsonRpcId::Null,
            ProtocolError::new(ErrorKind::InvalidRequest, message),
        )
    };
    let mut obj = match value {
        Value::Object(obj) => obj,
        Value::Array(_) => return Err(invalid("batch requests are not supported")),
        _ => return Err(invalid("a JSON-RPC request must be a JSON object")),
    };
    let id = obj.remove("id");
    let jsonrpc = obj.remove("jsonrpc");
    let method = obj.remove("method");
    let params = match obj.remove("params") {
        None | Some(Value::Null) => None,
        Some(Value::Object(params)) => Some(params),
        Some(_) => {
            // The envelope's own checks come first; the refusal echoes its id.
            let Envelope { id, .. } = envelope(Members {
                jsonrpc,
                id,
                method,
                params: None,
            })?;
            return Err((
                id,
                ProtocolError::invalid_field("params", "must be an object (by-name parameters)"),
            ));
        }
    };
    envelope(Members {
        jsonrpc,
        id,
        method,
        params,
    })
}

/// Checks the JSON-RPC 2.0 envelope. Errors carry the id when it could be read.
fn envelope(members: Members) -> Result<Envelope, (JsonRpcId, ProtocolError)> {
    let invalid =
        |id: JsonRpcId, message: &str| (id, ProtocolError::new(ErrorKind::InvalidRequest, message));
    // An absent id (a notification) is answered anyway, with id null, as HTTP needs a response.
    let id = match members.id {
        None | Some(Value::Null) => JsonRpcId::Null,
        Some(Value::String(s)) => JsonRpcId::String(s),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(n) => JsonRpcId::Number(n),
            None => {
                return Err(invalid(
                    JsonRpcId::Null,
                    "id must be a string, an integer or null",
                ));
            }
        },
        Some(_) => {
            return Err(invalid(
                JsonRpcId::Null,
                "id must be a string, an integer or null",
            ));
        }
    };
    if members.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(id, "jsonrpc must be \"2.0\""));
    }
    let method = match members.method {
        Some(Value::String(method)) => method,
        _ => return Err(invalid(id, "method must be a string")),
    };
    Ok(Envelope {
        id,
        method,
        params: members.params.unwrap_or_default(),
    })
}

pub(crate) async fn handle(
    api: &dyn A2aApi,
    config: &HttpConfig,
    req: Request<Bytes>,
    caller: &Caller,
) -> Response<Body> {
    if req.method() != HttpMethod::POST {
        return reply::method_not_allowed(
            &ProtocolError::new(ErrorKind::MethodNotAllowed, "JSON-RPC requests are POSTed"),
            "POST",
        );
    }
    if !headers::is_json_content_type(req.headers()) {
        let content_type = headers::content_type(req.headers());
        return reply::rpc_error(
            JsonRpcId::Null,
            &ProtocolError::request_content_type(content_type.as_deref()),
        );
    }
    let Envelope { id, method, params } = match parse(req.body()) {
        Ok(envelope) => envelope,
        Err((id, err)) => return reply::rpc_error(id, &err),
    };
    let Some(method) = Method::from_jsonrpc(&method) else {
        let err = ProtocolError::new(
            ErrorKind::MethodNotFound,
            format!("method not found: {method}"),
        )
        .with_metadata("method", method);
        return reply::rpc_error(id, &err);
    };
    let error_reply = |err: &ProtocolError| reply::rpc_error(id.clone(), err);
    ops::preflight_and_call(
        api,
        method,
        "jsonrpc",
        &req,
        caller,
        error_reply,
        async |ctx| call(api, config, ctx, method, &params, id.clone()).await,
    )
    .await
}

async fn call(
    api: &dyn A2aApi,
    config: &HttpConfig,
    ctx: &a2a_service::RequestContext,
    method: Method,
    params: &Map<String, Value>,
    id: JsonRpcId,
) -> Result<Response<Body>, ProtocolError> {
    let op = params::decode(method, params)?;
    match ops::dispatch(api, ctx, op).await? {
        Outcome::Unary(result) => Ok(reply::rpc_result(&id, &result)),
        Outcome::Stream(events) => Ok(reply::sse(
            sse::open(events, Framing::JsonRpc(id), config.keep_alive).await?,
        )),
    }
}
