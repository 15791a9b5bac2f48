//! `bedrock`: Amazon Bedrock's Converse API, with tool use.
//!
//! The catalog entry's settings:
//!
//! | setting | default | meaning |
//! |---|---|---|
//! | `model_id` | required | the Bedrock model id, inference profile id or ARN |
//! | `max_tokens` | 4096 | `inferenceConfig.maxTokens` (raised when thinking needs it, below) |
//! | `region` | the SDK config's | the region of this model's calls (signing included) |
//! | `timeout_secs` | 300 | one call (the SDK config's own timeouts are tuned for DynamoDB) |
//!
//! ```json
//! {"id": "claude", "provider": "bedrock", "default_effort": "medium",
//!  "settings": {"model_id": "us.anthropic.claude-sonnet-4-20250514-v1:0", "region": "us-east-1"}}
//! ```
//!
//! The request: the system prompt is a `system` text block; a user turn is a `user` message
//! with a text block; an assistant turn is an `assistant` message with its text and a
//! `toolUse` block per call (`toolUseId`, `name`, `input`); tool results are a `user` message
//! of `toolResult` blocks (`toolUseId`, the text, status `error` for a failed call); the tools
//! are `toolConfig.tools[].toolSpec {name, description, inputSchema.json}`. Converse wants
//! roles to alternate, so consecutive turns of one role (tool results followed by a note the
//! runtime adds, say) are one message, their blocks in order; blank text is left out (Converse
//! refuses it), a blank tool result reads `(empty)`, and call arguments that are not an object
//! (kept as a string by another provider) are sent as `{"arguments": …}`. `status` is only sent to Anthropic
//! Claude and Amazon Nova models, the only ones that accept the field; the result's text
//! (`[code] message`) says the same to the others.
//!
//! # Reasoning effort
//!
//! Bedrock has no model-independent reasoning parameter. For Anthropic Claude models (ids
//! containing `anthropic.claude`, inference profiles such as `us.anthropic.claude-…`
//! included) that have extended thinking, the effort goes in `additionalModelRequestFields`:
//!
//! ```json
//! {"thinking": {"type": "enabled", "budget_tokens": 4096}}
//! ```
//!
//! with `budget_tokens` 1024 for `low`, 4096 for `medium`, 16384 for `high`. The budget must
//! be below `maxTokens`: when `max_tokens` is not above it, `maxTokens` is the budget plus
//! `max_tokens`. Two cases send no thinking, logged at debug:
//!
//! - models without extended thinking: every non-Claude model, and the Claude generations
//!   before 3.7 (`claude-instant`, `claude-v2`, `claude-3-haiku`/`-sonnet`/`-opus`,
//!   `claude-3-5-*`), which refuse the field;
//! - a call inside a tool loop (the last assistant turn called tools): with thinking on,
//!   Claude requires that turn to start with the thinking blocks it produced, signatures
//!   included, and the port's [`Turn::Assistant`] does not carry them, so such a call would be
//!   refused. The effort applies to the first call of each loop.
//!
//! # Usage and streaming
//!
//! The reply's usage is Converse's `usage`: Bedrock counts the prompt's tokens read from and
//! written to the cache (`cacheReadInputTokens`, `cacheWriteInputTokens`) apart from
//! `inputTokens`, so the port's input is their sum (the whole prompt) and its cached tokens
//! are the cache reads.
//!
//! [`Model::complete_streaming`] sends the same request to ConverseStream: each
//! `contentBlockDelta` text is passed to the sink as it arrives (a line break between two
//! text blocks, as the reply joins them), a tool use is its `contentBlockStart` (id, name)
//! plus its `toolUse.input` pieces joined and parsed as JSON, the usage comes from the
//! `metadata` event; the reply is the one Converse would give. `timeout_secs` bounds the
//! whole call, the stream included. ConverseStream needs
//! `bedrock:InvokeModelWithResponseStream` besides `bedrock:InvokeModel`: when it is refused
//! with `AccessDeniedException`, the call is made again with Converse, and so are that
//! model's later streamed calls (logged once at `warn`), their text passed on whole.
//!
//! # Errors
//!
//! `ThrottlingException` and `ServiceQuotaExceededException` (or HTTP 429) are
//! [`ModelError::Throttled`]; `ModelTimeoutException`, the call's timeouts and HTTP 408 or 504
//! are [`ModelError::TimedOut`]; `ServiceUnavailableException`, `ModelNotReadyException`,
//! `InternalServerException`, `ModelStreamErrorException` (or another 5xx), connection
//! failures and a stream that ends before its `messageStop` are [`ModelError::Unavailable`];
//! a `ValidationException` whose message says the input is too long (or speaks of the context
//! length or window, or too many input tokens) is [`ModelError::ContextOverflow`]; other
//! `ValidationException`s, `AccessDeniedException`, `ResourceNotFoundException` and the rest
//! are [`ModelError::Rejected`]; a reply without an output message is
//! [`ModelError::InvalidReply`]. Exceptions inside a stream are classified the same way. The
//! SDK's own retries are turned off for this client: the [`Models`](crate::Models) retry
//! policy is the only one, so attempts do not multiply.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::config::retry::RetryConfig;
use aws_sdk_bedrockruntime::config::timeout::TimeoutConfig;
use aws_sdk_bedrockruntime::config::{self, Region};
use aws_sdk_bedrockruntime::error::{BuildError, SdkError};
use aws_sdk_bedrockruntime::operation::converse_stream::ConverseStreamError;
use aws_sdk_bedrockruntime::types::{
    ContentBlock, ConversationRole, ConverseOutput, InferenceConfiguration, Message,
    SystemContentBlock, TokenUsage, Tool, ToolConfiguration, ToolInputSchema, ToolResultBlock,
    ToolResultContentBlock, ToolResultStatus, ToolSpecification, ToolUseBlock,
};
use aws_smithy_types::{Document, Number};
use serde_json::Value;
use task_core::extension::Effort;

use crate::settings::Settings;
use crate::{Model, ModelError, ModelReply, ModelRequest, TextSink, ToolCall, Turn, Usage};

mod document;
mod errors;
mod stream;

pub use document::{from_document, to_document};

use errors::{converse_kind, converse_stream_kind, sdk_error};

/// `maxTokens` when the entry does not say.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// How long a call may take when the entry does not say.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
const ERROR_MESSAGE_CHARS: usize = 500;

/// The Bedrock provider: one SDK client for all its models.
#[derive(Debug, Clone)]
pub struct BedrockModel {
    client: Client,
    /// The model ids whose ConverseStream was refused as not allowed (a role without
    /// `bedrock:InvokeModelWithResponseStream`): their streamed calls go to Converse.
    stream_denied: Arc<Mutex<HashSet<String>>>,
}

impl BedrockModel {
    /// A provider over `sdk_config` (its credentials, region, HTTP client, endpoint), with
    /// the SDK's retries off and calls of [`DEFAULT_TIMEOUT`] unless an entry says otherwise.
    pub fn new(sdk_config: &aws_config::SdkConfig) -> Self {
        let conf = config::Builder::from(sdk_config)
            .retry_config(RetryConfig::disabled())
            // Merged with the config's own timeouts (its connect timeout stays).
            .timeout_config(call_timeout(DEFAULT_TIMEOUT))
            .build();
        Self {
            client: Client::from_conf(conf),
            stream_denied: Arc::default(),
        }
    }
}

fn call_timeout(timeout: Duration) -> TimeoutConfig {
    TimeoutConfig::builder()
        .operation_timeout(timeout)
        .operation_attempt_timeout(timeout)
        .build()
}

/// The reasoning budget of an effort, in tokens.
pub fn thinking_budget(effort: Effort) -> u32 {
    match effort {
        Effort::Low => 1024,
        Effort::Medium => 4096,
        Effort::High => 16384,
    }
}

/// Whether the model takes Claude's `thinking` request field.
fn has_extended_thinking(model_id: &str) -> bool {
    const BEFORE_THINKING: [&str; 6] = [
        "anthropic.claude-instant",
        "anthropic.claude-v2",
        "anthropic.claude-3-haiku",
        "anthropic.claude-3-sonnet",
        "anthropic.claude-3-opus",
        "anthropic.claude-3-5-",
    ];
    model_id.contains("anthropic.claude") && !BEFORE_THINKING.iter().any(|p| model_id.contains(p))
}

/// Whether the model accepts `toolResult.status`.
fn takes_tool_result_status(model_id: &str) -> bool {
    model_id.contains("anthropic.claude") || model_id.contains("amazon.nova")
}

/// The thinking budget for this call, if any (see the module doc).
fn thinking_for(model_id: &str, request: &ModelRequest) -> Option<u32> {
    let effort = request.effort?;
    if !has_extended_thinking(model_id) {
        tracing::debug!(
            model = model_id,
            effort = effort.as_str(),
            "the model has no reasoning parameter on Bedrock; effort ignored"
        );
        return None;
    }
    let in_tool_loop = request
        .turns
        .iter()
        .rev()
        .find_map(|t| match t {
            Turn::Assistant { tool_calls, .. } => Some(!tool_calls.is_empty()),
            _ => None,
        })
        .unwrap_or(false);
    if in_tool_loop {
        tracing::debug!(
            model = model_id,
            effort = effort.as_str(),
            "inside a tool loop: thinking off for this call (its thinking blocks are not kept)"
        );
        return None;
    }
    Some(thinking_budget(effort))
}

/// One call's parts, the same for Converse and ConverseStream.
struct Prepared {
    model_id: String,
    messages: Vec<Message>,
    system: Option<Vec<SystemContentBlock>>,
    tool_config: Option<ToolConfiguration>,
    thinking: Option<Document>,
    inference: InferenceConfiguration,
    /// The entry's region and timeout, when it sets them.
    overrides: Option<config::Builder>,
    timeout: Duration,
}

impl BedrockModel {
    fn prepare(&self, request: &ModelRequest) -> Result<Prepared, ModelError> {
        let settings = Settings::new(&request.model.id, &request.model.settings);
        let model_id = settings.string("model_id")?.ok_or_else(|| {
            ModelError::Misconfigured(format!(
                "model {:?}: the bedrock provider needs the setting \"model_id\"",
                request.model.id
            ))
        })?;
        let mut max_tokens = settings
            .positive_int("max_tokens")?
            .unwrap_or(DEFAULT_MAX_TOKENS);
        let region = settings.string("region")?;
        let timeout = settings.seconds("timeout_secs")?;

        let mut thinking = None;
        if let Some(budget) = thinking_for(model_id, request) {
            if max_tokens <= budget {
                max_tokens = max_tokens.saturating_add(budget);
            }
            thinking = Some(thinking_fields(budget));
        }
        let max_tokens = i32::try_from(max_tokens).unwrap_or(i32::MAX);
        let overrides = (region.is_some() || timeout.is_some()).then(|| {
            let mut overrides = config::Builder::default();
            if let Some(region) = region {
                overrides = overrides.region(Region::new(region.to_owned()));
            }
            if let Some(timeout) = timeout {
                let mut timeouts = call_timeout(timeout);
                if let Some(base) = self.client.config().timeout_config() {
                    timeouts.take_defaults_from(base);
                }
                overrides = overrides.timeout_config(timeouts);
            }
            overrides
        });
        Ok(Prepared {
            model_id: model_id.to_owned(),
            messages: messages(request, takes_tool_result_status(model_id))?,
            system: (!request.system.trim().is_empty())
                .then(|| vec![SystemContentBlock::Text(request.system.clone())]),
            tool_config: if request.tools.is_empty() {
                None
            } else {
                Some(tool_config(request)?)
            },
            thinking,
            inference: InferenceConfiguration::builder()
                .max_tokens(max_tokens)
                .build(),
            overrides,
            timeout: timeout.unwrap_or(DEFAULT_TIMEOUT),
        })
    }
}

#[async_trait]
impl Model for BedrockModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ModelError> {
        let prepared = self.prepare(request)?;
        let call = self
            .client
            .converse()
            .model_id(&prepared.model_id)
            .set_messages(Some(prepared.messages))
            .set_system(prepared.system)
            .set_tool_config(prepared.tool_config)
            .set_additional_model_request_fields(prepared.thinking)
            .inference_config(prepared.inference);
        let result = match prepared.overrides {
            Some(overrides) => call.customize().config_override(overrides).send().await,
            None => call.send().await,
        };
        let output = result.map_err(|e| sdk_error(e, converse_kind))?;
        tracing::debug!(model = prepared.model_id, stop_reason = ?output.stop_reason, "bedrock reply");
        let mut reply = reply(output.output)?;
        reply.usage = output.usage.as_ref().map(usage);
        Ok(reply)
    }

    /// ConverseStream; the entry's `timeout_secs` bounds the whole call, the stream included
    /// (the SDK's own timeout stops at the response's headers).
    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        sink: &dyn TextSink,
    ) -> Result<ModelReply, ModelError> {
        let prepared = self.prepare(request)?;
        let model_id = prepared.model_id.clone();
        if self.is_stream_denied(&model_id) {
            return self.complete_whole(request, sink).await;
        }
        let timeout = prepared.timeout;
        let call = self
            .client
            .converse_stream()
            .model_id(&prepared.model_id)
            .set_messages(Some(prepared.messages))
            .set_system(prepared.system)
            .set_tool_config(prepared.tool_config)
            .set_additional_model_request_fields(prepared.thinking)
            .inference_config(prepared.inference);
        let exchange = async {
            let result = match prepared.overrides {
                Some(overrides) => call.customize().config_override(overrides).send().await,
                None => call.send().await,
            };
            let output = match result {
                Err(SdkError::ServiceError(service))
                    if matches!(service.err(), ConverseStreamError::AccessDeniedException(_)) =>
                {
                    return Ok(None);
                }
                other => other.map_err(|e| sdk_error(e, converse_stream_kind))?,
            };
            stream::read(output.stream, sink).await.map(Some)
        };
        let streamed = tokio::time::timeout(timeout, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(ModelError::TimedOut(format!(
                    "the ConverseStream of {model_id} did not end within {timeout:?}"
                )))
            })?;
        match streamed {
            Some(reply) => Ok(reply),
            None => {
                tracing::warn!(
                    model = model_id,
                    "ConverseStream is not allowed (bedrock:InvokeModelWithResponseStream); \
                     this model's calls go to Converse, their text unstreamed"
                );
                self.stream_denied
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(model_id);
                self.complete_whole(request, sink).await
            }
        }
    }
}

impl BedrockModel {
    fn is_stream_denied(&self, model_id: &str) -> bool {
        self.stream_denied
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(model_id)
    }

    /// A Converse call whose whole text goes to `sink` once it returns.
    async fn complete_whole(
        &self,
        request: &ModelRequest,
        sink: &dyn TextSink,
    ) -> Result<ModelReply, ModelError> {
        let reply = self.complete(request).await?;
        if let Some(text) = reply.text.as_deref() {
            sink.text(text);
        }
        Ok(reply)
    }
}

/// Converse's token usage as the port counts it: Bedrock reports the prompt's cached
/// (`cacheReadInputTokens`) and cache-written (`cacheWriteInputTokens`) tokens apart from
/// `inputTokens`; the port's input counts the whole prompt.
fn usage(usage: &TokenUsage) -> Usage {
    let count = |n: i32| u64::try_from(n).unwrap_or(0);
    let cached = count(usage.cache_read_input_tokens.unwrap_or(0));
    let written = count(usage.cache_write_input_tokens.unwrap_or(0));
    Usage {
        input_tokens: count(usage.input_tokens) + cached + written,
        output_tokens: count(usage.output_tokens),
        cached_input_tokens: cached,
    }
}

fn thinking_fields(budget: u32) -> Document {
    Document::Object(HashMap::from([(
        "thinking".to_owned(),
        Document::Object(HashMap::from([
            ("type".to_owned(), Document::String("enabled".to_owned())),
            (
                "budget_tokens".to_owned(),
                Document::Number(Number::PosInt(u64::from(budget))),
            ),
        ])),
    )]))
}

fn build_error(error: BuildError) -> ModelError {
    ModelError::Misconfigured(format!("cannot build the Converse request: {error}"))
}

/// The conversation as Converse messages (see the module doc).
fn messages(request: &ModelRequest, with_status: bool) -> Result<Vec<Message>, ModelError> {
    let mut grouped: Vec<(ConversationRole, Vec<ContentBlock>)> = Vec::new();
    for turn in &request.turns {
        let (role, blocks) = match turn {
            Turn::User { text } => (
                ConversationRole::User,
                text_block(text).into_iter().collect(),
            ),
            Turn::Assistant { text, tool_calls } => {
                let mut blocks: Vec<ContentBlock> =
                    text.as_deref().and_then(text_block).into_iter().collect();
                for call in tool_calls {
                    blocks.push(ContentBlock::ToolUse(
                        ToolUseBlock::builder()
                            .tool_use_id(&call.id)
                            .name(&call.name)
                            .input(tool_input(&call.arguments))
                            .build()
                            .map_err(build_error)?,
                    ));
                }
                (ConversationRole::Assistant, blocks)
            }
            Turn::ToolResults { results } => {
                let mut blocks = Vec::with_capacity(results.len());
                for result in results {
                    let text = if result.content.trim().is_empty() {
                        "(empty)".to_owned()
                    } else {
                        result.content.clone()
                    };
                    let mut block = ToolResultBlock::builder()
                        .tool_use_id(&result.call_id)
                        .content(ToolResultContentBlock::Text(text));
                    if result.is_error && with_status {
                        block = block.status(ToolResultStatus::Error);
                    }
                    blocks.push(ContentBlock::ToolResult(
                        block.build().map_err(build_error)?,
                    ));
                }
                (ConversationRole::User, blocks)
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match grouped.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => grouped.push((role, blocks)),
        }
    }
    grouped
        .into_iter()
        .map(|(role, content)| {
            Message::builder()
                .role(role)
                .set_content(Some(content))
                .build()
                .map_err(build_error)
        })
        .collect()
}

/// A call's input: Converse wants an object. Arguments that are not one (a string another
/// provider's model sent that was not JSON, say) are wrapped as `{"arguments": …}`.
fn tool_input(arguments: &Value) -> Document {
    match arguments {
        Value::Object(_) => to_document(arguments),
        other => Document::Object(HashMap::from([(
            "arguments".to_owned(),
            to_document(other),
        )])),
    }
}

fn text_block(text: &str) -> Option<ContentBlock> {
    (!text.trim().is_empty()).then(|| ContentBlock::Text(text.to_owned()))
}

fn tool_config(request: &ModelRequest) -> Result<ToolConfiguration, ModelError> {
    let mut config = ToolConfiguration::builder();
    for tool in request.tools.iter() {
        config = config.tools(Tool::ToolSpec(
            ToolSpecification::builder()
                .name(&tool.name)
                .description(&tool.description)
                .input_schema(ToolInputSchema::Json(to_document(&tool.input_schema)))
                .build()
                .map_err(build_error)?,
        ));
    }
    config.build().map_err(build_error)
}

/// The reply's text blocks (joined) and tool uses; reasoning blocks are left out.
fn reply(output: Option<ConverseOutput>) -> Result<ModelReply, ModelError> {
    let message = match output {
        Some(ConverseOutput::Message(message)) => message,
        Some(_) => {
            return Err(ModelError::InvalidReply(
                "the Converse output is not a message".into(),
            ));
        }
        None => {
            return Err(ModelError::InvalidReply(
                "the Converse reply has no output message".into(),
            ));
        }
    };
    let mut texts: Vec<String> = Vec::new();
    let mut tool_calls = Vec::new();
    for block in message.content {
        match block {
            ContentBlock::Text(text) => texts.push(text),
            ContentBlock::ToolUse(tool_use) => tool_calls.push(ToolCall {
                arguments: from_document(&tool_use.input),
                id: tool_use.tool_use_id,
                name: tool_use.name,
            }),
            ContentBlock::ReasoningContent(_) => {}
            other => tracing::debug!(block = ?other, "bedrock reply: content block ignored"),
        }
    }
    let text = texts.join("\n");
    Ok(ModelReply {
        text: (!text.is_empty()).then_some(text),
        tool_calls,
        usage: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_is_for_claude_models_that_have_it() {
        for id in [
            "anthropic.claude-3-7-sonnet-20250219-v1:0",
            "us.anthropic.claude-sonnet-4-20250514-v1:0",
            "anthropic.claude-opus-4-1-20250805-v1:0",
            "global.anthropic.claude-haiku-4-5-20251001-v1:0",
            "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        ] {
            assert!(has_extended_thinking(id), "{id}");
        }
        for id in [
            "anthropic.claude-3-5-sonnet-20240620-v1:0",
            "us.anthropic.claude-3-5-haiku-20241022-v1:0",
            "anthropic.claude-3-haiku-20240307-v1:0",
            "anthropic.claude-v2:1",
            "anthropic.claude-instant-v1",
            "amazon.nova-pro-v1:0",
            "meta.llama3-70b-instruct-v1:0",
        ] {
            assert!(!has_extended_thinking(id), "{id}");
        }
        assert_eq!(thinking_budget(Effort::Low), 1024);
        assert_eq!(thinking_budget(Effort::Medium), 4096);
        assert_eq!(thinking_budget(Effort::High), 16384);
    }
}
