//! The suite's shared fixtures: fixed instants, task records, events and messages, and the
//! small helpers the tests share (create a task, commit one update, expect a conflict), and
//! [`FreshStore`], what an adapter's `contract_suite!` gets from its store maker.

use std::sync::Arc;

use a2a::{
    Artifact, Message, Part, Role as MessageRole, StreamResponse, Task, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};
use chrono::{DateTime, TimeZone, Utc};
use task_core::extension::{Participant, ParticipantKind, Role, TaskExtension};
use task_core::task::AgentState;

use crate::error::{Conflict, StoreError};
use crate::model::*;
use crate::port::Store;

pub fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_790_000_000 + seconds, 0)
        .single()
        .expect("valid time")
}

pub fn record(
    id: &str,
    context: &str,
    participants: &[(&str, Role)],
    state: TaskState,
    ts: DateTime<Utc>,
) -> TaskRecord {
    let mut extension = TaskExtension::new(format!("task {id}"), "do it");
    extension.participants = participants
        .iter()
        .map(|(p, role)| Participant::new(*p, ParticipantKind::Human, *role))
        .collect();
    TaskRecord {
        id: id.to_owned(),
        context_id: context.to_owned(),
        status: TaskStatus {
            state,
            message: None,
            timestamp: Some(ts),
        },
        sub_state: None,
        extension,
        agent: AgentState::default(),
    }
}

/// The task as its first event (the snapshot a creation logs).
pub fn snapshot(record: &TaskRecord) -> StreamResponse {
    StreamResponse::Task(Task {
        id: record.id.clone(),
        context_id: record.context_id.clone(),
        status: record.status.clone(),
        artifacts: None,
        history: None,
        metadata: None,
    })
}

pub fn status_event(record: &TaskRecord, text: &str) -> StreamResponse {
    let mut message = Message::new(MessageRole::Agent, vec![Part::text(text)]);
    message.message_id = format!("{}:{text}", record.id);
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: record.id.clone(),
        context_id: record.context_id.clone(),
        status: TaskStatus {
            state: record.status.state.clone(),
            message: Some(message),
            timestamp: record.status.timestamp,
        },
        metadata: None,
    })
}

pub fn user_message(id: &str, text: &str) -> Message {
    let mut m = Message::new(MessageRole::User, vec![Part::text(text)]);
    m.message_id = id.to_owned();
    m
}

/// A reporter, an admin and the assignee agent.
pub const TEAM: &[(&str, Role)] = &[
    ("alice", Role::Reporter),
    ("ops", Role::Admin),
    ("agent", Role::Assignee),
];

pub(super) async fn create(store: &dyn Store, record: TaskRecord) -> StoredTask {
    let mut new = NewTask::new(record.clone());
    new.events.push(snapshot(&record));
    create_new(store, new).await
}

/// Commits the creation of `new`, and reads the task back.
pub(super) async fn create_new(store: &dyn Store, new: NewTask) -> StoredTask {
    let id = new.record.id.clone();
    store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .expect("create");
    store.get(&id).await.expect("get").expect("exists")
}

/// Creates task `t-1`, where alice is an admin: the task of
/// [`config_without_owner`](super::config_without_owner), which an adapter's test stores
/// the old way before calling
/// [`a_config_without_owner_is_nobodys`](super::a_config_without_owner_is_nobodys).
pub async fn create_task_of_config_without_owner(store: &dyn Store) {
    let rec = record(
        "t-1",
        "ctx",
        &[("alice", Role::Admin)],
        TaskState::Working,
        at(0),
    );
    store
        .commit(vec![Change::Create(Box::new(NewTask::new(rec)))])
        .await
        .expect("create");
}

/// Task `id` of the [`TEAM`], in `state` since `at(0)`, created.
pub(super) async fn task_in(store: &dyn Store, id: &str, state: TaskState) -> StoredTask {
    create(store, record(id, "ctx", TEAM, state, at(0))).await
}

/// The version of task `id`, which must exist.
pub async fn version_of(store: &dyn Store, id: &str) -> u64 {
    store.get(id).await.expect("get").expect("exists").version
}

pub(super) fn update(base: &StoredTask) -> TaskUpdate {
    TaskUpdate::new(base.clone())
}

pub(super) async fn commit_one(
    store: &dyn Store,
    update: TaskUpdate,
) -> Result<Committed, StoreError> {
    store
        .commit(vec![Change::Update(Box::new(update))])
        .await
        .map(|mut c| c.remove(0))
}

pub(super) fn conflict(result: Result<impl std::fmt::Debug, StoreError>) -> Conflict {
    match result {
        Err(StoreError::Conflict(c)) => c,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

pub(super) async fn seqs(store: &dyn Store, task: &str) -> Vec<u64> {
    store
        .events(task, 0, 10_000)
        .await
        .expect("events")
        .iter()
        .map(|e| e.seq)
        .collect()
}

pub(super) fn artifact(id: &str, text: &str) -> Artifact {
    Artifact {
        artifact_id: id.into(),
        name: Some(id.into()),
        description: None,
        parts: vec![Part::text(text)],
        metadata: None,
        extensions: None,
    }
}

/// Whether the task's history is empty.
pub(super) async fn no_history(store: &dyn Store, task: &str) -> bool {
    store.history(task, None).await.expect("history").is_empty()
}

/// Runs `writers` writers at once, each on a task of its own, and sorts what they got into
/// wins and losses.
pub(super) async fn race<T, W>(
    writers: usize,
    writer: impl Fn(usize) -> W,
) -> (Vec<Result<T, StoreError>>, Vec<Result<T, StoreError>>)
where
    T: Send + 'static,
    W: Future<Output = Result<T, StoreError>> + Send + 'static,
{
    futures::future::join_all((0..writers).map(|i| tokio::spawn(writer(i))))
        .await
        .into_iter()
        .map(|r| r.expect("task"))
        .partition(Result::is_ok)
}

/// What a suite's `$make` gives: the store, or the store and a guard kept until the test
/// ends (a table dropped with it), so an adapter's tests need no wrapper around the store.
pub trait FreshStore {
    type Guard;
    fn split(self) -> (Arc<dyn Store>, Self::Guard);
}

impl FreshStore for Arc<dyn Store> {
    type Guard = ();
    fn split(self) -> (Arc<dyn Store>, ()) {
        (self, ())
    }
}

impl<G> FreshStore for (Arc<dyn Store>, G) {
    type Guard = G;
    fn split(self) -> (Arc<dyn Store>, G) {
        self
    }
}
