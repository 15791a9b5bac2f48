//! Every change of the extension is an event: a write that changes a task's extension object
//! (plan, step states and outputs, criteria, participants and roles, sub-task links and their
//! mirrored states, model and effort) carries the new object in a status update's metadata, so
//! streams, resubscriptions and webhooks follow a task live without polling GetTask.
//!
//! Applied once, where every update is committed (the service's rooms and the runner), so no
//! path that edits the extension can forget it.

use std::collections::HashMap;

use a2a::{StreamResponse, TaskStatusUpdateEvent};
use serde_json::Value;
use task_core::TASK_METADATA_KEY;
use task_store::{Change, TaskUpdate};

/// Makes `update` tell the extension it writes, if that differs from the one it was read
/// with: its last status update carries the new object (`metadata[TASK_METADATA_KEY]`), or,
/// when it has none (a turn's tool calls, a sub-task mirrored), a status update of the task's
/// status as the update leaves it is appended, after the update's other events. Returns
/// whether an event was appended.
pub(crate) fn announce(update: &mut TaskUpdate) -> bool {
    let Some(record) = update.record.as_ref() else {
        return false;
    };
    if record.extension == update.base.record.extension {
        return false;
    }
    let last_status = update
        .events
        .iter_mut()
        .rev()
        .find_map(|event| match event {
            StreamResponse::StatusUpdate(status) => Some(status),
            _ => None,
        });
    if let Some(status) = last_status {
        let metadata = status.metadata.get_or_insert_default();
        if !metadata.contains_key(TASK_METADATA_KEY) {
            metadata.insert(TASK_METADATA_KEY.to_owned(), record.extension.to_value());
        }
        return false;
    }
    let event = TaskStatusUpdateEvent {
        task_id: record.id.clone(),
        context_id: record.context_id.clone(),
        status: record.status.clone(),
        metadata: Some(HashMap::from([(
            TASK_METADATA_KEY.to_owned(),
            record.extension.to_value(),
        )])),
    };
    update.events.push(StreamResponse::StatusUpdate(event));
    true
}

/// [`announce`] for every update among `changes` (a creation's `Task` event already carries
/// its extension).
pub(crate) fn announce_all(changes: &mut [Change]) {
    for change in changes {
        if let Change::Update(update) = change {
            announce(update);
        }
    }
}

/// The extension a status update carries, if it carries one.
pub fn carried(event: &StreamResponse) -> Option<&Value> {
    match event {
        StreamResponse::StatusUpdate(status) => status.metadata.as_ref()?.get(TASK_METADATA_KEY),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use a2a::TaskState;
    use chrono::Utc;
    use task_core::extension::{AcceptanceCriterion, TaskExtension};
    use task_store::{NewTask, StoredTask, TaskRecord, TaskUpdate};

    use super::{announce, carried};
    use crate::view;

    fn stored() -> StoredTask {
        NewTask::new(TaskRecord {
            id: "t1".into(),
            context_id: "c1".into(),
            status: view::status(TaskState::Working, None, Utc::now()),
            sub_state: None,
            extension: TaskExtension::new("n", "g"),
            agent: Default::default(),
        })
        .applied()
    }

    fn with_criterion(stored: &StoredTask) -> TaskRecord {
        let mut record = stored.record.clone();
        record
            .extension
            .acceptance_criteria
            .push(AcceptanceCriterion::new("done"));
        record
    }

    #[test]
    fn an_update_that_changes_nothing_of_the_extension_tells_nothing() {
        let stored = stored();
        let mut update = TaskUpdate::new(stored.clone());
        assert!(!announce(&mut update));
        assert!(update.events.is_empty());

        let mut record = stored.record.clone();
        record.status = view::status(TaskState::Completed, None, Utc::now());
        update.record = Some(record);
        assert!(
            !announce(&mut update),
            "a new status alone is no extension change"
        );
        assert!(update.events.is_empty());
    }

    #[test]
    fn a_change_without_a_status_update_appends_one_carrying_the_extension() {
        let stored = stored();
        let record = with_criterion(&stored);
        let mut update = TaskUpdate::new(stored);
        update.record = Some(record.clone());
        assert!(announce(&mut update));
        assert_eq!(update.events.len(), 1);
        assert_eq!(
            carried(&update.events[0]),
            Some(&record.extension.to_value())
        );
        assert_eq!(
            view::event_state(&update.events[0]),
            Some(&TaskState::Working)
        );
    }

    #[test]
    fn a_change_with_a_status_update_rides_on_the_last_one() {
        let stored = stored();
        let mut record = with_criterion(&stored);
        record.status = view::status(TaskState::Completed, None, Utc::now());
        let mut update = TaskUpdate::new(stored);
        update.events.push(view::status_update(&record, Some("m1")));
        update.record = Some(record.clone());
        assert!(!announce(&mut update), "nothing appended");
        assert_eq!(update.events.len(), 1);
        assert_eq!(
            carried(&update.events[0]),
            Some(&record.extension.to_value())
        );
        assert_eq!(view::event_in_reply_to(&update.events[0]), Some("m1"));
    }
}
