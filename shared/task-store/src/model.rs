//! What the store keeps: tasks with their version and counters, events, history, artifacts,
//! inbox items, push configs, leases, audit entries.

use a2a::{Artifact, Message, StreamResponse, TaskPushNotificationConfig, TaskState, TaskStatus};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use task_core::extension::{Role, SubState, TaskExtension};
use task_core::task::AgentState;

/// The task document: everything the service knows of a task except its logs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub id: String,
    pub context_id: String,
    /// The A2A status; `status.timestamp` is required (ListTasks orders by it).
    pub status: TaskStatus,
    /// Why an INPUT_REQUIRED task waits.
    #[serde(default)]
    pub sub_state: Option<SubState>,
    pub extension: TaskExtension,
    #[serde(default)]
    pub agent: AgentState,
}

impl TaskRecord {
    pub fn state(&self) -> &TaskState {
        &self.status.state
    }

    /// The status timestamp, which every stored task must carry.
    pub fn status_timestamp(&self) -> Option<DateTime<Utc>> {
        self.status.timestamp
    }

    /// Participant id → role, as the store indexes and conditions on it.
    pub fn roles(&self) -> impl Iterator<Item = (&str, Role)> {
        self.extension
            .participants
            .iter()
            .map(|p| (p.id.as_str(), p.role))
    }
}

/// Counters the store keeps beside each task. They travel with the [`StoredTask`] a caller
/// read, so an update knows the next sequence numbers without reading again; the version
/// condition guarantees they are current.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskCounters {
    /// Number of events in the log; the next event gets this sequence number.
    pub events: u64,
    /// Number of history messages.
    pub history: u64,
    /// Artifact ids in the order they were first written.
    pub artifact_ids: Vec<String>,
    /// Number of transcript entries (the agent's own record of its model turns).
    #[serde(default)]
    pub transcript: u64,
}

impl TaskCounters {
    /// The counters after appending `events` events, `history` messages, `transcript`
    /// entries and writing these artifacts (a new artifact id goes last; a known one keeps
    /// its place).
    pub fn after(
        &self,
        events: usize,
        history: usize,
        transcript: usize,
        artifacts: &[Artifact],
    ) -> TaskCounters {
        let mut next = self.clone();
        next.events += events as u64;
        next.history += history as u64;
        next.transcript += transcript as u64;
        for artifact in artifacts {
            if !next.artifact_ids.contains(&artifact.artifact_id) {
                next.artifact_ids.push(artifact.artifact_id.clone());
            }
        }
        next
    }
}

/// A task as read from the store.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTask {
    pub record: TaskRecord,
    /// Incremented by every write of the task; updates are conditional on it.
    pub version: u64,
    pub counters: TaskCounters,
}

/// One entry of a task's event log.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// Gapless per task, from 0 (the task as created).
    pub seq: u64,
    pub event: StreamResponse,
}

/// A message waiting for the task's runner.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxItem {
    /// Orders the inbox (arrival time, then message id); unique per task.
    pub key: InboxKey,
    /// The accepted participant who sent it.
    pub sender: String,
    pub message: Message,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InboxKey {
    pub enqueued_at: DateTime<Utc>,
    pub message_id: String,
}

/// A refusal or other intake decision kept in the task's audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub at: DateTime<Utc>,
    pub message_id: String,
    pub participant_id: Option<String>,
    pub accepted: bool,
    pub reason: String,
    /// A refused message's size in bytes (its parts as JSON), instead of the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// The first characters of a refused message's text, at most [`AUDIT_EXCERPT_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<String>,
}

/// The longest excerpt of a refused message an audit entry keeps, in characters.
pub const AUDIT_EXCERPT_CHARS: usize = 120;
/// The longest reason an audit entry keeps, in bytes.
pub const AUDIT_REASON_BYTES: usize = 512;

impl AuditEntry {
    /// An intake decision about message `message_id` from `participant_id` (ids the service
    /// has checked against the id limits); the reason is cut at [`AUDIT_REASON_BYTES`].
    pub fn new(
        at: DateTime<Utc>,
        message_id: &str,
        participant_id: Option<&str>,
        accepted: bool,
        reason: &str,
    ) -> Self {
        Self {
            at,
            message_id: message_id.to_owned(),
            participant_id: participant_id.map(str::to_owned),
            accepted,
            reason: cut(reason, AUDIT_REASON_BYTES),
            size_bytes: None,
            excerpt: None,
        }
    }

    /// With the size and a short excerpt of the refused message, never the message itself:
    /// a refusal costs the store a bounded record, whatever was sent.
    pub fn describing(mut self, size_bytes: u64, text: &str) -> Self {
        self.size_bytes = Some(size_bytes);
        let excerpt: String = text.chars().take(AUDIT_EXCERPT_CHARS).collect();
        self.excerpt = (!excerpt.is_empty()).then_some(excerpt);
        self
    }
}

/// `text` cut to at most `max` bytes on a character boundary.
fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// A push notification config as stored (the A2A shape, with its id always set).
pub type PushConfig = TaskPushNotificationConfig;

/// A push config with the participant who created it: its owner, the only one who may see,
/// replace or (with the task's admins) delete it, and whose membership of the task its
/// deliveries depend on.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredPushConfig {
    /// `None`: a config stored before configs had owners. It is nobody's: no caller gets,
    /// lists or replaces it, it is never delivered (a delivery that meets it deletes it),
    /// and an admin may delete it.
    pub owner: Option<String>,
    pub config: PushConfig,
}

impl StoredPushConfig {
    pub fn is_owned_by(&self, participant: &str) -> bool {
        self.owner.as_deref() == Some(participant)
    }
}

/// Which config [`PushConfigStore::delete_push_config`](crate::PushConfigStore) may remove:
/// the one with the id only if its owner is the one named here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteScope<'a> {
    /// Whoever owns it (an admin's delete).
    AnyOwner,
    /// Only this participant's config.
    Owner(&'a str),
    /// Only a config without owner (one stored before configs had owners).
    Ownerless,
}

impl DeleteScope<'_> {
    /// Whether the scope covers a config owned by `owner`.
    pub fn covers(&self, owner: Option<&str>) -> bool {
        match self {
            DeleteScope::AnyOwner => true,
            DeleteScope::Owner(o) => owner == Some(*o),
            DeleteScope::Ownerless => owner.is_none(),
        }
    }

    /// The scope that deletes exactly a config owned by `owner` (`None`: without owner).
    pub fn exactly(owner: Option<&str>) -> DeleteScope<'_> {
        match owner {
            Some(o) => DeleteScope::Owner(o),
            None => DeleteScope::Ownerless,
        }
    }
}

/// A held run lease (serializable: a run handed to another process carries it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub task_id: String,
    pub owner: String,
    /// Distinguishes two acquisitions by the same owner.
    pub token: String,
    pub expires_at: DateTime<Utc>,
}

impl Lease {
    /// The one lease-expiry rule every adapter applies: a lease that expires at `expires_at`
    /// has expired at `now` from that instant on, so another runner may take it
    /// ([`LeaseStore::acquire`](crate::LeaseStore::acquire)) and the sweeper lists it
    /// ([`LeaseStore::expired_leases`](crate::LeaseStore::expired_leases)).
    pub fn expired(expires_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        expires_at <= now
    }
}

/// ListTasks filters (all optional) and paging.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListQuery {
    pub context_id: Option<String>,
    pub state: Option<TaskState>,
    /// Only tasks whose status timestamp is at or after this instant.
    pub status_after: Option<DateTime<Utc>>,
    /// 1..=100.
    pub page_size: usize,
    /// An opaque token from a previous page.
    pub page_token: Option<String>,
}

impl ListQuery {
    /// Whether `record` passes the filters (context, state, status time); every adapter
    /// applies this one rule, paging aside.
    pub fn matches(&self, record: &TaskRecord) -> bool {
        self.context_id
            .as_ref()
            .is_none_or(|c| *c == record.context_id)
            && self.state.as_ref().is_none_or(|s| s == record.state())
            && self
                .status_after
                .is_none_or(|after| record.status.timestamp.is_some_and(|ts| ts >= after))
    }
}

/// One page of a participant's tasks, newest status first.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskPage {
    pub tasks: Vec<StoredTask>,
    /// Empty on the last page.
    pub next_page_token: String,
    /// Matching tasks across all pages.
    pub total_size: usize,
}

/// A new task and everything written with it, atomically.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    pub record: TaskRecord,
    /// The log's first entries; the first is usually the task as created (seq 0).
    pub events: Vec<StreamResponse>,
    pub history: Vec<Message>,
    /// Message ids to record for de-duplication.
    pub message_ids: Vec<String>,
    /// Messages queued for the task's runner, exactly as `enqueue` queues them (their message
    /// ids are recorded too), so a task and its first message are written together.
    pub inbox: Vec<InboxItem>,
    pub audit: Vec<AuditEntry>,
    /// The run lease, taken with the task (as `acquire` takes it, with this owner, token and
    /// expiry): the creator runs the task's first message without another write.
    pub lease: Option<Lease>,
}

impl NewTask {
    pub fn new(record: TaskRecord) -> Self {
        Self {
            record,
            events: Vec::new(),
            history: Vec::new(),
            message_ids: Vec::new(),
            inbox: Vec::new(),
            audit: Vec::new(),
            lease: None,
        }
    }

    /// The task as the store holds it once created: what a `get` would read then, without
    /// reading (version 1; queued inbox items are not counters).
    pub fn applied(&self) -> StoredTask {
        StoredTask {
            record: self.record.clone(),
            version: 1,
            counters: TaskCounters::default().after(self.events.len(), self.history.len(), 0, &[]),
        }
    }
}

/// A change to an existing task, applied only if its expectations hold.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskUpdate {
    /// The task as the caller read it: its id, version and counters.
    pub base: StoredTask,
    /// States the task may be in (besides the version); empty = any.
    pub allowed_states: Vec<TaskState>,
    /// The actor must hold this role in the stored task (role and participant changes).
    pub actor_role: Option<(String, Role)>,
    /// The new task document; `None` keeps it (the version still advances).
    pub record: Option<TaskRecord>,
    pub events: Vec<StreamResponse>,
    pub history: Vec<Message>,
    /// Entries appended to the task's transcript: the agent's record of its model turns
    /// (opaque to the store; the agent loop writes and reads them).
    pub transcript: Vec<serde_json::Value>,
    /// Written whole; an existing artifact with the same id is replaced in place.
    pub artifacts: Vec<Artifact>,
    pub message_ids: Vec<String>,
    /// Inbox items this update consumes; the update fails if one is already gone.
    pub consume_inbox: Vec<InboxKey>,
    pub audit: Vec<AuditEntry>,
    /// A run lease to give up once the update is applied, if this holder still holds it
    /// (as [`LeaseStore::release`](crate::LeaseStore::release), whose `LeaseLost` is no
    /// failure here): a runner's last write of a run ends the run with it. Never a reason to
    /// refuse the update; a store may give it up in the same write or right after.
    pub release: Option<Lease>,
}

impl TaskUpdate {
    pub fn new(base: StoredTask) -> Self {
        Self {
            base,
            allowed_states: Vec::new(),
            actor_role: None,
            record: None,
            events: Vec::new(),
            history: Vec::new(),
            transcript: Vec::new(),
            artifacts: Vec::new(),
            message_ids: Vec::new(),
            consume_inbox: Vec::new(),
            audit: Vec::new(),
            release: None,
        }
    }

    pub fn task_id(&self) -> &str {
        &self.base.record.id
    }

    /// The task as the store holds it once this update has committed: what a `get` would
    /// read then, without reading (the version condition makes `base` current, and every
    /// write advances the version by one).
    pub fn applied(&self) -> StoredTask {
        StoredTask {
            record: self
                .record
                .clone()
                .unwrap_or_else(|| self.base.record.clone()),
            version: self.base.version + 1,
            counters: self.base.counters.after(
                self.events.len(),
                self.history.len(),
                self.transcript.len(),
                &self.artifacts,
            ),
        }
    }
}

/// One task's part of an atomic commit.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Create(Box<NewTask>),
    Update(Box<TaskUpdate>),
    /// Queues a message for another task's runner, exactly as `InboxStore::enqueue` does
    /// (the task must exist and not be terminal; the id must be new to it), atomically with
    /// the rest of the commit: a sub-task's note to its parent goes with the sub-task's
    /// change of state.
    Enqueue {
        task_id: String,
        item: Box<InboxItem>,
    },
}

impl Change {
    pub fn task_id(&self) -> &str {
        match self {
            Change::Create(new) => &new.record.id,
            Change::Update(update) => update.task_id(),
            Change::Enqueue { task_id, .. } => task_id,
        }
    }
}

/// What a commit did to one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub task_id: String,
    /// The task's new version; 0 for an `Enqueue`, which leaves the version as it was.
    pub version: u64,
    /// Sequence numbers given to the change's events, in order.
    pub event_seqs: Vec<u64>,
}
