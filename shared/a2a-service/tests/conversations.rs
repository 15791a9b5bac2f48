//! Conversations over the memory store with the echo agent (which answers with what it
//! read): a task a command opened, named by its first message that runs the agent or by a
//! participant; comments on an open help request, which reach the agent with the answer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use a2a::{Part, StreamResponse, Task, TaskState};
use a2a_service::EchoAgent;
use chrono::Utc;
use common::{Fixture, assert_status, on, send, send_task};
use serde_json::{Value, json};
use task_core::extension::{
    Lifecycle, Participant, ParticipantKind, Role as TaskRole, SubState, TaskExtension,
};
use task_core::task::HelpRequest;
use task_core::{TASK_MEDIA_TYPE, TASK_METADATA_KEY};
use task_store::{Change, NewTask, TaskRecord};

const AGENT: &str = "tiny-harness";

fn fixture() -> Fixture {
    common::fixture_with(Arc::new(EchoAgent), common::quick)
}

fn text(from: &str, text: &str) -> a2a::Message {
    common::from(from, vec![Part::text(text)])
}

fn ext(task: &Task) -> &Value {
    &task.metadata.as_ref().expect("metadata")[TASK_METADATA_KEY]
}

async fn stored(f: &Fixture, id: &str) -> TaskRecord {
    f.store.get(id).await.expect("read").expect("task").record
}

#[tokio::test]
async fn a_command_opens_a_new_conversation_its_first_message_names() {
    let f = fixture();
    let task = send_task(&f, send(text("alice", "/effort high"))).await;
    assert_status(
        &task,
        TaskState::InputRequired,
        "reasoning effort set to high",
    );
    assert_eq!(ext(&task)["name"], "New conversation");
    assert_eq!(ext(&task)["goal"], "New conversation");
    assert_eq!(ext(&task)["reasoning_effort"], "high");
    assert!(stored(&f, &task.id).await.agent.untitled);

    // Another command leaves it untitled.
    let shown = send_task(&f, on(&task, text("alice", "/model"))).await;
    assert_eq!(ext(&shown)["name"], "New conversation");

    let first = "Refund order 48213\nit was late";
    let named = send_task(&f, on(&task, text("alice", first))).await;
    assert_status(&named, TaskState::InputRequired, first);
    assert_eq!(ext(&named)["name"], "Refund order 48213");
    assert_eq!(ext(&named)["goal"], first);
    assert_eq!(ext(&named)["reasoning_effort"], "high");
    assert!(!stored(&f, &task.id).await.agent.untitled);

    // Named once: the next message leaves the name alone.
    let next = send_task(&f, on(&task, text("alice", "any news?"))).await;
    assert_eq!(ext(&next)["name"], "Refund order 48213");
    assert_eq!(ext(&next)["goal"], first);
}

#[tokio::test]
async fn a_participant_who_names_the_conversation_keeps_the_name() {
    let f = fixture();
    let task = send_task(&f, send(text("alice", "/effort low"))).await;
    let mut edit = common::from(
        "alice",
        vec![Part::data(json!({"name": "Audit"})).with_media_type(TASK_MEDIA_TYPE)],
    );
    edit.task_id = Some(task.id.clone());
    let edited = send_task(&f, send(edit)).await;
    assert_eq!(ext(&edited)["name"], "Audit");
    assert!(!stored(&f, &task.id).await.agent.untitled);
    let after = send_task(&f, on(&task, text("alice", "Refund order 48213"))).await;
    assert_eq!(ext(&after)["name"], "Audit");
    assert_eq!(ext(&after)["goal"], "New conversation");
}

#[tokio::test]
async fn a_command_with_an_envelope_keeps_the_envelopes_name() {
    let f = fixture();
    let message = common::from(
        "alice",
        vec![
            Part::text("/effort high"),
            Part::data(json!({"name": "Audit", "goal": "Audit the ledger"}))
                .with_media_type(TASK_MEDIA_TYPE),
        ],
    );
    let task = send_task(&f, send(message)).await;
    assert_eq!(ext(&task)["name"], "Audit");
    assert!(!stored(&f, &task.id).await.agent.untitled);
    let after = send_task(&f, on(&task, text("alice", "start"))).await;
    assert_eq!(ext(&after)["name"], "Audit");
}

/// Alice's task, waiting INPUT_REQUIRED on `agent` as the task's agent state (bob watches).
async fn store_waiting(f: &Fixture, id: &str, agent: task_core::task::AgentState) -> Task {
    let mut ext = TaskExtension::new("Refund", "refund order 48213");
    ext.participants = vec![
        Participant::new("alice", ParticipantKind::Human, TaskRole::Reporter),
        Participant::new("bob", ParticipantKind::Human, TaskRole::Watcher),
        Participant::new(AGENT, ParticipantKind::Agent, TaskRole::Assignee),
    ];
    ext.lifecycle = Some(Lifecycle::Conversation);
    let record = TaskRecord {
        id: id.to_owned(),
        context_id: format!("ctx-{id}"),
        status: a2a_service::view::status(TaskState::InputRequired, None, Utc::now()),
        sub_state: Some(SubState::AwaitingAnswer),
        extension: ext,
        agent,
    };
    let mut new = NewTask::new(record.clone());
    let task = a2a_service::view::task(&record, None, None);
    new.events.push(StreamResponse::Task(task.clone()));
    f.store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .expect("store the task");
    task
}

#[tokio::test]
async fn comments_on_a_help_request_reach_the_agent_with_the_answer() {
    let f = fixture();
    let agent = task_core::task::AgentState {
        pending_help: Some(HelpRequest {
            participant_id: "alice".into(),
            question: "Full or partial refund?".into(),
            options: vec![],
            message_id: "t-help:help:1".into(),
            comments: vec![],
            dropped_comments: 0,
        }),
        help_requests: 1,
        ..Default::default()
    };
    let task = store_waiting(&f, "t-help", agent).await;
    // Recorded: the task still waits on alice.
    let first = send_task(&f, on(&task, text("bob", "hurry up"))).await;
    assert_eq!(first.status.state, TaskState::InputRequired);
    let data = common::from("bob", vec![Part::data(json!({"order": 48213}))]);
    let second = send_task(&f, on(&task, data)).await;
    assert_eq!(second.status.state, TaskState::InputRequired);
    assert!(stored(&f, &task.id).await.agent.pending_help.is_some());
    let kept = stored(&f, &task.id).await.agent.pending_help.expect("open");
    assert_eq!(kept.comments.len(), 2);

    let answered = send_task(&f, on(&task, text("alice", "Full."))).await;
    assert_status(
        &answered,
        TaskState::InputRequired,
        "Reply from alice to \"Full or partial refund?\": Full.\n\n\
         [Comments other participants sent while the question was open, oldest first]\n\
         bob: hurry up\n\
         bob: {\"order\":48213}\n\
         [End of comments]",
    );
    // Cleared with the request: the next message reads as itself.
    assert_eq!(stored(&f, &task.id).await.agent.pending_help, None);
    let next = send_task(&f, on(&task, text("alice", "thanks"))).await;
    assert_status(&next, TaskState::InputRequired, "thanks");
}

#[tokio::test]
async fn a_comment_on_a_participants_task_is_only_recorded() {
    let f = fixture();
    let agent = task_core::task::AgentState {
        awaiting_participant: Some("alice".into()),
        ..Default::default()
    };
    let task = store_waiting(&f, "t-assigned", agent.clone()).await;
    let commented = send_task(&f, on(&task, text("bob", "hurry up"))).await;
    assert_eq!(commented.status.state, TaskState::InputRequired);
    assert_eq!(stored(&f, &task.id).await.agent, agent, "nothing kept");
    let history = f.store.history(&task.id, None).await.expect("history");
    assert_eq!(history.len(), 1, "the comment is in the history");
}
