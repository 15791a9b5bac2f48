//! Push configs of a task: storing one (from the four methods or inline with a message), reading,
//! listing and deleting the caller's own, and dropping those of participants who left.

use a2a::{
    DeleteTaskPushNotificationConfigRequest, GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    TaskPushNotificationConfig,
};
use task_core::ids::IdKind;
use task_store::{Conflict, TaskRecord};
use tracing::warn;

use super::base::Service;
use crate::error::ServiceError;
use crate::identity::{self, Who};
use crate::push::check_webhook_url;
use crate::push::configs;

impl Service {
    pub(super) async fn create_config(
        &self,
        caller: &Who,
        req: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, ServiceError> {
        let from_seq = self.visible(&req.task_id, caller).await?.counters.events;
        check_webhook_url(&req.url, &self.webhook_policy()).await?;
        self.put_push_config(req, from_seq, &caller.id).await
    }

    pub(super) async fn get_config(
        &self,
        caller: &Who,
        req: GetTaskPushNotificationConfigRequest,
    ) -> Result<TaskPushNotificationConfig, ServiceError> {
        identity::check(IdKind::PushConfig, "id", &req.id)?;
        self.visible(&req.task_id, caller).await?;
        let stored = self.store.get_push_config(&req.task_id, &req.id).await?;
        // A2A answers a missing config as a missing task; someone else's is missing to the
        // caller.
        configs::owned_by(stored, &caller.id)
            .ok_or_else(|| ServiceError::TaskNotFound(req.task_id.clone()))
    }

    pub(super) async fn list_configs(
        &self,
        caller: &Who,
        req: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, ServiceError> {
        self.visible(&req.task_id, caller).await?;
        let stored = self.store.list_push_configs(&req.task_id).await?;
        Ok(ListTaskPushNotificationConfigsResponse {
            configs: configs::those_of(stored, &caller.id),
            next_page_token: None,
        })
    }

    pub(super) async fn delete_config(
        &self,
        caller: &Who,
        req: DeleteTaskPushNotificationConfigRequest,
    ) -> Result<(), ServiceError> {
        identity::check(IdKind::PushConfig, "id", &req.id)?;
        let stored = self.visible(&req.task_id, caller).await?;
        // Out of the caller's scope, nothing is deleted and the answer is that of a config
        // already gone.
        let scope = configs::delete_scope(&stored.record.extension, &caller.id);
        self.store
            .delete_push_config(&req.task_id, &req.id, scope)
            .await?;
        Ok(())
    }

    /// Stores `owner`'s config (see `push::configs` for the rules the store enforces).
    pub(super) async fn put_push_config(
        &self,
        mut config: TaskPushNotificationConfig,
        from_seq: u64,
        owner: &str,
    ) -> Result<TaskPushNotificationConfig, ServiceError> {
        let id = config
            .id
            .clone()
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        identity::check(IdKind::PushConfig, "id", &id)?;
        config.id = Some(id.clone());
        // Someone else's id is refused before the dispatcher hears of it (being told would
        // move that config's cursor); the store's own check is the one that counts.
        let existing = self.store.get_push_config(&config.task_id, &id).await?;
        if existing.is_some_and(|c| !c.is_owned_by(owner)) {
            return Err(ServiceError::InvalidParams(
                Conflict::PushConfigTaken {
                    task_id: config.task_id.clone(),
                    config_id: id,
                }
                .to_string(),
            ));
        }
        self.listener
            .push_config_storing(&config.task_id, &id, from_seq);
        // The store's refusal of a config taken or over the limit says why to the client.
        let stored = self
            .store
            .put_push_config(owner, config)
            .await
            .map_err(|err| configs::put_refusal(err).unwrap_or_else(ServiceError::from))?;
        self.listener.push_config_stored(&stored.task_id);
        Ok(stored)
    }

    /// After an edit of the participants: the configs of those who left go (deliveries skip
    /// them anyway; a failure here is logged).
    pub(super) async fn remove_leavers_push_configs(&self, task: &TaskRecord) {
        if let Err(err) = configs::remove_strays(&*self.store, &task.id, &task.extension).await {
            warn!(task_id = %task.id, %err, "cannot remove the push configs of those who left the task");
        }
    }
}
