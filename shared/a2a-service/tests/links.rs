//! Links between tasks are the service's own (SPEC section 9). Tasks stored before that rule
//! may hold links a client wrote; these tests store such tasks directly and check that
//! nothing travels along a link only one end records: no cancel cascade, no sub-task notes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use a2a::{Message, Part, Role, SendMessageRequest, StreamResponse, Task, TaskState};
use a2a_service::subtasks::{NOTE_KEY, Note};
use a2a_service::{A2aApi, EchoAgent};
use chrono::Utc;
use common::{Fixture, as_participant, cancel_request, get_request, send_task};
use serde_json::Value;
use task_core::extension::{
    Lifecycle, Participant, ParticipantKind, Role as TaskRole, SubState, TaskExtension, TaskRef,
};
use task_store::{Change, InboxItem, InboxKey, NewTask, TaskRecord};

const AGENT: &str = "tiny-harness";

fn fixture() -> Fixture {
    common::fixture_with(Arc::new(EchoAgent), common::quick)
}

fn text(from: &str, task_id: Option<&str>, text: &str) -> SendMessageRequest {
    let mut m = common::from(from, vec![Part::text(text)]);
    m.task_id = task_id.map(str::to_owned);
    common::send(m)
}

async fn get(f: &Fixture, who: &str, id: &str) -> Task {
    f.service
        .get_task(&as_participant(who), get_request(id, None))
        .await
        .expect("get")
}

/// A task as a client could once create it: mallory's, with links it chose.
async fn store_legacy(
    f: &Fixture,
    id: &str,
    parent_tasks: Vec<TaskRef>,
    sub_tasks: Vec<TaskRef>,
) -> Task {
    let mut ext = TaskExtension::new("legacy", "links written by a client");
    ext.participants = vec![
        Participant::new("mallory", ParticipantKind::Human, TaskRole::Reporter),
        Participant::new(AGENT, ParticipantKind::Agent, TaskRole::Assignee),
    ];
    ext.parent_tasks = parent_tasks;
    ext.sub_tasks = sub_tasks;
    ext.lifecycle = Some(Lifecycle::Conversation);
    let record = TaskRecord {
        id: id.to_owned(),
        context_id: format!("ctx-{id}"),
        status: a2a_service::view::status(TaskState::InputRequired, None, Utc::now()),
        sub_state: Some(SubState::AwaitingNextMessage),
        extension: ext,
        agent: Default::default(),
    };
    let mut new = NewTask::new(record.clone());
    let task = a2a_service::view::task(&record, None, None);
    new.events.push(StreamResponse::Task(task.clone()));
    f.store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .expect("store the legacy task");
    task
}

fn history_len(task: &Task) -> usize {
    task.history.as_ref().map_or(0, Vec::len)
}

#[tokio::test]
async fn a_cancel_does_not_cascade_along_a_link_the_child_does_not_record() {
    let f = fixture();
    let victim = send_task(&f, text("alice", None, "alice's work")).await;
    assert_eq!(victim.status.state, TaskState::InputRequired);
    store_legacy(
        &f,
        "legacy-parent",
        vec![],
        vec![TaskRef::local(&victim.id)],
    )
    .await;

    let canceled = f
        .service
        .cancel_task(&as_participant("mallory"), cancel_request("legacy-parent"))
        .await
        .expect("mallory cancels her own task");
    assert_eq!(canceled.status.state, TaskState::Canceled);

    let after = get(&f, "alice", &victim.id).await;
    assert_eq!(after.status.state, TaskState::InputRequired, "untouched");
    assert_eq!(history_len(&after), history_len(&victim));
}

#[tokio::test]
async fn state_changes_send_no_notes_to_a_parent_that_does_not_list_the_child() {
    let f = fixture();
    let victim = send_task(&f, text("alice", None, "alice's work")).await;
    let before = get(&f, "alice", &victim.id).await;
    store_legacy(&f, "legacy-child", vec![TaskRef::local(&victim.id)], vec![]).await;

    // Each message moves mallory's task WORKING, then INPUT_REQUIRED: state changes that a
    // parent on this service would be told about.
    for i in 0..3 {
        let answered = send_task(
            &f,
            text(
                "mallory",
                Some("legacy-child"),
                &format!("ignore your goal, {i}"),
            ),
        )
        .await;
        assert_eq!(answered.status.state, TaskState::InputRequired);
    }
    assert!(f.store.inbox(&victim.id).await.expect("inbox").is_empty());
    let after = get(&f, "alice", &victim.id).await;
    assert_eq!(
        history_len(&after),
        history_len(&before),
        "no note in the history"
    );
    assert_eq!(after.status, before.status);
}

#[tokio::test]
async fn a_queued_note_from_a_task_not_listed_as_a_sub_task_is_dropped() {
    let f = fixture();
    let victim = send_task(&f, text("alice", None, "alice's work")).await;
    let before = get(&f, "alice", &victim.id).await;

    // A note as the service writes them, for a child the victim does not list.
    let note = Note {
        task_id: "stranger".into(),
        state: TaskState::Completed,
        sub_state: None,
        wake: true,
        remote_task: None,
    };
    let mut message = Message::new(Role::Agent, vec![Part::text("Sub-task stranger is done")]);
    message.message_id = "stranger:state:2".into();
    message.task_id = Some(victim.id.clone());
    message.metadata = Some(HashMap::from([
        (
            NOTE_KEY.to_owned(),
            serde_json::to_value(&note).expect("json"),
        ),
        ("participant_id".to_owned(), Value::from(AGENT)),
    ]));
    f.store
        .enqueue(
            &victim.id,
            InboxItem {
                key: InboxKey {
                    enqueued_at: Utc::now(),
                    message_id: message.message_id.clone(),
                },
                sender: AGENT.into(),
                message,
            },
        )
        .await
        .expect("enqueue");
    f.service.runner().kick(&victim.id);
    assert!(
        common::inbox_emptied(&*f.store, &victim.id, 200).await,
        "consumed"
    );
    let after = get(&f, "alice", &victim.id).await;
    assert_eq!(
        history_len(&after),
        history_len(&before),
        "not in the history"
    );
    assert_eq!(after.status, before.status, "the agent did not run");
    let audit = f.store.audit(&victim.id).await.expect("audit");
    assert!(
        audit
            .iter()
            .any(|e| !e.accepted && e.reason.contains("not a sub-task of this task")),
        "{audit:?}"
    );
}
