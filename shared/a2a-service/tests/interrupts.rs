//! Interrupts: a message marked `metadata.interrupt: true` from a participant who may send
//! cuts the agent's run in progress (its model call abandoned, nothing of that turn kept); the
//! cut message is recorded and still reaches the model with the interrupt. An interrupt from
//! a sender who may not send, or a message without the mark, cuts nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a::{Message, Part, Role, SendMessageConfiguration, Task, TaskState};
use a2a_service::{A2aApi, ModelAgent, ModelAgentConfig};
use async_trait::async_trait;
use common::{Fixture, as_participant, assert_status, from, get_request, on, send, send_task};
use models::{Model, ModelError, ModelReply, ModelRequest, ToolCall, Turn};
use serde_json::{Value, json};
use task_core::commands::ProviderKind;
use task_store::{InboxItem, InboxKey};

/// A model that reads the last user turn: "slow…" answers after a minute (after a tool call
/// first when it also says "plan"), "lagging…" after 2.5 s, anything else at once; the
/// answer is `answered <text>`. It keeps every request's turns.
#[derive(Default)]
struct Reader {
    requests: Mutex<Vec<Vec<Turn>>>,
}

#[async_trait]
impl Model for Reader {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ModelError> {
        self.requests.lock().unwrap().push(request.turns.clone());
        let last_user = request
            .turns
            .iter()
            .rposition(|t| matches!(t, Turn::User { .. }))
            .expect("a user turn");
        let Turn::User { text } = &request.turns[last_user] else {
            unreachable!()
        };
        let answered_since = request.turns.len() - last_user - 1;
        if text.contains("plan") && answered_since == 0 {
            return Ok(ModelReply {
                text: None,
                tool_calls: vec![ToolCall {
                    id: "call-1".into(),
                    name: "list_skills".into(),
                    arguments: json!({}),
                }],
                usage: None,
            });
        }
        if text.contains("slow") {
            tokio::time::sleep(Duration::from_secs(60)).await;
        } else if text.contains("lagging") {
            tokio::time::sleep(Duration::from_millis(2500)).await;
        }
        Ok(ModelReply::text(format!("answered {text}")))
    }
}

fn service(model: Arc<Reader>) -> Fixture {
    let mut config = ModelAgentConfig::offline();
    config.models = config.models.with(ProviderKind::Echo, model);
    common::fixture_with(Arc::new(ModelAgent::new(config)), |config| {
        config.poll_interval = Duration::from_millis(10);
        config.blocking_timeout = Duration::from_secs(20);
    })
}

/// Alice's text message on `task`, marked as an interrupt or not.
fn message(task: &Task, text: &str, interrupt: bool) -> Message {
    let mut m = from("alice", vec![Part::text(text)]);
    if interrupt {
        m.metadata
            .get_or_insert_default()
            .insert("interrupt".to_owned(), Value::Bool(true));
    }
    m.task_id = Some(task.id.clone());
    m
}

/// Queues `message` and answers at once.
async fn queue(f: &Fixture, message: Message) {
    let mut req = send(message);
    req.configuration = Some(SendMessageConfiguration {
        return_immediately: Some(true),
        accepted_output_modes: None,
        task_push_notification_config: None,
        history_length: None,
    });
    send_task(f, req).await;
}

async fn read(f: &Fixture, id: &str) -> Task {
    f.service
        .get_task(&as_participant("alice"), get_request(id, None))
        .await
        .expect("get")
}

/// Reads the task until `done` holds (a guard of 30 s, not an expectation).
async fn wait_for(f: &Fixture, id: &str, what: &str, done: impl Fn(&Task) -> bool) -> Task {
    for _ in 0..3000 {
        let task = read(f, id).await;
        if done(&task) {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}: {:?}", read(f, id).await);
}

/// The history as `role: text`.
fn history(task: &Task) -> Vec<String> {
    task.history
        .iter()
        .flatten()
        .map(|m| {
            let role = if m.role == Role::Agent {
                "agent"
            } else {
                "user"
            };
            format!("{role}: {}", m.parts[0].as_text().unwrap_or_default())
        })
        .collect()
}

/// Alice's task, opened and answered, and a slow run of `text` under way.
async fn running(f: &Fixture, text: &str) -> Task {
    let task = send_task(f, send(from("alice", vec![Part::text("hello")]))).await;
    assert_status(&task, TaskState::InputRequired, "answered hello");
    queue(f, message(&task, text, false)).await;
    wait_for(f, &task.id, "the run", |t| {
        t.status.state == TaskState::Working
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_cuts_the_run_in_progress_and_runs_with_the_cut_message() {
    let model = Arc::new(Reader::default());
    let f = service(model.clone());
    let task = running(&f, "slow: write the report").await;

    // A message queued before the interrupt is not cut by it: it runs after the cut.
    queue(&f, message(&task, "and add a summary", false)).await;
    let answered = send_task(&f, on(&task, message(&task, "stop: just the title", true))).await;
    assert_status(
        &answered,
        TaskState::InputRequired,
        "answered stop: just the title",
    );
    let task = read(&f, &task.id).await;
    assert_eq!(
        history(&task),
        [
            "user: hello",
            "agent: answered hello",
            "user: slow: write the report",
            "agent: interrupted by alice",
            "user: and add a summary",
            "agent: answered and add a summary",
            "user: stop: just the title",
            "agent: answered stop: just the title",
        ]
    );
    // The cut message reached the model: once, before what followed it.
    let requests = model.requests.lock().unwrap().clone();
    let users: Vec<&str> = requests
        .last()
        .expect("requests")
        .iter()
        .filter_map(|t| match t {
            Turn::User { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        users,
        [
            "hello",
            "slow: write the report",
            "and add a summary",
            "stop: just the title"
        ]
    );
    let audit = f.store.audit(&task.id).await.expect("audit");
    assert!(
        audit
            .iter()
            .any(|a| a.reason == "interrupted by alice" && a.accepted),
        "{audit:?}"
    );
    assert!(common::inbox_emptied(&*f.store, &task.id, 10).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_after_a_committed_turn_keeps_it_and_its_message_once() {
    let model = Arc::new(Reader::default());
    let f = service(model.clone());
    let task = running(&f, "plan, then slow").await;
    // The tool call's turn is committed before the slow call.
    wait_for(&f, &task.id, "the first model call", |_| {
        model.requests.lock().unwrap().len() >= 3
    })
    .await;
    let answered = send_task(&f, on(&task, message(&task, "stop", true))).await;
    assert_status(&answered, TaskState::InputRequired, "answered stop");
    let requests = model.requests.lock().unwrap().clone();
    let last = requests.last().expect("requests");
    let kinds: Vec<String> = last
        .iter()
        .map(|t| match t {
            Turn::User { text } => format!("user {text}"),
            Turn::Assistant { tool_calls, .. } if !tool_calls.is_empty() => "calls".into(),
            Turn::Assistant { text, .. } => {
                format!("assistant {}", text.clone().unwrap_or_default())
            }
            Turn::ToolResults { .. } => "results".into(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "user hello",
            "assistant answered hello",
            "user plan, then slow",
            "calls",
            "results",
            "user stop"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_from_a_sender_who_may_not_send_cuts_nothing() {
    let f = service(Arc::new(Reader::default()));
    let task = running(&f, "lagging: count to ten").await;
    // Queued as if mallory had been removed from the task since (intake refuses strangers).
    let mut stop = from("mallory", vec![Part::text("stop")]);
    stop.message_id = "m-mallory".into();
    stop.task_id = Some(task.id.clone());
    stop.metadata
        .get_or_insert_default()
        .insert("interrupt".to_owned(), Value::Bool(true));
    let item = InboxItem {
        key: InboxKey {
            enqueued_at: chrono::Utc::now(),
            message_id: stop.message_id.clone(),
        },
        sender: "mallory".into(),
        message: stop,
    };
    f.store.enqueue(&task.id, item).await.expect("enqueue");
    let task = wait_for(&f, &task.id, "the lagging answer", |t| {
        t.status.state == TaskState::InputRequired
    })
    .await;
    assert_eq!(
        history(&task)[2..],
        [
            "user: lagging: count to ten",
            "agent: answered lagging: count to ten"
        ]
    );
    assert!(common::inbox_emptied(&*f.store, &task.id, 100).await);
    let audit = f.store.audit(&task.id).await.expect("audit");
    assert!(
        audit
            .iter()
            .any(|a| a.message_id == "m-mallory" && a.reason == "not a participant"),
        "{audit:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_without_the_mark_waits_for_the_run() {
    let f = service(Arc::new(Reader::default()));
    let task = running(&f, "lagging: count to ten").await;
    let mut not_quite = message(&task, "stop?", false);
    not_quite.metadata = Some(HashMap::from([
        ("participant_id".to_owned(), json!("alice")),
        ("interrupt".to_owned(), json!("true")),
    ]));
    let answered = send_task(&f, on(&task, not_quite)).await;
    assert_status(&answered, TaskState::InputRequired, "answered stop?");
    assert_eq!(
        history(&read(&f, &task.id).await)[2..],
        [
            "user: lagging: count to ten",
            "agent: answered lagging: count to ten",
            "user: stop?",
            "agent: answered stop?"
        ]
    );
}
