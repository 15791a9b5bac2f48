//! The model a task uses, and its reasoning effort, reach the provider on every turn:
//! `/model` and `/effort` on a task change what an OpenAI-compatible endpoint (a stub on
//! 127.0.0.1 speaking chat completions) receives. A provider that keeps failing fails the
//! task with the class of the failure, after its retries (`provider_errors.rs`: and nothing
//! of the provider's address or answer).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use serde_json::{Value, json};

/// A chat-completions stub: records each request body; answers with the text
/// `reply to <model>`, or with `status` when it is set.
struct Stub {
    base: String,
    requests: Arc<Mutex<Vec<Value>>>,
    serve: tokio::task::JoinHandle<()>,
}

impl Stub {
    async fn start(status: Option<u16>) -> Self {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        let router = axum::Router::new().route(
            "/v1/chat/completions",
            axum::routing::post(move |body: axum::Json<Value>| {
                let log = log.clone();
                async move {
                    let model = body["model"].as_str().unwrap_or("?").to_owned();
                    log.lock().unwrap().push(body.0);
                    match status {
                        Some(code) => (
                            axum::http::StatusCode::from_u16(code).unwrap(),
                            axum::Json(json!({"error": {"message": "the stub is down"}})),
                        ),
                        None => (
                            axum::http::StatusCode::OK,
                            axum::Json(json!({
                                "id": "c-1", "object": "chat.completion", "model": model,
                                "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": format!("reply to {model}")}}]
                            })),
                        ),
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        let serve = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self {
            base,
            requests,
            serve,
        }
    }

    fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.serve.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_and_effort_commands_change_what_the_provider_receives() {
    let stub = Stub::start(None).await;
    let (server, _dir) = server_with_catalog(json!({
        "default_model": "fast",
        "models": [
            {"id": "fast", "provider": "openai", "settings": {"base_url": stub.base, "model": "small-model"}},
            {"id": "deep", "provider": "openai", "default_effort": "medium",
             "settings": {"base_url": stub.base, "model": "large-model"}}
        ]
    }));
    let api = server.client().api(Binding::JsonRpc);
    let task = api.send_text("alice", "hello").await;
    assert_eq!(status_text(&task), "reply to small-model");

    api.follow_up(&task, "alice", "/model deep").await;
    let second = api.follow_up(&task, "alice", "and now?").await;
    assert_eq!(status_text(&second), "reply to large-model");

    let set = api.follow_up(&task, "alice", "/effort high").await;
    assert_eq!(status_text(&set), "reasoning effort set to high");
    let third = api.follow_up(&task, "alice", "think harder").await;
    assert_eq!(status_text(&third), "reply to large-model");

    let requests = stub.requests();
    assert_eq!(requests.len(), 3, "commands do not call the model");
    assert_eq!(requests[0]["model"], "small-model");
    assert!(
        requests[0].get("reasoning_effort").is_none(),
        "{}",
        requests[0]
    );
    assert_eq!(requests[1]["model"], "large-model");
    assert_eq!(
        requests[1]["reasoning_effort"], "medium",
        "the model's default effort"
    );
    assert_eq!(requests[2]["reasoning_effort"], "high");
    // Every turn carries the system prompt, the conversation so far and the twelve tools.
    let last = &requests[2];
    assert_eq!(last["messages"][0]["role"], "system");
    assert!(
        last["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Goal: hello")
    );
    let users: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["hello", "and now?", "think harder"]);
    assert_eq!(last["tools"].as_array().map(Vec::len), Some(12));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_keeps_failing_is_retried_until_the_deadline_then_the_conversation_waits() {
    let stub = Stub::start(Some(503)).await;
    let dir = scratch_dir("catalog-");
    let path = dir.path().join("catalog.json");
    let catalog = json!({
        "default_model": "down",
        "models": [{"id": "down", "provider": "openai", "settings": {"base_url": stub.base}}]
    });
    std::fs::write(&path, catalog.to_string()).expect("catalog");
    let server = Server::builder()
        .arg("--model-catalog")
        .arg(path.to_str().expect("utf-8"))
        .arg("--model-retry-deadline-secs")
        .arg("2")
        .start();
    let api = server.client().api(Binding::Rest);
    let task = api.send_text("alice", "hello").await;
    assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED", "{task}");
    assert_eq!(
        status_text(&task),
        "the model provider is unavailable; your message is kept: send another message to try again",
        "{task}"
    );
    // 0.5 s, then 1 s, then past the deadline: the first call and two retries at least.
    assert!(stub.requests().len() >= 3, "{}", stub.requests().len());
}
