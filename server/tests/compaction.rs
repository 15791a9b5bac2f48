//! Context compaction against a model with a small window (the OpenAI stub refusing prompts
//! over 8,000 tokens with OpenAI's own error): a long conversation runs on without failing,
//! across a restart, its oldest turns summarized in the transcript while the A2A history
//! keeps everything; a message too long for the window is refused to its sender.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::json;
use tempfile::TempDir;
use test_support::openai_stub::prompt_tokens;

const WINDOW: u64 = 8_000;
const SUMMARY: &str = "Summary: alice sends numbered notes about the shelves' inventory.";

fn catalog(stub: &OpenAiStub) -> TempDir {
    let dir = scratch_dir("window-");
    let catalog = json!({"default_model": "small", "models": [stub.catalog_entry("small")]});
    std::fs::write(dir.path().join("catalog.json"), catalog.to_string()).expect("catalog");
    dir
}

fn start(catalog: &TempDir, data: Option<TempDir>) -> Server {
    let mut builder = Server::builder()
        .arg("--model-catalog")
        .arg(catalog.path().join("catalog.json").to_str().expect("utf-8"));
    if let Some(data) = data {
        builder = builder.data_dir(data);
    }
    builder.start()
}

async fn small_window_stub() -> OpenAiStub {
    OpenAiStub::start(StubConfig {
        context_limit: Some(WINDOW),
        toolless_reply: Some(SUMMARY.to_owned()),
        ..StubConfig::default()
    })
    .await
}

fn note(i: usize) -> String {
    format!(
        "note {i}: shelf {i} holds {} boxes of screws, washers and bolts; count them again tomorrow",
        i * 3
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_message_conversation_runs_on_an_8000_token_window_across_a_restart() {
    let stub = small_window_stub().await;
    let catalog = catalog(&stub);
    let server = start(&catalog, None);
    let api = server.client().api(Binding::JsonRpc);
    let mut task = api.send_text("alice", &note(1)).await;
    let id = id_of(&task).to_owned();
    let mut server = Some(server);
    for i in 2..=500 {
        if i == 251 {
            let data = server.take().unwrap().kill();
            server = Some(start(&catalog, Some(data)));
        }
        let api = server.as_ref().unwrap().client().api(Binding::JsonRpc);
        task = api.follow_up(&task, "alice", &note(i)).await;
        assert_eq!(
            state(&task),
            "TASK_STATE_INPUT_REQUIRED",
            "message {i}: {task}"
        );
        assert_eq!(
            status_text(&task),
            format!("echo: {}", note(i)),
            "message {i}"
        );
    }
    let server = server.unwrap();
    let requests = stub.requests();
    let over: Vec<u64> = requests
        .iter()
        .map(prompt_tokens)
        .filter(|t| *t > WINDOW)
        .collect();
    assert!(over.is_empty(), "no call passed the window: {over:?}");
    let summaries = requests.iter().filter(|r| r.get("tools").is_none()).count();
    assert!(
        summaries >= 5,
        "the conversation was compacted ({summaries} times)"
    );
    eprintln!("{summaries} compactions in {} model calls", requests.len());
    // The last call sees the summary, not the first notes.
    let last = requests.last().unwrap();
    let system = last["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains(SUMMARY), "{system}");
    // (The first note is the task's goal, in the system prompt; the turns left it long ago.)
    let turns = json!(last["messages"].as_array().unwrap()[1..]).to_string();
    assert!(
        !turns.contains(&note(2)) && turns.contains(&note(500)),
        "{turns}"
    );

    // The compactions are kept in the transcript; the A2A history is untouched.
    let alice = server.client().as_participant("alice").api(Binding::Rest);
    let mut kept = 0;
    let mut token = String::new();
    loop {
        let page = alice
            .transcript(&id, json!({"pageSize": 100, "pageToken": token}))
            .await
            .expect("transcript");
        let entries = page["entries"].as_array().unwrap();
        kept += entries
            .iter()
            .filter(|e| e["entry"].get("compaction").is_some())
            .count();
        token = page["nextPageToken"].as_str().unwrap_or("").to_owned();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(kept, summaries, "each compaction is a transcript entry");
    let read = alice.get_task(&id, Some(1000)).await.expect("task");
    let history = read["history"].as_array().unwrap();
    assert_eq!(
        history.len(),
        1000,
        "every message and answer is in the history"
    );
    assert_eq!(history[0]["parts"][0]["text"], note(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_too_long_for_the_window_is_refused_to_its_sender() {
    let stub = small_window_stub().await;
    let catalog = catalog(&stub);
    let server = start(&catalog, None);
    let api = server.client().api(Binding::Rest);
    let task = api.send_text("alice", "hello").await;
    let huge = "a very long paste ".repeat(3_000); // about 13,500 tokens
    let refused = api.follow_up(&task, "alice", &huge).await;
    assert_eq!(state(&refused), "TASK_STATE_INPUT_REQUIRED", "{refused}");
    let text = status_text(&refused);
    assert!(
        text.starts_with("message not accepted: it is too long for the model's context window"),
        "{text}"
    );
    assert!(
        !stub
            .requests()
            .iter()
            .any(|r| r.to_string().contains(&huge)),
        "never sent to the model"
    );
    // The task goes on with shorter messages.
    let next = api.follow_up(&task, "alice", "a short one").await;
    assert_eq!(status_text(&next), "echo: a short one");
}
