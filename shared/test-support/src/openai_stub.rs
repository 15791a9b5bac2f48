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
use axum::http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinSet;

mod wire;

use wire::Usage;
pub use wire::{completion_tokens, prompt_tokens};

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
    /// Answers a request that offers no tools (a summarizer's call, such as the runtime's
    /// context compaction) with this text, before the script or the echo; `None`: no
    /// difference.
    pub toolless_reply: Option<String>,
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
            toolless_reply: None,
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

async fn answer(state: &Arc<State>, request: Request<Incoming>) -> Response<Body> {
    if request.method() != "POST" || request.uri().path() != "/v1/chat/completions" {
        return wire::invalid(StatusCode::NOT_FOUND, "Invalid URL");
    }
    let bytes = axum::body::to_bytes(Body::new(request.into_body()), usize::MAX)
        .await
        .unwrap_or_default();
    let Ok(body) = serde_json::from_slice::<Value>(&bytes) else {
        return wire::invalid(
            StatusCode::BAD_REQUEST,
            "We could not parse the JSON body of your request.",
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
        return wire::failure(status);
    }
    let prompt = prompt_tokens(&body);
    if let Some(limit) = state.config.context_limit.filter(|limit| prompt > *limit) {
        return wire::context_length_exceeded(limit, prompt);
    }
    let toolless = body.get("tools").is_none();
    let reply = match state.config.toolless_reply.as_ref().filter(|_| toolless) {
        Some(text) => StubReply::Text(text.clone()),
        None => state
            .replies
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| StubReply::Text(format!("echo: {}", wire::last_user_text(&body)))),
    };
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
    let model = body["model"].as_str().unwrap_or(STUB_MODEL);
    if body["stream"] == true {
        let include_usage = body["stream_options"]["include_usage"] == true;
        let state = state.clone();
        wire::stream(
            (state.config.chunk_pieces, state.config.piece_delay),
            n,
            model,
            &reply,
            include_usage.then_some(usage),
            move |usage| record(&state, usage),
        )
    } else {
        record(state, usage);
        wire::completion(n, model, &reply, usage)
    }
}

fn record(state: &State, usage: Usage) {
    let mut totals = state.usage.lock().unwrap();
    totals.0 += usage.prompt;
    totals.1 += usage.completion;
    totals.2 += usage.cached;
}

fn take_failure(state: &State) -> Option<u16> {
    let mut failures = state.failures.lock().unwrap();
    (failures.0 > 0).then(|| {
        failures.0 -= 1;
        failures.1
    })
}
