//! A queued message as the runner reads it: what the agent reads of it, and the audit entry
//! recording what became of it.

use a2a::{Message, PartContent};
use chrono::{DateTime, Utc};
use task_core::envelope::{self, Envelope};
use task_core::task::HelpRequest;
use task_core::{A2UI_MEDIA_TYPE, EVENT_MEDIA_TYPE, TASK_MEDIA_TYPE};
use task_store::{AuditEntry, InboxItem, StoredTask, TaskUpdate};

/// The audit entry of what became of a queued message, from its sender.
pub(super) fn audit(
    item: &InboxItem,
    at: DateTime<Utc>,
    accepted: bool,
    reason: &str,
) -> AuditEntry {
    AuditEntry::new(
        at,
        &item.key.message_id,
        Some(&item.sender),
        accepted,
        reason,
    )
}

/// An update of `task` that takes the message out of the inbox, with its audit entry.
pub(super) fn consuming(task: &StoredTask, item: &InboxItem, audit: AuditEntry) -> TaskUpdate {
    let mut update = TaskUpdate::new(task.clone());
    update.consume_inbox = vec![item.key.clone()];
    update.audit = vec![audit];
    update
}

/// What the agent reads of a message: its text parts, A2UI actions and recorded events
/// rendered as text, other data as JSON, files by name; the answer to a help request framed
/// as such. Task envelopes were applied on arrival and are left out.
pub fn agent_input(item: &InboxItem, answering: Option<&HelpRequest>) -> String {
    let text = message_text(&item.message, &item.sender);
    match answering {
        Some(request) => request.frame_answer(&text),
        None => text,
    }
}

pub(super) fn message_text(message: &Message, sender: &str) -> String {
    let mut lines = Vec::new();
    for part in &message.parts {
        let media_type = part.media_type.as_deref();
        match (&part.content, media_type) {
            (PartContent::Text(text), _) => lines.push(text.clone()),
            (PartContent::Data(_), Some(TASK_MEDIA_TYPE)) => {}
            (PartContent::Data(data), Some(EVENT_MEDIA_TYPE)) => {
                let parts = std::slice::from_ref(part);
                if let Ok(Some(Envelope::Recorded { kind, payload })) =
                    envelope::find_envelope(parts)
                {
                    lines.push(envelope::render_recorded(kind, sender, &payload));
                } else if data.get("kind").and_then(|k| k.as_str()) != Some("task") {
                    lines.push(data.to_string());
                }
            }
            // Checked against the task's surfaces on arrival.
            (PartContent::Data(data), Some(A2UI_MEDIA_TYPE)) => lines.push(render_action(data)),
            (PartContent::Data(data), _) => lines.push(data.to_string()),
            (PartContent::Raw(bytes), _) => lines.push(format!(
                "[file {} ({}, {} bytes)]",
                part.filename.as_deref().unwrap_or("unnamed"),
                media_type.unwrap_or("application/octet-stream"),
                bytes.len()
            )),
            (PartContent::Url(url), _) => lines.push(format!(
                "[file {} ({}) at {url}]",
                part.filename.as_deref().unwrap_or("unnamed"),
                media_type.unwrap_or("application/octet-stream")
            )),
        }
    }
    lines.join("\n")
}

/// `[A2UI action] <name> on surface <surface> from <component>: <context>` (serde_json's maps
/// keep keys sorted, so the same action always reads the same).
fn render_action(data: &serde_json::Value) -> String {
    let action = data.get("action").unwrap_or(data);
    let field = |k: &str| {
        action
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_owned()
    };
    let context = action
        .get("context")
        .map(|c| c.to_string())
        .unwrap_or_else(|| "{}".to_owned());
    format!(
        "[A2UI action] {} on surface {} from {}: {context}",
        field("name"),
        field("surfaceId"),
        field("sourceComponentId")
    )
}
