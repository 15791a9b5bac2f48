//! Server-sent events for the streaming methods (SendStreamingMessage, SubscribeToTask).
//!
//! Why like this:
//! - Each event is one `data:` line (JSON has no raw newlines) and a blank line. JSON-RPC wraps
//!   each `StreamResponse` in a JSON-RPC response carrying the request id (A2A §9.4.2); REST
//!   sends the bare `StreamResponse` (§11.7).
//! - An error before the first event is not a stream at all: the caller answers it as a plain
//!   error (JSON-RPC: an `application/json` error at HTTP 200, which the TCK's client expects;
//!   REST: the error status). So the first event is awaited (for at most one keep-alive
//!   interval) before the response head is committed.
//! - An error later ends the stream with one error event (JSON-RPC: an error response with the
//!   request id; REST: `{"error": google.rpc.Status}`).
//! - While the service's stream is idle a comment line `: keep-alive` goes out every interval,
//!   so API Gateway, Lambda URLs and proxies do not close a quiet connection.

use std::time::Duration;

use a2a::{JsonRpcId, JsonRpcResponse, StreamResponse};
use a2a_service::{EventStream, ServiceError};
use bytes::{BufMut, Bytes, BytesMut};
use futures::StreamExt;
use futures::stream::{self, BoxStream};
use serde::Serialize;
use tokio::time::error::Elapsed;

use crate::error::ProtocolError;
use crate::reply::RpcSuccess;

/// The keep-alive comment frame.
pub(crate) const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// How events are wrapped.
#[derive(Debug, Clone)]
pub(crate) enum Framing {
    /// JSON-RPC: every frame is a JSON-RPC response with this id.
    JsonRpc(JsonRpcId),
    /// HTTP+JSON: every frame is the bare `StreamResponse`.
    Rest,
}

impl Framing {
    fn event(&self, event: &StreamResponse) -> Result<Bytes, ProtocolError> {
        match self {
            Framing::JsonRpc(id) => {
                let result = serde_json::value::to_raw_value(event).map_err(serialize_failed)?;
                data_frame(&RpcSuccess::new(id, &result))
            }
            Framing::Rest => data_frame(event),
        }
    }

    fn error(&self, err: &ProtocolError) -> Bytes {
        let frame = match self {
            Framing::JsonRpc(id) => {
                data_frame(&JsonRpcResponse::error(id.clone(), err.to_jsonrpc_error()))
            }
            Framing::Rest => data_frame(&err.to_rest_body()),
        };
        frame.unwrap_or_else(|_| {
            Bytes::from_static(b"data: {\"error\":{\"message\":\"internal error\"}}\n\n")
        })
    }
}

fn serialize_failed(e: serde_json::Error) -> ProtocolError {
    tracing::error!(error = %e, "serializing a stream event failed");
    ProtocolError::internal()
}

/// `data: <json>\n\n`.
fn data_frame<T: Serialize>(value: &T) -> Result<Bytes, ProtocolError> {
    let json = serde_json::to_vec(value).map_err(serialize_failed)?;
    let mut buf = BytesMut::with_capacity(json.len() + 8);
    buf.put_slice(b"data: ");
    buf.put_slice(&json);
    buf.put_slice(b"\n\n");
    Ok(buf.freeze())
}

/// The next event (`None`: the stream ended), or `Err(Elapsed)` after `keep_alive` without
/// one (`StreamExt::next` is cancel-safe, so a timed-out wait loses nothing).
async fn next(
    inner: &mut EventStream,
    keep_alive: Option<Duration>,
) -> Result<Option<Item>, Elapsed> {
    match keep_alive {
        None => Ok(inner.next().await),
        Some(interval) => tokio::time::timeout(interval, inner.next()).await,
    }
}

type Item = Result<StreamResponse, ServiceError>;

struct State {
    inner: EventStream,
    framing: Framing,
    keep_alive: Option<Duration>,
    pending: Option<Bytes>,
    done: bool,
}

/// Turns the service's event stream into SSE frames. Waits for the first event (up to one
/// keep-alive interval): if it is an error, that error is returned instead of a stream.
/// A zero `keep_alive` disables keep-alives.
pub(crate) async fn open(
    mut inner: EventStream,
    framing: Framing,
    keep_alive: Duration,
) -> Result<BoxStream<'static, Bytes>, ProtocolError> {
    let keep_alive = (!keep_alive.is_zero()).then_some(keep_alive);
    let first = match next(&mut inner, keep_alive).await {
        Err(_) => Bytes::from_static(KEEP_ALIVE),
        Ok(None) => return Ok(stream::empty().boxed()),
        Ok(Some(Err(err))) => return Err(err.into()),
        Ok(Some(Ok(event))) => framing.event(&event)?,
    };
    let state = State {
        inner,
        framing,
        keep_alive,
        pending: Some(first),
        done: false,
    };
    Ok(stream::unfold(state, |mut st| async move {
        if let Some(frame) = st.pending.take() {
            return Some((frame, st));
        }
        if st.done {
            return None;
        }
        let frame = match next(&mut st.inner, st.keep_alive).await {
            Err(_) => Bytes::from_static(KEEP_ALIVE),
            Ok(None) => return None,
            Ok(Some(Ok(event))) => match st.framing.event(&event) {
                Ok(frame) => frame,
                Err(err) => {
                    st.done = true;
                    st.framing.error(&err)
                }
            },
            Ok(Some(Err(err))) => {
                st.done = true;
                st.framing.error(&ProtocolError::from(err))
            }
        };
        Some((frame, st))
    })
    .boxed())
}
