//! A provider's failure shows the task's participants what happened, never where: the
//! `local-server` binary with a catalog whose OpenAI-compatible model (or registered remote
//! agent) is a stand-in on 127.0.0.1 that fails, answers with a body holding a secret-looking
//! internal URL, never answers, or is not there at all. Once the retries are over (a 1 s
//! deadline here) the conversation waits with the class of the failure; its status message,
//! history and stream carry nothing of the stand-in's address, the URL or the body. The
//! details go to the server's log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

/// An internal endpoint a provider's error body might name.
const SECRET_HOST: &str = "10.20.30.40:8443";
const SECRET_BODY: &str =
    "upstream http://10.20.30.40:8443/internal/v2/models/secret-model?api_key=sk-live-0123 is down";

/// A stand-in on 127.0.0.1 answering every request on any path with `status` and
/// [`SECRET_BODY`] (after `delay`).
struct StandIn {
    /// `127.0.0.1:<port>`
    addr: String,
    serve: tokio::task::JoinHandle<()>,
}

impl StandIn {
    async fn start(status: u16, delay: Duration) -> Self {
        let router = axum::Router::new().fallback(move || async move {
            tokio::time::sleep(delay).await;
            (
                axum::http::StatusCode::from_u16(status).unwrap(),
                axum::Json(json!({"error": {"message": SECRET_BODY}})),
            )
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let serve = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self { addr, serve }
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.serve.abort();
    }
}

/// An address on 127.0.0.1 where nothing listens.
async fn closed_addr() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().to_string()
}

fn server_with_model(settings: Value) -> (Server, tempfile::TempDir) {
    let dir = scratch_dir("catalog-");
    let path = dir.path().join("catalog.json");
    let catalog = json!({
        "default_model": "private",
        "models": [{"id": "private", "provider": "openai", "settings": settings}]
    });
    std::fs::write(&path, catalog.to_string()).expect("catalog");
    let server = Server::builder()
        .arg("--model-catalog")
        .arg(path.to_str().expect("utf-8"))
        .arg("--model-retry-deadline-secs")
        .arg("1")
        .start();
    (server, dir)
}

/// Alice streams "hello" over JSON-RPC to the end; nothing in the stream shows `hidden`.
/// Her API and the task's id.
async fn stream_hello(server: &Server, hidden: &str) -> (Api, String) {
    let api = server
        .client()
        .api(Binding::JsonRpc)
        .as_participant("alice");
    let events = api
        .send_streaming(send_req(text("alice", "hello")))
        .await
        .expect("SendStreamingMessage")
        .collect()
        .await;
    let id = events[0]["task"]["id"]
        .as_str()
        .expect("the task first")
        .to_owned();
    assert_nothing_of("the stream", &Value::from(events).to_string(), hidden);
    (api, id)
}

/// The conversation read back: waiting for `why` (a transient failure: the message is kept
/// for the next try), and nothing in it shows `hidden`.
async fn assert_waits_for(api: &Api, id: &str, why: &str, hidden: &str) -> Value {
    let task = read(api, id).await;
    assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED", "{task}");
    assert_eq!(
        status_text(&task),
        format!("{why}; your message is kept: send another message to try again")
    );
    assert_nothing_of("GetTask", &task.to_string(), hidden);
    task
}

/// Fails the test if `what` (any JSON the participants read) shows where the failure was.
fn assert_nothing_of(what: &str, text: &str, stand_in: &str) {
    for secret in [
        stand_in,
        SECRET_HOST,
        "sk-live",
        "secret-model",
        "/internal/",
        "chat/completions",
        "agent-card",
        "HTTP 5",
        "500 Internal",
    ] {
        assert!(!text.contains(secret), "{what} shows {secret:?}: {text}");
    }
}

/// The task (with its whole history) as its participant reads it.
async fn read(api: &Api, id: &str) -> Value {
    api.get_task(id, Some(100)).await.expect("GetTask")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_error_shows_its_class_not_the_endpoint_or_the_body() {
    let stand_in = StandIn::start(500, Duration::ZERO).await;
    let (server, _dir) =
        server_with_model(json!({"base_url": format!("http://{}/v1", stand_in.addr)}));
    let (api, id) = stream_hello(&server, &stand_in.addr).await;
    assert_waits_for(
        &api,
        &id,
        "the model provider is unavailable",
        &stand_in.addr,
    )
    .await;
    let rest = server.client().api(Binding::Rest).as_participant("alice");
    assert_nothing_of(
        "GetTask over REST",
        &read(&rest, &id).await.to_string(),
        &stand_in.addr,
    );
    let listed = rest.list_tasks(json!({"historyLength": 10})).await.unwrap();
    assert_nothing_of("ListTasks", &listed.to_string(), &stand_in.addr);

    // The operator's log has the details, with the task.
    let log = server.log();
    assert!(
        log.lines()
            .any(|l| l.contains(&id) && l.contains(SECRET_HOST) && l.contains("the model failed")),
        "the log names the task and the provider's answer:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_is_not_there_is_unavailable_without_its_address() {
    let addr = closed_addr().await;
    let (server, _dir) = server_with_model(json!({"base_url": format!("http://{addr}/v1")}));
    let api = server.client().api(Binding::Rest).as_participant("alice");
    let task = api.send_text("alice", "hello").await;
    assert_waits_for(
        &api,
        id_of(&task),
        "the model provider is unavailable",
        &addr,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_never_answers_timed_out() {
    let stand_in = StandIn::start(200, Duration::from_secs(120)).await;
    let (server, _dir) = server_with_model(json!({
        "base_url": format!("http://{}/v1", stand_in.addr),
        "timeout_secs": 1
    }));
    let (api, id) = stream_hello(&server, &stand_in.addr).await;
    assert_waits_for(&api, &id, "the model provider timed out", &stand_in.addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_agent_that_fails_shows_its_class_not_its_url() {
    let stand_in = StandIn::start(500, Duration::ZERO).await;
    let setup = AgentSetup::new(ledger_subtask_script("noted"));
    let server = setup
        .builder()
        .arg("--remote-agent")
        .arg(format!("ledger=http://{}/a2a", stand_in.addr))
        // A 5xx is tried again until the remote counts as lost.
        .arg("--remote-lost-after-secs")
        .arg("1")
        .start();
    let api = server
        .client()
        .api(Binding::JsonRpc)
        .as_participant("alice");
    let task = api.send_text("alice", "Parent").await;
    let id = id_of(&task).to_owned();
    let child_id = format!("{id}.1");
    let child = poll_state(&api, &child_id, "TASK_STATE_FAILED").await;
    assert_eq!(
        status_text(&child),
        "the remote agent ledger was lost: no answer for 1 s"
    );
    assert_nothing_of(
        "the sub-task",
        &read(&api, &child_id).await.to_string(),
        &stand_in.addr,
    );
    // The parent hears of the failure in the same words.
    let parent = poll(
        "the parent to hear",
        || read(&api, &id),
        |parent| {
            parent
                .to_string()
                .contains("the remote agent ledger was lost: no answer for 1 s")
        },
    )
    .await;
    assert_nothing_of("the parent", &parent.to_string(), &stand_in.addr);
    assert!(
        server.log().contains(&stand_in.addr),
        "the log keeps the remote's address"
    );
}
