//! The runner as the host of an agent's turn ([`TurnHost`]): it commits a turn's writes
//! (children created and run with it) and reads the transcript back, and that is all an
//! agent reaches.

use a2a::{StreamResponse, TaskArtifactUpdateEvent, TaskState};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use task_core::tools::{ChildKind, ChildTask};
use task_store::{Change, Conflict, Lease, StoreError, StoredTask, TaskRecord, TaskUpdate};

use super::handle::{MAX_RETRIES, Runner};
use crate::agents::{TurnHost, TurnWrite};
use crate::subtasks;

#[async_trait]
impl TurnHost for Runner {
    fn agent_id(&self) -> &str {
        &self.inner.config.agent_id
    }

    async fn transcript(&self, task_id: &str) -> Result<Vec<Value>, StoreError> {
        self.inner.store.transcript(task_id, 0).await
    }

    fn stream(&self, task_id: &str, after: u64, event: StreamResponse) {
        self.transient(task_id, after, event);
    }

    async fn commit_turn(
        &self,
        task: &mut StoredTask,
        build: &mut (dyn for<'t> FnMut(&'t StoredTask) -> TurnWrite + Send),
    ) -> Result<bool, StoreError> {
        for _ in 0..MAX_RETRIES {
            if *task.record.state() != TaskState::Working {
                return Ok(false);
            }
            let write = build(&*task);
            let now = Utc::now();
            let mut update = TaskUpdate::new(task.clone());
            update.allowed_states = vec![TaskState::Working];
            update.actor_role.clone_from(&write.actor_role);
            update.transcript = write.transcript;
            let record = write.record.clone().unwrap_or_else(|| task.record.clone());
            for artifact in &write.artifacts {
                update
                    .events
                    .push(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                        task_id: record.id.clone(),
                        context_id: record.context_id.clone(),
                        artifact: artifact.clone(),
                        append: None,
                        last_chunk: None,
                        metadata: None,
                    }));
            }
            update.artifacts = write.artifacts;
            update.record = write.record;
            let (children, leases) = self.turn_children(&record, &write.children, now);
            if let Some(parent) = update.record.as_mut() {
                subtasks::mirror_first_states(parent, &children);
            }
            match self.commit_with(update, children).await {
                Ok(applied) => {
                    *task = applied;
                    for lease in leases {
                        self.kick_leased(lease, None);
                    }
                    return Ok(true);
                }
                Err(StoreError::Conflict(Conflict::TaskChanged(_))) => {
                    *task = self.read(&task.record.id).await?;
                }
                Err(err) => return Err(err),
            }
        }
        Err(StoreError::Conflict(Conflict::TaskChanged(
            task.record.id.clone(),
        )))
    }
}

impl Runner {
    /// The children a turn creates, to go in its commit; an agent's child comes with the
    /// lease its run starts on (returned too, so the run starts once the commit lands).
    fn turn_children(
        &self,
        parent: &TaskRecord,
        children: &[ChildTask],
        now: DateTime<Utc>,
    ) -> (Vec<Change>, Vec<Lease>) {
        let mut leases = Vec::new();
        let changes = children
            .iter()
            .map(|child| {
                let lease = match child.kind {
                    ChildKind::Agent { .. } => {
                        let lease = self.new_lease(&child.id);
                        leases.push(lease.clone());
                        Some(lease)
                    }
                    ChildKind::Participant { .. } => None,
                };
                Change::Create(Box::new(subtasks::child_task(
                    parent,
                    child,
                    &self.inner.config.agent_id,
                    lease,
                    now,
                )))
            })
            .collect();
        (changes, leases)
    }
}
