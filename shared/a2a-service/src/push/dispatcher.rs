//! The local server's push delivery: background tasks that follow each task's event log and
//! send every new event to each of the task's push configs. (Deployed, the notifier Lambda
//! reads the table's stream instead and calls the same [`PushSender::deliver`].)
//!
//! # Guarantees and decisions
//!
//! - **Order and at-least-once per config.** Each (task, config) pair has a cursor, the next
//!   event sequence number to deliver. One worker at a time per pair delivers the events from
//!   the cursor on, in log order, and advances the cursor only after the delivery ended. A
//!   notification can be delivered twice (a 2xx lost on the way back, a `register` that moves
//!   a cursor back), never out of order.
//! - **Giving up.** The retry budget is the sender's ([`PushOptions`](super::PushOptions):
//!   5 attempts with backoff by default). When a delivery fails for good — budget exhausted,
//!   a 4xx, a refused address — the cursor moves past that event with a warning and the
//!   following events are tried. Holding the cursor would stop every later notification of
//!   that config behind one event that a receiver refuses or cannot take, and keep retrying
//!   forever; the receiver can always read the task (`GetTask`) to catch up.
//! - **Isolation.** Pairs are delivered by separate tokio tasks: a slow or dead webhook
//!   delays only its own config.
//! - **Where cursors start.** [`PushDispatcher::register`] sets a config's cursor *before*
//!   the service stores it (the task's event count then, or 0 for a config given inline
//!   with the message that creates the task), and [`PushDispatcher::notify`] after it is
//!   stored starts the deliveries. Registering first means a scan that lists the config
//!   always knows where it starts. A config the dispatcher finds in the store without having
//!   been told about it (created before a restart, or by another process) starts at the
//!   task's newest event: its receiver gets the current state and everything after.
//!   Registering a known config again (a replaced config) moves its cursor to where it
//!   says (possibly sending an event twice).
//! - **Listing.** A notification lists the task's configs, unless the dispatcher follows
//!   none of the task's configs and the store promises it has none
//!   (`PushConfigStore::may_have_push_configs`: the embedded store knows, as one process
//!   holds its file; a DynamoDB table is always listed).
//! - **In memory only.** Cursors live in this process. Deliveries pending at shutdown (past
//!   [`PushDispatcher::shutdown`]'s bound) or at a crash are not resumed after a restart; the
//!   deployed notifier reads the table's stream, which does resume them. A config of a task
//!   that has ended is not started unless registered (its pair may have been forgotten
//!   after sending the terminal event).
//! - **Owners.** Before each event, the worker checks that the config's owner is a
//!   participant of the task as it is then ([`Audience`]); a config whose owner left (or
//!   that has no owner) is deleted and its pair forgotten, and nothing more goes to it.
//! - **Clean-up.** A pair is forgotten when its config is deleted, or once its task is
//!   terminal and every event was sent.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use task_store::{Store, StoreError, StoredEvent, StoredPushConfig};
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::task::AbortHandle;

use super::configs::{self, Audience};
use super::sender::PushSender;

/// How long a registered config may take to appear in the store before a scan that does not
/// find it forgets it (its write failed).
const STORE_GRACE: Duration = Duration::from_secs(60);
/// Events read from the log at a time.
const PAGE: usize = 100;
/// Attempts at a failing store read before a worker waits for the next notification.
const STORE_ATTEMPTS: u32 = 3;
/// Times a caught-up worker reads the log again when the task counts more events than it
/// read (a commit in between) before it waits for the next notification instead.
const MAX_REREADS: u32 = 3;

/// The dispatcher could not start (it needs a tokio runtime).
#[derive(Debug, thiserror::Error)]
#[error("the push dispatcher must be created inside a tokio runtime")]
pub struct NoRuntime;

/// Delivers every event of every task to the task's push configs, in the background.
/// Cheap to share (`Arc`); must be created inside a tokio runtime.
pub struct PushDispatcher {
    shared: Arc<Shared>,
}

struct Shared {
    store: Arc<dyn Store>,
    sender: Arc<PushSender>,
    runtime: Handle,
    state: Mutex<State>,
    /// Signalled when the last background job ends.
    idle: Notify,
}

#[derive(Default)]
struct State {
    /// Set by `shutdown`: no new notifications or registrations.
    closed: bool,
    tasks: HashMap<String, TaskEntry>,
    next_job: u64,
    jobs: HashMap<u64, AbortHandle>,
}

#[derive(Default)]
struct TaskEntry {
    /// A scan (listing the task's configs) is running.
    scanning: bool,
    /// Another notification came during the scan: scan again.
    rescan: bool,
    configs: HashMap<String, Cursor>,
}

struct Cursor {
    /// The next sequence number to deliver.
    next_seq: u64,
    /// A `register` that came while the worker ran; applied before its next event.
    reset: Option<u64>,
    /// A worker is delivering this pair.
    running: bool,
    /// New events may have come since the worker last read the log.
    dirty: bool,
    /// Registered and not yet seen in the store (its write may still be on its way): a
    /// scan keeps it for [`STORE_GRACE`] after registering even though it lists no such
    /// config.
    registered_at: Option<Instant>,
}

impl Cursor {
    fn new(next_seq: u64, registered_at: Option<Instant>) -> Self {
        Self {
            next_seq,
            reset: None,
            running: false,
            dirty: false,
            registered_at,
        }
    }
}

impl PushDispatcher {
    /// A dispatcher over `store`, sending with `sender`.
    pub fn new(store: Arc<dyn Store>, sender: Arc<PushSender>) -> Result<Self, NoRuntime> {
        let runtime = Handle::try_current().map_err(|_| NoRuntime)?;
        Ok(Self {
            shared: Arc::new(Shared {
                store,
                sender,
                runtime,
                state: Mutex::new(State::default()),
                idle: Notify::new(),
            }),
        })
    }

    /// Tells the dispatcher that a commit appended events to `task_id`. Returns at once; the
    /// deliveries happen in the background.
    pub fn notify(&self, task_id: &str) {
        let mut state = self.shared.lock();
        if state.closed {
            tracing::debug!(
                task_id,
                "push dispatcher is shut down; notification ignored"
            );
            return;
        }
        Shared::wake_task(&self.shared, &mut state, task_id);
    }

    /// Sets where deliveries to a config start: `from_seq` is the first event sequence
    /// number to send (the task's event count when the config is created; 0 for a config
    /// given inline with the message that creates the task). Call it before the config is
    /// stored, and [`notify`](Self::notify) once it is. Replacing a config (same id) and
    /// registering again moves its cursor. A config registered but never stored is
    /// forgotten by the next scan.
    pub fn register(&self, task_id: &str, config_id: &str, from_seq: u64) {
        let mut state = self.shared.lock();
        if state.closed {
            return;
        }
        let now = Some(Instant::now());
        let entry = state.tasks.entry(task_id.to_owned()).or_default();
        match entry.configs.get_mut(config_id) {
            Some(cursor) if cursor.running => {
                cursor.reset = Some(from_seq);
                cursor.registered_at = now;
            }
            Some(cursor) => {
                cursor.next_seq = from_seq;
                cursor.registered_at = now;
            }
            None => {
                entry
                    .configs
                    .insert(config_id.to_owned(), Cursor::new(from_seq, now));
            }
        }
    }

    /// Whether a scan of the task's configs is running (`None`: the task is not tracked).
    #[cfg(test)]
    pub(crate) fn scanning(&self, task_id: &str) -> Option<bool> {
        self.shared.lock().tasks.get(task_id).map(|t| t.scanning)
    }

    /// Stops taking notifications and lets the running deliveries finish what they have to
    /// send, for at most `bound`; then abandons the rest (with a warning). Returns the
    /// number of background jobs abandoned.
    pub async fn shutdown(&self, bound: Duration) -> usize {
        self.shared.lock().closed = true;
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let idle = self.shared.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.shared.lock().jobs.is_empty() {
                return 0;
            }
            if tokio::time::timeout_at(deadline, idle).await.is_err() {
                break;
            }
        }
        let abandoned: Vec<AbortHandle> = self.shared.lock().jobs.drain().map(|(_, h)| h).collect();
        if !abandoned.is_empty() {
            tracing::warn!(
                jobs = abandoned.len(),
                "push dispatcher shut down with deliveries still running; they are abandoned"
            );
        }
        for handle in &abandoned {
            handle.abort();
        }
        abandoned.len()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent between statements, so a panic elsewhere leaves it usable.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `job` in the background, tracked for `shutdown`.
    fn spawn<F>(this: &Arc<Self>, state: &mut State, job: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let id = state.next_job;
        state.next_job += 1;
        let shared = Arc::clone(this);
        // The job stays in the trace of the commit that woke it (its deliveries pass it on).
        let handle = this.runtime.spawn(telemetry::traces::carry(async move {
            // Created inside the job, so it only runs (and locks) on a runtime thread.
            let _guard = JobGuard { shared, id };
            job.await;
        }));
        state.jobs.insert(id, handle.abort_handle());
    }

    fn wake_task(this: &Arc<Self>, state: &mut State, task_id: &str) {
        // A task with no registered config, of which the store knows it has none: nothing to
        // list (a config is registered before it is stored, so none is missed).
        if !state.tasks.contains_key(task_id) && !this.store.may_have_push_configs(task_id) {
            return;
        }
        let entry = state.tasks.entry(task_id.to_owned()).or_default();
        if entry.scanning {
            entry.rescan = true;
            return;
        }
        entry.scanning = true;
        let shared = Arc::clone(this);
        let task = task_id.to_owned();
        Self::spawn(this, state, async move { shared.scan(task).await });
    }

    /// Lists the task's configs and starts (or wakes) one worker per config.
    async fn scan(self: Arc<Self>, task_id: String) {
        loop {
            let listed = self
                .retry_store(|| self.store.list_push_configs(&task_id))
                .await;
            let configs: Option<Vec<StoredPushConfig>> = match listed {
                Ok(configs) => Some(configs),
                Err(err) => {
                    tracing::warn!(task_id, error = %err, "cannot list the task's push configs; its notifications wait for the next event");
                    None
                }
            };
            let ids: Vec<String> = configs
                .iter()
                .flatten()
                .filter_map(|c| c.config.id.clone())
                .collect();
            let unknown = {
                let state = self.lock();
                let known = state.tasks.get(&task_id).map(|t| &t.configs);
                ids.iter()
                    .any(|id| known.is_none_or(|k| !k.contains_key(id)))
            };
            // Configs found without a `register` start at the newest event, unless the task
            // ended: a pair is forgotten once its terminal event went out, and starting it
            // again would send that event twice (a config from before a restart is not
            // resumed, as documented above).
            let newest = if unknown {
                match self.retry_store(|| self.store.get(&task_id)).await {
                    Ok(task) => task
                        .filter(|t| !t.record.state().is_terminal())
                        .map(|t| t.counters.events.saturating_sub(1)),
                    Err(err) => {
                        tracing::warn!(task_id, error = %err, "cannot read the task for its push configs");
                        None
                    }
                }
            } else {
                None
            };

            let mut state = self.lock();
            let state = &mut *state;
            let Some(entry) = state.tasks.get_mut(&task_id) else {
                return;
            };
            let mut start = Vec::new();
            if configs.is_some() {
                for id in &ids {
                    let cursor = match (entry.configs.get_mut(id), newest) {
                        (Some(cursor), _) => cursor,
                        (None, Some(newest)) => entry
                            .configs
                            .entry(id.clone())
                            .or_insert(Cursor::new(newest, None)),
                        (None, None) => continue,
                    };
                    cursor.registered_at = None; // stored: from now on, absent means deleted
                    if cursor.running {
                        cursor.dirty = true;
                    } else {
                        cursor.running = true;
                        start.push(id.clone());
                    }
                }
                // Deleted configs go; registered ones whose write may still be on its way stay.
                let now = Instant::now();
                entry.configs.retain(|id, c| {
                    c.running
                        || ids.contains(id)
                        || c.registered_at.is_some_and(|at| now - at < STORE_GRACE)
                });
            }
            let again = std::mem::take(&mut entry.rescan);
            if !again {
                entry.scanning = false;
                if entry.configs.is_empty() {
                    state.tasks.remove(&task_id);
                }
            }
            for config_id in start {
                let shared = Arc::clone(&self);
                let task = task_id.clone();
                Self::spawn(&self, state, async move {
                    shared.deliver_pair(task, config_id).await
                });
            }
            if !again {
                return;
            }
        }
    }

    /// The worker of one (task, config) pair: delivers from the cursor to the end of the log,
    /// then ends (a later notification starts it again).
    async fn deliver_pair(self: Arc<Self>, task_id: String, config_id: String) {
        let mut rereads = 0;
        let mut audience = Audience::new(task_id.clone());
        loop {
            let from = {
                let mut state = self.lock();
                let Some(cursor) = Self::cursor(&mut state, &task_id, &config_id) else {
                    return;
                };
                cursor.dirty = false;
                if let Some(reset) = cursor.reset.take() {
                    cursor.next_seq = reset;
                }
                cursor.next_seq
            };
            let config = match self
                .retry_store(|| self.store.get_push_config(&task_id, &config_id))
                .await
            {
                Ok(Some(config)) => config,
                Ok(None) => {
                    self.forget(&task_id, &config_id);
                    return;
                }
                Err(err) => {
                    tracing::warn!(task_id, config_id, error = %err, "cannot read the push config; its notifications wait for the next event");
                    if self.stop(&task_id, &config_id, false) {
                        return;
                    }
                    continue;
                }
            };
            let events: Vec<StoredEvent> = match self
                .retry_store(|| self.store.events(&task_id, from, PAGE))
                .await
            {
                Ok(events) => events,
                Err(err) => {
                    tracing::warn!(task_id, config_id, error = %err, "cannot read the task's events; its notifications wait for the next event");
                    if self.stop(&task_id, &config_id, false) {
                        return;
                    }
                    continue;
                }
            };
            if events.is_empty() {
                // Forgotten once the task is terminal and every event was sent; events
                // committed since the read above are read again first.
                let (finished, behind) = match self.store.get(&task_id).await {
                    Ok(Some(task)) => (
                        task.record.state().is_terminal() && task.counters.events <= from,
                        task.counters.events > from,
                    ),
                    Ok(None) => (true, false),
                    Err(_) => (false, false),
                };
                if behind && rereads < MAX_REREADS {
                    rereads += 1;
                    continue;
                }
                if self.stop(&task_id, &config_id, finished) {
                    return;
                }
                continue;
            }
            rereads = 0;
            let mut unread = false;
            for stored in events {
                // At delivery time, the config's owner must be a participant of the task.
                if let Err(err) = audience.refresh(&*self.store).await {
                    tracing::warn!(task_id, config_id, error = %err, "cannot read the task for its push config; its notifications wait for the next event");
                    unread = true;
                    break;
                }
                if !audience.admits(&config) {
                    if let Err(err) = configs::retire(&*self.store, &task_id, &config).await {
                        tracing::warn!(task_id, config_id, error = %err, "cannot remove a push config whose owner left the task; it is not delivered");
                    }
                    self.forget(&task_id, &config_id);
                    return;
                }
                if let Err(err) = self.sender.deliver(&config.config, &stored.event).await {
                    tracing::warn!(
                        task_id, config_id, seq = stored.seq, url = %config.config.url, error = %err,
                        "push notification not delivered; giving up on this event and moving on"
                    );
                }
                let mut state = self.lock();
                let Some(cursor) = Self::cursor(&mut state, &task_id, &config_id) else {
                    return;
                };
                if cursor.reset.is_some() {
                    break;
                }
                cursor.next_seq = stored.seq + 1;
            }
            if unread && self.stop(&task_id, &config_id, false) {
                return;
            }
        }
    }

    fn cursor<'a>(state: &'a mut State, task_id: &str, config_id: &str) -> Option<&'a mut Cursor> {
        state.tasks.get_mut(task_id)?.configs.get_mut(config_id)
    }

    /// Ends a worker that caught up, unless a notification or registration came meanwhile
    /// (then it returns false: read the log again). `finished`: the pair is forgotten too.
    fn stop(&self, task_id: &str, config_id: &str, finished: bool) -> bool {
        let mut state = self.lock();
        let Some(entry) = state.tasks.get_mut(task_id) else {
            return true;
        };
        let Some(cursor) = entry.configs.get_mut(config_id) else {
            return true;
        };
        if cursor.dirty || cursor.reset.is_some() {
            return false;
        }
        cursor.running = false;
        if finished {
            entry.configs.remove(config_id);
            if entry.configs.is_empty() && !entry.scanning {
                state.tasks.remove(task_id);
            }
        }
        true
    }

    /// The config was deleted.
    fn forget(&self, task_id: &str, config_id: &str) {
        let mut state = self.lock();
        if let Some(entry) = state.tasks.get_mut(task_id) {
            entry.configs.remove(config_id);
            if entry.configs.is_empty() && !entry.scanning {
                state.tasks.remove(task_id);
            }
        }
    }

    /// A store read, tried again a few times on a backend failure.
    async fn retry_store<'a, T, F, Fut>(&'a self, read: F) -> Result<T, StoreError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, StoreError>> + 'a,
    {
        let mut attempt = 1;
        loop {
            match read().await {
                Err(StoreError::Backend(err)) if attempt < STORE_ATTEMPTS => {
                    tracing::debug!(error = %err, attempt, "store read failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }
}

/// Untracks a background job when it ends, however it ends.
struct JobGuard {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for JobGuard {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.jobs.remove(&self.id);
        if state.jobs.is_empty() {
            self.shared.idle.notify_waiters();
        }
    }
}
