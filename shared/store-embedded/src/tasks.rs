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
    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "commit"))]
    async fn commit(&self, changes: Vec<Change>) -> StoreResult<Vec<Committed>> {
        self.submit(changes).await?.await
    }

    /// Queued for the writer before it returns: the writer applies queued writes in order.
    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "submit"))]
    async fn submit(&self, changes: Vec<Change>) -> StoreResult<PendingCommit> {
        let prepared = prepare(&changes, self.unlisted.as_deref())?;
        let outcome = self.writer.submit(
            prepared,
            |tables, prepared| check_commit(tables, prepared),
            |tables, prepared, ()| apply_commit(tables, prepared),
        )?;
        Ok(Box::pin(outcome))
    }

    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "get"))]
    async fn get(&self, task_id: &str) -> StoreResult<Option<StoredTask>> {
        self.read(|snapshot| reads::task(snapshot, task_id))
    }

    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "get_newer"))]
    async fn get_newer(&self, task_id: &str, version: u64) -> StoreResult<Newer> {
        self.read(|snapshot| reads::newer(snapshot, task_id, version))
    }

    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "events"))]
    async fn events(
        &self,
        task_id: &str,
        from_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<StoredEvent>> {
        self.read(|snapshot| reads::events(snapshot, task_id, from_seq, limit))
    }

    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "history"))]
    async fn history(&self, task_id: &str, last: Option<usize>) -> StoreResult<Vec<Message>> {
        self.read(|snapshot| reads::history(snapshot, task_id, last))
    }

    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "transcript"))]
    async fn transcript(&self, task_id: &str, from: u64) -> StoreResult<Vec<serde_json::Value>> {
        self.read(|snapshot| reads::transcript(snapshot, task_id, from))
    }

    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "artifacts"))]
    async fn artifacts(&self, task_id: &str) -> StoreResult<Vec<Artifact>> {
        self.read(|snapshot| reads::artifacts(snapshot, task_id))
    }

    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "audit"))]
    async fn audit(&self, task_id: &str) -> StoreResult<Vec<AuditEntry>> {
        self.read(|snapshot| reads::audit(snapshot, task_id))
    }

    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "list"))]
    async fn list(&self, participant_id: &str, query: &ListQuery) -> StoreResult<TaskPage> {
        self.list_tasks(participant_id, query)
    }
}
