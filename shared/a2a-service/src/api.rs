//! The service's surface: the 11 A2A methods as one trait, what a request carries besides its
//! body, and the errors. The protocol bindings (JSON-RPC, REST, SSE) call only this.

use a2a::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};
use async_trait::async_trait;
use futures::stream::BoxStream;
use serde_json::value::RawValue;

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

/// The 11 methods of A2A 1.0.
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
}

/// A task as JSON (serializing a task fails only on a bug: reported as an internal error).
pub(crate) fn render(task: &Task) -> Result<Box<RawValue>, ServiceError> {
    serde_json::value::to_raw_value(task).map_err(|err| {
        tracing::error!(%err, "serializing a task failed");
        ServiceError::Internal
    })
}
