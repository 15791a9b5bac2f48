//! The runner's one way to write a task: an update committed with the notes its change of
//! state owes the task's parents (and children created with it), the listener told of the
//! new events, the noted parents run.

use futures::future::BoxFuture;
use task_store::{Change, StoreError, StoredTask, TaskUpdate};

use super::handle::Runner;
use crate::{extension_events, subtasks};

impl Runner {
    /// Commits one update with the notes its change of state owes the task's parents (a change
    /// of its extension told by an event, `extension_events`), and returns the task as it now is (no read back). A parent that ended meanwhile takes no
    /// note: the commit is tried again without them.
    ///
    /// Boxed, as [`commit_with`](Self::commit_with).
    pub(super) fn commit(
        &self,
        update: TaskUpdate,
    ) -> BoxFuture<'_, Result<StoredTask, StoreError>> {
        self.commit_with(update, Vec::new())
    }

    /// [`commit`](Self::commit), with more changes in the same transaction (children).
    ///
    /// Boxed: the update is kilobytes, and every future that awaits a commit inline would
    /// carry it (and copy it whenever that future moves, as a spawned run's does).
    pub(super) fn commit_with(
        &self,
        update: TaskUpdate,
        more: Vec<Change>,
    ) -> BoxFuture<'_, Result<StoredTask, StoreError>> {
        Box::pin(self.commit_boxed(update, more))
    }

    async fn commit_boxed(
        &self,
        mut update: TaskUpdate,
        mut more: Vec<Change>,
    ) -> Result<StoredTask, StoreError> {
        // Before the task as applied is taken: an event appended here counts in it.
        extension_events::announce(&mut update);
        extension_events::announce_all(&mut more);
        let applied = update.applied();
        let has_events = !update.events.is_empty();
        let mut changes = vec![Change::Update(Box::new(update))];
        changes.extend(more);
        let created: Vec<String> = changes
            .iter()
            .filter_map(|c| match c {
                Change::Create(new) => Some(new.record.id.clone()),
                _ => None,
            })
            .collect();
        let noted =
            subtasks::commit(&*self.inner.store, changes, &self.inner.config.agent_id).await?;
        if has_events {
            self.appended(&applied.record.id);
        }
        for task_id in created {
            self.appended(&task_id);
        }
        for parent in noted {
            self.kick(&parent);
        }
        Ok(applied)
    }
}
