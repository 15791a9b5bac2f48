//! Messages over task links that the agent does not simply run on: a sub-task's note to its
//! parent (the child's state mirrored, a relayed child's `TaskRef` renamed to its remote
//! task, the agent woken when the lifecycle says so) and the answer of a participant's
//! task's assignee (which completes that task).

use a2a::TaskState;
use chrono::Utc;
use task_core::extension::SubState;
use task_core::lifecycle::{self, LifecycleEvent};
use task_store::{InboxItem, StoreError, StoredTask, TaskRecord, TaskUpdate};
use tracing::debug;

use super::handle::{RunEnd, Runner};
use super::items::{agent_input, audit, consuming, message_text};
use crate::commit_step::Step;
use crate::{subtasks, view};

impl Runner {
    /// A sub-task's note: the child's state mirrored into this task's `TaskRef`, and, when
    /// the child ended or waits, the agent told (the note resumes the run by the lifecycle
    /// rule).
    pub(super) async fn take_note(
        &self,
        stored: &StoredTask,
        item: &InboxItem,
        note: &subtasks::Note,
        end: &mut RunEnd,
    ) -> Result<StoredTask, StoreError> {
        let record = &stored.record;
        if !subtasks::lists_child(record, &note.task_id) {
            // Only a link the service made carries notes (both ends record it).
            let reason = format!(
                "note of task {} dropped: not a sub-task of this task",
                note.task_id
            );
            let update = consuming(stored, item, audit(item, Utc::now(), false, &reason));
            return self.commit(update).await;
        }
        let mut next = record.clone();
        if let Some(remote) = &note.remote_task {
            name_remote_task(&mut next, &note.task_id, remote);
        }
        let listed = next.agent.listed_id(&note.task_id).to_owned();
        lifecycle::mirror_sub_task(&mut next.extension, &listed, &note.state, note.sub_state);
        track_answering(&mut next, note);
        let audited = audit(
            item,
            Utc::now(),
            true,
            &format!(
                "sub-task {listed} is {}",
                lifecycle::short_state_name(&note.state)
            ),
        );
        let lifecycle = record.extension.effective_lifecycle();
        let transition = if note.wake {
            lifecycle::next(
                record.state(),
                record.sub_state,
                lifecycle,
                LifecycleEvent::SubtaskChanged,
            )
            .ok()
        } else {
            None
        };
        match transition {
            Some(t) if t.runs_agent => {
                // The mirror goes with the move to WORKING; the note is what the agent reads.
                let mut mirrored = stored.clone();
                if next != *record {
                    let mut update = TaskUpdate::new(stored.clone());
                    update.record = Some(next);
                    mirrored = self.commit(update).await?;
                }
                let input = agent_input(item, None);
                self.run_agent(&mirrored, item, &t, false, input, end).await
            }
            _ => {
                let mut update = consuming(stored, item, audited);
                if note.wake {
                    update.history = vec![item.message.clone()];
                }
                if next != *record {
                    update.record = Some(next);
                }
                self.commit(update).await
            }
        }
    }

    /// The assignee of a participant's task answered: the task is done, with the answer as
    /// its status message.
    pub(super) async fn assignee_replied(
        &self,
        stored: &StoredTask,
        item: &InboxItem,
    ) -> Result<StoredTask, StoreError> {
        let record = &stored.record;
        let audited = audit(item, Utc::now(), true, "the assignee answered");
        let mut update = consuming(stored, item, audited);
        update.history = vec![item.message.clone()];
        match lifecycle::next(
            record.state(),
            record.sub_state,
            record.extension.effective_lifecycle(),
            LifecycleEvent::AssigneeReplied,
        ) {
            Ok(transition) => {
                let mut next = record.clone();
                next.agent.awaiting_participant = None;
                let text = message_text(&item.message, &item.sender);
                let mut answer = view::agent_message(record, text);
                answer.role = a2a::Role::User;
                let answer = Some(view::bounded(&answer));
                Step::new(
                    next,
                    transition,
                    answer,
                    Utc::now(),
                    Some(item.key.message_id.as_str()),
                )
                .write_into(&mut update);
            }
            Err(err) => {
                debug!(task_id = %record.id, error = %err, "the assignee's message came at a state that completes nothing");
            }
        }
        self.commit(update).await
    }
}

/// A relayed child's remote task is known: the parent's `TaskRef`s of `proxy` (in
/// `sub_tasks` and the steps' `linked_tasks`) name `remote` from now on, and the parent maps
/// the one to the other in its agent state. Nothing changes when they already do.
fn name_remote_task(parent: &mut TaskRecord, proxy: &str, remote: &str) {
    let listed = parent.agent.listed_id(proxy).to_owned();
    if listed == remote {
        return;
    }
    let ext = &mut parent.extension;
    let steps = ext.plan.iter_mut().flat_map(|p| p.steps.iter_mut());
    ext.sub_tasks
        .iter_mut()
        .chain(steps.flat_map(|s| s.linked_tasks.iter_mut()))
        .filter(|r| r.task_id == listed)
        .for_each(|r| r.task_id = remote.to_owned());
    parent
        .agent
        .relays
        .insert(proxy.to_owned(), remote.to_owned());
}

/// A relayed child that waits on its remote's help request and wakes the parent's agent is
/// the one the agent's next reply answers; a note that it moved on ends that.
fn track_answering(parent: &mut TaskRecord, note: &subtasks::Note) {
    let asks = note.wake
        && note.remote_task.is_some()
        && note.state == TaskState::InputRequired
        && note.sub_state == Some(SubState::AwaitingAnswer);
    if asks {
        parent.agent.answering = Some(note.task_id.clone());
    } else if parent.agent.answering.as_deref() == Some(note.task_id.as_str()) {
        parent.agent.answering = None;
    }
}

#[cfg(test)]
mod tests {
    use task_core::extension::{Plan, TaskExtension, TaskRef};

    use super::*;

    fn parent() -> TaskRecord {
        let mut extension = TaskExtension::new("Parent", "g");
        let remote_ref: TaskRef = serde_json::from_value(serde_json::json!(
            {"task_id": "p.1", "agent": {"kind": "agent", "id": "ledger"}}
        ))
        .expect("ref");
        extension.sub_tasks = vec![remote_ref.clone(), TaskRef::local("p.2")];
        let mut plan: Plan = serde_json::from_value(serde_json::json!({"steps": [
            {"id": "s1", "name": "Check", "linked_tasks": [{"task_id": "p.1"}]}
        ]}))
        .expect("plan");
        plan.steps[0].linked_tasks = vec![remote_ref];
        extension.plan = Some(plan);
        TaskRecord {
            id: "p".into(),
            context_id: "c".into(),
            status: view::status(TaskState::Working, None, Utc::now()),
            sub_state: None,
            extension,
            agent: Default::default(),
        }
    }

    fn note(state: TaskState, sub_state: Option<SubState>, remote: Option<&str>) -> subtasks::Note {
        subtasks::Note {
            task_id: "p.1".into(),
            state,
            sub_state,
            wake: true,
            remote_task: remote.map(str::to_owned),
        }
    }

    #[test]
    fn the_ref_of_a_relayed_child_names_its_remote_task() {
        let mut record = parent();
        assert!(subtasks::lists_child(&record, "p.1"));
        name_remote_task(&mut record, "p.1", "r-9");
        let ids: Vec<_> = record
            .extension
            .sub_tasks
            .iter()
            .map(|r| r.task_id.as_str())
            .collect();
        assert_eq!(ids, ["r-9", "p.2"]);
        let plan = record.extension.plan.as_ref().expect("plan");
        assert_eq!(plan.steps[0].linked_tasks[0].task_id, "r-9");
        assert_eq!(
            record.extension.sub_tasks[0]
                .agent
                .as_ref()
                .map(|a| a.id.as_str()),
            Some("ledger")
        );
        // The proxy's notes are still the parent's, and found by either id.
        assert!(subtasks::lists_child(&record, "p.1"));
        assert!(subtasks::lists_child(&record, "p.2"));
        assert!(
            !subtasks::lists_child(&record, "r-9"),
            "the remote id is no task here"
        );
        assert_eq!(record.agent.local_id("r-9"), "p.1");
        let again = record.clone();
        name_remote_task(&mut record, "p.1", "r-9");
        assert_eq!(record, again, "named once");
    }

    #[test]
    fn a_relayed_help_request_is_answered_by_the_next_reply() {
        let mut record = parent();
        let waiting = note(
            TaskState::InputRequired,
            Some(SubState::AwaitingAnswer),
            Some("r-9"),
        );
        track_answering(&mut record, &waiting);
        assert_eq!(record.agent.answering.as_deref(), Some("p.1"));
        // Moving on (answered directly, say) ends it.
        track_answering(&mut record, &note(TaskState::Working, None, Some("r-9")));
        assert_eq!(record.agent.answering, None);
        // A child waiting for its next message, or one not relayed, asks nothing.
        let next = note(
            TaskState::InputRequired,
            Some(SubState::AwaitingNextMessage),
            Some("r-9"),
        );
        track_answering(&mut record, &next);
        let local = note(
            TaskState::InputRequired,
            Some(SubState::AwaitingAnswer),
            None,
        );
        track_answering(&mut record, &local);
        assert_eq!(record.agent.answering, None);
    }
}
