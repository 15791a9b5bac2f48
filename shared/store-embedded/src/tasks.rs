//! `TaskStore`: commits go to the writer thread ([`crate::commit`]), reads to the read layer
//! ([`crate::reads`], [`crate::list`]).

use a2a::{Artifact, Message};
use async_trait::async_trait;
use task_store::{
    AuditEntry, Change, Committed, ListQuery, Newer, PendingCommit, StoreResult, StoredEvent,
    StoredTask, TaskPage, TaskStore,
};

use crate::commit::{apply_commit, check_commit, prepare};
use crate::{EmbeddedStore, reads};

#[async_trait]
impl TaskStore for EmbeddedStore {
    async fn commit(&self, changes: Vec<Change>) -> StoreResult<Vec<Committed>> {
        self.submit(changes).await?.await
    }

    /// Queued for the writer before it returns: the writer applies queued writes in order.
    async fn submit(&self, changes: Vec<Change>) -> StoreResult<PendingCommit> {
        let prepared = prepare(&changes, self.unlisted.as_deref())?;
        let outcome = self.writer.submit(
            prepared,
            |tables, prepared| check_commit(tables, prepared),
            |tables, prepared, ()| apply_commit(tables, prepared),
        )?;
        Ok(Box::pin(outcome))
    }

    async fn get(&self, task_id: &str) -> StoreResult<Option<StoredTask>> {
        self.read(|snapshot| reads::task(snapshot, task_id))
    }

    async fn get_newer(&self, task_id: &str, version: u64) -> StoreResult<Newer> {
        self.read(|snapshot| reads::newer(snapshot, task_id, version))
    }

    async fn events(
        &self,
        task_id: &str,
        from_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<StoredEvent>> {
        self.read(|snapshot| reads::events(snapshot, task_id, from_seq, limit))
    }

    async fn history(&self, task_id: &str, last: Option<usize>) -> StoreResult<Vec<Message>> {
        self.read(|snapshot| reads::history(snapshot, task_id, last))
    }

    async fn transcript(&self, task_id: &str, from: u64) -> StoreResult<Vec<serde_json::Value>> {
        self.read(|snapshot| reads::transcript(snapshot, task_id, from))
    }

    async fn artifacts(&self, task_id: &str) -> StoreResult<Vec<Artifact>> {
        self.read(|snapshot| reads::artifacts(snapshot, task_id))
    }

    async fn audit(&self, task_id: &str) -> StoreResult<Vec<AuditEntry>> {
        self.read(|snapshot| reads::audit(snapshot, task_id))
    }

    async fn list(&self, participant_id: &str, query: &ListQuery) -> StoreResult<TaskPage> {
        self.list_tasks(participant_id, query)
    }
}
