//! ListTasks: scoped to a participant, newest status first, filtered and paged, following
//! participant and status changes.

use std::sync::Arc;

use a2a::TaskState;
use task_core::extension::{Participant, ParticipantKind, Role};

use super::fixtures::{TEAM, at, commit_one, create, record, task_in, update};
use crate::error::StoreError;
use crate::model::*;
use crate::port::Store;

async fn list_ids(store: &dyn Store, who: &str, query: &ListQuery) -> (Vec<String>, String, usize) {
    let page = store.list(who, query).await.expect("list");
    (
        page.tasks.iter().map(|t| t.record.id.clone()).collect(),
        page.next_page_token,
        page.total_size,
    )
}

pub async fn list_is_scoped_ordered_filtered_and_paged(store: Arc<dyn Store>) {
    // Seven of alice's tasks with distinct status timestamps, in two contexts; one of bob's.
    for (i, state) in [
        TaskState::Working,
        TaskState::Completed,
        TaskState::Working,
        TaskState::InputRequired,
        TaskState::Working,
        TaskState::Completed,
        TaskState::Working,
    ]
    .into_iter()
    .enumerate()
    {
        let ctx = if i % 2 == 0 { "even" } else { "odd" };
        create(
            &*store,
            record(
                &format!("t-{i}"),
                ctx,
                &[("alice", Role::Reporter)],
                state,
                at(i as i64 * 10),
            ),
        )
        .await;
    }
    create(
        &*store,
        record(
            "b-1",
            "even",
            &[("bob", Role::Reporter)],
            TaskState::Working,
            at(1000),
        ),
    )
    .await;

    let all = |size| ListQuery {
        page_size: size,
        ..Default::default()
    };
    let (ids, token, total) = list_ids(&*store, "alice", &all(50)).await;
    assert_eq!(ids, ["t-6", "t-5", "t-4", "t-3", "t-2", "t-1", "t-0"]);
    assert_eq!((token.as_str(), total), ("", 7));
    assert_eq!(
        list_ids(&*store, "mallory", &all(50)).await,
        (vec![], String::new(), 0)
    );

    // Pages of 3, following the tokens.
    let mut seen = Vec::new();
    let mut query = all(3);
    loop {
        let (ids, token, total) = list_ids(&*store, "alice", &query).await;
        assert_eq!(total, 7);
        assert!(ids.len() <= 3);
        seen.extend(ids);
        if token.is_empty() {
            break;
        }
        query.page_token = Some(token);
    }
    assert_eq!(seen, ["t-6", "t-5", "t-4", "t-3", "t-2", "t-1", "t-0"]);

    let filtered = ListQuery {
        context_id: Some("even".into()),
        state: Some(TaskState::Working),
        ..all(2)
    };
    let (ids, token, total) = list_ids(&*store, "alice", &filtered).await;
    assert_eq!((ids, total), (vec!["t-6".to_owned(), "t-4".to_owned()], 4));
    let (ids, token, _) = list_ids(
        &*store,
        "alice",
        &ListQuery {
            page_token: Some(token),
            ..filtered.clone()
        },
    )
    .await;
    assert_eq!(
        (ids, token.as_str()),
        (vec!["t-2".to_owned(), "t-0".to_owned()], "")
    );

    let recent = ListQuery {
        status_after: Some(at(30)),
        ..all(50)
    };
    assert_eq!(
        list_ids(&*store, "alice", &recent).await.0,
        ["t-6", "t-5", "t-4", "t-3"]
    );
    let done = ListQuery {
        state: Some(TaskState::Completed),
        ..all(50)
    };
    assert_eq!(
        list_ids(&*store, "alice", &done).await,
        (vec!["t-5".to_owned(), "t-1".to_owned()], String::new(), 2)
    );

    let bad = ListQuery {
        page_token: Some("not a token".into()),
        ..all(5)
    };
    assert!(matches!(
        store.list("alice", &bad).await,
        Err(StoreError::Invalid(_))
    ));
}

pub async fn list_follows_participant_and_status_changes(store: Arc<dyn Store>) {
    let first = task_in(&*store, "t-1", TaskState::Working).await;
    create(
        &*store,
        record("t-2", "ctx", TEAM, TaskState::Working, at(10)),
    )
    .await;
    let q = ListQuery {
        page_size: 10,
        ..Default::default()
    };
    assert_eq!(list_ids(&*store, "alice", &q).await.0, ["t-2", "t-1"]);

    // t-1's status changes later: it moves to the front; bob joins it, alice leaves it.
    let mut changed = first.record.clone();
    changed.status.timestamp = Some(at(20));
    changed.status.state = TaskState::InputRequired;
    changed.extension.participants.retain(|p| p.id != "alice");
    changed.extension.participants.push(Participant::new(
        "bob",
        ParticipantKind::Human,
        Role::Watcher,
    ));
    let mut u = update(&first);
    u.record = Some(changed);
    commit_one(&*store, u).await.expect("update");
    assert_eq!(list_ids(&*store, "ops", &q).await.0, ["t-1", "t-2"]);
    assert_eq!(list_ids(&*store, "alice", &q).await.0, ["t-2"]);
    assert_eq!(list_ids(&*store, "bob", &q).await.0, ["t-1"]);
    let waiting = ListQuery {
        state: Some(TaskState::InputRequired),
        ..q.clone()
    };
    assert_eq!(list_ids(&*store, "ops", &waiting).await.0, ["t-1"]);
    let listed = store.list("bob", &q).await.expect("list");
    assert_eq!(
        listed.tasks[0].record.status.state,
        TaskState::InputRequired,
        "lists give the current task"
    );
}
