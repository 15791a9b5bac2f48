//! ListTasks' index as every adapter keeps it, so that a page and its `total_size` cost the
//! same whatever the participant's task count: one entry per (participant, task) ordered by
//! status time under the task's state, one per (participant, context, task), and counts per
//! participant (all its tasks, and per state) changed in the same commit as the entries.
//! This module says which entries and counts a commit changes; each adapter stores them.

use std::collections::BTreeMap;

use a2a::TaskState;
use chrono::{DateTime, Utc};

use crate::model::TaskRecord;

/// Where a task stands in one participant's listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub participant: String,
    /// [`state_key`] of the task's state.
    pub state: String,
    pub context: String,
    pub status_time: DateTime<Utc>,
}

/// A state as index keys and counts name it: its ProtoJSON name (`TASK_STATE_WORKING`).
pub fn state_key(state: &TaskState) -> String {
    // Written out (every commit names states): `state_keys_are_the_protojson_names` checks
    // them against the serialization.
    match state {
        TaskState::Unspecified => "TASK_STATE_UNSPECIFIED",
        TaskState::Submitted => "TASK_STATE_SUBMITTED",
        TaskState::Working => "TASK_STATE_WORKING",
        TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
        TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        TaskState::Completed => "TASK_STATE_COMPLETED",
        TaskState::Canceled => "TASK_STATE_CANCELED",
        TaskState::Failed => "TASK_STATE_FAILED",
        TaskState::Rejected => "TASK_STATE_REJECTED",
    }
    .to_owned()
}

/// Every state a task can be in, as [`state_key`] names them: the partitions a listing
/// without a state filter merges.
pub fn state_keys() -> Vec<String> {
    [
        TaskState::Unspecified,
        TaskState::Submitted,
        TaskState::Working,
        TaskState::InputRequired,
        TaskState::AuthRequired,
        TaskState::Completed,
        TaskState::Canceled,
        TaskState::Failed,
        TaskState::Rejected,
    ]
    .iter()
    .map(state_key)
    .collect()
}

/// The task's entry for each of its participants (one per distinct participant id).
pub fn listed(record: &TaskRecord) -> Vec<Listed> {
    let state = state_key(record.state());
    let status_time = record.status_timestamp().unwrap_or_default();
    let mut out: Vec<Listed> = Vec::new();
    for (participant, _) in record.roles() {
        if out.iter().any(|l| l.participant == participant) {
            continue;
        }
        out.push(Listed {
            participant: participant.to_owned(),
            state: state.clone(),
            context: record.context_id.clone(),
            status_time,
        });
    }
    out
}

/// What a commit of a task changes in the listing: entries to remove (the task's place
/// before, for participants whose place moved or who left) and entries to add.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListingChange {
    pub removed: Vec<Listed>,
    pub added: Vec<Listed>,
}

impl ListingChange {
    /// From the task as it was (`None`: a creation) to the task as written. Participants
    /// whose entry stays the same appear in neither list.
    pub fn between(before: Option<&TaskRecord>, after: &TaskRecord) -> Self {
        let old = before.map(listed).unwrap_or_default();
        let new = listed(after);
        Self {
            removed: old.iter().filter(|l| !new.contains(l)).cloned().collect(),
            added: new.iter().filter(|l| !old.contains(l)).cloned().collect(),
        }
    }

    /// The change without `participant`'s entries: the service's own agent is on every task
    /// and never lists, so a store may keep neither its entries nor its counts.
    #[must_use]
    pub fn without(mut self, participant: Option<&str>) -> Self {
        if let Some(p) = participant {
            self.removed.retain(|l| l.participant != p);
            self.added.retain(|l| l.participant != p);
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.added.is_empty()
    }

    /// The counts this change moves, non-zero only: (participant, `None` for all its tasks
    /// or `Some(state)`) → delta. A task that only moves in time, or changes context, moves
    /// no count.
    pub fn count_deltas(&self) -> BTreeMap<(String, Option<String>), i64> {
        let mut deltas: BTreeMap<(String, Option<String>), i64> = BTreeMap::new();
        for (entries, sign) in [(&self.removed, -1), (&self.added, 1)] {
            for l in entries {
                *deltas.entry((l.participant.clone(), None)).or_default() += sign;
                *deltas
                    .entry((l.participant.clone(), Some(l.state.clone())))
                    .or_default() += sign;
            }
        }
        deltas.retain(|_, d| *d != 0);
        deltas
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use task_core::extension::{Participant, ParticipantKind, Role, TaskExtension};

    use super::*;

    fn rec(state: TaskState, secs: i64, who: &[&str]) -> TaskRecord {
        let mut extension = TaskExtension::new("t", "g");
        extension.participants = who
            .iter()
            .map(|p| Participant::new(*p, ParticipantKind::Human, Role::Watcher))
            .collect();
        TaskRecord {
            id: "t".into(),
            context_id: "c".into(),
            status: a2a::TaskStatus {
                state,
                message: None,
                timestamp: DateTime::from_timestamp(secs, 0),
            },
            sub_state: None,
            extension,
            agent: Default::default(),
        }
    }

    #[test]
    fn a_state_change_moves_the_state_counts_only() {
        let before = rec(TaskState::Working, 1, &["a", "b"]);
        let after = rec(TaskState::Completed, 2, &["a", "c"]);
        let change = ListingChange::between(Some(&before), &after);
        assert_eq!(change.removed.len(), 2);
        assert_eq!(change.added.len(), 2);
        let deltas = change.count_deltas();
        let get = |p: &str, s: Option<&str>| {
            deltas
                .get(&(p.to_owned(), s.map(str::to_owned)))
                .copied()
                .unwrap_or(0)
        };
        assert_eq!(get("a", None), 0);
        assert_eq!(get("a", Some("TASK_STATE_WORKING")), -1);
        assert_eq!(get("a", Some("TASK_STATE_COMPLETED")), 1);
        assert_eq!((get("b", None), get("c", None)), (-1, 1));
        assert_eq!(get("c", Some("TASK_STATE_COMPLETED")), 1);
    }

    #[test]
    fn state_keys_are_the_protojson_names() {
        for state in [
            TaskState::Unspecified,
            TaskState::Submitted,
            TaskState::Working,
            TaskState::InputRequired,
            TaskState::AuthRequired,
            TaskState::Completed,
            TaskState::Canceled,
            TaskState::Failed,
            TaskState::Rejected,
        ] {
            assert_eq!(
                serde_json::to_value(&state).unwrap(),
                serde_json::Value::String(state_key(&state))
            );
        }
    }

    #[test]
    fn an_unlisted_participant_moves_nothing() {
        let before = rec(TaskState::Working, 1, &["a", "agent"]);
        let after = rec(TaskState::Completed, 2, &["a", "agent"]);
        let change = ListingChange::between(Some(&before), &after).without(Some("agent"));
        assert!(
            change
                .removed
                .iter()
                .chain(&change.added)
                .all(|l| l.participant == "a")
        );
        assert_eq!(change.added.len(), 1);
        assert!(change.count_deltas().keys().all(|(p, _)| p == "a"));
    }

    #[test]
    fn nothing_moves_when_the_place_stays() {
        let before = rec(TaskState::Working, 1, &["a"]);
        assert!(ListingChange::between(Some(&before), &before.clone()).is_empty());
        assert_eq!(
            state_key(&TaskState::InputRequired),
            "TASK_STATE_INPUT_REQUIRED"
        );
        assert_eq!(state_keys().len(), 9);
    }
}
