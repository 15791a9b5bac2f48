//! The calls the adapter makes on the table (GetItem, Query, BatchGetItem,
//! TransactWriteItems), each metered for [`Capacity`] and retried as its failures deserve;
//! the attempt counts and the backoff between attempts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::operation::query::QueryOutput;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    ConsumedCapacity, KeysAndAttributes, ReturnConsumedCapacity, TransactWriteItem,
};
use task_store::StoreResult;

use crate::DynamoDbStore;
use crate::error::{self, Cancellation, DynamoDbError, Guard};
use crate::items::{Item, s};
use crate::keys;
use crate::schema::{PK, SK};

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
pub(crate) struct Meter {
    read: AtomicU64,
    write: AtomicU64,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    Read,
    Write,
}

impl Meter {
    /// What was counted so far, in units.
    pub(crate) fn total(&self) -> Capacity {
        Capacity {
            read_units: self.read.load(Ordering::Relaxed) as f64 / 1000.0,
            write_units: self.write.load(Ordering::Relaxed) as f64 / 1000.0,
        }
    }
}

fn thousandths(units: f64) -> u64 {
    if units.is_finite() && units > 0.0 {
        (units * 1000.0).round() as u64
    } else {
        0
    }
}

/// Attempts of a transaction whose items are in another transaction right now.
pub(crate) const COMMIT_ATTEMPTS: u32 = 3;
/// Enqueue and push-config writes only check the task item, which the runner's commits
/// write: they try harder, since they must not fail because of those commits.
pub(crate) const CHECK_ATTEMPTS: u32 = 8;
/// Attempts of a transaction cancelled for throttling (the SDK retries throttled calls
/// itself; a cancellation reason is not a throttling error to it).
const THROTTLE_ATTEMPTS: u32 = 5;
/// Attempts of a batch call until every key was processed.
const BATCH_ATTEMPTS: u32 = 8;

/// Sleeps before attempt `attempt + 1`: 25 ms doubling per attempt, at most 1 s, jittered.
pub(crate) async fn backoff(attempt: u32) {
    let ceiling = 25u64.saturating_mul(1 << attempt.min(6)).min(1000);
    let random = (uuid::Uuid::new_v4().as_u128() % 1000) as u64;
    let millis = ceiling / 2 + ceiling * random / 2000;
    tokio::time::sleep(Duration::from_millis(millis)).await;
}

impl DynamoDbStore {
    pub(crate) fn count(&self, kind: Kind, consumed: Option<&ConsumedCapacity>) {
        let Some(c) = consumed else { return };
        let (read, write) = match (c.read_capacity_units(), c.write_capacity_units(), kind) {
            (None, None, Kind::Read) => (c.capacity_units().unwrap_or(0.0), 0.0),
            (None, None, Kind::Write) => (0.0, c.capacity_units().unwrap_or(0.0)),
            (read, write, _) => (read.unwrap_or(0.0), write.unwrap_or(0.0)),
        };
        telemetry::metrics::dynamodb_capacity(read, write);
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
    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "GetItem"))]
    pub(crate) async fn get_item(&self, key: Item) -> StoreResult<Option<Item>> {
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
    pub(crate) fn query(&self) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(&*self.table)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
    }

    /// A strongly consistent query of one task's items whose sort key (`#sk`) meets
    /// `sort_key_condition`; its values are the caller's to bind.
    pub(crate) fn task_query(&self, task_id: &str, sort_key_condition: &str) -> QueryFluentBuilder {
        self.query()
            .key_condition_expression(format!("#pk = :pk AND {sort_key_condition}"))
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(keys::task_pk(task_id)))
            .consistent_read(true)
    }

    /// A query of one task's items whose sort key starts with `prefix`.
    pub(crate) fn prefix_query(&self, task_id: &str, prefix: &str) -> QueryFluentBuilder {
        self.task_query(task_id, "begins_with(#sk, :prefix)")
            .expression_attribute_values(":prefix", s(prefix))
    }

    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "Query"))]
    pub(crate) async fn query_page(&self, query: QueryFluentBuilder) -> StoreResult<QueryOutput> {
        let out = query
            .send()
            .await
            .map_err(|e| DynamoDbError::call("Query", e))?;
        self.count(Kind::Read, out.consumed_capacity());
        Ok(out)
    }

    /// Every item of a query, following `LastEvaluatedKey`.
    pub(crate) async fn query_all(&self, query: QueryFluentBuilder) -> StoreResult<Vec<Item>> {
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
    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "BatchGetItem"))]
    pub(crate) async fn batch_get(
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
    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "TransactWriteItems"))]
    pub(crate) async fn transact(
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
            if matches!(cancellation, Cancellation::Throttled) {
                telemetry::metrics::dynamodb_throttle("TransactWriteItems");
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use telemetry::metrics::{self, Metric, Mode, Value};

    fn consumed(capacity: &str) -> f64 {
        metrics::installed()
            .expect("installed")
            .snapshot()
            .iter()
            .find(|s| s.metric == Metric::DynamoDbCapacity && s.labels[0] == capacity)
            .map(|s| match s.value {
                Value::Counter(n) => n,
                _ => 0.0,
            })
            .unwrap_or(0.0)
    }

    #[test]
    fn consumed_capacity_is_counted_by_read_and_write() {
        metrics::install(Mode::Prometheus);
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version_latest()
            .build();
        let store = DynamoDbStore::new(aws_sdk_dynamodb::Client::from_conf(config), "t");
        let (read, write) = (consumed("read"), consumed("write"));
        let units = |total: f64| ConsumedCapacity::builder().capacity_units(total).build();
        store.count(Kind::Read, Some(&units(1.5)));
        store.count(Kind::Write, Some(&units(4.0)));
        assert_eq!(consumed("read"), read + 1.5);
        assert_eq!(consumed("write"), write + 4.0);
        assert_eq!(
            store.meter.total().total(),
            5.5,
            "the store's own meter as before"
        );
    }
}
