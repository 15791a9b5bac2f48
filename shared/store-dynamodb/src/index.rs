//! The participant index (GSI1 by state and time, GSI3 by context): its entries, and the writes of entries that do not fit in
//! a commit's transaction.
//!
//! Every entry carries the task `version` of the write that made it. Entries are hints: a list
//! re-checks each against its task item (`list.rs`), so an entry for a participant who is not
//! on the task shows nothing. What the writes must never do is leave a participant of a task
//! without an entry. Hence:
//!
//! - entries that do not fit are PUT *before* the transaction: a failure fails the commit
//!   before anything of it is applied, and an entry written ahead of a commit that then fails
//!   is one of those harmless hints;
//! - entries that do not fit are DELETED *after* it, retried; one that still fails stays a
//!   harmless hint until a list meets it and deletes it;
//! - no write outside a transaction lowers an entry's version, and deletes outside one only
//!   take entries of the version they know the participant is off (`version <= :v`): a late
//!   delete cannot remove the entry a newer commit wrote.

use std::future::Future;

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{ConsumedCapacity, TransactWriteItem};
use aws_smithy_runtime_api::http::Response;
use futures::{StreamExt, stream};
use task_store::{StoreResult, TaskRecord};

use crate::DynamoDbStore;
use crate::calls::{Kind, backoff};
use crate::error::DynamoDbError;
use crate::items::{self, Item, attr, key, n, s};
use crate::keys;
use crate::schema::{GSI1_PK, GSI1_SK, GSI3_PK, GSI3_SK, PK};
use crate::txn::{self, Condition};

/// Single-item index writes outside a transaction run this many at a time.
const CONCURRENCY: usize = 16;
/// Attempts of one such write, each with the SDK's own retries of throttling and 5xx.
const ATTEMPTS: u32 = 3;

/// Error codes worth another attempt.
const TRANSIENT: &[&str] = &[
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "TransactionConflictException",
    "InternalServerError",
];
const CONDITION_FAILED: &str = "ConditionalCheckFailedException";

/// The index entry of `participant` on `record`, as the commit of `version` writes it: in
/// GSI1 under the task's state by status time, in GSI3 under its context by task id. The
/// state and context are in the index keys only (no copies: a smaller entry).
pub fn entry(record: &TaskRecord, participant: &str, version: u64) -> StoreResult<Item> {
    let status_time = keys::time(record.status.timestamp.unwrap_or_default())?;
    let state = items::state_name(record.state())?;
    let mut item = key(keys::task_pk(&record.id), keys::participant_sk(participant));
    item.insert(
        GSI1_PK.into(),
        s(keys::listing_partition(participant, &state)),
    );
    item.insert(GSI1_SK.into(), s(keys::index_sk(&status_time, &record.id)));
    item.insert(
        GSI3_PK.into(),
        s(keys::context_partition(participant, &record.context_id)),
    );
    item.insert(GSI3_SK.into(), s(record.id.clone()));
    item.insert(attr::TASK.into(), s(record.id.clone()));
    item.insert(attr::VERSION.into(), n(version));
    Ok(item)
}

/// The version an entry was written for; entries written before entries had one count as 0.
pub fn version_of(entry: &Item) -> u64 {
    entry
        .get(attr::VERSION)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The attributes a list orders and filters by differ between two entries.
pub fn values_differ(a: &Item, b: &Item) -> bool {
    [GSI1_PK, GSI1_SK, GSI3_PK]
        .iter()
        .any(|name| a.get(*name) != b.get(*name))
}

/// A participant-index write of a commit. It rides in the transaction when it fits;
/// otherwise a put goes before it and a delete after it.
#[derive(Debug, Clone, PartialEq)]
pub enum IndexWrite {
    Put { item: Item, version: u64 },
    Delete { key: Item, version: u64 },
}

impl IndexWrite {
    pub fn transact_item(&self, table: &str) -> Result<TransactWriteItem, DynamoDbError> {
        match self {
            IndexWrite::Put { item, .. } => txn::put(table, item.clone(), None),
            IndexWrite::Delete { key, .. } => txn::delete(table, key.clone(), None),
        }
    }

    pub fn is_put(&self) -> bool {
        matches!(self, IndexWrite::Put { .. })
    }

    pub fn task_id(&self) -> Option<String> {
        let (IndexWrite::Put { item, .. } | IndexWrite::Delete { key: item, .. }) = self;
        item.get(PK)
            .and_then(|v| v.as_s().ok())
            .and_then(|pk| keys::task_of_pk(pk))
            .map(str::to_owned)
    }
}

/// `version <= :version`, or no version (an entry from before entries had one, or none):
/// the entry is not newer than `version`.
pub fn not_newer(version: u64) -> Condition {
    Condition::new("attribute_not_exists(#ver) OR #ver <= :ver")
        .name("#ver", attr::VERSION)
        .value(":ver", n(version))
}

/// A single conditional write of an index item.
#[derive(Debug, Clone)]
pub enum Single {
    Put { item: Item, condition: Condition },
    Delete { key: Item, condition: Condition },
}

impl Single {
    fn task_id(&self) -> String {
        let (Single::Put { item, .. } | Single::Delete { key: item, .. }) = self;
        item.get(PK)
            .and_then(|v| v.as_s().ok())
            .and_then(|pk| keys::task_of_pk(pk))
            .unwrap_or_default()
            .to_owned()
    }
}

fn transient<E: ProvideErrorMetadata>(err: &SdkError<E, Response>) -> bool {
    match err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ServiceError(e) => {
            e.raw().status().is_server_error()
                || e.err().code().is_some_and(|c| TRANSIENT.contains(&c))
        }
        _ => false,
    }
}

impl DynamoDbStore {
    /// Runs one call until it succeeds, its condition fails (`Ok(false)`), or it fails in a
    /// way another attempt will not mend.
    async fn attempt<E, F, Fut>(&self, operation: &'static str, call: F) -> StoreResult<bool>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Option<ConsumedCapacity>, SdkError<E, Response>>>,
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match call().await {
                Ok(consumed) => {
                    self.count(Kind::Write, consumed.as_ref());
                    return Ok(true);
                }
                Err(err) if err.code() == Some(CONDITION_FAILED) => return Ok(false),
                Err(err) if attempt < ATTEMPTS && transient(&err) => {
                    backoff(attempt).await;
                }
                Err(err) => return Err(DynamoDbError::call(operation, err).into()),
            }
        }
    }

    /// One conditional write; `Ok(false)` when its condition failed.
    pub(crate) async fn write_single(&self, write: &Single) -> StoreResult<bool> {
        let table = &*self.table;
        let capacity = aws_sdk_dynamodb::types::ReturnConsumedCapacity::Total;
        match write {
            Single::Put { item, condition } => {
                self.attempt("PutItem", || async {
                    self.client
                        .put_item()
                        .table_name(table)
                        .set_item(Some(item.clone()))
                        .condition_expression(&condition.expression)
                        .set_expression_attribute_names(Some(condition.names.clone()))
                        .set_expression_attribute_values(Some(condition.values.clone()))
                        .return_consumed_capacity(capacity.clone())
                        .send()
                        .await
                        .map(|out| out.consumed_capacity)
                })
                .await
            }
            Single::Delete { key, condition } => {
                self.attempt("DeleteItem", || async {
                    self.client
                        .delete_item()
                        .table_name(table)
                        .set_key(Some(key.clone()))
                        .condition_expression(&condition.expression)
                        .set_expression_attribute_names(Some(condition.names.clone()))
                        .set_expression_attribute_values(Some(condition.values.clone()))
                        .return_consumed_capacity(capacity.clone())
                        .send()
                        .await
                        .map(|out| out.consumed_capacity)
                })
                .await
            }
        }
    }

    /// Runs writes concurrently; the result of each, in no particular order.
    pub(crate) async fn write_all(&self, writes: Vec<Single>) -> Vec<(Single, StoreResult<bool>)> {
        stream::iter(writes)
            .map(|write| async move {
                let result = self.write_single(&write).await;
                (write, result)
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await
    }

    /// The entries that did not fit, before the transaction. An entry newer than this
    /// commit's is left as it is (the task moved on: the transaction will say so).
    pub(crate) async fn write_index_before(&self, puts: Vec<IndexWrite>) -> StoreResult<()> {
        let writes = puts
            .into_iter()
            .filter_map(|write| match write {
                IndexWrite::Put { item, version } => Some(Single::Put {
                    item,
                    condition: not_newer(version),
                }),
                IndexWrite::Delete { .. } => None,
            })
            .collect();
        for (_, result) in self.write_all(writes).await {
            result?;
        }
        Ok(())
    }

    /// The deletes that did not fit, after the transaction. One that still fails leaves an
    /// entry lists skip and delete when they meet it; the commit stands.
    pub(crate) async fn write_index_after(&self, deletes: Vec<IndexWrite>) {
        let writes = deletes
            .into_iter()
            .filter_map(|write| match write {
                IndexWrite::Delete { key, version } => Some(Single::Delete {
                    key,
                    condition: not_newer(version),
                }),
                IndexWrite::Put { .. } => None,
            })
            .collect();
        for (write, result) in self.write_all(writes).await {
            if let Err(error) = result {
                tracing::warn!(task_id = %write.task_id(), %error, table = %self.table,
                    "an index entry of a participant who left was not deleted; lists skip it and delete it when they meet it");
            }
        }
    }
}
