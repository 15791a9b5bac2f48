//! CancelTask, and the cascade: a canceled task's unfinished sub-tasks on this service are
//! canceled with it, and theirs in turn; the agent is told of each canceled task (a relayed
//! sub-task's remote task gets a `CancelTask` of its own).

use std::collections::HashSet;

use a2a::{CancelTaskRequest, Task};
use chrono::Utc;
use task_core::DomainError;
use task_core::lifecycle::{self, LifecycleEvent, Transition};
use task_core::policy::Action;
use task_store::{Conflict, StoreError, StoredTask, TaskRecord};
use tracing::warn;

use super::base::{MAX_RETRIES, Service};
use crate::commit_step::Step;
use crate::error::ServiceError;
use crate::identity::{self, Who};
use crate::view;

impl Service {
    pub(super) async fn cancel(
        &self,
        caller: &Who,
        req: CancelTaskRequest,
    ) -> Result<Task, ServiceError> {
        for _ in 0..MAX_RETRIES {
            let stored = self.visible(&req.id, caller).await?;
            // A participant who may not cancel is told so as "not cancelable", not "denied".
            identity::authorize(&stored.record.extension, caller, Action::Cancel).map_err(
                |denied| {
                    ServiceError::TaskNotCancelable(format!(
                        "the task cannot be canceled: {denied}"
                    ))
                },
            )?;
            let transition = cancel_transition(&stored.record)?;
            match self
                .cancel_one(&stored, transition, &format!("canceled by {}", caller.id))
                .await
            {
                Ok(canceled) => {
                    self.agent
                        .task_canceled(&canceled, &self.config.agent_id)
                        .await;
                    self.cancel_children(&canceled.record).await;
                    return self.full_view(&canceled, None, true).await;
                }
                Err(StoreError::Conflict(Conflict::TaskChanged(_))) => continue,
                Err(err) => return Err(err.into()),
            }
        }
        Err(ServiceError::Unavailable)
    }

    /// Cancels one task with `transition` (a conditional write from the states it names).
    async fn cancel_one(
        &self,
        stored: &StoredTask,
        transition: Transition,
        why: &str,
    ) -> Result<StoredTask, StoreError> {
        let record = &stored.record;
        let message = view::agent_message(record, why.to_owned());
        let mut next = record.clone();
        next.agent.pending_help = None;
        let update = Step::new(next, transition, Some(message), Utc::now(), None).update(stored);
        let canceled = update.applied();
        self.commit_update(update).await?;
        Ok(canceled)
    }

    /// A canceled task's unfinished sub-tasks on this service are canceled with it, and
    /// theirs in turn (best effort: a child that cannot be canceled is logged and left). Only
    /// along links the service made, which both ends record: a child that does not name its
    /// parent in `parent_tasks` is not the parent's to cancel.
    async fn cancel_children(&self, parent: &TaskRecord) {
        let mut queue: Vec<(String, String)> = unfinished_children(parent)
            .into_iter()
            .map(|child| (parent.id.clone(), child))
            .collect();
        let mut seen = HashSet::new();
        while let Some((parent_id, child_id)) = queue.pop() {
            if !seen.insert(child_id.clone()) {
                continue;
            }
            for _ in 0..MAX_RETRIES {
                let Ok(Some(child)) = self.read(&child_id).await else {
                    break;
                };
                if !names_parent(&child.record, &parent_id) {
                    warn!(task_id = %child_id, parent = %parent_id, "not canceled with a task it does not name as its parent");
                    break;
                }
                if lifecycle::TERMINAL.contains(child.record.state()) {
                    break;
                }
                let Ok(transition) = cancel_transition(&child.record) else {
                    break;
                };
                let why = format!("canceled with its parent {}", parent.id);
                match self.cancel_one(&child, transition, &why).await {
                    Ok(canceled) => {
                        self.agent
                            .task_canceled(&canceled, &self.config.agent_id)
                            .await;
                        queue.extend(
                            unfinished_children(&canceled.record)
                                .into_iter()
                                .map(|grandchild| (child_id.clone(), grandchild)),
                        );
                        break;
                    }
                    Err(StoreError::Conflict(Conflict::TaskChanged(_))) => continue,
                    Err(err) => {
                        warn!(task_id = %child_id, error = %err, "a sub-task was not canceled with its parent");
                        break;
                    }
                }
            }
        }
    }
}

/// The move to CANCELED of a task, or why it cannot be canceled in its state.
fn cancel_transition(record: &TaskRecord) -> Result<Transition, DomainError> {
    lifecycle::next(
        record.state(),
        record.sub_state,
        record.extension.effective_lifecycle(),
        LifecycleEvent::Cancel,
    )
}

/// Whether `child` names `parent_id` among its parents on this service.
fn names_parent(child: &TaskRecord, parent_id: &str) -> bool {
    child
        .extension
        .parent_tasks
        .iter()
        .any(|r| r.agent.is_none() && r.task_id == parent_id)
}

/// The sub-tasks on this service of `record` that have not ended: its own, and the proxies
/// of its relayed ones (a `TaskRef` carrying the remote agent names the proxy until the
/// remote task is known, then the remote task, which the parent maps back to the proxy).
fn unfinished_children(record: &TaskRecord) -> Vec<String> {
    record
        .extension
        .unresolved_sub_tasks()
        .map(|r| record.agent.local_id(&r.task_id).to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use a2a::TaskState;
    use task_core::extension::{TaskExtension, TaskRef};

    use super::*;

    #[test]
    fn the_cascade_reaches_relayed_sub_tasks_through_their_proxies() {
        let remote = |id: &str, state: &str| -> TaskRef {
            serde_json::from_value(serde_json::json!({"task_id": id, "state": state,
                "agent": {"kind": "agent", "id": "ledger"}}))
            .expect("ref")
        };
        let mut extension = TaskExtension::new("Parent", "g");
        extension.sub_tasks = vec![
            TaskRef::local("p.1"),
            remote("p.2", "TASK_STATE_WORKING"),
            remote("r-9", "TASK_STATE_INPUT_REQUIRED"),
            remote("r-10", "TASK_STATE_COMPLETED"),
        ];
        let mut record = TaskRecord {
            id: "p".into(),
            context_id: "c".into(),
            status: view::status(TaskState::Working, None, Utc::now()),
            sub_state: None,
            extension,
            agent: Default::default(),
        };
        record.agent.relays.insert("p.3".into(), "r-9".into());
        record.agent.relays.insert("p.4".into(), "r-10".into());
        assert_eq!(unfinished_children(&record), ["p.1", "p.2", "p.3"]);
    }
}
