//! The inbox: messages queued with a creation, by `enqueue`, or by another task's commit, and
//! consumed by an update.

use std::sync::Arc;

use a2a::TaskState;

use super::fixtures::{
    TEAM, at, commit_one, conflict, create, record, snapshot, status_event, task_in, update,
    user_message,
};
use crate::error::{Conflict, StoreError};
use crate::model::*;
use crate::port::Store;

pub async fn a_task_is_created_with_its_first_message_queued(store: Arc<dyn Store>) {
    let rec = record("t-1", "ctx", TEAM, TaskState::Submitted, at(0));
    let first = InboxItem {
        key: InboxKey {
            enqueued_at: at(0),
            message_id: "m-1".into(),
        },
        sender: "alice".into(),
        message: user_message("m-1", &"é".repeat(300 * 1024)),
    };
    let mut new = NewTask::new(rec.clone());
    new.events.push(snapshot(&rec));
    new.inbox.push(first.clone());
    store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .expect("create");
    assert_eq!(
        store.inbox("t-1").await.expect("inbox"),
        vec![first.clone()]
    );
    // Its id was recorded like an enqueued message's.
    let again = InboxItem {
        key: InboxKey {
            enqueued_at: at(1),
            message_id: "m-1".into(),
        },
        ..first.clone()
    };
    assert_eq!(
        conflict(store.enqueue("t-1", again).await),
        Conflict::DuplicateMessage {
            task_id: "t-1".into(),
            message_id: "m-1".into()
        }
    );
    // An id both listed and queued is a repeat within the creation: nothing is written.
    let rec2 = record("t-2", "ctx", TEAM, TaskState::Submitted, at(0));
    let mut twice = NewTask::new(rec2);
    twice.message_ids.push("m-1".into());
    twice.inbox.push(first);
    assert_eq!(
        conflict(store.commit(vec![Change::Create(Box::new(twice))]).await),
        Conflict::DuplicateMessage {
            task_id: "t-2".into(),
            message_id: "m-1".into()
        }
    );
    assert!(store.get("t-2").await.expect("get").is_none());
}

/// An `Enqueue` queues a message for another task atomically with the commit's other
/// changes, with `enqueue`'s checks; a failed check fails the whole commit.
pub async fn a_commit_can_queue_a_message_for_another_task(store: Arc<dyn Store>) {
    let parent = create(&*store, record("p", "ctx", TEAM, TaskState::Working, at(0))).await;
    let child = create(
        &*store,
        record("p.1", "ctx", TEAM, TaskState::Working, at(1)),
    )
    .await;
    let note = |id: &str| InboxItem {
        key: InboxKey {
            enqueued_at: at(5),
            message_id: id.into(),
        },
        sender: "agent".into(),
        message: user_message(id, "Sub-task p.1 is COMPLETED: done"),
    };
    let mut done = child.record.clone();
    done.status.state = TaskState::Completed;
    let mut u = update(&child);
    u.record = Some(done.clone());
    u.events = vec![status_event(&done, "completed")];
    let committed = store
        .commit(vec![
            Change::Update(Box::new(u)),
            Change::Enqueue {
                task_id: "p".into(),
                item: Box::new(note("n-1")),
            },
        ])
        .await
        .expect("commit");
    assert_eq!(committed.len(), 2);
    assert_eq!(store.inbox("p").await.expect("inbox"), vec![note("n-1")]);
    let p = store.get("p").await.expect("get").expect("exists");
    assert_eq!(
        p.version, parent.version,
        "queueing does not touch the parent's version"
    );

    // A repeated id, a missing task, a terminal task: the commit fails, nothing is written.
    let child = store.get("p.1").await.expect("get").expect("exists");
    for (target, id, expect) in [
        ("p", "n-1", "duplicate"),
        ("nope", "n-2", "missing"),
        ("p.1", "n-3", "self"),
    ] {
        let mut u = update(&child);
        u.events = vec![status_event(&child.record, "again")];
        let result = store
            .commit(vec![
                Change::Update(Box::new(u)),
                Change::Enqueue {
                    task_id: target.into(),
                    item: Box::new(note(id)),
                },
            ])
            .await;
        match expect {
            "duplicate" => assert_eq!(
                conflict(result),
                Conflict::DuplicateMessage {
                    task_id: "p".into(),
                    message_id: "n-1".into()
                }
            ),
            "missing" => assert!(matches!(result, Err(StoreError::NotFound(_))), "{result:?}"),
            // The same task changed twice in one commit.
            _ => assert!(matches!(result, Err(StoreError::Invalid(_))), "{result:?}"),
        }
    }
    let mut canceled = store.get("p").await.expect("get").expect("exists");
    let mut rec = canceled.record.clone();
    rec.status.state = TaskState::Canceled;
    let mut u = update(&canceled);
    u.record = Some(rec);
    commit_one(&*store, u).await.expect("cancel the parent");
    canceled = store.get("p").await.expect("get").expect("exists");
    assert_eq!(canceled.record.state(), &TaskState::Canceled);
    let mut u = update(&child);
    u.events = vec![status_event(&child.record, "late")];
    let result = store
        .commit(vec![
            Change::Update(Box::new(u)),
            Change::Enqueue {
                task_id: "p".into(),
                item: Box::new(note("n-4")),
            },
        ])
        .await;
    assert_eq!(conflict(result), Conflict::TaskTerminal("p".into()));
    let after = store.get("p.1").await.expect("get").expect("exists");
    assert_eq!(
        after.version, child.version,
        "nothing of the failed commit was written"
    );
    assert_eq!(store.inbox("p").await.expect("inbox").len(), 1);
}

pub async fn inbox(store: Arc<dyn Store>) {
    let item = |id: &str, secs| InboxItem {
        key: InboxKey {
            enqueued_at: at(secs),
            message_id: id.into(),
        },
        sender: "alice".into(),
        message: user_message(id, &format!("text of {id}")),
    };
    assert!(matches!(
        store.enqueue("nope", item("m-1", 0)).await,
        Err(StoreError::NotFound(_))
    ));
    let base = task_in(&*store, "t-1", TaskState::Working).await;
    for (id, secs) in [("m-3", 3), ("m-1", 1), ("m-2", 1)] {
        store.enqueue("t-1", item(id, secs)).await.expect("enqueue");
    }
    let waiting = store.inbox("t-1").await.expect("inbox");
    assert_eq!(
        waiting,
        vec![item("m-1", 1), item("m-2", 1), item("m-3", 3)]
    );

    // The runner moves two into the history and consumes them, atomically.
    let mut drain = update(&base);
    drain.consume_inbox = vec![waiting[0].key.clone(), waiting[1].key.clone()];
    drain.history = vec![waiting[0].message.clone(), waiting[1].message.clone()];
    commit_one(&*store, drain).await.expect("drain");
    assert_eq!(
        store.inbox("t-1").await.expect("inbox"),
        vec![item("m-3", 3)]
    );
    // A second runner with the same items (and a current version) finds them gone.
    let now = store.get("t-1").await.expect("get").expect("exists");
    let mut twice = update(&now);
    twice.consume_inbox = vec![waiting[0].key.clone()];
    twice.history = vec![waiting[0].message.clone()];
    assert_eq!(
        conflict(commit_one(&*store, twice).await),
        Conflict::InboxItemGone("t-1".into())
    );
    assert_eq!(
        store.history("t-1", None).await.expect("history").len(),
        2,
        "processed once"
    );

    // A terminal task takes no more messages.
    let mut done = now.record.clone();
    done.status.state = TaskState::Completed;
    let mut finish = update(&now);
    finish.record = Some(done);
    commit_one(&*store, finish).await.expect("complete");
    assert_eq!(
        conflict(store.enqueue("t-1", item("m-4", 4)).await),
        Conflict::TaskTerminal("t-1".into())
    );
}
