//! Runs outside the request path, in process: a `returnImmediately` message is answered
//! without running and its run handed (with its lease) to the runner function, which then
//! runs it; a hand-off that fails is run by the answering function instead; the sweeper
//! resumes a task whose handed run never arrived once its lease expires.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_http::{Method, Serves};
use a2a_service::RunDispatcher;
use common::*;
use functions::runner::{self, RunRequest};
use serde_json::{Value, json};
use task_store::Lease;

/// Keeps what it is handed (the runner function's queue), or refuses it.
#[derive(Default)]
struct Handed {
    runs: Mutex<Vec<RunRequest>>,
    refuse: bool,
}

#[async_trait::async_trait]
impl RunDispatcher for Handed {
    async fn dispatch(&self, task_id: &str, lease: Option<Lease>) -> Result<(), String> {
        if self.refuse {
            return Err("TooManyRequestsException".into());
        }
        self.runs.lock().unwrap().push(RunRequest {
            task_id: task_id.to_owned(),
            lease,
            traceparent: None,
        });
        Ok(())
    }
}

/// Sends `body` to the send-message function `app` and returns the task it answers with.
async fn send(app: &Arc<functions::App>, body: Value) -> Value {
    let serves = Serves::Rest(Method::SendMessage);
    let call = Call::post("/message:send", &body);
    let got = invoke(
        app,
        serves,
        call.request(Payload::RestV1, plain(Payload::RestV1)),
    )
    .await;
    assert_eq!(got.status, 200, "{}", got.body);
    got.json()["task"].clone()
}

async fn send_immediately(deployment: &Deployment, handed: &Arc<Handed>) -> Value {
    let app = Arc::new(
        Arc::into_inner(deployment.app(Serves::Rest(Method::SendMessage)))
            .unwrap()
            .with_dispatcher(handed.clone()),
    );
    let body = json!({
        "message": message(Some("alice"), "check the stock"),
        "configuration": {"returnImmediately": true}
    });
    send(&app, body).await
}

/// The task as alice reads it through the task function.
async fn get_task(deployment: &Deployment, id: &str) -> Value {
    let serves = Serves::Rest(Method::GetTask);
    let app = deployment.app(serves);
    let call = Call::get(format!("/tasks/{id}")).participant("alice");
    let got = invoke(
        &app,
        serves,
        call.request(Payload::RestV1, plain(Payload::RestV1)),
    )
    .await;
    assert_eq!(got.status, 200, "{}", got.body);
    got.json()
}

async fn state(deployment: &Deployment, id: &str) -> String {
    get_task(deployment, id).await["status"]["state"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_run_is_run_by_the_runner_with_the_senders_lease() {
    let deployment = Deployment::new();
    let handed = Arc::new(Handed::default());
    let task = send_immediately(&deployment, &handed).await;
    let id = task["id"].as_str().unwrap().to_owned();
    assert_eq!(task["status"]["state"], "TASK_STATE_WORKING");

    // The answering function ran nothing (its invocation has ended): the run was handed.
    assert_eq!(state(&deployment, &id).await, "TASK_STATE_WORKING");
    let runs = std::mem::take(&mut *handed.runs.lock().unwrap());
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].task_id, id);
    assert!(
        runs[0]
            .lease
            .as_ref()
            .is_some_and(|lease| lease.task_id == id),
        "the lease the task was created with goes with the run"
    );

    // The runner function (another process over the same table), with the payload as
    // Lambda would deliver it.
    let payload: RunRequest =
        serde_json::from_str(&serde_json::to_string(&runs[0]).unwrap()).unwrap();
    let runner_function = deployment.app(Serves::Everything);
    let report = runner::run_task(runner_function.service().runner(), payload).await;
    assert_eq!(report.task_id, id);
    assert_eq!(state(&deployment, &id).await, "TASK_STATE_INPUT_REQUIRED");

    // The same payload delivered again (Lambda's async invokes are at least once): the lease
    // is spent, the inbox empty; nothing runs twice.
    let again = runner::run_task(runner_function.service().runner(), runs[0].clone()).await;
    assert_eq!(again.task_id, id);
    let task = get_task(&deployment, &id).await;
    let agent_replies = task["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "ROLE_AGENT")
        .count();
    assert_eq!(agent_replies, 1, "{task}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_cannot_be_handed_is_run_by_the_answering_function() {
    let deployment = Deployment::new();
    let handed = Arc::new(Handed {
        refuse: true,
        ..Handed::default()
    });
    let task = send_immediately(&deployment, &handed).await;
    let id = task["id"].as_str().unwrap();
    // The buffered answer waited for the run it started before the invocation ended.
    assert_eq!(state(&deployment, id).await, "TASK_STATE_INPUT_REQUIRED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_resumes_a_run_that_never_arrived_once_its_lease_expires() {
    let deployment = Deployment::with_env(&[("TH_LEASE_TTL_SECS", "1")]);
    let handed = Arc::new(Handed::default());
    let task = send_immediately(&deployment, &handed).await;
    let id = task["id"].as_str().unwrap().to_owned();
    // The handed run is lost (never delivered).
    handed.runs.lock().unwrap().clear();

    let sweeper = deployment.app(Serves::Everything);
    let early = runner::sweep(sweeper.service().runner()).await.unwrap();
    assert!(early.resumed.is_empty(), "the lease is still live");
    assert_eq!(state(&deployment, &id).await, "TASK_STATE_WORKING");

    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let swept = runner::sweep(sweeper.service().runner()).await.unwrap();
    assert_eq!(swept.resumed, std::slice::from_ref(&id));
    assert_eq!(state(&deployment, &id).await, "TASK_STATE_INPUT_REQUIRED");
    let after = runner::sweep(sweeper.service().runner()).await.unwrap();
    assert!(after.resumed.is_empty());
}

/// A catalog of one scripted model playing `script` (written under `dir`).
fn scripted_catalog(dir: &std::path::Path, script: &Value) -> String {
    let path = dir.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    json!({"default_model": "scripted", "models": [
        {"id": "scripted", "provider": "scripted", "settings": {"script": path}}
    ]})
    .to_string()
}

async fn send_blocking(deployment: &Deployment, text: &str) -> Value {
    let app = deployment.app(Serves::Rest(Method::SendMessage));
    send(&app, json!({"message": message(Some("alice"), text)})).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_functions_agent_reads_the_shipped_skills_and_keeps_the_turn_limit() {
    let dir = tempfile::tempdir().unwrap();
    let skills = format!("{}/../skills", env!("CARGO_MANIFEST_DIR"));
    let script = json!({"turns": [
        {"tool_calls": [{"name": "list_skills"}, {"name": "load_skill", "arguments": {"name": "summarize"}}]},
        {"text": "summarised"}
    ]});
    let catalog = scripted_catalog(dir.path(), &script);
    let deployment = Deployment::with_env(&[
        ("TH_MODEL_CATALOG_JSON", &catalog),
        ("TH_SKILLS_DIR", &skills),
    ]);
    let task = send_blocking(&deployment, "summarise this").await;
    let id = task["id"].as_str().unwrap();
    let results: Vec<String> = deployment
        .store
        .transcript(id, 0)
        .await
        .unwrap()
        .iter()
        .filter(|e| e["turn"]["role"] == "tool_results")
        .flat_map(|e| e["turn"]["results"].as_array().unwrap().clone())
        .map(|r| r["content"].as_str().unwrap().to_owned())
        .collect();
    assert!(results[0].contains("summarize"), "{}", results[0]);
    assert!(!results[1].contains("[skill."), "{}", results[1]);

    // One model call allowed, and the script calls a tool on its first: FAILED.
    let deployment = Deployment::with_env(&[
        ("TH_MODEL_CATALOG_JSON", &catalog),
        ("TH_SKILLS_DIR", &skills),
        ("TH_MAX_TURNS", "1"),
    ]);
    let task = send_blocking(&deployment, "summarise this").await;
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{task}");
}
