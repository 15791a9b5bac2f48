//! One lifecycle step of a task as a write: the transition applied to the record (state,
//! sub-state, status message), its status-update event, and the write that commits both,
//! conditional on the states the transition comes from. Written once for the service's rooms
//! and the runner.

use a2a::{Message, StreamResponse, TaskState};
use chrono::{DateTime, Utc};
use task_core::lifecycle::Transition;
use task_store::{NewTask, StoredTask, TaskRecord, TaskUpdate};

use crate::view;

/// A record moved by one transition, with the event that tells it.
pub(crate) struct Step {
    /// The record after the transition.
    pub record: TaskRecord,
    /// The status update of the new status.
    pub event: StreamResponse,
    /// The states the write may come from (the transition's).
    allowed_states: &'static [TaskState],
}

impl Step {
    /// `record` moved by `transition` at `now`, its status saying `message`; the event names
    /// the message that caused it (`in_reply_to`).
    pub fn new(
        mut record: TaskRecord,
        transition: Transition,
        message: Option<Message>,
        now: DateTime<Utc>,
        in_reply_to: Option<&str>,
    ) -> Self {
        record.status = view::status(transition.to, message, now);
        record.sub_state = transition.sub_state;
        let event = view::status_update(&record, in_reply_to);
        Self {
            record,
            event,
            allowed_states: transition.from,
        }
    }

    /// The conditional update of `stored` that writes this step: the record and its event,
    /// from the transition's states only. The caller adds what else goes in the same write.
    pub fn update(&self, stored: &StoredTask) -> TaskUpdate {
        let mut update = TaskUpdate::new(stored.clone());
        update.allowed_states = self.allowed_states.to_vec();
        update.events.push(self.event.clone());
        update.record = Some(self.record.clone());
        update
    }

    /// Writes this step into a task's creation: the record as created, the event after those
    /// already there (a creation has no prior state to condition on).
    pub fn create(&self, new: &mut NewTask) {
        new.record = self.record.clone();
        new.events.push(self.event.clone());
    }
}
