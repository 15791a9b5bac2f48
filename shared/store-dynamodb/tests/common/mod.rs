//! Test support: the table definition read from `infra/template.yaml`, a fresh table per
//! test on the endpoint from the environment, dropped when the test's store is.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use a2a::{Artifact, Message};
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, IndexStatus, KeySchemaElement, KeyType,
    Projection, ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
    TableStatus, TimeToLiveSpecification,
};
use chrono::{DateTime, Duration as Ttl, Utc};
use serde_yaml_ng::Value;
use store_dynamodb::{DynamoDbStore, schema};
use task_store::*;

// ---------------------------------------------------------------------------------------
// The table definition, from the template
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
pub struct Index {
    pub name: String,
    /// (attribute, HASH|RANGE)
    pub keys: Vec<(String, String)>,
    pub projection: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TableDefinition {
    /// (attribute, S|N|B)
    pub attributes: Vec<(String, String)>,
    pub keys: Vec<(String, String)>,
    pub indexes: Vec<Index>,
    pub billing_mode: String,
    pub stream_view_type: Option<String>,
    pub ttl_attribute: Option<String>,
    pub point_in_time_recovery: bool,
}

pub fn template_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../infra/template.yaml")
}

/// The template as YAML. CloudFormation's short-form tags (`!Ref`, `!GetAtt`, …) parse as
/// tagged values, which nothing here needs to read.
pub fn template() -> Value {
    let text = std::fs::read_to_string(template_path()).expect("read infra/template.yaml");
    serde_yaml_ng::from_str(&text).expect("infra/template.yaml is YAML")
}

fn text(value: &Value, what: &str) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {value:?}"))
        .to_owned()
}

fn pairs(list: &Value, name: &str, kind: &str) -> Vec<(String, String)> {
    list.as_sequence()
        .unwrap_or_else(|| panic!("{name} is not a list"))
        .iter()
        .map(|e| {
            (
                text(&e["AttributeName"], "AttributeName"),
                text(&e[kind], kind),
            )
        })
        .collect()
}

/// `Resources.TasksTable.Properties`, as the adapter needs them.
pub fn table_definition() -> TableDefinition {
    let template = template();
    let table = &template["Resources"][schema::TEMPLATE_RESOURCE];
    assert_eq!(
        table["Type"].as_str(),
        Some("AWS::DynamoDB::Table"),
        "TasksTable type"
    );
    let p = &table["Properties"];
    TableDefinition {
        attributes: pairs(
            &p["AttributeDefinitions"],
            "AttributeDefinitions",
            "AttributeType",
        ),
        keys: pairs(&p["KeySchema"], "KeySchema", "KeyType"),
        indexes: p["GlobalSecondaryIndexes"]
            .as_sequence()
            .map(|list| {
                list.iter()
                    .map(|gsi| Index {
                        name: text(&gsi["IndexName"], "IndexName"),
                        keys: pairs(&gsi["KeySchema"], "KeySchema", "KeyType"),
                        projection: text(&gsi["Projection"]["ProjectionType"], "ProjectionType"),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        billing_mode: text(&p["BillingMode"], "BillingMode"),
        stream_view_type: p["StreamSpecification"]["StreamViewType"]
            .as_str()
            .map(str::to_owned),
        ttl_attribute: (p["TimeToLiveSpecification"]["Enabled"].as_bool() == Some(true)).then(
            || {
                text(
                    &p["TimeToLiveSpecification"]["AttributeName"],
                    "TTL AttributeName",
                )
            },
        ),
        point_in_time_recovery: p["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"]
            .as_bool()
            == Some(true),
    }
}

fn key_schema(keys: &[(String, String)]) -> Vec<KeySchemaElement> {
    keys.iter()
        .map(|(name, kind)| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(KeyType::from(kind.as_str()))
                .build()
                .unwrap()
        })
        .collect()
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

/// Creates `name` from the template's definition and waits until it and its indexes are
/// active. TTL is switched on as the template says; point-in-time recovery is not (it has no
/// meaning for a throwaway table, and emulators do not all have it).
pub async fn create_table(client: &Client, name: &str) {
    let def = table_definition();
    let mut create = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::from(def.billing_mode.as_str()))
        .set_attribute_definitions(Some(
            def.attributes
                .iter()
                .map(|(a, t)| {
                    AttributeDefinition::builder()
                        .attribute_name(a)
                        .attribute_type(ScalarAttributeType::from(t.as_str()))
                        .build()
                        .unwrap()
                })
                .collect(),
        ))
        .set_key_schema(Some(key_schema(&def.keys)));
    for index in &def.indexes {
        create = create.global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(&index.name)
                .set_key_schema(Some(key_schema(&index.keys)))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::from(index.projection.as_str()))
                        .build(),
                )
                .build()
                .unwrap(),
        );
    }
    if let Some(view) = &def.stream_view_type {
        create = create.stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::from(view.as_str()))
                .build()
                .unwrap(),
        );
    }
    create.send().await.unwrap_or_else(|e| {
        panic!(
            "CreateTable {name}: {}",
            aws_sdk_dynamodb::error::DisplayErrorContext(&e)
        )
    });
    wait_active(client, name).await;
    if let Some(attribute) = &def.ttl_attribute {
        client
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name(attribute)
                    .enabled(true)
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "UpdateTimeToLive {name}: {}",
                    aws_sdk_dynamodb::error::DisplayErrorContext(&e)
                )
            });
    }
}

async fn wait_active(client: &Client, name: &str) {
    for _ in 0..600 {
        let table = client
            .describe_table()
            .table_name(name)
            .send()
            .await
            .expect("DescribeTable")
            .table
            .expect("table");
        let indexes_active = table
            .global_secondary_indexes()
            .iter()
            .all(|i| i.index_status().is_none_or(|s| *s == IndexStatus::Active));
        if table.table_status() == Some(&TableStatus::Active) && indexes_active {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("table {name} did not become active in 2 minutes");
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
                client
                    .delete_table()
                    .table_name(&name)
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| {
                        format!(
                            "DeleteTable {name}: {}",
                            aws_sdk_dynamodb::error::DisplayErrorContext(&e)
                        )
                    })
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
    async fn put_push_config(&self, config: PushConfig) -> StoreResult<PushConfig> {
        self.store.put_push_config(config).await
    }
    async fn get_push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> StoreResult<Option<PushConfig>> {
        self.store.get_push_config(task_id, config_id).await
    }
    async fn list_push_configs(&self, task_id: &str) -> StoreResult<Vec<PushConfig>> {
        self.store.list_push_configs(task_id).await
    }
    async fn delete_push_config(&self, task_id: &str, config_id: &str) -> StoreResult<()> {
        self.store.delete_push_config(task_id, config_id).await
    }
}
