//! The OpenAI-compatible provider against a stub chat-completions server on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Reply, Stub, closed_url, each_is_an_invalid_reply, hello, request_to};
use models::{
    Model, ModelError, ModelReply, ModelRequest, Models, OpenAiModel, RetryPolicy, ToolCall,
    ToolDefinition, ToolResult, Turn, Usage,
};
use serde_json::{Value, json};
use task_core::commands::ProviderKind;
use task_core::extension::Effort;

fn request(settings: Value, turns: Vec<Turn>) -> ModelRequest {
    request_to("gpt-test", ProviderKind::Openai, settings, turns)
}

/// One call through the provider alone (it does not retry) to `base_url`.
async fn call(base_url: &str) -> Result<ModelReply, ModelError> {
    with_keys(&[])
        .complete(&request(json!({"base_url": base_url}), hello()))
        .await
}

/// One call through `Models`, which makes `attempts` calls in all while they fail transiently.
async fn through_models(attempts: u32, base_url: &str) -> Result<ModelReply, ModelError> {
    Models::new(RetryPolicy::quick(attempts))
        .with(ProviderKind::Openai, Arc::new(with_keys(&[])))
        .complete(&request(json!({"base_url": base_url}), hello()))
        .await
}

/// The error of one call to a stub that answers `reply`.
async fn answered(reply: Reply) -> ModelError {
    let stub = Stub::start(vec![reply]).await;
    call(&stub.url).await.unwrap_err()
}

fn completion(message: Value) -> Reply {
    Reply::json(
        200,
        json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-test",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        }),
    )
}

/// A provider whose keys come from this map of variable names, not the environment.
fn with_keys(keys: &[(&'static str, &'static str)]) -> OpenAiModel {
    let keys: Vec<(&str, &str)> = keys.to_vec();
    OpenAiModel::with_key_lookup(move |name| {
        keys.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, k)| k.to_string())
    })
    .unwrap()
}

#[tokio::test]
async fn a_text_reply_is_the_message_content() {
    let stub = Stub::start(vec![completion(
        json!({"role": "assistant", "content": "Hello, human."}),
    )])
    .await;
    let reply = call(&stub.url).await.unwrap();
    assert_eq!(
        reply,
        ModelReply {
            usage: Some(Usage {
                input_tokens: 10,
                output_tokens: 3,
                cached_input_tokens: 0
            }),
            ..ModelReply::text("Hello, human.")
        }
    );
    let sent = stub.only_post();
    assert_eq!(sent.path, "/chat/completions");
    assert_eq!(sent.header("content-type"), Some("application/json"));
    // No key under OPENAI_API_KEY: no Authorization header (what Ollama accepts).
    assert_eq!(sent.header("authorization"), None);
    // The model name defaults to the catalog id.
    assert_eq!(sent.json()["model"], "gpt-test");
}

#[tokio::test]
async fn tool_calls_are_parsed_with_their_ids_and_bad_arguments_kept_as_text() {
    let stub = Stub::start(vec![completion(json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [
            {"id": "call_plan", "type": "function",
             "function": {"name": "create_plan",
                          "arguments": "{\"steps\": [{\"name\": \"Look\", \"description\": \"around\"}]}"}},
            {"id": "call_skill", "type": "function",
             "function": {"name": "load_skill", "arguments": "{\"name\": \"refunds\""}}
        ]
    }))])
    .await;
    let reply = call(&stub.url).await.unwrap();
    assert_eq!(reply.text, None);
    assert_eq!(
        reply.tool_calls,
        vec![
            ToolCall {
                id: "call_plan".into(),
                name: "create_plan".into(),
                arguments: json!({"steps": [{"name": "Look", "description": "around"}]}),
            },
            ToolCall {
                id: "call_skill".into(),
                name: "load_skill".into(),
                // Not JSON: passed on as a string, for the loop's schema check to refuse.
                arguments: Value::String("{\"name\": \"refunds\"".into()),
            },
        ]
    );
}

#[tokio::test]
async fn the_request_carries_the_conversation_tools_effort_and_key() {
    let stub = Stub::start(vec![completion(
        json!({"role": "assistant", "content": "ok"}),
    )])
    .await;
    let looked_up = Arc::new(Mutex::new(Vec::new()));
    let names = looked_up.clone();
    let model = OpenAiModel::with_key_lookup(move |name| {
        names.lock().unwrap().push(name.to_owned());
        (name == "TINY_HARNESS_TEST_KEY_REQUEST").then(|| "sk-test-123".to_owned())
    })
    .unwrap();
    let settings = json!({
        "base_url": format!("{}/v1/", stub.url),
        "model": "gpt-4.1-mini",
        "api_key_env": "TINY_HARNESS_TEST_KEY_REQUEST",
        "max_tokens": 1000,
    });
    let turns = vec![
        Turn::User {
            text: "Plan the refund.".into(),
        },
        Turn::Assistant {
            text: Some("Planning.".into()),
            tool_calls: vec![
                ToolCall {
                    id: "call_1".into(),
                    name: "create_plan".into(),
                    arguments: json!({"steps": []}),
                },
                ToolCall {
                    id: "call_2".into(),
                    name: "list_skills".into(),
                    arguments: json!({}),
                },
            ],
        },
        Turn::ToolResults {
            results: vec![
                ToolResult {
                    call_id: "call_1".into(),
                    name: "create_plan".into(),
                    content: "plan created".into(),
                    is_error: false,
                },
                ToolResult {
                    call_id: "call_2".into(),
                    name: "list_skills".into(),
                    content: "[skill.invalid] no skills".into(),
                    is_error: true,
                },
            ],
        },
        Turn::Assistant {
            text: None,
            tool_calls: vec![ToolCall {
                id: "call_3".into(),
                name: "list_skills".into(),
                // What the model sent last time, not JSON: it gets it back as it wrote it.
                arguments: Value::String("{\"oops\"".into()),
            }],
        },
        Turn::ToolResults {
            results: vec![ToolResult {
                call_id: "call_3".into(),
                name: "list_skills".into(),
                content: "[]".into(),
                is_error: false,
            }],
        },
    ];
    let schema = json!({"type": "object", "properties": {"steps": {"type": "array"}}, "required": ["steps"]});
    let mut with_effort = request(settings.clone(), turns);
    with_effort.effort = Some(Effort::High);
    with_effort.tools = vec![ToolDefinition {
        name: "create_plan".into(),
        description: "Replace the plan.".into(),
        input_schema: schema.clone(),
    }]
    .into();
    model.complete(&with_effort).await.unwrap();

    let sent = stub.requests();
    assert_eq!(sent[0].path, "/v1/chat/completions");
    assert_eq!(sent[0].header("authorization"), Some("Bearer sk-test-123"));
    assert_eq!(
        sent[0].json(),
        json!({
            "model": "gpt-4.1-mini",
            "messages": [
                {"role": "system", "content": "You are a helpful agent."},
                {"role": "user", "content": "Plan the refund."},
                {"role": "assistant", "content": "Planning.", "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "create_plan", "arguments": "{\"steps\":[]}"}},
                    {"id": "call_2", "type": "function",
                     "function": {"name": "list_skills", "arguments": "{}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "plan created"},
                {"role": "tool", "tool_call_id": "call_2", "content": "[skill.invalid] no skills"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_3", "type": "function",
                     "function": {"name": "list_skills", "arguments": "{\"oops\""}}
                ]},
                {"role": "tool", "tool_call_id": "call_3", "content": "[]"}
            ],
            "tools": [{"type": "function", "function": {
                "name": "create_plan", "description": "Replace the plan.", "parameters": schema
            }}],
            "reasoning_effort": "high",
            "max_tokens": 1000
        })
    );

    // No effort: no reasoning_effort; no tools: no tools key; the key is looked up per call.
    let mut without = request(settings, hello());
    without.system = String::new();
    model.complete(&without).await.unwrap();
    let body = stub.requests()[1].json();
    assert!(body.get("reasoning_effort").is_none(), "{body}");
    assert!(body.get("tools").is_none(), "{body}");
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "Hello?"}])
    );
    assert_eq!(
        *looked_up.lock().unwrap(),
        vec![
            "TINY_HARNESS_TEST_KEY_REQUEST".to_owned(),
            "TINY_HARNESS_TEST_KEY_REQUEST".to_owned()
        ]
    );
}

#[tokio::test]
async fn the_default_provider_reads_the_key_from_the_environment() {
    // A variable cargo sets for every test process: reading it is what production does with
    // OPENAI_API_KEY (setting one here would need `unsafe`, which the workspace forbids).
    let expected = std::env::var("CARGO_PKG_NAME").unwrap();
    let stub = Stub::start(vec![completion(
        json!({"role": "assistant", "content": "ok"}),
    )])
    .await;
    let model = OpenAiModel::new().unwrap();
    for key_env in ["CARGO_PKG_NAME", "TINY_HARNESS_SURELY_UNSET_VARIABLE"] {
        model
            .complete(&request(
                json!({"base_url": stub.url, "api_key_env": key_env}),
                hello(),
            ))
            .await
            .unwrap();
    }
    let sent = stub.requests();
    assert_eq!(
        sent[0].header("authorization"),
        Some(format!("Bearer {expected}").as_str())
    );
    assert_eq!(sent[1].header("authorization"), None);
}

#[tokio::test]
async fn throttling_is_retried_by_models_until_it_succeeds() {
    let stub = Stub::start(vec![
        Reply::json(
            429,
            json!({"error": {"message": "Rate limit reached", "type": "requests"}}),
        )
        .header("retry-after", "30"),
        completion(json!({"role": "assistant", "content": "after the wait"})),
    ])
    .await;
    let reply = through_models(4, &stub.url).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("after the wait"));
    assert_eq!(stub.count(), 2, "one throttled call, one retry");

    // Alone, the provider reports the throttling.
    let err = answered(Reply::json(
        429,
        json!({"error": {"message": "Rate limit reached"}}),
    ))
    .await;
    assert_eq!(
        err,
        ModelError::Throttled("HTTP 429: Rate limit reached".into())
    );
}

#[tokio::test]
async fn server_errors_are_unavailable_after_the_retries() {
    let stub = Stub::start(vec![Reply::raw(500, "upstream exploded")]).await;
    let err = through_models(3, &stub.url).await.unwrap_err();
    assert_eq!(
        err,
        ModelError::Unavailable("HTTP 500: upstream exploded".into())
    );
    assert_eq!(stub.count(), 3, "every attempt reached the server");

    for status in [408, 504] {
        let err = answered(Reply::raw(status, "")).await;
        assert_eq!(
            err,
            ModelError::TimedOut(format!("HTTP {status}: (no message)"))
        );
    }
}

#[tokio::test]
async fn connection_failures_are_unavailable_and_timeouts_timed_out() {
    let err = call(&closed_url().await).await.unwrap_err();
    assert!(matches!(err, ModelError::Unavailable(_)), "{err:?}");

    let stub = Stub::start(vec![
        completion(json!({"role": "assistant", "content": "too late"}))
            .after(Duration::from_secs(5)),
    ])
    .await;
    let started = std::time::Instant::now();
    let err = with_keys(&[])
        .complete(&request(
            json!({"base_url": stub.url, "timeout_secs": 0.3}),
            hello(),
        ))
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::TimedOut(_)), "{err:?}");
    assert!(err.is_transient());
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "timed out early"
    );
}

/// What participants read of a failure names its class and nothing of where it happened.
#[tokio::test]
async fn the_public_message_of_a_failure_is_its_class_alone() {
    let secret = "see http://10.1.2.3:8443/internal/models?key=sk-live-123 for details";
    let cases = [
        (
            Reply::json(500, json!({"error": {"message": secret}})),
            "the model provider is unavailable",
        ),
        (
            Reply::raw(429, secret),
            "the model provider throttled the request",
        ),
        (
            Reply::raw(403, secret),
            "the model provider refused the request",
        ),
        (Reply::raw(504, secret), "the model provider timed out"),
        (
            Reply::raw(200, secret),
            "the model's answer could not be read",
        ),
    ];
    for (reply, public) in cases {
        let err = answered(reply).await;
        assert!(
            err.to_string().contains("10.1.2.3"),
            "the log keeps the details: {err}"
        );
        assert_eq!(err.public_message(), public, "{err:?}");
    }
    let closed = closed_url().await;
    let err = call(&closed).await.unwrap_err();
    assert!(
        err.to_string()
            .contains(closed.trim_start_matches("http://")),
        "{err}"
    );
    assert_eq!(err.public_message(), "the model provider is unavailable");
    let err = call("not a url").await.unwrap_err();
    assert_eq!(err.public_message(), "the model is misconfigured");
}

#[tokio::test]
async fn client_errors_are_rejected_with_the_providers_message_and_not_retried() {
    let stub = Stub::start(vec![Reply::json(
        400,
        json!({"error": {
            "message": "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
            "type": "invalid_request_error", "param": "reasoning_effort", "code": "unsupported_parameter"
        }}),
    )])
    .await;
    let err = through_models(4, &stub.url).await.unwrap_err();
    assert_eq!(
        err,
        ModelError::Rejected(
            "HTTP 400: Unsupported parameter: 'reasoning_effort' is not supported with this model."
                .into()
        )
    );
    assert_eq!(stub.count(), 1);

    // A long plain-text body is cut.
    let err = answered(Reply::raw(401, &"x".repeat(5000))).await;
    match err {
        ModelError::Rejected(message) => {
            assert!(message.starts_with("HTTP 401: xxx"), "{message}");
            assert!(message.chars().count() < 600, "{}", message.len());
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_success_that_is_not_a_completion_is_an_invalid_reply() {
    each_is_an_invalid_reply(
        &[
            "this is not json",
            r#"{"id": "x", "object": "chat.completion"}"#,
            r#"{"choices": []}"#,
            r#"{"choices": [{"message": {"content": 42}}]}"#,
            r#"{"choices": [{"message": {"tool_calls": [{"id": "c", "function": {}}]}}]}"#,
        ],
        answered,
    )
    .await;
}

#[tokio::test]
async fn unusable_settings_are_misconfigurations() {
    for settings in [
        json!({"base_url": 7}),
        json!({"max_tokens": "many"}),
        json!({"timeout_secs": -1}),
        json!({"base_url": "not a url"}),
    ] {
        let err = with_keys(&[])
            .complete(&request(settings.clone(), hello()))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ModelError::Misconfigured(_)),
            "{settings}: {err:?}"
        );
    }
}
