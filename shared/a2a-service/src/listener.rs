//! Who hears about new events. Locally, the push dispatcher; deployed, nobody in-process
//! (the table's stream feeds the push notifier function).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use a2a::StreamResponse;
use tokio::sync::{broadcast, watch};

/// Told after every commit that appended events, and around the creation of a push config.
pub trait EventListener: Send + Sync {
    fn events_appended(&self, task_id: &str);

    /// A push config is about to be stored; deliveries to it start with the event `from_seq`.
    /// Told before the write, so that whoever lists the task's configs afterwards already
    /// knows where this one starts.
    fn push_config_storing(&self, task_id: &str, config_id: &str, from_seq: u64);

    /// The config announced by `push_config_storing` is stored.
    fn push_config_stored(&self, task_id: &str);

    /// An event that is not stored (a chunk of the model's text while it is generated),
    /// placed after the task's first `after` stored events: only this process's streams
    /// following the task see it. Default: dropped.
    fn transient(&self, _task_id: &str, _after: u64, _event: StreamResponse) {}
}

/// A transient event, and how many of the task's stored events come before it.
pub(crate) type Transient = (u64, StreamResponse);

/// How many transient events a slow follower may fall behind before it misses some.
const TRANSIENT_BACKLOG: usize = 256;

/// One followed task: the count of its appends, and its transient events.
struct Followed {
    appends: watch::Sender<u64>,
    transient: broadcast::Sender<Transient>,
}

/// Wakes the streams of this process that follow a task as soon as events are appended to
/// it (streams of other processes poll), then passes the news on. Keyed by task, so an
/// append wakes only that task's followers.
pub(crate) struct Wakeup {
    followed: Mutex<HashMap<String, Followed>>,
    next: Option<Arc<dyn EventListener>>,
}

/// A follower's handle on one task's appends and transient events; unregisters itself when
/// dropped.
pub(crate) struct Appends {
    changed: Option<watch::Receiver<u64>>,
    transient: broadcast::Receiver<Transient>,
    task_id: String,
    wakeup: Arc<Wakeup>,
}

impl Appends {
    /// Resolves after the next append to the task in this process (at once if one happened
    /// since the last call or since subscribing).
    #[cfg(test)]
    pub(crate) async fn next(&mut self) {
        // Never fails: the sender lives in the map while we hold a receiver.
        Self::changed(&mut self.changed).await;
    }

    /// Resolves after the next append (`None`) or with the next transient event, whichever
    /// comes first.
    pub(crate) async fn news(&mut self) -> Option<Transient> {
        let Self {
            changed, transient, ..
        } = self;
        tokio::select! {
            () = Self::changed(changed) => None,
            event = Self::next_transient(transient) => Some(event),
        }
    }

    async fn changed(changed: &mut Option<watch::Receiver<u64>>) {
        match changed {
            Some(changed) => {
                if changed.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending::<()>().await,
        }
    }

    /// The next transient event of the task (waits for one; a follower that fell behind
    /// skips what it missed).
    async fn next_transient(transient: &mut broadcast::Receiver<Transient>) -> Transient {
        loop {
            match transient.recv().await {
                Ok(event) => return event,
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                // Never: the sender lives in the map while we hold a receiver.
                Err(broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
            }
        }
    }

    /// The transient events already published and not yet taken, oldest first.
    pub(crate) fn transient_ready(&mut self) -> Vec<Transient> {
        let mut ready = Vec::new();
        loop {
            match self.transient.try_recv() {
                Ok(event) => ready.push(event),
                Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                Err(_) => return ready,
            }
        }
    }
}

impl Drop for Appends {
    fn drop(&mut self) {
        self.changed.take();
        let mut followed = self.wakeup.lock();
        if followed
            .get(&self.task_id)
            .is_some_and(|f| f.appends.receiver_count() == 0)
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Followed>> {
        // A panic while holding this lock leaves the map consistent (one insert or remove).
        self.followed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Follows one task's appends from now on.
    pub(crate) fn subscribe(self: &Arc<Self>, task_id: &str) -> Appends {
        let mut followed = self.lock();
        let entry = followed
            .entry(task_id.to_owned())
            .or_insert_with(|| Followed {
                appends: watch::Sender::new(0),
                transient: broadcast::Sender::new(TRANSIENT_BACKLOG),
            });
        Appends {
            changed: Some(entry.appends.subscribe()),
            transient: entry.transient.subscribe(),
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
        if let Some(followed) = self.lock().get(task_id) {
            followed.appends.send_modify(|n| *n = n.wrapping_add(1));
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

    fn transient(&self, task_id: &str, after: u64, event: StreamResponse) {
        if let Some(followed) = self.lock().get(task_id) {
            // No follower in this process: nobody to tell.
            let _ = followed.transient.send((after, event));
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

    fn chunk(text: &str) -> StreamResponse {
        StreamResponse::ArtifactUpdate(a2a::TaskArtifactUpdateEvent {
            task_id: "a".into(),
            context_id: "c".into(),
            artifact: a2a::Artifact {
                artifact_id: "s".into(),
                name: None,
                description: None,
                parts: vec![a2a::Part::text(text)],
                metadata: None,
                extensions: None,
            },
            append: Some(true),
            last_chunk: None,
            metadata: None,
        })
    }

    #[tokio::test]
    async fn transient_events_reach_only_the_followers_of_their_task() {
        let wakeup = Arc::new(Wakeup::new(None));
        let mut a = wakeup.subscribe("a");
        let mut b = wakeup.subscribe("b");
        wakeup.transient("a", 1, chunk("one"));
        wakeup.transient("a", 2, chunk("two"));
        assert_eq!(
            a.transient_ready(),
            vec![(1, chunk("one")), (2, chunk("two"))]
        );
        assert!(b.transient_ready().is_empty());
        wakeup.transient("a", 2, chunk("three"));
        let next = tokio::time::timeout(Duration::from_secs(5), a.news()).await;
        assert_eq!(next.ok(), Some(Some((2, chunk("three")))));
        wakeup.transient("nobody", 0, chunk("lost")); // no follower: dropped, nothing kept
        assert_eq!(wakeup.followed_tasks(), 2);
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
