//! `TaskStore`: commits through [`commit`](crate::commit), reads through
//! [`reads`](crate::reads) and [`list`](crate::list), each under the store's one lock.

use a2a::{Artifact, Message};
use async_trait::async_trait;
use task_store::limits;
use task_store::{
    AuditEntry, Change, Committed, ListQuery, StoreResult, StoredEvent, StoredTask, TaskPage,
    TaskStore,
};

use crate::{MemoryStore, commit, list, reads};

/// `submit` is the port's default (it commits before it returns), which orders commits as
/// the port requires.
#[async_trait]
impl TaskStore for MemoryStore {
    async fn commit(&self, changes: Vec<Change>) -> StoreResult<Vec<Committed>> {
        // The size rules, as every adapter applies them; the documents are what is kept.
        let encoded = limits::encode_changes(&changes)?;
        commit::commit(&mut *self.lock()?, &changes, encoded)
    }

    async fn get(&self, task_id: &str) -> StoreResult<Option<StoredTask>> {
        reads::task(&*self.lock()?, task_id)
    }

    async fn events(
        &self,
        task_id: &str,
        from_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<StoredEvent>> {
        reads::events(&*self.lock()?, task_id, from_seq, limit)
    }

    async fn history(&self, task_id: &str, last: Option<usize>) -> StoreResult<Vec<Message>> {
        reads::history(&*self.lock()?, task_id, last)
    }

    async fn artifacts(&self, task_id: &str) -> StoreResult<Vec<Artifact>> {
        reads::artifacts(&*self.lock()?, task_id)
    }

    async fn transcript(&self, task_id: &str, from: u64) -> StoreResult<Vec<serde_json::Value>> {
        reads::transcript(&*self.lock()?, task_id, from)
    }

    async fn audit(&self, task_id: &str) -> StoreResult<Vec<AuditEntry>> {
        reads::audit(&*self.lock()?, task_id)
    }

    async fn list(&self, participant_id: &str, query: &ListQuery) -> StoreResult<TaskPage> {
        list::list(&*self.lock()?, participant_id, query)
    }
}
