//! `InboxStore`: a message for the runner, queued with its id in one transaction that only
//! checks the task item (it never writes it, so it does not race the runner's version).

use std::collections::BTreeMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{
    ConditionCheck, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};
use chrono::{DateTime, Utc};
use task_core::lifecycle::TERMINAL;
use task_store::{Conflict, InboxItem, InboxKey, InboxStore, StoreError, StoreResult, limits};

use crate::commit::{self, Condition};
use crate::error::{Cancellation, DynamoDbError, Guard};
use crate::items::{self, Incomplete, attr, key, s};
use crate::keys;
use crate::schema::SK;
use crate::tasks::whole;
use crate::{CHECK_ATTEMPTS, DynamoDbStore};

/// The check that the task exists and is not in a terminal state. On failure DynamoDB
/// returns the task item (if any), which tells "no such task" from "terminal".
/// The items of one queued message (`json`: its encoded message), chunk 0 first.
pub(crate) fn inbox_chunks(
    pk: &str,
    item: &InboxItem,
    json: &str,
) -> StoreResult<Vec<items::Item>> {
    let at = keys::time(item.key.enqueued_at)?;
    let message_id = &item.key.message_id;
    let mut chunks = items::chunk_items(pk, |c| keys::inbox_sk(&at, c, message_id), json, None);
    for (i, chunk) in chunks.iter_mut().enumerate() {
        chunk.insert(attr::AT.into(), s(at.clone()));
        chunk.insert(attr::MESSAGE_ID.into(), s(message_id.clone()));
        if i == 0 {
            chunk.insert(attr::SENDER.into(), s(item.sender.clone()));
        }
    }
    Ok(chunks)
}

fn task_open(table: &str, task_id: &str) -> StoreResult<TransactWriteItem> {
    let mut condition = Condition::exists().name("#state", attr::STATE);
    let mut placeholders = Vec::new();
    for (i, state) in TERMINAL.iter().enumerate() {
        let placeholder = format!(":terminal{i}");
        condition = condition.value(&placeholder, s(items::state_name(state)?));
        placeholders.push(placeholder);
    }
    condition.expression.push_str(&format!(
        " AND NOT (#state IN ({}))",
        placeholders.join(", ")
    ));
    let check = ConditionCheck::builder()
        .table_name(table)
        .set_key(Some(key(keys::task_pk(task_id), keys::TASK_SK)))
        .condition_expression(condition.expression)
        .set_expression_attribute_names(Some(condition.names))
        .set_expression_attribute_values(Some(condition.values))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .map_err(DynamoDbError::from)?;
    Ok(TransactWriteItem::builder().condition_check(check).build())
}

/// What an inbox chunk item holds.
struct Piece {
    index: usize,
    count: usize,
    text: String,
    sender: Option<String>,
}

/// The writes of queueing `item` (`json`: its encoded message) for `task_id`: the check that
/// the task is open, its message id, its chunks; with their guards. Shared by `enqueue` and
/// a commit's `Change::Enqueue`.
pub(crate) fn enqueue_writes(
    table: &str,
    task_id: &str,
    item: &InboxItem,
    json: &str,
) -> StoreResult<(Vec<TransactWriteItem>, Vec<Guard>)> {
    let pk = keys::task_pk(task_id);
    let message_id = &item.key.message_id;
    let mut writes = vec![task_open(table, task_id)?];
    let mut guards = vec![Guard::TaskOpen(task_id.to_owned())];
    writes.push(commit::put(
        table,
        key(&pk, keys::message_id_sk(message_id)),
        Some(&Condition::not_exists()),
    )?);
    guards.push(Guard::MessageId {
        task_id: task_id.to_owned(),
        message_id: message_id.clone(),
    });
    for chunk in inbox_chunks(&pk, item, json)? {
        writes.push(commit::put(table, chunk, None)?);
        guards.push(Guard::Log {
            task_id: task_id.to_owned(),
            creating: false,
        });
    }
    Ok((writes, guards))
}

impl DynamoDbStore {
    /// A failed "task is open" check without the item DynamoDB should return: read it to
    /// tell a missing task from a terminal one.
    pub(crate) async fn closed_task(&self, task_id: &str) -> StoreResult<StoreError> {
        Ok(
            match self
                .get_item(key(keys::task_pk(task_id), keys::TASK_SK))
                .await?
            {
                None => StoreError::NotFound(format!("task {task_id}")),
                Some(_) => Conflict::TaskTerminal(task_id.to_owned()).into(),
            },
        )
    }
}

#[async_trait]
impl InboxStore for DynamoDbStore {
    async fn enqueue(&self, task_id: &str, item: InboxItem) -> StoreResult<()> {
        // The message's JSON, refused over the size cap like any stored message.
        let json = limits::encode_message(&item.message)?;
        let (writes, guards) = enqueue_writes(&self.table, task_id, &item, &json)?;
        match self.transact(writes, &guards, CHECK_ATTEMPTS).await? {
            Ok(()) => Ok(()),
            Err(Cancellation::Conflict(conflict)) => Err(conflict.into()),
            Err(Cancellation::NotFound(id)) => Err(self.closed_task(&id).await?),
            Err(other) => Err(DynamoDbError::Cancelled {
                operation: "TransactWriteItems",
                reasons: format!("enqueue on task {task_id}: {other:?}"),
            }
            .into()),
        }
    }

    async fn inbox(&self, task_id: &str) -> StoreResult<Vec<InboxItem>> {
        let query = self.prefix_query(task_id, keys::INBOX_PREFIX);
        whole("inbox message", task_id, || async {
            let mut messages: BTreeMap<(DateTime<Utc>, String), Vec<Piece>> = BTreeMap::new();
            for item in self.query_all(query.clone()).await? {
                let sk = items::get_s(&item, SK)?;
                let index = keys::parse_inbox_chunk(sk).ok_or_else(|| {
                    DynamoDbError::corrupt(items::describe_key(&item), "unreadable sort key")
                })?;
                let at = keys::parse_time(items::get_s(&item, attr::AT)?).ok_or_else(|| {
                    DynamoDbError::corrupt(items::describe_key(&item), "unreadable time")
                })?;
                let message_id = items::get_s(&item, attr::MESSAGE_ID)?.to_owned();
                let sender = (index == 0)
                    .then(|| items::get_s(&item, attr::SENDER).map(str::to_owned))
                    .transpose()?;
                let piece = Piece {
                    index,
                    count: items::get_n(&item, attr::CHUNKS)?,
                    text: items::get_s(&item, attr::DOC)?.to_owned(),
                    sender,
                };
                messages.entry((at, message_id)).or_default().push(piece);
            }
            let mut waiting = Vec::with_capacity(messages.len());
            for (n, ((enqueued_at, message_id), mut pieces)) in messages.into_iter().enumerate() {
                pieces.sort_by_key(|p| p.index);
                let count = pieces.first().map_or(0, |p| p.count);
                let whole =
                    pieces.len() == count && pieces.iter().enumerate().all(|(i, p)| p.index == i);
                let sender = pieces.first().and_then(|p| p.sender.clone());
                let (true, Some(sender)) = (whole, sender) else {
                    return Ok(Err(Incomplete(n as u64)));
                };
                let json: String = pieces.into_iter().map(|p| p.text).collect();
                let message = serde_json::from_str(&json).map_err(|e| {
                    DynamoDbError::corrupt(
                        keys::task_pk(task_id),
                        format!("inbox message {message_id}: {e}"),
                    )
                })?;
                waiting.push(InboxItem {
                    key: InboxKey {
                        enqueued_at,
                        message_id,
                    },
                    sender,
                    message,
                });
            }
            Ok(Ok(waiting))
        })
        .await
    }
}
