//! One lifecycle step of a task as a write: the transition applied to the record (state,
//! sub-state, status message), its status-update event, and the write that commits both,
//! conditional on the states the transition comes from. Written once, for the service's rooms
//! and the runner.

use a2a::{Message, StreamResponse, TaskState};
use chrono::{DateTime, Utc};
use task_core::lifecycle::Transition;
use task_store::{NewTask, StoredTask, TaskRecord, TaskUpdate};

use crate::view;

/// A record moved by one transition, with the event that tells it. Writing it consumes it
/// (the record and event move into the write: nothing is copied on the hot path).
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
    pub fn update(self, stored: &StoredTask) -> TaskUpdate {
        let mut update = TaskUpdate::new(stored.clone());
        self.write_into(&mut update);
        update
    }

    /// Writes this step into an update that already carries other changes (a consumed
    /// message, artifacts): the record, the event after those already there, and the
    /// transition's states as the condition.
    pub fn write_into(self, update: &mut TaskUpdate) {
        update.allowed_states = self.allowed_states.to_vec();
        update.events.push(self.event);
        update.record = Some(self.record);
    }

    /// Writes this step into a task's creation: the record as created, the event after those
    /// already there (a creation has no prior state to condition on).
    pub fn create(self, new: &mut NewTask) {
        new.record = self.record;
        new.events.push(self.event);
    }
}

#[cfg(test)]
mod tests {
    use a2a::TaskState;
    use chrono::Utc;
    use task_core::extension::{Lifecycle, TaskExtension};
    use task_core::lifecycle::{self, LifecycleEvent};
    use task_store::{NewTask, TaskRecord};

    use super::Step;
    use crate::view;

    fn submitted() -> TaskRecord {
        TaskRecord {
            id: "t1".into(),
            context_id: "c1".into(),
            status: view::status(TaskState::Submitted, None, Utc::now()),
            sub_state: None,
            extension: TaskExtension::new("n", "g"),
            agent: Default::default(),
        }
    }

    /// A command's step on a submitted task, and the transition's (to, sub-state, from).
    fn command_step() -> (Step, lifecycle::Transition) {
        let record = submitted();
        let transition = lifecycle::next(
            &TaskState::Submitted,
            None,
            Lifecycle::Conversation,
            LifecycleEvent::CommandApplied,
        )
        .expect("a command applies to a submitted task");
        let answer = view::agent_message(&record, "done");
        let step = Step::new(
            record,
            transition.clone(),
            Some(answer),
            Utc::now(),
            Some("m1"),
        );
        (step, transition)
    }

    #[test]
    fn a_step_moves_the_record_and_tells_it_in_one_conditional_write() {
        let created = NewTask::new(submitted()).applied();
        let (step, transition) = command_step();
        assert_eq!(step.record.status.state, transition.to);
        assert_eq!(step.record.sub_state, transition.sub_state);
        assert_eq!(step.event, view::status_update(&step.record, Some("m1")));

        let (record, event) = (step.record.clone(), step.event.clone());
        let update = step.update(&created);
        assert_eq!(update.allowed_states, transition.from.to_vec());
        assert_eq!(update.record.as_ref(), Some(&record));
        assert_eq!(update.events, vec![event]);
    }

    #[test]
    fn a_step_writes_a_creation_with_its_record_and_event() {
        let (step, _) = command_step();
        let (record, event) = (step.record.clone(), step.event.clone());
        let mut new = NewTask::new(submitted());
        step.create(&mut new);
        assert_eq!(new.record, record);
        assert_eq!(new.events, vec![event]);
    }
}
