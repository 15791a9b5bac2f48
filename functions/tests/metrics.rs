//! The EMF lines a function prints when an invocation ends: a SendMessage on the echo model
//! (the request, the task created, the turn, the model call), a refused GetTask, and a
//! JSON-RPC error (answered in a 200, counted by its error's status) on the streaming
//! runtime, whose lines come when the stream ends.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use a2a_http::{Method, Serves};
use common::*;
use functions::emf::Emf;
use serde_json::{Value, json};

/// A writer the test reads back (the function's stdout).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// The lines printed since the last call, each parsed as one JSON object.
    fn take_lines(&self) -> Vec<Value> {
        let bytes = std::mem::take(&mut *self.0.lock().unwrap());
        String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).expect("each line is one JSON object"))
            .collect()
    }
}

/// The line that has `dimension` = `value` and the metric `metric`.
fn line_with<'a>(lines: &'a [Value], metric: &str, dims: &[(&str, &str)]) -> &'a Value {
    lines
        .iter()
        .find(|line| line.get(metric).is_some() && dims.iter().all(|(k, v)| line[*k] == *v))
        .unwrap_or_else(|| panic!("no line with {metric} {dims:?} in {lines:#?}"))
}

fn directive(line: &Value) -> &Value {
    &line["_aws"]["CloudWatchMetrics"][0]
}

/// The unit the line's directive gives `metric`.
fn unit_of<'a>(line: &'a Value, metric: &str) -> &'a str {
    directive(line)["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["Name"] == metric)
        .and_then(|m| m["Unit"].as_str())
        .unwrap_or_else(|| panic!("{metric} is not declared in {line}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invocation_prints_what_it_recorded_as_emf_lines() {
    let out = Captured::default();
    let emf = Emf::install_writing_to("TinyHarnessTest", Box::new(out.clone()));
    let deployment = Deployment::new();

    // SendMessage on the send-message function (buffered): the turn runs before it answers.
    let serves = Serves::Rest(Method::SendMessage);
    let app = deployment.app(serves);
    let call = Call::post(
        "/message:send",
        &json!({"message": message(Some("alice"), "hello metrics")}),
    );
    let got = emf
        .around(invoke(
            &app,
            serves,
            call.request(Payload::RestV1, plain(Payload::RestV1)),
        ))
        .await;
    assert_eq!(got.status, 200, "{}", got.body);
    let lines = out.take_lines();

    let request = line_with(&lines, "Requests", &[("Method", "SendMessage")]);
    assert_eq!(directive(request)["Namespace"], "TinyHarnessTest");
    assert_eq!(
        directive(request)["Dimensions"],
        json!([["Method", "Outcome"]])
    );
    assert_eq!(request["Outcome"], "ok");
    assert_eq!(request["Requests"], 1.0);
    assert_eq!(unit_of(request, "Requests"), "Count");
    assert_eq!(unit_of(request, "RequestLatency"), "Milliseconds");
    assert_eq!(request["RequestLatency"].as_array().unwrap().len(), 1);
    assert!(request["_aws"]["Timestamp"].as_u64().unwrap() > 0);

    let created = line_with(&lines, "TasksCreated", &[("Lifecycle", "conversation")]);
    assert_eq!(directive(created)["Dimensions"], json!([["Lifecycle"]]));
    assert_eq!(created["TasksCreated"], 1.0);
    let turn = line_with(&lines, "Turns", &[("Agent", "local")]);
    assert_eq!(turn["Turns"], 1.0);
    let model = line_with(
        &lines,
        "ModelLatency",
        &[("Model", "echo"), ("Outcome", "ok")],
    );
    assert_eq!(
        directive(model)["Dimensions"],
        json!([["Model", "Outcome"]])
    );
    assert_eq!(unit_of(model, "ModelLatency"), "Milliseconds");
    let task_id = got.json()["task"]["id"].as_str().unwrap().to_owned();

    // Nothing recorded in between: the next invocation prints only its own.
    let serves = Serves::Rest(Method::GetTask);
    let app = deployment.app(serves);
    let call = Call::get("/tasks/no-such-task").participant("alice");
    let got = emf
        .around(invoke(
            &app,
            serves,
            call.request(Payload::FunctionUrl, plain(Payload::FunctionUrl)),
        ))
        .await;
    assert_eq!(got.status, 404, "{}", got.body);
    let lines = out.take_lines();
    let refused = line_with(&lines, "Requests", &[("Method", "GetTask")]);
    assert_eq!(refused["Outcome"], "client_error");
    assert!(
        lines.iter().all(|l| l.get("TasksCreated").is_none()),
        "{lines:#?}"
    );

    // The JSON-RPC endpoint streams: its lines come when the stream ends; an error travels
    // in a 200 but counts by its status.
    let serves = Serves::JsonRpc;
    let app = deployment.app(serves);
    let request = Call::rpc("GetTask", json!({"id": task_id}))
        .participant("mallory")
        .request(Payload::RestV1, plain(Payload::RestV1));
    let response = app.respond_streaming(request).await;
    let (parts, body) = response.into_parts();
    let body = emf.after_stream(body);
    assert!(
        out.take_lines().is_empty(),
        "nothing before the stream ends"
    );
    let text = String::from_utf8(body.collect().await.to_vec()).unwrap();
    assert_eq!(parts.status, 200);
    assert!(text.contains("\"error\""), "{text}");
    let lines = out.take_lines();
    let rpc = line_with(&lines, "Requests", &[("Method", "GetTask")]);
    assert_eq!(rpc["Outcome"], "client_error", "{lines:#?}");
}
