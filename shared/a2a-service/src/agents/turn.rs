//! An agent's turn: what a run works with ([`TurnContext`]), what one turn writes
//! ([`TurnWrite`]), and the narrow [`TurnHost`] behind them (the runner implements it), so an
//! agent commits its turns and reads its transcript without reaching the store.

use a2a::{Artifact, Message};
use async_trait::async_trait;
use serde_json::Value;
use task_store::{InboxItem, StoreError, StoredTask, TaskRecord};

/// What one turn of an agent writes.
#[derive(Debug, Clone, Default)]
pub struct TurnWrite {
    /// The task after the turn (extension, agent state); `None` keeps it.
    pub record: Option<TaskRecord>,
    pub transcript: Vec<Value>,
    /// Artifacts written whole, each with its artifact update event.
    pub artifacts: Vec<Artifact>,
    /// Children to create in the same commit (`spawn_subtask`, `create_task_for_participant`).
    pub children: Vec<task_core::tools::ChildTask>,
    /// The actor must still hold this role (a role change).
    pub actor_role: Option<(String, task_core::extension::Role)>,
}

/// What the runner does for a turn, and all an agent may ask of it.
#[async_trait]
pub trait TurnHost: Send + Sync {
    /// This service's agent id (the actor of the agent's own writes).
    fn agent_id(&self) -> &str;

    /// Commits one turn built by `build` from `task` (WORKING, as last committed); on a
    /// version conflict `task` is read again and `build` runs again on the fresh copy.
    /// Leaves the committed task in `task`; false, writing nothing, once the task is no
    /// longer WORKING.
    async fn commit_turn(
        &self,
        task: &mut StoredTask,
        build: &mut (dyn for<'t> FnMut(&'t StoredTask) -> TurnWrite + Send),
    ) -> Result<bool, StoreError>;

    /// The task's whole transcript, oldest entry first.
    async fn transcript(&self, task_id: &str) -> Result<Vec<Value>, StoreError>;

    /// Shows `event` to the streams of this process that follow the task, after the task's
    /// first `after` stored events, without storing it (a chunk of the model's text).
    fn stream(&self, task_id: &str, after: u64, event: a2a::StreamResponse);
}

/// What an agent's run works with: the task (WORKING, as last committed), the message it
/// runs on, what it reads of it, and [`commit_turn`](Self::commit_turn) for its turns.
pub struct TurnContext<'a> {
    host: &'a dyn TurnHost,
    task: StoredTask,
    item: &'a InboxItem,
    input: String,
}

impl<'a> TurnContext<'a> {
    /// The turn on `item` of `task`, the agent reading `input` of it.
    pub fn new(
        host: &'a dyn TurnHost,
        task: StoredTask,
        item: &'a InboxItem,
        input: String,
    ) -> Self {
        Self {
            host,
            task,
            item,
            input,
        }
    }

    /// The task as the run's last commit left it.
    pub fn into_task(self) -> StoredTask {
        self.task
    }
}

impl TurnContext<'_> {
    pub fn task(&self) -> &StoredTask {
        &self.task
    }

    pub fn message(&self) -> &Message {
        &self.item.message
    }

    /// The participant whose message drives this run.
    pub fn sender(&self) -> &str {
        &self.item.sender
    }

    /// What the agent reads of the message.
    pub fn input(&self) -> &str {
        &self.input
    }

    /// This service's agent id.
    pub fn agent_id(&self) -> &str {
        self.host.agent_id()
    }

    /// The task's whole transcript (earlier turns), oldest first.
    pub async fn transcript(&self) -> Result<Vec<Value>, StoreError> {
        self.host.transcript(&self.task.record.id).await
    }

    /// Shows `event` to this process's streams following the task; nothing is stored.
    pub fn stream(&self, event: a2a::StreamResponse) {
        // After every event the run has committed (its WORKING status among them).
        self.host
            .stream(&self.task.record.id, self.task.counters.events, event);
    }

    /// Commits one turn, built by `build` from the task as it is; if the task changed
    /// meanwhile it is read again and `build` runs again on the fresh copy (so a turn's pure
    /// effects always apply to the current task). Returns false, writing nothing, once the
    /// task is no longer WORKING (canceled, say): the run should end.
    pub async fn commit_turn(
        &mut self,
        mut build: impl FnMut(&StoredTask) -> TurnWrite + Send,
    ) -> Result<bool, StoreError> {
        self.host.commit_turn(&mut self.task, &mut build).await
    }
}
