//! End to end through the real function binaries: `cargo lambda watch` serves them over
//! DynamoDB Local, and a client sends, streams, subscribes from a second connection while a
//! follow-up goes through another function's process, lists, reads and cancels, all through
//! the function URLs; meanwhile the local event source mapping (`localstack/stream-poller.py`)
//! reads the table's stream and invokes the push notifier, which delivers the task's events, in
//! order, to a loopback webhook.
//!
//! Run by `tests/lambda/run.sh` (in CI), which starts DynamoDB Local, the emulator and the
//! poller and sets `LAMBDA_WATCH_URL`; ignored by a plain `cargo test`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use futures::StreamExt;
use serde_json::{Value, json};

/// The table the functions use under `cargo lambda watch` (workspace metadata).
const TABLE: &str = "tiny-harness-local";
/// A guard on every wait (the first invocation of a function starts its process).
const WAIT: Duration = Duration::from_secs(120);

struct Client {
    base: String,
    http: reqwest::Client,
}

impl Client {
    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .header("A2A-Version", "1.0")
            .header("X-Participant-Id", "alice")
            .timeout(WAIT)
    }

    async fn json(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self.request(method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("the emulator answers");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {path}: {text:?}"));
        (status, value)
    }

    /// The SSE `data:` payloads of a streamed answer, sent to `frames` as they arrive.
    async fn sse(
        &self,
        request: reqwest::RequestBuilder,
        frames: tokio::sync::mpsc::UnboundedSender<Value>,
    ) {
        let response = request.send().await.expect("the emulator answers");
        assert_eq!(response.status().as_u16(), 200);
        assert_eq!(
            response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("text/event-stream")
        );
        let mut body = response.bytes_stream();
        let mut pending = String::new();
        while let Some(chunk) = body.next().await {
            pending.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            while let Some(end) = pending.find("\n\n") {
                let frame: String = pending.drain(..end + 2).collect();
                for line in frame.lines() {
                    if let Some(data) = line.strip_prefix("data:") {
                        let _ = frames.send(serde_json::from_str(data.trim()).unwrap());
                    }
                }
            }
        }
    }
}

async fn next_frame(frames: &mut tokio::sync::mpsc::UnboundedReceiver<Value>) -> Option<Value> {
    tokio::time::timeout(WAIT, frames.recv())
        .await
        .expect("a frame in time")
}

/// The kinds of the frames still to come, until the stream ends.
async fn kinds_until_the_end(
    frames: &mut tokio::sync::mpsc::UnboundedReceiver<Value>,
) -> Vec<String> {
    let mut kinds = Vec::new();
    while let Some(frame) = next_frame(frames).await {
        kinds.push(event_kind(&frame));
    }
    kinds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs `cargo lambda watch` over DynamoDB Local: run tests/lambda/run.sh"]
async fn the_functions_under_cargo_lambda_watch() {
    let base = std::env::var("LAMBDA_WATCH_URL").expect("LAMBDA_WATCH_URL (tests/lambda/run.sh)");
    let dynamodb = aws_sdk_dynamodb::Client::new(&store_dynamodb::sdk_config().await);
    store_dynamodb::table::ensure_table(&dynamodb, TABLE)
        .await
        .expect("the table, from infra/template.yaml");
    let client = Client {
        base: base.trim_end_matches('/').to_owned(),
        http: reqwest::Client::new(),
    };
    let mut hook = Webhook::start().await;
    let get = reqwest::Method::GET;
    let post = reqwest::Method::POST;

    // The agent card (agent-card function).
    let (status, card) = client
        .json(get.clone(), "/.well-known/agent-card.json", None)
        .await;
    assert_eq!(status, 200, "{card}");
    // Both interfaces at the base URL without a trailing slash, which joins cleanly with the
    // method paths the emulator's router maps: the HTTP+JSON one answers there.
    for interface in card["supportedInterfaces"].as_array().unwrap() {
        assert_eq!(interface["url"], client.base.as_str(), "{card}");
    }
    let rest = card["supportedInterfaces"][1]["url"].as_str().unwrap();
    let listed = client
        .http
        .get(format!("{rest}/tasks"))
        .header("A2A-Version", "1.0")
        .header("X-Participant-Id", "alice")
        .timeout(WAIT)
        .send()
        .await
        .expect("the emulator answers");
    assert_eq!(listed.status().as_u16(), 200);

    // `returnImmediately`: send-message answers with the task working and hands its run to
    // the runner function (an asynchronous invoke through the emulator's Lambda API), which
    // takes it to INPUT_REQUIRED; the sweeper, invoked as its schedule would, finds nothing
    // to resume.
    let (status, sent) = client
        .json(
            post.clone(),
            "/message:send",
            Some(json!({
                "message": message(Some("alice"), "check the stock"),
                "configuration": {"returnImmediately": true}
            })),
        )
        .await;
    assert_eq!(status, 200, "{sent}");
    // Lambda answers an `Event` invoke at once (202); the emulator runs it before answering,
    // so here the answer may already show the run's end.
    let answered = sent["task"]["status"]["state"].as_str().unwrap().to_owned();
    assert!(
        ["TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED"].contains(&answered.as_str()),
        "{sent}"
    );
    let handed = sent["task"]["id"].as_str().unwrap().to_owned();
    let until = std::time::Instant::now() + WAIT;
    loop {
        let (status, read) = client
            .json(get.clone(), &format!("/tasks/{handed}"), None)
            .await;
        assert_eq!(status, 200, "{read}");
        if read["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "the runner never ran it: {read}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The runner function ran it, with the lease send-message took.
    let log_path =
        std::env::var("LAMBDA_WATCH_LOG").expect("LAMBDA_WATCH_LOG (tests/lambda/run.sh)");
    let log = std::fs::read_to_string(&log_path).expect("the emulator's log");
    assert!(
        log.lines().any(|line| line.contains(r#""message":"run""#)
            && line.contains(&format!(r#""task_id":"{handed}""#))
            && line.contains(r#""handed_lease":true"#)),
        "no runner invocation for {handed} in the emulator's log"
    );
    let response = client
        .http
        .post(format!(
            "{}/2015-03-31/functions/sweeper/invocations",
            client.base
        ))
        .json(&json!({
            "version": "0", "id": "tick", "detail-type": "Scheduled Event",
            "source": "aws.events", "account": "000000000000", "time": "2026-12-01T00:00:00Z",
            "region": "us-east-1", "resources": [], "detail": {}
        }))
        .timeout(WAIT)
        .send()
        .await
        .expect("invoke the sweeper");
    assert_eq!(response.status().as_u16(), 200);
    let swept: Value = response.json().await.unwrap();
    assert_eq!(swept, json!({"resumed": []}));

    // A new task with an inline push config (send-message function).
    let (status, sent) = client
        .json(
            post.clone(),
            "/message:send",
            Some(json!({
                "message": message(Some("alice"), "refund order 48213"),
                "configuration": {"taskPushNotificationConfig": {
                    "url": hook.url("/hook"), "token": "tok",
                    "authentication": {"scheme": "Bearer", "credentials": "secret"}
                }}
            })),
        )
        .await;
    assert_eq!(status, 200, "{sent}");
    let task = &sent["task"];
    let id = task["id"].as_str().unwrap().to_owned();
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");

    // Streamed follow-up (send-streaming-message function).
    let (tx, mut frames) = tokio::sync::mpsc::unbounded_channel();
    client
        .sse(
            client
                .request(post.clone(), "/message:stream")
                .json(&json!({"message": on(message(Some("alice"), "and the shipping"), &id)})),
            tx,
        )
        .await;
    assert_eq!(
        kinds_until_the_end(&mut frames).await,
        [
            "task:TASK_STATE_INPUT_REQUIRED",
            "status:TASK_STATE_WORKING",
            "status:TASK_STATE_INPUT_REQUIRED"
        ]
    );

    // Subscribe from a second connection (the task function's process) while a follow-up goes
    // through the send-message process: the subscriber sees the other process's events.
    let (tx, mut frames) = tokio::sync::mpsc::unbounded_channel();
    let subscribe = client.request(get.clone(), &format!("/tasks/{id}:subscribe"));
    let reader = {
        let client = Client {
            base: client.base.clone(),
            http: client.http.clone(),
        };
        tokio::spawn(async move { client.sse(subscribe, tx).await })
    };
    let first = next_frame(&mut frames).await.expect("the task first");
    assert_eq!(event_kind(&first), "task:TASK_STATE_INPUT_REQUIRED");
    let (status, again) = client
        .json(
            post.clone(),
            "/message:send",
            Some(json!({"message": on(message(Some("alice"), "one more thing"), &id)})),
        )
        .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(
        kinds_until_the_end(&mut frames).await,
        [
            "status:TASK_STATE_WORKING",
            "status:TASK_STATE_INPUT_REQUIRED"
        ]
    );
    reader.await.unwrap();

    // Nobody invokes the notifier but the stream poller: the events so far reach the inline
    // config's webhook through the table's stream, in order.
    let mut pushed = Vec::new();
    for _ in 0..7 {
        pushed.push(hook.next().await);
    }

    // List (list-tasks), read (task, and JSON-RPC through the jsonrpc function).
    let (status, listed) = client.json(get.clone(), "/tasks", None).await;
    assert_eq!(status, 200, "{listed}");
    assert!(
        listed["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == json!(id))
    );
    let (status, read) = client
        .json(get.clone(), &format!("/tasks/{id}?historyLength=2"), None)
        .await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["history"].as_array().map(Vec::len), Some(2));
    let (status, rpc) = client
        .json(
            post.clone(),
            "/",
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": id}})),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        rpc["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{rpc}"
    );

    // A second push config through the four push-config functions: created, read, listed
    // beside the inline one, deleted (so the notifier below delivers to the inline one only).
    let configs = format!("/tasks/{id}/pushNotificationConfigs");
    let (status, created) = client
        .json(
            post.clone(),
            &configs,
            Some(json!({"id": "second", "url": hook.url("/second"), "token": "t2"})),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let (status, got) = client
        .json(get.clone(), &format!("{configs}/second"), None)
        .await;
    assert_eq!(
        (status, &got["url"]),
        (200, &json!(hook.url("/second"))),
        "{got}"
    );
    let (status, all) = client.json(get.clone(), &configs, None).await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(all["configs"].as_array().map(Vec::len), Some(2), "{all}");
    let deleted = client
        .request(reqwest::Method::DELETE, &format!("{configs}/second"))
        .send()
        .await
        .expect("the emulator answers");
    assert_eq!(deleted.status().as_u16(), 200);
    let (status, all) = client.json(get.clone(), &configs, None).await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(all["configs"].as_array().map(Vec::len), Some(1), "{all}");

    // Cancel (the task function again).
    let (status, canceled) = client
        .json(post.clone(), &format!("/tasks/{id}:cancel"), None)
        .await;
    assert_eq!(status, 200, "{canceled}");
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");

    // The cancellation reaches the webhook too, after the rest, and nothing went to the
    // config created and deleted meanwhile (it was gone before the poller read the event).
    pushed.push(hook.next().await);
    let kinds: Vec<String> = pushed.iter().map(|d| event_kind(&d.body)).collect();
    assert_eq!(
        kinds,
        [
            "task:TASK_STATE_SUBMITTED",
            "status:TASK_STATE_WORKING",
            "status:TASK_STATE_INPUT_REQUIRED",
            "status:TASK_STATE_WORKING",
            "status:TASK_STATE_INPUT_REQUIRED",
            "status:TASK_STATE_WORKING",
            "status:TASK_STATE_INPUT_REQUIRED",
            "status:TASK_STATE_CANCELED",
        ]
    );
    assert!(
        pushed
            .iter()
            .all(|d| d.path == "/hook" && d.header("authorization") == Some("Bearer secret"))
    );
    assert_eq!(
        hook.received().len(),
        8,
        "no delivery twice, none to /second"
    );

    // Every DynamoDB operation each function was seen calling (its `dynamodb call` log lines)
    // is one the template's policy allows that function on the table.
    let log = std::fs::read_to_string(&log_path).expect("the emulator's log");
    let observed = dynamodb_calls(&log);
    let allowed = common::template::table_actions_by_binary(&common::template::template());
    for function in [
        "jsonrpc",
        "send-message",
        "send-streaming-message",
        "task",
        "list-tasks",
        "create-push-config",
        "get-push-config",
        "list-push-configs",
        "delete-push-config",
        "runner",
        "sweeper",
        "push-notifier",
    ] {
        assert!(
            observed.contains_key(function),
            "no DynamoDB call seen from {function}"
        );
    }
    for (function, actions) in &observed {
        let policy = allowed
            .get(function)
            .unwrap_or_else(|| panic!("{function} is not in the template"));
        let denied: Vec<&String> = actions.difference(policy).collect();
        assert!(
            denied.is_empty(),
            "{function} called {denied:?}, which its policy does not allow (it allows {policy:?})"
        );
    }
    eprintln!("DynamoDB calls seen per function: {observed:?}");
}

/// The DynamoDB actions each function called, from its JSON log lines (`function` is
/// `AWS_LAMBDA_FUNCTION_NAME`, the binary's name under `cargo lambda watch`).
fn dynamodb_calls(
    log: &str,
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let mut calls: std::collections::BTreeMap<_, std::collections::BTreeSet<_>> =
        Default::default();
    for line in log.lines() {
        let Some(start) = line.find('{') else {
            continue;
        };
        let Ok(entry) = serde_json::from_str::<Value>(&line[start..]) else {
            continue;
        };
        let fields = &entry["fields"];
        if fields["message"] != "dynamodb call" {
            continue;
        }
        if let (Some(function), Some(operation)) =
            (fields["function"].as_str(), fields["operation"].as_str())
        {
            calls
                .entry(function.to_owned())
                .or_default()
                .insert(format!("dynamodb:{operation}"));
        }
    }
    calls
}
