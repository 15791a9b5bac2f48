//! The store ports: narrow traits whose signatures carry the concurrency contract.
//!
//! Every adapter enforces exactly this contract, and one contract suite
//! (`task_store::contract`, feature `contract`) runs against each.

use a2a::{Artifact, Message};
use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};

use crate::error::StoreResult;
use crate::model::*;
use crate::retention::Purged;

/// A commit on its way (see [`TaskStore::submit`]): awaiting it gives the commit's outcome.
pub type PendingCommit =
    std::pin::Pin<Box<dyn std::future::Future<Output = StoreResult<Vec<Committed>>> + Send>>;

/// What [`TaskStore::get_newer`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum Newer {
    Missing,
    /// Still at the version the caller named.
    Unchanged,
    Changed(Box<StoredTask>),
}

/// Tasks and their logs.
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// Applies every change atomically, or none:
    /// - `Create`: the task must not exist, nor a lease on its id when one is given
    ///   (`Conflict::TaskExists`); it is written with its first events (seq 0, 1, …),
    ///   history, message-id records, audit entries, one participant-index entry per
    ///   participant, and its run lease when given;
    /// - `Update`: applied only if the task's version is still `base.version`, its state is
    ///   among `allowed_states` (when given) and the actor holds `actor_role` (when given),
    ///   else `Conflict::TaskChanged`; its events get the next gapless sequence numbers; a
    ///   message id already recorded is `Conflict::DuplicateMessage`; an inbox item already
    ///   consumed is `Conflict::InboxItemGone`; its transcript entries get the next numbers;
    /// - `Enqueue`: as [`InboxStore::enqueue`] (`NotFound`, `Conflict::TaskTerminal`,
    ///   `Conflict::DuplicateMessage`), without touching the task's version.
    ///
    /// Several changes in one commit (a parent and its new child, a child and the parent's
    /// mirrored ref) stand or fall together.
    async fn commit(&self, changes: Vec<Change>) -> StoreResult<Vec<Committed>>;

    /// [`commit`](Self::commit) in two steps. Once `submit` has returned, a commit made
    /// afterwards by this process is applied after this one and judged on the state it
    /// leaves, even if neither is durable yet: a change that builds on this one (an update of
    /// the task this one creates) can be submitted before this one is done, and a store that
    /// groups commits may then make both durable together. The returned future gives the
    /// outcome, as `commit` does; nothing may be told to a client before it did. Refusals
    /// found before anything is queued (a document over its cap) come from `submit` itself.
    ///
    /// The default commits before it returns (for a store that cannot order a write it has
    /// not finished).
    async fn submit(&self, changes: Vec<Change>) -> StoreResult<PendingCommit> {
        let outcome = self.commit(changes).await;
        Ok(Box::pin(std::future::ready(outcome)))
    }

    /// The task, or `None`.
    async fn get(&self, task_id: &str) -> StoreResult<Option<StoredTask>>;

    /// The task unless it is still at `version` (a caller that keeps what it read of a task
    /// asks whether that is still current without reading the task again). The default reads
    /// the task and compares; a store that can read a version alone does.
    async fn get_newer(&self, task_id: &str, version: u64) -> StoreResult<Newer> {
        Ok(match self.get(task_id).await? {
            None => Newer::Missing,
            Some(task) if task.version == version => Newer::Unchanged,
            Some(task) => Newer::Changed(Box::new(task)),
        })
    }

    /// Events with `seq >= from_seq`, in order, at most `limit`.
    async fn events(
        &self,
        task_id: &str,
        from_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<StoredEvent>>;

    /// The history, oldest first; `last: Some(n)` gives only the newest `n` messages.
    async fn history(&self, task_id: &str, last: Option<usize>) -> StoreResult<Vec<Message>>;

    /// The artifacts, in the order they were first written.
    async fn artifacts(&self, task_id: &str) -> StoreResult<Vec<Artifact>>;

    /// The transcript entries from number `from` on (0 is the first), in order.
    async fn transcript(&self, task_id: &str, from: u64) -> StoreResult<Vec<serde_json::Value>>;

    /// The audit log, oldest first (by time, then message id).
    async fn audit(&self, task_id: &str) -> StoreResult<Vec<AuditEntry>>;

    /// A participant's tasks, newest status timestamp first (ties: task id descending), with
    /// the query's filters; `total_size` counts every match. An unreadable page token is
    /// `StoreError::Invalid`.
    async fn list(&self, participant_id: &str, query: &ListQuery) -> StoreResult<TaskPage>;
}

/// Messages waiting for a task's runner.
#[async_trait]
pub trait InboxStore: Send + Sync {
    /// Queues a message and records its id, in one atomic write that does not conflict with
    /// the runner's updates. `NotFound` if there is no such task, `Conflict::TaskTerminal` if it
    /// is in a terminal state, `Conflict::DuplicateMessage` if the id was already received.
    async fn enqueue(&self, task_id: &str, item: InboxItem) -> StoreResult<()>;

    /// The waiting messages, in key order (arrival time, then message id).
    async fn inbox(&self, task_id: &str) -> StoreResult<Vec<InboxItem>>;
}

/// One runner per task: a lease with an expiry.
#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// Takes the lease if nobody holds it or the holder's lease expired at `now`
    /// ([`Lease::expired`](crate::Lease::expired));
    /// `Conflict::LeaseHeld` otherwise.
    async fn acquire(
        &self,
        task_id: &str,
        owner: &str,
        now: DateTime<Utc>,
        ttl: Duration,
    ) -> StoreResult<Lease>;

    /// Extends a lease still held by this holder (same owner and token);
    /// `Conflict::LeaseLost` if it was stolen or released.
    async fn renew(&self, lease: &Lease, now: DateTime<Utc>, ttl: Duration) -> StoreResult<Lease>;

    /// Gives the lease up; `Conflict::LeaseLost` if this holder no longer holds it.
    async fn release(&self, lease: &Lease) -> StoreResult<()>;

    /// Tasks whose lease expired at `now` ([`Lease::expired`](crate::Lease::expired): crashed
    /// runners), oldest expiry first.
    async fn expired_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<Vec<String>>;
}

/// Push notification configs of a task, each owned by the participant who created it.
///
/// The store keeps the owner and enforces what a write may do to other owners' configs and
/// the caps, atomically (no read-then-write window); who may *read* a config is the
/// caller's decision, from the owner the reads return.
#[async_trait]
pub trait PushConfigStore: Send + Sync {
    /// Stores `config` (its `id` set, else `Invalid`) on `config.task_id` as `owner`'s, in
    /// one atomic write:
    /// - a new id creates it, unless `owner` would then own more than
    ///   [`MAX_PUSH_CONFIGS_PER_PARTICIPANT`](crate::limits::MAX_PUSH_CONFIGS_PER_PARTICIPANT)
    ///   configs on the task, or the task hold more than
    ///   [`MAX_PUSH_CONFIGS_PER_TASK`](crate::limits::MAX_PUSH_CONFIGS_PER_TASK) owned
    ///   configs: `Conflict::TooManyPushConfigs`;
    /// - an id that is `owner`'s config replaces it (counted once: a cap never refuses it);
    /// - an id that is another participant's config, or a config without owner:
    ///   `Conflict::PushConfigTaken`, nothing written;
    /// - no such task: `NotFound`.
    ///
    /// Concurrent puts of one id by two participants leave it with one owner, and concurrent
    /// creations never pass a cap.
    async fn put_push_config(&self, owner: &str, config: PushConfig) -> StoreResult<PushConfig>;

    /// The config with its owner, or `None`.
    async fn get_push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> StoreResult<Option<StoredPushConfig>>;

    /// Every config of the task with its owner, in id order.
    async fn list_push_configs(&self, task_id: &str) -> StoreResult<Vec<StoredPushConfig>>;

    /// Deletes the config if `scope` covers its owner, atomically with that check (a config
    /// replaced or re-created by someone else meanwhile is not deleted), freeing its slot
    /// under the caps. Returns whether a config was deleted; a config that does not exist or
    /// that the scope does not cover is `Ok(false)` and nothing changes (idempotent).
    async fn delete_push_config(
        &self,
        task_id: &str,
        config_id: &str,
        scope: DeleteScope<'_>,
    ) -> StoreResult<bool>;

    /// Whether `task_id` may have push configs, answered without a read. `false` is a
    /// promise: the store knows every config written to it (a store file one process holds)
    /// and the task has none; `true` means "list them to know" (a table other processes
    /// write too). Lets the push dispatcher skip a listing per commit.
    fn may_have_push_configs(&self, _task_id: &str) -> bool {
        true
    }
}

/// Terminal tasks past their retention ([`crate::retention`]).
#[async_trait]
pub trait RetentionStore: Send + Sync {
    /// Takes every task that has been in a terminal state for `keep` at `now` (from its
    /// status time) and that no existing task on this service names as its parent: all its
    /// rows (document, logs, inbox, audit, push configs, lease, listing entries and counts)
    /// removed at once, each conditional on the task still being the terminal version read,
    /// parents before their children (a parent removed here frees its children in the same
    /// purge). A store that deletes by an expiry attribute instead marks each such task's
    /// items with the instant they expire (`Purged::expiring`), possibly as soon as the task
    /// is terminal, and a child never before its parent. Live tasks are never touched.
    async fn purge(&self, now: DateTime<Utc>, keep: Duration) -> StoreResult<Purged>;
}

/// Everything the service needs from storage.
pub trait Store: TaskStore + InboxStore + LeaseStore + PushConfigStore + RetentionStore {}

impl<T: TaskStore + InboxStore + LeaseStore + PushConfigStore + RetentionStore> Store for T {}
