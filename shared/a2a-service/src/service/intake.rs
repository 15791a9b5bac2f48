//! Intake of a message: the checks every message passes (its form, its sender, an inline
//! push config), then a new task, a direct answer or a follow-up; an inline push config is
//! stored once the task is there.

use a2a::{Message, Part, Role, SendMessageRequest};
use task_core::ids::IdKind;

use super::base::Service;
use super::outcome::Intake;
use crate::api::RequestContext;
use crate::error::ServiceError;
use crate::identity;
use crate::message_checks;
use crate::push::check_webhook_url;

impl Service {
    /// Intake of a message: refusals, commands, envelopes, new tasks, queueing.
    pub(super) async fn intake(
        &self,
        ctx: &RequestContext,
        req: &SendMessageRequest,
    ) -> Result<Intake, ServiceError> {
        let message = &req.message;
        message_checks::check(message, &self.card.default_input_modes)?;
        let sender = identity::sender(
            ctx,
            message,
            self.default_participant(),
            &self.config.agent_id,
        )?;
        let push = req
            .configuration
            .as_ref()
            .and_then(|c| c.task_push_notification_config.clone());
        if let Some(config) = &push {
            if let Some(id) = config.id.as_deref().filter(|id| !id.is_empty()) {
                identity::check(IdKind::PushConfig, "taskPushNotificationConfig.id", id)?;
            }
            check_webhook_url(&config.url, &self.webhook_policy()).await?;
        }
        // Each path boxed: one large future inline would be copied into every send's.
        let mut intake = match &message.task_id {
            None => match self.agent.direct_reply(message) {
                Some(text) => Intake::Direct(Box::new(direct_message(message, text))),
                None => Box::pin(self.new_task(&sender, message)).await?,
            },
            Some(task_id) => Box::pin(self.follow_up(&sender, task_id, message)).await?,
        };
        let push_from = match &intake {
            Intake::Answered {
                push_from, task, ..
            } => push_from.map(|from| (task.id.clone(), from)),
            Intake::Queued { log, push_from, .. } => Some((log.task_id.clone(), *push_from)),
            Intake::Direct(_) => None,
        };
        if let (Some(mut config), Some((task_id, from))) = (push, push_from) {
            // The config is stored on the task, which must be created first.
            if let Intake::Queued { log, run, .. } = &mut intake {
                self.settle(&log.task_id, run.committing.take()).await?;
            }
            config.task_id = task_id;
            if let Err(err) = self.put_push_config(config, from, &sender.id).await {
                // The message is queued all the same: run it rather than strand it.
                if let Intake::Queued { log, run, .. } = intake {
                    self.start(&log.task_id, run);
                }
                return Err(err);
            }
        }
        Ok(intake)
    }
}

/// The agent's direct answer to `request`: a Message in the request's context (or a new one)
/// that belongs to no task.
fn direct_message(request: &Message, text: String) -> Message {
    let mut message = Message::new(Role::Agent, vec![Part::text(text)]);
    message.context_id = Some(
        request
            .context_id
            .clone()
            .filter(|c| !c.is_empty())
            .unwrap_or_else(a2a::new_context_id),
    );
    message
}
