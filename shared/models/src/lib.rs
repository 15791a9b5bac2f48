//! The model port: what the agent loop asks of a model, one call per turn, and the providers
//! that answer it.
//!
//! A [`ModelRequest`] carries the whole context of a turn (system prompt, the conversation as
//! turns, the tool definitions) plus the task's chosen model and reasoning effort; a
//! [`ModelReply`] is text, tool calls, or both. Providers, one per [`ProviderKind`]:
//!
//! - [`BedrockModel`] (`bedrock`): Amazon Bedrock's Converse API with tool use, over an
//!   `aws_config::SdkConfig` the caller builds; the effort becomes Claude's extended
//!   thinking budget (see [`bedrock`]);
//! - [`OpenAiModel`] (`openai`): any OpenAI-compatible chat-completions endpoint (OpenAI,
//!   Ollama, vLLM), the effort sent as `reasoning_effort` (see [`openai`]);
//! - [`EchoModel`] (`echo`) and [`ScriptedModel`] (`scripted`), offline.
//!
//! Each catalog entry's `settings` say how its provider reaches it (the provider's model id,
//! endpoint, region, key variable…); they are read at every call. [`Models`] picks the
//! provider a catalog entry names and retries transient failures ([`ModelError::Throttled`],
//! [`ModelError::Unavailable`], [`ModelError::TimedOut`]) with backoff until a deadline
//! ([`RetryPolicy`]: 60 s by default).
//!
//! A [`ModelError`]'s `Display` carries the provider's details (status, message, endpoint
//! errors) for the logs; what a task's participants may read of it is
//! [`ModelError::public_message`], the class of the failure and nothing else.

pub mod bedrock;
mod echo;
pub mod openai;
mod retry;
mod scripted;
mod settings;
mod text;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use task_core::commands::{ModelSpec, ProviderKind};
use task_core::extension::Effort;

pub use bedrock::BedrockModel;
pub use echo::EchoModel;
pub use openai::OpenAiModel;
pub use retry::{DEFAULT_RETRY_DEADLINE, RetryPolicy};
pub use scripted::{Pieces, Script, ScriptedModel, ScriptedTurn};

/// A tool the model may call: its name, what it does, and the JSON schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// One call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call (generated when the provider gives none), echoed in
    /// the result.
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// The result of a call, as the model reads it on the next turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub name: String,
    /// The result text; the loop frames it as untrusted content.
    pub content: String,
    /// The call failed (`[code] message`).
    pub is_error: bool,
}

/// One entry of the conversation the model sees, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Turn {
    /// What a participant said (or a note the runtime adds, such as a sub-task's outcome).
    User { text: String },
    /// What the model answered before: text, calls, or both.
    Assistant {
        text: Option<String>,
        tool_calls: Vec<ToolCall>,
    },
    /// The results of the previous assistant turn's calls, in call order.
    ToolResults { results: Vec<ToolResult> },
}

/// Everything one model call needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The task's name: the scripted model picks its script by it (real providers do not
    /// read it).
    pub task_name: String,
    /// The catalog entry the task uses (`/model`), with its provider settings.
    pub model: ModelSpec,
    /// The task's reasoning effort (`/effort`), or the model's default.
    pub effort: Option<Effort>,
    pub system: String,
    pub turns: Vec<Turn>,
    /// The tools the model may call: the same list on every call of a service, so it is
    /// shared rather than copied per request.
    pub tools: std::sync::Arc<[ToolDefinition]>,
}

impl ModelRequest {
    /// The last participant text of the conversation (what `echo` answers with).
    pub fn last_user_text(&self) -> Option<&str> {
        self.turns.iter().rev().find_map(|t| match t {
            Turn::User { text } => Some(text.as_str()),
            _ => None,
        })
    }
}

/// What one call cost, as the provider reported it (tokens).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache, where it reports them (part of
    /// `input_tokens`).
    #[serde(default)]
    pub cached_input_tokens: u64,
}

impl Usage {
    /// Input and output tokens together (what a budget counts).
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// Adds `other` to these totals.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(other.cached_input_tokens);
    }
}

/// A model's answer to one call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelReply {
    pub text: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    /// The call's token usage, when the provider reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

impl ModelReply {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: Some(text.into()),
            tool_calls: Vec::new(),
            usage: None,
        }
    }
}

/// Where a streaming call puts the model's text while it is generated.
///
/// Called from the provider's task as pieces arrive; implementations must be cheap and must
/// not block (the runtime coalesces the pieces before anyone sees them).
pub trait TextSink: Send + Sync {
    /// The next piece of the reply's text.
    fn text(&self, delta: &str);

    /// A new attempt of the same call starts (a retry after a transient failure): the text
    /// streamed so far is void.
    fn restart(&self) {}
}

/// A sink that drops what it gets (calls nobody streams).
pub struct NoSink;

impl TextSink for NoSink {
    fn text(&self, _delta: &str) {}
}

/// Why a model call failed. The texts are details for the logs: they may name the
/// provider's endpoint, host or answer. Client-visible text is [`ModelError::public_message`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The provider asked us to slow down (HTTP 429, Bedrock `ThrottlingException`):
    /// retried with backoff.
    #[error("the model provider is throttling: {0}")]
    Throttled(String),
    /// The provider failed or could not be reached (5xx, connection errors): retried with
    /// backoff.
    #[error("the model provider is unavailable: {0}")]
    Unavailable(String),
    /// The call took longer than its timeout, or the provider says it did (HTTP 408 and 504,
    /// Bedrock `ModelTimeoutException`): retried with backoff.
    #[error("the model provider timed out: {0}")]
    TimedOut(String),
    /// The provider refused the request (4xx other than 408/429: credentials, a bad model
    /// id, a request too large): not retried.
    #[error("the model provider refused the request: {0}")]
    Rejected(String),
    /// The provider refused the request as longer than the model's context window: not
    /// retried (the runtime compacts the conversation or refuses the message instead).
    #[error("the request exceeds the model's context window: {0}")]
    ContextOverflow(String),
    /// The configuration cannot work (a missing setting, an unreadable script).
    #[error("the model is misconfigured: {0}")]
    Misconfigured(String),
    /// The provider answered something we cannot read.
    #[error("the model's answer cannot be read: {0}")]
    InvalidReply(String),
}

impl ModelError {
    /// Whether trying again later could succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ModelError::Throttled(_) | ModelError::Unavailable(_) | ModelError::TimedOut(_)
        )
    }

    /// The class of the failure, for logs and metrics: `throttled`, `unavailable`,
    /// `timed_out`, `rejected`, `misconfigured` or `invalid_reply`.
    pub fn class(&self) -> &'static str {
        match self {
            ModelError::Throttled(_) => "throttled",
            ModelError::Unavailable(_) => "unavailable",
            ModelError::TimedOut(_) => "timed_out",
            ModelError::Rejected(_) => "rejected",
            ModelError::ContextOverflow(_) => "context_overflow",
            ModelError::Misconfigured(_) => "misconfigured",
            ModelError::InvalidReply(_) => "invalid_reply",
        }
    }

    /// What a task's participants may read: the class of the failure in a short sentence,
    /// nothing of URLs, hosts, paths, status lines or answer bodies.
    pub fn public_message(&self) -> &'static str {
        match self {
            ModelError::Throttled(_) => "the model provider throttled the request",
            ModelError::Unavailable(_) => "the model provider is unavailable",
            ModelError::TimedOut(_) => "the model provider timed out",
            ModelError::Rejected(_) => "the model provider refused the request",
            ModelError::ContextOverflow(_) => {
                "the conversation is too long for the model's context window"
            }
            ModelError::Misconfigured(_) => "the model is misconfigured",
            ModelError::InvalidReply(_) => "the model's answer could not be read",
        }
    }
}

/// A model provider: one call per turn.
#[async_trait]
pub trait Model: Send + Sync {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ModelError>;

    /// The same call, its text passed to `sink` piece by piece while the provider generates
    /// it (the reply still carries the whole text). Default: a provider that does not stream
    /// (`echo`) tells the sink nothing; its text arrives whole in the reply.
    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        _sink: &dyn TextSink,
    ) -> Result<ModelReply, ModelError> {
        self.complete(request).await
    }
}

/// The context window of `model` in tokens: the catalog entry's `context_window`, else the
/// provider's usual size (Bedrock's Claude models 200,000; OpenAI's current models 128,000;
/// the offline models unbounded).
pub fn context_window(model: &ModelSpec) -> u64 {
    model.context_window.unwrap_or(match model.provider {
        ProviderKind::Bedrock => 200_000,
        ProviderKind::Openai => 128_000,
        ProviderKind::Echo | ProviderKind::Scripted => u64::MAX,
    })
}

/// The providers the catalog's entries name, with one retry policy for all.
#[derive(Clone)]
pub struct Models {
    providers: HashMap<ProviderKind, Arc<dyn Model>>,
    retry: RetryPolicy,
}

impl Models {
    /// Only the offline echo model (the local default).
    pub fn offline() -> Self {
        Self::new(RetryPolicy::default()).with(ProviderKind::Echo, Arc::new(EchoModel))
    }

    pub fn new(retry: RetryPolicy) -> Self {
        Self {
            providers: HashMap::new(),
            retry,
        }
    }

    /// Retries transient failures with `retry` (e.g. [`RetryPolicy::with_deadline`]).
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Adds the network providers: `openai` (keys read from the environment) and `bedrock`
    /// over `sdk_config`.
    pub fn with_network_providers(
        self,
        sdk_config: &aws_config::SdkConfig,
    ) -> Result<Self, ModelError> {
        Ok(self.with_openai()?.with_bedrock(sdk_config))
    }

    /// Adds `openai` (keys read from the environment at each call).
    pub fn with_openai(self) -> Result<Self, ModelError> {
        Ok(self.with(ProviderKind::Openai, Arc::new(OpenAiModel::new()?)))
    }

    /// Adds `bedrock` over `sdk_config` (its credentials and region).
    pub fn with_bedrock(self, sdk_config: &aws_config::SdkConfig) -> Self {
        self.with(
            ProviderKind::Bedrock,
            Arc::new(BedrockModel::new(sdk_config)),
        )
    }

    /// Serves the models of `kind` with `provider`.
    pub fn with(mut self, kind: ProviderKind, provider: Arc<dyn Model>) -> Self {
        self.providers.insert(kind, provider);
        self
    }

    /// One turn: the provider of the request's model, retried on transient failures (a plain
    /// call: nothing streams).
    pub async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ModelError> {
        let provider = self.provider(request)?;
        self.retry
            .run(|| provider.complete(request), &request.model.id)
            .await
    }

    /// One turn whose text goes to `sink` as it is generated, retried on transient failures
    /// (`sink` is told of each new attempt).
    pub async fn complete_streaming(
        &self,
        request: &ModelRequest,
        sink: &dyn TextSink,
    ) -> Result<ModelReply, ModelError> {
        let provider = self.provider(request)?;
        let mut first = true;
        self.retry
            .run(
                || {
                    if !std::mem::take(&mut first) {
                        sink.restart();
                    }
                    provider.complete_streaming(request, sink)
                },
                &request.model.id,
            )
            .await
    }

    fn provider(&self, request: &ModelRequest) -> Result<&Arc<dyn Model>, ModelError> {
        let kind = request.model.provider;
        self.providers.get(&kind).ok_or_else(|| {
            ModelError::Misconfigured(format!(
                "model {:?} needs the {kind} provider, which this deployment does not configure",
                request.model.id
            ))
        })
    }
}
