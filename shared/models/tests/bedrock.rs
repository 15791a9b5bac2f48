//! The Bedrock provider against a stub speaking the Converse REST shape on 127.0.0.1
//! (`POST /model/{modelId}/converse`, JSON in and out, errors named by `x-amzn-errortype`):
//! the real SDK client serializes, signs (static test credentials) and parses.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use aws_config::SdkConfig;
use common::{Recorded, Reply, Stub, closed_url, each_is_an_invalid_reply, hello, request_to};
use models::{
    BedrockModel, Model, ModelError, ModelReply, ModelRequest, Models, RetryPolicy, ToolCall,
    ToolDefinition, ToolResult, Turn, Usage,
};
use serde_json::{Value, json};
use task_core::commands::ProviderKind;
use task_core::extension::Effort;

const CLAUDE: &str = "us.anthropic.claude-sonnet-4-20250514-v1:0";
const LLAMA: &str = "meta.llama3-1-70b-instruct-v1:0";

fn sdk_config(endpoint: &str) -> SdkConfig {
    common::bedrock_sdk_config(endpoint)
}

fn request(settings: Value, turns: Vec<Turn>) -> ModelRequest {
    request_to("claude", ProviderKind::Bedrock, settings, turns)
}

/// One call through the provider alone (the SDK's retries are off) to `endpoint`.
async fn call(endpoint: &str) -> Result<ModelReply, ModelError> {
    BedrockModel::new(&sdk_config(endpoint))
        .complete(&request(json!({"model_id": CLAUDE}), hello()))
        .await
}

/// One call through `Models`, which makes `attempts` calls in all while they fail transiently.
async fn through_models(attempts: u32, endpoint: &str) -> Result<ModelReply, ModelError> {
    Models::new(RetryPolicy::quick(attempts))
        .with(
            ProviderKind::Bedrock,
            Arc::new(BedrockModel::new(&sdk_config(endpoint))),
        )
        .complete(&request(json!({"model_id": CLAUDE}), hello()))
        .await
}

/// The error of one call to a stub that answers `reply`.
async fn answered(reply: Reply) -> ModelError {
    let stub = Stub::start(vec![reply]).await;
    call(&stub.url).await.unwrap_err()
}

fn converse(content: Value, stop_reason: &str) -> Reply {
    Reply::json(
        200,
        json!({
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": stop_reason,
            "usage": {"inputTokens": 12, "outputTokens": 5, "totalTokens": 17},
            "metrics": {"latencyMs": 42}
        }),
    )
}

fn error(status: u16, code: &str, message: &str) -> Reply {
    Reply::json(status, json!({"message": message})).header("x-amzn-errortype", code)
}

/// The SigV4 credential scope of a request: `<key>/<date>/<region>/<service>/aws4_request`.
fn credential_scope(sent: &Recorded) -> (String, String) {
    let auth = sent.header("authorization").expect("signed");
    assert!(auth.starts_with("AWS4-HMAC-SHA256 "), "{auth}");
    let credential = auth
        .split("Credential=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .expect("a credential");
    let parts: Vec<&str> = credential.split('/').collect();
    assert_eq!(parts[0], "AKIDTESTONLY");
    (parts[2].to_owned(), parts[3].to_owned())
}

#[tokio::test]
async fn a_text_reply_is_the_output_messages_text() {
    let stub = Stub::start(vec![converse(
        json!([{"text": "Hello from Bedrock."}]),
        "end_turn",
    )])
    .await;
    let reply = call(&stub.url).await.unwrap();
    assert_eq!(
        reply,
        ModelReply {
            usage: Some(Usage {
                input_tokens: 12,
                output_tokens: 5,
                cached_input_tokens: 0
            }),
            ..ModelReply::text("Hello from Bedrock.")
        }
    );

    let sent = stub.only_post();
    assert_eq!(
        sent.path,
        "/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse"
    );
    assert_eq!(
        credential_scope(&sent),
        ("us-east-1".to_owned(), "bedrock".to_owned())
    );
    assert_eq!(
        sent.json(),
        json!({
            "messages": [{"role": "user", "content": [{"text": "Hello?"}]}],
            "system": [{"text": "You are a helpful agent."}],
            "inferenceConfig": {"maxTokens": 4096}
        })
    );
}

#[tokio::test]
async fn tool_uses_are_parsed_with_their_ids_names_and_inputs() {
    let stub = Stub::start(vec![converse(
        json!([
            {"reasoningContent": {"reasoningText": {"text": "Let me think.", "signature": "c2ln"}}},
            {"text": "I will plan first."},
            {"toolUse": {"toolUseId": "tooluse_plan", "name": "create_plan",
                         "input": {"steps": [{"name": "Look", "description": "around", "depends_on": []}],
                                   "weight": -2, "ratio": 0.5, "final": true, "note": null}}},
            {"toolUse": {"toolUseId": "tooluse_skills", "name": "list_skills", "input": {}}}
        ]),
        "tool_use",
    )])
    .await;
    let reply = call(&stub.url).await.unwrap();
    assert_eq!(
        reply,
        ModelReply {
            text: Some("I will plan first.".into()),
            tool_calls: vec![
                ToolCall {
                    id: "tooluse_plan".into(),
                    name: "create_plan".into(),
                    arguments: json!({
                        "steps": [{"name": "Look", "description": "around", "depends_on": []}],
                        "weight": -2, "ratio": 0.5, "final": true, "note": null
                    }),
                },
                ToolCall {
                    id: "tooluse_skills".into(),
                    name: "list_skills".into(),
                    arguments: json!({}),
                },
            ],
            usage: Some(Usage {
                input_tokens: 12,
                output_tokens: 5,
                cached_input_tokens: 0
            }),
        }
    );
}

fn tool_loop() -> Vec<Turn> {
    vec![
        Turn::User {
            text: "Plan the refund.".into(),
        },
        Turn::Assistant {
            text: Some("Planning.".into()),
            tool_calls: vec![
                ToolCall {
                    id: "tooluse_1".into(),
                    name: "create_plan".into(),
                    arguments: json!({"steps": [{"name": "Look"}]}),
                },
                ToolCall {
                    id: "tooluse_2".into(),
                    name: "load_skill".into(),
                    // Not JSON (kept as a string by the OpenAI provider, before a `/model`).
                    arguments: Value::String("{\"name\": \"refunds\"".into()),
                },
            ],
        },
        Turn::ToolResults {
            results: vec![
                ToolResult {
                    call_id: "tooluse_1".into(),
                    name: "create_plan".into(),
                    content: "plan created".into(),
                    is_error: false,
                },
                ToolResult {
                    call_id: "tooluse_2".into(),
                    name: "load_skill".into(),
                    content: "[skill.invalid] no such skill".into(),
                    is_error: true,
                },
            ],
        },
        // A note the runtime adds after the results: the same user message.
        Turn::User {
            text: "Sub-task 1 completed.".into(),
        },
    ]
}

fn tools() -> Vec<ToolDefinition> {
    vec![ToolDefinition {
        name: "create_plan".into(),
        description: "Replace the plan.".into(),
        input_schema: json!({
            "type": "object",
            "properties": {"steps": {"type": "array", "items": {"type": "object"}}},
            "required": ["steps"]
        }),
    }]
}

#[tokio::test]
async fn the_request_maps_system_tools_and_tool_results() {
    let stub = Stub::start(vec![converse(json!([{"text": "ok"}]), "end_turn")]).await;
    let model = BedrockModel::new(&sdk_config(&stub.url));
    let mut call = request(json!({"model_id": CLAUDE, "max_tokens": 2000}), tool_loop());
    call.tools = tools().into();
    // Inside a tool loop: no thinking (the port does not keep the thinking blocks Claude
    // would require on the last assistant turn).
    call.effort = Some(Effort::High);
    model.complete(&call).await.unwrap();

    let body = stub.requests()[0].json();
    assert_eq!(
        body,
        json!({
            "system": [{"text": "You are a helpful agent."}],
            "messages": [
                {"role": "user", "content": [{"text": "Plan the refund."}]},
                {"role": "assistant", "content": [
                    {"text": "Planning."},
                    {"toolUse": {"toolUseId": "tooluse_1", "name": "create_plan",
                                 "input": {"steps": [{"name": "Look"}]}}},
                    {"toolUse": {"toolUseId": "tooluse_2", "name": "load_skill",
                                 "input": {"arguments": "{\"name\": \"refunds\""}}}
                ]},
                {"role": "user", "content": [
                    {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "plan created"}]}},
                    {"toolResult": {"toolUseId": "tooluse_2", "status": "error",
                                    "content": [{"text": "[skill.invalid] no such skill"}]}},
                    {"text": "Sub-task 1 completed."}
                ]}
            ],
            "toolConfig": {"tools": [{"toolSpec": {
                "name": "create_plan",
                "description": "Replace the plan.",
                "inputSchema": {"json": {
                    "type": "object",
                    "properties": {"steps": {"type": "array", "items": {"type": "object"}}},
                    "required": ["steps"]
                }}
            }}]},
            "inferenceConfig": {"maxTokens": 2000}
        })
    );
}

#[tokio::test]
async fn effort_is_claudes_thinking_budget_and_nothing_for_other_models() {
    let stub = Stub::start(vec![converse(json!([{"text": "ok"}]), "end_turn")]).await;
    let model = BedrockModel::new(&sdk_config(&stub.url));
    let conversation = vec![
        Turn::User { text: "Hi.".into() },
        Turn::Assistant {
            text: Some("Hello.".into()),
            tool_calls: vec![],
        },
        Turn::User {
            text: "Think hard.".into(),
        },
    ];
    for (effort, budget, max_tokens) in [
        (Effort::High, 16384, 4096 + 16384),
        (Effort::Medium, 4096, 4096 + 4096),
        (Effort::Low, 1024, 4096),
    ] {
        let mut call = request(json!({"model_id": CLAUDE}), conversation.clone());
        call.effort = Some(effort);
        model.complete(&call).await.unwrap();
        let body = stub.requests().last().unwrap().json();
        assert_eq!(
            body["additionalModelRequestFields"],
            json!({"thinking": {"type": "enabled", "budget_tokens": budget}}),
            "{effort:?}"
        );
        assert_eq!(
            body["inferenceConfig"],
            json!({"maxTokens": max_tokens}),
            "{effort:?}"
        );
    }

    // A model without extended thinking: the effort is not sent, and toolResult.status
    // (which such models refuse) neither.
    let mut call = request(json!({"model_id": LLAMA}), tool_loop());
    call.effort = Some(Effort::High);
    call.tools = tools().into();
    model.complete(&call).await.unwrap();
    let body = stub.requests().last().unwrap().json();
    assert!(body.get("additionalModelRequestFields").is_none(), "{body}");
    assert_eq!(body["inferenceConfig"], json!({"maxTokens": 4096}));
    assert_eq!(
        body["messages"][2]["content"][1],
        json!({"toolResult": {"toolUseId": "tooluse_2",
                              "content": [{"text": "[skill.invalid] no such skill"}]}})
    );

    // An older Claude, and no effort at all: nothing either.
    for (model_id, effort) in [
        (
            "anthropic.claude-3-5-sonnet-20240620-v1:0",
            Some(Effort::High),
        ),
        (CLAUDE, None),
    ] {
        let mut call = request(json!({"model_id": model_id}), conversation.clone());
        call.effort = effort;
        model.complete(&call).await.unwrap();
        let body = stub.requests().last().unwrap().json();
        assert!(
            body.get("additionalModelRequestFields").is_none(),
            "{model_id}: {body}"
        );
    }
}

#[tokio::test]
async fn the_region_setting_moves_the_calls_signature() {
    let stub = Stub::start(vec![converse(json!([{"text": "ok"}]), "end_turn")]).await;
    let model = BedrockModel::new(&sdk_config(&stub.url));
    model
        .complete(&request(
            json!({"model_id": CLAUDE, "region": "eu-west-3"}),
            hello(),
        ))
        .await
        .unwrap();
    model
        .complete(&request(json!({"model_id": CLAUDE}), hello()))
        .await
        .unwrap();
    let sent = stub.requests();
    assert_eq!(credential_scope(&sent[0]).0, "eu-west-3");
    assert_eq!(credential_scope(&sent[1]).0, "us-east-1", "per call only");
}

#[tokio::test]
async fn throttling_is_reported_once_and_retried_by_models() {
    let throttled = error(
        429,
        "ThrottlingException",
        "Too many tokens, please wait before trying again.",
    );
    // Alone: one request (the SDK's own retries are off), Throttled.
    let stub = Stub::start(vec![throttled.clone()]).await;
    let err = call(&stub.url).await.unwrap_err();
    assert_eq!(
        err,
        ModelError::Throttled(
            "ThrottlingException: Too many tokens, please wait before trying again.".into()
        )
    );
    assert_eq!(stub.count(), 1);

    // Through Models: retried, then the answer.
    let stub = Stub::start(vec![
        throttled,
        converse(json!([{"text": "after the wait"}]), "end_turn"),
    ])
    .await;
    let reply = through_models(4, &stub.url).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("after the wait"));
    assert_eq!(stub.count(), 2);

    // A quota error (not modelled by the SDK for Converse) is throttling too.
    let err = answered(error(
        400,
        "ServiceQuotaExceededException",
        "Your request exceeds the service quota for your account.",
    ))
    .await;
    assert!(matches!(err, ModelError::Throttled(_)), "{err:?}");
}

#[tokio::test]
async fn refusals_are_rejected_with_the_message_and_not_retried() {
    let stub = Stub::start(vec![error(
        400,
        "ValidationException",
        "The model returned the following errors: messages: roles must alternate",
    )])
    .await;
    let err = through_models(4, &stub.url).await.unwrap_err();
    assert_eq!(
        err,
        ModelError::Rejected(
            "ValidationException: The model returned the following errors: messages: roles must alternate"
                .into()
        )
    );
    assert_eq!(stub.count(), 1);

    for (status, code) in [
        (403, "AccessDeniedException"),
        (404, "ResourceNotFoundException"),
        (400, "SomethingNewException"),
    ] {
        let err = answered(error(status, code, "no")).await;
        assert_eq!(err, ModelError::Rejected(format!("{code}: no")));
    }
}

#[tokio::test]
async fn service_failures_and_connection_errors_are_unavailable_and_timeouts_timed_out() {
    for (status, code) in [
        (503, "ServiceUnavailableException"),
        (500, "InternalServerException"),
        (429, "ModelNotReadyException"),
        (502, "SomethingNewException"),
    ] {
        let err = answered(error(status, code, "try later")).await;
        assert_eq!(err, ModelError::Unavailable(format!("{code}: try later")));
        assert_eq!(err.public_message(), "the model provider is unavailable");
    }
    for (status, code) in [
        (408, "ModelTimeoutException"),
        (504, "SomethingNewException"),
    ] {
        let err = answered(error(status, code, "too slow")).await;
        assert_eq!(err, ModelError::TimedOut(format!("{code}: too slow")));
        assert_eq!(err.public_message(), "the model provider timed out");
    }

    let err = call(&closed_url().await).await.unwrap_err();
    assert!(matches!(err, ModelError::Unavailable(_)), "{err:?}");

    let stub = Stub::start(vec![
        converse(json!([{"text": "too late"}]), "end_turn").after(Duration::from_secs(5)),
    ])
    .await;
    let started = std::time::Instant::now();
    let err = BedrockModel::new(&sdk_config(&stub.url))
        .complete(&request(
            json!({"model_id": CLAUDE, "timeout_secs": 0.3}),
            hello(),
        ))
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::TimedOut(_)), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "timed out early"
    );
}

#[tokio::test]
async fn a_reply_without_an_output_message_is_invalid() {
    let err = answered(Reply::json(
        200,
        json!({
            "stopReason": "end_turn",
            "usage": {"inputTokens": 1, "outputTokens": 0, "totalTokens": 1},
            "metrics": {"latencyMs": 1}
        }),
    ))
    .await;
    assert!(matches!(err, ModelError::InvalidReply(_)), "{err:?}");

    each_is_an_invalid_reply(
        &[
            "not json",
            r#"{"output": {"message": {"role": "assistant", "content": 7}}}"#,
        ],
        answered,
    )
    .await;
}

#[tokio::test]
async fn a_missing_model_id_is_a_misconfiguration_and_nothing_is_sent() {
    let stub = Stub::start(vec![converse(json!([{"text": "ok"}]), "end_turn")]).await;
    let model = BedrockModel::new(&sdk_config(&stub.url));
    for settings in [
        json!({}),
        json!({"model_id": ""}),
        json!({"model_id": CLAUDE, "max_tokens": 0}),
    ] {
        let err = model
            .complete(&request(settings.clone(), hello()))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ModelError::Misconfigured(_)),
            "{settings}: {err:?}"
        );
    }
    assert_eq!(
        model
            .complete(&request(json!({}), hello()))
            .await
            .unwrap_err(),
        ModelError::Misconfigured(
            "model \"claude\": the bedrock provider needs the setting \"model_id\"".into()
        )
    );
    assert_eq!(stub.count(), 0);
}

#[tokio::test]
async fn models_with_network_providers_serves_bedrock_entries() {
    let stub = Stub::start(vec![converse(json!([{"text": "routed"}]), "end_turn")]).await;
    let models = Models::new(RetryPolicy::quick(1))
        .with_network_providers(&sdk_config(&stub.url))
        .unwrap();
    let reply = models
        .complete(&request(json!({"model_id": CLAUDE}), hello()))
        .await
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some("routed"));
}
