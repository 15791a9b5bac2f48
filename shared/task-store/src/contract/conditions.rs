//! A commit's conditions: the task must (not) exist, the version read, the allowed states, the
//! actor's role, message ids seen once, and a multi-task commit that stands or falls whole.

use std::sync::Arc;

use a2a::TaskState;
use task_core::extension::Role;

use super::fixtures::{
    TEAM, at, commit_one, conflict, create, create_new, no_history, record, seqs, status_event,
    task_in, update, user_message,
};
use crate::error::Conflict;
use crate::model::*;
use crate::port::Store;

pub async fn create_conflicts_when_the_task_exists(store: Arc<dyn Store>) {
    let first = task_in(&*store, "t-1", TaskState::Submitted).await;
    let mut again = NewTask::new(record("t-1", "other", TEAM, TaskState::Working, at(5)));
    again.history = vec![user_message("m-9", "again")];
    let err = store.commit(vec![Change::Create(Box::new(again))]).await;
    assert_eq!(conflict(err), Conflict::TaskExists("t-1".into()));
    let now = store.get("t-1").await.expect("get").expect("exists");
    assert_eq!(now, first, "nothing of the refused create was written");
    assert!(no_history(&*store, "t-1").await);
}

pub async fn update_needs_the_version_it_read(store: Arc<dyn Store>) {
    let base = task_in(&*store, "t-1", TaskState::Submitted).await;
    let mut working = base.record.clone();
    working.status.state = TaskState::Working;
    let mut first = update(&base);
    first.record = Some(working.clone());
    first.events.push(status_event(&working, "working"));
    let committed = commit_one(&*store, first).await.expect("first update");
    assert_eq!(
        committed,
        Committed {
            task_id: "t-1".into(),
            version: 2,
            event_seqs: vec![1]
        }
    );

    // A second writer that read version 1 loses, and nothing of its write lands.
    let mut stale = update(&base);
    let mut failed = base.record.clone();
    failed.status.state = TaskState::Failed;
    stale.record = Some(failed);
    stale.events.push(status_event(&base.record, "stale"));
    stale.history.push(user_message("m-2", "stale"));
    assert_eq!(
        conflict(commit_one(&*store, stale).await),
        Conflict::TaskChanged("t-1".into())
    );
    let now = store.get("t-1").await.expect("get").expect("exists");
    assert_eq!(
        (now.version, &now.record.status.state),
        (2, &TaskState::Working)
    );
    assert_eq!(seqs(&*store, "t-1").await, vec![0, 1]);
    assert!(no_history(&*store, "t-1").await);

    // An update without a new record still advances the version.
    let bump = commit_one(&*store, update(&now)).await.expect("bump");
    assert_eq!(bump.version, 3);
    // Updating a task that does not exist is a conflict too (it changed: it is gone).
    let mut ghost = now.clone();
    ghost.record.id = "ghost".into();
    assert_eq!(
        conflict(commit_one(&*store, update(&ghost)).await),
        Conflict::TaskChanged("ghost".into())
    );
}

pub async fn update_checks_the_allowed_states(store: Arc<dyn Store>) {
    let base = task_in(&*store, "t-1", TaskState::Working).await;
    let mut wrong = update(&base);
    wrong.allowed_states = vec![TaskState::Submitted, TaskState::InputRequired];
    assert_eq!(
        conflict(commit_one(&*store, wrong).await),
        Conflict::TaskChanged("t-1".into())
    );
    let mut right = update(&base);
    right.allowed_states = vec![TaskState::Submitted, TaskState::Working];
    assert_eq!(
        commit_one(&*store, right).await.expect("allowed").version,
        2
    );
}

pub async fn update_checks_the_actors_role(store: Arc<dyn Store>) {
    let base = task_in(&*store, "t-1", TaskState::Working).await;
    let mut promoted = base.record.clone();
    promoted
        .extension
        .participant_mut("alice")
        .expect("alice")
        .role = Role::Admin;
    for actor in ["alice", "agent", "mallory"] {
        let mut by = update(&base);
        by.actor_role = Some((actor.into(), Role::Admin));
        by.record = Some(promoted.clone());
        assert_eq!(
            conflict(commit_one(&*store, by).await),
            Conflict::TaskChanged("t-1".into()),
            "{actor}"
        );
    }
    let mut by_admin = update(&base);
    by_admin.actor_role = Some(("ops".into(), Role::Admin));
    by_admin.record = Some(promoted.clone());
    commit_one(&*store, by_admin).await.expect("an admin may");
    let now = store.get("t-1").await.expect("get").expect("exists");
    assert_eq!(
        now.record
            .extension
            .participant("alice")
            .expect("alice")
            .role,
        Role::Admin
    );
    // The role condition reads the stored roles: alice is now an admin.
    let mut by_alice = update(&now);
    by_alice.actor_role = Some(("alice".into(), Role::Admin));
    commit_one(&*store, by_alice)
        .await
        .expect("alice is an admin now");
}

pub async fn message_ids_are_deduplicated(store: Arc<dyn Store>) {
    let rec = record("t-1", "ctx", TEAM, TaskState::Working, at(0));
    let mut new = NewTask::new(rec.clone());
    new.message_ids = vec!["m-1".into()];
    let base = create_new(&*store, new).await;

    let mut again = update(&base);
    again.message_ids = vec!["m-1".into()];
    again.history = vec![user_message("m-1", "again")];
    assert_eq!(
        conflict(commit_one(&*store, again).await),
        Conflict::DuplicateMessage {
            task_id: "t-1".into(),
            message_id: "m-1".into()
        }
    );
    assert!(no_history(&*store, "t-1").await, "nothing applied");

    let item = |id: &str, secs| InboxItem {
        key: InboxKey {
            enqueued_at: at(secs),
            message_id: id.into(),
        },
        sender: "alice".into(),
        message: user_message(id, "hi"),
    };
    let dup = store.enqueue("t-1", item("m-1", 1)).await;
    assert_eq!(
        conflict(dup),
        Conflict::DuplicateMessage {
            task_id: "t-1".into(),
            message_id: "m-1".into()
        }
    );
    store.enqueue("t-1", item("m-2", 2)).await.expect("new id");
    let dup = store.enqueue("t-1", item("m-2", 3)).await;
    assert_eq!(
        conflict(dup),
        Conflict::DuplicateMessage {
            task_id: "t-1".into(),
            message_id: "m-2".into()
        }
    );
    let mut late = update(&base);
    late.message_ids = vec!["m-2".into()];
    assert!(matches!(
        conflict(commit_one(&*store, late).await),
        Conflict::DuplicateMessage { .. }
    ));
    // Ids are per task: another task may receive the same id.
    let mut other = NewTask::new(record("t-2", "ctx", TEAM, TaskState::Working, at(0)));
    other.message_ids = vec!["m-1".into()];
    store
        .commit(vec![Change::Create(Box::new(other))])
        .await
        .expect("ids are per task");
}

pub async fn a_multi_task_commit_is_atomic(store: Arc<dyn Store>) {
    let parent = create(&*store, record("p", "ctx", TEAM, TaskState::Working, at(0))).await;
    let mut child_rec = record("p.1", "ctx", TEAM, TaskState::Submitted, at(1));
    child_rec
        .extension
        .parent_tasks
        .push(task_core::extension::TaskRef::local("p"));
    let mut linked = parent.record.clone();
    linked
        .extension
        .sub_tasks
        .push(task_core::extension::TaskRef::local("p.1"));

    // The parent changed meanwhile: neither the child nor the link is written.
    let stale_parent = parent.clone();
    commit_one(&*store, update(&parent))
        .await
        .expect("someone else writes the parent");
    let mut link = update(&stale_parent);
    link.record = Some(linked.clone());
    let err = store
        .commit(vec![
            Change::Create(Box::new(NewTask::new(child_rec.clone()))),
            Change::Update(Box::new(link)),
        ])
        .await;
    assert_eq!(conflict(err), Conflict::TaskChanged("p".into()));
    assert!(store.get("p.1").await.expect("get").is_none());

    let fresh = store.get("p").await.expect("get").expect("exists");
    let mut link = update(&fresh);
    link.record = Some(linked);
    let committed = store
        .commit(vec![
            Change::Create(Box::new(NewTask::new(child_rec))),
            Change::Update(Box::new(link)),
        ])
        .await
        .expect("both");
    assert_eq!(
        committed
            .iter()
            .map(|c| c.task_id.as_str())
            .collect::<Vec<_>>(),
        ["p.1", "p"]
    );
    assert!(store.get("p.1").await.expect("get").is_some());
    assert_eq!(
        store
            .get("p")
            .await
            .expect("get")
            .expect("exists")
            .record
            .extension
            .sub_tasks
            .len(),
        1
    );

    // An existing child id fails the whole commit, the parent's update included.
    let now = store.get("p").await.expect("get").expect("exists");
    let mut bump = update(&now);
    bump.events.push(status_event(&now.record, "x"));
    let err = store
        .commit(vec![
            Change::Update(Box::new(bump)),
            Change::Create(Box::new(NewTask::new(record(
                "p.1",
                "ctx",
                TEAM,
                TaskState::Submitted,
                at(2),
            )))),
        ])
        .await;
    assert_eq!(conflict(err), Conflict::TaskExists("p.1".into()));
    assert_eq!(
        store.get("p").await.expect("get").expect("exists").version,
        now.version
    );
}
