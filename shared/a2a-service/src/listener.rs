//! Who hears about new events. Locally, the push dispatcher; deployed, nobody in-process
//! (the table's stream feeds the push notifier function).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// Told after every commit that appended events, and around the creation of a push config.
pub trait EventListener: Send + Sync {
    fn events_appended(&self, task_id: &str);

    /// A push config is about to be stored; deliveries to it start with the event `from_seq`.
    /// Told before the write, so that whoever lists the task's configs afterwards already
    /// knows where this one starts.
    fn push_config_storing(&self, task_id: &str, config_id: &str, from_seq: u64);

    /// The config announced by `push_config_storing` is stored.
    fn push_config_stored(&self, task_id: &str);
}

/// Wakes the streams of this process that follow a task as soon as events are appended to
/// it (streams of other processes poll), then passes the news on. Keyed by task, so an
/// append wakes only that task's followers.
pub(crate) struct Wakeup {
    followed: Mutex<HashMap<String, watch::Sender<u64>>>,
    next: Option<Arc<dyn EventListener>>,
}

/// A follower's handle on one task's appends; unregisters itself when dropped.
pub(crate) struct Appends {
    changed: Option<watch::Receiver<u64>>,
    task_id: String,
    wakeup: Arc<Wakeup>,
}

impl Appends {
    /// Resolves after the next append to the task in this process (at once if one happened
    /// since the last call or since subscribing).
    pub(crate) async fn next(&mut self) {
        match &mut self.changed {
            Some(changed) => {
                if changed.changed().await.is_err() {
                    // Never: the sender lives in the map while we hold a receiver.
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending::<()>().await,
        }
    }
}

impl Drop for Appends {
    fn drop(&mut self) {
        self.changed.take();
        let mut followed = self.wakeup.lock();
        if followed
            .get(&self.task_id)
            .is_some_and(|s| s.receiver_count() == 0)
        {
            followed.remove(&self.task_id);
        }
    }
}

impl Wakeup {
    pub(crate) fn new(next: Option<Arc<dyn EventListener>>) -> Self {
        Self {
            followed: Mutex::new(HashMap::new()),
            next,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<u64>>> {
        // A panic while holding this lock leaves the map consistent (one insert or remove).
        self.followed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Follows one task's appends from now on.
    pub(crate) fn subscribe(self: &Arc<Self>, task_id: &str) -> Appends {
        let changed = self
            .lock()
            .entry(task_id.to_owned())
            .or_insert_with(|| watch::Sender::new(0))
            .subscribe();
        Appends {
            changed: Some(changed),
            task_id: task_id.to_owned(),
            wakeup: self.clone(),
        }
    }

    #[cfg(test)]
    pub(crate) fn followed_tasks(&self) -> usize {
        self.lock().len()
    }
}

impl EventListener for Wakeup {
    fn events_appended(&self, task_id: &str) {
        if let Some(sender) = self.lock().get(task_id) {
            sender.send_modify(|n| *n = n.wrapping_add(1));
        }
        if let Some(next) = &self.next {
            next.events_appended(task_id);
        }
    }

    fn push_config_storing(&self, task_id: &str, config_id: &str, from_seq: u64) {
        if let Some(next) = &self.next {
            next.push_config_storing(task_id, config_id, from_seq);
        }
    }

    fn push_config_stored(&self, task_id: &str) {
        if let Some(next) = &self.next {
            next.push_config_stored(task_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn woken(appends: &mut Appends) -> bool {
        tokio::time::timeout(Duration::from_millis(50), appends.next())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn an_append_wakes_only_the_followers_of_its_task() {
        let wakeup = Arc::new(Wakeup::new(None));
        let mut a1 = wakeup.subscribe("a");
        let mut a2 = wakeup.subscribe("a");
        let mut b = wakeup.subscribe("b");
        wakeup.events_appended("a");
        assert!(woken(&mut a1).await);
        assert!(woken(&mut a2).await);
        assert!(!woken(&mut b).await, "another task's append");
        assert!(!woken(&mut a1).await, "one wake per append");
        wakeup.events_appended("b");
        assert!(woken(&mut b).await);
    }

    #[tokio::test]
    async fn the_last_follower_gone_forgets_the_task() {
        let wakeup = Arc::new(Wakeup::new(None));
        let a1 = wakeup.subscribe("a");
        let a2 = wakeup.subscribe("a");
        assert_eq!(wakeup.followed_tasks(), 1);
        drop(a1);
        assert_eq!(wakeup.followed_tasks(), 1);
        drop(a2);
        assert_eq!(wakeup.followed_tasks(), 0);
        wakeup.events_appended("a"); // nobody follows: nothing to wake, nothing kept
        assert_eq!(wakeup.followed_tasks(), 0);
    }
}
