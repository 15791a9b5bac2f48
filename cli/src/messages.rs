//! The messages th sends: text, commands and task envelopes, with the sender's metadata.

use serde_json::{Value, json};

use crate::client::CliError;

pub const TASK_MEDIA_TYPE: &str = "application/vnd.tiny-harness.task+json";
pub const CHANNEL_MEDIA_TYPE: &str = "application/vnd.tiny-harness.channel+json";

/// A user message with these parts, on `task` when given, from `from` when given.
pub fn message(task: Option<&str>, from: Option<&str>, parts: Vec<Value>) -> Value {
    let mut m = json!({
        "messageId": uuid::Uuid::new_v4().to_string(),
        "role": "ROLE_USER",
        "parts": parts,
    });
    if let Some(task) = task {
        m["taskId"] = json!(task);
    }
    if let Some(from) = from {
        m["metadata"] = json!({"participant_id": from});
    }
    m
}

pub fn text_part(text: &str) -> Value {
    json!({"text": text})
}

pub fn envelope_part(data: Value) -> Value {
    json!({"data": data, "mediaType": TASK_MEDIA_TYPE})
}

/// `id:role` (a human) or `id:role:kind` as a participant of the extension.
pub fn participant(spec: &str) -> Result<Value, CliError> {
    let fields: Vec<&str> = spec.split(':').collect();
    let (id, role, kind) = match fields.as_slice() {
        [id, role] => (*id, *role, "human"),
        [id, role, kind] => (*id, *role, *kind),
        _ => {
            return Err(CliError::Usage(format!(
                "--participant {spec:?}: expected ID:ROLE or ID:ROLE:KIND"
            )));
        }
    };
    if id.is_empty() {
        return Err(CliError::Usage(format!("--participant {spec:?}: empty id")));
    }
    if !["assignee", "reporter", "watcher", "admin"].contains(&role) {
        return Err(CliError::Usage(format!(
            "--participant {spec:?}: role is assignee, reporter, watcher or admin"
        )));
    }
    if !["human", "agent"].contains(&kind) {
        return Err(CliError::Usage(format!(
            "--participant {spec:?}: kind is human or agent"
        )));
    }
    Ok(json!({"id": id, "kind": kind, "role": role}))
}

/// The acceptance criteria with the numbered ones (from 1) set to met or not met.
pub fn mark_criteria(criteria: &Value, met: &[usize], unmet: &[usize]) -> Result<Value, CliError> {
    let mut list = criteria.as_array().cloned().unwrap_or_default();
    for (numbers, value) in [(met, true), (unmet, false)] {
        for &n in numbers {
            let count = list.len();
            let criterion = n
                .checked_sub(1)
                .and_then(|i| list.get_mut(i))
                .ok_or_else(|| {
                    CliError::Usage(format!(
                        "criterion {n} does not exist (the task has {count}, numbered from 1)"
                    ))
                })?;
            criterion["met"] = json!(value);
        }
    }
    Ok(Value::Array(list))
}

/// The help request a status message carries, if any: its question text.
pub fn help_request(status: &Value) -> Option<String> {
    let parts = status["message"]["parts"].as_array()?;
    let asks = parts
        .iter()
        .any(|p| p["mediaType"] == CHANNEL_MEDIA_TYPE && p["data"]["kind"] == "help_request");
    if !asks {
        return None;
    }
    let text = parts.iter().find_map(|p| p["text"].as_str()).unwrap_or("");
    Some(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn participants_are_humans_unless_told() {
        assert_eq!(
            participant("alice:reporter").unwrap(),
            json!({"id": "alice", "kind": "human", "role": "reporter"})
        );
        assert_eq!(participant("bot:assignee:agent").unwrap()["kind"], "agent");
        assert!(participant("alice").is_err());
        assert!(participant("alice:boss").is_err());
    }

    #[test]
    fn criteria_are_numbered_from_one() {
        let list = json!([{"text": "a", "met": false}, {"text": "b", "met": true}]);
        let marked = mark_criteria(&list, &[1], &[2]).unwrap();
        assert_eq!(
            marked,
            json!([{"text": "a", "met": true}, {"text": "b", "met": false}])
        );
        assert!(mark_criteria(&list, &[3], &[]).is_err());
        assert!(mark_criteria(&list, &[0], &[]).is_err());
    }
}
