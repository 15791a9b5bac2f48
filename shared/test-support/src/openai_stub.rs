//! An OpenAI-compatible chat-completions server on 127.0.0.1 for tests: streams, reports
//! usage, refuses requests over a context limit with OpenAI's real error, and can be made to
//! fail, slow down or hang while it runs.
//!
//! `POST /v1/chat/completions`, in OpenAI's wire format: a `chat.completion` object, or with
//! `stream: true` server-sent events (`data: {chat.completion.chunk}` lines, then
//! `data: [DONE]`); with `stream_options.include_usage` the last chunk before `[DONE]` has
//! empty `choices` and the `usage`.
//!
//! **What it answers**: the scripted replies ([`OpenAiStub::push_reply`]) in order, then
//! `echo: <the last user message's text>`.
//!
//! **Tokens** ([`prompt_tokens`], [`completion_tokens`]): `ceil(chars / 4)`, chars counted
//! (Unicode scalar values) over every message's content (text parts of a content list
//! included), every tool call's name and arguments text, and the JSON text of the `tools`
//! array; for the reply, its text or its calls' names and arguments text. The same count is
//! the reported `usage.prompt_tokens` / `completion_tokens` and what the context limit is
//! checked against. `prompt_tokens_details.cached_tokens` is [`StubConfig::cached_tokens`]
//! (at most the prompt's tokens).
//!
//! **In what order a request meets the faults**: it is recorded ([`OpenAiStub::requests`]),
//! waits while the stub hangs, waits the delay, answers a pending failure
//! ([`OpenAiStub::fail_next`]), is refused when over the context limit, and only then takes
//! a scripted reply (so failures and refusals do not use up the script).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The model name the stub's catalog entries send.
pub const STUB_MODEL: &str = "stub-model";
/// The key variable the stub's catalog entries name (unset: no `Authorization` header).
pub const STUB_API_KEY_ENV: &str = "TH_OPENAI_STUB_API_KEY";

/// How a stub behaves from its start.
#[derive(Debug, Clone)]
pub struct StubConfig {
    /// Prompts counting more tokens than this are refused (HTTP 400,
    /// `context_length_exceeded`); `None`: no limit.
    pub context_limit: Option<u64>,
    /// A streamed reply's text (and each call's arguments) comes in this many pieces (at
    /// least 1; fewer when the text has fewer characters).
    pub chunk_pieces: usize,
    /// The wait between two streamed chunks.
    pub piece_delay: Duration,
    /// Reported as `usage.prompt_tokens_details.cached_tokens` on every call (capped at the
    /// prompt's tokens).
    pub cached_tokens: u64,
    /// The wait before answering any request (changed later with [`OpenAiStub::set_delay`]).
    pub delay: Duration,
}

impl Default for StubConfig {
    /// No context limit, 4 pieces with no wait between them, no cached tokens, no delay.
    fn default() -> Self {
        Self {
            context_limit: None,
            chunk_pieces: 4,
            piece_delay: Duration::ZERO,
            cached_tokens: 0,
            delay: Duration::ZERO,
        }
    }
}

/// A scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub enum StubReply {
    /// An assistant message with this text.
    Text(String),
    /// An assistant message calling these tools (name, arguments), no text.
    ToolCalls(Vec<(String, Value)>),
}

impl StubReply {
    pub fn text(text: impl Into<String>) -> Self {
        StubReply::Text(text.into())
    }

    /// One call of `name` with `arguments`.
    pub fn call(name: impl Into<String>, arguments: Value) -> Self {
        StubReply::ToolCalls(vec![(name.into(), arguments)])
    }
}

/// What the stub does and saw, shared with its connections.
struct State {
    config: StubConfig,
    replies: Mutex<VecDeque<StubReply>>,
    /// The next n requests answer this status.
    failures: Mutex<(usize, u16)>,
    delay: Mutex<Duration>,
    hanging: watch::Sender<bool>,
    requests: Mutex<Vec<Value>>,
    /// Input, output and cached tokens reported so far.
    usage: Mutex<(u64, u64, u64)>,
    answered: Mutex<u64>,
}

/// The running stub; it stops (and drops every open connection) when dropped.
pub struct OpenAiStub {
    base: String,
    state: Arc<State>,
    serve: tokio::task::JoinHandle<()>,
}

impl OpenAiStub {
    /// Starts a stub on 127.0.0.1 (a free port).
    pub async fn start(config: StubConfig) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the OpenAI stub");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new(State {
            delay: Mutex::new(config.delay),
            config,
            replies: Mutex::default(),
            failures: Mutex::new((0, 200)),
            hanging: watch::channel(false).0,
            requests: Mutex::default(),
            usage: Mutex::default(),
            answered: Mutex::new(0),
        });
        let shared = state.clone();
        let serve = tokio::spawn(async move {
            // Owned by this task: aborting it drops every connection, hanging ones included.
            let mut connections = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                connections.spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(answer(&state, request).await) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
                // Reap the finished ones so a long test does not keep them all.
                while connections.try_join_next().is_some() {}
            }
        });
        Self { base, state, serve }
    }

    /// The API root, ending in `/v1` (a catalog entry's `base_url`).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.base)
    }

    /// An `openai` catalog entry with this id pointing at the stub (model [`STUB_MODEL`], key
    /// variable [`STUB_API_KEY_ENV`]), with `context_window` set to the stub's context limit
    /// when it has one (change the value's fields for anything else, e.g. `timeout_secs` in
    /// `settings`).
    pub fn catalog_entry(&self, id: &str) -> Value {
        let mut entry = json!({
            "id": id,
            "provider": "openai",
            "settings": {
                "base_url": self.base_url(),
                "model": STUB_MODEL,
                "api_key_env": STUB_API_KEY_ENV,
            },
        });
        if let Some(limit) = self.state.config.context_limit {
            entry["context_window"] = json!(limit);
        }
        entry
    }

    /// Queues a reply; queued replies are answered in order before the default echo.
    pub fn push_reply(&self, reply: StubReply) {
        self.state.replies.lock().unwrap().push_back(reply);
    }

    /// The next `n` requests are answered `status` with OpenAI's error body for it (429:
    /// `rate_limit_exceeded`; 5xx: `server_error`).
    pub fn fail_next(&self, n: usize, status: u16) {
        *self.state.failures.lock().unwrap() = (n, status);
    }

    /// Every request waits this long before it is answered (from now on).
    pub fn set_delay(&self, delay: Duration) {
        *self.state.delay.lock().unwrap() = delay;
    }

    /// While on, requests are recorded and then not answered; turning it off lets the
    /// waiting ones go on. Dropping the stub closes their connections.
    pub fn set_hanging(&self, hanging: bool) {
        self.state.hanging.send_replace(hanging);
    }

    /// The bodies of every request received so far, in arrival order (failed ones too).
    pub fn requests(&self) -> Vec<Value> {
        self.state.requests.lock().unwrap().clone()
    }

    /// How many requests got a completion (not a failure or a refusal).
    pub fn completions(&self) -> u64 {
        *self.state.answered.lock().unwrap()
    }

    /// The totals of the `usage` the stub reported: (prompt, completion, cached) tokens. A
    /// streamed reply counts once its usage chunk is sent (only with `include_usage`).
    pub fn usage_reported(&self) -> (u64, u64, u64) {
        *self.state.usage.lock().unwrap()
    }
}

impl Drop for OpenAiStub {
    fn drop(&mut self) {
        self.serve.abort();
    }
}

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
fn last_user_text(body: &Value) -> String {
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

async fn answer(state: &Arc<State>, request: Request<Incoming>) -> Response<Body> {
    if request.method() != "POST" || request.uri().path() != "/v1/chat/completions" {
        return error(
            StatusCode::NOT_FOUND,
            json!({"message": "Invalid URL", "type": "invalid_request_error", "param": null, "code": null}),
        );
    }
    let bytes = axum::body::to_bytes(Body::new(request.into_body()), usize::MAX)
        .await
        .unwrap_or_default();
    let Ok(body) = serde_json::from_slice::<Value>(&bytes) else {
        return error(
            StatusCode::BAD_REQUEST,
            json!({"message": "We could not parse the JSON body of your request.",
                   "type": "invalid_request_error", "param": null, "code": null}),
        );
    };
    state.requests.lock().unwrap().push(body.clone());

    let mut hanging = state.hanging.subscribe();
    let _ = hanging.wait_for(|hanging| !*hanging).await;
    let delay = *state.delay.lock().unwrap();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    if let Some(status) = take_failure(state) {
        return failure(status);
    }
    let prompt = prompt_tokens(&body);
    if let Some(limit) = state.config.context_limit.filter(|limit| prompt > *limit) {
        return error(
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
        );
    }
    let reply = state
        .replies
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| StubReply::Text(format!("echo: {}", last_user_text(&body))));
    let n = {
        let mut answered = state.answered.lock().unwrap();
        *answered += 1;
        *answered
    };
    let usage = Usage {
        prompt,
        completion: completion_tokens(&reply),
        cached: state.config.cached_tokens.min(prompt),
    };
    let model = body["model"].as_str().unwrap_or(STUB_MODEL).to_owned();
    if body["stream"] == true {
        let include_usage = body["stream_options"]["include_usage"] == true;
        stream(state, n, &model, &reply, include_usage.then_some(usage))
    } else {
        usage.record(state);
        let message = match &reply {
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
                             "finish_reason": finish_reason(&reply)}],
                "usage": usage.json(),
            }),
        )
    }
}

#[derive(Debug, Clone, Copy)]
struct Usage {
    prompt: u64,
    completion: u64,
    cached: u64,
}

impl Usage {
    fn json(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "total_tokens": self.prompt + self.completion,
            "prompt_tokens_details": {"cached_tokens": self.cached},
        })
    }

    fn record(&self, state: &State) {
        let mut totals = state.usage.lock().unwrap();
        totals.0 += self.prompt;
        totals.1 += self.completion;
        totals.2 += self.cached;
    }
}

fn take_failure(state: &State) -> Option<u16> {
    let mut failures = state.failures.lock().unwrap();
    (failures.0 > 0).then(|| {
        failures.0 -= 1;
        failures.1
    })
}

fn call_id(n: u64, i: usize) -> String {
    format!("call_stub{n}_{}", i + 1)
}

fn finish_reason(reply: &StubReply) -> &'static str {
    match reply {
        StubReply::Text(_) => "stop",
        StubReply::ToolCalls(_) => "tool_calls",
    }
}

/// `text` in at most `pieces` pieces of about equal length (none for empty text).
fn split(text: &str, pieces: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(pieces.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// The SSE answer: a role chunk, the text or the calls in pieces, the finish chunk, the usage
/// chunk when asked for, `[DONE]`.
fn stream(
    state: &Arc<State>,
    n: u64,
    model: &str,
    reply: &StubReply,
    usage: Option<Usage>,
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
    let pieces = state.config.chunk_pieces;
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

    let delay = state.config.piece_delay;
    let state = state.clone();
    let events = futures::stream::unfold((lines.into_iter(), true), move |(mut lines, first)| {
        let state = state.clone();
        async move {
            let (line, usage) = lines.next()?;
            if !first && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if let Some(usage) = usage {
                usage.record(&state);
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

fn json_response(status: StatusCode, body: Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn error(status: StatusCode, error: Value) -> Response<Body> {
    json_response(status, json!({ "error": error }))
}

/// OpenAI's error body for a failure status.
fn failure(status: u16) -> Response<Body> {
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
