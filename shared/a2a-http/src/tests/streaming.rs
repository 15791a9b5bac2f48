//! SSE on both bindings: framing, errors before and during a stream, keep-alives (paused time).

use std::time::Duration;

use a2a::TaskState;
use a2a_service::{EventStream, ServiceError};
use futures::StreamExt;
use futures::stream;
use serde_json::{Value, json};

use crate::HttpConfig;
use crate::testkit::{
    FakeApi, Got, Req, card, send, send_configured, sse_data, status_update, task,
};

fn stream_rpc() -> Req {
    Req::rpc(
        "SendStreamingMessage",
        json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}}),
    )
}

fn assert_sse_headers(got: &Got) {
    assert_eq!(got.status, 200);
    assert!(got.was_stream);
    assert_eq!(got.header("content-type"), Some("text/event-stream"));
    assert_eq!(got.header("cache-control"), Some("no-store"));
    assert_eq!(got.header("x-accel-buffering"), Some("no"));
}

fn events(items: Vec<Result<a2a::StreamResponse, ServiceError>>) -> EventStream {
    stream::iter(items).boxed()
}

/// Frames of the raw body, keep-alives included.
fn frames(got: &Got) -> Vec<String> {
    got.text()
        .split_inclusive("\n\n")
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn jsonrpc_frames_carry_the_request_id_and_a_stream_response() {
    let api = FakeApi::new();
    let got = send(&api, stream_rpc()).await;
    assert_sse_headers(&got);
    let text = got.text();
    assert!(text.starts_with("data: {"), "{text}");
    let events = got.events();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["jsonrpc"], "2.0");
    assert_eq!(events[0]["id"], 1);
    assert_eq!(
        events[0]["result"]["task"]["status"]["state"],
        "TASK_STATE_SUBMITTED"
    );
    assert_eq!(
        events[1]["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[tokio::test]
async fn rest_frames_are_bare_stream_responses() {
    let api = FakeApi::new();
    let got = send(&api, Req::post("/tasks/t-7:subscribe")).await;
    assert_sse_headers(&got);
    let events = got.events();
    assert_eq!(
        events[0],
        json!({"task": {"id": "t-7", "contextId": "ctx-1", "status": {"state": "TASK_STATE_SUBMITTED"}}})
    );
    assert_eq!(events[1]["statusUpdate"]["taskId"], "t-7");
}

#[tokio::test]
async fn a_mid_stream_error_is_the_last_event() {
    let make = || {
        events(vec![
            Ok(a2a::StreamResponse::Task(task("t", TaskState::Working))),
            Err(ServiceError::Unavailable),
            Ok(status_update("t", TaskState::Completed)),
        ])
    };
    let api = FakeApi::new().streaming(make);
    let got = send(&api, stream_rpc()).await;
    assert_sse_headers(&got);
    let events = got.events();
    assert_eq!(events.len(), 2, "the stream ends at the error: {events:?}");
    assert_eq!(events[1]["id"], 1);
    assert_eq!(events[1]["error"]["code"], -32603);
    assert_eq!(
        events[1]["error"]["message"],
        "the service is temporarily unavailable"
    );
    assert!(events[1].get("result").is_none());

    let api = FakeApi::new().streaming(make);
    let got = send(&api, Req::get("/tasks/t:subscribe")).await;
    let events = got.events();
    assert_eq!(events.len(), 2);
    assert_eq!(events[1]["error"]["code"], 503);
    assert_eq!(events[1]["error"]["details"][0]["reason"], "INTERNAL_ERROR");
}

#[tokio::test]
async fn an_error_before_the_stream_is_a_plain_error() {
    // The service refuses the call.
    let api = FakeApi::new().failing(ServiceError::UnsupportedOperation(
        "task is terminal".into(),
    ));
    let got = send(&api, Req::rpc("SubscribeToTask", json!({"id": "t"}))).await;
    assert_eq!(got.status, 200);
    assert!(!got.was_stream);
    assert_eq!(got.header("content-type"), Some("application/json"));
    assert_eq!(got.json()["error"]["code"], -32004);
    let api = FakeApi::new().failing(ServiceError::TaskNotFound("t".into()));
    let got = send(&api, Req::post("/tasks/t:subscribe")).await;
    assert_eq!(got.status, 404);
    assert_eq!(got.header("content-type"), Some("application/json"));

    // The stream's first item is an error.
    let api =
        FakeApi::new().streaming(|| events(vec![Err(ServiceError::TaskNotFound("t".into()))]));
    let got = send(&api, stream_rpc()).await;
    assert!(!got.was_stream);
    assert_eq!(got.json()["error"]["code"], -32001);
    assert_eq!(got.json()["id"], 1);
    let api =
        FakeApi::new().streaming(|| events(vec![Err(ServiceError::TaskNotFound("t".into()))]));
    let got = send(&api, Req::get("/tasks/t:subscribe")).await;
    assert_eq!(got.status, 404);
}

#[tokio::test]
async fn streaming_is_refused_when_the_card_does_not_declare_it() {
    let mut card = card();
    card.capabilities.streaming = Some(false);
    let api = FakeApi::with_card(card);
    let got = send(&api, stream_rpc()).await;
    assert!(!got.was_stream);
    assert_eq!(got.json()["error"]["code"], -32004);
    let got = send(&api, Req::get("/tasks/t:subscribe")).await;
    assert_eq!(got.status, 400);
    assert!(api.calls().is_empty());
}

#[tokio::test]
async fn an_empty_stream_is_an_empty_event_stream() {
    let api = FakeApi::new().streaming(|| events(vec![]));
    let got = send(&api, stream_rpc()).await;
    assert_sse_headers(&got);
    assert!(got.text().is_empty());
}

/// The task now, the next event after 40 s of silence.
fn slow_stream() -> EventStream {
    let first = stream::iter(vec![Ok(a2a::StreamResponse::Task(task(
        "t",
        TaskState::Working,
    )))]);
    let later = stream::once(async {
        tokio::time::sleep(Duration::from_secs(40)).await;
        Ok(status_update("t", TaskState::Completed))
    });
    first.chain(later).boxed()
}

#[tokio::test(start_paused = true)]
async fn keep_alives_while_idle_default_every_15_seconds() {
    let api = FakeApi::new().streaming(slow_stream);
    let started = tokio::time::Instant::now();
    let got = send(&api, stream_rpc()).await;
    assert_eq!(started.elapsed(), Duration::from_secs(40));
    let frames = frames(&got);
    assert_eq!(frames.len(), 4, "{frames:?}");
    assert!(frames[0].starts_with("data: "));
    assert_eq!(frames[1], ": keep-alive\n\n");
    assert_eq!(frames[2], ": keep-alive\n\n");
    assert!(frames[3].starts_with("data: "));
    assert_eq!(
        sse_data(&frames[3])[0]["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

/// A subscription to [`slow_stream`] with keep-alives every `keep_alive` (zero: none).
async fn subscribe_slowly(keep_alive: Duration) -> Got {
    let config = HttpConfig {
        keep_alive,
        ..HttpConfig::default()
    };
    let api = FakeApi::new().streaming(slow_stream);
    send_configured(&api, &config, Req::get("/tasks/t:subscribe")).await
}

#[tokio::test(start_paused = true)]
async fn keep_alive_interval_is_configurable_and_can_be_disabled() {
    let got = subscribe_slowly(Duration::from_secs(6)).await;
    let keep_alives = frames(&got).iter().filter(|f| f.starts_with(':')).count();
    assert_eq!(keep_alives, 6);
    assert_eq!(got.events().len(), 2);

    let got = subscribe_slowly(Duration::ZERO).await;
    assert_eq!(frames(&got).len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_slow_first_event_opens_the_stream_with_a_keep_alive() {
    let make = || {
        stream::once(async {
            tokio::time::sleep(Duration::from_secs(20)).await;
            Err::<a2a::StreamResponse, _>(ServiceError::Internal)
        })
        .boxed()
    };
    let api = FakeApi::new().streaming(make);
    let got = send(&api, stream_rpc()).await;
    // The head went out after one interval, so the late error is an event, not a plain error.
    assert_sse_headers(&got);
    let frames = frames(&got);
    assert_eq!(frames[0], ": keep-alive\n\n");
    let last: Vec<Value> = sse_data(&frames[1]);
    assert_eq!(last[0]["error"]["code"], -32603);
    assert_eq!(last[0]["error"]["message"], "internal error");
}
