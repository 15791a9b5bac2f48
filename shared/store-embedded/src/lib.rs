//! The embedded store: the local default, a crash-safe redb file (copy-on-write B-trees) and
//! its write-ahead log ([`wal`]; every commit is in the log, fsynced, before anyone is
//! answered or can read it), with exactly the contract of the DynamoDB adapter.
//!
//! Every write goes through one writer thread ([`writer`]) that applies the writes queued
//! together in one redb transaction and makes it durable once (group commit). Each write's
//! conditions (version, message ids, inbox items, leases) are checked before it writes
//! anything, so one refused write leaves nothing in the shared transaction: a commit stands
//! or falls whole, the same all-or-nothing the DynamoDB adapter gets from
//! `TransactWriteItems`, with conditions judged against the state before the commit.
//!
//! The writer thread does only B-tree work: documents are encoded, and the conditions that
//! follow from the version (states, roles: a task at the version the caller read *is* the
//! task the caller read) are judged, on the caller's thread. Reads run on the caller's thread
//! too (a read of cached pages takes microseconds, less than a hand-off to another thread).
//! The size rules of `task_store::limits` apply unchanged, so a task that works here works on
//! AWS.

mod logged;
mod wal;
mod writer;

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};

use a2a::{Artifact, Message};
use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Duration, Utc};
use logged::{Journal, Logged};
use redb::{
    Database, ReadableDatabase, ReadableTable, TableDefinition, TableHandle, WriteTransaction,
};
use serde::{Deserialize, Serialize};
use task_store::limits::{self, EncodedChange};
use task_store::{
    AuditEntry, Change, Committed, Conflict, InboxItem, InboxKey, InboxStore, Lease, LeaseStore,
    ListQuery, NewTask, Newer, PendingCommit, PushConfig, PushConfigStore, StoreError, StoreResult,
    StoredEvent, StoredTask, TaskCounters, TaskPage, TaskRecord, TaskStore, TaskUpdate,
};
use writer::backend;

/// Task id → the task document (`TaskRecord` JSON).
const TASKS: TableDefinition<&str, &str> = TableDefinition::new("task_records");
/// Task id → (version, terminal, events, history messages, transcript entries, artifact ids
/// as a JSON array): what the writer checks and counts, without parsing the document.
const META: TableDefinition<&str, (u64, bool, u64, u64, u64, &str)> =
    TableDefinition::new("task_counters");
/// (task, seq) → event.
const EVENTS: TableDefinition<(&str, u64), &str> = TableDefinition::new("events");
/// (task, n) → history message.
const HISTORY: TableDefinition<(&str, u64), &str> = TableDefinition::new("history");
/// (task, n) → transcript entry.
const TRANSCRIPT: TableDefinition<(&str, u64), &str> = TableDefinition::new("transcript");
/// (task, artifact id) → artifact.
const ARTIFACTS: TableDefinition<(&str, &str), &str> = TableDefinition::new("artifacts");
/// (task, message id): the message ids a task received.
const MESSAGE_IDS: TableDefinition<(&str, &str), ()> = TableDefinition::new("message_ids");
/// (task, seconds, nanos, message id) → (sender, message).
const INBOX: TableDefinition<(&str, i64, u32, &str), (&str, &str)> =
    TableDefinition::new("inbox_items");
/// (task, seconds, nanos, message id) → audit entry.
const AUDIT: TableDefinition<(&str, i64, u32, &str), &str> = TableDefinition::new("audit");
/// (task, config id) → push config.
const PUSH: TableDefinition<(&str, &str), &str> = TableDefinition::new("push_configs");
/// Task id → lease.
const LEASES: TableDefinition<&str, &str> = TableDefinition::new("leases");
/// (participant, status seconds, status nanos, task id): ListTasks' index.
const INDEX: TableDefinition<(&str, i64, u32, &str), ()> =
    TableDefinition::new("participant_index");
/// Tables of earlier file layouts (task documents with their counters inside; counters
/// without the transcript's), which this version does not read.
const OLD_LAYOUT_TABLES: &[&str] = &["tasks", "inbox", "task_meta"];

#[derive(Serialize, Deserialize)]
struct LeaseDoc {
    owner: String,
    token: String,
    expires_at: DateTime<Utc>,
}

/// Every table of the store, opened in one write transaction (the writer opens them once per
/// transaction and runs all the jobs of its batch on them). Writes go through [`Logged`], so
/// the writer can put them in the write-ahead log.
pub(crate) struct Tables<'t> {
    tasks: Logged<'t, &'static str, &'static str>,
    meta: Logged<'t, &'static str, Counters>,
    events: Logged<'t, (&'static str, u64), &'static str>,
    history: Logged<'t, (&'static str, u64), &'static str>,
    transcript: Logged<'t, (&'static str, u64), &'static str>,
    artifacts: Logged<'t, (&'static str, &'static str), &'static str>,
    message_ids: Logged<'t, (&'static str, &'static str), ()>,
    inbox: Logged<'t, TimedKey, (&'static str, &'static str)>,
    audit: Logged<'t, TimedKey, &'static str>,
    push: Logged<'t, (&'static str, &'static str), &'static str>,
    leases: Logged<'t, &'static str, &'static str>,
    index: Logged<'t, TimedKey, ()>,
}

/// (version, terminal, events, history messages, transcript entries, artifact ids as JSON).
type Counters = (u64, bool, u64, u64, u64, &'static str);
/// (task or participant, seconds, nanoseconds, message or task id).
type TimedKey = (&'static str, i64, u32, &'static str);

impl<'t> Tables<'t> {
    /// Opens (creating if needed) every table in `txn`.
    pub(crate) fn open(txn: &'t WriteTransaction) -> Result<Self, redb::TableError> {
        Ok(Self {
            tasks: Logged::new(txn.open_table(TASKS)?),
            meta: Logged::new(txn.open_table(META)?),
            events: Logged::new(txn.open_table(EVENTS)?),
            history: Logged::new(txn.open_table(HISTORY)?),
            transcript: Logged::new(txn.open_table(TRANSCRIPT)?),
            artifacts: Logged::new(txn.open_table(ARTIFACTS)?),
            message_ids: Logged::new(txn.open_table(MESSAGE_IDS)?),
            inbox: Logged::new(txn.open_table(INBOX)?),
            audit: Logged::new(txn.open_table(AUDIT)?),
            push: Logged::new(txn.open_table(PUSH)?),
            leases: Logged::new(txn.open_table(LEASES)?),
            index: Logged::new(txn.open_table(INDEX)?),
        })
    }

    /// The tables in a fixed order: a table's place is its tag in the write-ahead log, so
    /// new tables go at the end.
    fn journals(&mut self) -> [&mut dyn Journal; 12] {
        [
            &mut self.tasks,
            &mut self.meta,
            &mut self.events,
            &mut self.history,
            &mut self.transcript,
            &mut self.artifacts,
            &mut self.message_ids,
            &mut self.inbox,
            &mut self.audit,
            &mut self.push,
            &mut self.leases,
            &mut self.index,
        ]
    }

    /// Every write made through the tables since they were opened (or since the last call),
    /// as one write-ahead log payload; empty if nothing was written.
    pub(crate) fn take_writes(&mut self) -> Vec<u8> {
        let written: Vec<(u8, Vec<u8>)> = (0u8..)
            .zip(self.journals())
            .map(|(tag, table)| (tag, table.take_ops()))
            .filter(|(_, ops)| !ops.is_empty())
            .collect();
        let mut payload =
            Vec::with_capacity(written.iter().map(|(_, ops)| 1 + 4 + ops.len()).sum());
        for (tag, ops) in &written {
            payload.push(*tag);
            logged::put_bytes(&mut payload, ops);
        }
        payload
    }

    /// Repeats the writes of a payload [`take_writes`](Self::take_writes) gave.
    pub(crate) fn replay(&mut self, mut payload: &[u8]) -> Result<(), logged::ReplayError> {
        while let Some((&tag, rest)) = payload.split_first() {
            let (ops, rest) = logged::take_bytes(rest)?;
            let mut journals = self.journals();
            let table = journals
                .get_mut(usize::from(tag))
                .ok_or_else(|| logged::ReplayError::Malformed(format!("unknown table {tag}")))?;
            table.replay(ops)?;
            payload = rest;
        }
        Ok(())
    }
}

/// The store. Cheap to clone: clones share the open database and its writer; the last one
/// dropped waits for queued writes and closes the file.
#[derive(Clone)]
pub struct EmbeddedStore {
    db: Arc<Database>,
    writer: Arc<writer::Writer>,
    /// Every task that has had a push config since the file was opened (redb locks the file,
    /// so no other process writes configs). A config's task is added when its write is
    /// applied, and stays after its configs are deleted (the dispatcher then lists none).
    push_tasks: Arc<RwLock<HashSet<String>>>,
}

fn corrupt(what: &str, err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {err}"))
}

fn json<T: Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Invalid(format!("cannot encode: {e}")))
}

fn parse<T: for<'de> Deserialize<'de>>(what: &str, text: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|e| corrupt(what, e))
}

/// How many groups of writes the write-ahead log beside the database file at `path` holds:
/// those committed since the last checkpoint, which the next opening replays unless the store
/// was closed cleanly (closing checkpoints). For operators and tests; it reads the log only.
pub fn groups_in_log(path: impl AsRef<Path>) -> StoreResult<usize> {
    Ok(wal::Wal::peek(&wal_path(path.as_ref()))
        .map_err(backend)?
        .len())
}

/// The write-ahead log of the store at `path`: beside it, its name with `.wal` appended.
fn wal_path(path: &Path) -> std::path::PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".wal");
    path.with_file_name(name)
}

/// (seconds, nanoseconds) of an instant: an order-preserving key for any representable time.
fn time_key(t: DateTime<Utc>) -> (i64, u32) {
    (t.timestamp(), t.timestamp_subsec_nanos())
}

impl EmbeddedStore {
    /// Opens the store at `path`, creating it if needed.
    pub fn open(path: impl AsRef<Path>) -> StoreResult<Self> {
        let path = path.as_ref();
        let db = Database::create(path).map_err(backend)?;
        let txn = db.begin_write().map_err(backend)?;
        if let Some(old) = txn
            .list_tables()
            .map_err(backend)?
            .find(|t| OLD_LAYOUT_TABLES.contains(&t.name()))
        {
            return Err(StoreError::Invalid(format!(
                "{} was written by an earlier version of the embedded store (table {:?}); \
                 move it away to start afresh",
                path.display(),
                old.name()
            )));
        }
        // Create every table up front, so readers never meet a missing one.
        drop(Tables::open(&txn).map_err(backend)?);
        txn.commit().map_err(backend)?;
        let log = writer::Log::recover(&db, &wal_path(path))?;
        let db = Arc::new(db);
        let push_tasks = Arc::new(RwLock::new(tasks_with_push_configs(&db)?));
        let writer = Arc::new(writer::Writer::start(db.clone(), log)?);
        Ok(Self {
            db,
            writer,
            push_tasks,
        })
    }

    /// Runs read-only work on the last committed state, on the caller's thread.
    fn read<T>(
        &self,
        work: impl FnOnce(&redb::ReadTransaction) -> StoreResult<T>,
    ) -> StoreResult<T> {
        let txn = self.db.begin_read().map_err(backend)?;
        work(&txn)
    }
}

// ---------------------------------------------------------------------------------------------
// Writes: prepared on the caller's thread, checked then applied by the writer
// ---------------------------------------------------------------------------------------------

/// Index keys (participant, status time) of a task document.
fn index_keys(record: &TaskRecord) -> Vec<(String, i64, u32)> {
    let (secs, nanos) = time_key(record.status.timestamp.unwrap_or_default());
    record
        .roles()
        .map(|(participant, _)| (participant.to_owned(), secs, nanos))
        .collect()
}

/// One change of a commit, ready for the writer.
enum Prepared {
    Task(Box<PreparedTask>),
    /// A message queued for another task (`Change::Enqueue`).
    Enqueue {
        task_id: String,
        key: InboxKey,
        sender: String,
        message: String,
    },
}

/// A creation or an update, ready for the writer.
struct PreparedTask {
    task_id: String,
    /// `None`: create (the task must not exist); `Some(v)`: update from version `v`.
    expected_version: Option<u64>,
    version: u64,
    terminal: bool,
    counters: TaskCounters,
    artifact_ids: String,
    first_seq: u64,
    first_history: u64,
    first_transcript: u64,
    docs: EncodedChange,
    message_ids: Vec<String>,
    /// (key, sender) of the inbox items a creation queues; their messages are `docs.inbox`.
    inbox: Vec<(InboxKey, String)>,
    consume_inbox: Vec<InboxKey>,
    /// Index entries to drop and to add.
    unindex: Vec<(String, i64, u32)>,
    index: Vec<(String, i64, u32)>,
    /// False for an update without a record (the document stays as it is).
    write_document: bool,
    /// The run lease a creation takes (the lease document).
    lease: Option<String>,
    /// The run lease an update gives up, if still held by it.
    release: Option<Lease>,
}

fn duplicate_message(task_id: &str, message_id: &str) -> StoreError {
    Conflict::DuplicateMessage {
        task_id: task_id.to_owned(),
        message_id: message_id.to_owned(),
    }
    .into()
}

fn prepare_create(new: &NewTask, docs: EncodedChange) -> StoreResult<PreparedTask> {
    let id = new.record.id.clone();
    let mut message_ids = new.message_ids.clone();
    message_ids.extend(new.inbox.iter().map(|i| i.key.message_id.clone()));
    let counters = TaskCounters::default().after(new.events.len(), new.history.len(), 0, &[]);
    Ok(PreparedTask {
        expected_version: None,
        version: 1,
        terminal: new.record.state().is_terminal(),
        artifact_ids: json(&counters.artifact_ids)?,
        counters,
        first_seq: 0,
        first_history: 0,
        first_transcript: 0,
        docs,
        message_ids,
        inbox: new
            .inbox
            .iter()
            .map(|i| (i.key.clone(), i.sender.clone()))
            .collect(),
        consume_inbox: Vec::new(),
        unindex: Vec::new(),
        index: index_keys(&new.record),
        write_document: true,
        lease: new.lease.as_ref().map(lease_doc).transpose()?,
        release: None,
        task_id: id,
    })
}

fn prepare_update(update: &TaskUpdate, docs: EncodedChange) -> StoreResult<PreparedTask> {
    let base = &update.base;
    let id = update.task_id();
    // At the expected version the stored task is `base`, so these conditions are judged on it.
    let state_allowed =
        update.allowed_states.is_empty() || update.allowed_states.contains(base.record.state());
    let role_held = update.actor_role.as_ref().is_none_or(|(actor, role)| {
        base.record
            .extension
            .participant(actor)
            .is_some_and(|p| p.role == *role)
    });
    if !state_allowed || !role_held {
        return Err(Conflict::TaskChanged(id.to_owned()).into());
    }
    let applied = update.applied();
    let (unindex, index) = match &update.record {
        Some(record) => (index_keys(&base.record), index_keys(record)),
        None => (Vec::new(), Vec::new()),
    };
    Ok(PreparedTask {
        task_id: id.to_owned(),
        expected_version: Some(base.version),
        version: applied.version,
        terminal: applied.record.state().is_terminal(),
        artifact_ids: json(&applied.counters.artifact_ids)?,
        counters: applied.counters,
        first_seq: base.counters.events,
        first_history: base.counters.history,
        first_transcript: base.counters.transcript,
        docs,
        message_ids: update.message_ids.clone(),
        inbox: Vec::new(),
        consume_inbox: update.consume_inbox.clone(),
        unindex,
        index,
        write_document: update.record.is_some(),
        lease: None,
        release: update.release.clone(),
    })
}

/// The version and terminal flag of a task, if it exists.
fn meta_of(tables: &Tables, task_id: &str) -> StoreResult<Option<(u64, bool)>> {
    let found = tables.meta.get(task_id).map_err(backend)?;
    Ok(found.map(|m| {
        let (version, terminal, ..) = m.value();
        (version, terminal)
    }))
}

fn check_message_ids(tables: &Tables, task_id: &str, ids: &[String]) -> StoreResult<()> {
    for (i, id) in ids.iter().enumerate() {
        if ids[..i].contains(id)
            || tables
                .message_ids
                .get((task_id, id.as_str()))
                .map_err(backend)?
                .is_some()
        {
            return Err(duplicate_message(task_id, id));
        }
    }
    Ok(())
}

/// Every condition of a commit, judged before any of it is written.
fn check_commit(tables: &Tables, changes: &[Prepared]) -> StoreResult<()> {
    for change in changes {
        match change {
            Prepared::Task(task) => check_task(tables, task)?,
            Prepared::Enqueue { task_id, key, .. } => check_enqueue(tables, task_id, key)?,
        }
    }
    Ok(())
}

fn check_task(tables: &Tables, change: &PreparedTask) -> StoreResult<()> {
    let id = change.task_id.as_str();
    match (meta_of(tables, id)?, change.expected_version) {
        (Some(_), None) => return Err(Conflict::TaskExists(id.to_owned()).into()),
        (None, None) => {}
        (Some((version, _)), Some(expected)) if version == expected => {}
        (_, Some(_)) => return Err(Conflict::TaskChanged(id.to_owned()).into()),
    }
    if change.lease.is_some() && tables.leases.get(id).map_err(backend)?.is_some() {
        return Err(Conflict::TaskExists(id.to_owned()).into());
    }
    check_message_ids(tables, id, &change.message_ids)?;
    for key in &change.consume_inbox {
        let (secs, nanos) = time_key(key.enqueued_at);
        if tables
            .inbox
            .get((id, secs, nanos, key.message_id.as_str()))
            .map_err(backend)?
            .is_none()
        {
            return Err(Conflict::InboxItemGone(id.to_owned()).into());
        }
    }
    Ok(())
}

/// What `enqueue` checks: the task exists, is not terminal, and has not seen the id.
fn check_enqueue(tables: &Tables, task_id: &str, key: &InboxKey) -> StoreResult<()> {
    match meta_of(tables, task_id)? {
        None => return Err(StoreError::NotFound(format!("task {task_id}"))),
        Some((_, true)) => return Err(Conflict::TaskTerminal(task_id.to_owned()).into()),
        Some(_) => {}
    }
    check_message_ids(tables, task_id, std::slice::from_ref(&key.message_id))
}

fn apply_enqueue(
    tables: &mut Tables,
    task_id: &str,
    key: &InboxKey,
    sender: &str,
    message: &str,
) -> StoreResult<()> {
    tables
        .message_ids
        .insert((task_id, key.message_id.as_str()), ())
        .map_err(backend)?;
    let (secs, nanos) = time_key(key.enqueued_at);
    tables
        .inbox
        .insert(
            (task_id, secs, nanos, key.message_id.as_str()),
            (sender, message),
        )
        .map_err(backend)?;
    Ok(())
}

fn apply_commit(tables: &mut Tables, changes: Vec<Prepared>) -> StoreResult<Vec<Committed>> {
    let mut committed = Vec::with_capacity(changes.len());
    for change in changes {
        match change {
            Prepared::Task(task) => committed.push(apply_task(tables, *task)?),
            Prepared::Enqueue {
                task_id,
                key,
                sender,
                message,
            } => {
                apply_enqueue(tables, &task_id, &key, &sender, &message)?;
                committed.push(Committed {
                    task_id,
                    version: 0,
                    event_seqs: Vec::new(),
                });
            }
        }
    }
    Ok(committed)
}

fn apply_task(tables: &mut Tables, change: PreparedTask) -> StoreResult<Committed> {
    // A lease another runner took meanwhile (this one's expired) stays.
    let give_up = change
        .release
        .as_ref()
        .is_some_and(|lease| held_by(tables, lease).is_ok());
    let Tables {
        tasks,
        meta,
        events,
        history,
        transcript,
        artifacts,
        message_ids,
        inbox,
        audit,
        index,
        leases,
        ..
    } = tables;
    let id = change.task_id.as_str();
    let docs = &change.docs;
    if change.write_document {
        tasks.insert(id, docs.task.as_str()).map_err(backend)?;
    }
    meta.insert(
        id,
        (
            change.version,
            change.terminal,
            change.counters.events,
            change.counters.history,
            change.counters.transcript,
            change.artifact_ids.as_str(),
        ),
    )
    .map_err(backend)?;
    for message_id in &change.message_ids {
        message_ids
            .insert((id, message_id.as_str()), ())
            .map_err(backend)?;
    }
    for ((key, sender), message) in change.inbox.iter().zip(&docs.inbox) {
        let (secs, nanos) = time_key(key.enqueued_at);
        inbox
            .insert(
                (id, secs, nanos, key.message_id.as_str()),
                (sender.as_str(), message.as_str()),
            )
            .map_err(backend)?;
    }
    for key in &change.consume_inbox {
        let (secs, nanos) = time_key(key.enqueued_at);
        inbox
            .remove((id, secs, nanos, key.message_id.as_str()))
            .map_err(backend)?;
    }
    let mut seqs = Vec::with_capacity(docs.events.len());
    for (seq, event) in (change.first_seq..).zip(&docs.events) {
        events.insert((id, seq), event.as_str()).map_err(backend)?;
        seqs.push(seq);
    }
    for (n, message) in (change.first_history..).zip(&docs.history) {
        history.insert((id, n), message.as_str()).map_err(backend)?;
    }
    for (n, entry) in (change.first_transcript..).zip(&docs.transcript) {
        transcript
            .insert((id, n), entry.as_str())
            .map_err(backend)?;
    }
    for (artifact_id, artifact) in &docs.artifacts {
        artifacts
            .insert((id, artifact_id.as_str()), artifact.as_str())
            .map_err(backend)?;
    }
    for (entry, text) in &docs.audit {
        let (secs, nanos) = time_key(entry.at);
        audit
            .insert((id, secs, nanos, entry.message_id.as_str()), text.as_str())
            .map_err(backend)?;
    }
    for (participant, secs, nanos) in &change.unindex {
        index
            .remove((participant.as_str(), *secs, *nanos, id))
            .map_err(backend)?;
    }
    for (participant, secs, nanos) in &change.index {
        index
            .insert((participant.as_str(), *secs, *nanos, id), ())
            .map_err(backend)?;
    }
    if let Some(lease) = &change.lease {
        leases.insert(id, lease.as_str()).map_err(backend)?;
    }
    if give_up {
        leases.remove(id).map_err(backend)?;
    }
    Ok(Committed {
        task_id: change.task_id.clone(),
        version: change.version,
        event_seqs: seqs,
    })
}

// ---------------------------------------------------------------------------------------------
// Reads
// ---------------------------------------------------------------------------------------------

fn read_task(txn: &redb::ReadTransaction, task_id: &str) -> StoreResult<Option<StoredTask>> {
    let meta = txn.open_table(META).map_err(backend)?;
    let Some(found) = meta.get(task_id).map_err(backend)? else {
        return Ok(None);
    };
    let (version, _, events, history, transcript, artifact_ids) = found.value();
    let tasks = txn.open_table(TASKS).map_err(backend)?;
    let doc = tasks
        .get(task_id)
        .map_err(backend)?
        .ok_or_else(|| corrupt("task", format!("{task_id} has counters but no document")))?;
    Ok(Some(StoredTask {
        record: parse("task", doc.value())?,
        version,
        counters: TaskCounters {
            events,
            history,
            transcript,
            artifact_ids: parse("artifact ids", artifact_ids)?,
        },
    }))
}

/// Page tokens: the index key of the last task of the previous page.
#[derive(Serialize, Deserialize)]
struct PageToken {
    secs: i64,
    nanos: u32,
    task: String,
}

fn encode_token(token: &PageToken) -> StoreResult<String> {
    Ok(URL_SAFE_NO_PAD.encode(json(token)?))
}

fn decode_token(text: &str) -> StoreResult<PageToken> {
    let invalid = || StoreError::Invalid("invalid page token".to_owned());
    let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| invalid())?;
    serde_json::from_slice(&bytes).map_err(|_| invalid())
}

fn matches(query: &ListQuery, record: &TaskRecord) -> bool {
    query
        .context_id
        .as_ref()
        .is_none_or(|c| *c == record.context_id)
        && query.state.as_ref().is_none_or(|s| s == record.state())
        && query
            .status_after
            .is_none_or(|after| record.status.timestamp.is_some_and(|ts| ts >= after))
}

#[async_trait]
impl TaskStore for EmbeddedStore {
    async fn commit(&self, changes: Vec<Change>) -> StoreResult<Vec<Committed>> {
        self.submit(changes).await?.await
    }

    /// Queued for the writer before it returns: the writer applies queued writes in order.
    async fn submit(&self, changes: Vec<Change>) -> StoreResult<PendingCommit> {
        // Encoded and prepared before the writer sees them, so size errors and conditions
        // that need no database never hold the writer.
        let encoded = limits::encode_changes(&changes)?;
        let prepared = changes
            .iter()
            .zip(encoded)
            .map(|(change, mut docs)| {
                Ok(match change {
                    Change::Create(new) => Prepared::Task(Box::new(prepare_create(new, docs)?)),
                    Change::Update(update) => {
                        Prepared::Task(Box::new(prepare_update(update, docs)?))
                    }
                    Change::Enqueue { task_id, item } => Prepared::Enqueue {
                        task_id: task_id.clone(),
                        key: item.key.clone(),
                        sender: item.sender.clone(),
                        message: docs.inbox.pop().unwrap_or_default(),
                    },
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        let outcome = self.writer.submit(
            prepared,
            |tables, prepared| check_commit(tables, prepared),
            |tables, prepared, ()| apply_commit(tables, prepared),
        )?;
        Ok(Box::pin(outcome))
    }

    async fn get(&self, task_id: &str) -> StoreResult<Option<StoredTask>> {
        self.read(|txn| read_task(txn, task_id))
    }

    /// The counters table answers for the version; the document is read only if it moved.
    async fn get_newer(&self, task_id: &str, version: u64) -> StoreResult<Newer> {
        self.read(|txn| {
            let meta = txn.open_table(META).map_err(backend)?;
            match meta.get(task_id).map_err(backend)? {
                None => return Ok(Newer::Missing),
                Some(found) if found.value().0 == version => return Ok(Newer::Unchanged),
                Some(_) => {}
            }
            Ok(match read_task(txn, task_id)? {
                Some(task) => Newer::Changed(Box::new(task)),
                None => Newer::Missing,
            })
        })
    }

    async fn events(
        &self,
        task_id: &str,
        from_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<StoredEvent>> {
        self.read(|txn| {
            let events = txn.open_table(EVENTS).map_err(backend)?;
            events
                .range((task_id, from_seq)..=(task_id, u64::MAX))
                .map_err(backend)?
                .take(limit)
                .map(|entry| {
                    let (key, value) = entry.map_err(backend)?;
                    Ok(StoredEvent {
                        seq: key.value().1,
                        event: parse("event", value.value())?,
                    })
                })
                .collect()
        })
    }

    async fn history(&self, task_id: &str, last: Option<usize>) -> StoreResult<Vec<Message>> {
        self.read(|txn| {
            let history = txn.open_table(HISTORY).map_err(backend)?;
            let range = history
                .range((task_id, 0)..=(task_id, u64::MAX))
                .map_err(backend)?;
            let mut newest_first: Vec<Message> = range
                .rev()
                .take(last.unwrap_or(usize::MAX))
                .map(|entry| parse("message", entry.map_err(backend)?.1.value()))
                .collect::<StoreResult<_>>()?;
            newest_first.reverse();
            Ok(newest_first)
        })
    }

    async fn transcript(&self, task_id: &str, from: u64) -> StoreResult<Vec<serde_json::Value>> {
        self.read(|txn| {
            let transcript = txn.open_table(TRANSCRIPT).map_err(backend)?;
            transcript
                .range((task_id, from)..=(task_id, u64::MAX))
                .map_err(backend)?
                .map(|entry| parse("transcript entry", entry.map_err(backend)?.1.value()))
                .collect()
        })
    }

    async fn artifacts(&self, task_id: &str) -> StoreResult<Vec<Artifact>> {
        self.read(|txn| {
            let meta = txn.open_table(META).map_err(backend)?;
            let Some(found) = meta.get(task_id).map_err(backend)? else {
                return Ok(Vec::new());
            };
            let order: Vec<String> = parse("artifact ids", found.value().5)?;
            let artifacts = txn.open_table(ARTIFACTS).map_err(backend)?;
            order
                .iter()
                .filter_map(
                    |artifact_id| match artifacts.get((task_id, artifact_id.as_str())) {
                        Ok(Some(v)) => Some(parse("artifact", v.value())),
                        Ok(None) => None,
                        Err(e) => Some(Err(backend(e))),
                    },
                )
                .collect()
        })
    }

    async fn audit(&self, task_id: &str) -> StoreResult<Vec<AuditEntry>> {
        self.read(|txn| {
            let audit = txn.open_table(AUDIT).map_err(backend)?;
            audit
                .range((task_id, i64::MIN, 0, "")..(task_id, i64::MAX, 0, ""))
                .map_err(backend)?
                .map(|entry| parse("audit entry", entry.map_err(backend)?.1.value()))
                .collect()
        })
    }

    async fn list(&self, participant_id: &str, query: &ListQuery) -> StoreResult<TaskPage> {
        let after = query.page_token.as_deref().map(decode_token).transpose()?;
        self.read(|txn| {
            let index = txn.open_table(INDEX).map_err(backend)?;
            let p = participant_id;
            let entries = index
                .range((p, i64::MIN, 0, "")..(p, i64::MAX, 0, ""))
                .map_err(backend)?;
            let mut page = Vec::new();
            let mut total = 0;
            let mut last_key = None;
            let mut more = false;
            for entry in entries.rev() {
                let (key, _) = entry.map_err(backend)?;
                let (_, secs, nanos, task_id) = key.value();
                let Some(task) = read_task(txn, task_id)? else {
                    continue;
                };
                if !matches(query, &task.record) {
                    continue;
                }
                total += 1;
                let before_cursor = after
                    .as_ref()
                    .is_none_or(|c| (secs, nanos, task_id) < (c.secs, c.nanos, c.task.as_str()));
                if !before_cursor {
                    continue;
                }
                if page.len() < query.page_size {
                    last_key = Some(PageToken {
                        secs,
                        nanos,
                        task: task_id.to_owned(),
                    });
                    page.push(task);
                } else {
                    more = true;
                }
            }
            let next_page_token = match (more, last_key) {
                (true, Some(key)) => encode_token(&key)?,
                _ => String::new(),
            };
            Ok(TaskPage {
                tasks: page,
                next_page_token,
                total_size: total,
            })
        })
    }
}

#[async_trait]
impl InboxStore for EmbeddedStore {
    async fn enqueue(&self, task_id: &str, item: InboxItem) -> StoreResult<()> {
        let message = limits::encode_message(&item.message)?;
        self.writer
            .write(
                (task_id.to_owned(), item, message),
                |tables, (id, item, _)| check_enqueue(tables, id, &item.key),
                |tables, (id, item, message), ()| {
                    apply_enqueue(tables, &id, &item.key, &item.sender, &message)
                },
            )
            .await
    }

    async fn inbox(&self, task_id: &str) -> StoreResult<Vec<InboxItem>> {
        self.read(|txn| {
            let inbox = txn.open_table(INBOX).map_err(backend)?;
            inbox
                .range((task_id, i64::MIN, 0, "")..(task_id, i64::MAX, 0, ""))
                .map_err(backend)?
                .map(|entry| {
                    let (key, value) = entry.map_err(backend)?;
                    let (_, secs, nanos, message_id) = key.value();
                    let (sender, message) = value.value();
                    let enqueued_at = DateTime::from_timestamp(secs, nanos)
                        .ok_or_else(|| corrupt("inbox key", "time out of range"))?;
                    Ok(InboxItem {
                        key: InboxKey {
                            enqueued_at,
                            message_id: message_id.to_owned(),
                        },
                        sender: sender.to_owned(),
                        message: parse("inbox item", message)?,
                    })
                })
                .collect()
        })
    }
}

/// The lease is still this holder's (same owner and token).
fn held_by(tables: &Tables, lease: &Lease) -> StoreResult<()> {
    let lost = || StoreError::from(Conflict::LeaseLost(lease.task_id.clone()));
    let held = tables
        .leases
        .get(lease.task_id.as_str())
        .map_err(backend)?
        .ok_or_else(lost)?;
    let held: LeaseDoc = parse("lease", held.value())?;
    if held.owner == lease.owner && held.token == lease.token {
        Ok(())
    } else {
        Err(lost())
    }
}

fn lease_doc(lease: &Lease) -> StoreResult<String> {
    json(&LeaseDoc {
        owner: lease.owner.clone(),
        token: lease.token.clone(),
        expires_at: lease.expires_at,
    })
}

fn put_lease(tables: &mut Tables, lease: Lease, doc: String) -> StoreResult<Lease> {
    tables
        .leases
        .insert(lease.task_id.as_str(), doc.as_str())
        .map_err(backend)?;
    Ok(lease)
}

#[async_trait]
impl LeaseStore for EmbeddedStore {
    async fn acquire(
        &self,
        task_id: &str,
        owner: &str,
        now: DateTime<Utc>,
        ttl: Duration,
    ) -> StoreResult<Lease> {
        let lease = Lease {
            task_id: task_id.to_owned(),
            owner: owner.to_owned(),
            token: uuid::Uuid::new_v4().to_string(),
            expires_at: now + ttl,
        };
        let doc = lease_doc(&lease)?;
        self.writer
            .write(
                (lease, doc),
                move |tables, (lease, _)| {
                    if let Some(held) =
                        tables.leases.get(lease.task_id.as_str()).map_err(backend)?
                    {
                        let held: LeaseDoc = parse("lease", held.value())?;
                        if held.expires_at > now {
                            return Err(Conflict::LeaseHeld {
                                task_id: lease.task_id.clone(),
                                expires_at: held.expires_at,
                            }
                            .into());
                        }
                    }
                    Ok(())
                },
                |tables, (lease, doc), ()| put_lease(tables, lease, doc),
            )
            .await
    }

    async fn renew(&self, lease: &Lease, now: DateTime<Utc>, ttl: Duration) -> StoreResult<Lease> {
        let renewed = Lease {
            expires_at: now + ttl,
            ..lease.clone()
        };
        let doc = lease_doc(&renewed)?;
        self.writer
            .write(
                (renewed, doc),
                |tables, (renewed, _)| held_by(tables, renewed),
                |tables, (renewed, doc), ()| put_lease(tables, renewed, doc),
            )
            .await
    }

    async fn release(&self, lease: &Lease) -> StoreResult<()> {
        self.writer
            .write(lease.clone(), held_by, |tables, lease, ()| {
                tables
                    .leases
                    .remove(lease.task_id.as_str())
                    .map_err(backend)?;
                Ok(())
            })
            .await
    }

    async fn expired_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<Vec<String>> {
        self.read(|txn| {
            let leases = txn.open_table(LEASES).map_err(backend)?;
            let mut expired = Vec::new();
            for entry in leases.iter().map_err(backend)? {
                let (task, doc) = entry.map_err(backend)?;
                let doc: LeaseDoc = parse("lease", doc.value())?;
                if doc.expires_at < now {
                    expired.push((doc.expires_at, task.value().to_owned()));
                }
            }
            expired.sort();
            Ok(expired
                .into_iter()
                .take(limit)
                .map(|(_, task)| task)
                .collect())
        })
    }
}

#[async_trait]
impl PushConfigStore for EmbeddedStore {
    async fn put_push_config(&self, config: PushConfig) -> StoreResult<PushConfig> {
        let id = config
            .id
            .clone()
            .ok_or_else(|| StoreError::Invalid("a push config needs an id".to_owned()))?;
        let doc = json(&config)?;
        let push_tasks = Arc::clone(&self.push_tasks);
        self.writer
            .write(
                (config, id, doc),
                |tables, (config, _, _)| {
                    let task = config.task_id.as_str();
                    match meta_of(tables, task)? {
                        Some(_) => Ok(()),
                        None => Err(StoreError::NotFound(format!("task {task}"))),
                    }
                },
                move |tables, (config, id, doc), ()| {
                    tables
                        .push
                        .insert((config.task_id.as_str(), id.as_str()), doc.as_str())
                        .map_err(backend)?;
                    // Before the write is durable: a dispatcher that lists too early finds
                    // nothing and is told again once the config is stored.
                    push_tasks
                        .write()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(config.task_id.clone());
                    Ok(config)
                },
            )
            .await
    }

    async fn get_push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> StoreResult<Option<PushConfig>> {
        self.read(|txn| {
            let push = txn.open_table(PUSH).map_err(backend)?;
            let doc = push.get((task_id, config_id)).map_err(backend)?;
            doc.map(|d| parse("push config", d.value())).transpose()
        })
    }

    async fn list_push_configs(&self, task_id: &str) -> StoreResult<Vec<PushConfig>> {
        self.read(|txn| {
            let push = txn.open_table(PUSH).map_err(backend)?;
            let mut configs = Vec::new();
            for entry in push.range((task_id, "")..).map_err(backend)? {
                let (key, value) = entry.map_err(backend)?;
                if key.value().0 != task_id {
                    break;
                }
                configs.push(parse("push config", value.value())?);
            }
            Ok(configs)
        })
    }

    async fn delete_push_config(&self, task_id: &str, config_id: &str) -> StoreResult<()> {
        self.writer
            .write(
                (task_id.to_owned(), config_id.to_owned()),
                |_, _| Ok(()),
                |tables, (task, id), ()| {
                    tables
                        .push
                        .remove((task.as_str(), id.as_str()))
                        .map_err(backend)?;
                    Ok(())
                },
            )
            .await
    }

    fn may_have_push_configs(&self, task_id: &str) -> bool {
        self.push_tasks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(task_id)
    }
}

/// The tasks the file holds push configs of.
fn tasks_with_push_configs(db: &Database) -> StoreResult<HashSet<String>> {
    let txn = db.begin_read().map_err(backend)?;
    let push = txn.open_table(PUSH).map_err(backend)?;
    let mut tasks = HashSet::new();
    for entry in push.iter().map_err(backend)? {
        let (key, _) = entry.map_err(backend)?;
        tasks.insert(key.value().0.to_owned());
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_the_first_layout_is_refused_with_the_reason() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("old.redb");
        {
            let db = Database::create(&path).expect("create");
            let txn = db.begin_write().expect("write");
            let old: TableDefinition<&str, &str> = TableDefinition::new("tasks");
            txn.open_table(old)
                .expect("table")
                .insert("t", "{}")
                .expect("insert");
            txn.commit().expect("commit");
        }
        let err = EmbeddedStore::open(&path).err().expect("refused");
        assert!(err.to_string().contains("earlier version"), "{err}");
        assert!(err.to_string().contains("move it away"), "{err}");
    }
}
