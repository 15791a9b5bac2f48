//! `InboxStore`: a message for the runner, queued with its id in one transaction that only
//! checks the task item (it never writes it, so it does not race the runner's version).

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use task_store::{InboxItem, InboxKey, InboxStore, StoreResult, limits};

use crate::DynamoDbStore;
use crate::calls::CHECK_ATTEMPTS;
use crate::error::{Cancellation, DynamoDbError};
use crate::items::{self, Incomplete, attr};
use crate::keys;
use crate::reads::whole;
use crate::schema::SK;
use crate::txn;

/// What an inbox chunk item holds.
struct Piece {
    index: usize,
    count: usize,
    text: String,
    sender: Option<String>,
}

#[async_trait]
impl InboxStore for DynamoDbStore {
    async fn enqueue(&self, task_id: &str, item: InboxItem) -> StoreResult<()> {
        // The message's JSON, refused over the size cap like any stored message.
        let json = limits::encode_message(&item.message)?;
        let (writes, guards) = txn::enqueue_writes(&self.table, task_id, &item, &json)?;
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
