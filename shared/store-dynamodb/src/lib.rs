//! The DynamoDB adapter of the store port: `TaskStore + InboxStore + LeaseStore +
//! PushConfigStore` on one table (`infra/template.yaml`, resource `TasksTable`), with
//! conditional writes and `TransactWriteItems`. The design (keys, indexes, conditions,
//! capacity) is written down in `docs/storage.md`, "DynamoDB single-table design".
//!
//! The endpoint comes only from the standard `AWS_ENDPOINT_URL_DYNAMODB` /
//! `AWS_ENDPOINT_URL` variables (read by `aws-config`), so the same code talks to AWS,
//! DynamoDB Local or LocalStack.

mod calls;
mod commit;
mod counts;
mod error;
mod inbox;
mod index;
mod items;
pub mod keys;
mod leases;
mod list;
mod list_context;
mod merge;
pub mod open;
mod plan;
mod push;
mod reads;
mod retention;
mod retention_index;
pub mod schema;
mod tasks;
mod txn;

use std::sync::Arc;

use aws_sdk_dynamodb::Client;

pub use calls::Capacity;
pub use error::DynamoDbError;
/// The old path of [`open`] (creating and describing the table).
pub use open as table;
pub use open::sdk_config;

/// The store. Cheap to clone: clones share the client and the capacity counters.
#[derive(Clone, Debug)]
pub struct DynamoDbStore {
    client: Client,
    table: Arc<str>,
    meter: Arc<calls::Meter>,
    /// A participant given no ListTasks entries or counts (the service's own agent).
    unlisted: Option<Arc<str>>,
}

impl DynamoDbStore {
    /// A store on `table` using `client` (built once at start-up, e.g. from [`sdk_config`]).
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        let table: String = table.into();
        Self {
            client,
            table: table.into(),
            meter: Arc::default(),
            unlisted: None,
        }
    }

    /// Writes no ListTasks entries or counts for `participant` from now on: the service's
    /// own agent, a participant of every task whose id no caller may use, so it never lists.
    /// Its entries would move on every status change of the service and its counts be
    /// changed by every commit. Tasks of stores without it keep the agent's entries, which
    /// nothing reads.
    pub fn without_listing_for(mut self, participant: impl Into<String>) -> Self {
        let participant: String = participant.into();
        self.unlisted = Some(participant.into());
        self
    }

    /// A store on `table` with a client configured by [`sdk_config`] from the environment.
    pub async fn from_env(table: impl Into<String>) -> Self {
        Self::new(Client::new(&sdk_config().await), table)
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn table_name(&self) -> &str {
        &self.table
    }

    /// Capacity consumed by this store (and its clones) since it was made, as DynamoDB
    /// reported it (`ReturnConsumedCapacity=TOTAL` on every call). Writes refused by a
    /// condition are charged by DynamoDB but not reported, so they are not counted.
    pub fn consumed_capacity(&self) -> Capacity {
        self.meter.total()
    }
}
