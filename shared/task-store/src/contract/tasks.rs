//! Tasks created and read back: `commit`, `get`, `get_newer`, and the order of `submit`.

use std::sync::Arc;

use a2a::TaskState;

use super::fixtures::{
    TEAM, at, commit_one, conflict, record, snapshot, status_event, task_in, update, user_message,
};
use crate::error::Conflict;
use crate::model::*;
use crate::port::{Newer, Store};

pub async fn create_then_get(store: Arc<dyn Store>) {
    let rec = record("t-1", "ctx", TEAM, TaskState::Submitted, at(0));
    let mut new = NewTask::new(rec.clone());
    new.events = vec![snapshot(&rec), status_event(&rec, "hello")];
    new.history = vec![user_message("m-1", "Refund order 48213")];
    new.message_ids = vec!["m-1".into()];
    let applied = new.applied();
    let committed = store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .expect("create");
    assert_eq!(
        committed,
        vec![Committed {
            task_id: "t-1".into(),
            version: 1,
            event_seqs: vec![0, 1]
        }]
    );
    let got = store.get("t-1").await.expect("get").expect("exists");
    // What the creator uses instead of reading the new task back.
    assert_eq!(applied, got);
    assert_eq!(got.record, rec);
    assert_eq!(got.version, 1);
    assert_eq!(
        got.counters,
        TaskCounters {
            events: 2,
            history: 1,
            artifact_ids: vec![],
            transcript: 0,
        }
    );
    assert_eq!(
        store.history("t-1", None).await.expect("history"),
        vec![user_message("m-1", "Refund order 48213")]
    );
    let events = store.events("t-1", 0, 10).await.expect("events");
    assert_eq!(events.len(), 2);
    assert_eq!(
        events[0],
        StoredEvent {
            seq: 0,
            event: snapshot(&rec)
        }
    );
    assert!(store.get("nope").await.expect("get").is_none());
    assert!(
        store
            .events("nope", 0, 10)
            .await
            .expect("events")
            .is_empty()
    );
}

/// What `get_newer` says of `task` past `version`.
async fn newer(store: &dyn Store, task: &str, version: u64) -> Newer {
    store.get_newer(task, version).await.expect("get_newer")
}

/// `get_newer` says whether the task moved past a version, and gives it when it did.
pub async fn get_newer_reads_only_a_changed_task(store: Arc<dyn Store>) {
    assert_eq!(newer(&*store, "t-1", 1).await, Newer::Missing);
    let base = task_in(&*store, "t-1", TaskState::Working).await;
    assert_eq!(newer(&*store, "t-1", base.version).await, Newer::Unchanged);
    let mut u = update(&base);
    u.history = vec![user_message("m-1", "hi")];
    let applied = u.applied();
    commit_one(&*store, u).await.expect("update");
    assert_eq!(
        newer(&*store, "t-1", base.version).await,
        Newer::Changed(Box::new(applied.clone()))
    );
    assert_eq!(
        newer(&*store, "t-1", applied.version).await,
        Newer::Unchanged
    );
}

/// `submit` orders commits before they are done: an update submitted after the submit of
/// the creation it builds on sees it, whichever is awaited first; a refusal found when the
/// commit is applied comes from its future.
pub async fn a_commit_submitted_after_another_is_applied_after_it(store: Arc<dyn Store>) {
    let rec = record("t-1", "ctx", TEAM, TaskState::Working, at(0));
    let mut new = NewTask::new(rec.clone());
    new.events = vec![snapshot(&rec)];
    let created = new.applied();
    let creating = store
        .submit(vec![Change::Create(Box::new(new))])
        .await
        .expect("submit the creation");
    let mut next = rec.clone();
    next.status.state = TaskState::InputRequired;
    let mut u = update(&created);
    u.events = vec![status_event(&next, "answered")];
    u.history = vec![user_message("m-1", "hi")];
    u.record = Some(next.clone());
    let updating = store
        .submit(vec![Change::Update(Box::new(u))])
        .await
        .expect("submit the update");
    let updated = updating.await.expect("the update sees the creation");
    assert_eq!(updated[0].event_seqs, vec![1]);
    assert_eq!(creating.await.expect("created")[0].event_seqs, vec![0]);
    let got = store.get("t-1").await.expect("get").expect("exists");
    assert_eq!((got.version, got.record), (2, next));

    let again = store
        .submit(vec![Change::Create(Box::new(NewTask::new(rec)))])
        .await
        .expect("a conflict is found when the commit is applied");
    assert_eq!(conflict(again.await), Conflict::TaskExists("t-1".into()));
}
