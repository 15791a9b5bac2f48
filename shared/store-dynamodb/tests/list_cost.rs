//! A ListTasks page costs the same read units whatever the caller's task count: the same
//! pages over 20 and over 200 tasks of one participant, measured with the store's
//! consumed-capacity meter (`ReturnConsumedCapacity`), under each filter whose cost the
//! design keeps flat (docs/storage.md, "ListTasks: what a page costs").

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use a2a::TaskState;
use futures::{StreamExt, stream};
use store_dynamodb::DynamoDbStore;
use task_core::extension::Role;
use task_store::contract::{at, record};
use task_store::*;

const PAGE: usize = 5;

/// Task `i`: the caller and the agent, working or completed by turns, in a context of its
/// own except the first three, which share one; one second apart.
fn creation(i: usize) -> Change {
    let state = if i.is_multiple_of(2) {
        TaskState::Working
    } else {
        TaskState::Completed
    };
    let context = if i < 3 {
        "shared".to_owned()
    } else {
        format!("ctx-{i:04}")
    };
    let team = [("caller", Role::Reporter), ("agent", Role::Assignee)];
    let seconds = i64::try_from(i).unwrap();
    let rec = record(&format!("task-{i:04}"), &context, &team, state, at(seconds));
    Change::Create(Box::new(NewTask::new(rec)))
}

async fn seeded(n: usize) -> (DynamoDbStore, common::TableGuard) {
    let (store, table) = common::fresh_table().await;
    let batches: Vec<Vec<usize>> = (0..n)
        .collect::<Vec<_>>()
        .chunks(10)
        .map(<[usize]>::to_vec)
        .collect();
    stream::iter(batches)
        .map(|ids| {
            let store = store.clone();
            async move {
                let changes = ids.into_iter().map(creation).collect();
                store.commit(changes).await.expect("seed");
            }
        })
        .buffer_unordered(4)
        .collect::<Vec<_>>()
        .await;
    (store, table)
}

/// The token of the page after the first `skip` tasks.
async fn token_after(store: &DynamoDbStore, skip: usize) -> String {
    let query = ListQuery {
        page_size: skip,
        ..Default::default()
    };
    store
        .list("caller", &query)
        .await
        .expect("list")
        .next_page_token
}

/// Read units of one page of each query, and its `total_size`.
async fn costs(store: &DynamoDbStore, n: usize) -> Vec<(&'static str, f64, usize)> {
    let first = ListQuery {
        page_size: PAGE,
        ..Default::default()
    };
    let queries = [
        ("first page", first.clone()),
        (
            "middle page (token)",
            ListQuery {
                page_token: Some(token_after(store, n / 2).await),
                ..first.clone()
            },
        ),
        (
            "state filter",
            ListQuery {
                state: Some(TaskState::Completed),
                ..first.clone()
            },
        ),
        (
            "context filter",
            ListQuery {
                context_id: Some("shared".into()),
                ..first.clone()
            },
        ),
    ];
    let mut out = Vec::new();
    for (what, query) in queries {
        let before = store.consumed_capacity().read_units;
        let page = store.list("caller", &query).await.expect("list");
        let units = store.consumed_capacity().read_units - before;
        out.push((what, units, page.total_size));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_reads_the_same_units_for_20_tasks_as_for_200() {
    let (small, _small_table) = seeded(20).await;
    let (large, _large_table) = seeded(200).await;
    let small = costs(&small, 20).await;
    let large = costs(&large, 200).await;
    for ((what, units_small, total_small), (_, units_large, total_large)) in
        small.iter().zip(&large)
    {
        println!("{what}: {units_small} RRU at 20 tasks, {units_large} at 200");
        assert!(*units_small > 0.0, "{what}: the meter counted the reads");
        assert_eq!(
            units_small, units_large,
            "{what}: the same read units at 20 and at 200 tasks"
        );
        let expected = match *what {
            "state filter" => (10, 100),
            "context filter" => (3, 3),
            _ => (20, 200),
        };
        assert_eq!((*total_small, *total_large), expected, "{what}: totalSize");
    }
}
