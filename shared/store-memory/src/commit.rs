//! Commits: every condition of every change judged on the state before the commit, then
//! every change applied. Applying cannot fail once the conditions hold, so a commit stands or
//! falls whole.

use std::collections::HashSet;

use task_store::limits::EncodedChange;
use task_store::listing::ListingChange;
use task_store::{
    Change, Committed, Conflict, InboxKey, NewTask, StoreError, StoreResult, TaskUpdate,
};

use crate::items::{Items, Queued, TaskItems};

/// Applies `changes` (with their documents, as `task_store::limits::encode_changes` encoded
/// them) if every condition holds, else nothing.
pub(crate) fn commit(
    items: &mut Items,
    changes: &[Change],
    encoded: Vec<EncodedChange>,
) -> StoreResult<Vec<Committed>> {
    for change in changes {
        check(items, change)?;
    }
    changes
        .iter()
        .zip(encoded)
        .map(|(change, docs)| apply(items, change, docs))
        .collect()
}

fn check(items: &Items, change: &Change) -> StoreResult<()> {
    match change {
        Change::Create(new) => check_create(items, new),
        Change::Update(update) => check_update(items, update),
        Change::Enqueue { task_id, item } => check_enqueue(items, task_id, &item.key),
    }
}

fn check_create(items: &Items, new: &NewTask) -> StoreResult<()> {
    let id = new.record.id.as_str();
    let leased = new.lease.is_some() && items.leases.contains_key(id);
    if items.tasks.contains_key(id) || leased {
        return Err(Conflict::TaskExists(id.to_owned()).into());
    }
    let inbox_ids = new.inbox.iter().map(|item| &item.key.message_id);
    check_message_ids(&HashSet::new(), id, new.message_ids.iter().chain(inbox_ids))
}

fn check_update(items: &Items, update: &TaskUpdate) -> StoreResult<()> {
    let id = update.task_id();
    let changed = || StoreError::from(Conflict::TaskChanged(id.to_owned()));
    let task = items
        .tasks
        .get(id)
        .filter(|task| task.version == update.base.version)
        .ok_or_else(changed)?;
    let record = task.record()?;
    let state_allowed =
        update.allowed_states.is_empty() || update.allowed_states.contains(record.state());
    let role_held = update.actor_role.as_ref().is_none_or(|(actor, role)| {
        record
            .extension
            .participant(actor)
            .is_some_and(|p| p.role == *role)
    });
    if !state_allowed || !role_held {
        return Err(changed());
    }
    check_message_ids(&task.message_ids, id, &update.message_ids)?;
    if update
        .consume_inbox
        .iter()
        .any(|key| !task.inbox.contains_key(key))
    {
        return Err(Conflict::InboxItemGone(id.to_owned()).into());
    }
    Ok(())
}

/// What queueing a message checks: the task exists, is not terminal, and has not seen the id.
pub(crate) fn check_enqueue(items: &Items, task_id: &str, key: &InboxKey) -> StoreResult<()> {
    let task = items
        .tasks
        .get(task_id)
        .ok_or_else(|| StoreError::NotFound(format!("task {task_id}")))?;
    if task.record()?.state().is_terminal() {
        return Err(Conflict::TaskTerminal(task_id.to_owned()).into());
    }
    check_message_ids(&task.message_ids, task_id, [&key.message_id])
}

/// `DuplicateMessage` for the first id already `received`, or given twice.
fn check_message_ids<'a>(
    received: &HashSet<String>,
    task_id: &str,
    ids: impl IntoIterator<Item = &'a String>,
) -> StoreResult<()> {
    let mut seen = HashSet::new();
    for id in ids {
        if received.contains(id) || !seen.insert(id) {
            return Err(Conflict::DuplicateMessage {
                task_id: task_id.to_owned(),
                message_id: id.clone(),
            }
            .into());
        }
    }
    Ok(())
}

fn apply(items: &mut Items, change: &Change, docs: EncodedChange) -> StoreResult<Committed> {
    match change {
        Change::Create(new) => Ok(apply_create(items, new, docs)),
        Change::Update(update) => apply_update(items, update, docs),
        Change::Enqueue { task_id, item } => {
            let message = docs.inbox.into_iter().next().unwrap_or_default();
            apply_enqueue(items, task_id, &item.key, &item.sender, message)?;
            Ok(Committed {
                task_id: task_id.clone(),
                version: 0,
                event_seqs: Vec::new(),
            })
        }
    }
}

fn apply_create(items: &mut Items, new: &NewTask, docs: EncodedChange) -> Committed {
    let id = new.record.id.clone();
    let mut task = TaskItems::new(docs.task);
    task.events = docs.events;
    task.history = docs.history;
    task.message_ids = new.message_ids.iter().cloned().collect();
    for (item, message) in new.inbox.iter().zip(docs.inbox) {
        task.message_ids.insert(item.key.message_id.clone());
        let sender = item.sender.clone();
        task.inbox
            .insert(item.key.clone(), Queued { sender, message });
    }
    add_audit(&mut task, docs.audit);
    let committed = Committed {
        task_id: id.clone(),
        version: task.version,
        event_seqs: (0..task.events.len() as u64).collect(),
    };
    items.tasks.insert(id.clone(), task);
    items
        .listing
        .apply(&id, &ListingChange::between(None, &new.record));
    if let Some(lease) = &new.lease {
        items.leases.insert(id, lease.clone());
    }
    committed
}

fn apply_update(
    items: &mut Items,
    update: &TaskUpdate,
    docs: EncodedChange,
) -> StoreResult<Committed> {
    // A lease another runner took meanwhile (this one's expired) stays.
    let give_up = update
        .release
        .as_ref()
        .is_some_and(|lease| items.holds(lease));
    let id = update.task_id();
    // Checked above: the task exists.
    let task = items
        .tasks
        .get_mut(id)
        .ok_or_else(|| StoreError::NotFound(format!("task {id}")))?;
    if update.record.is_some() {
        task.record = docs.task;
    }
    task.version += 1;
    let first_seq = task.events.len() as u64;
    task.events.extend(docs.events);
    task.history.extend(docs.history);
    task.transcript.extend(docs.transcript);
    for (artifact_id, artifact) in docs.artifacts {
        if !task.artifacts.contains_key(&artifact_id) {
            task.artifact_ids.push(artifact_id.clone());
        }
        task.artifacts.insert(artifact_id, artifact);
    }
    task.message_ids.extend(update.message_ids.iter().cloned());
    for key in &update.consume_inbox {
        task.inbox.remove(key);
    }
    add_audit(task, docs.audit);
    let committed = Committed {
        task_id: id.to_owned(),
        version: task.version,
        event_seqs: (first_seq..task.events.len() as u64).collect(),
    };
    if give_up {
        items.leases.remove(id);
    }
    if let Some(record) = &update.record {
        // At the version the update read, the stored task is `base`.
        let change = ListingChange::between(Some(&update.base.record), record);
        items.listing.apply(id, &change);
    }
    Ok(committed)
}

fn add_audit(task: &mut TaskItems, audit: Vec<(task_store::AuditEntry, String)>) {
    for (entry, json) in audit {
        task.audit.insert((entry.at, entry.message_id), json);
    }
}

/// Queues a message `check_enqueue` allowed, and records its id.
pub(crate) fn apply_enqueue(
    items: &mut Items,
    task_id: &str,
    key: &InboxKey,
    sender: &str,
    message: String,
) -> StoreResult<()> {
    // Checked before: the task exists.
    let task = items
        .tasks
        .get_mut(task_id)
        .ok_or_else(|| StoreError::NotFound(format!("task {task_id}")))?;
    task.message_ids.insert(key.message_id.clone());
    let sender = sender.to_owned();
    task.inbox.insert(key.clone(), Queued { sender, message });
    Ok(())
}
