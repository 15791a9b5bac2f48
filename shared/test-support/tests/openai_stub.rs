//! The OpenAI stub itself, through plain HTTP: one test per behaviour.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{Value, json};
use test_support::openai_stub::{completion_tokens, prompt_tokens};
use test_support::{OpenAiStub, StubConfig, StubReply, poll};

fn hello(stream: bool) -> Value {
    let mut body = json!({
        "model": "stub-model",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hello there"},
        ],
        "tools": [{"type": "function", "function": {"name": "t", "description": "d", "parameters": {}}}],
    });
    if stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

async fn post(stub: &OpenAiStub, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/chat/completions", stub.base_url()))
        .json(body)
        .send()
        .await
        .unwrap()
}

/// The `data:` payloads of an SSE body, as JSON (`[DONE]` as a string).
async fn events(response: reqwest::Response) -> Vec<Value> {
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let text = response.text().await.unwrap();
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let data = e.strip_prefix("data: ").expect("a data line");
            serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.to_owned()))
        })
        .collect()
}

#[tokio::test]
async fn a_plain_call_is_echoed_with_its_usage() {
    let stub = OpenAiStub::start(StubConfig {
        cached_tokens: 2,
        ..StubConfig::default()
    })
    .await;
    let body = hello(false);
    let response = post(&stub, &body).await;
    assert_eq!(response.status(), 200);
    let reply: Value = response.json().await.unwrap();
    assert_eq!(reply["object"], "chat.completion");
    assert_eq!(
        reply["choices"][0]["message"]["content"],
        "echo: Hello there"
    );
    assert_eq!(reply["choices"][0]["finish_reason"], "stop");
    // "You are terse." (14) + "Hello there" (11) + the tools' JSON text, over 4.
    let tools = body["tools"].to_string().chars().count() as u64;
    let prompt = (14 + 11 + tools).div_ceil(4);
    assert_eq!(prompt_tokens(&body), prompt);
    let completion = completion_tokens(&StubReply::text("echo: Hello there"));
    assert_eq!(completion, 5);
    assert_eq!(
        reply["usage"],
        json!({"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5,
               "prompt_tokens_details": {"cached_tokens": 2}})
    );
    assert_eq!(stub.usage_reported(), (prompt, 5, 2));
    assert_eq!(stub.requests(), vec![body]);
    assert_eq!(stub.completions(), 1);
}

#[tokio::test]
async fn a_streamed_reply_comes_in_pieces_then_usage_then_done() {
    let stub = OpenAiStub::start(StubConfig {
        chunk_pieces: 3,
        piece_delay: Duration::from_millis(5),
        ..StubConfig::default()
    })
    .await;
    stub.push_reply(StubReply::text("abcdefgh"));
    let events = events(post(&stub, &hello(true)).await).await;
    let pieces: Vec<&str> = events
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(pieces, ["abc", "def", "gh"]);
    assert_eq!(events[0]["choices"][0]["delta"]["role"], "assistant");
    let n = events.len();
    assert_eq!(events[n - 3]["choices"][0]["finish_reason"], "stop");
    assert_eq!(events[n - 2]["choices"], json!([]));
    assert_eq!(events[n - 2]["usage"]["completion_tokens"], 2);
    assert_eq!(events[n - 1], "[DONE]");
    assert_eq!(stub.usage_reported().1, 2);

    // Without include_usage: no usage chunk, nothing counted.
    let mut body = hello(true);
    body.as_object_mut().unwrap().remove("stream_options");
    let events = events_of(&stub, &body).await;
    assert!(events.iter().all(|e| e.get("usage").is_none()));
    assert_eq!(stub.usage_reported().1, 2);
}

async fn events_of(stub: &OpenAiStub, body: &Value) -> Vec<Value> {
    events(post(stub, body).await).await
}

#[tokio::test]
async fn scripted_replies_come_first_and_tool_calls_stream_by_index() {
    let stub = OpenAiStub::start(StubConfig {
        chunk_pieces: 2,
        ..StubConfig::default()
    })
    .await;
    stub.push_reply(StubReply::ToolCalls(vec![
        ("create_plan".into(), json!({"steps": []})),
        ("list_skills".into(), json!({})),
    ]));
    stub.push_reply(StubReply::call("load_skill", json!({"name": "x"})));
    let events = events_of(&stub, &hello(true)).await;
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for event in &events {
        for delta in event["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let i = delta["index"].as_u64().unwrap() as usize;
            if i == calls.len() {
                calls.push(Default::default());
            }
            let call = &mut calls[i];
            call.0 += delta["id"].as_str().unwrap_or("");
            call.1 += delta["function"]["name"].as_str().unwrap_or("");
            call.2 += delta["function"]["arguments"].as_str().unwrap_or("");
        }
    }
    assert_eq!(calls[0].1, "create_plan");
    assert_eq!(calls[0].2, r#"{"steps":[]}"#);
    assert_eq!(calls[1].1, "list_skills");
    assert_eq!(calls[1].2, "{}");
    assert_ne!(calls[0].0, calls[1].0);
    let finish = &events[events.len() - 3];
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");

    let reply: Value = post(&stub, &hello(false)).await.json().await.unwrap();
    let call = &reply["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "load_skill");
    assert_eq!(call["function"]["arguments"], r#"{"name":"x"}"#);
    assert_eq!(reply["choices"][0]["message"]["content"], Value::Null);
    // The script is spent: the echo again.
    let reply: Value = post(&stub, &hello(false)).await.json().await.unwrap();
    assert_eq!(
        reply["choices"][0]["message"]["content"],
        "echo: Hello there"
    );
}

#[tokio::test]
async fn a_prompt_over_the_context_limit_is_refused_like_openai() {
    let body = hello(false);
    let limit = prompt_tokens(&body) - 1;
    let stub = OpenAiStub::start(StubConfig {
        context_limit: Some(limit),
        ..StubConfig::default()
    })
    .await;
    stub.push_reply(StubReply::text("kept for later"));
    let response = post(&stub, &body).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "context_length_exceeded");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert_eq!(error["error"]["param"], "messages");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "This model's maximum context length is {limit} tokens. However, your messages resulted in {} tokens.",
            limit + 1
        )),
        "{message}"
    );
    assert_eq!(stub.usage_reported(), (0, 0, 0));
    assert_eq!(stub.catalog_entry("gpt")["context_window"], limit);
    // A shorter prompt passes and gets the reply the refusal did not use.
    let short = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let reply: Value = post(&stub, &short).await.json().await.unwrap();
    assert_eq!(reply["choices"][0]["message"]["content"], "kept for later");
}

#[tokio::test]
async fn failures_are_answered_for_the_next_requests_then_it_recovers() {
    let stub = OpenAiStub::start(StubConfig::default()).await;
    stub.fail_next(2, 503);
    for _ in 0..2 {
        let response = post(&stub, &hello(false)).await;
        assert_eq!(response.status(), 503);
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["type"], "server_error");
    }
    stub.fail_next(1, 429);
    let response = post(&stub, &hello(false)).await;
    assert_eq!(response.status(), 429);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "rate_limit_exceeded");
    assert_eq!(post(&stub, &hello(false)).await.status(), 200);
    assert_eq!(stub.requests().len(), 4);
    assert_eq!(stub.completions(), 1);
}

#[tokio::test]
async fn a_delayed_stub_answers_late_and_a_hanging_one_not_until_released() {
    let stub = OpenAiStub::start(StubConfig::default()).await;
    stub.set_delay(Duration::from_secs(5));
    let client = reqwest::Client::new();
    let url = format!("{}/chat/completions", stub.base_url());
    let late = client
        .post(&url)
        .timeout(Duration::from_millis(100))
        .json(&hello(false))
        .send()
        .await;
    assert!(late.unwrap_err().is_timeout());
    stub.set_delay(Duration::ZERO);

    stub.set_hanging(true);
    let waiting = tokio::spawn(client.post(&url).json(&hello(false)).send());
    poll(
        "the request to arrive",
        || async { stub.requests().len() },
        |n| *n == 2,
    )
    .await;
    assert!(!waiting.is_finished());
    stub.set_hanging(false);
    assert_eq!(waiting.await.unwrap().unwrap().status(), 200);

    // Dropping a hanging stub closes the connection it holds.
    stub.set_hanging(true);
    let waiting = tokio::spawn(client.post(&url).json(&hello(false)).send());
    poll(
        "the request to arrive",
        || async { stub.requests().len() },
        |n| *n == 3,
    )
    .await;
    drop(stub);
    assert!(waiting.await.unwrap().is_err());
}
