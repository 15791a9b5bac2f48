//! Test support: the table definition read from `infra/template.yaml`, a fresh table per
//! test on the endpoint from the environment, dropped when the test ends.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use aws_sdk_dynamodb::Client;
use store_dynamodb::DynamoDbStore;
use task_store::Store;

pub use store_dynamodb::table::TableDefinition;

/// `Resources.TasksTable.Properties` of `infra/template.yaml`.
pub fn table_definition() -> TableDefinition {
    TableDefinition::from_template().expect("infra/template.yaml defines the table")
}

/// The template as YAML.
pub fn template() -> serde_yaml_ng::Value {
    store_dynamodb::table::template().expect("infra/template.yaml is YAML")
}

// ---------------------------------------------------------------------------------------
// Endpoint and tables
// ---------------------------------------------------------------------------------------

/// The endpoint the tests use; there is none by default, and the tests say so rather than
/// pass silently or write to an AWS account by accident.
pub fn require_endpoint() {
    let set = |name| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    if set("AWS_ENDPOINT_URL_DYNAMODB")
        || set("AWS_ENDPOINT_URL")
        || set("STORE_DYNAMODB_TEST_ON_AWS")
    {
        return;
    }
    panic!(
        "\n\nThe DynamoDB store tests need a DynamoDB endpoint, and AWS_ENDPOINT_URL_DYNAMODB is not set.\n\
         Run them through `make test`, or start DynamoDB Local around them:\n\
         \n    bash localstack/dynamodb-local.sh run -- cargo test -p store-dynamodb\n\
         \n(To run them against the AWS account of your credentials instead, set STORE_DYNAMODB_TEST_ON_AWS=1.)\n"
    );
}

fn table_name() -> String {
    // The test harness names the thread after the test.
    let thread = std::thread::current();
    let test: String = thread
        .name()
        .unwrap_or("test")
        .rsplit("::")
        .next()
        .unwrap_or("test")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(180)
        .collect();
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("tasks-{test}-{}", &random[..8])
}

pub async fn create_table(client: &Client, name: &str) {
    store_dynamodb::table::create_table(client, name)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Deletes the table when dropped (at the end of the test that made it), on a thread of
/// its own: the test's runtime may be shutting down.
pub struct TableGuard {
    name: String,
}

impl Drop for TableGuard {
    fn drop(&mut self) {
        let name = std::mem::take(&mut self.name);
        let deleted = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                let client = Client::new(&store_dynamodb::sdk_config().await);
                store_dynamodb::table::delete_table(&client, &name)
                    .await
                    .map_err(|e| e.to_string())
            })
        })
        .join();
        if let Ok(Err(e)) = deleted {
            eprintln!("warning: {e}");
        }
    }
}

/// A store on a new table made from the template.
pub async fn fresh_table() -> (DynamoDbStore, TableGuard) {
    require_endpoint();
    let config = store_dynamodb::sdk_config().await;
    let client = Client::new(&config);
    let name = table_name();
    create_table(&client, &name).await;
    (
        DynamoDbStore::new(client, name.clone()),
        TableGuard { name },
    )
}

/// The store the contract suite gets: the adapter on its own table, deleted when the test
/// ends (the guard is kept that long).
pub async fn fresh_store() -> (Arc<dyn Store>, TableGuard) {
    let (store, guard) = fresh_table().await;
    (Arc::new(store), guard)
}
