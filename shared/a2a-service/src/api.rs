//! The service's surface: the 11 A2A methods and the task extension's two record reads as one
//! trait, what a request carries besides its body, and the errors. The protocol bindings
//! (JSON-RPC, REST, SSE) call only this.

use a2a::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};
use async_trait::async_trait;
use futures::stream::BoxStream;
use serde::Serialize;
use serde_json::value::RawValue;
use task_store::AuditEntry;

use crate::error::ServiceError;

/// Events of a streaming method, in order; the stream ends after a terminal or interrupted
/// state (or when the caller drops it).
pub type EventStream = BoxStream<'static, Result<StreamResponse, ServiceError>>;

/// What the binding knows about a request beyond its body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestContext {
    /// The `X-Participant-Id` header, if sent.
    pub participant_header: Option<String>,
    /// The principal an authorizer verified (deployed behind API Gateway with a JWT or IAM
    /// authorizer); when set it is the caller's identity.
    pub verified_principal: Option<String>,
    /// Extension URIs the client activated (`A2A-Extensions`), all supported (the binding
    /// refused unknown ones before calling the service).
    pub extensions: Vec<String>,
}

/// The JSON-RPC name of the task extension's transcript read (REST: `GET /tasks/{id}/transcript`).
pub const GET_TASK_TRANSCRIPT: &str = "GetTaskTranscript";
/// The JSON-RPC name of the task extension's audit-log read (REST: `GET /tasks/{id}/auditLog`).
pub const GET_TASK_AUDIT_LOG: &str = "GetTaskAuditLog";

/// A page of one of a task's records (GetTaskTranscript, GetTaskAuditLog).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskRecordsRequest {
    pub id: String,
    /// 1 to 100; `None`: 50.
    pub page_size: Option<i32>,
    /// Where the page starts, as a previous page's `nextPageToken` said; `None` or empty: the
    /// first entry.
    pub page_token: Option<String>,
}

/// A page of a task's records: `nextPageToken` is empty on the last page (as ListTasks').
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordsPage<T> {
    pub task_id: String,
    pub entries: Vec<T>,
    pub next_page_token: String,
}

/// One transcript entry as the agent stored it, with its number (0 is the first).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TranscriptEntry {
    pub number: u64,
    pub entry: serde_json::Value,
}

pub type TranscriptPage = RecordsPage<TranscriptEntry>;
pub type AuditLogPage = RecordsPage<AuditEntry>;

/// The 11 methods of A2A 1.0, and the two methods of the task extension that read a task's
/// records (declared in the card's task extension `params.methods`).
#[async_trait]
pub trait A2aApi: Send + Sync {
    /// The public agent card (served at `/.well-known/agent-card.json`).
    fn agent_card(&self) -> &AgentCard;

    async fn send_message(
        &self,
        ctx: &RequestContext,
        req: SendMessageRequest,
    ) -> Result<SendMessageResponse, ServiceError>;

    /// The stream's first event is the task (or the one refusal status update).
    async fn send_streaming_message(
        &self,
        ctx: &RequestContext,
        req: SendMessageRequest,
    ) -> Result<EventStream, ServiceError>;

    async fn get_task(
        &self,
        ctx: &RequestContext,
        req: GetTaskRequest,
    ) -> Result<Task, ServiceError>;

    /// [`get_task`](Self::get_task)'s answer as the JSON document the bindings send. A
    /// service may answer from a rendering it keeps; the default serializes `get_task`'s.
    async fn get_task_json(
        &self,
        ctx: &RequestContext,
        req: GetTaskRequest,
    ) -> Result<Box<RawValue>, ServiceError> {
        render(&self.get_task(ctx, req).await?)
    }

    async fn list_tasks(
        &self,
        ctx: &RequestContext,
        req: ListTasksRequest,
    ) -> Result<ListTasksResponse, ServiceError>;

    async fn cancel_task(
        &self,
        ctx: &RequestContext,
        req: CancelTaskRequest,
    ) -> Result<Task, ServiceError>;

    /// The stream's first event is the current task.
    async fn subscribe_to_task(
        &self,
        ctx: &RequestContext,
        req: SubscribeToTaskRequest,
    ) -> Result<EventStream, ServiceError>;

    async fn create_push_config(
        &self,
        ctx: &RequestContext,
        req: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, ServiceError>;

    async fn get_push_config(
        &self,
        ctx: &RequestContext,
        req: GetTaskPushNotificationConfigRequest,
    ) -> Result<TaskPushNotificationConfig, ServiceError>;

    async fn list_push_configs(
        &self,
        ctx: &RequestContext,
        req: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, ServiceError>;

    async fn delete_push_config(
        &self,
        ctx: &RequestContext,
        req: DeleteTaskPushNotificationConfigRequest,
    ) -> Result<(), ServiceError>;

    async fn get_extended_agent_card(
        &self,
        ctx: &RequestContext,
        req: GetExtendedAgentCardRequest,
    ) -> Result<AgentCard, ServiceError>;

    /// The agent's transcript of the task (model turns, tool calls and their results), for
    /// its participants; anyone else gets `TaskNotFound`.
    async fn get_task_transcript(
        &self,
        ctx: &RequestContext,
        req: TaskRecordsRequest,
    ) -> Result<TranscriptPage, ServiceError>;

    /// The task's audit log (what intake accepted and refused), for its admins; anyone else
    /// gets `TaskNotFound`.
    async fn get_task_audit_log(
        &self,
        ctx: &RequestContext,
        req: TaskRecordsRequest,
    ) -> Result<AuditLogPage, ServiceError>;
}

/// A task as JSON (serializing a task fails only on a bug: reported as an internal error).
pub(crate) fn render(task: &Task) -> Result<Box<RawValue>, ServiceError> {
    serde_json::value::to_raw_value(task).map_err(|err| {
        tracing::error!(%err, "serializing a task failed");
        ServiceError::Internal
    })
}
