//! `InboxStore`: messages queued for a task, in `inbox_items` keyed (task, enqueue time,
//! message id); an enqueue is checked and applied as [`crate::commit`] does `Change::Enqueue`.

use async_trait::async_trait;
use chrono::DateTime;
use task_store::{InboxItem, InboxKey, InboxStore, StoreResult, limits};

use crate::EmbeddedStore;
use crate::commit::{apply_enqueue, check_enqueue};
use crate::error::{backend, corrupt};
use crate::items::{INBOX, parse};

#[async_trait]
impl InboxStore for EmbeddedStore {
    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "enqueue"))]
    async fn enqueue(&self, task_id: &str, item: InboxItem) -> StoreResult<()> {
        let message = limits::encode_message(&item.message)?;
        self.writer
            .write(
                (task_id.to_owned(), item, message),
                |tables, (id, item, _)| check_enqueue(tables, id, &item.key),
                |tables, (id, item, message), ()| {
                    apply_enqueue(tables, &id, &item.key, &item.sender, &message)
                },
            )
            .await
    }

    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "inbox"))]
    async fn inbox(&self, task_id: &str) -> StoreResult<Vec<InboxItem>> {
        self.read(|snapshot| {
            snapshot
                .table(INBOX)?
                .range(
                    (task_id, i64::MIN, 0, "")..(task_id, i64::MAX, 0, ""),
                    false,
                )?
                .map(|entry| {
                    let (key, value) = entry.map_err(backend)?;
                    let (_, secs, nanos, message_id) = key.value();
                    let (sender, message) = value.value();
                    let enqueued_at = DateTime::from_timestamp(secs, nanos)
                        .ok_or_else(|| corrupt("inbox key", "time out of range"))?;
                    Ok(InboxItem {
                        key: InboxKey {
                            enqueued_at,
                            message_id: message_id.to_owned(),
                        },
                        sender: sender.to_owned(),
                        message: parse("inbox item", message)?,
                    })
                })
                .collect()
        })
    }
}
