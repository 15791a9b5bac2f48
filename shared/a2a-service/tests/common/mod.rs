//! What the service's integration tests share: a service over a fresh memory store, the
//! requests they send and the waits they make.
// Each test file is its own crate and uses only part of this.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use a2a::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, Message, Part, Role, SendMessageRequest,
    SendMessageResponse, Task,
};
use a2a_service::{A2aApi, Agent, RequestContext, Service, ServiceConfig};
use serde_json::json;
use store_memory::MemoryStore;
use task_store::Store;

pub struct Fixture {
    pub service: Arc<Service>,
    pub store: Arc<dyn Store>,
}

/// A service over a fresh memory store, with `agent` and the local config as `configure`
/// leaves it.
pub fn fixture_with(agent: Arc<dyn Agent>, configure: impl FnOnce(&mut ServiceConfig)) -> Fixture {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut config = ServiceConfig::local("http://127.0.0.1:8080");
    configure(&mut config);
    let service = Arc::new(Service::new(store.clone(), config, agent, None));
    Fixture { service, store }
}

/// Quick polling, and a blocking send that waits out any turn a test runs.
pub fn quick(config: &mut ServiceConfig) {
    config.poll_interval = Duration::from_millis(10);
    config.blocking_timeout = Duration::from_secs(10);
}

pub fn ctx() -> RequestContext {
    RequestContext::default()
}

pub fn as_participant(id: &str) -> RequestContext {
    RequestContext {
        participant_header: Some(id.into()),
        ..Default::default()
    }
}

/// A user message that names its sender in the metadata.
pub fn from(sender: &str, parts: Vec<Part>) -> Message {
    let mut m = Message::new(Role::User, parts);
    m.metadata = Some(HashMap::from([(
        "participant_id".to_owned(),
        json!(sender),
    )]));
    m
}

pub fn send(message: Message) -> SendMessageRequest {
    SendMessageRequest {
        message,
        configuration: None,
        metadata: None,
        tenant: None,
    }
}

/// `message` sent on `task`.
pub fn on(task: &Task, mut message: Message) -> SendMessageRequest {
    message.task_id = Some(task.id.clone());
    send(message)
}

/// Sends `req` without a caller identity and expects a task back.
pub async fn send_task(f: &Fixture, req: SendMessageRequest) -> Task {
    match f.service.send_message(&ctx(), req).await.expect("send") {
        SendMessageResponse::Task(task) => task,
        other => panic!("expected a task, got {other:?}"),
    }
}

/// The text of the task's status message, or "".
pub fn status_text(task: &Task) -> String {
    task.status
        .message
        .as_ref()
        .and_then(|m| m.parts[0].as_text())
        .unwrap_or_default()
        .to_owned()
}

pub fn get_request(id: &str, history_length: Option<i32>) -> GetTaskRequest {
    GetTaskRequest {
        id: id.to_owned(),
        history_length,
        tenant: None,
    }
}

pub fn cancel_request(id: &str) -> CancelTaskRequest {
    CancelTaskRequest {
        id: id.to_owned(),
        metadata: None,
        tenant: None,
    }
}

/// Every task the caller may see, first page, no filter.
pub fn list_request() -> ListTasksRequest {
    ListTasksRequest {
        context_id: None,
        status: None,
        page_size: None,
        page_token: None,
        history_length: None,
        status_timestamp_after: None,
        include_artifacts: None,
        tenant: None,
    }
}

/// Whether the task's inbox is empty, checked up to `polls` times 10 ms apart and once more.
pub async fn inbox_emptied(store: &dyn Store, task_id: &str, polls: usize) -> bool {
    for _ in 0..polls {
        if store.inbox(task_id).await.expect("inbox").is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    store.inbox(task_id).await.expect("inbox").is_empty()
}

/// The task is in `state`, with `text` as its status message.
#[track_caller]
pub fn assert_status(task: &Task, state: a2a::TaskState, text: &str) {
    assert_eq!(task.status.state, state);
    assert_eq!(status_text(task), text);
}
