//! The embedded store: the local default, a single crash-safe file (redb: copy-on-write
//! B-trees, every commit fsynced), with exactly the contract of the DynamoDB adapter.
//!
//! Every write is one redb write transaction: redb runs one at a time, so a commit's
//! conditions (version, states, role, message ids, inbox items) are checked and its writes
//! applied with nothing in between, the same all-or-nothing the DynamoDB adapter gets from
//! `TransactWriteItems`. One writer thread runs them and syncs them to disk in groups
//! ([`writer`]); reads run on the caller's thread (a read transaction of cached pages takes
//! microseconds, less than a hand-off to another thread). The size rules of `task_store::limits` apply unchanged, so a task
//! that works here works on AWS.

mod writer;

use std::path::Path;
use std::sync::Arc;

use a2a::{Artifact, Message, TaskState};
use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Duration, Utc};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};
use serde::{Deserialize, Serialize};
use task_core::extension::Role;
use task_core::lifecycle::TERMINAL;
use task_store::limits::{self, EncodedChange};
use task_store::{
    AuditEntry, Change, Committed, Conflict, InboxItem, InboxKey, InboxStore, Lease, LeaseStore,
    ListQuery, NewTask, PushConfig, PushConfigStore, StoreError, StoreResult, StoredEvent,
    StoredTask, TaskCounters, TaskPage, TaskRecord, TaskStore, TaskUpdate,
};

/// Task id → the task document with its version and counters.
const TASKS: TableDefinition<&str, &str> = TableDefinition::new("tasks");
/// (task, seq) → event.
const EVENTS: TableDefinition<(&str, u64), &str> = TableDefinition::new("events");
/// (task, n) → history message.
const HISTORY: TableDefinition<(&str, u64), &str> = TableDefinition::new("history");
/// (task, artifact id) → artifact.
const ARTIFACTS: TableDefinition<(&str, &str), &str> = TableDefinition::new("artifacts");
/// (task, message id): the message ids a task received.
const MESSAGE_IDS: TableDefinition<(&str, &str), ()> = TableDefinition::new("message_ids");
/// (task, seconds, nanos, message id) → inbox item.
const INBOX: TableDefinition<(&str, i64, u32, &str), &str> = TableDefinition::new("inbox");
/// (task, seconds, nanos, message id) → audit entry.
const AUDIT: TableDefinition<(&str, i64, u32, &str), &str> = TableDefinition::new("audit");
/// (task, config id) → push config.
const PUSH: TableDefinition<(&str, &str), &str> = TableDefinition::new("push_configs");
/// Task id → lease.
const LEASES: TableDefinition<&str, &str> = TableDefinition::new("leases");
/// (participant, status seconds, status nanos, task id): ListTasks' index.
const INDEX: TableDefinition<(&str, i64, u32, &str), ()> =
    TableDefinition::new("participant_index");

/// A task as the `tasks` table holds it.
#[derive(Serialize, Deserialize)]
struct TaskDoc {
    record: TaskRecord,
    version: u64,
    counters: TaskCounters,
}

#[derive(Serialize, Deserialize)]
struct InboxDoc {
    sender: String,
    message: Message,
}

#[derive(Serialize, Deserialize)]
struct LeaseDoc {
    owner: String,
    token: String,
    expires_at: DateTime<Utc>,
}

/// The store. Cheap to clone: clones share the open database and its writer; the last one
/// dropped waits for queued writes and closes the file.
#[derive(Clone)]
pub struct EmbeddedStore {
    db: Arc<Database>,
    writer: Arc<writer::Writer>,
}

fn backend(err: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::backend(err)
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

/// (seconds, nanoseconds) of an instant: an order-preserving key for any representable time.
fn time_key(t: DateTime<Utc>) -> (i64, u32) {
    (t.timestamp(), t.timestamp_subsec_nanos())
}

fn is_terminal(state: &TaskState) -> bool {
    TERMINAL.contains(state)
}

impl EmbeddedStore {
    /// Opens the store at `path`, creating it if needed.
    pub fn open(path: impl AsRef<Path>) -> StoreResult<Self> {
        let db = Database::create(path).map_err(backend)?;
        let txn = db.begin_write().map_err(backend)?;
        // Create every table up front, so readers never meet a missing one.
        {
            txn.open_table(TASKS).map_err(backend)?;
            txn.open_table(EVENTS).map_err(backend)?;
            txn.open_table(HISTORY).map_err(backend)?;
            txn.open_table(ARTIFACTS).map_err(backend)?;
            txn.open_table(MESSAGE_IDS).map_err(backend)?;
            txn.open_table(INBOX).map_err(backend)?;
            txn.open_table(AUDIT).map_err(backend)?;
            txn.open_table(PUSH).map_err(backend)?;
            txn.open_table(LEASES).map_err(backend)?;
            txn.open_table(INDEX).map_err(backend)?;
        }
        txn.commit().map_err(backend)?;
        let db = Arc::new(db);
        let writer = Arc::new(writer::Writer::start(db.clone())?);
        Ok(Self { db, writer })
    }

    /// Runs read-only work on the database, on the caller's thread.
    fn read<T>(&self, work: impl FnOnce(&Database) -> StoreResult<T>) -> StoreResult<T> {
        work(&self.db)
    }

    /// Runs `work` in one write transaction, committed only if it succeeds; returns once the
    /// commit is durable.
    async fn write<T: Send + 'static>(
        &self,
        work: impl FnOnce(&WriteTransaction) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        self.writer.write(work).await
    }
}

fn read_task(txn: &WriteTransaction, id: &str) -> StoreResult<Option<TaskDoc>> {
    let tasks = txn.open_table(TASKS).map_err(backend)?;
    let doc = tasks.get(id).map_err(backend)?;
    doc.map(|d| parse("task", d.value())).transpose()
}

fn index_entries(txn: &WriteTransaction, record: &TaskRecord, insert: bool) -> StoreResult<()> {
    let mut index = txn.open_table(INDEX).map_err(backend)?;
    let (secs, nanos) = time_key(record.status.timestamp.unwrap_or_default());
    for (participant, _) in record.roles() {
        let key = (participant, secs, nanos, record.id.as_str());
        if insert {
            index.insert(key, ()).map_err(backend)?;
        } else {
            index.remove(key).map_err(backend)?;
        }
    }
    Ok(())
}

fn record_message_ids(txn: &WriteTransaction, task_id: &str, ids: &[String]) -> StoreResult<()> {
    let mut table = txn.open_table(MESSAGE_IDS).map_err(backend)?;
    for id in ids {
        if table
            .insert((task_id, id.as_str()), ())
            .map_err(backend)?
            .is_some()
        {
            return Err(Conflict::DuplicateMessage {
                task_id: task_id.to_owned(),
                message_id: id.clone(),
            }
            .into());
        }
    }
    Ok(())
}

/// Appends the change's logs; returns the event sequence numbers given.
fn append_logs(
    txn: &WriteTransaction,
    task_id: &str,
    counters: &mut TaskCounters,
    docs: &EncodedChange,
) -> StoreResult<Vec<u64>> {
    let mut seqs = Vec::with_capacity(docs.events.len());
    {
        let mut events = txn.open_table(EVENTS).map_err(backend)?;
        for event in &docs.events {
            events
                .insert((task_id, counters.events), event.as_str())
                .map_err(backend)?;
            seqs.push(counters.events);
            counters.events += 1;
        }
    }
    {
        let mut history = txn.open_table(HISTORY).map_err(backend)?;
        for message in &docs.history {
            history
                .insert((task_id, counters.history), message.as_str())
                .map_err(backend)?;
            counters.history += 1;
        }
    }
    {
        let mut artifacts = txn.open_table(ARTIFACTS).map_err(backend)?;
        for (id, artifact) in &docs.artifacts {
            artifacts
                .insert((task_id, id.as_str()), artifact.as_str())
                .map_err(backend)?;
            if !counters.artifact_ids.contains(id) {
                counters.artifact_ids.push(id.clone());
            }
        }
    }
    {
        let mut audit = txn.open_table(AUDIT).map_err(backend)?;
        for (entry, text) in &docs.audit {
            let (secs, nanos) = time_key(entry.at);
            audit
                .insert(
                    (task_id, secs, nanos, entry.message_id.as_str()),
                    text.as_str(),
                )
                .map_err(backend)?;
        }
    }
    Ok(seqs)
}

/// Records the item's message id and queues it.
fn queue(txn: &WriteTransaction, task_id: &str, item: &InboxItem) -> StoreResult<()> {
    record_message_ids(txn, task_id, std::slice::from_ref(&item.key.message_id))?;
    let doc = json(&InboxDoc {
        sender: item.sender.clone(),
        message: item.message.clone(),
    })?;
    let (secs, nanos) = time_key(item.key.enqueued_at);
    let mut inbox = txn.open_table(INBOX).map_err(backend)?;
    inbox
        .insert(
            (task_id, secs, nanos, item.key.message_id.as_str()),
            doc.as_str(),
        )
        .map_err(backend)?;
    Ok(())
}

fn write_doc(txn: &WriteTransaction, doc: &TaskDoc) -> StoreResult<()> {
    let text = json(doc)?;
    let mut tasks = txn.open_table(TASKS).map_err(backend)?;
    tasks
        .insert(doc.record.id.as_str(), text.as_str())
        .map_err(backend)?;
    Ok(())
}

fn apply_create(
    txn: &WriteTransaction,
    new: &NewTask,
    docs: &EncodedChange,
) -> StoreResult<Committed> {
    let id = new.record.id.as_str();
    if read_task(txn, id)?.is_some() {
        return Err(Conflict::TaskExists(id.to_owned()).into());
    }
    record_message_ids(txn, id, &new.message_ids)?;
    for item in &new.inbox {
        queue(txn, id, item)?;
    }
    let mut counters = TaskCounters::default();
    let seqs = append_logs(txn, id, &mut counters, docs)?;
    write_doc(
        txn,
        &TaskDoc {
            record: new.record.clone(),
            version: 1,
            counters,
        },
    )?;
    index_entries(txn, &new.record, true)?;
    Ok(Committed {
        task_id: id.to_owned(),
        version: 1,
        event_seqs: seqs,
    })
}

fn apply_update(
    txn: &WriteTransaction,
    update: &TaskUpdate,
    docs: &EncodedChange,
) -> StoreResult<Committed> {
    let id = update.task_id();
    let changed = || StoreError::from(Conflict::TaskChanged(id.to_owned()));
    let current = read_task(txn, id)?.ok_or_else(changed)?;
    let state_allowed =
        update.allowed_states.is_empty() || update.allowed_states.contains(current.record.state());
    let role_held = update
        .actor_role
        .as_ref()
        .is_none_or(|(actor, role): &(String, Role)| {
            current
                .record
                .extension
                .participant(actor)
                .is_some_and(|p| p.role == *role)
        });
    if current.version != update.base.version || !state_allowed || !role_held {
        return Err(changed());
    }
    record_message_ids(txn, id, &update.message_ids)?;
    {
        let mut inbox = txn.open_table(INBOX).map_err(backend)?;
        for key in &update.consume_inbox {
            let (secs, nanos) = time_key(key.enqueued_at);
            if inbox
                .remove((id, secs, nanos, key.message_id.as_str()))
                .map_err(backend)?
                .is_none()
            {
                return Err(Conflict::InboxItemGone(id.to_owned()).into());
            }
        }
    }
    let mut counters = current.counters.clone();
    let seqs = append_logs(txn, id, &mut counters, docs)?;
    let record = update
        .record
        .clone()
        .unwrap_or_else(|| current.record.clone());
    if update.record.is_some() {
        index_entries(txn, &current.record, false)?;
        index_entries(txn, &record, true)?;
    }
    let version = current.version + 1;
    write_doc(
        txn,
        &TaskDoc {
            record,
            version,
            counters,
        },
    )?;
    Ok(Committed {
        task_id: id.to_owned(),
        version,
        event_seqs: seqs,
    })
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
        // Encoded before the write transaction opens, so size errors never hold the writer.
        let encoded = limits::encode_changes(&changes)?;
        self.write(move |txn| {
            changes
                .iter()
                .zip(&encoded)
                .map(|(change, docs)| match change {
                    Change::Create(new) => apply_create(txn, new, docs),
                    Change::Update(update) => apply_update(txn, update, docs),
                })
                .collect()
        })
        .await
    }

    async fn get(&self, task_id: &str) -> StoreResult<Option<StoredTask>> {
        let id = task_id.to_owned();
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let tasks = txn.open_table(TASKS).map_err(backend)?;
            let Some(doc) = tasks.get(id.as_str()).map_err(backend)? else {
                return Ok(None);
            };
            let doc: TaskDoc = parse("task", doc.value())?;
            Ok(Some(StoredTask {
                record: doc.record,
                version: doc.version,
                counters: doc.counters,
            }))
        })
    }

    async fn events(
        &self,
        task_id: &str,
        from_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<StoredEvent>> {
        let id = task_id.to_owned();
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let events = txn.open_table(EVENTS).map_err(backend)?;
            events
                .range((id.as_str(), from_seq)..=(id.as_str(), u64::MAX))
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
        let id = task_id.to_owned();
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let history = txn.open_table(HISTORY).map_err(backend)?;
            let range = history
                .range((id.as_str(), 0)..=(id.as_str(), u64::MAX))
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

    async fn artifacts(&self, task_id: &str) -> StoreResult<Vec<Artifact>> {
        let Some(task) = self.get(task_id).await? else {
            return Ok(Vec::new());
        };
        let id = task_id.to_owned();
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let artifacts = txn.open_table(ARTIFACTS).map_err(backend)?;
            task.counters
                .artifact_ids
                .iter()
                .filter_map(|artifact_id| {
                    match artifacts.get((id.as_str(), artifact_id.as_str())) {
                        Ok(Some(v)) => Some(parse("artifact", v.value())),
                        Ok(None) => None,
                        Err(e) => Some(Err(backend(e))),
                    }
                })
                .collect()
        })
    }

    async fn audit(&self, task_id: &str) -> StoreResult<Vec<AuditEntry>> {
        let id = task_id.to_owned();
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let audit = txn.open_table(AUDIT).map_err(backend)?;
            audit
                .range((id.as_str(), i64::MIN, 0, "")..(id.as_str(), i64::MAX, 0, ""))
                .map_err(backend)?
                .map(|entry| parse("audit entry", entry.map_err(backend)?.1.value()))
                .collect()
        })
    }

    async fn list(&self, participant_id: &str, query: &ListQuery) -> StoreResult<TaskPage> {
        let participant = participant_id.to_owned();
        let query = query.clone();
        let after = query.page_token.as_deref().map(decode_token).transpose()?;
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let index = txn.open_table(INDEX).map_err(backend)?;
            let tasks = txn.open_table(TASKS).map_err(backend)?;
            let p = participant.as_str();
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
                let Some(doc) = tasks.get(task_id).map_err(backend)? else {
                    continue;
                };
                let doc: TaskDoc = parse("task", doc.value())?;
                if !matches(&query, &doc.record) {
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
                    page.push(StoredTask {
                        record: doc.record,
                        version: doc.version,
                        counters: doc.counters,
                    });
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
        let id = task_id.to_owned();
        limits::encode_message(&item.message)?;
        self.write(move |txn| {
            let task =
                read_task(txn, &id)?.ok_or_else(|| StoreError::NotFound(format!("task {id}")))?;
            if is_terminal(task.record.state()) {
                return Err(Conflict::TaskTerminal(id.clone()).into());
            }
            queue(txn, &id, &item)
        })
        .await
    }

    async fn inbox(&self, task_id: &str) -> StoreResult<Vec<InboxItem>> {
        let id = task_id.to_owned();
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let inbox = txn.open_table(INBOX).map_err(backend)?;
            inbox
                .range((id.as_str(), i64::MIN, 0, "")..(id.as_str(), i64::MAX, 0, ""))
                .map_err(backend)?
                .map(|entry| {
                    let (key, value) = entry.map_err(backend)?;
                    let (_, secs, nanos, message_id) = key.value();
                    let doc: InboxDoc = parse("inbox item", value.value())?;
                    let enqueued_at = DateTime::from_timestamp(secs, nanos)
                        .ok_or_else(|| corrupt("inbox key", "time out of range"))?;
                    Ok(InboxItem {
                        key: InboxKey {
                            enqueued_at,
                            message_id: message_id.to_owned(),
                        },
                        sender: doc.sender,
                        message: doc.message,
                    })
                })
                .collect()
        })
    }
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
        self.write(move |txn| {
            let mut leases = txn.open_table(LEASES).map_err(backend)?;
            if let Some(held) = leases.get(lease.task_id.as_str()).map_err(backend)? {
                let held: LeaseDoc = parse("lease", held.value())?;
                if held.expires_at > now {
                    return Err(Conflict::LeaseHeld {
                        task_id: lease.task_id.clone(),
                        expires_at: held.expires_at,
                    }
                    .into());
                }
            }
            let doc = json(&LeaseDoc {
                owner: lease.owner.clone(),
                token: lease.token.clone(),
                expires_at: lease.expires_at,
            })?;
            leases
                .insert(lease.task_id.as_str(), doc.as_str())
                .map_err(backend)?;
            Ok(lease)
        })
        .await
    }

    async fn renew(&self, lease: &Lease, now: DateTime<Utc>, ttl: Duration) -> StoreResult<Lease> {
        let renewed = Lease {
            expires_at: now + ttl,
            ..lease.clone()
        };
        self.write(move |txn| {
            let mut leases = txn.open_table(LEASES).map_err(backend)?;
            held_by(&leases, &renewed)?;
            let doc = json(&LeaseDoc {
                owner: renewed.owner.clone(),
                token: renewed.token.clone(),
                expires_at: renewed.expires_at,
            })?;
            leases
                .insert(renewed.task_id.as_str(), doc.as_str())
                .map_err(backend)?;
            Ok(renewed)
        })
        .await
    }

    async fn release(&self, lease: &Lease) -> StoreResult<()> {
        let lease = lease.clone();
        self.write(move |txn| {
            let mut leases = txn.open_table(LEASES).map_err(backend)?;
            held_by(&leases, &lease)?;
            leases.remove(lease.task_id.as_str()).map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn expired_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<Vec<String>> {
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
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

/// The lease is still this holder's (same owner and token).
fn held_by(leases: &redb::Table<&str, &str>, lease: &Lease) -> StoreResult<()> {
    let lost = || StoreError::from(Conflict::LeaseLost(lease.task_id.clone()));
    let held = leases
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

#[async_trait]
impl PushConfigStore for EmbeddedStore {
    async fn put_push_config(&self, config: PushConfig) -> StoreResult<PushConfig> {
        let id = config
            .id
            .clone()
            .ok_or_else(|| StoreError::Invalid("a push config needs an id".to_owned()))?;
        let doc = json(&config)?;
        self.write(move |txn| {
            let task = config.task_id.as_str();
            read_task(txn, task)?.ok_or_else(|| StoreError::NotFound(format!("task {task}")))?;
            let mut push = txn.open_table(PUSH).map_err(backend)?;
            push.insert((task, id.as_str()), doc.as_str())
                .map_err(backend)?;
            Ok(config)
        })
        .await
    }

    async fn get_push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> StoreResult<Option<PushConfig>> {
        let (task, id) = (task_id.to_owned(), config_id.to_owned());
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let push = txn.open_table(PUSH).map_err(backend)?;
            let doc = push.get((task.as_str(), id.as_str())).map_err(backend)?;
            doc.map(|d| parse("push config", d.value())).transpose()
        })
    }

    async fn list_push_configs(&self, task_id: &str) -> StoreResult<Vec<PushConfig>> {
        let task = task_id.to_owned();
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let push = txn.open_table(PUSH).map_err(backend)?;
            let mut configs = Vec::new();
            for entry in push.range((task.as_str(), "")..).map_err(backend)? {
                let (key, value) = entry.map_err(backend)?;
                if key.value().0 != task {
                    break;
                }
                configs.push(parse("push config", value.value())?);
            }
            Ok(configs)
        })
    }

    async fn delete_push_config(&self, task_id: &str, config_id: &str) -> StoreResult<()> {
        let (task, id) = (task_id.to_owned(), config_id.to_owned());
        self.write(move |txn| {
            let mut push = txn.open_table(PUSH).map_err(backend)?;
            push.remove((task.as_str(), id.as_str())).map_err(backend)?;
            Ok(())
        })
        .await
    }
}
