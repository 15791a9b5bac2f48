//! The embedded store: the local default, a crash-safe redb file (copy-on-write B-trees) and
//! its write-ahead log ([`wal`]; every commit is in the log, fsynced, before anyone is
//! answered or can read it), with exactly the contract of the DynamoDB adapter.
//!
//! Every write goes through one writer thread ([`writer`]) that applies the writes queued
//! together as one group and makes it durable once (group commit): in the write-ahead log,
//! and in memory ([`memtable`]) where readers find it; once a second the groups held in memory
//! are written into the redb file in one transaction (a checkpoint) by a thread of their own.
//! Each write's conditions (version, message ids, inbox items, leases) are checked before it
//! writes anything, so one refused write leaves nothing in the shared group: a commit stands
//! or falls whole, the same all-or-nothing the DynamoDB adapter gets from
//! `TransactWriteItems`, with conditions judged against the state before the commit.
//!
//! The writer thread does only the rows' work: documents are encoded, and the conditions that
//! follow from the version (states, roles: a task at the version the caller read *is* the
//! task the caller read) are judged, on the caller's thread. Reads run on the caller's thread
//! too (a read of memory or cached pages takes microseconds, less than a hand-off to another
//! thread). The size rules of `task_store::limits` apply unchanged, so a task that works here
//! works on AWS.

mod logged;
mod memtable;
mod push;
mod wal;
mod writer;

use std::borrow::Borrow;
use std::collections::HashSet;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::{Arc, RwLock};

use a2a::{Artifact, Message};
use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Duration, Utc};
use logged::{Disk, Journal, Logged, Sink};
use memtable::{Compare, Found, Layer, Lookup, MemTable, Merged};
use redb::{Database, Key, TableDefinition, TableHandle, Value, WriteTransaction};
use serde::{Deserialize, Serialize};
use task_store::limits::{self, EncodedChange};
use task_store::{
    AuditEntry, Change, Committed, Conflict, InboxItem, InboxKey, InboxStore, Lease, LeaseStore,
    ListQuery, NewTask, Newer, PendingCommit, StoreError, StoreResult, StoredEvent, StoredTask,
    TaskCounters, TaskPage, TaskRecord, TaskStore, TaskUpdate,
};
use writer::backend;

/// A table: its tag (its place in every layer, and in the write-ahead log's records) and
/// its definition in the redb file.
pub(crate) struct Def<K: Key + 'static, V: Value + 'static> {
    pub(crate) tag: usize,
    pub(crate) table: TableDefinition<'static, K, V>,
}

impl<K: Key + 'static, V: Value + 'static> Clone for Def<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K: Key + 'static, V: Value + 'static> Copy for Def<K, V> {}

impl<K: Key + 'static, V: Value + 'static> Def<K, V> {
    pub(crate) const fn new(tag: usize, name: &'static str) -> Self {
        Self {
            tag,
            table: TableDefinition::new(name),
        }
    }

    fn compare(self) -> Compare {
        K::compare
    }
}

/// Task id → the task document (`TaskRecord` JSON).
const TASKS: Def<&str, &str> = Def::new(0, "task_records");
/// Task id → (version, terminal, events, history messages, transcript entries, artifact ids
/// as a JSON array): what the writer checks and counts, without parsing the document.
const META: Def<&str, (u64, bool, u64, u64, u64, &str)> = Def::new(1, "task_counters");
/// (task, seq) → event.
const EVENTS: Def<(&str, u64), &str> = Def::new(2, "events");
/// (task, n) → history message.
const HISTORY: Def<(&str, u64), &str> = Def::new(3, "history");
/// (task, n) → transcript entry.
const TRANSCRIPT: Def<(&str, u64), &str> = Def::new(4, "transcript");
/// (task, artifact id) → artifact.
const ARTIFACTS: Def<(&str, &str), &str> = Def::new(5, "artifacts");
/// (task, message id): the message ids a task received.
const MESSAGE_IDS: Def<(&str, &str), ()> = Def::new(6, "message_ids");
/// (task, seconds, nanos, message id) → (sender, message).
const INBOX: Def<(&str, i64, u32, &str), (&str, &str)> = Def::new(7, "inbox_items");
/// (task, seconds, nanos, message id) → audit entry.
const AUDIT: Def<(&str, i64, u32, &str), &str> = Def::new(8, "audit");
/// (task, config id) → push config with its owner (see [`push`]).
const PUSH: Def<(&str, &str), &str> = Def::new(9, "push_configs");
/// Task id → lease.
const LEASES: Def<&str, &str> = Def::new(10, "leases");
/// (participant, status seconds, status nanos, task id): ListTasks' index.
const INDEX: Def<(&str, i64, u32, &str), ()> = Def::new(11, "participant_index");
/// How many tables there are; the tags are 0 to `TABLES - 1`.
pub(crate) const TABLES: usize = 12;
/// Tables of earlier file layouts (task documents with their counters inside; counters
/// without the transcript's), which this version does not read.
const OLD_LAYOUT_TABLES: &[&str] = &["tasks", "inbox", "task_meta"];

/// Each table's key order, by tag.
pub(crate) fn compares() -> [Compare; TABLES] {
    [
        TASKS.compare(),
        META.compare(),
        EVENTS.compare(),
        HISTORY.compare(),
        TRANSCRIPT.compare(),
        ARTIFACTS.compare(),
        MESSAGE_IDS.compare(),
        INBOX.compare(),
        AUDIT.compare(),
        PUSH.compare(),
        LEASES.compare(),
        INDEX.compare(),
    ]
}

#[derive(Serialize, Deserialize)]
struct LeaseDoc {
    owner: String,
    token: String,
    expires_at: DateTime<Utc>,
}

/// Every table as the writer's jobs see them: the layers, then the file ([`Logged`]), all
/// writes going into the active layer and the write-ahead log.
pub(crate) struct Tables<'a> {
    tasks: Logged<'a, &'static str, &'static str>,
    meta: Logged<'a, &'static str, Counters>,
    events: Logged<'a, (&'static str, u64), &'static str>,
    history: Logged<'a, (&'static str, u64), &'static str>,
    transcript: Logged<'a, (&'static str, u64), &'static str>,
    artifacts: Logged<'a, (&'static str, &'static str), &'static str>,
    message_ids: Logged<'a, (&'static str, &'static str), ()>,
    inbox: Logged<'a, TimedKey, (&'static str, &'static str)>,
    audit: Logged<'a, TimedKey, &'static str>,
    push: Logged<'a, (&'static str, &'static str), &'static str>,
    leases: Logged<'a, &'static str, &'static str>,
    index: Logged<'a, TimedKey, ()>,
}

/// (version, terminal, events, history messages, transcript entries, artifact ids as JSON).
type Counters = (u64, bool, u64, u64, u64, &'static str);
/// (task or participant, seconds, nanoseconds, message or task id).
type TimedKey = (&'static str, i64, u32, &'static str);

// The tables below are listed in the order of their tags.
const _: () = assert!(
    TASKS.tag == 0
        && META.tag == 1
        && EVENTS.tag == 2
        && HISTORY.tag == 3
        && TRANSCRIPT.tag == 4
        && ARTIFACTS.tag == 5
        && MESSAGE_IDS.tag == 6
        && INBOX.tag == 7
        && AUDIT.tag == 8
        && PUSH.tag == 9
        && LEASES.tag == 10
        && INDEX.tag == 11
);

impl<'a> Tables<'a> {
    /// The tables of group `seq`: writes go into `active`, reads see `active`, then
    /// `frozen`, then the file.
    pub(crate) fn new(
        active: &'a mut [MemTable; TABLES],
        frozen: Option<&'a [MemTable; TABLES]>,
        disk: &'a Disk<'a>,
        seq: u64,
    ) -> Self {
        let [
            tasks,
            meta,
            events,
            history,
            transcript,
            artifacts,
            message_ids,
            inbox,
            audit,
            push,
            leases,
            index,
        ] = active;
        let older = |tag: usize| frozen.map(|f| &f[tag]);
        Self {
            tasks: Logged::new(TASKS, tasks, older(TASKS.tag), disk, seq),
            meta: Logged::new(META, meta, older(META.tag), disk, seq),
            events: Logged::new(EVENTS, events, older(EVENTS.tag), disk, seq),
            history: Logged::new(HISTORY, history, older(HISTORY.tag), disk, seq),
            transcript: Logged::new(TRANSCRIPT, transcript, older(TRANSCRIPT.tag), disk, seq),
            artifacts: Logged::new(ARTIFACTS, artifacts, older(ARTIFACTS.tag), disk, seq),
            message_ids: Logged::new(MESSAGE_IDS, message_ids, older(MESSAGE_IDS.tag), disk, seq),
            inbox: Logged::new(INBOX, inbox, older(INBOX.tag), disk, seq),
            audit: Logged::new(AUDIT, audit, older(AUDIT.tag), disk, seq),
            push: Logged::new(PUSH, push, older(PUSH.tag), disk, seq),
            leases: Logged::new(LEASES, leases, older(LEASES.tag), disk, seq),
            index: Logged::new(INDEX, index, older(INDEX.tag), disk, seq),
        }
    }

    /// The tables in the order of their tags.
    fn journals(&mut self) -> [&mut dyn Journal; TABLES] {
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
}

/// The (tag, op list) parts of a payload [`Tables::take_writes`] gave.
fn payload_parts(
    mut payload: &[u8],
) -> impl Iterator<Item = Result<(usize, &[u8]), logged::ReplayError>> {
    std::iter::from_fn(move || {
        let (&tag, rest) = payload.split_first()?;
        match logged::take_bytes(rest) {
            Ok((ops, rest)) if usize::from(tag) < TABLES => {
                payload = rest;
                Some(Ok((usize::from(tag), ops)))
            }
            Ok(_) => {
                payload = &[];
                Some(Err(logged::ReplayError::Malformed(format!(
                    "unknown table {tag}"
                ))))
            }
            Err(err) => {
                payload = &[];
                Some(Err(err))
            }
        }
    })
}

/// Forgets what group `seq` wrote into `active` by `payload` (the group did not become
/// durable).
pub(crate) fn undo_writes(active: &mut [MemTable; TABLES], seq: u64, payload: &[u8]) {
    for (tag, ops) in payload_parts(payload).map_while(Result::ok) {
        logged::undo(&mut active[tag], seq, ops);
    }
}

/// Every table of the file, opened in a write transaction: what a checkpoint writes a layer
/// into and what opening the store replays the log onto.
pub(crate) struct FileTables<'t> {
    tasks: redb::Table<'t, &'static str, &'static str>,
    meta: redb::Table<'t, &'static str, Counters>,
    events: redb::Table<'t, (&'static str, u64), &'static str>,
    history: redb::Table<'t, (&'static str, u64), &'static str>,
    transcript: redb::Table<'t, (&'static str, u64), &'static str>,
    artifacts: redb::Table<'t, (&'static str, &'static str), &'static str>,
    message_ids: redb::Table<'t, (&'static str, &'static str), ()>,
    inbox: redb::Table<'t, TimedKey, (&'static str, &'static str)>,
    audit: redb::Table<'t, TimedKey, &'static str>,
    push: redb::Table<'t, (&'static str, &'static str), &'static str>,
    leases: redb::Table<'t, &'static str, &'static str>,
    index: redb::Table<'t, TimedKey, ()>,
}

impl<'t> FileTables<'t> {
    /// Opens (creating if needed) every table in `txn`.
    pub(crate) fn open(txn: &'t WriteTransaction) -> Result<Self, redb::TableError> {
        Ok(Self {
            tasks: txn.open_table(TASKS.table)?,
            meta: txn.open_table(META.table)?,
            events: txn.open_table(EVENTS.table)?,
            history: txn.open_table(HISTORY.table)?,
            transcript: txn.open_table(TRANSCRIPT.table)?,
            artifacts: txn.open_table(ARTIFACTS.table)?,
            message_ids: txn.open_table(MESSAGE_IDS.table)?,
            inbox: txn.open_table(INBOX.table)?,
            audit: txn.open_table(AUDIT.table)?,
            push: txn.open_table(PUSH.table)?,
            leases: txn.open_table(LEASES.table)?,
            index: txn.open_table(INDEX.table)?,
        })
    }

    /// The tables in the order of their tags.
    fn sinks(&mut self) -> [&mut dyn Sink; TABLES] {
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

    /// Repeats the writes of a payload [`Tables::take_writes`] gave.
    pub(crate) fn replay(&mut self, payload: &[u8]) -> Result<(), logged::ReplayError> {
        for part in payload_parts(payload) {
            let (tag, ops) = part?;
            let sinks = self.sinks();
            logged::replay(sinks[tag], ops)?;
        }
        Ok(())
    }

    /// Writes what a layer leaves of every row it holds (its newest version of each).
    pub(crate) fn write_layer(
        &mut self,
        layer: &[MemTable; TABLES],
    ) -> Result<(), redb::StorageError> {
        for (sink, rows) in self.sinks().into_iter().zip(layer) {
            for (key, value) in rows.newest_rows() {
                sink.put(key, value)?;
            }
        }
        Ok(())
    }
}

/// What a reader reads: the groups published when it began, in the layers and the file.
pub(crate) struct Snapshot {
    /// The last group it sees.
    pub(crate) upto: u64,
    /// The active layer, then the frozen one if there is one.
    pub(crate) layers: Vec<Arc<Layer>>,
    pub(crate) txn: redb::ReadTransaction,
}

impl Snapshot {
    fn table<K: Key + 'static, V: Value + 'static>(
        &self,
        def: Def<K, V>,
    ) -> StoreResult<Reader<'_, K, V>> {
        Ok(Reader {
            snapshot: self,
            def,
            file: self.txn.open_table(def.table).map_err(backend)?,
        })
    }
}

/// One table as a [`Snapshot`] sees it.
struct Reader<'s, K: Key + 'static, V: Value + 'static> {
    snapshot: &'s Snapshot,
    def: Def<K, V>,
    file: redb::ReadOnlyTable<K, V>,
}

impl<K: Key + 'static, V: Value + 'static> Reader<'_, K, V> {
    fn get<'k>(&self, key: impl Borrow<K::SelfType<'k>>) -> StoreResult<Option<Found<V>>> {
        let bytes = K::as_bytes(key.borrow());
        for layer in &self.snapshot.layers {
            let rows = layer.read();
            match rows[self.def.tag].visible(bytes.as_ref(), self.snapshot.upto) {
                Lookup::Value(value) => return Ok(Some(Found::Memory(value.clone()))),
                Lookup::Deleted => return Ok(None),
                Lookup::Absent => {}
            }
        }
        Ok(self
            .file
            .get(key.borrow())
            .map_err(backend)?
            .map(Found::Disk))
    }

    /// The rows of a range in key order, or in reverse.
    fn range<'k, KR: Borrow<K::SelfType<'k>>>(
        &self,
        range: impl RangeBounds<KR>,
        reverse: bool,
    ) -> StoreResult<Merged<K, V>> {
        let encode = |bound: Bound<&KR>| bound.map(|k| K::as_bytes(k.borrow()).as_ref().to_vec());
        let (lower, upper) = (encode(range.start_bound()), encode(range.end_bound()));
        let mut rows = Vec::new();
        for layer in self.snapshot.layers.iter().rev() {
            let newer = layer.read()[self.def.tag].range(
                lower.as_ref().map(Vec::as_slice),
                upper.as_ref().map(Vec::as_slice),
                self.snapshot.upto,
            );
            rows = memtable::overlay(newer, rows, K::compare);
        }
        let file = self
            .file
            .range::<KR>((range.start_bound(), range.end_bound()))
            .map_err(backend)?;
        let file: Box<dyn Iterator<Item = _>> = if reverse {
            Box::new(file.rev())
        } else {
            Box::new(file)
        };
        Ok(Merged::new(rows, file, reverse))
    }
}

/// The store. Cheap to clone: clones share the open database and its writer; the last one
/// dropped waits for queued writes and closes the file.
#[derive(Clone)]
pub struct EmbeddedStore {
    db: Arc<Database>,
    /// What readers see: the published groups, in memory and in the file.
    view: Arc<writer::View>,
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
/// was closed cleanly (closing checkpoints). While the store is open, a log whose checkpoint is
/// being written still counts. For operators and tests; it reads the log only.
pub fn groups_in_log(path: impl AsRef<Path>) -> StoreResult<usize> {
    let mut groups = 0;
    for log in wal_paths(path.as_ref()) {
        groups += wal::Wal::peek(&log).map_err(backend)?.len();
    }
    Ok(groups)
}

/// The write-ahead log of the store at `path`: two files beside it, its name with `.wal`
/// and `.wal2` appended. Groups go to one until its groups are checkpointed, then to the
/// other while the checkpoint is written.
fn wal_paths(path: &Path) -> [std::path::PathBuf; 2] {
    ["wal", "wal2"].map(|ext| {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(".");
        name.push(ext);
        path.with_file_name(name)
    })
}

/// (seconds, nanoseconds) of an instant: an order-preserving key for any representable time.
fn time_key(t: DateTime<Utc>) -> (i64, u32) {
    (t.timestamp(), t.timestamp_subsec_nanos())
}

/// How the store runs; [`Options::default`] is what [`EmbeddedStore::open`] uses.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long writes stay in memory (and in the write-ahead log) at most before they are
    /// written into the file (a checkpoint, one redb transaction for all of them). Longer
    /// means fewer, bigger checkpoints, more memory and a longer replay after a crash;
    /// `Duration::ZERO` checkpoints after every group (for tests: rows are then read from the
    /// file and the layers at once).
    pub checkpoint_interval: std::time::Duration,
    /// The memory redb may keep of the file's pages (its read cache and write buffer). The
    /// writes of the last second or two are in memory anyway, in the layers; redb's default of
    /// 1 GiB made the process grow by the file's growth until it had that much (and cost
    /// the page faults of fresh memory all along: a tenth of the CPU under a load of new tasks).
    pub cache_bytes: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            checkpoint_interval: std::time::Duration::from_secs(1),
            cache_bytes: 64 << 20,
        }
    }
}

impl EmbeddedStore {
    /// Opens the store at `path`, creating it if needed.
    pub fn open(path: impl AsRef<Path>) -> StoreResult<Self> {
        Self::open_with(path, Options::default())
    }

    /// Opens the store at `path` with `options`, creating it if needed.
    pub fn open_with(path: impl AsRef<Path>, options: Options) -> StoreResult<Self> {
        let path = path.as_ref();
        let db = Database::builder()
            .set_cache_size(options.cache_bytes)
            .create(path)
            .map_err(backend)?;
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
        drop(FileTables::open(&txn).map_err(backend)?);
        txn.commit().map_err(backend)?;
        let (log, spare) = writer::Log::recover(&db, &wal_paths(path))?;
        let db = Arc::new(db);
        let view = Arc::new(writer::View::new(log.last_group()));
        let push_tasks = Arc::new(RwLock::new(push::tasks_with_push_configs(&db)?));
        let writer = Arc::new(writer::Writer::start(
            db.clone(),
            view.clone(),
            log,
            spare,
            options.checkpoint_interval,
        )?);
        Ok(Self {
            db,
            view,
            writer,
            push_tasks,
        })
    }

    /// Runs read-only work on the published state, on the caller's thread.
    fn read<T>(&self, work: impl FnOnce(&Snapshot) -> StoreResult<T>) -> StoreResult<T> {
        let snapshot = self.view.snapshot(&self.db)?;
        work(&snapshot)
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

fn read_task(snapshot: &Snapshot, task_id: &str) -> StoreResult<Option<StoredTask>> {
    let meta = snapshot.table(META)?;
    let Some(found) = meta.get(task_id)? else {
        return Ok(None);
    };
    let (version, _, events, history, transcript, artifact_ids) = found.value();
    let tasks = snapshot.table(TASKS)?;
    let doc = tasks
        .get(task_id)?
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
        self.read(|snapshot| read_task(snapshot, task_id))
    }

    /// The counters table answers for the version; the document is read only if it moved.
    async fn get_newer(&self, task_id: &str, version: u64) -> StoreResult<Newer> {
        self.read(|snapshot| {
            match snapshot.table(META)?.get(task_id)? {
                None => return Ok(Newer::Missing),
                Some(found) if found.value().0 == version => return Ok(Newer::Unchanged),
                Some(_) => {}
            }
            Ok(match read_task(snapshot, task_id)? {
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
        self.read(|snapshot| {
            snapshot
                .table(EVENTS)?
                .range((task_id, from_seq)..=(task_id, u64::MAX), false)?
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
        self.read(|snapshot| {
            let newest_first = snapshot
                .table(HISTORY)?
                .range((task_id, 0)..=(task_id, u64::MAX), true)?;
            let mut newest_first: Vec<Message> = newest_first
                .take(last.unwrap_or(usize::MAX))
                .map(|entry| parse("message", entry.map_err(backend)?.1.value()))
                .collect::<StoreResult<_>>()?;
            newest_first.reverse();
            Ok(newest_first)
        })
    }

    async fn transcript(&self, task_id: &str, from: u64) -> StoreResult<Vec<serde_json::Value>> {
        self.read(|snapshot| {
            snapshot
                .table(TRANSCRIPT)?
                .range((task_id, from)..=(task_id, u64::MAX), false)?
                .map(|entry| parse("transcript entry", entry.map_err(backend)?.1.value()))
                .collect()
        })
    }

    async fn artifacts(&self, task_id: &str) -> StoreResult<Vec<Artifact>> {
        self.read(|snapshot| {
            let Some(found) = snapshot.table(META)?.get(task_id)? else {
                return Ok(Vec::new());
            };
            let order: Vec<String> = parse("artifact ids", found.value().5)?;
            let artifacts = snapshot.table(ARTIFACTS)?;
            order
                .iter()
                .filter_map(
                    |artifact_id| match artifacts.get((task_id, artifact_id.as_str())) {
                        Ok(Some(v)) => Some(parse("artifact", v.value())),
                        Ok(None) => None,
                        Err(e) => Some(Err(e)),
                    },
                )
                .collect()
        })
    }

    async fn audit(&self, task_id: &str) -> StoreResult<Vec<AuditEntry>> {
        self.read(|snapshot| {
            snapshot
                .table(AUDIT)?
                .range(
                    (task_id, i64::MIN, 0, "")..(task_id, i64::MAX, 0, ""),
                    false,
                )?
                .map(|entry| parse("audit entry", entry.map_err(backend)?.1.value()))
                .collect()
        })
    }

    async fn list(&self, participant_id: &str, query: &ListQuery) -> StoreResult<TaskPage> {
        let after = query.page_token.as_deref().map(decode_token).transpose()?;
        self.read(|snapshot| {
            let p = participant_id;
            let entries = snapshot
                .table(INDEX)?
                .range((p, i64::MIN, 0, "")..(p, i64::MAX, 0, ""), true)?;
            let mut page = Vec::new();
            let mut total = 0;
            let mut last_key = None;
            let mut more = false;
            for entry in entries {
                let (key, _) = entry.map_err(backend)?;
                let (_, secs, nanos, task_id) = key.value();
                let Some(task) = read_task(snapshot, task_id)? else {
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
        self.read(|snapshot| {
            snapshot
                .table(INBOX)?
                .range(
                    (task_id, i64::MIN, 0, "")..(task_id, i64::MAX, 0, ""),
                    false,
                )?
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
        self.read(|snapshot| {
            let mut expired = Vec::new();
            for entry in snapshot.table(LEASES)?.range::<&str>(.., false)? {
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
