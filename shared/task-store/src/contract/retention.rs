//! The retention part of the contract: a purge takes an expired terminal task whole and
//! keeps live tasks, tasks still in their retention, and sub-tasks whose parent exists; a
//! parent's removal frees its children. The clock is passed in.

use std::sync::Arc;

use a2a::TaskState;
use chrono::{DateTime, Duration, Utc};
use task_core::extension::TaskRef;

use super::fixtures::{TEAM, at, commit_one, create_new, record, snapshot, update, user_message};
use crate::model::*;
use crate::port::Store;
use crate::retention::Purged;

const ALICE: &str = "alice";

fn keep() -> Duration {
    Duration::days(1)
}

/// Whether the purge took `id`: removed, or marked to expire by `now`.
fn taken(purged: &Purged, id: &str, now: DateTime<Utc>) -> bool {
    purged.removed.iter().any(|t| t == id)
        || purged
            .expiring
            .iter()
            .any(|(t, when)| t == id && *when <= now)
}

fn untouched(purged: &Purged, id: &str) -> bool {
    !purged.removed.iter().any(|t| t == id) && !purged.expiring.iter().any(|(t, _)| t == id)
}

fn expiry(purged: &Purged, id: &str) -> Option<DateTime<Utc>> {
    purged
        .expiring
        .iter()
        .find(|(t, _)| t == id)
        .map(|(_, when)| *when)
}

async fn total(store: &dyn Store, state: Option<TaskState>) -> usize {
    let query = ListQuery {
        state,
        page_size: 50,
        ..Default::default()
    };
    store.list(ALICE, &query).await.expect("list").total_size
}

/// A task with a row in every table: events, history, message id, audit entry, lease (at
/// creation); transcript, artifact and push config (after); then terminal at `at(0)`.
async fn finished_task(store: &dyn Store, id: &str) {
    let rec = record(id, "ctx", TEAM, TaskState::Working, at(-100));
    let mut new = NewTask::new(rec.clone());
    new.events.push(snapshot(&rec));
    new.history.push(user_message(&format!("{id}-m"), "hello"));
    new.message_ids.push(format!("{id}-m"));
    new.audit.push(AuditEntry::new(
        at(-100),
        &format!("{id}-m"),
        Some(ALICE),
        true,
        "ok",
    ));
    new.lease = Some(Lease {
        task_id: id.into(),
        owner: "runner".into(),
        token: "token".into(),
        expires_at: at(100),
    });
    let created = create_new(store, new).await;
    store
        .put_push_config(
            ALICE,
            PushConfig {
                url: "https://example.com/hook".into(),
                id: Some("cfg".into()),
                task_id: id.into(),
                token: None,
                authentication: None,
                tenant: None,
            },
        )
        .await
        .expect("push config");
    let mut done = created.record.clone();
    done.status.state = TaskState::Completed;
    done.status.timestamp = Some(at(0));
    let mut finish = update(&created);
    finish.transcript.push(serde_json::json!({"turn": 1}));
    finish
        .artifacts
        .push(super::fixtures::artifact("a-1", "result"));
    finish
        .events
        .push(super::fixtures::status_event(&done, "done"));
    finish.record = Some(done);
    commit_one(store, finish).await.expect("finish");
}

async fn task(store: &dyn Store, rec: TaskRecord) -> StoredTask {
    let mut new = NewTask::new(rec.clone());
    new.events.push(snapshot(&rec));
    create_new(store, new).await
}

/// Asserts nothing of task `id` is left: the id can be created again, with the same
/// message id and a lease, and the new task has nothing of the old one's.
async fn nothing_left_of(store: &dyn Store, id: &str) {
    assert!(store.get(id).await.expect("get").is_none(), "{id} removed");
    let rec = record(id, "ctx", TEAM, TaskState::Working, at(200_000));
    let mut new = NewTask::new(rec.clone());
    new.message_ids.push(format!("{id}-m"));
    new.lease = Some(Lease {
        task_id: id.into(),
        owner: "again".into(),
        token: "token-2".into(),
        expires_at: at(200_100),
    });
    let again = create_new(store, new).await;
    assert_eq!(again.version, 1);
    assert_eq!(
        again.counters,
        TaskCounters::default(),
        "no logs of {id} left"
    );
    assert!(store.events(id, 0, 100).await.expect("events").is_empty());
    assert!(store.history(id, None).await.expect("history").is_empty());
    assert!(
        store
            .transcript(id, 0)
            .await
            .expect("transcript")
            .is_empty()
    );
    assert!(store.artifacts(id).await.expect("artifacts").is_empty());
    assert!(store.audit(id).await.expect("audit").is_empty());
    assert!(store.inbox(id).await.expect("inbox").is_empty());
    assert!(
        store
            .list_push_configs(id)
            .await
            .expect("configs")
            .is_empty()
    );
}

pub async fn the_purge_removes_expired_terminal_tasks_and_keeps_live_ones(store: Arc<dyn Store>) {
    let store = &*store;
    finished_task(store, "done").await;
    task(
        store,
        record("live", "ctx", TEAM, TaskState::InputRequired, at(0)),
    )
    .await;
    task(
        store,
        record("recent", "ctx", TEAM, TaskState::Failed, at(100_000)),
    )
    .await;
    // A parent still working, and its finished sub-task.
    let mut parent = record("p", "ctx", TEAM, TaskState::Working, at(0));
    parent.extension.sub_tasks.push(TaskRef::local("p.1"));
    let parent = task(store, parent).await;
    let mut child = record("p.1", "ctx", TEAM, TaskState::Completed, at(0));
    child.extension.parent_tasks.push(TaskRef::local("p"));
    task(store, child).await;
    assert_eq!(total(store, None).await, 5);

    // Two days on: "done" is past its day; "recent" is not yet.
    let now = at(0) + Duration::days(2);
    let purged = store.purge(now, keep()).await.expect("purge");
    assert!(taken(&purged, "done", now), "{purged:?}");
    for kept in ["live", "p", "p.1"] {
        assert!(untouched(&purged, kept), "{kept} kept: {purged:?}");
        assert!(store.get(kept).await.expect("get").is_some(), "{kept}");
    }
    assert!(
        !purged.removed.iter().any(|t| t == "recent")
            && expiry(&purged, "recent").is_none_or(|when| when > now),
        "recent is still within its retention: {purged:?}"
    );
    assert!(store.get("recent").await.expect("get").is_some());
    let removes = !purged.removed.is_empty();
    if removes {
        assert_eq!(total(store, None).await, 4, "the count follows");
        assert_eq!(total(store, Some(TaskState::Completed)).await, 1, "p.1");
        nothing_left_of(store, "done").await;
    }

    // The parent ends: it goes, and its child with it (never before it).
    let mut ended = parent.record.clone();
    ended.status.state = TaskState::Canceled;
    ended.status.timestamp = Some(at(10));
    let mut cancel = update(&parent);
    cancel.record = Some(ended);
    commit_one(store, cancel).await.expect("cancel");
    let purged = store.purge(now, keep()).await.expect("purge");
    assert!(taken(&purged, "p", now), "{purged:?}");
    assert!(taken(&purged, "p.1", now), "{purged:?}");
    if removes {
        let place = |id: &str| purged.removed.iter().position(|t| t == id);
        assert!(place("p") < place("p.1"), "parent first: {purged:?}");
        for gone in ["p", "p.1"] {
            assert!(store.get(gone).await.expect("get").is_none(), "{gone}");
        }
        assert!(store.get("live").await.expect("get").is_some());
        // "done" again (working), "live", "recent".
        assert_eq!(total(store, None).await, 3);
        assert_eq!(total(store, Some(TaskState::Completed)).await, 0);
    } else {
        assert!(expiry(&purged, "p.1") >= expiry(&purged, "p"), "{purged:?}");
    }
}
