//! The read layer: reads run on the caller's thread against a [`Snapshot`] of the published
//! groups (the layers, then the file): tasks, events, history, transcript, artifacts, audit.

use a2a::{Artifact, Message};
use task_store::{AuditEntry, Newer, StoreResult, StoredEvent, StoredTask, TaskCounters};

use crate::EmbeddedStore;
use crate::error::{backend, corrupt};
use crate::items::{ARTIFACTS, AUDIT, EVENTS, HISTORY, META, TASKS, TRANSCRIPT, parse};
use crate::snapshot::Snapshot;

impl EmbeddedStore {
    /// Runs read-only work on the published state, on the caller's thread.
    pub(crate) fn read<T>(&self, work: impl FnOnce(&Snapshot) -> StoreResult<T>) -> StoreResult<T> {
        let snapshot = self.view.snapshot(&self.db)?;
        work(&snapshot)
    }
}

#[cfg(test)]
thread_local! {
    /// How many tasks this thread read (tests count what a read costs).
    pub(crate) static TASK_READS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A task: its counters row, then its document.
pub(crate) fn task(snapshot: &Snapshot, task_id: &str) -> StoreResult<Option<StoredTask>> {
    #[cfg(test)]
    TASK_READS.with(|n| n.set(n.get() + 1));
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

/// The counters table answers for the version; the document is read only if it moved.
pub(crate) fn newer(snapshot: &Snapshot, task_id: &str, version: u64) -> StoreResult<Newer> {
    match snapshot.table(META)?.get(task_id)? {
        None => return Ok(Newer::Missing),
        Some(found) if found.value().0 == version => return Ok(Newer::Unchanged),
        Some(_) => {}
    }
    Ok(match task(snapshot, task_id)? {
        Some(task) => Newer::Changed(Box::new(task)),
        None => Newer::Missing,
    })
}

pub(crate) fn events(
    snapshot: &Snapshot,
    task_id: &str,
    from_seq: u64,
    limit: usize,
) -> StoreResult<Vec<StoredEvent>> {
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
}

pub(crate) fn history(
    snapshot: &Snapshot,
    task_id: &str,
    last: Option<usize>,
) -> StoreResult<Vec<Message>> {
    let newest_first = snapshot
        .table(HISTORY)?
        .range((task_id, 0)..=(task_id, u64::MAX), true)?;
    let mut newest_first: Vec<Message> = newest_first
        .take(last.unwrap_or(usize::MAX))
        .map(|entry| parse("message", entry.map_err(backend)?.1.value()))
        .collect::<StoreResult<_>>()?;
    newest_first.reverse();
    Ok(newest_first)
}

pub(crate) fn transcript(
    snapshot: &Snapshot,
    task_id: &str,
    from: u64,
) -> StoreResult<Vec<serde_json::Value>> {
    snapshot
        .table(TRANSCRIPT)?
        .range((task_id, from)..=(task_id, u64::MAX), false)?
        .map(|entry| parse("transcript entry", entry.map_err(backend)?.1.value()))
        .collect()
}

/// A task's artifacts in the order its counters row lists their ids.
pub(crate) fn artifacts(snapshot: &Snapshot, task_id: &str) -> StoreResult<Vec<Artifact>> {
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
}

pub(crate) fn audit(snapshot: &Snapshot, task_id: &str) -> StoreResult<Vec<AuditEntry>> {
    snapshot
        .table(AUDIT)?
        .range(
            (task_id, i64::MIN, 0, "")..(task_id, i64::MAX, 0, ""),
            false,
        )?
        .map(|entry| parse("audit entry", entry.map_err(backend)?.1.value()))
        .collect()
}
