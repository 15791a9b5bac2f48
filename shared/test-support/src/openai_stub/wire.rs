//! The stub's side of OpenAI's wire format: token counts, completions, SSE chunks, errors.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Response, StatusCode, header};
use serde_json::{Value, json};

use super::StubReply;

/// The tokens the stub counts for a chat-completions request body (see the module's doc).
pub fn prompt_tokens(body: &Value) -> u64 {
    let mut chars = 0;
    for message in body["messages"].as_array().into_iter().flatten() {
        chars += content_chars(&message["content"]);
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            chars += text_chars(&call["function"]["name"]);
            chars += text_chars(&call["function"]["arguments"]);
        }
    }
    if let Some(tools) = body.get("tools") {
        chars += tools.to_string().chars().count();
    }
    tokens(chars)
}

/// The tokens the stub counts for a reply.
pub fn completion_tokens(reply: &StubReply) -> u64 {
    match reply {
        StubReply::Text(text) => tokens(text.chars().count()),
        StubReply::ToolCalls(calls) => tokens(
            calls
                .iter()
                .map(|(name, arguments)| {
                    name.chars().count() + arguments.to_string().chars().count()
                })
                .sum(),
        ),
    }
}

fn tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4)
}

fn text_chars(value: &Value) -> usize {
    value.as_str().map_or(0, |s| s.chars().count())
}

/// A message's content: a string, or a list of parts whose texts count.
fn content_chars(content: &Value) -> usize {
    match content {
        Value::Array(parts) => parts.iter().map(|p| text_chars(&p["text"])).sum(),
        other => text_chars(other),
    }
}

/// The text of the last `user` message (a string, or its text parts joined).
pub(super) fn last_user_text(body: &Value) -> String {
    let last = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["role"] == "user");
    match last.map(|m| &m["content"]) {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Usage {
    pub(super) prompt: u64,
    pub(super) completion: u64,
    pub(super) cached: u64,
}

impl Usage {
    pub(super) fn json(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "total_tokens": self.prompt + self.completion,
            "prompt_tokens_details": {"cached_tokens": self.cached},
        })
    }
}

pub(super) fn call_id(n: u64, i: usize) -> String {
    format!("call_stub{n}_{}", i + 1)
}

pub(super) fn finish_reason(reply: &StubReply) -> &'static str {
    match reply {
        StubReply::Text(_) => "stop",
        StubReply::ToolCalls(_) => "tool_calls",
    }
}

/// `text` in at most `pieces` pieces of about equal length (none for empty text).
pub(super) fn split(text: &str, pieces: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(pieces.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// The SSE answer: a role chunk, the text or the calls in pieces, the finish chunk, the usage
/// chunk when asked for, `[DONE]`.
pub(super) fn stream(
    (pieces, delay): (usize, Duration),
    n: u64,
    model: &str,
    reply: &StubReply,
    usage: Option<Usage>,
    on_usage: impl Fn(Usage) + Clone + Send + Sync + 'static,
) -> Response<Body> {
    let chunk = |choices: Value| {
        let mut chunk = json!({
            "id": format!("chatcmpl-stub{n}"),
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": model,
            "choices": choices,
        });
        if usage.is_some() {
            // What OpenAI sends on every chunk but the last when usage is asked for.
            chunk["usage"] = Value::Null;
        }
        chunk
    };
    let delta = |delta: Value, finish: Value| {
        chunk(json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]))
    };
    let mut events = vec![delta(
        json!({"role": "assistant", "content": if matches!(reply, StubReply::Text(_)) { json!("") } else { Value::Null }}),
        Value::Null,
    )];
    match reply {
        StubReply::Text(text) => {
            for piece in split(text, pieces) {
                events.push(delta(json!({"content": piece}), Value::Null));
            }
        }
        StubReply::ToolCalls(calls) => {
            for (i, (name, arguments)) in calls.iter().enumerate() {
                events.push(delta(
                    json!({"tool_calls": [{"index": i, "id": call_id(n, i), "type": "function",
                                           "function": {"name": name, "arguments": ""}}]}),
                    Value::Null,
                ));
                for piece in split(&arguments.to_string(), pieces) {
                    events.push(delta(
                        json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                        Value::Null,
                    ));
                }
            }
        }
    }
    events.push(delta(json!({}), json!(finish_reason(reply))));
    let mut lines: Vec<(String, Option<Usage>)> = events
        .into_iter()
        .map(|event| (format!("data: {event}\n\n"), None))
        .collect();
    if let Some(usage) = usage {
        let mut last = chunk(json!([]));
        last["usage"] = usage.json();
        lines.push((format!("data: {last}\n\n"), Some(usage)));
    }
    lines.push(("data: [DONE]\n\n".to_owned(), None));

    let events = futures::stream::unfold((lines.into_iter(), true), move |(mut lines, first)| {
        let on_usage = on_usage.clone();
        async move {
            let (line, usage) = lines.next()?;
            if !first && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if let Some(usage) = usage {
                on_usage(usage);
            }
            Some((Ok::<_, Infallible>(line), (lines, false)))
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(events))
        .unwrap()
}

pub(super) fn json_response(status: StatusCode, body: Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

pub(super) fn error(status: StatusCode, error: Value) -> Response<Body> {
    json_response(status, json!({ "error": error }))
}

/// OpenAI's error body for a failure status.
pub(super) fn failure(status: u16) -> Response<Body> {
    let status = StatusCode::from_u16(status).expect("a valid status");
    let body = match status.as_u16() {
        429 => json!({
            "message": "Rate limit reached for stub-model on requests per min (RPM): Limit 3, \
                        Used 3, Requested 1. Please try again in 20s.",
            "type": "requests", "param": null, "code": "rate_limit_exceeded",
        }),
        503 => json!({
            "message": "The server is overloaded or not ready yet.",
            "type": "server_error", "param": null, "code": null,
        }),
        500..=599 => json!({
            "message": "The server had an error while processing your request. Sorry about that!",
            "type": "server_error", "param": null, "code": null,
        }),
        other => json!({
            "message": format!("The stub was told to answer {other}."),
            "type": "invalid_request_error", "param": null, "code": null,
        }),
    };
    error(status, body)
}

/// A refusal of a request the stub cannot read.
pub(super) fn invalid(status: StatusCode, message: &str) -> Response<Body> {
    error(
        status,
        json!({"message": message, "type": "invalid_request_error", "param": null, "code": null}),
    )
}

/// OpenAI's refusal of a prompt longer than the model's context.
pub(super) fn context_length_exceeded(limit: u64, prompt: u64) -> Response<Body> {
    error(
        StatusCode::BAD_REQUEST,
        json!({
            "message": format!(
                "This model's maximum context length is {limit} tokens. However, your \
                 messages resulted in {prompt} tokens. Please reduce the length of the messages."
            ),
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }),
    )
}

/// The `chat.completion` object of a plain (not streamed) answer.
pub(super) fn completion(n: u64, model: &str, reply: &StubReply, usage: Usage) -> Response<Body> {
    let message = match reply {
        StubReply::Text(text) => json!({"role": "assistant", "content": text, "refusal": null}),
        StubReply::ToolCalls(calls) => json!({
            "role": "assistant",
            "content": null,
            "tool_calls": calls.iter().enumerate().map(|(i, (name, arguments))| json!({
                "id": call_id(n, i),
                "type": "function",
                "function": {"name": name, "arguments": arguments.to_string()},
            })).collect::<Vec<_>>(),
        }),
    };
    json_response(
        StatusCode::OK,
        json!({
            "id": format!("chatcmpl-stub{n}"),
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": null,
                         "finish_reason": finish_reason(reply)}],
            "usage": usage.json(),
        }),
    )
}
