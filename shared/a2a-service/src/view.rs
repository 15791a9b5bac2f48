//! How stored tasks and agent output look on the wire.

use std::collections::HashMap;

use a2a::{
    Artifact, Message, Part, Role, StreamResponse, Task, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};
use chrono::{DateTime, Utc};
use serde_json::Value;
use task_core::TASK_METADATA_KEY;
use task_store::{StoredTask, TaskRecord};

use crate::error::ServiceError;

/// Status-update metadata naming the message whose processing produced the update, so the
/// sender's stream (or blocking call) knows which update answers it.
pub const IN_REPLY_TO_KEY: &str = "io.github.madarauchiha-314.tiny-harness/in_reply_to";

/// Task metadata: the tokens the task's model calls spent, in all and by model (the
/// service's own key: the extension's object is closed).
pub const USAGE_METADATA_KEY: &str = "io.github.madarauchiha-314.tiny-harness/usage";

/// The task as a client sees it: status, the extension and the token usage in metadata, and
/// the history and artifacts when asked for.
pub fn task(
    record: &TaskRecord,
    history: Option<Vec<Message>>,
    artifacts: Option<Vec<Artifact>>,
) -> Task {
    let mut metadata = HashMap::from([(TASK_METADATA_KEY.to_owned(), record.extension.to_value())]);
    if !record.agent.usage.is_empty() {
        metadata.insert(USAGE_METADATA_KEY.to_owned(), usage_value(record));
    }
    Task {
        id: record.id.clone(),
        context_id: record.context_id.clone(),
        status: record.status.clone(),
        artifacts,
        history,
        metadata: Some(metadata),
    }
}

/// `{"total": {calls, input_tokens, output_tokens, cached_input_tokens}, "by_model": {id: …}}`.
fn usage_value(record: &TaskRecord) -> Value {
    let mut total = task_core::task::TokenUsage::default();
    for usage in record.agent.usage.values() {
        total.add(usage);
    }
    serde_json::json!({"total": total, "by_model": record.agent.usage})
}

/// What a refused sender sees of a task it may not see: only its id, context and a status
/// whose message says why.
pub fn refusal_task(stored: &StoredTask, status: TaskStatus) -> Task {
    Task {
        id: stored.record.id.clone(),
        context_id: stored.record.context_id.clone(),
        status,
        artifacts: None,
        history: None,
        metadata: None,
    }
}

/// A message from the agent on a task.
pub fn agent_message(record: &TaskRecord, text: impl Into<String>) -> Message {
    let mut message = Message::new(Role::Agent, vec![Part::text(text)]);
    message.task_id = Some(record.id.clone());
    message.context_id = Some(record.context_id.clone());
    message
}

/// The most a status message may take inside the task document (which is capped as a whole,
/// see `task_store::limits`); longer text is cut there, and the whole message stays in the
/// history and in the status event.
pub const STATUS_MESSAGE_TEXT_BYTES: usize = 64 * 1024;

/// `message` as the task document keeps it in its status: text parts cut to
/// [`STATUS_MESSAGE_TEXT_BYTES`] in all, with a note saying where the whole message is.
pub fn bounded(message: &Message) -> Message {
    let mut budget = STATUS_MESSAGE_TEXT_BYTES;
    let mut cut = false;
    let mut bounded = message.clone();
    for part in &mut bounded.parts {
        if let a2a::PartContent::Text(text) = &mut part.content {
            if text.len() > budget {
                let mut end = budget;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text.truncate(end);
                cut = true;
            }
            budget -= text.len();
        }
    }
    if cut {
        bounded.parts.push(Part::text(format!(
            "[cut: the whole message is {} in the task's history]",
            message.message_id
        )));
    }
    bounded
}

/// A status with the current time.
pub fn status(state: TaskState, message: Option<Message>, now: DateTime<Utc>) -> TaskStatus {
    TaskStatus {
        state,
        message,
        timestamp: Some(now),
    }
}

/// The status update event of `record`'s current status; `in_reply_to` names the message
/// that caused it.
pub fn status_update(record: &TaskRecord, in_reply_to: Option<&str>) -> StreamResponse {
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: record.id.clone(),
        context_id: record.context_id.clone(),
        status: record.status.clone(),
        metadata: in_reply_to
            .map(|id| HashMap::from([(IN_REPLY_TO_KEY.to_owned(), Value::from(id))])),
    })
}

/// A status update that changes nothing but says something to the sender.
pub fn notice(
    stored: &StoredTask,
    text: &str,
    now: DateTime<Utc>,
    in_reply_to: Option<&str>,
) -> TaskStatusUpdateEvent {
    let message = agent_message(&stored.record, text);
    TaskStatusUpdateEvent {
        task_id: stored.record.id.clone(),
        context_id: stored.record.context_id.clone(),
        status: status(stored.record.status.state.clone(), Some(message), now),
        metadata: in_reply_to
            .map(|id| HashMap::from([(IN_REPLY_TO_KEY.to_owned(), Value::from(id))])),
    }
}

/// `historyLength`: unset = all, 0 = none (the field is omitted), n = the newest n.
pub fn history_limit(history_length: Option<i32>) -> Result<Option<usize>, ServiceError> {
    match history_length {
        None => Ok(None),
        Some(n) if n < 0 => Err(ServiceError::InvalidParams(format!(
            "historyLength must not be negative (got {n})"
        ))),
        Some(n) => Ok(Some(n as usize)),
    }
}

/// The state an event reports, if it reports one.
pub fn event_state(event: &StreamResponse) -> Option<&TaskState> {
    match event {
        StreamResponse::Task(t) => Some(&t.status.state),
        StreamResponse::StatusUpdate(s) => Some(&s.status.state),
        _ => None,
    }
}

/// The message an event answers (see [`IN_REPLY_TO_KEY`]).
pub fn event_in_reply_to(event: &StreamResponse) -> Option<&str> {
    match event {
        StreamResponse::StatusUpdate(s) => s.metadata.as_ref()?.get(IN_REPLY_TO_KEY)?.as_str(),
        _ => None,
    }
}

pub fn is_interrupted(state: &TaskState) -> bool {
    matches!(state, TaskState::InputRequired | TaskState::AuthRequired)
}
