//! Sub-tasks on this service: creating a child that `spawn_subtask` or
//! `create_task_for_participant` asked for, and the notes a child sends its parent when its
//! state changes.
//!
//! A child's change of state and its note to the parent are one commit (`Change::Enqueue`),
//! so a note is never lost and never sent for a change that did not happen. The parent's
//! runner takes the note like any queued message: it mirrors the child's state and sub-state
//! into the parent's `TaskRef` (a conditional write on the parent) and, when the child ended
//! or waits (terminal, INPUT_REQUIRED, AUTH_REQUIRED), tells the parent's agent
//! `Sub-task <id> is <STATE>: <summary>`. A note of a child that went WORKING only mirrors.

use std::collections::HashMap;

use a2a::{Message, Part, Role as MessageRole, TaskState};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use task_core::extension::SubState;
use task_core::lifecycle::{self, LifecycleEvent};
use task_core::task::AgentState;
use task_core::tools::{ChildKind, ChildTask};
use task_store::{
    Change, Conflict, InboxItem, InboxKey, Lease, NewTask, Store, StoreError, TaskRecord,
};

use crate::identity::PARTICIPANT_KEY;
use crate::metered;
use crate::view;

/// The metadata key of a sub-task note; reserved: a client message carrying it is refused.
pub const NOTE_KEY: &str = "io.github.madarauchiha-314.tiny-harness/subtask";

/// What a note says about the child.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Note {
    pub task_id: String,
    /// ProtoJSON state name.
    pub state: TaskState,
    pub sub_state: Option<SubState>,
    /// The parent's agent is told (the child ended or waits); otherwise the note only mirrors.
    pub wake: bool,
    /// A relayed child's remote task id, once known: the parent's `TaskRef` names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_task: Option<String>,
}

impl Note {
    /// The note carried by `message`, if it is one.
    pub fn of(message: &Message) -> Option<Note> {
        let value = message.metadata.as_ref()?.get(NOTE_KEY)?;
        serde_json::from_value(value.clone()).ok()
    }
}

fn wakes(state: &TaskState) -> bool {
    lifecycle::TERMINAL.contains(state)
        || matches!(state, TaskState::InputRequired | TaskState::AuthRequired)
}

/// The status text of a record, or its state's name.
fn summary(record: &TaskRecord) -> String {
    record
        .status
        .message
        .as_ref()
        .and_then(|m| m.parts.iter().find_map(Part::as_text))
        .unwrap_or_default()
        .to_owned()
}

/// What the parent's agent reads of a child's change: `Sub-task <id> is <STATE>: <summary>`,
/// the id being the remote task's for a relayed child once known; a relayed child waiting on
/// its remote's help request adds that the agent's reply is sent to it as the answer.
fn note_text(child: &TaskRecord) -> String {
    let listed = child.agent.remote_task.as_deref().unwrap_or(&child.id);
    let mut text = lifecycle::subtask_note(listed, child.state(), &summary(child));
    if relays_help_request(child) {
        text.push_str(
            "\n(The remote agent asks this. Your reply, unless you ask someone yourself, is \
             sent to the sub-task as the answer.)",
        );
    }
    text
}

/// A relayed child waiting on its remote task's help request.
fn relays_help_request(child: &TaskRecord) -> bool {
    child.agent.remote_agent.is_some()
        && *child.state() == TaskState::InputRequired
        && child.sub_state == Some(SubState::AwaitingAnswer)
}

/// The notes `after` owes its parents on this service for a change from `before` (nothing
/// when the state, the sub-state and the relayed remote task did not change). `version` is
/// the child's version after the change, which makes each note's id unique.
pub fn parent_notes(
    before: Option<&TaskRecord>,
    after: &TaskRecord,
    version: u64,
    agent_id: &str,
    now: DateTime<Utc>,
) -> Vec<Change> {
    let moved = before.is_none_or(|b| {
        b.state() != after.state()
            || b.sub_state != after.sub_state
            || b.agent.remote_task != after.agent.remote_task
    });
    if !moved {
        return Vec::new();
    }
    after
        .extension
        .parent_tasks
        .iter()
        .filter(|p| p.agent.is_none())
        .map(|parent| {
            let note = Note {
                task_id: after.id.clone(),
                state: after.state().clone(),
                sub_state: after.sub_state,
                wake: wakes(after.state()),
                remote_task: after.agent.remote_task.clone(),
            };
            let text = note_text(after);
            let mut message = Message::new(MessageRole::Agent, vec![Part::text(text)]);
            message.message_id = format!("{}:state:{version}", after.id);
            message.task_id = Some(parent.task_id.clone());
            message.metadata = Some(HashMap::from([
                (
                    NOTE_KEY.to_owned(),
                    serde_json::to_value(&note).unwrap_or(Value::Null),
                ),
                (PARTICIPANT_KEY.to_owned(), Value::from(agent_id)),
            ]));
            Change::Enqueue {
                task_id: parent.task_id.clone(),
                item: Box::new(InboxItem {
                    key: InboxKey {
                        enqueued_at: now,
                        message_id: message.message_id.clone(),
                    },
                    sender: agent_id.to_owned(),
                    message,
                }),
            }
        })
        .collect()
}

/// Whether `parent` lists `child_id` among its sub-tasks. A link the service made is recorded
/// on both ends (the child names the parent in `parent_tasks`, the parent the child in
/// `sub_tasks`; a child relayed to a remote agent is a task here whose ref carries the remote
/// agent and, once known, the remote task's id, which the parent maps back to the child in
/// its `relays`), so a one-sided link, written by a client into a task stored before links
/// were the service's own, carries nothing.
pub fn lists_child(parent: &TaskRecord, child_id: &str) -> bool {
    let listed = parent.agent.listed_id(child_id);
    // A remote task's id names no task here.
    if listed == child_id && parent.agent.relays.values().any(|r| r == child_id) {
        return false;
    }
    parent
        .extension
        .sub_tasks
        .iter()
        .any(|r| r.task_id == listed)
}

/// Commits `changes` with the notes their changes of state owe the tasks' parents on this
/// service. Returns the parents noted (their runners should look at their inboxes). A parent
/// that ended takes no note: the commit is made again without them. A parent that does not
/// list the child as its sub-task takes none either (the link is not the service's).
pub async fn commit(
    store: &dyn Store,
    changes: Vec<Change>,
    agent_id: &str,
) -> Result<Vec<String>, StoreError> {
    let now = Utc::now();
    let mut notes: Vec<Change> = Vec::new();
    for change in &changes {
        let Change::Update(update) = change else {
            continue;
        };
        let child = update.record.as_ref().unwrap_or(&update.base.record);
        for note in parent_notes(
            Some(&update.base.record),
            child,
            update.base.version + 1,
            agent_id,
            now,
        ) {
            let parent = store.get(note.task_id()).await?;
            if parent.is_some_and(|p| lists_child(&p.record, &child.id)) {
                notes.push(note);
            } else {
                tracing::warn!(
                    task_id = %child.id,
                    parent = %note.task_id(),
                    "no note for a parent that does not list this task as its sub-task"
                );
            }
        }
    }
    if notes.is_empty() {
        metered::commit(store, changes).await?;
        return Ok(Vec::new());
    }
    let parents: Vec<String> = notes.iter().map(|n| n.task_id().to_owned()).collect();
    let all: Vec<Change> = changes.iter().cloned().chain(notes).collect();
    match metered::commit(store, all).await {
        Ok(()) => Ok(parents),
        // A parent that ended (or was purged by retention) since it was read takes no note.
        Err(StoreError::Conflict(Conflict::TaskTerminal(_)) | StoreError::NotFound(_)) => {
            metered::commit(store, changes).await?;
            Ok(Vec::new())
        }
        Err(err) => Err(err),
    }
}

/// Mirrors the first state of each child created in `changes` into `parent`'s `TaskRef`s, so
/// the commit that creates a child already shows it WORKING (an agent's child) or waiting for
/// its assignee's answer (a participant's task), never SUBMITTED.
pub fn mirror_first_states(parent: &mut TaskRecord, changes: &[Change]) {
    for change in changes {
        if let Change::Create(child) = change {
            lifecycle::mirror_sub_task(
                &mut parent.extension,
                &child.record.id,
                child.record.state(),
                child.record.sub_state,
            );
        }
    }
}

/// The first message of an agent-run child: its goal and criteria, from the parent's agent.
fn goal_message(child: &ChildTask, context_id: &str, agent_id: &str) -> Message {
    let ext = &child.extension;
    let mut text = ext.goal.clone();
    if !ext.acceptance_criteria.is_empty() {
        text.push_str("\n\nAcceptance criteria:");
        for criterion in &ext.acceptance_criteria {
            text.push_str("\n- ");
            text.push_str(&criterion.text);
        }
    }
    let mut message = Message::new(MessageRole::User, vec![Part::text(text)]);
    message.message_id = format!("{}:goal", child.id);
    message.task_id = Some(child.id.clone());
    message.context_id = Some(context_id.to_owned());
    message.metadata = Some(HashMap::from([(
        PARTICIPANT_KEY.to_owned(),
        Value::from(agent_id),
    )]));
    message
}

/// The child task to create, in the parent's context. An agent-run child starts WORKING with
/// its goal queued and `lease` held (its creator runs it); a participant's task waits in
/// INPUT_REQUIRED for its assignee with the goal as its status message.
pub fn child_task(
    parent: &TaskRecord,
    child: &ChildTask,
    agent_id: &str,
    lease: Option<Lease>,
    now: DateTime<Utc>,
) -> NewTask {
    let mut record = TaskRecord {
        id: child.id.clone(),
        context_id: parent.context_id.clone(),
        status: view::status(TaskState::Submitted, None, now),
        sub_state: None,
        extension: child.extension.clone(),
        agent: AgentState::default(),
    };
    let created = view::task(&record, None, None);
    let mut new = NewTask::new(record.clone());
    new.events.push(a2a::StreamResponse::Task(created));
    match &child.kind {
        ChildKind::Agent { remote_agent } => {
            record.agent.remote_agent.clone_from(remote_agent);
            let goal = goal_message(child, &parent.context_id, agent_id);
            record.status = view::status(TaskState::Working, None, now);
            new.events
                .push(view::status_update(&record, Some(&goal.message_id)));
            new.inbox.push(InboxItem {
                key: InboxKey {
                    enqueued_at: now,
                    message_id: goal.message_id.clone(),
                },
                sender: agent_id.to_owned(),
                message: goal,
            });
            new.lease = lease;
        }
        ChildKind::Participant { assignee } => {
            let waiting = lifecycle::next(
                &TaskState::Submitted,
                None,
                task_core::extension::Lifecycle::Delegated,
                LifecycleEvent::AwaitAssignee,
            );
            let (to, sub_state) = match waiting {
                Ok(t) => (t.to, t.sub_state),
                Err(_) => (TaskState::InputRequired, Some(SubState::AwaitingAnswer)),
            };
            record.agent.awaiting_participant = Some(assignee.clone());
            let goal = view::agent_message(&record, child.extension.goal.clone());
            record.status = view::status(to, Some(goal), now);
            record.sub_state = sub_state;
            new.events.push(view::status_update(&record, None));
        }
    }
    new.record = record;
    new
}
