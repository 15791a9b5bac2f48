//! Consumed capacity of the common operations, as DynamoDB reports it
//! (`ReturnConsumedCapacity=TOTAL`). Prints a table (`cargo test -p store-dynamodb --test
//! capacity -- --nocapture`); docs/storage.md quotes the figures measured on DynamoDB Local.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;

use a2a::TaskState;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::Duration;
use store_dynamodb::{Capacity, DynamoDbStore};
use task_store::contract::{TEAM, at, record, snapshot, status_event, user_message};
use task_store::*;

/// A creation as the service makes it: the task, its first event (the snapshot), the
/// creating message in the history, its message id, one index entry per participant.
fn creation(id: &str, seconds: i64) -> Change {
    let rec = record(id, "ctx", TEAM, TaskState::Submitted, at(seconds));
    let mut new = NewTask::new(rec.clone());
    new.events = vec![snapshot(&rec)];
    new.history = vec![user_message(
        &format!("{id}-m0"),
        "Refund order 48213, it arrived broken",
    )];
    new.message_ids = vec![format!("{id}-m0")];
    Change::Create(Box::new(new))
}

/// An item's size by DynamoDB's rules: names and values in UTF-8; a number about one byte
/// per two significant digits plus one; lists and maps 3 bytes plus 1 per element.
fn value_size(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => {
            n.trim_start_matches('-')
                .trim_start_matches('0')
                .len()
                .div_ceil(2)
                + 1
        }
        AttributeValue::L(list) => 3 + list.iter().map(|v| 1 + value_size(v)).sum::<usize>(),
        AttributeValue::M(map) => {
            3 + map
                .iter()
                .map(|(k, v)| 1 + k.len() + value_size(v))
                .sum::<usize>()
        }
        _ => 1,
    }
}

fn item_size(item: &HashMap<String, AttributeValue>) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

/// Write units of one standard write of an item this size (1 KB steps).
fn wcu(size: usize) -> f64 {
    size.div_ceil(1024).max(1) as f64
}

/// Read units of a strongly consistent read of this many bytes (4 KB steps).
fn rcu(size: usize) -> f64 {
    size.div_ceil(4096).max(1) as f64
}

/// The sizes of one task partition's items, by sort-key prefix.
async fn sizes(store: &DynamoDbStore, task: &str) -> HashMap<String, Vec<usize>> {
    let out = store
        .client()
        .query()
        .table_name(store.table_name())
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(":pk", AttributeValue::S(format!("TASK#{task}")))
        .consistent_read(true)
        .send()
        .await
        .expect("query");
    let mut sizes: HashMap<String, Vec<usize>> = HashMap::new();
    for item in out.items() {
        let sk = item["SK"].as_s().expect("SK");
        let kind = sk.split('#').next().unwrap_or(sk).to_owned();
        sizes.entry(kind).or_default().push(item_size(item));
    }
    sizes
}

/// The sizes of a participant's ListTasks count items (one per shard its tasks fall in).
async fn count_sizes(store: &DynamoDbStore, participant: &str) -> Vec<usize> {
    let out = store
        .client()
        .query()
        .table_name(store.table_name())
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(":pk", AttributeValue::S(format!("COUNT#{participant}")))
        .consistent_read(true)
        .send()
        .await
        .expect("query");
    out.items().iter().map(item_size).collect()
}

fn first(sizes: &HashMap<String, Vec<usize>>, kind: &str) -> usize {
    sizes[kind][0]
}

fn last(sizes: &HashMap<String, Vec<usize>>, kind: &str) -> usize {
    *sizes[kind].last().expect("an item")
}

struct Measured {
    /// (operation, reported by the endpoint, AWS by the pricing rules)
    rows: Vec<(String, Capacity, Option<f64>)>,
}

impl Measured {
    fn row(
        &mut self,
        what: &str,
        before: Capacity,
        store: &DynamoDbStore,
        aws: Option<f64>,
    ) -> Capacity {
        let used = store.consumed_capacity() - before;
        self.rows.push((what.to_owned(), used, aws));
        used
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumed_capacity_of_the_common_operations() {
    let (store, _table) = common::fresh_table().await;
    let mut m = Measured { rows: Vec::new() };

    let c = store.consumed_capacity();
    store
        .commit(vec![creation("t-0", 0)])
        .await
        .expect("create");
    let s = sizes(&store, "t-0").await;
    let (task_size, part) = (first(&s, "TASK"), first(&s, "PART"));
    let count = count_sizes(&store, "alice").await[0];
    // A transaction writes each item at twice the standard price; GSI1 gets one entry per
    // participant (projection ALL: the whole index item), GSI3 one too (keys only, under
    // 1 KB); each participant's count item in the task's shard gets an `ADD`.
    let items =
        wcu(task_size) + wcu(first(&s, "EVT")) + wcu(first(&s, "MSG")) + wcu(first(&s, "MID"));
    let aws = 2.0 * (items + 3.0 * wcu(part) + 3.0 * wcu(count)) + 3.0 * wcu(part) + 3.0;
    let what =
        "create a task (1 event, 1 history message, 1 message id, 3 index entries, 3 counts)";
    let create = m.row(what, c, &store, Some(aws));

    let c = store.consumed_capacity();
    let base = store.get("t-0").await.expect("get").expect("exists");
    m.row("get a task", c, &store, Some(rcu(task_size)));

    let c = store.consumed_capacity();
    let mut working = base.record.clone();
    working.status.state = TaskState::Working;
    working.status.timestamp = Some(at(1));
    let mut transition = TaskUpdate::new(base.clone());
    transition.allowed_states = vec![TaskState::Submitted];
    transition.events = vec![status_event(&working, "working on it")];
    transition.record = Some(working);
    let change = Change::Update(Box::new(transition));
    store.commit(vec![change]).await.expect("transition");
    let s = sizes(&store, "t-0").await;
    // The 3 index entries move (new GSI1 keys): each is a delete and an insert in GSI1;
    // their GSI3 keys stay (no GSI3 write). The 3 counts move from SUBMITTED to WORKING.
    let items = wcu(first(&s, "TASK")) + wcu(last(&s, "EVT")) + 3.0 * wcu(part) + 3.0 * wcu(count);
    let aws = 2.0 * items + 3.0 * 2.0 * wcu(part);
    let what = "status transition with its event (3 index entries and 3 counts move)";
    let transition = m.row(what, c, &store, Some(aws));

    let base = store.get("t-0").await.expect("get").expect("exists");
    let c = store.consumed_capacity();
    let mut append = TaskUpdate::new(base);
    append.history = vec![user_message("t-0-m1", "Here is the photo of the damage")];
    let change = Change::Update(Box::new(append));
    store.commit(vec![change]).await.expect("append");
    let s = sizes(&store, "t-0").await;
    let aws = 2.0 * (wcu(first(&s, "TASK")) + wcu(last(&s, "MSG")));
    let append = m.row("append one history message", c, &store, Some(aws));

    let c = store.consumed_capacity();
    store.events("t-0", 0, 100).await.expect("events");
    let aws = rcu(s["EVT"].iter().sum());
    m.row("read the event log (2 events)", c, &store, Some(aws));

    let c = store.consumed_capacity();
    store.history("t-0", None).await.expect("history");
    let aws = rcu(s["MSG"].iter().sum());
    m.row("read the history (2 messages)", c, &store, Some(aws));

    let c = store.consumed_capacity();
    let key = InboxKey {
        enqueued_at: at(2),
        message_id: "t-0-m2".into(),
    };
    let message = user_message("t-0-m2", "Any news?");
    let item = InboxItem {
        key,
        sender: "alice".into(),
        message,
    };
    store.enqueue("t-0", item).await.expect("enqueue");
    let s = sizes(&store, "t-0").await;
    // The condition check on the task item is taken as charged like a transactional write.
    let aws = 2.0 * (wcu(first(&s, "TASK")) + wcu(last(&s, "MID")) + wcu(first(&s, "INBOX")));
    m.row("enqueue one message", c, &store, Some(aws));

    let c = store.consumed_capacity();
    let ttl = Duration::seconds(30);
    let lease = store
        .acquire("t-0", "runner", at(3), ttl)
        .await
        .expect("acquire");
    let lease = store.renew(&lease, at(10), ttl).await.expect("renew");
    store.release(&lease).await.expect("release");
    // Three single-item writes; GSI2 gets an insert, a move (delete + insert), a delete.
    m.row(
        "lease: acquire + renew + release",
        c,
        &store,
        Some(3.0 + 4.0),
    );

    for i in 1..60 {
        let change = creation(&format!("t-{i:02}"), i);
        store.commit(vec![change]).await.expect("create");
    }
    let c = store.consumed_capacity();
    let query = ListQuery {
        page_size: 50,
        ..Default::default()
    };
    let page = store.list("alice", &query).await.expect("list");
    // The counts: one strongly consistent query of alice's shards. GSI1 reads are
    // eventually consistent (half price): 51 entries of the one state partition; then 51
    // strongly consistent task reads (BatchGetItem rounds each item): the page's and the one
    // that shows a next page exists (each entry is checked against its task before it counts).
    let counts: usize = count_sizes(&store, "alice").await.iter().sum();
    let aws = rcu(counts) + 0.5 * rcu(51 * part) + 51.0 * rcu(task_size);
    let what = "list one page of 50 tasks (of 60; with the total count)";
    let list = m.row(what, c, &store, Some(aws));
    assert_eq!((page.tasks.len(), page.total_size), (50, 60));
    assert!(!page.next_page_token.is_empty());

    eprintln!(
        "\nConsumed capacity on {} (table {}):",
        endpoint(),
        store.table_name()
    );
    let (event, message) = (first(&s, "EVT"), first(&s, "MSG"));
    eprintln!(
        "item sizes: task {task_size} B, index entry {part} B, count {count} B, event {event} B, message {message} B"
    );
    eprintln!(
        "| operation | reported read units | reported write units | AWS by the pricing rules |"
    );
    eprintln!("|---|---:|---:|---:|");
    for (what, used, aws) in &m.rows {
        let aws = aws.map_or("-".to_owned(), |a| format!("{a:.1}"));
        eprintln!(
            "| {what} | {:.1} | {:.1} | {aws} |",
            used.read_units, used.write_units
        );
    }
    for (what, used) in [
        ("create", create),
        ("transition", transition),
        ("append", append),
    ] {
        assert!(
            used.write_units > 0.0,
            "{what}: the endpoint reported no consumed capacity"
        );
    }
    assert!(
        list.read_units > 0.0,
        "list: the endpoint reported no consumed capacity"
    );
}

fn endpoint() -> String {
    std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
        .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
        .unwrap_or("AWS".into())
}
