//! Retention on DynamoDB: the purge marks every item of an eligible task with the table's
//! TTL attribute (DynamoDB Local keeps expired items, so the marks are what is checked), and
//! no item of a live task, or of a finished sub-task whose parent is still live; the task's
//! index entries get `expires` instead, and the pass deletes them with their ListTasks
//! counts once expired.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;

use a2a::TaskState;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::Duration;
use store_dynamodb::DynamoDbStore;
use task_core::extension::TaskRef;
use task_store::contract::{TEAM, at, record, snapshot, status_event, user_message};
use task_store::{
    AuditEntry, Change, ListQuery, NewTask, PushConfigStore, RetentionStore, TaskRecord, TaskStore,
    TaskUpdate,
};

/// An item's SK, `ttl` and `expires`.
type Marks = (String, Option<i64>, Option<i64>);

/// PK → the marks of each of its items, for every item in the table.
async fn items(store: &DynamoDbStore) -> HashMap<String, Vec<Marks>> {
    let mut by_task: HashMap<String, Vec<Marks>> = HashMap::new();
    let mut start = None;
    loop {
        let out = store
            .client()
            .scan()
            .table_name(store.table_name())
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("scan");
        for item in out.items.unwrap_or_default() {
            let text = |name: &str| match item.get(name) {
                Some(AttributeValue::S(s) | AttributeValue::N(s)) => Some(s.clone()),
                _ => None,
            };
            by_task.entry(text("PK").unwrap()).or_default().push((
                text("SK").unwrap(),
                text("ttl").map(|t| t.parse().unwrap()),
                text("expires").map(|t| t.parse().unwrap()),
            ));
        }
        match out.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => return by_task,
        }
    }
}

async fn create(store: &DynamoDbStore, rec: TaskRecord) {
    let mut new = NewTask::new(rec.clone());
    new.events.push(snapshot(&rec));
    new.history
        .push(user_message(&format!("{}-m", rec.id), "hello"));
    new.message_ids.push(format!("{}-m", rec.id));
    new.audit.push(AuditEntry::new(
        at(-5),
        &format!("{}-m", rec.id),
        Some("alice"),
        true,
        "ok",
    ));
    store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .expect("create");
}

#[tokio::test]
async fn every_item_of_an_eligible_task_is_marked_and_no_item_of_a_live_one() {
    let (store, _guard) = common::fresh_table().await;
    create(
        &store,
        record("done", "ctx", TEAM, TaskState::Working, at(-10)),
    )
    .await;
    store
        .put_push_config(
            "alice",
            task_store::PushConfig {
                url: "https://example.com/hook".into(),
                id: Some("cfg".into()),
                task_id: "done".into(),
                token: None,
                authentication: None,
                tenant: None,
            },
        )
        .await
        .expect("push config");
    let base = store.get("done").await.expect("get").expect("exists");
    let mut finished = base.record.clone();
    finished.status.state = TaskState::Completed;
    finished.status.timestamp = Some(at(0));
    let mut update = TaskUpdate::new(base);
    update.events.push(status_event(&finished, "done"));
    update.record = Some(finished);
    store
        .commit(vec![Change::Update(Box::new(update))])
        .await
        .expect("finish");
    create(
        &store,
        record("live", "ctx", TEAM, TaskState::Working, at(0)),
    )
    .await;
    let mut parent = record("p", "ctx", TEAM, TaskState::Working, at(0));
    parent.extension.sub_tasks.push(TaskRef::local("p.1"));
    create(&store, parent).await;
    let mut child = record("p.1", "ctx", TEAM, TaskState::Failed, at(0));
    child.extension.parent_tasks.push(TaskRef::local("p"));
    create(&store, child).await;

    let keep = Duration::days(1);
    let now = at(0) + Duration::days(2);
    let before = store.consumed_capacity();
    let purged = store.purge(now, keep).await.expect("purge");
    let cost = store.consumed_capacity() - before;
    eprintln!(
        "retention pass over 4 tasks, 1 marked: {:.1} read units, {:.1} write units",
        cost.read_units, cost.write_units
    );
    let expiry = (at(0) + keep).timestamp();
    assert_eq!(
        purged.expiring,
        [("done".to_owned(), at(0) + keep)],
        "{purged:?}"
    );

    let table = items(&store).await;
    let done = &table["TASK#done"];
    // Task, 2 events, history, message id, audit, push config and its 2 counters; its 3
    // index entries, expired, are gone.
    assert!(done.len() >= 7, "{done:?}");
    eprintln!("items of the finished task marked: {}", done.len());
    for (sk, ttl, _) in done {
        assert!(
            !sk.starts_with("PART#"),
            "{sk} of the finished task is deleted"
        );
        assert_eq!(*ttl, Some(expiry), "{sk} of the finished task is marked");
    }
    for task in ["TASK#live", "TASK#p", "TASK#p.1"] {
        for (sk, ttl, expires) in &table[task] {
            assert_eq!((*ttl, *expires), (None, None), "{task} {sk} is not marked");
        }
    }
    // A second pass has nothing more to mark.
    let again = store.purge(now, keep).await.expect("purge");
    assert!(again.expiring.is_empty(), "{again:?}");
}

/// `who`'s ListTasks `total_size`, and that of its completed tasks.
async fn totals(store: &DynamoDbStore, who: &str) -> (usize, usize) {
    let mut query = ListQuery {
        page_size: 10,
        ..Default::default()
    };
    let all = store.list(who, &query).await.expect("list").total_size;
    query.state = Some(TaskState::Completed);
    let of_state = store.list(who, &query).await.expect("list").total_size;
    (all, of_state)
}

#[tokio::test]
async fn an_expired_tasks_index_entries_leave_with_their_counts() {
    let (store, _guard) = common::fresh_table().await;
    let store = store.without_listing_for("agent");
    create(
        &store,
        record("done", "ctx", TEAM, TaskState::Completed, at(0)),
    )
    .await;
    create(
        &store,
        record("live", "ctx", TEAM, TaskState::Working, at(0)),
    )
    .await;
    for who in ["alice", "ops"] {
        assert_eq!(totals(&store, who).await, (2, 1), "{who}");
    }
    let keep = Duration::days(1);
    let expiry = (at(0) + keep).timestamp();

    // Marked, not yet expired: the entries carry `expires`, which TTL ignores, and count on.
    let purged = store
        .purge(at(0) + Duration::hours(1), keep)
        .await
        .expect("purge");
    assert_eq!(purged.expiring.len(), 1, "{purged:?}");
    let table = items(&store).await;
    let done = &table["TASK#done"];
    let entries: Vec<&Marks> = done.iter().filter(|m| m.0.starts_with("PART#")).collect();
    assert_eq!(entries.len(), 2, "alice and ops, not the agent: {done:?}");
    for (sk, ttl, expires) in done {
        let expected = if sk.starts_with("PART#") {
            (None, Some(expiry))
        } else {
            (Some(expiry), None)
        };
        assert_eq!((*ttl, *expires), expected, "{sk}");
    }
    assert_eq!(totals(&store, "alice").await, (2, 1));

    // TTL takes the task's other items first; a list that meets the entries leaves them to
    // the pass rather than deleting them without their counts.
    for (sk, _, _) in done.iter().filter(|m| !m.0.starts_with("PART#")) {
        store
            .client()
            .delete_item()
            .table_name(store.table_name())
            .key("PK", AttributeValue::S("TASK#done".into()))
            .key("SK", AttributeValue::S(sk.clone()))
            .send()
            .await
            .expect("delete");
    }
    assert_eq!(totals(&store, "alice").await, (2, 1));

    // Past the expiry: the entries go, each with its count.
    let now = at(0) + Duration::days(2);
    store.purge(now, keep).await.expect("purge");
    for who in ["alice", "ops"] {
        assert_eq!(totals(&store, who).await, (1, 0), "{who}");
    }
    let table = items(&store).await;
    assert!(
        !table.contains_key("TASK#done"),
        "{:?}",
        table.get("TASK#done")
    );
    let live: Vec<&str> = table["TASK#live"].iter().map(|m| m.0.as_str()).collect();
    assert!(
        live.contains(&"PART#alice") && live.contains(&"PART#ops"),
        "{live:?}"
    );
    assert!(
        !table.contains_key("COUNT#agent"),
        "the agent has no counts"
    );

    // Once only: another pass takes nothing more.
    store.purge(now, keep).await.expect("purge");
    assert_eq!(totals(&store, "alice").await, (1, 0));
    let page = ListQuery {
        page_size: 10,
        ..Default::default()
    };
    let listed = store.list("alice", &page).await.expect("list").tasks;
    assert_eq!(listed.len(), 1, "live");
}
