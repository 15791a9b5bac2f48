//! A commit on the writer thread: its changes prepared on the caller's thread, every
//! condition (version, message ids, inbox items, leases) judged before anything is written,
//! then its writes applied to every table.

use task_store::limits::{self, EncodedChange};
use task_store::listing::ListingChange;
use task_store::{
    Change, Committed, Conflict, InboxKey, Lease, NewTask, StoreError, StoreResult, TaskCounters,
    TaskUpdate,
};

use crate::error::backend;
use crate::items::{LeaseDoc, json, lease_doc, parse, time_key};
use crate::tables::Tables;

/// One change of a commit, ready for the writer.
pub(crate) enum Prepared {
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
pub(crate) struct PreparedTask {
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
    /// ListTasks' entries to drop and to add, and the counts they move.
    listing: ListingChange,
    /// False for an update without a record (the document stays as it is).
    write_document: bool,
    /// The run lease a creation takes (the lease document).
    lease: Option<String>,
    /// The run lease an update gives up, if still held by it.
    release: Option<Lease>,
}

/// A commit's changes, encoded (the size rules of `task_store::limits`) and prepared for the
/// writer, on the caller's thread: size errors and the conditions that need no database never
/// hold the writer.
/// `unlisted`: the participant whose listing entries are not kept.
pub(crate) fn prepare(changes: &[Change], unlisted: Option<&str>) -> StoreResult<Vec<Prepared>> {
    let encoded = limits::encode_changes(changes)?;
    changes
        .iter()
        .zip(encoded)
        .map(|(change, mut docs)| {
            Ok(match change {
                Change::Create(new) => {
                    Prepared::Task(Box::new(prepare_create(new, docs, unlisted)?))
                }
                Change::Update(update) => {
                    Prepared::Task(Box::new(prepare_update(update, docs, unlisted)?))
                }
                Change::Enqueue { task_id, item } => Prepared::Enqueue {
                    task_id: task_id.clone(),
                    key: item.key.clone(),
                    sender: item.sender.clone(),
                    message: docs.inbox.pop().unwrap_or_default(),
                },
            })
        })
        .collect()
}

fn duplicate_message(task_id: &str, message_id: &str) -> StoreError {
    Conflict::DuplicateMessage {
        task_id: task_id.to_owned(),
        message_id: message_id.to_owned(),
    }
    .into()
}

fn prepare_create(
    new: &NewTask,
    docs: EncodedChange,
    unlisted: Option<&str>,
) -> StoreResult<PreparedTask> {
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
        listing: ListingChange::between(None, &new.record).without(unlisted),
        write_document: true,
        lease: new.lease.as_ref().map(lease_doc).transpose()?,
        release: None,
        task_id: id,
    })
}

fn prepare_update(
    update: &TaskUpdate,
    docs: EncodedChange,
    unlisted: Option<&str>,
) -> StoreResult<PreparedTask> {
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
    let listing = match &update.record {
        Some(record) => ListingChange::between(Some(&base.record), record).without(unlisted),
        None => ListingChange::default(),
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
        listing,
        write_document: update.record.is_some(),
        lease: None,
        release: update.release.clone(),
    })
}

/// The version and terminal flag of a task, if it exists.
pub(crate) fn meta_of(tables: &Tables, task_id: &str) -> StoreResult<Option<(u64, bool)>> {
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
pub(crate) fn check_commit(tables: &Tables, changes: &[Prepared]) -> StoreResult<()> {
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
pub(crate) fn check_enqueue(tables: &Tables, task_id: &str, key: &InboxKey) -> StoreResult<()> {
    match meta_of(tables, task_id)? {
        None => return Err(StoreError::NotFound(format!("task {task_id}"))),
        Some((_, true)) => return Err(Conflict::TaskTerminal(task_id.to_owned()).into()),
        Some(_) => {}
    }
    check_message_ids(tables, task_id, std::slice::from_ref(&key.message_id))
}

pub(crate) fn apply_enqueue(
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

pub(crate) fn apply_commit(
    tables: &mut Tables,
    changes: Vec<Prepared>,
) -> StoreResult<Vec<Committed>> {
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
    let id = change.task_id.as_str();
    let docs = &change.docs;
    if change.write_document {
        tables
            .tasks
            .insert(id, docs.task.as_str())
            .map_err(backend)?;
    }
    tables
        .meta
        .insert(
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
        tables
            .message_ids
            .insert((id, message_id.as_str()), ())
            .map_err(backend)?;
    }
    for ((key, sender), message) in change.inbox.iter().zip(&docs.inbox) {
        let (secs, nanos) = time_key(key.enqueued_at);
        tables
            .inbox
            .insert(
                (id, secs, nanos, key.message_id.as_str()),
                (sender.as_str(), message.as_str()),
            )
            .map_err(backend)?;
    }
    for key in &change.consume_inbox {
        let (secs, nanos) = time_key(key.enqueued_at);
        tables
            .inbox
            .remove((id, secs, nanos, key.message_id.as_str()))
            .map_err(backend)?;
    }
    let mut seqs = Vec::with_capacity(docs.events.len());
    for (seq, event) in (change.first_seq..).zip(&docs.events) {
        tables
            .events
            .insert((id, seq), event.as_str())
            .map_err(backend)?;
        seqs.push(seq);
    }
    for (n, message) in (change.first_history..).zip(&docs.history) {
        tables
            .history
            .insert((id, n), message.as_str())
            .map_err(backend)?;
    }
    for (n, entry) in (change.first_transcript..).zip(&docs.transcript) {
        tables
            .transcript
            .insert((id, n), entry.as_str())
            .map_err(backend)?;
    }
    for (artifact_id, artifact) in &docs.artifacts {
        tables
            .artifacts
            .insert((id, artifact_id.as_str()), artifact.as_str())
            .map_err(backend)?;
    }
    for (entry, text) in &docs.audit {
        let (secs, nanos) = time_key(entry.at);
        tables
            .audit
            .insert((id, secs, nanos, entry.message_id.as_str()), text.as_str())
            .map_err(backend)?;
    }
    crate::list::apply_listing(tables, id, &change.listing)?;
    if let Some(lease) = &change.lease {
        tables.leases.insert(id, lease.as_str()).map_err(backend)?;
    }
    if give_up {
        tables.leases.remove(id).map_err(backend)?;
    }
    Ok(Committed {
        task_id: change.task_id.clone(),
        version: change.version,
        event_seqs: seqs,
    })
}

/// The lease is still this holder's (same owner and token).
pub(crate) fn held_by(tables: &Tables, lease: &Lease) -> StoreResult<()> {
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
