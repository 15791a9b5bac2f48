//! The OpenAI-compatible provider's streaming, usage and context overflow, against the
//! OpenAI stub of `test-support` (a real server speaking the wire format).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{hello, request_to};
use models::{
    Model, ModelError, ModelReply, ModelRequest, Models, OpenAiModel, RetryPolicy, TextSink, Usage,
};
use serde_json::{Value, json};
use task_core::commands::ProviderKind;
use test_support::openai_stub::{completion_tokens, prompt_tokens};
use test_support::{OpenAiStub, StubConfig, StubReply};

/// What a sink was told: the pieces, and `<restart>` where an attempt restarted.
#[derive(Default)]
struct Pieces(Mutex<Vec<String>>);

impl Pieces {
    fn got(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl TextSink for Pieces {
    fn text(&self, delta: &str) {
        self.0.lock().unwrap().push(delta.to_owned());
    }

    fn restart(&self) {
        self.0.lock().unwrap().push("<restart>".to_owned());
    }
}

fn request(stub: &OpenAiStub, extra: Value) -> ModelRequest {
    let mut settings = stub.catalog_entry("gpt")["settings"].clone();
    settings
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    request_to("gpt", ProviderKind::Openai, settings, hello())
}

fn provider() -> OpenAiModel {
    OpenAiModel::with_key_lookup(|_| None).unwrap()
}

#[tokio::test]
async fn a_plain_call_reports_the_usage_the_server_gave() {
    let stub = OpenAiStub::start(StubConfig {
        cached_tokens: 3,
        ..StubConfig::default()
    })
    .await;
    let reply = provider()
        .complete(&request(&stub, json!({})))
        .await
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some("echo: Hello?"));
    let (input, output, cached) = stub.usage_reported();
    assert_eq!(
        reply.usage,
        Some(Usage {
            input_tokens: input,
            output_tokens: output,
            cached_input_tokens: cached,
        })
    );
    assert_eq!(cached, 3);
    assert_eq!(input, prompt_tokens(&stub.requests()[0]));
    // A plain call does not ask for a stream.
    assert_eq!(stub.requests()[0].get("stream"), None);
}

#[tokio::test]
async fn a_streamed_reply_reaches_the_sink_in_pieces_and_is_the_plain_reply() {
    let stub = OpenAiStub::start(StubConfig {
        chunk_pieces: 3,
        piece_delay: Duration::from_millis(10),
        ..StubConfig::default()
    })
    .await;
    let text = "The refund of order 48213 is on its way.";
    stub.push_reply(StubReply::text(text));
    stub.push_reply(StubReply::text(text));
    let request = request(&stub, json!({}));
    let sink = Pieces::default();
    let streamed = provider()
        .complete_streaming(&request, &sink)
        .await
        .unwrap();
    let pieces = sink.got();
    assert_eq!(pieces.len(), 3, "{pieces:?}");
    assert_eq!(pieces.concat(), text);
    let plain = provider().complete(&request).await.unwrap();
    assert_eq!(streamed, plain);
    assert_eq!(
        streamed.usage.unwrap().output_tokens,
        completion_tokens(&StubReply::text(text))
    );
    let sent = &stub.requests()[0];
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));
    let (input, output, _) = stub.usage_reported();
    assert_eq!(input, 2 * streamed.usage.unwrap().input_tokens);
    assert_eq!(output, 2 * streamed.usage.unwrap().output_tokens);
}

#[tokio::test]
async fn streamed_tool_calls_are_assembled_like_plain_ones() {
    let stub = OpenAiStub::start(StubConfig {
        chunk_pieces: 4,
        ..StubConfig::default()
    })
    .await;
    let calls = vec![
        (
            "create_plan".to_owned(),
            json!({"steps": [{"name": "Look", "description": "around"}]}),
        ),
        ("list_skills".to_owned(), json!({})),
    ];
    stub.push_reply(StubReply::ToolCalls(calls.clone()));
    stub.push_reply(StubReply::ToolCalls(calls.clone()));
    let request = request(&stub, json!({}));
    let sink = Pieces::default();
    let streamed = provider()
        .complete_streaming(&request, &sink)
        .await
        .unwrap();
    let plain = provider().complete(&request).await.unwrap();
    let named = |reply: &ModelReply| {
        reply
            .tool_calls
            .iter()
            .map(|c| (c.name.clone(), c.arguments.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(named(&streamed), calls);
    assert_eq!(named(&plain), calls);
    assert_eq!(streamed.text, None);
    assert!(sink.got().is_empty());
    assert_eq!(stub.requests()[0]["stream"], true);
    assert!(streamed.tool_calls[0].id.starts_with("call_stub"));
    assert_ne!(streamed.tool_calls[0].id, streamed.tool_calls[1].id);
    assert_eq!(streamed.usage, plain.usage);
}

#[tokio::test]
async fn a_prompt_over_the_context_limit_is_a_context_overflow_not_retried() {
    let stub = OpenAiStub::start(StubConfig {
        context_limit: Some(5),
        ..StubConfig::default()
    })
    .await;
    let models =
        Models::new(RetryPolicy::quick(3)).with(ProviderKind::Openai, Arc::new(provider()));
    let request = request(&stub, json!({}));
    let plain = models.complete(&request).await.unwrap_err();
    assert!(
        matches!(&plain, ModelError::ContextOverflow(m) if m.contains("maximum context length is 5 tokens")),
        "{plain:?}"
    );
    assert_eq!(
        plain.public_message(),
        "the conversation is too long for the model's context window"
    );
    let streamed = models
        .complete_streaming(&request, &Pieces::default())
        .await
        .unwrap_err();
    assert!(
        matches!(streamed, ModelError::ContextOverflow(_)),
        "{streamed:?}"
    );
    assert_eq!(stub.requests().len(), 2);
}

#[tokio::test]
async fn the_timeout_covers_the_whole_stream() {
    let stub = OpenAiStub::start(StubConfig {
        chunk_pieces: 40,
        piece_delay: Duration::from_millis(100),
        ..StubConfig::default()
    })
    .await;
    stub.push_reply(StubReply::text("x".repeat(40)));
    let sink = Pieces::default();
    let error = provider()
        .complete_streaming(&request(&stub, json!({"timeout_secs": 0.5})), &sink)
        .await
        .unwrap_err();
    assert!(matches!(error, ModelError::TimedOut(_)), "{error:?}");
    // The answer had started: its headers and first pieces came well within the timeout.
    assert!(!sink.got().is_empty());
}

#[tokio::test]
async fn a_failed_attempt_restarts_the_sink_and_the_retry_streams_again() {
    let stub = OpenAiStub::start(StubConfig::default()).await;
    stub.fail_next(1, 503);
    stub.push_reply(StubReply::text("abcd"));
    let models =
        Models::new(RetryPolicy::quick(3)).with(ProviderKind::Openai, Arc::new(provider()));
    let sink = Pieces::default();
    let reply = models
        .complete_streaming(&request(&stub, json!({})), &sink)
        .await
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some("abcd"));
    assert_eq!(sink.got(), ["<restart>", "a", "b", "c", "d"]);
}

#[tokio::test]
async fn a_server_that_ignores_stream_is_read_as_a_plain_completion() {
    let stub = common::Stub::start(vec![common::Reply::json(
        200,
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "whole"}}]}),
    )])
    .await;
    let sink = Pieces::default();
    let reply = provider()
        .complete_streaming(
            &request_to(
                "gpt",
                ProviderKind::Openai,
                json!({"base_url": stub.url}),
                hello(),
            ),
            &sink,
        )
        .await
        .unwrap();
    assert_eq!(reply, ModelReply::text("whole"));
    assert_eq!(sink.got(), ["whole"]);
}
