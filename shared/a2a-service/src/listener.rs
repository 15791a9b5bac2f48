//! Who hears about new events. Locally, the push dispatcher; deployed, nobody in-process
//! (the table's stream feeds the push notifier function).

/// Told after every commit that appended events, and when a push config is created.
pub trait EventListener: Send + Sync {
    fn events_appended(&self, task_id: &str);

    /// A push config was created; deliveries start with the event `from_seq`.
    fn push_config_created(&self, task_id: &str, config_id: &str, from_seq: u64);
}

/// Wakes the streams of this process as soon as events are appended (streams of other
/// processes poll), then passes the news on.
pub(crate) struct Wakeup {
    appended: tokio::sync::watch::Sender<u64>,
    next: Option<std::sync::Arc<dyn EventListener>>,
}

impl Wakeup {
    pub(crate) fn new(next: Option<std::sync::Arc<dyn EventListener>>) -> Self {
        Self {
            appended: tokio::sync::watch::Sender::new(0),
            next,
        }
    }

    /// A receiver that changes after every append in this process.
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.appended.subscribe()
    }
}

impl EventListener for Wakeup {
    fn events_appended(&self, task_id: &str) {
        self.appended.send_modify(|n| *n = n.wrapping_add(1));
        if let Some(next) = &self.next {
            next.events_appended(task_id);
        }
    }

    fn push_config_created(&self, task_id: &str, config_id: &str, from_seq: u64) {
        if let Some(next) = &self.next {
            next.push_config_created(task_id, config_id, from_seq);
        }
    }
}
