//! ListTasks against the caller's task count on DynamoDB (docs/performance.md, "ListTasks"),
//! on the endpoint from the environment, a fresh table per size:
//!
//! ```sh
//! cargo bench -p store-dynamodb --bench list_tasks --no-run
//! localstack/dynamodb-local.sh run -- cargo bench -p store-dynamodb --bench list_tasks --offline
//! ```
//!
//! What it seeds and times: `task_store::contract::list_bench`; the read units per page come
//! from `ReturnConsumedCapacity`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use store_dynamodb::DynamoDbStore;
use task_store::Store;
use task_store::contract::list_bench;

fn main() {
    if std::env::var("AWS_ENDPOINT_URL_DYNAMODB").is_err() {
        eprintln!(
            "list_tasks: no AWS_ENDPOINT_URL_DYNAMODB; run it under localstack/dynamodb-local.sh"
        );
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        list_bench::header();
        for n in list_bench::sizes() {
            let table = format!("list-bench-{n}-{}", uuid::Uuid::new_v4().simple());
            // As the service opens it: its agent (the seed's second participant) unlisted.
            let store = DynamoDbStore::from_env(table.clone())
                .await
                .without_listing_for("agent");
            store_dynamodb::table::ensure_table(store.client(), &table)
                .await
                .expect("create the table");
            let shared: Arc<dyn Store> = Arc::new(store.clone());
            let units = || store.consumed_capacity().read_units;
            list_bench::run("DynamoDB Local", shared, Some(&units), n, (20, 16)).await;
            let _ = store
                .client()
                .delete_table()
                .table_name(&table)
                .send()
                .await;
        }
    });
}
