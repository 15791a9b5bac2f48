//! The 11 methods and the two record reads over the core and the store, each handed to its
//! room (with its caller, for the methods without a message).
//!
//! A message goes through intake (identity, participants, commands, envelopes, A2UI
//! actions, de-duplication), then into the task's inbox; the runner (see `runner`) turns it
//! into the agent's reply. Blocking sends and streams follow the task's event log, so they
//! work the same whichever process runs the task.
//!
//! Rooms, each an `impl Service` that only calls the rooms below it:
//! `follow_log` (SendMessage, SendStreamingMessage, SubscribeToTask) → `intake` →
//! `creation`, `follow_up` → `commands`; and `cancel`, `push_configs`, `reads`, `records`
//! (the task's transcript and audit log), `runs`, all
//! over `base` (the struct and its shared helpers) and `outcome` (what intake made of a
//! message).

mod base;
mod cancel;
mod commands;
mod creation;
mod follow_log;
mod follow_up;
mod intake;
mod outcome;
mod push_configs;
mod reads;
mod records;
mod runs;

use a2a::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};
use async_trait::async_trait;
use serde_json::value::RawValue;

pub use base::{RunDispatcher, Service};

use crate::api::{
    A2aApi, AuditLogPage, EventStream, RequestContext, TaskRecordsRequest, TranscriptPage,
};
use crate::error::ServiceError;

#[async_trait]
impl A2aApi for Service {
    fn agent_card(&self) -> &AgentCard {
        &self.card
    }

    async fn send_message(
        &self,
        ctx: &RequestContext,
        req: SendMessageRequest,
    ) -> Result<SendMessageResponse, ServiceError> {
        self.send(ctx, req).await
    }

    async fn send_streaming_message(
        &self,
        ctx: &RequestContext,
        req: SendMessageRequest,
    ) -> Result<EventStream, ServiceError> {
        self.send_streaming(ctx, req).await
    }

    async fn get_task(
        &self,
        ctx: &RequestContext,
        req: GetTaskRequest,
    ) -> Result<Task, ServiceError> {
        self.task_view(&self.caller(ctx)?, req).await
    }

    async fn get_task_json(
        &self,
        ctx: &RequestContext,
        req: GetTaskRequest,
    ) -> Result<Box<RawValue>, ServiceError> {
        self.task_json(&self.caller(ctx)?, req).await
    }

    async fn list_tasks(
        &self,
        ctx: &RequestContext,
        req: ListTasksRequest,
    ) -> Result<ListTasksResponse, ServiceError> {
        self.task_page(&self.caller(ctx)?, req).await
    }

    async fn cancel_task(
        &self,
        ctx: &RequestContext,
        req: CancelTaskRequest,
    ) -> Result<Task, ServiceError> {
        self.cancel(&self.caller(ctx)?, req).await
    }

    async fn subscribe_to_task(
        &self,
        ctx: &RequestContext,
        req: SubscribeToTaskRequest,
    ) -> Result<EventStream, ServiceError> {
        self.subscribe(&self.caller(ctx)?, req).await
    }

    async fn create_push_config(
        &self,
        ctx: &RequestContext,
        req: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, ServiceError> {
        self.create_config(&self.caller(ctx)?, req).await
    }

    async fn get_push_config(
        &self,
        ctx: &RequestContext,
        req: GetTaskPushNotificationConfigRequest,
    ) -> Result<TaskPushNotificationConfig, ServiceError> {
        self.get_config(&self.caller(ctx)?, req).await
    }

    async fn list_push_configs(
        &self,
        ctx: &RequestContext,
        req: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, ServiceError> {
        self.list_configs(&self.caller(ctx)?, req).await
    }

    async fn delete_push_config(
        &self,
        ctx: &RequestContext,
        req: DeleteTaskPushNotificationConfigRequest,
    ) -> Result<(), ServiceError> {
        self.delete_config(&self.caller(ctx)?, req).await
    }

    async fn get_extended_agent_card(
        &self,
        ctx: &RequestContext,
        _req: GetExtendedAgentCardRequest,
    ) -> Result<AgentCard, ServiceError> {
        self.caller(ctx)?;
        self.extended_card()
    }

    async fn get_task_transcript(
        &self,
        ctx: &RequestContext,
        req: TaskRecordsRequest,
    ) -> Result<TranscriptPage, ServiceError> {
        self.transcript_page(&self.caller(ctx)?, req).await
    }

    async fn get_task_audit_log(
        &self,
        ctx: &RequestContext,
        req: TaskRecordsRequest,
    ) -> Result<AuditLogPage, ServiceError> {
        self.audit_page(&self.caller(ctx)?, req).await
    }
}
