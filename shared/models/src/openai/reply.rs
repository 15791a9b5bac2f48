//! What an OpenAI-compatible server answers: a completion's message and usage, and its
//! errors as [`ModelError`]s.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::ERROR_MESSAGE_CHARS;
use crate::text::{error_chain, truncate};
use crate::{ModelError, ModelReply, ToolCall, Usage};

/// A call that got no HTTP answer (or lost it half-way).
pub(super) fn transport_error(error: reqwest::Error) -> ModelError {
    if error.is_builder() {
        // The URL cannot be used: nothing was sent.
        return ModelError::Misconfigured(format!(
            "cannot send the request: {}",
            error_chain(&error)
        ));
    }
    if error.is_timeout() {
        return ModelError::TimedOut(error_chain(&error));
    }
    // Refused or reset connections, bodies cut short: worth trying again.
    ModelError::Unavailable(error_chain(&error))
}

/// A non-2xx answer.
pub(super) fn status_error(status: reqwest::StatusCode, body: &[u8]) -> ModelError {
    let message = format!("HTTP {}: {}", status.as_u16(), error_message(body));
    match status.as_u16() {
        429 => ModelError::Throttled(message),
        408 | 504 => ModelError::TimedOut(message),
        500..=599 => ModelError::Unavailable(message),
        _ => {
            let error = serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|v| v.get("error").cloned())
                .unwrap_or(Value::Null);
            let rejected = ModelError::Rejected(message.clone());
            overflow_or(&error, &message, rejected)
        }
    }
}

/// [`ModelError::ContextOverflow`] when an error says the prompt is longer than the model's
/// context (OpenAI's `code` `context_length_exceeded`, or a message about the context
/// length, window or size as vLLM and llama.cpp word it), else `otherwise`.
pub(super) fn overflow_or(error: &Value, message: &str, otherwise: ModelError) -> ModelError {
    let lower = message.to_lowercase();
    let overflow = error.get("code").and_then(Value::as_str) == Some("context_length_exceeded")
        || [
            "context length",
            "context_length",
            "context window",
            "context size",
        ]
        .iter()
        .any(|phrase| lower.contains(phrase));
    if overflow {
        ModelError::ContextOverflow(message.to_owned())
    } else {
        otherwise
    }
}

/// The provider's message in an error body (`{"error": {"message": …}}`, `{"error": "…"}`,
/// `{"message": …}`), else the body's text; truncated.
fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("error"))
            .or_else(|| v.get("message"))
            .and_then(Value::as_str)
    });
    let message = message.unwrap_or(&text);
    if message.trim().is_empty() {
        "(no message)".to_owned()
    } else {
        truncate(message, ERROR_MESSAGE_CHARS)
    }
}

#[derive(Deserialize)]
struct Completion {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

/// `usage` of a completion (or of a stream's last chunk).
#[derive(Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl WireUsage {
    pub(super) fn usage(self) -> Usage {
        Usage {
            input_tokens: self.prompt_tokens,
            output_tokens: self.completion_tokens,
            cached_input_tokens: self
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
        }
    }
}

#[derive(Deserialize)]
struct Choice {
    message: ChoiceMessage,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireCall>>,
}

/// Content is a string, or (some servers) a list of parts.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Deserialize)]
pub(super) struct ContentPart {
    #[serde(default)]
    pub(super) text: Option<String>,
}

#[derive(Deserialize)]
struct WireCall {
    #[serde(default)]
    id: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    /// A JSON string per the API; some servers send the object itself.
    #[serde(default)]
    arguments: Option<Value>,
}

/// A 2xx body: the first choice's message.
pub(super) fn parse_reply(body: &[u8]) -> Result<ModelReply, ModelError> {
    let completion: Completion = serde_json::from_slice(body).map_err(|e| {
        ModelError::InvalidReply(format!(
            "not a chat completion ({e}): {}",
            truncate(&String::from_utf8_lossy(body), ERROR_MESSAGE_CHARS)
        ))
    })?;
    let usage = completion.usage.map(WireUsage::usage);
    let message = completion
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| ModelError::InvalidReply("the completion has no choices".into()))?
        .message;
    let text = match message.content {
        Some(Content::Text(text)) => Some(text),
        Some(Content::Parts(parts)) => Some(parts.into_iter().filter_map(|p| p.text).collect()),
        None => None,
    }
    .filter(|t: &String| !t.is_empty())
    .or(message.refusal.filter(|r| !r.is_empty()));
    let tool_calls = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, call)| ToolCall {
            id: call
                .id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| format!("call-{}", i + 1)),
            name: call.function.name,
            arguments: arguments(call.function.arguments),
        })
        .collect();
    Ok(ModelReply {
        text,
        tool_calls,
        usage,
    })
}

/// A call's arguments as JSON: the string parsed, or kept as a string when it is not JSON
/// (the loop's schema check then tells the model); none or blank is `{}`.
pub(super) fn arguments(raw: Option<Value>) -> Value {
    match raw {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::String(s)) if s.trim().is_empty() => Value::Object(Map::new()),
        Some(Value::String(s)) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
        Some(other) => other,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn error_messages_are_found_in_the_usual_shapes() {
        assert_eq!(
            error_message(br#"{"error": {"message": "bad model", "type": "x"}}"#),
            "bad model"
        );
        assert_eq!(
            error_message(br#"{"error": "model not found"}"#),
            "model not found"
        );
        assert_eq!(error_message(br#"{"message": "nope"}"#), "nope");
        assert_eq!(error_message(b"plain text"), "plain text");
        assert_eq!(error_message(b""), "(no message)");
        let long = "x".repeat(2000);
        assert_eq!(error_message(long.as_bytes()).chars().count(), 501);
    }

    #[test]
    fn refusals_about_the_context_are_overflows() {
        let bad = reqwest::StatusCode::BAD_REQUEST;
        let openai = br#"{"error": {"message": "too long", "type": "invalid_request_error", "code": "context_length_exceeded"}}"#;
        assert!(matches!(
            status_error(bad, openai),
            ModelError::ContextOverflow(m) if m == "HTTP 400: too long"
        ));
        // vLLM and llama.cpp say it in the message alone.
        for message in [
            "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",
            "the request exceeds the available context size, try increasing it",
        ] {
            let body =
                json!({"error": {"message": message, "type": "BadRequestError", "code": 400}});
            assert!(matches!(
                status_error(bad, body.to_string().as_bytes()),
                ModelError::ContextOverflow(_)
            ));
        }
        let other = br#"{"error": {"message": "Invalid model", "code": "model_not_found"}}"#;
        assert!(matches!(status_error(bad, other), ModelError::Rejected(_)));
        assert!(matches!(
            status_error(reqwest::StatusCode::SERVICE_UNAVAILABLE, openai),
            ModelError::Unavailable(_)
        ));
    }

    #[test]
    fn arguments_are_parsed_kept_as_a_string_or_empty() {
        assert_eq!(
            arguments(Some(Value::String(r#"{"a": 1}"#.into()))),
            json!({"a": 1})
        );
        assert_eq!(
            arguments(Some(Value::String("{not json".into()))),
            json!("{not json")
        );
        assert_eq!(arguments(Some(Value::String(" ".into()))), json!({}));
        assert_eq!(arguments(None), json!({}));
        assert_eq!(arguments(Some(json!({"b": true}))), json!({"b": true}));
    }

    #[test]
    fn replies_take_the_content_parts_or_the_refusal() {
        let reply = parse_reply(
            br#"{"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}]}"#,
        )
        .unwrap();
        assert_eq!(reply, ModelReply::text("ab"));
        let reply =
            parse_reply(br#"{"choices": [{"message": {"content": null, "refusal": "no"}}]}"#)
                .unwrap();
        assert_eq!(reply, ModelReply::text("no"));
        let reply = parse_reply(
            br#"{"choices": [{"message": {"content": "", "tool_calls": [{"type": "function", "function": {"name": "t"}}]}}]}"#,
        )
        .unwrap();
        assert_eq!(reply.text, None);
        assert_eq!(reply.tool_calls[0].id, "call-1");
        assert_eq!(reply.tool_calls[0].arguments, json!({}));
        assert!(matches!(
            parse_reply(br#"{"choices": []}"#),
            Err(ModelError::InvalidReply(_))
        ));
    }
}
