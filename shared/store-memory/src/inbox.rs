//! `InboxStore`: a message queued for a task's runner is checked and written as one
//! `Change::Enqueue` of a commit is ([`commit`](crate::commit)).

use async_trait::async_trait;
use task_store::limits;
use task_store::{InboxItem, InboxStore, StoreResult};

use crate::items::parse;
use crate::{MemoryStore, commit};

#[async_trait]
impl InboxStore for MemoryStore {
    async fn enqueue(&self, task_id: &str, item: InboxItem) -> StoreResult<()> {
        let message = limits::encode_message(&item.message)?;
        let mut items = self.lock()?;
        commit::check_enqueue(&items, task_id, &item.key)?;
        commit::apply_enqueue(&mut items, task_id, &item.key, &item.sender, message)
    }

    async fn inbox(&self, task_id: &str) -> StoreResult<Vec<InboxItem>> {
        let items = self.lock()?;
        let Some(task) = items.tasks.get(task_id) else {
            return Ok(Vec::new());
        };
        task.inbox
            .iter()
            .map(|(key, queued)| {
                Ok(InboxItem {
                    key: key.clone(),
                    sender: queued.sender.clone(),
                    message: parse("inbox item", &queued.message)?,
                })
            })
            .collect()
    }
}
