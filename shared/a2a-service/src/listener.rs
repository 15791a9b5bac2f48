//! Who hears about new events. Locally, the push dispatcher; deployed, nobody in-process
//! (the table's stream feeds the push notifier function).

/// Told after every commit that appended events, and when a push config is created.
pub trait EventListener: Send + Sync {
    fn events_appended(&self, task_id: &str);

    /// A push config was created; deliveries start with the event `from_seq`.
    fn push_config_created(&self, task_id: &str, config_id: &str, from_seq: u64);
}
