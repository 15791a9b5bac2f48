//! Message builders and readers of tasks and events: the JSON the tests send and look into.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

pub const TASK_EXTENSION_URI: &str =
    "https://madarauchiha-314.github.io/tiny-harness/a2a/ext/task/v1";
pub const TASK_METADATA_KEY: &str = "io.github.madarauchiha-314.tiny-harness/task";
pub const TASK_MEDIA_TYPE: &str = "application/vnd.tiny-harness.task+json";
pub const EVENT_MEDIA_TYPE: &str = "application/vnd.tiny-harness.event+json";

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh id (message ids, JSON-RPC ids).
pub fn fresh_id(prefix: &str) -> String {
    format!("{prefix}-{}", NEXT_ID.fetch_add(1, Ordering::Relaxed))
}

pub fn text_part(text: &str) -> Value {
    json!({ "text": text })
}

pub fn data_part(media_type: &str, data: Value) -> Value {
    json!({ "data": data, "mediaType": media_type })
}

/// A `data` part holding a task envelope (`name`, `goal`, criteria, participants, ...).
pub fn task_envelope(data: Value) -> Value {
    data_part(TASK_MEDIA_TYPE, data)
}

/// A `data` part holding an event envelope of this kind.
pub fn event_envelope(kind: &str, payload: Value) -> Value {
    data_part(EVENT_MEDIA_TYPE, json!({"kind": kind, "payload": payload}))
}

/// A user message with these parts, from `from` (`metadata.participant_id`; `None`: no
/// participant asserted), with a fresh message id.
pub fn message(from: Option<&str>, parts: Vec<Value>) -> Value {
    let mut m = json!({
        "messageId": fresh_id("m"),
        "role": "ROLE_USER",
        "parts": parts,
    });
    if let Some(from) = from {
        m["metadata"] = json!({ "participant_id": from });
    }
    m
}

/// A text message from `from`.
pub fn text(from: &str, text: &str) -> Value {
    message(Some(from), vec![text_part(text)])
}

/// What names a task: a task object, or its id (as a JSON string or a string).
pub trait TaskRef {
    fn task_id(&self) -> &str;
}

impl TaskRef for Value {
    fn task_id(&self) -> &str {
        self.get("id").unwrap_or(self).as_str().expect("task id")
    }
}

impl TaskRef for str {
    fn task_id(&self) -> &str {
        self
    }
}

impl TaskRef for String {
    fn task_id(&self) -> &str {
        self
    }
}

/// The message as a follow-up on `task` (a task object or a task id).
pub fn on<T: TaskRef + ?Sized>(mut message: Value, task: &T) -> Value {
    message["taskId"] = json!(task.task_id());
    message
}

/// A `SendMessageRequest` with just the message.
pub fn send_req(message: Value) -> Value {
    json!({ "message": message })
}

/// A `SendMessageRequest` opening a task: `from`'s first text and the task envelope.
pub fn new_task_req(from: &str, text: &str, envelope: Value) -> Value {
    send_req(message(
        Some(from),
        vec![text_part(text), task_envelope(envelope)],
    ))
}

/// A `SendMessageRequest` on `task` from `from` holding only a task envelope (an edit).
pub fn edit_req<T: TaskRef + ?Sized>(from: &str, task: &T, envelope: Value) -> Value {
    send_req(on(message(Some(from), vec![task_envelope(envelope)]), task))
}

/// The id of a task object.
pub fn id_of(task: &Value) -> &str {
    task["id"].as_str().expect("task id")
}

pub fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or("<no state>")
}

/// The text of the first part of the task's (or status update's) status message.
pub fn status_text(value: &Value) -> &str {
    value["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or("<no status text>")
}

/// The tiny-harness extension object of a task.
pub fn ext(task: &Value) -> &Value {
    &task["metadata"][TASK_METADATA_KEY]
}

/// The participant `id` of a task (fails the test if it has none such).
pub fn participant<'a>(task: &'a Value, id: &str) -> &'a Value {
    ext(task)["participants"]
        .as_array()
        .expect("participants")
        .iter()
        .find(|p| p["id"] == id)
        .unwrap_or_else(|| panic!("no participant {id}: {task}"))
}

/// The ids of the tasks in a `ListTasksResponse`, in order.
pub fn listed_ids(list: &Value) -> Vec<&str> {
    list["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(id_of)
        .collect()
}

/// `task:<state>`, `status:<state>`, `artifact`, `message` for a `StreamResponse`.
pub fn event_kind(event: &Value) -> String {
    if let Some(task) = event.get("task") {
        format!("task:{}", state(task))
    } else if let Some(update) = event.get("statusUpdate") {
        format!("status:{}", state(update))
    } else if event.get("artifactUpdate").is_some() {
        "artifact".to_owned()
    } else if event.get("message").is_some() {
        "message".to_owned()
    } else {
        format!("unknown:{event}")
    }
}

pub fn event_kinds(events: &[Value]) -> Vec<String> {
    events.iter().map(event_kind).collect()
}

/// The keys of a JSON object, sorted.
pub fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable();
    keys
}

/// The text of the first part of each message of a task's history, in order.
pub fn history_texts(task: &Value) -> Vec<String> {
    task["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|m| m["parts"][0]["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// Writes `script` (the `scripted` model's format, see `models::scripted`) and a model catalog
/// whose default model plays it (with `echo` beside it) into `dir`; returns the catalog's path,
/// for `--model-catalog`.
pub fn scripted_catalog(dir: &Path, script: &Value) -> PathBuf {
    let script_path = dir.join("script.json");
    std::fs::write(&script_path, script.to_string()).expect("script");
    let catalog = dir.join("catalog.json");
    let models = json!({
        "default_model": "scripted",
        "models": [
            {"id": "scripted", "provider": "scripted", "settings": {"script": script_path}},
            {"id": "echo", "provider": "echo"}
        ]
    });
    std::fs::write(&catalog, models.to_string()).expect("catalog");
    catalog
}
