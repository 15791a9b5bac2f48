//! Messages over task links that the agent does not simply run on: a sub-task's note to its
//! parent (the child's state mirrored, the agent woken when the lifecycle says so) and the
//! answer of a participant's task's assignee (which completes that task).

use chrono::Utc;
use task_core::lifecycle::{self, LifecycleEvent};
use task_store::{InboxItem, StoreError, StoredTask, TaskUpdate};
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
        lifecycle::mirror_sub_task(
            &mut next.extension,
            &note.task_id,
            &note.state,
            note.sub_state,
        );
        let audited = audit(
            item,
            Utc::now(),
            true,
            &format!(
                "sub-task {} is {}",
                note.task_id,
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
