//! `openai`: any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM…).
//!
//! The catalog entry's settings:
//!
//! | setting | default | meaning |
//! |---|---|---|
//! | `base_url` | `https://api.openai.com/v1` | the API root; `/chat/completions` is appended |
//! | `model` | the catalog id | the provider's model name |
//! | `api_key_env` | `OPENAI_API_KEY` | the *name* of the environment variable holding the key; unset or empty: no `Authorization` header (local servers such as Ollama need none) |
//! | `max_tokens` | none | sent as `max_tokens` |
//! | `max_completion_tokens` | none | sent as `max_completion_tokens` (OpenAI's reasoning models refuse `max_tokens`) |
//! | `timeout_secs` | 300 | the whole call, connection included |
//!
//! ```json
//! {"id": "llama", "provider": "openai",
//!  "settings": {"base_url": "http://127.0.0.1:11434/v1", "model": "llama3.2"}}
//! ```
//!
//! The request: the system prompt is the first message (`role: system`); a user turn is a
//! `user` message; an assistant turn is an `assistant` message with its `tool_calls` (type
//! `function`, the arguments as a JSON string); tool results are one `role: tool` message per
//! result, with its `tool_call_id`; the tools are `{type: function, function: {name,
//! description, parameters}}`; the reasoning effort, when set, is `reasoning_effort`.
//!
//! The reply is `choices[0].message`: its `content` (or its `refusal` when there is no
//! content) and its `tool_calls`. Arguments that are not JSON are kept as a JSON string, so
//! that the loop's schema check answers the model with `[tool.invalid_arguments]`; empty
//! arguments are `{}`. Such string arguments go back to the model as it wrote them. The
//! `usage` (`prompt_tokens`, `completion_tokens`, `prompt_tokens_details.cached_tokens`)
//! becomes the reply's [`Usage`](crate::Usage) when the server reports it.
//!
//! **Streaming** ([`Model::complete_streaming`]): the same request with `stream: true` and
//! `stream_options: {include_usage: true}`; the server-sent `chat.completion.chunk`s are read
//! as they arrive, each `delta.content` piece passed to the sink, the `delta.tool_calls`
//! assembled by their `index`, the usage taken from the last chunk; the reply is the one the
//! plain call would give. `timeout_secs` bounds the whole call, the stream included.
//!
//! Errors: HTTP 429 is [`ModelError::Throttled`]; the call's timeout, HTTP 408 and 504 are
//! [`ModelError::TimedOut`]; other 5xx and connection errors (a stream cut short included)
//! are [`ModelError::Unavailable`]; a refusal whose `error.code` is
//! `context_length_exceeded`, or whose message speaks of the context length, window or size,
//! is [`ModelError::ContextOverflow`]; any other refusal is [`ModelError::Rejected`] with the
//! provider's message (truncated); a success whose body is not a chat completion is
//! [`ModelError::InvalidReply`]. The texts are for the logs (they may name the endpoint);
//! participants read [`ModelError::public_message`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use crate::settings::Settings;
use crate::{Model, ModelError, ModelReply, ModelRequest, TextSink, Turn};

mod reply;
mod stream;

use reply::{parse_reply, status_error, transport_error};

/// The API root when the entry names none.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The environment variable holding the key when the entry names none.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";
/// How long a call may take when the entry does not say.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of a provider's error message is kept.
const ERROR_MESSAGE_CHARS: usize = 500;

type KeyLookup = dyn Fn(&str) -> Option<String> + Send + Sync;

/// The OpenAI-compatible provider: one HTTP client (connection pool) for all its models.
#[derive(Clone)]
pub struct OpenAiModel {
    client: reqwest::Client,
    key_lookup: Arc<KeyLookup>,
}

impl fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiModel").finish_non_exhaustive()
    }
}

impl OpenAiModel {
    /// The provider reading each entry's key from the environment variable its
    /// `api_key_env` names, at every call.
    pub fn new() -> Result<Self, ModelError> {
        Self::with_key_lookup(|name| std::env::var(name).ok())
    }

    /// The provider reading keys with `lookup` (given the variable's name) instead of the
    /// environment: for tests, or keys held elsewhere.
    pub fn with_key_lookup(
        lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Result<Self, ModelError> {
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| ModelError::Misconfigured(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            client,
            key_lookup: Arc::new(lookup),
        })
    }
}

/// One entry's settings, read at each call.
struct Endpoint<'a> {
    url: String,
    model: &'a str,
    api_key_env: &'a str,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    timeout: Duration,
}

impl<'a> Endpoint<'a> {
    fn of(request: &'a ModelRequest) -> Result<Self, ModelError> {
        let settings = Settings::new(&request.model.id, &request.model.settings);
        let base_url = settings.string("base_url")?.unwrap_or(DEFAULT_BASE_URL);
        Ok(Self {
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            model: settings.string("model")?.unwrap_or(&request.model.id),
            api_key_env: settings
                .string("api_key_env")?
                .unwrap_or(DEFAULT_API_KEY_ENV),
            max_tokens: settings.positive_int("max_tokens")?,
            max_completion_tokens: settings.positive_int("max_completion_tokens")?,
            timeout: settings.seconds("timeout_secs")?.unwrap_or(DEFAULT_TIMEOUT),
        })
    }
}

#[async_trait]
impl Model for OpenAiModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ModelError> {
        self.call(request, None).await
    }

    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        sink: &dyn TextSink,
    ) -> Result<ModelReply, ModelError> {
        self.call(request, Some(sink)).await
    }
}

impl OpenAiModel {
    /// One call; streamed (`stream: true`) when there is a sink to stream to. The timeout
    /// covers the whole call, a streamed body included.
    async fn call(
        &self,
        request: &ModelRequest,
        sink: Option<&dyn TextSink>,
    ) -> Result<ModelReply, ModelError> {
        let endpoint = Endpoint::of(request)?;
        let mut body = request_body(request, &endpoint);
        if sink.is_some() {
            body["stream"] = Value::Bool(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        let mut call = self
            .client
            .post(&endpoint.url)
            .timeout(endpoint.timeout)
            .json(&body);
        if let Some(key) = (self.key_lookup)(endpoint.api_key_env).filter(|k| !k.is_empty()) {
            call = call.bearer_auth(key);
        }
        let exchange = async {
            let response = call.send().await.map_err(transport_error)?;
            let status = response.status();
            if !status.is_success() {
                let bytes = response.bytes().await.map_err(transport_error)?;
                return Err(status_error(status, &bytes));
            }
            match sink {
                Some(sink) if is_event_stream(&response) => stream::read(response, sink).await,
                _ => {
                    // Also a server that ignores `stream`: its whole text in one piece.
                    let reply = parse_reply(&response.bytes().await.map_err(transport_error)?)?;
                    if let Some((sink, text)) = sink.zip(reply.text.as_deref()) {
                        sink.text(text);
                    }
                    Ok(reply)
                }
            }
        };
        tokio::time::timeout(endpoint.timeout, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(ModelError::TimedOut(format!(
                    "no whole answer from {} within {:?}",
                    endpoint.url, endpoint.timeout
                )))
            })
    }
}

/// Whether the answer is server-sent events (a server may answer `stream: true` with a plain
/// completion).
fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// The chat-completions request for `request`.
fn request_body(request: &ModelRequest, endpoint: &Endpoint<'_>) -> Value {
    let mut messages = Vec::with_capacity(request.turns.len() + 1);
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for turn in &request.turns {
        match turn {
            Turn::User { text } => messages.push(json!({"role": "user", "content": text})),
            Turn::Assistant { text, tool_calls } => {
                let mut message = Map::new();
                message.insert("role".into(), "assistant".into());
                let content = match text {
                    Some(text) => Value::String(text.clone()),
                    // Content may be null only beside tool calls.
                    None if !tool_calls.is_empty() => Value::Null,
                    None => Value::String(String::new()),
                };
                message.insert("content".into(), content);
                if !tool_calls.is_empty() {
                    let calls = tool_calls
                        .iter()
                        .map(|call| {
                            json!({
                                "id": call.id,
                                "type": "function",
                                "function": {
                                    "name": call.name,
                                    "arguments": arguments_text(&call.arguments),
                                },
                            })
                        })
                        .collect();
                    message.insert("tool_calls".into(), Value::Array(calls));
                }
                messages.push(Value::Object(message));
            }
            Turn::ToolResults { results } => {
                messages.extend(results.iter().map(|result| {
                    json!({
                        "role": "tool",
                        "tool_call_id": result.call_id,
                        "content": result.content,
                    })
                }));
            }
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), endpoint.model.into());
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.input_schema,
                    },
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(effort) = request.effort {
        body.insert("reasoning_effort".into(), effort.as_str().into());
    }
    if let Some(n) = endpoint.max_tokens {
        body.insert("max_tokens".into(), n.into());
    }
    if let Some(n) = endpoint.max_completion_tokens {
        body.insert("max_completion_tokens".into(), n.into());
    }
    Value::Object(body)
}

/// A call's arguments as the API carries them: JSON text. Arguments kept as a string (the
/// model sent something that is not JSON) go back as the model wrote them.
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}
