//! Test support: the table definition read from `infra/template.yaml`, a fresh table per
//! test on the endpoint from the environment, dropped when the test's store is.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use a2a::{Artifact, Message};
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use chrono::{DateTime, Duration as Ttl, Utc};
use store_dynamodb::DynamoDbStore;
use task_store::*;

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

/// The store the contract suite gets: the adapter on its own table, deleted at the end.
pub async fn fresh_store() -> Arc<dyn Store> {
    let (store, guard) = fresh_table().await;
    Arc::new(Tested {
        store,
        _guard: guard,
    })
}

/// The adapter plus the table's guard; every call goes to the adapter.
pub struct Tested {
    pub store: DynamoDbStore,
    _guard: TableGuard,
}

#[async_trait]
impl TaskStore for Tested {
    async fn commit(&self, changes: Vec<Change>) -> StoreResult<Vec<Committed>> {
        self.store.commit(changes).await
    }
    async fn get(&self, task_id: &str) -> StoreResult<Option<StoredTask>> {
        self.store.get(task_id).await
    }
    async fn events(
        &self,
        task_id: &str,
        from_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<StoredEvent>> {
        self.store.events(task_id, from_seq, limit).await
    }
    async fn history(&self, task_id: &str, last: Option<usize>) -> StoreResult<Vec<Message>> {
        self.store.history(task_id, last).await
    }
    async fn artifacts(&self, task_id: &str) -> StoreResult<Vec<Artifact>> {
        self.store.artifacts(task_id).await
    }
    async fn transcript(&self, task_id: &str, from: u64) -> StoreResult<Vec<serde_json::Value>> {
        self.store.transcript(task_id, from).await
    }
    async fn audit(&self, task_id: &str) -> StoreResult<Vec<AuditEntry>> {
        self.store.audit(task_id).await
    }
    async fn list(&self, participant_id: &str, query: &ListQuery) -> StoreResult<TaskPage> {
        self.store.list(participant_id, query).await
    }
}

#[async_trait]
impl InboxStore for Tested {
    async fn enqueue(&self, task_id: &str, item: InboxItem) -> StoreResult<()> {
        self.store.enqueue(task_id, item).await
    }
    async fn inbox(&self, task_id: &str) -> StoreResult<Vec<InboxItem>> {
        self.store.inbox(task_id).await
    }
}

#[async_trait]
impl LeaseStore for Tested {
    async fn acquire(
        &self,
        task_id: &str,
        owner: &str,
        now: DateTime<Utc>,
        ttl: Ttl,
    ) -> StoreResult<Lease> {
        self.store.acquire(task_id, owner, now, ttl).await
    }
    async fn renew(&self, lease: &Lease, now: DateTime<Utc>, ttl: Ttl) -> StoreResult<Lease> {
        self.store.renew(lease, now, ttl).await
    }
    async fn release(&self, lease: &Lease) -> StoreResult<()> {
        self.store.release(lease).await
    }
    async fn expired_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<Vec<String>> {
        self.store.expired_leases(now, limit).await
    }
}

#[async_trait]
impl PushConfigStore for Tested {
    async fn put_push_config(&self, owner: &str, config: PushConfig) -> StoreResult<PushConfig> {
        self.store.put_push_config(owner, config).await
    }
    async fn get_push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> StoreResult<Option<StoredPushConfig>> {
        self.store.get_push_config(task_id, config_id).await
    }
    async fn list_push_configs(&self, task_id: &str) -> StoreResult<Vec<StoredPushConfig>> {
        self.store.list_push_configs(task_id).await
    }
    async fn delete_push_config(
        &self,
        task_id: &str,
        config_id: &str,
        scope: DeleteScope<'_>,
    ) -> StoreResult<bool> {
        self.store
            .delete_push_config(task_id, config_id, scope)
            .await
    }
}
