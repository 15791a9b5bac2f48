//! Push notifications: who owns and receives which config ([`configs`]), the webhook URL
//! policy, the sender (one notification, with retries; shared with the deployed notifier),
//! and the local server's dispatcher.

pub mod configs;
mod dispatcher;
mod policy;
mod sender;

pub use dispatcher::{NoRuntime, PushDispatcher};
pub use policy::{WebhookPolicy, check_webhook_url, refusal_reason};
pub use sender::{
    A2A_CONTENT_TYPE, AttemptFailure, DeliveryError, NOTIFICATION_TOKEN_HEADER, PushOptions,
    PushSender, PushSetupError,
};

#[cfg(test)]
mod tests;

/// The local server's dispatcher hears of new events and configs straight from the service.
impl crate::listener::EventListener for PushDispatcher {
    fn events_appended(&self, task_id: &str) {
        self.notify(task_id);
    }

    fn push_config_storing(&self, task_id: &str, config_id: &str, from_seq: u64) {
        self.register(task_id, config_id, from_seq);
    }

    fn push_config_stored(&self, task_id: &str) {
        self.notify(task_id);
    }
}
