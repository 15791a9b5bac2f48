//! The agent port beyond echo, end to end over the memory store: artifacts stored and
//! streamed in order (whole and in chunks), an agent that completes, rejects or fails its
//! task, and a direct Message instead of a task. Driven by the `tck` agent profile (the A2A
//! TCK's message id scenarios) and by small scripted agents.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use a2a::{
    Artifact, Message, Part, PartContent, Role, SendMessageConfiguration, SendMessageResponse,
    StreamResponse, Task, TaskState,
};
use a2a_service::view::IN_REPLY_TO_KEY;
use a2a_service::{
    A2aApi, Agent, AgentReply, ArtifactChunk, ServiceConfig, ServiceError, TckAgent, TurnContext,
};
use async_trait::async_trait;
use common::{Fixture, assert_status, ctx, list_request, on, send, send_task};
use futures::StreamExt;
use serde_json::json;
use task_core::extension::TaskRef;
use task_store::{Change, StoreError, TaskUpdate};

/// `agent`, polling quickly, with `tck` for the participant no message names and the config
/// as `configure` leaves it.
fn fixture_with(agent: Arc<dyn Agent>, configure: impl FnOnce(&mut ServiceConfig)) -> Fixture {
    common::fixture_with(agent, |config| {
        common::quick(config);
        config.default_participant = Some("tck".into());
        configure(config);
    })
}

fn tck() -> Fixture {
    fixture_with(
        Arc::new(TckAgent::with_pause(Duration::from_millis(200))),
        |_| {},
    )
}

/// A plain A2A message (no participant: the default one applies).
fn message(id: &str, text: &str) -> Message {
    let mut m = Message::new(Role::User, vec![Part::text(text)]);
    m.message_id = id.into();
    m
}

fn texts(artifact: &Artifact) -> Vec<&str> {
    artifact.parts.iter().filter_map(Part::as_text).collect()
}

/// The task's event log.
async fn log(f: &Fixture, task_id: &str) -> Vec<StreamResponse> {
    f.store
        .events(task_id, 0, 1000)
        .await
        .expect("events")
        .into_iter()
        .map(|e| e.event)
        .collect()
}

fn kinds(events: &[StreamResponse]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            StreamResponse::Task(t) => format!("task {:?}", t.status.state),
            StreamResponse::StatusUpdate(s) => format!("status {:?}", s.status.state),
            StreamResponse::ArtifactUpdate(a) => format!(
                "artifact {}{}{}",
                texts(&a.artifact).join("|"),
                if a.append == Some(true) {
                    " +append"
                } else {
                    ""
                },
                if a.last_chunk == Some(true) {
                    " +last"
                } else {
                    ""
                }
            ),
            StreamResponse::Message(_) => "message".to_owned(),
        })
        .collect()
}

/// Streams the message `id` (a TCK scenario) to the end and checks the kinds of the events
/// it gave, in order; returns them.
async fn streamed(f: &Fixture, id: &str, expected: &[&str]) -> Vec<StreamResponse> {
    let mut stream = f
        .service
        .send_streaming_message(&ctx(), send(message(id, "go")))
        .await
        .expect("stream");
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event.expect("event"));
    }
    assert_eq!(kinds(&events), expected);
    events
}

async fn list_all(f: &Fixture) -> Vec<Task> {
    f.service
        .list_tasks(&ctx(), list_request())
        .await
        .expect("list")
        .tasks
}

#[tokio::test]
async fn a_completing_agent_ends_the_task_whatever_the_lifecycle_rule_says() {
    let f = tck();
    let task = send_task(&f, send(message("tck-complete-task-0001", "hello"))).await;
    assert_status(&task, TaskState::Completed, "Hello from TCK");
    let history = task.history.as_ref().expect("history");
    assert_eq!(
        history.iter().map(|m| m.role.clone()).collect::<Vec<_>>(),
        vec![Role::User, Role::Agent]
    );
    assert_eq!(
        kinds(&log(&f, &task.id).await),
        vec!["task Submitted", "status Working", "status Completed"]
    );
    // Anything without a scenario completes with an echo.
    let echo = send_task(&f, send(message("tck-push-0002", "echo me"))).await;
    assert_status(&echo, TaskState::Completed, "echo me");
}

#[tokio::test]
async fn input_required_follows_the_lifecycle_and_a_later_completion_ends_it() {
    let f = tck();
    let task = send_task(&f, send(message("tck-input-required-0001", "start"))).await;
    assert_eq!(task.status.state, TaskState::InputRequired);
    // More input keeps it waiting; the completion scenario then completes it.
    let again = send_task(&f, on(&task, message("tck-input-required-0002", "more"))).await;
    assert_eq!(again.status.state, TaskState::InputRequired);
    let done = send_task(&f, on(&task, message("tck-complete-task-0003", "done"))).await;
    assert_status(&done, TaskState::Completed, "Hello from TCK");
    assert_eq!(done.history.expect("history").len(), 6);
}

#[tokio::test]
async fn artifacts_are_stored_and_logged_before_the_final_status() {
    let f = tck();
    let task = send_task(&f, send(message("tck-artifact-text-0001", "go"))).await;
    assert_eq!(task.status.state, TaskState::Completed);
    let artifacts = task.artifacts.as_ref().expect("artifacts");
    assert_eq!(artifacts.len(), 1);
    assert!(!artifacts[0].artifact_id.is_empty());
    assert_eq!(texts(&artifacts[0]), ["Generated text content"]);
    let events = log(&f, &task.id).await;
    assert_eq!(
        kinds(&events),
        vec![
            "task Submitted",
            "status Working",
            "artifact Generated text content",
            "status Completed"
        ]
    );
    // The final status still names the message it answers.
    let StreamResponse::StatusUpdate(last) = &events[3] else {
        panic!("status")
    };
    assert_eq!(
        last.metadata.as_ref().expect("metadata")[IN_REPLY_TO_KEY],
        json!("tck-artifact-text-0001")
    );
    let StreamResponse::ArtifactUpdate(update) = &events[2] else {
        panic!("artifact")
    };
    assert_eq!(
        (update.task_id.as_str(), update.context_id.as_str()),
        (task.id.as_str(), task.context_id.as_str())
    );
    assert_eq!((update.append, update.last_chunk), (None, None));

    // Files (inline and by URL) and data, as the TCK checks them.
    let file = send_task(&f, send(message("tck-artifact-file-0002", "go"))).await;
    let part = &file.artifacts.as_ref().expect("artifacts")[0].parts[0];
    assert_eq!(part.content, PartContent::Raw(b"tck".to_vec()));
    assert_eq!(
        (part.filename.as_deref(), part.media_type.as_deref()),
        (Some("output.txt"), Some("text/plain"))
    );
    let url = send_task(&f, send(message("tck-artifact-file-url-0003", "go"))).await;
    let part = &url.artifacts.as_ref().expect("artifacts")[0].parts[0];
    assert_eq!(
        part.content,
        PartContent::Url("https://example.com/output.txt".into())
    );
    assert_eq!(part.filename.as_deref(), Some("output.txt"));
    let data = send_task(&f, send(message("tck-artifact-data-0004", "go"))).await;
    let part = &data.artifacts.as_ref().expect("artifacts")[0].parts[0];
    assert_eq!(
        part.content,
        PartContent::Data(json!({"key": "value", "count": 42}))
    );
}

#[tokio::test]
async fn a_stream_carries_working_the_artifact_chunks_and_completed_in_order() {
    let f = tck();
    let expected = [
        "task Submitted",
        "status Working",
        "artifact chunk-1 ",
        "artifact chunk-2 +append +last",
        "status Completed",
    ];
    let events = streamed(&f, "tck-stream-artifact-chunked-0001", &expected).await;
    let (StreamResponse::ArtifactUpdate(first), StreamResponse::ArtifactUpdate(second)) =
        (&events[2], &events[3])
    else {
        panic!("artifact updates")
    };
    assert_eq!(first.artifact.artifact_id, second.artifact.artifact_id);
    // The store keeps the artifact whole: the appended chunk's parts after the first.
    let task_id = first.task_id.clone();
    let artifacts = f.store.artifacts(&task_id).await.expect("artifacts");
    assert_eq!(artifacts.len(), 1);
    assert_eq!(texts(&artifacts[0]), ["chunk-1 ", "chunk-2"]);
}

/// An artifact of one text part.
fn text_artifact(id: &str, text: &str) -> Artifact {
    Artifact {
        artifact_id: id.into(),
        name: None,
        description: None,
        parts: vec![Part::text(text)],
        metadata: None,
        extensions: None,
    }
}

/// Appends to an artifact it stored on an earlier turn, then replaces another one.
struct Appender;

#[async_trait]
impl Agent for Appender {
    async fn run(&self, turn: &mut TurnContext<'_>) -> Result<AgentReply, StoreError> {
        let input = turn.input();
        let reply = AgentReply::text(input);
        Ok(match input {
            "first" => reply
                .with_artifact(ArtifactChunk::whole(text_artifact("log", "line 1")))
                .with_artifact(ArtifactChunk::whole(text_artifact("summary", "draft"))),
            _ => reply
                .with_artifact(ArtifactChunk {
                    artifact: text_artifact("log", "line 2"),
                    append: true,
                    last_chunk: false,
                })
                .with_artifact(ArtifactChunk::whole(text_artifact("summary", "final")))
                .with_artifact(ArtifactChunk {
                    artifact: text_artifact("log", "line 3"),
                    append: true,
                    last_chunk: true,
                }),
        })
    }
}

#[tokio::test]
async fn appended_chunks_extend_the_artifact_stored_by_an_earlier_turn() {
    let f = fixture_with(Arc::new(Appender), |_| {});
    let task = send_task(&f, send(message("m-1", "first"))).await;
    // The echo-like agent leaves the ending to the lifecycle: the conversation waits.
    assert_eq!(task.status.state, TaskState::InputRequired);
    let next = send_task(&f, on(&task, message("m-2", "second"))).await;
    let artifacts = next.artifacts.expect("artifacts");
    assert_eq!(
        artifacts
            .iter()
            .map(|a| (a.artifact_id.as_str(), texts(a)))
            .collect::<Vec<_>>(),
        vec![
            ("log", vec!["line 1", "line 2", "line 3"]),
            ("summary", vec!["final"]),
        ],
        "first-written order, appended parts merged, a whole artifact replaced"
    );
    let events = log(&f, &task.id).await;
    assert_eq!(
        kinds(&events[events.len() - 5..]),
        vec![
            "status Working",
            "artifact line 2 +append",
            "artifact final",
            "artifact line 3 +append +last",
            "status InputRequired"
        ]
    );
}

#[tokio::test]
async fn a_rejecting_agent_rejects_the_task_for_good() {
    let f = tck();
    let task = send_task(&f, send(message("tck-reject-task-0001", "no"))).await;
    assert_status(&task, TaskState::Rejected, "rejected");
    let err = f
        .service
        .send_message(&ctx(), on(&task, message("tck-complete-task-0002", "?")))
        .await
        .expect_err("terminal");
    assert!(
        matches!(err, ServiceError::UnsupportedOperation(_)),
        "{err:?}"
    );
}

/// Fails every turn, after producing an artifact.
struct Failing;

#[async_trait]
impl Agent for Failing {
    async fn run(&self, _turn: &mut TurnContext<'_>) -> Result<AgentReply, StoreError> {
        Ok(AgentReply::fail("model unavailable")
            .with_artifact(ArtifactChunk::whole(text_artifact("partial", "half done"))))
    }
}

#[tokio::test]
async fn a_failed_run_fails_the_task_with_its_reason_and_keeps_what_it_produced() {
    let f = fixture_with(Arc::new(Failing), |_| {});
    let task = send_task(&f, send(message("m-1", "try"))).await;
    assert_status(&task, TaskState::Failed, "model unavailable");
    assert_eq!(task.artifacts.expect("artifacts")[0].artifact_id, "partial");
}

#[tokio::test]
async fn a_parent_told_done_still_waits_for_its_unresolved_sub_task() {
    let f = fixture_with(
        Arc::new(TckAgent::with_pause(Duration::from_millis(200))),
        |c| c.blocking_timeout = Duration::from_millis(500),
    );
    let task = send_task(&f, send(message("tck-input-required-0001", "start"))).await;
    // The task has a child that is still working.
    let stored = f.store.get(&task.id).await.expect("get").expect("task");
    let mut record = stored.record.clone();
    let mut child = TaskRef::local(format!("{}.1", task.id));
    child.state = Some("TASK_STATE_WORKING".into());
    record.extension.sub_tasks.push(child);
    let mut update = TaskUpdate::new(stored);
    update.record = Some(record);
    f.store
        .commit(vec![Change::Update(Box::new(update))])
        .await
        .expect("commit");

    let waiting = send_task(&f, on(&task, message("tck-complete-task-0002", "done"))).await;
    assert_status(&waiting, TaskState::Working, "Hello from TCK");
    assert_eq!(
        kinds(&log(&f, &task.id).await)[3..],
        ["status Working", "status Working"]
    );
}

#[tokio::test]
async fn a_direct_reply_is_a_message_and_stores_nothing() {
    let f = tck();
    let mut asked = message("tck-message-response-0001", "hi");
    asked.context_id = Some("ctx-1".into());
    let reply = match f
        .service
        .send_message(&ctx(), send(asked))
        .await
        .expect("send")
    {
        SendMessageResponse::Message(m) => m,
        other => panic!("expected a message, got {other:?}"),
    };
    assert_eq!(reply.role, Role::Agent);
    assert_eq!(reply.parts[0].as_text(), Some("Direct message response"));
    assert_eq!(reply.context_id.as_deref(), Some("ctx-1"));
    assert_eq!(reply.task_id, None);
    assert!(!reply.message_id.is_empty() && reply.message_id != "tck-message-response-0001");

    // Streaming: exactly that one Message, then the stream ends; a new context when none
    // was given. Blocking or not makes no difference.
    let mut req = send(message("tck-message-response-0002", "hi"));
    req.configuration = Some(SendMessageConfiguration {
        accepted_output_modes: None,
        task_push_notification_config: None,
        history_length: None,
        return_immediately: Some(true),
    });
    let mut stream = f
        .service
        .send_streaming_message(&ctx(), req)
        .await
        .expect("stream");
    let only = stream.next().await.expect("one event").expect("ok");
    let StreamResponse::Message(streamed) = only else {
        panic!("expected a message, got {only:?}")
    };
    assert_eq!(streamed.parts[0].as_text(), Some("Direct message response"));
    assert!(
        streamed
            .context_id
            .as_deref()
            .is_some_and(|c| !c.is_empty())
    );
    assert_eq!(streamed.task_id, None);
    assert!(stream.next().await.is_none());
    assert!(list_all(&f).await.is_empty(), "no task was created");
}

#[tokio::test]
async fn the_long_running_scenario_works_then_completes() {
    let f = tck();
    let expected = ["task Submitted", "status Working", "status Completed"];
    streamed(&f, "test-resubscribe-message-id", &expected).await;
}
