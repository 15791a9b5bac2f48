//! The DynamoDB adapter of the store port: `TaskStore + InboxStore + LeaseStore +
//! PushConfigStore` on one table (`infra/template.yaml`, resource `TasksTable`), with
//! conditional writes and `TransactWriteItems`. The design (keys, indexes, conditions,
//! capacity) is written down in `docs/storage.md`, "DynamoDB single-table design".
//!
//! The endpoint comes only from the standard `AWS_ENDPOINT_URL_DYNAMODB` /
//! `AWS_ENDPOINT_URL` variables (read by `aws-config`), so the same code talks to AWS,
//! DynamoDB Local or LocalStack.

mod commit;
mod error;
mod inbox;
mod index;
mod items;
pub mod keys;
mod leases;
mod list;
mod push;
pub mod schema;
pub mod table;
mod tasks;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::query::QueryOutput;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    ConsumedCapacity, KeysAndAttributes, ReturnConsumedCapacity, TransactWriteItem,
};
use aws_smithy_http_client::tls;
use task_store::StoreResult;

pub use error::DynamoDbError;
use error::{Cancellation, Guard};
use items::Item;

/// The SDK configuration every client of the service uses: behavior version latest, an
/// HTTPS client on rustls with ring (no aws-lc, no OpenSSL), standard retries (throttling,
/// 5xx and transport errors, 4 attempts with jittered backoff), and bounded timeouts.
/// Region, credentials and endpoint come from the environment as usual.
pub async fn sdk_config() -> aws_config::SdkConfig {
    let http_client = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::Ring,
        ))
        .build_https();
    aws_config::defaults(BehaviorVersion::latest())
        .http_client(http_client)
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(4)
                .with_initial_backoff(Duration::from_millis(50)),
        )
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(3))
                .operation_attempt_timeout(Duration::from_secs(10))
                .build(),
        )
        .load()
        .await
}

/// Capacity units DynamoDB reported as consumed.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Capacity {
    pub read_units: f64,
    pub write_units: f64,
}

impl Capacity {
    pub fn total(&self) -> f64 {
        self.read_units + self.write_units
    }
}

impl std::ops::Sub for Capacity {
    type Output = Capacity;

    fn sub(self, earlier: Capacity) -> Capacity {
        Capacity {
            read_units: self.read_units - earlier.read_units,
            write_units: self.write_units - earlier.write_units,
        }
    }
}

/// Sums of consumed capacity, in thousandths of a unit.
#[derive(Debug, Default)]
struct Meter {
    read: AtomicU64,
    write: AtomicU64,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Read,
    Write,
}

fn thousandths(units: f64) -> u64 {
    if units.is_finite() && units > 0.0 {
        (units * 1000.0).round() as u64
    } else {
        0
    }
}

/// Attempts of a transaction whose items are in another transaction right now.
const COMMIT_ATTEMPTS: u32 = 3;
/// Enqueue and push-config writes only check the task item, which the runner's commits
/// write: they try harder, since they must not fail because of those commits.
const CHECK_ATTEMPTS: u32 = 8;
/// Attempts of a transaction cancelled for throttling (the SDK retries throttled calls
/// itself; a cancellation reason is not a throttling error to it).
const THROTTLE_ATTEMPTS: u32 = 5;
/// Attempts of a batch call until every key was processed.
const BATCH_ATTEMPTS: u32 = 8;

/// Sleeps before attempt `attempt + 1`: 25 ms doubling per attempt, at most 1 s, jittered.
async fn backoff(attempt: u32) {
    let ceiling = 25u64.saturating_mul(1 << attempt.min(6)).min(1000);
    let random = (uuid::Uuid::new_v4().as_u128() % 1000) as u64;
    let millis = ceiling / 2 + ceiling * random / 2000;
    tokio::time::sleep(Duration::from_millis(millis)).await;
}

/// The store. Cheap to clone: clones share the client and the capacity counters.
#[derive(Clone, Debug)]
pub struct DynamoDbStore {
    client: Client,
    table: Arc<str>,
    meter: Arc<Meter>,
}

impl DynamoDbStore {
    /// A store on `table` using `client` (built once at start-up, e.g. from [`sdk_config`]).
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        let table: String = table.into();
        Self {
            client,
            table: table.into(),
            meter: Arc::default(),
        }
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
        Capacity {
            read_units: self.meter.read.load(Ordering::Relaxed) as f64 / 1000.0,
            write_units: self.meter.write.load(Ordering::Relaxed) as f64 / 1000.0,
        }
    }

    fn count(&self, kind: Kind, consumed: Option<&ConsumedCapacity>) {
        let Some(c) = consumed else { return };
        let (read, write) = match (c.read_capacity_units(), c.write_capacity_units(), kind) {
            (None, None, Kind::Read) => (c.capacity_units().unwrap_or(0.0), 0.0),
            (None, None, Kind::Write) => (0.0, c.capacity_units().unwrap_or(0.0)),
            (read, write, _) => (read.unwrap_or(0.0), write.unwrap_or(0.0)),
        };
        self.meter
            .read
            .fetch_add(thousandths(read), Ordering::Relaxed);
        self.meter
            .write
            .fetch_add(thousandths(write), Ordering::Relaxed);
    }

    fn count_all(&self, kind: Kind, consumed: &[ConsumedCapacity]) {
        for c in consumed {
            self.count(kind, Some(c));
        }
    }

    /// A strongly consistent GetItem.
    async fn get_item(&self, key: Item) -> StoreResult<Option<Item>> {
        let out = self
            .client
            .get_item()
            .table_name(&*self.table)
            .set_key(Some(key))
            .consistent_read(true)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| DynamoDbError::call("GetItem", e))?;
        self.count(Kind::Read, out.consumed_capacity());
        Ok(out.item)
    }

    /// A query on the table, with capacity reporting.
    fn query(&self) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(&*self.table)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
    }

    async fn query_page(&self, query: QueryFluentBuilder) -> StoreResult<QueryOutput> {
        let out = query
            .send()
            .await
            .map_err(|e| DynamoDbError::call("Query", e))?;
        self.count(Kind::Read, out.consumed_capacity());
        Ok(out)
    }

    /// Every item of a query, following `LastEvaluatedKey`.
    async fn query_all(&self, query: QueryFluentBuilder) -> StoreResult<Vec<Item>> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .query_page(query.clone().set_exclusive_start_key(start))
                .await?;
            items.extend(out.items.unwrap_or_default());
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(items),
            }
        }
    }

    /// Strongly consistent BatchGetItem of any number of keys (100 per call, unprocessed
    /// keys retried with backoff); `projection` is an expression with its names.
    async fn batch_get(
        &self,
        keys: Vec<Item>,
        projection: Option<(&str, &[(&str, &str)])>,
    ) -> StoreResult<Vec<Item>> {
        let mut found = Vec::with_capacity(keys.len());
        for batch in keys.chunks(100) {
            let mut request = KeysAndAttributes::builder()
                .set_keys(Some(batch.to_vec()))
                .consistent_read(true);
            if let Some((expression, names)) = projection {
                request = request.projection_expression(expression);
                for (placeholder, name) in names {
                    request = request.expression_attribute_names(*placeholder, *name);
                }
            }
            let mut pending = Some(request.build().map_err(DynamoDbError::from)?);
            let mut attempt = 0;
            while let Some(request) = pending.take() {
                attempt += 1;
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&*self.table, request)
                    .return_consumed_capacity(ReturnConsumedCapacity::Total)
                    .send()
                    .await
                    .map_err(|e| DynamoDbError::call("BatchGetItem", e))?;
                self.count_all(Kind::Read, out.consumed_capacity());
                if let Some(mut responses) = out.responses {
                    found.extend(responses.remove(&*self.table).unwrap_or_default());
                }
                pending = out
                    .unprocessed_keys
                    .and_then(|mut u| u.remove(&*self.table))
                    .filter(|k| !k.keys.is_empty());
                if pending.is_some() {
                    if attempt >= BATCH_ATTEMPTS {
                        return Err(DynamoDbError::Cancelled {
                            operation: "BatchGetItem",
                            reasons: format!("keys still unprocessed after {attempt} attempts"),
                        }
                        .into());
                    }
                    backoff(attempt).await;
                }
            }
        }
        Ok(found)
    }

    /// One `TransactWriteItems`. A cancellation comes back as `Ok(Err(cancellation))` after
    /// the retries its reason deserves: contention up to `attempts` times, throttling up to
    /// [`THROTTLE_ATTEMPTS`] (then a backend error), failed conditions never.
    async fn transact(
        &self,
        items: Vec<TransactWriteItem>,
        guards: &[Guard],
        attempts: u32,
    ) -> StoreResult<Result<(), Cancellation>> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = self
                .client
                .transact_write_items()
                .set_transact_items(Some(items.clone()))
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await;
            let err = match result {
                Ok(out) => {
                    self.count_all(Kind::Write, out.consumed_capacity());
                    return Ok(Ok(()));
                }
                Err(err) => err,
            };
            let cancellation = match err.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(e)) => {
                    error::classify(e.cancellation_reasons(), guards)
                }
                _ => return Err(DynamoDbError::call("TransactWriteItems", err).into()),
            };
            match cancellation {
                Cancellation::Contention if attempt < attempts => backoff(attempt).await,
                Cancellation::Throttled if attempt < THROTTLE_ATTEMPTS => backoff(attempt).await,
                Cancellation::Throttled => {
                    return Err(DynamoDbError::Cancelled {
                        operation: "TransactWriteItems",
                        reasons: format!("throttled {attempt} times"),
                    }
                    .into());
                }
                Cancellation::Other(reasons) => {
                    return Err(DynamoDbError::Cancelled {
                        operation: "TransactWriteItems",
                        reasons,
                    }
                    .into());
                }
                other => return Ok(Err(other)),
            }
        }
    }
}
