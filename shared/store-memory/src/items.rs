//! The state the memory store holds: each task's document and logs in plain maps, and the
//! run leases (a lease may exist without a task).

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use task_store::{
    InboxKey, Lease, StoreError, StoreResult, StoredPushConfig, StoredTask, TaskCounters,
    TaskRecord,
};

/// Everything the store holds.
#[derive(Default)]
pub(crate) struct Items {
    pub(crate) tasks: HashMap<String, TaskItems>,
    /// Task id → its run lease.
    pub(crate) leases: HashMap<String, Lease>,
    /// How many leases were handed out: each gets its own token.
    pub(crate) leases_granted: u64,
    /// ListTasks' entries and counts.
    pub(crate) listing: crate::list::Listing,
}

impl Items {
    /// Whether `lease` is still its holder's (same owner and token).
    pub(crate) fn holds(&self, lease: &Lease) -> bool {
        self.leases
            .get(&lease.task_id)
            .is_some_and(|held| held.owner == lease.owner && held.token == lease.token)
    }
}

/// One task: its document, its version, its logs. The counters a reader gets are the logs'
/// lengths, so they cannot disagree with the logs.
pub(crate) struct TaskItems {
    /// The task document (`TaskRecord` JSON).
    pub(crate) record: String,
    /// 1 once created; every write of the task adds one.
    pub(crate) version: u64,
    /// The event log: an event's sequence number is its index.
    pub(crate) events: Vec<String>,
    pub(crate) history: Vec<String>,
    pub(crate) transcript: Vec<String>,
    /// Artifact id → artifact; `artifact_ids` keeps the order they were first written in.
    pub(crate) artifacts: HashMap<String, String>,
    pub(crate) artifact_ids: Vec<String>,
    /// Every message id the task received.
    pub(crate) message_ids: HashSet<String>,
    /// The waiting messages, in key order (arrival time, then message id).
    pub(crate) inbox: BTreeMap<InboxKey, Queued>,
    /// (time, message id) → audit entry JSON.
    pub(crate) audit: BTreeMap<(DateTime<Utc>, String), String>,
    /// Config id → config with its owner.
    pub(crate) push_configs: BTreeMap<String, StoredPushConfig>,
}

/// A message in a task's inbox.
pub(crate) struct Queued {
    pub(crate) sender: String,
    /// The message JSON.
    pub(crate) message: String,
}

impl TaskItems {
    /// A task at version 1 with document `record` and nothing else yet.
    pub(crate) fn new(record: String) -> Self {
        Self {
            record,
            version: 1,
            events: Vec::new(),
            history: Vec::new(),
            transcript: Vec::new(),
            artifacts: HashMap::new(),
            artifact_ids: Vec::new(),
            message_ids: HashSet::new(),
            inbox: BTreeMap::new(),
            audit: BTreeMap::new(),
            push_configs: BTreeMap::new(),
        }
    }

    pub(crate) fn record(&self) -> StoreResult<TaskRecord> {
        parse("task", &self.record)
    }

    /// The task as a reader gets it.
    pub(crate) fn stored(&self) -> StoreResult<StoredTask> {
        Ok(StoredTask {
            record: self.record()?,
            version: self.version,
            counters: TaskCounters {
                events: self.events.len() as u64,
                history: self.history.len() as u64,
                artifact_ids: self.artifact_ids.clone(),
                transcript: self.transcript.len() as u64,
            },
        })
    }
}

/// A stored document read back; a document that does not parse is `Corrupt` (a defect: the
/// store only keeps what it encoded itself).
pub(crate) fn parse<T: DeserializeOwned>(what: &str, json: &str) -> StoreResult<T> {
    serde_json::from_str(json).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}
