//! Reads of one task's document and logs; a task that does not exist has empty logs.

use a2a::{Artifact, Message};
use task_store::{AuditEntry, StoreResult, StoredEvent, StoredTask};

use crate::items::{Items, TaskItems, parse};

pub(crate) fn task(items: &Items, task_id: &str) -> StoreResult<Option<StoredTask>> {
    items.tasks.get(task_id).map(TaskItems::stored).transpose()
}

pub(crate) fn events(
    items: &Items,
    task_id: &str,
    from_seq: u64,
    limit: usize,
) -> StoreResult<Vec<StoredEvent>> {
    let Some(task) = items.tasks.get(task_id) else {
        return Ok(Vec::new());
    };
    (0u64..)
        .zip(&task.events)
        .skip(index(from_seq))
        .take(limit)
        .map(|(seq, event)| {
            Ok(StoredEvent {
                seq,
                event: parse("event", event)?,
            })
        })
        .collect()
}

pub(crate) fn history(
    items: &Items,
    task_id: &str,
    last: Option<usize>,
) -> StoreResult<Vec<Message>> {
    let Some(task) = items.tasks.get(task_id) else {
        return Ok(Vec::new());
    };
    let len = task.history.len();
    let first = len - last.unwrap_or(len).min(len);
    parse_all("message", &task.history[first..])
}

pub(crate) fn transcript(
    items: &Items,
    task_id: &str,
    from: u64,
) -> StoreResult<Vec<serde_json::Value>> {
    let Some(task) = items.tasks.get(task_id) else {
        return Ok(Vec::new());
    };
    let from = index(from).min(task.transcript.len());
    parse_all("transcript entry", &task.transcript[from..])
}

/// In the order they were first written.
pub(crate) fn artifacts(items: &Items, task_id: &str) -> StoreResult<Vec<Artifact>> {
    let Some(task) = items.tasks.get(task_id) else {
        return Ok(Vec::new());
    };
    task.artifact_ids
        .iter()
        .filter_map(|id| task.artifacts.get(id))
        .map(|artifact| parse("artifact", artifact))
        .collect()
}

/// Oldest first (by time, then message id).
pub(crate) fn audit(items: &Items, task_id: &str) -> StoreResult<Vec<AuditEntry>> {
    let Some(task) = items.tasks.get(task_id) else {
        return Ok(Vec::new());
    };
    task.audit
        .values()
        .map(|entry| parse("audit entry", entry))
        .collect()
}

fn parse_all<T: serde::de::DeserializeOwned>(what: &str, docs: &[String]) -> StoreResult<Vec<T>> {
    docs.iter().map(|doc| parse(what, doc)).collect()
}

/// A position in a log (past its end if it does not fit in memory).
fn index(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
