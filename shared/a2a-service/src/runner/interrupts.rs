//! Interrupts: a message whose `metadata.interrupt` is `true`, from a participant who may
//! send on the task, cuts the agent's run in progress. The lease holder looks for one in the
//! task's inbox every [`POLL_INTERVAL`] while the agent runs (the same read in every process,
//! on every store, so a run held elsewhere is cut as surely as one held here); the cut run's
//! message is then recorded as interrupted, and the drain goes on in inbox order.

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use a2a::Message;
use chrono::{DateTime, Utc};
use serde_json::Value;
use task_core::lifecycle;
use task_core::policy::{self, Action};
use task_store::{Conflict, InboxItem, InboxKey, StoreError, StoredTask, TaskUpdate};
use tokio::sync::watch;
use tracing::{debug, info};

use super::handle::{MAX_RETRIES, Runner};
use super::items::{agent_input, audit, consuming};
use crate::view;

/// How often the lease holder reads the task's inbox for an interrupt while the agent runs:
/// one inbox read a second per running turn, and an interrupt cut within about a second of
/// being queued (plus that read and the one of the task that checks its sender).
pub(super) const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The message metadata key that marks an interrupt (a JSON `true`).
pub(crate) const INTERRUPT_KEY: &str = "interrupt";

/// Whether the message asks to interrupt the run in progress.
pub(crate) fn is_interrupt(message: &Message) -> bool {
    message.metadata.as_ref().and_then(|m| m.get(INTERRUPT_KEY)) == Some(&Value::Bool(true))
}

/// The one clock every watch of a runner looks at the inbox by: a tick each
/// [`POLL_INTERVAL`], from a task started on first use that ends with the runner. A timer of
/// each message's own woke the runtime's time driver once per message (a futex wake and an
/// eventfd write per request under load); waiting on this clock registers no timer.
#[derive(Default)]
pub(super) struct LookClock(OnceLock<watch::Receiver<()>>);

impl LookClock {
    fn subscribe(&self) -> watch::Receiver<()> {
        self.0
            .get_or_init(|| {
                let (ticks, clock) = watch::channel(());
                tokio::spawn(async move {
                    let mut every = tokio::time::interval(POLL_INTERVAL);
                    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    every.tick().await; // the first tick is at once
                    loop {
                        every.tick().await;
                        // Fails once the runner (which keeps a receiver) is gone.
                        if ticks.send(()).is_err() {
                            return;
                        }
                    }
                });
                clock
            })
            .clone()
    }
}

/// Whether the agent is running on the message in progress: only then may an interrupt cut
/// the work (not the message's intake, nor the commit of its outcome).
#[derive(Clone, Default)]
pub(super) struct Interruptible(Arc<AtomicBool>);

impl Interruptible {
    /// Runs `agent_run`, open to interrupts while it runs.
    pub(super) async fn during<T>(&self, agent_run: impl Future<Output = T>) -> T {
        self.0.store(true, Ordering::Release);
        let out = agent_run.await;
        self.0.store(false, Ordering::Release);
        out
    }

    fn open(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// What the lease holder watches while it processes one inbox item.
pub(super) struct Watch<'a> {
    pub(super) task_id: &'a str,
    /// The item in progress: an interrupt queued after it cuts it.
    pub(super) current: &'a InboxKey,
    pub(super) interruptible: Interruptible,
    /// Interrupts that already cut a run in this drain: each cuts one run (the messages
    /// queued before it then run normally).
    pub(super) spent: &'a HashSet<String>,
}

/// How the work on an item ended: done, or cut by these interrupts (oldest first).
pub(super) enum Held<T> {
    Done(T),
    Interrupted(Vec<InboxItem>),
}

impl Runner {
    /// Resolves with the interrupts of the item in progress once there are some while the
    /// agent runs on it; never otherwise. A failed look is tried again at the next tick.
    pub(super) async fn interrupts(&self, watch: Watch<'_>) -> Vec<InboxItem> {
        let mut ticks = self.inner.looks.subscribe();
        loop {
            if ticks.changed().await.is_err() {
                // The runner is going away: nothing more to watch.
                return std::future::pending().await;
            }
            if !watch.interruptible.open() {
                continue;
            }
            match self.find_interrupts(&watch).await {
                Ok(found) if !found.is_empty() => return found,
                Ok(_) => {}
                Err(err) => {
                    debug!(task_id = watch.task_id, error = %err, "no look at the inbox for interrupts");
                }
            }
        }
    }

    /// The unspent interrupts queued after the item in progress whose sender may send on
    /// the task as it is now (one removed since it was queued interrupts nothing).
    async fn find_interrupts(&self, watch: &Watch<'_>) -> Result<Vec<InboxItem>, StoreError> {
        let inbox = self.inner.store.inbox(watch.task_id).await?;
        let found = interrupts_after(inbox, watch.current, watch.spent);
        if found.is_empty() {
            return Ok(found);
        }
        let record = self.read(watch.task_id).await?.record;
        Ok(found
            .into_iter()
            .filter(|i| policy::authorize(&record.extension, &i.sender, Action::Send).is_ok())
            .collect())
    }

    /// Records the item whose run `by` cut: out of the inbox, into the history with a status
    /// message saying who interrupted it, and the agent's transcript entries for it (what
    /// the next run must still read of it); the task stays as it is (WORKING). Nothing of the
    /// cut turn was committed: turns commit one model call at a time.
    pub(super) async fn record_interruption(
        &self,
        task_id: &str,
        item: &InboxItem,
        by: &[InboxItem],
    ) -> Result<(), StoreError> {
        let sender = by.first().map_or("", |i| i.sender.as_str());
        info!(task_id, message_id = %item.key.message_id, by = sender, "run interrupted");
        let transcript = self.inner.agent.interrupted(item, &agent_input(item, None));
        for _ in 0..MAX_RETRIES {
            let stored = self.read(task_id).await?;
            let update = interrupted(&stored, item, sender, transcript.clone(), Utc::now());
            match self.commit(update).await {
                Err(StoreError::Conflict(Conflict::TaskChanged(_))) => continue,
                // Another runner recorded it (a lease lost under the cut run).
                Err(StoreError::Conflict(Conflict::InboxItemGone(_))) => return Ok(()),
                other => return other.map(drop),
            }
        }
        Err(StoreError::Conflict(Conflict::TaskChanged(
            task_id.to_owned(),
        )))
    }
}

/// The interrupts in `inbox` (in inbox order) queued after `current`, not yet spent.
fn interrupts_after(
    inbox: Vec<InboxItem>,
    current: &InboxKey,
    spent: &HashSet<String>,
) -> Vec<InboxItem> {
    inbox
        .into_iter()
        .skip_while(|i| i.key != *current)
        .skip(1)
        .filter(|i| is_interrupt(&i.message) && !spent.contains(&i.key.message_id))
        .collect()
}

/// The write that records `item` as interrupted by `sender`; a task that ended meanwhile
/// (canceled) gets the message only, as when it ends during a turn.
fn interrupted(
    stored: &StoredTask,
    item: &InboxItem,
    sender: &str,
    transcript: Vec<Value>,
    now: DateTime<Utc>,
) -> TaskUpdate {
    let record = &stored.record;
    let reason = format!("interrupted by {sender}");
    let mut update = consuming(stored, item, audit(item, now, true, &reason));
    update.history = vec![item.message.clone()];
    if lifecycle::TERMINAL.contains(record.state()) {
        return update;
    }
    let message = view::agent_message(record, reason);
    let mut next = record.clone();
    next.status = view::status(record.state().clone(), Some(message.clone()), now);
    update.events = vec![view::status_update(&next, Some(&item.key.message_id))];
    update.history.push(message);
    update.record = Some(next);
    update.transcript = transcript;
    update
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use a2a::{Part, Role};

    use super::*;

    fn item(id: &str, at_ms: i64, interrupt: Option<Value>) -> InboxItem {
        let mut message = Message::new(Role::User, vec![Part::text(id)]);
        message.message_id = id.to_owned();
        message.metadata = interrupt.map(|v| HashMap::from([(INTERRUPT_KEY.to_owned(), v)]));
        InboxItem {
            key: InboxKey {
                enqueued_at: DateTime::from_timestamp_millis(at_ms).unwrap_or_default(),
                message_id: id.to_owned(),
            },
            sender: "alice".to_owned(),
            message,
        }
    }

    fn ids(items: &[InboxItem]) -> Vec<&str> {
        items.iter().map(|i| i.key.message_id.as_str()).collect()
    }

    #[test]
    fn only_a_json_true_interrupts() {
        assert!(is_interrupt(&item("a", 0, Some(Value::Bool(true))).message));
        for not in [None, Some(Value::Bool(false)), Some(Value::from("true"))] {
            assert!(!is_interrupt(&item("a", 0, not).message));
        }
    }

    #[test]
    fn interrupts_count_after_the_item_in_progress_and_once() {
        let inbox = vec![
            item("early", 0, Some(Value::Bool(true))),
            item("current", 1, None),
            item("queued", 2, None),
            item("stop", 3, Some(Value::Bool(true))),
            item("again", 4, Some(Value::Bool(true))),
        ];
        let current = inbox[1].key.clone();
        let none = HashSet::new();
        assert_eq!(
            ids(&interrupts_after(inbox.clone(), &current, &none)),
            ["stop", "again"]
        );
        let spent = HashSet::from(["stop".to_owned()]);
        assert_eq!(
            ids(&interrupts_after(inbox.clone(), &current, &spent)),
            ["again"]
        );
        // An item no longer queued (another runner recorded it) has nothing to cut.
        let gone = item("gone", 1, None).key;
        assert!(interrupts_after(inbox, &gone, &none).is_empty());
    }
}
