//! `TaskStore`: each operation delegates to the module that does it (commits: `commit.rs`,
//! reads: `reads.rs`, ListTasks: `list.rs`).

use a2a::{Artifact, Message};
use async_trait::async_trait;
use task_store::{
    AuditEntry, Change, Committed, ListQuery, StoreResult, StoredEvent, StoredTask, TaskPage,
    TaskStore,
};

use crate::DynamoDbStore;

#[async_trait]
impl TaskStore for DynamoDbStore {
    async fn commit(&self, changes: Vec<Change>) -> StoreResult<Vec<Committed>> {
        self.commit_changes(changes).await
    }

    async fn get(&self, task_id: &str) -> StoreResult<Option<StoredTask>> {
        self.get_task(task_id).await
    }

    async fn events(
        &self,
        task_id: &str,
        from_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<StoredEvent>> {
        self.read_events(task_id, from_seq, limit).await
    }

    async fn history(&self, task_id: &str, last: Option<usize>) -> StoreResult<Vec<Message>> {
        self.read_history(task_id, last).await
    }

    async fn transcript(&self, task_id: &str, from: u64) -> StoreResult<Vec<serde_json::Value>> {
        self.read_transcript(task_id, from).await
    }

    async fn artifacts(&self, task_id: &str) -> StoreResult<Vec<Artifact>> {
        self.read_artifacts(task_id).await
    }

    async fn audit(&self, task_id: &str) -> StoreResult<Vec<AuditEntry>> {
        self.read_audit(task_id).await
    }

    async fn list(&self, participant_id: &str, query: &ListQuery) -> StoreResult<TaskPage> {
        self.list_tasks(participant_id, query).await
    }
}
