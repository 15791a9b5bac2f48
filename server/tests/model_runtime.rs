//! The agent runtime against a real model's wire format (an OpenAI-compatible stub server):
//! streamed text on the stream before the final status, token usage per task, the token
//! budget, a conversation waiting out an outage, the operator's instructions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};
use tempfile::TempDir;

/// A server whose only model is `stub`, with `args` added.
fn server_on(stub: &OpenAiStub, args: &[&str]) -> (Server, TempDir) {
    let dir = scratch_dir("stub-catalog-");
    let path = dir.path().join("catalog.json");
    let catalog = json!({"default_model": "stub", "models": [stub.catalog_entry("stub")]});
    std::fs::write(&path, catalog.to_string()).expect("catalog");
    let server = Server::builder()
        .arg("--model-catalog")
        .arg(path.to_str().expect("utf-8"))
        .args(args.iter().copied())
        .start();
    (server, dir)
}

/// The usage the task's metadata reports: `(input, output, cached, calls)` in all.
fn usage_total(task: &Value) -> (u64, u64, u64, u64) {
    let total = &task["metadata"][USAGE_METADATA_KEY]["total"];
    let n = |k: &str| total[k].as_u64().unwrap_or(0);
    (
        n("input_tokens"),
        n("output_tokens"),
        n("cached_input_tokens"),
        n("calls"),
    )
}

const USAGE_METADATA_KEY: &str = "io.github.madarauchiha-314.tiny-harness/usage";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_models_text_reaches_the_stream_in_chunks_before_the_final_status() {
    let stub = OpenAiStub::start(StubConfig {
        chunk_pieces: 6,
        piece_delay: std::time::Duration::from_millis(150),
        ..StubConfig::default()
    })
    .await;
    let (server, _dir) = server_on(&stub, &[]);
    for binding in BOTH {
        let api = server.client().api(binding);
        let said = format!("tell me a story {binding:?}");
        let events = api
            .send_streaming(send_req(text("alice", &said)))
            .await
            .expect("stream")
            .collect()
            .await;
        let kinds = event_kinds(&events);
        let last = events.last().expect("events");
        assert_eq!(
            event_kind(last),
            "status:TASK_STATE_INPUT_REQUIRED",
            "{kinds:?}"
        );
        let chunks: Vec<&Value> = events
            .iter()
            .filter_map(|e| e.get("artifactUpdate"))
            .filter(|a| a["artifact"]["name"] == "streamed-text")
            .collect();
        assert!(
            chunks.len() >= 2,
            "the text came in pieces as the model wrote it: {events:#?}"
        );
        assert_ne!(
            chunks[0]["append"], true,
            "the first chunk starts the artifact"
        );
        assert!(chunks[1..].iter().all(|c| c["append"] == true));
        assert_eq!(chunks.last().unwrap()["lastChunk"], true);
        let streamed: String = chunks
            .iter()
            .filter_map(|c| c["artifact"]["parts"][0]["text"].as_str())
            .collect();
        let final_text = last["statusUpdate"]["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap();
        assert_eq!(streamed, final_text, "the chunks add up to the final text");
        assert_eq!(final_text, format!("echo: {said}"));
        // Chunks are not stored: the task has no such artifact.
        let task_id = last["statusUpdate"]["taskId"].as_str().unwrap();
        let read = server
            .client()
            .as_participant("alice")
            .api(binding)
            .get_task(task_id, None)
            .await
            .expect("task");
        assert!(read.get("artifacts").is_none_or(|a| {
            a.as_array()
                .unwrap()
                .iter()
                .all(|a| a["name"] != "streamed-text")
        }));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_totals_are_what_the_provider_reported() {
    let stub = OpenAiStub::start(StubConfig {
        cached_tokens: 7,
        ..StubConfig::default()
    })
    .await;
    let (server, _dir) = server_on(&stub, &[]);
    let api = server.client().api(Binding::JsonRpc);
    stub.push_reply(StubReply::call(
        "create_plan",
        json!({"steps": [{"name": "Look", "description": "look it up"}]}),
    ));
    let task = api.send_text("alice", "plan something").await;
    let task = api.follow_up(&task, "alice", "and now?").await;
    assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED", "{task}");
    let (input, output, cached) = stub.usage_reported();
    assert!(input > 0 && output > 0);
    assert_eq!(usage_total(&task), (input, output, cached, 3), "{task}");
    let by_model = &task["metadata"][USAGE_METADATA_KEY]["by_model"]["stub"];
    assert_eq!(by_model["calls"], 3);
    // Any participant reads them; the log has each call.
    let bob_view = server
        .client()
        .as_participant("alice")
        .api(Binding::Rest)
        .get_task(id_of(&task), None)
        .await
        .unwrap();
    assert_eq!(usage_total(&bob_view).3, 3);
    assert!(server.log().contains("model call"), "{}", server.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_stops_a_conversation_and_fails_a_delegated_task() {
    let stub = OpenAiStub::start(StubConfig::default()).await;
    // Any call costs more than this: a task may make one call, and no more.
    let (server, _dir) = server_on(&stub, &["--task-token-budget", "10"]);
    let api = server.client().api(Binding::JsonRpc);
    // The parent's first call spawns a child (a delegated task); the child's first call
    // makes a plan; neither may call again.
    stub.push_reply(StubReply::call(
        "spawn_subtask",
        json!({"name": "Child", "goal": "do the child's part"}),
    ));
    stub.push_reply(StubReply::call(
        "create_plan",
        json!({"steps": [{"name": "One", "description": "one"}]}),
    ));
    let parent = api.send_text("alice", "split the work").await;
    let id = id_of(&parent).to_owned();
    let alice = server
        .client()
        .as_participant("alice")
        .api(Binding::JsonRpc);
    let child_id = format!("{id}.1");
    let child = poll_state(&alice, &child_id, "TASK_STATE_FAILED").await;
    assert!(
        status_text(&child).contains("token budget is spent"),
        "{child}"
    );
    let parent = poll_task(&alice, &id, "the parent told of the child", |t| {
        state(t) == "TASK_STATE_INPUT_REQUIRED" && status_text(t).contains("token budget")
    })
    .await;
    assert!(status_text(&parent).contains("of 10 tokens"), "{parent}");
    assert_eq!(stub.completions(), 2, "no call past the budget");
    // Sending again does not call the model either: the conversation keeps waiting.
    let again = api.follow_up(&parent, "alice", "go on").await;
    assert_eq!(state(&again), "TASK_STATE_INPUT_REQUIRED");
    assert!(status_text(&again).contains("token budget is spent"));
    assert_eq!(stub.completions(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_waits_out_an_outage_and_keeps_the_message() {
    let stub = OpenAiStub::start(StubConfig::default()).await;
    let (server, _dir) = server_on(&stub, &["--model-retry-deadline-secs", "1"]);
    let api = server.client().api(Binding::Rest);
    stub.fail_next(1000, 503);
    let task = api.send_text("alice", "the first question").await;
    assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED", "{task}");
    assert_eq!(
        status_text(&task),
        "the model provider is unavailable; your message is kept: send another message to try again"
    );
    assert_eq!(stub.completions(), 0);
    assert!(stub.requests().len() >= 2, "retried before giving up");
    stub.fail_next(0, 503);
    let next = api.follow_up(&task, "alice", "are you back?").await;
    assert_eq!(state(&next), "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(status_text(&next), "echo: are you back?");
    // The model read the message that hit the outage, then the new one.
    let last = stub.requests().last().cloned().unwrap();
    let said: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(said, ["the first question", "are you back?"], "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_instructions_open_the_system_prompt() {
    let stub = OpenAiStub::start(StubConfig::default()).await;
    let dir = scratch_dir("instructions-");
    let file = dir.path().join("instructions.md");
    std::fs::write(&file, "You work for Acme. Answer in French.\n").unwrap();
    let (server, _catalog) = server_on(&stub, &["--instructions-file", file.to_str().unwrap()]);
    let api = server.client().api(Binding::JsonRpc);
    api.send_text("alice", "hello").await;
    let request = stub.requests().last().cloned().unwrap();
    let system = request["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("You work for Acme. Answer in French.\n\n# Task "),
        "{system}"
    );
}
