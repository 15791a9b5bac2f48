//! The A2A client calls of relayed sub-tasks: the remote agent's card, a JSON-RPC streaming
//! call read as its `StreamResponse`s, a plain JSON-RPC call; each failure classed for what
//! the participants are told, its details (URLs, statuses, bodies) kept for the log.

use std::time::Duration;

use a2a::StreamResponse;
use futures::StreamExt;
use serde_json::{Value, json};
use task_core::TASK_EXTENSION_URI;

/// How long a card read or a plain call may take (a stream may last as long as the remote
/// task works).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// What went wrong with a relay, as far as the task's participants are told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    Unavailable,
    Refused,
    TimedOut,
    Unreadable,
}

impl Class {
    /// A failure the remote may get over (no answer, an overloaded or restarting server):
    /// tried again until the remote counts as lost. A refusal or an unreadable answer is not.
    pub(super) fn is_transient(self) -> bool {
        matches!(self, Class::Unavailable | Class::TimedOut)
    }

    pub(super) fn public(self) -> &'static str {
        match self {
            Class::Unavailable => "is unavailable",
            Class::Refused => "refused the request",
            Class::TimedOut => "timed out",
            Class::Unreadable => "answered something that could not be read",
        }
    }

    /// The class of a call that got no (whole) answer.
    fn of_transport(error: &reqwest::Error) -> Self {
        if error.is_timeout() {
            Class::TimedOut
        } else if error.is_decode() {
            Class::Unreadable
        } else {
            Class::Unavailable
        }
    }

    /// The class of an answer that is not a success.
    fn of_status(status: reqwest::StatusCode) -> Self {
        match status.as_u16() {
            408 | 504 => Class::TimedOut,
            500.. => Class::Unavailable,
            _ => Class::Refused,
        }
    }
}

/// A relay failure: its class, and the details for the log (URLs, statuses, bodies).
#[derive(Debug, thiserror::Error)]
#[error("{detail}")]
pub(super) struct RelayError {
    pub(super) class: Class,
    detail: String,
}

pub(super) fn err(class: Class, detail: impl Into<String>) -> RelayError {
    RelayError {
        class,
        detail: detail.into(),
    }
}

fn transport(what: String, error: &reqwest::Error) -> RelayError {
    err(Class::of_transport(error), format!("{what}: {error}"))
}

/// What the relay reads on a remote agent's card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RemoteCard {
    /// Its JSON-RPC interface.
    pub(super) url: String,
    /// It declares tiny-harness's Task extension (so a goal may carry a task envelope).
    pub(super) task_extension: bool,
}

/// The remote agent's card at `base/.well-known/agent-card.json`.
pub(super) async fn read_card(
    http: &reqwest::Client,
    base: &str,
) -> Result<RemoteCard, RelayError> {
    let url = format!("{}/.well-known/agent-card.json", base.trim_end_matches('/'));
    let response = traced(http.get(&url))
        .timeout(CALL_TIMEOUT)
        .send()
        .await
        .map_err(|e| transport(format!("cannot read the agent card at {url}"), &e))?;
    let status = response.status();
    if !status.is_success() {
        return Err(err(
            Class::of_status(status),
            format!("the agent card at {url} answered {status}"),
        ));
    }
    let card: Value = response
        .json()
        .await
        .map_err(|e| transport(format!("the agent card at {url} is not JSON"), &e))?;
    let jsonrpc = card["supportedInterfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["protocolBinding"] == "JSONRPC")
        .and_then(|i| i["url"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| {
            err(
                Class::Unreadable,
                format!("the agent card at {url} offers no JSON-RPC interface"),
            )
        })?;
    let task_extension = card["capabilities"]["extensions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|e| e["uri"] == TASK_EXTENSION_URI);
    Ok(RemoteCard {
        url: jsonrpc,
        task_extension,
    })
}

/// One JSON-RPC streaming call: each `result` StreamResponse in order.
pub(super) async fn stream_call(
    http: &reqwest::Client,
    card: &RemoteCard,
    agent_id: &str,
    method: &str,
    params: Value,
    mut on_event: impl FnMut(StreamResponse) -> std::ops::ControlFlow<()>,
) -> Result<(), RelayError> {
    let url = card.url.as_str();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut request = traced(http.post(url));
    if card.task_extension {
        request = request.header("A2A-Extensions", TASK_EXTENSION_URI);
    }
    let response = request
        .header("A2A-Version", "1.0")
        .header("Accept", "text/event-stream")
        .header("X-Participant-Id", agent_id)
        .json(&body)
        .send()
        .await
        .map_err(|e| transport(format!("{method} to {url}"), &e))?;
    let status = response.status();
    let is_sse = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"));
    if !status.is_success() || !is_sse {
        let text = response.text().await.unwrap_or_default();
        // A JSON-RPC error in a plain JSON answer is the remote's refusal.
        let rpc_error =
            serde_json::from_str::<Value>(&text).is_ok_and(|v| v.get("error").is_some());
        let class = if status.is_success() && !rpc_error {
            Class::Unreadable
        } else if status.is_success() {
            Class::Refused
        } else {
            Class::of_status(status)
        };
        let text: String = text.chars().take(500).collect();
        return Err(err(
            class,
            format!("{method} to {url} answered {status}: {text}"),
        ));
    }
    let mut body = response.bytes_stream();
    let mut pending = String::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| transport(format!("{method} stream from {url}"), &e))?;
        pending.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = pending.find("\n\n") {
            let frame: String = pending.drain(..end + 2).collect();
            for line in frame.lines() {
                let Some(data) = line.strip_prefix("data:") else {
                    continue;
                };
                let value: Value = serde_json::from_str(data.trim()).map_err(|e| {
                    err(
                        Class::Unreadable,
                        format!("{method} from {url} sent bad JSON: {e}"),
                    )
                })?;
                if let Some(error) = value.get("error") {
                    return Err(err(
                        Class::Refused,
                        format!("{method} to {url} failed: {error}"),
                    ));
                }
                let event: StreamResponse = serde_json::from_value(value["result"].clone())
                    .map_err(|e| err(Class::Unreadable, format!("{method} from {url}: {e}")))?;
                if on_event(event).is_break() {
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

/// One plain JSON-RPC call as `agent_id`: its `result`.
pub(super) async fn call(
    http: &reqwest::Client,
    url: &str,
    agent_id: &str,
    method: &str,
    params: Value,
) -> Result<Value, RelayError> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let response = traced(http.post(url))
        .timeout(CALL_TIMEOUT)
        .header("A2A-Version", "1.0")
        .header("X-Participant-Id", agent_id)
        .json(&body)
        .send()
        .await
        .map_err(|e| transport(format!("{method} to {url}"), &e))?;
    let status = response.status();
    if !status.is_success() {
        return Err(err(
            Class::of_status(status),
            format!("{method} to {url} answered {status}"),
        ));
    }
    let mut answer: Value = response
        .json()
        .await
        .map_err(|e| transport(format!("{method} from {url} is not JSON"), &e))?;
    if let Some(error) = answer.get("error") {
        return Err(err(
            Class::Refused,
            format!("{method} to {url} failed: {error}"),
        ));
    }
    Ok(answer["result"].take())
}

/// `request` with the W3C trace context of the turn that makes it (`traceparent`, and
/// `tracestate` when the trace has one), so the remote agent's work joins the same trace.
pub(super) fn traced(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    let Some(context) = telemetry::traces::outgoing() else {
        return request;
    };
    let request = request.header(telemetry::traces::TRACEPARENT, context.traceparent());
    match &context.state {
        Some(state) => request.header(telemetry::traces::TRACESTATE, state.as_str()),
        None => request,
    }
}
