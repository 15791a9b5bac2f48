//! The Bedrock provider's ConverseStream, usage and context overflow, against a stub that
//! answers in the real event-stream framing (`application/vnd.amazon.eventstream`); the real
//! SDK client signs, sends and parses.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use common::eventstream::{event, exception};
use common::{Reply, Stub, bedrock_sdk_config, hello, request_to};
use models::{
    BedrockModel, Model, ModelError, ModelRequest, Models, RetryPolicy, TextSink, Turn, Usage,
};
use serde_json::{Value, json};
use task_core::commands::ProviderKind;
use task_core::extension::Effort;

const CLAUDE: &str = "us.anthropic.claude-sonnet-4-20250514-v1:0";

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
}

fn request(turns: Vec<Turn>) -> ModelRequest {
    request_to(
        "claude",
        ProviderKind::Bedrock,
        json!({"model_id": CLAUDE}),
        turns,
    )
}

fn text_delta(index: i32, text: &str) -> Vec<u8> {
    event(
        "contentBlockDelta",
        json!({"contentBlockIndex": index, "delta": {"text": text}}),
    )
}

fn stop(reason: &str) -> Vec<u8> {
    event("messageStop", json!({"stopReason": reason}))
}

fn metadata(usage: Value) -> Vec<u8> {
    event(
        "metadata",
        json!({"usage": usage, "metrics": {"latencyMs": 120}}),
    )
}

fn start() -> Vec<u8> {
    event("messageStart", json!({"role": "assistant"}))
}

#[tokio::test]
async fn a_streamed_text_reaches_the_sink_delta_by_delta_with_the_usage() {
    let stub = Stub::start(vec![Reply::event_stream(vec![
        start(),
        text_delta(0, "Hel"),
        text_delta(0, "lo, "),
        text_delta(0, "human."),
        event("contentBlockStop", json!({"contentBlockIndex": 0})),
        stop("end_turn"),
        metadata(
            json!({"inputTokens": 30, "outputTokens": 4, "totalTokens": 234,
                        "cacheReadInputTokens": 150, "cacheWriteInputTokens": 50}),
        ),
    ])])
    .await;
    let sink = Pieces::default();
    let reply = BedrockModel::new(&bedrock_sdk_config(&stub.url))
        .complete_streaming(&request(hello()), &sink)
        .await
        .unwrap();
    assert_eq!(sink.got(), ["Hel", "lo, ", "human."]);
    assert_eq!(reply.text.as_deref(), Some("Hello, human."));
    assert!(reply.tool_calls.is_empty());
    // Bedrock counts cache reads and writes apart from inputTokens; the port's input is the
    // whole prompt.
    assert_eq!(
        reply.usage,
        Some(Usage {
            input_tokens: 230,
            output_tokens: 4,
            cached_input_tokens: 150
        })
    );
    let sent = stub.only_post();
    assert_eq!(
        sent.path,
        "/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse-stream"
    );
}

#[tokio::test]
async fn converse_reports_usage_with_the_cache_counted_in() {
    let stub = Stub::start(vec![Reply::json(
        200,
        json!({
            "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 10, "outputTokens": 2, "totalTokens": 112,
                      "cacheReadInputTokens": 100},
            "metrics": {"latencyMs": 42}
        }),
    )])
    .await;
    let reply = BedrockModel::new(&bedrock_sdk_config(&stub.url))
        .complete(&request(hello()))
        .await
        .unwrap();
    assert_eq!(
        reply.usage,
        Some(Usage {
            input_tokens: 110,
            output_tokens: 2,
            cached_input_tokens: 100
        })
    );
}

#[tokio::test]
async fn streamed_tool_uses_are_assembled_from_their_input_pieces() {
    let stub = Stub::start(vec![Reply::event_stream(vec![
        start(),
        text_delta(0, "Let me look."),
        event("contentBlockStop", json!({"contentBlockIndex": 0})),
        event(
            "contentBlockStart",
            json!({"contentBlockIndex": 1,
                   "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "create_plan"}}}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "{\"steps\": [{\"na"}}}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "me\": \"Look\"}]}"}}}),
        ),
        event("contentBlockStop", json!({"contentBlockIndex": 1})),
        event(
            "contentBlockStart",
            json!({"contentBlockIndex": 2,
                   "start": {"toolUse": {"toolUseId": "tooluse_2", "name": "list_skills"}}}),
        ),
        event("contentBlockStop", json!({"contentBlockIndex": 2})),
        stop("tool_use"),
        metadata(json!({"inputTokens": 50, "outputTokens": 20, "totalTokens": 70})),
    ])])
    .await;
    let sink = Pieces::default();
    let reply = BedrockModel::new(&bedrock_sdk_config(&stub.url))
        .complete_streaming(&request(hello()), &sink)
        .await
        .unwrap();
    assert_eq!(sink.got(), ["Let me look."]);
    assert_eq!(reply.text.as_deref(), Some("Let me look."));
    let calls: Vec<(&str, &str, &Value)> = reply
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), &c.arguments))
        .collect();
    assert_eq!(
        calls,
        [
            (
                "tooluse_1",
                "create_plan",
                &json!({"steps": [{"name": "Look"}]})
            ),
            ("tooluse_2", "list_skills", &json!({})),
        ]
    );
    assert_eq!(reply.usage.unwrap().output_tokens, 20);
}

#[tokio::test]
async fn the_stream_is_asked_for_like_converse_with_the_same_thinking_rules() {
    let stub = Stub::start(vec![Reply::event_stream(vec![
        start(),
        text_delta(0, "ok"),
        stop("end_turn"),
    ])])
    .await;
    let model = BedrockModel::new(&bedrock_sdk_config(&stub.url));
    let mut first = request(hello());
    first.effort = Some(Effort::Medium);
    model
        .complete_streaming(&first, &Pieces::default())
        .await
        .unwrap();
    let body = stub.requests()[0].json();
    assert_eq!(
        body["additionalModelRequestFields"],
        json!({"thinking": {"type": "enabled", "budget_tokens": 4096}})
    );
    assert_eq!(body["inferenceConfig"], json!({"maxTokens": 8192}));
    assert_eq!(
        body["system"],
        json!([{"text": "You are a helpful agent."}])
    );
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"text": "Hello?"}]}])
    );

    // Inside a tool loop: no thinking, as with Converse.
    let mut in_loop = request(vec![
        Turn::User { text: "Go.".into() },
        Turn::Assistant {
            text: None,
            tool_calls: vec![models::ToolCall {
                id: "tooluse_1".into(),
                name: "list_skills".into(),
                arguments: json!({}),
            }],
        },
        Turn::ToolResults {
            results: vec![models::ToolResult {
                call_id: "tooluse_1".into(),
                name: "list_skills".into(),
                content: "[]".into(),
                is_error: false,
            }],
        },
    ]);
    in_loop.effort = Some(Effort::High);
    model
        .complete_streaming(&in_loop, &Pieces::default())
        .await
        .unwrap();
    let body = stub.requests()[1].json();
    assert!(body.get("additionalModelRequestFields").is_none(), "{body}");
}

#[tokio::test]
async fn an_input_too_long_is_a_context_overflow_streamed_or_not() {
    let too_long = || {
        Reply::json(
            400,
            json!({"message": "Input is too long for requested model."}),
        )
        .header("x-amzn-errortype", "ValidationException")
    };
    let stub = Stub::start(vec![too_long()]).await;
    let models = Models::new(RetryPolicy::quick(3)).with(
        ProviderKind::Bedrock,
        Arc::new(BedrockModel::new(&bedrock_sdk_config(&stub.url))),
    );
    let plain = models.complete(&request(hello())).await.unwrap_err();
    assert_eq!(
        plain,
        ModelError::ContextOverflow(
            "ValidationException: Input is too long for requested model.".into()
        )
    );
    let streamed = models
        .complete_streaming(&request(hello()), &Pieces::default())
        .await
        .unwrap_err();
    assert!(
        matches!(streamed, ModelError::ContextOverflow(_)),
        "{streamed:?}"
    );
    assert_eq!(stub.count(), 2, "not retried");
}

#[tokio::test]
async fn exceptions_in_the_stream_and_a_stream_cut_short_are_classified() {
    for (frames, expected) in [
        (
            vec![
                start(),
                exception("throttlingException", "Too many tokens, slow down"),
            ],
            "throttled",
        ),
        (
            vec![
                start(),
                text_delta(0, "partial"),
                exception("modelStreamErrorException", "the model stopped"),
            ],
            "unavailable",
        ),
        (
            vec![
                start(),
                exception(
                    "validationException",
                    "prompt is too long: 210000 tokens > 200000 maximum",
                ),
            ],
            "context_overflow",
        ),
        // No messageStop: the answer is incomplete.
        (vec![start(), text_delta(0, "partial")], "unavailable"),
    ] {
        let stub = Stub::start(vec![Reply::event_stream(frames)]).await;
        let error = BedrockModel::new(&bedrock_sdk_config(&stub.url))
            .complete_streaming(&request(hello()), &Pieces::default())
            .await
            .unwrap_err();
        assert_eq!(error.class(), expected, "{error:?}");
    }
}

#[tokio::test]
async fn a_role_without_stream_permission_falls_back_to_converse() {
    let stub = Stub::start(vec![
        Reply::json(403, json!({"message": "User is not authorized to perform: bedrock:InvokeModelWithResponseStream"}))
            .header("x-amzn-errortype", "AccessDeniedException"),
        Reply::json(
            200,
            json!({
                "output": {"message": {"role": "assistant", "content": [{"text": "whole"}]}},
                "stopReason": "end_turn",
                "usage": {"inputTokens": 10, "outputTokens": 1, "totalTokens": 11}
            }),
        ),
    ])
    .await;
    let model = BedrockModel::new(&bedrock_sdk_config(&stub.url));
    for _ in 0..2 {
        let sink = Pieces::default();
        let reply = model
            .complete_streaming(&request(hello()), &sink)
            .await
            .unwrap();
        assert_eq!(reply.text.as_deref(), Some("whole"));
        assert_eq!(sink.got(), ["whole"]);
    }
    let paths: Vec<String> = stub.requests().into_iter().map(|r| r.path).collect();
    let model_path = "/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0";
    assert_eq!(
        paths,
        [
            format!("{model_path}/converse-stream"),
            format!("{model_path}/converse"),
            // Remembered: no second try of the stream.
            format!("{model_path}/converse"),
        ]
    );
}
