//! The participant index (GSI1) when it and the tasks disagree: entries left behind by an
//! index write that failed, written ahead by a commit still in flight, or pointing at a task
//! that was never created. ListTasks must list exactly the tasks the caller is on, by their
//! current values, in full pages; a commit whose index writes fail must fail whole.
//! The disagreements are made by writing index items straight into the table.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;

use a2a::{Message, TaskState};
use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use chrono::{DateTime, Duration, Utc};
use store_dynamodb::DynamoDbStore;
use store_dynamodb::keys;
use task_core::extension::{Participant, ParticipantKind, Role};
use task_store::contract::{at, record, user_message};
use task_store::*;

type Item = HashMap<String, AttributeValue>;

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn key(task: &str, participant: &str) -> Item {
    HashMap::from([
        ("PK".to_owned(), s(keys::task_pk(task))),
        ("SK".to_owned(), s(keys::participant_sk(participant))),
    ])
}

/// An index entry as the adapter writes one, for `participant` on `task`.
fn entry(task: &str, participant: &str, ts: DateTime<Utc>, state: &str, version: u64) -> Item {
    let mut item = key(task, participant);
    item.insert(
        "GSI1PK".into(),
        s(keys::listing_partition(participant, state)),
    );
    item.insert(
        "GSI1SK".into(),
        s(keys::index_sk(&keys::time(ts).unwrap(), task)),
    );
    item.insert(
        "GSI3PK".into(),
        s(keys::context_partition(participant, "ctx")),
    );
    item.insert("GSI3SK".into(), s(task));
    item.insert("task".into(), s(task));
    item.insert("version".into(), AttributeValue::N(version.to_string()));
    item
}

async fn put(store: &DynamoDbStore, item: Item) {
    store
        .client()
        .put_item()
        .table_name(store.table_name())
        .set_item(Some(item))
        .send()
        .await
        .expect("put an index item");
}

async fn put_many(store: &DynamoDbStore, items: Vec<Item>) {
    for batch in items.chunks(25) {
        let writes = batch
            .iter()
            .map(|item| {
                WriteRequest::builder()
                    .put_request(
                        PutRequest::builder()
                            .set_item(Some(item.clone()))
                            .build()
                            .unwrap(),
                    )
                    .build()
            })
            .collect();
        let out = store
            .client()
            .batch_write_item()
            .request_items(store.table_name(), writes)
            .send()
            .await
            .expect("batch write");
        assert!(out.unprocessed_items().is_none_or(|u| u.is_empty()));
    }
}

/// The base-table index item of (task, participant), if there is one.
async fn stored_entry(store: &DynamoDbStore, task: &str, participant: &str) -> Option<Item> {
    store
        .client()
        .get_item()
        .table_name(store.table_name())
        .set_key(Some(key(task, participant)))
        .consistent_read(true)
        .send()
        .await
        .expect("get an index item")
        .item
}

fn people(ids: &[&str]) -> Vec<(String, Role)> {
    ids.iter()
        .map(|p| ((*p).to_owned(), Role::Watcher))
        .collect()
}

async fn create(
    store: &DynamoDbStore,
    id: &str,
    who: &[&str],
    state: TaskState,
    ts: i64,
) -> StoredTask {
    let who = people(who);
    let refs: Vec<(&str, Role)> = who.iter().map(|(p, r)| (p.as_str(), *r)).collect();
    let new = NewTask::new(record(id, "ctx", &refs, state, at(ts)));
    store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .expect("create");
    store.get(id).await.expect("get").expect("exists")
}

async fn commit(store: &DynamoDbStore, update: TaskUpdate) -> StoreResult<Vec<Committed>> {
    store.commit(vec![Change::Update(Box::new(update))]).await
}

fn all(size: usize) -> ListQuery {
    ListQuery {
        page_size: size,
        ..Default::default()
    }
}

/// A page of `size` of the tasks in `state`.
fn in_state(state: TaskState, size: usize) -> ListQuery {
    ListQuery {
        state: Some(state),
        ..all(size)
    }
}

/// Commits `base` with its record replaced by `record`, and nothing else.
async fn rewrite(
    store: &DynamoDbStore,
    base: StoredTask,
    record: TaskRecord,
) -> StoreResult<Vec<Committed>> {
    let mut u = TaskUpdate::new(base);
    u.record = Some(record);
    commit(store, u).await
}

async fn list(store: &DynamoDbStore, who: &str, query: &ListQuery) -> (Vec<String>, String, usize) {
    let page = store.list(who, query).await.expect("list");
    (
        page.tasks.iter().map(|t| t.record.id.clone()).collect(),
        page.next_page_token,
        page.total_size,
    )
}

/// Every page of `who`'s list, following the tokens; each page but the last is full.
async fn pages(store: &DynamoDbStore, who: &str, query: ListQuery) -> Vec<Vec<String>> {
    let mut query = query;
    let mut pages = Vec::new();
    loop {
        let (ids, token, _) = list(store, who, &query).await;
        pages.push(ids);
        if token.is_empty() {
            return pages;
        }
        query.page_token = Some(token);
    }
}

fn history(n: usize) -> Vec<Message> {
    (0..n)
        .map(|i| user_message(&format!("h-{i}"), "a line"))
        .collect()
}

const WORKING: &str = "TASK_STATE_WORKING";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_of_tasks_the_caller_is_not_on_are_not_listed_and_heal() {
    let (store, _table) = common::fresh_table().await;
    for i in 0..6 {
        create(
            &store,
            &format!("a-{i}"),
            &["alice"],
            TaskState::Working,
            i * 10,
        )
        .await;
    }
    // bob's tasks, between alice's in time, each with a stray entry for alice.
    let mut stray = Vec::new();
    for (i, ts) in [5, 25, 45].into_iter().enumerate() {
        let id = format!("b-{i}");
        create(&store, &id, &["bob"], TaskState::Working, ts).await;
        stray.push(entry(&id, "alice", at(ts), WORKING, 1));
    }
    let alice = ["a-5", "a-4", "a-3", "a-2", "a-1", "a-0"];
    for item in &stray {
        put(&store, item.clone()).await;
    }
    let seen = pages(&store, "alice", all(2)).await;
    assert_eq!(
        seen,
        [["a-5", "a-4"], ["a-3", "a-2"], ["a-1", "a-0"]],
        "full pages of alice's tasks only, in order"
    );
    for i in 0..3 {
        assert_eq!(
            stored_entry(&store, &format!("b-{i}"), "alice").await,
            None,
            "the lists that met b-{i}'s stray entry deleted it"
        );
    }
    assert_eq!(
        list(&store, "alice", &all(10)).await,
        (alice.map(String::from).to_vec(), String::new(), 6)
    );

    // A page that meets every stray entry counts none of them.
    for item in &stray {
        put(&store, item.clone()).await;
    }
    assert_eq!(
        list(&store, "alice", &all(50)).await,
        (alice.map(String::from).to_vec(), String::new(), 6)
    );
    let filtered = in_state(TaskState::Working, 4);
    for item in &stray {
        put(&store, item.clone()).await;
    }
    let (ids, token, _) = list(&store, "alice", &filtered).await;
    assert_eq!(ids, ["a-5", "a-4", "a-3", "a-2"]);
    let rest = ListQuery {
        page_token: Some(token),
        ..filtered
    };
    assert_eq!(list(&store, "alice", &rest).await.0, ["a-1", "a-0"]);
    assert_eq!(list(&store, "bob", &all(10)).await.0, ["b-2", "b-1", "b-0"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_participant_whose_index_delete_failed_does_not_see_the_task() {
    let (store, _table) = common::fresh_table().await;
    let shared = create(&store, "t-1", &["alice", "bob"], TaskState::Working, 0).await;
    create(&store, "t-2", &["bob"], TaskState::Working, 10).await;
    let left_behind = stored_entry(&store, "t-1", "bob")
        .await
        .expect("bob's entry");

    let mut without_bob = shared.record.clone();
    without_bob.extension.participants.retain(|p| p.id != "bob");
    rewrite(&store, shared, without_bob)
        .await
        .expect("bob leaves t-1");
    // The delete of bob's entry "failed": the entry is still there.
    put(&store, left_behind).await;

    let working = in_state(TaskState::Working, 10);
    assert_eq!(
        list(&store, "bob", &working).await,
        (vec!["t-2".to_owned()], String::new(), 1)
    );
    assert_eq!(stored_entry(&store, "t-1", "bob").await, None, "healed");
    assert_eq!(
        list(&store, "bob", &all(10)).await,
        (vec!["t-2".to_owned()], String::new(), 1)
    );
    assert_eq!(list(&store, "alice", &all(10)).await.0, ["t-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_whose_values_lag_lists_the_task_by_its_current_values() {
    let (store, _table) = common::fresh_table().await;
    let first = create(&store, "t-1", &["alice"], TaskState::Working, 0).await;
    let lagging = stored_entry(&store, "t-1", "alice").await.expect("entry");
    let mut done = first.record.clone();
    done.status.state = TaskState::Completed;
    done.status.timestamp = Some(at(10));
    rewrite(&store, first, done).await.expect("complete");
    // The move of alice's entry "failed": it still says working, at the old time.
    put(&store, lagging).await;

    let working = in_state(TaskState::Working, 10);
    assert_eq!(
        list(&store, "alice", &working).await,
        (vec![], String::new(), 0)
    );
    let healed = stored_entry(&store, "t-1", "alice").await.expect("entry");
    assert_eq!(
        healed["GSI1PK"],
        s(keys::listing_partition("alice", "TASK_STATE_COMPLETED"))
    );
    assert_eq!(
        healed["GSI1SK"],
        s(keys::index_sk(&keys::time(at(10)).unwrap(), "t-1"))
    );
    let completed = in_state(TaskState::Completed, 10);
    assert_eq!(
        list(&store, "alice", &completed).await,
        (vec!["t-1".to_owned()], String::new(), 1)
    );
    let recent = ListQuery {
        status_after: Some(at(5)),
        ..all(10)
    };
    assert_eq!(list(&store, "alice", &recent).await.0, ["t-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_written_ahead_by_a_commit_in_flight_is_not_listed_and_kept() {
    let (store, _table) = common::fresh_table().await;
    let task = create(&store, "t-1", &["alice"], TaskState::Working, 0).await;
    // A commit adding bob wrote his entry (for version 2) and has not committed yet.
    put(&store, entry("t-1", "bob", at(0), WORKING, 2)).await;
    assert_eq!(
        list(&store, "bob", &all(10)).await,
        (vec![], String::new(), 0)
    );
    assert!(
        stored_entry(&store, "t-1", "bob").await.is_some(),
        "an entry newer than the task read is not the list's to delete"
    );
    let mut with_bob = task.record.clone();
    with_bob.extension.participants.push(Participant::new(
        "bob",
        ParticipantKind::Human,
        Role::Watcher,
    ));
    rewrite(&store, task, with_bob).await.expect("bob joins");
    assert_eq!(list(&store, "bob", &all(10)).await.0, ["t-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_of_tasks_that_do_not_exist_are_skipped_and_old_ones_deleted() {
    let (store, _table) = common::fresh_table().await;
    let now = Utc::now();
    let mut real = NewTask::new(record(
        "real",
        "ctx",
        &[("alice", Role::Reporter)],
        TaskState::Working,
        now - Duration::hours(3),
    ));
    real.message_ids = vec!["m".into()];
    store
        .commit(vec![Change::Create(Box::new(real))])
        .await
        .expect("create");
    // A creation that failed after writing its entries ahead, long ago; one in flight now.
    put(
        &store,
        entry("ghost-old", "alice", now - Duration::hours(2), WORKING, 1),
    )
    .await;
    put(&store, entry("ghost-new", "alice", now, WORKING, 1)).await;

    assert_eq!(
        list(&store, "alice", &all(10)).await,
        (vec!["real".to_owned()], String::new(), 1)
    );
    assert_eq!(stored_entry(&store, "ghost-old", "alice").await, None);
    assert!(
        stored_entry(&store, "ghost-new", "alice").await.is_some(),
        "a creation may still be under way"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_list_reads_a_bounded_part_of_the_index() {
    let (store, _table) = common::fresh_table().await;
    create(&store, "real", &["alice"], TaskState::Working, 0).await;
    let ghosts = (0..1050)
        .map(|i| entry(&format!("ghost-{i:04}"), "alice", Utc::now(), WORKING, 1))
        .collect();
    put_many(&store, ghosts).await;
    let (ids, token, _) = list(&store, "alice", &all(10)).await;
    assert!(ids.is_empty() && !token.is_empty(), "{ids:?} {token:?}");
    let next = ListQuery {
        page_token: Some(token),
        ..all(10)
    };
    let (ids, token, _) = list(&store, "alice", &next).await;
    assert_eq!((ids, token), (vec!["real".to_owned()], String::new()));
}

/// A participant id whose index key DynamoDB refuses (a sort key over 1024 bytes): a way to
/// make one index write fail. It sorts last, so its entry is one that does not fit in the
/// transaction.
fn unwritable() -> String {
    format!("z{}", "x".repeat(1100))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_index_writes_fail_is_not_applied() {
    let (store, _table) = common::fresh_table().await;
    // 120 participants: the index entries do not fit in the creation's transaction.
    let bad = unwritable();
    let mut ids: Vec<String> = (0..118).map(|i| format!("p{i:03}")).collect();
    ids.push("bob".into());
    ids.push(bad.clone());
    let refs: Vec<(&str, Role)> = ids.iter().map(|p| (p.as_str(), Role::Watcher)).collect();
    let new = NewTask::new(record("big", "ctx", &refs, TaskState::Working, at(0)));
    let created = store.commit(vec![Change::Create(Box::new(new))]).await;
    let stored = store.get("big").await.expect("get");
    if let Some(stored) = &stored {
        for p in &stored.record.extension.participants {
            if p.id != bad {
                assert_eq!(
                    list(&store, &p.id, &all(10)).await.0,
                    ["big"],
                    "{} is on the task (the commit said {created:?})",
                    p.id
                );
            }
        }
    }
    assert!(created.is_err() && stored.is_none(), "{created:?}");
    assert_eq!(
        list(&store, "bob", &all(10)).await,
        (vec![], String::new(), 0)
    );

    // The same for an update that adds them to an existing task.
    let task = create(&store, "t-1", &["alice"], TaskState::Working, 0).await;
    let mut joined = task.record.clone();
    for id in &ids {
        joined.extension.participants.push(Participant::new(
            id.clone(),
            ParticipantKind::Human,
            Role::Watcher,
        ));
    }
    let updated = rewrite(&store, task.clone(), joined).await;
    let now = store.get("t-1").await.expect("get").expect("exists");
    assert!(updated.is_err(), "{updated:?}");
    assert_eq!(now, task, "nothing of the failed commit was applied");
    assert_eq!(
        list(&store, "bob", &all(10)).await,
        (vec![], String::new(), 0)
    );
    assert_eq!(list(&store, "alice", &all(10)).await.0, ["t-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn participants_added_by_a_commit_too_large_for_the_index_see_the_task() {
    let (store, _table) = common::fresh_table().await;
    let ids: Vec<String> = (0..120).map(|i| format!("p{i:03}")).collect();
    let refs: Vec<(&str, Role)> = ids.iter().map(|p| (p.as_str(), Role::Watcher)).collect();
    let new = NewTask::new(record("big", "ctx", &refs, TaskState::Working, at(0)));
    store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .expect("create");
    for id in ["p000", "p060", "p119"] {
        assert_eq!(list(&store, id, &all(10)).await.0, ["big"], "{id}");
    }

    // 99 history messages and the task item fill the transaction: bob's entry goes outside.
    let task = create(&store, "t-1", &["alice"], TaskState::Working, 0).await;
    let mut with_bob = task.record.clone();
    with_bob.extension.participants.push(Participant::new(
        "bob",
        ParticipantKind::Human,
        Role::Watcher,
    ));
    let mut u = TaskUpdate::new(task);
    u.record = Some(with_bob);
    u.history = history(99);
    commit(&store, u).await.expect("bob joins");
    assert_eq!(list(&store, "bob", &all(10)).await.0, ["t-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_index_delete_keeps_an_entry_a_newer_commit_wrote() {
    let (store, _table) = common::fresh_table().await;
    let task = create(&store, "t-1", &["alice", "bob"], TaskState::Working, 0).await;
    // As if a later commit (version 5) had written bob's entry before this one's delete ran.
    put(&store, entry("t-1", "bob", at(0), WORKING, 5)).await;
    let mut without_bob = task.record.clone();
    without_bob.extension.participants.retain(|p| p.id != "bob");
    let mut u = TaskUpdate::new(task);
    u.record = Some(without_bob);
    u.history = history(99);
    commit(&store, u).await.expect("bob leaves");
    assert!(
        stored_entry(&store, "t-1", "bob").await.is_some(),
        "the delete of version 2 leaves the entry of version 5"
    );
    assert_eq!(
        list(&store, "bob", &all(10)).await,
        (vec![], String::new(), 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unlisted_agent_gets_no_entries_or_counts() {
    let (store, _table) = common::fresh_table().await;
    let store = store.without_listing_for("agent");
    let task = create(&store, "t-1", &["alice", "agent"], TaskState::Working, 0).await;
    let mut done = task.record.clone();
    done.status.state = TaskState::Completed;
    done.status.timestamp = Some(at(10));
    rewrite(&store, task, done).await.expect("complete");
    assert!(stored_entry(&store, "t-1", "alice").await.is_some());
    assert_eq!(stored_entry(&store, "t-1", "agent").await, None);
    let counts = |who: &'static str| {
        let store = store.clone();
        async move {
            store
                .client()
                .query()
                .table_name(store.table_name())
                .key_condition_expression("PK = :pk")
                .expression_attribute_values(":pk", s(keys::count_pk(who)))
                .consistent_read(true)
                .send()
                .await
                .expect("query counts")
                .count
        }
    };
    assert_eq!(counts("agent").await, 0, "no count items for the agent");
    assert_eq!(counts("alice").await, 1);
    assert_eq!(
        list(&store, "alice", &in_state(TaskState::Completed, 10)).await,
        (vec!["t-1".to_owned()], String::new(), 1)
    );
}
