//! What a client's message must be before intake looks at it (SPEC sections 4 and 9): its
//! ids within the limits of every client-sent id, a user message with parts, none of the
//! service's reserved metadata, data that stays readable, parts in the card's input modes.

use a2a::{Message, Part, PartContent, Role};
use serde_json::Value;
use task_core::ids::IdKind;

use crate::error::ServiceError;
use crate::identity;
use crate::subtasks;

/// The most tasks a message may reference (`referenceTaskIds`).
const MAX_REFERENCE_TASK_IDS: usize = 64;

/// A part's media type as the input modes name it.
pub fn media_type(part: &Part) -> &str {
    match (&part.media_type, &part.content) {
        (Some(mt), _) => mt.split(';').next().unwrap_or(mt).trim(),
        (None, PartContent::Text(_)) => "text/plain",
        (None, PartContent::Data(_)) => "application/json",
        (None, _) => "application/octet-stream",
    }
}

/// Whether a message carries anything besides task envelopes (which are applied on arrival
/// and never shown to the agent): only then is there something for the agent to answer.
pub fn carries_content(message: &Message) -> bool {
    message.parts.iter().any(|p| !is_task_envelope(p))
}

/// Whether a part is a task envelope.
fn is_task_envelope(part: &Part) -> bool {
    match (media_type(part), &part.content) {
        (task_core::TASK_MEDIA_TYPE, _) => true,
        (task_core::EVENT_MEDIA_TYPE, PartContent::Data(data)) => {
            data.get("kind").and_then(Value::as_str) == Some("task")
        }
        _ => false,
    }
}

/// How deeply JSON in a message (data parts, metadata) may nest. Responses wrap what is
/// stored a few levels deeper, and common JSON parsers stop at 128 levels: a task must stay
/// readable by every participant.
const MAX_JSON_DEPTH: usize = 32;

fn json_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1)];
    while let Some((value, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|v| (v, depth + 1))),
            _ => {}
        }
    }
    deepest
}

/// Checks a client's message before intake: ids within their limits, a user message with
/// parts, no reserved metadata, data not nested too deep, parts in `input_modes`.
pub fn check(message: &Message, input_modes: &[String]) -> Result<(), ServiceError> {
    if message.message_id.is_empty() {
        return Err(ServiceError::InvalidParams(
            "message.messageId is required".to_owned(),
        ));
    }
    identity::check(IdKind::Message, "message.messageId", &message.message_id)?;
    if let Some(task_id) = &message.task_id {
        identity::check(IdKind::Task, "message.taskId", task_id)?;
    }
    if let Some(context_id) = &message.context_id {
        identity::check(IdKind::Context, "message.contextId", context_id)?;
    }
    let references = message.reference_task_ids.as_deref().unwrap_or_default();
    if references.len() > MAX_REFERENCE_TASK_IDS {
        return Err(ServiceError::InvalidParams(format!(
            "message.referenceTaskIds lists more than {MAX_REFERENCE_TASK_IDS} tasks"
        )));
    }
    for (i, task_id) in references.iter().enumerate() {
        identity::check(
            IdKind::Task,
            &format!("message.referenceTaskIds[{i}]"),
            task_id,
        )?;
    }
    if message
        .metadata
        .as_ref()
        .is_some_and(|m| m.contains_key(subtasks::NOTE_KEY))
    {
        return Err(ServiceError::InvalidParams(format!(
            "message.metadata key {} is reserved for the service's own sub-task notes",
            subtasks::NOTE_KEY
        )));
    }
    if message.role != Role::User {
        return Err(ServiceError::InvalidParams(
            "message.role must be ROLE_USER".to_owned(),
        ));
    }
    if message.parts.is_empty() {
        return Err(ServiceError::InvalidParams(
            "message.parts must contain at least one part".to_owned(),
        ));
    }
    let metadata = message.metadata.iter().flat_map(|m| m.values());
    let parts = message.parts.iter().flat_map(|p| {
        let data = match &p.content {
            PartContent::Data(data) => Some(data),
            _ => None,
        };
        data.into_iter()
            .chain(p.metadata.iter().flat_map(|m| m.values()))
    });
    if metadata
        .chain(parts)
        .any(|v| json_depth(v) > MAX_JSON_DEPTH)
    {
        return Err(ServiceError::InvalidParams(format!(
            "message data nests deeper than {MAX_JSON_DEPTH} levels"
        )));
    }
    check_parts(message, input_modes)
}

/// Media types the card accepts (`ContentTypeNotSupported` otherwise).
fn check_parts(message: &Message, input_modes: &[String]) -> Result<(), ServiceError> {
    for (i, part) in message.parts.iter().enumerate() {
        let mt = media_type(part);
        if !input_modes.iter().any(|m| m == mt) {
            return Err(ServiceError::ContentTypeNotSupported(format!(
                "part {} has media type {mt}, which this agent does not accept (accepted: {})",
                i + 1,
                input_modes.join(", ")
            )));
        }
    }
    Ok(())
}
