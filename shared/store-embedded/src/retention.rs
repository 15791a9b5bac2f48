//! `RetentionStore`: the purge. The terminal tasks are found on the caller's thread (one read
//! of the published state: every counters row, and the document of each terminal task); the
//! removal is a job of the writer, which checks that each task is still the terminal version
//! read and that no parent of it exists (other than one removed by the same job) before it
//! deletes anything, so a purge never races a commit: a task written meanwhile is weighed
//! again by the next purge.

use std::collections::HashSet;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use task_store::listing::{Listed, ListingChange, listed};
use task_store::retention::{Candidate, eligible};
use task_store::{Purged, RetentionStore, StoreResult};

use crate::EmbeddedStore;
use crate::error::backend;
use crate::items::{META, TASKS, parse};
use crate::list::apply_listing;
use crate::snapshot::Snapshot;
use crate::tables::Tables;

/// Tasks one writer job removes at most (bounds one group's size; the purge queues as many
/// jobs as it needs).
const TASKS_PER_JOB: usize = 100;

/// A task chosen for removal, with its listing entries as of the version read.
struct Doomed {
    candidate: Candidate,
    entries: Vec<Listed>,
}

#[async_trait]
impl RetentionStore for EmbeddedStore {
    async fn purge(&self, now: DateTime<Utc>, keep: Duration) -> StoreResult<Purged> {
        let chosen = self.read(|snapshot| choose(snapshot, now, keep))?;
        let mut removed = Vec::new();
        let mut batch = Vec::new();
        for doomed in chosen {
            batch.push(doomed);
            if batch.len() == TASKS_PER_JOB {
                removed.extend(self.remove(std::mem::take(&mut batch)).await?);
            }
        }
        if !batch.is_empty() {
            removed.extend(self.remove(batch).await?);
        }
        Ok(Purged {
            removed,
            expiring: Vec::new(),
        })
    }
}

impl EmbeddedStore {
    /// Removes what still may be of `batch` (parents first), in one job of the writer.
    async fn remove(&self, batch: Vec<Doomed>) -> StoreResult<Vec<String>> {
        self.writer
            .write(batch, still_removable, |tables, batch, keep| {
                let mut removed = Vec::new();
                for (doomed, keep) in batch.into_iter().zip(keep) {
                    if keep {
                        remove_task(tables, &doomed)?;
                        removed.push(doomed.candidate.task_id);
                    }
                }
                Ok(removed)
            })
            .await
    }
}

/// Every terminal task eligible at `now`, parents before children.
fn choose(snapshot: &Snapshot, now: DateTime<Utc>, keep: Duration) -> StoreResult<Vec<Doomed>> {
    let meta = snapshot.table(META)?;
    let docs = snapshot.table(TASKS)?;
    let mut candidates = Vec::new();
    let mut entries = Vec::new();
    let mut ids = HashSet::new();
    for row in meta.range::<&str>(.., false)? {
        let (key, counters) = row.map_err(backend)?;
        let task_id = key.value().to_owned();
        let (version, terminal, ..) = counters.value();
        ids.insert(task_id.clone());
        if !terminal {
            continue;
        }
        let Some(doc) = docs.get(task_id.as_str())? else {
            continue;
        };
        let record: task_store::TaskRecord = parse("task", doc.value())?;
        let stored = task_store::StoredTask {
            record,
            version,
            counters: Default::default(),
        };
        if let Some(candidate) = Candidate::of(&stored) {
            entries.push((candidate.task_id.clone(), listed(&stored.record)));
            candidates.push(candidate);
        }
    }
    let chosen = eligible(&candidates, now, keep, |id| ids.contains(id));
    Ok(chosen
        .into_iter()
        .map(|c| Doomed {
            candidate: c.clone(),
            entries: entries
                .iter()
                .find(|(id, _)| *id == c.task_id)
                .map(|(_, e)| e.clone())
                .unwrap_or_default(),
        })
        .collect())
}

/// Which tasks of `batch` may still go: still at the version read (so still terminal, as
/// read) and with no parent left but one this job removes before it.
fn still_removable(tables: &Tables<'_>, batch: &Vec<Doomed>) -> StoreResult<Vec<bool>> {
    let mut going: HashSet<&str> = HashSet::new();
    let mut keep = Vec::with_capacity(batch.len());
    for doomed in batch {
        let c = &doomed.candidate;
        let current = tables.meta.get(c.task_id.as_str()).map_err(backend)?;
        let unchanged = current.is_some_and(|found| {
            let (version, terminal, ..) = found.value();
            version == c.version && terminal
        });
        let mut orphan = true;
        for parent in &c.local_parents {
            if !going.contains(parent.as_str())
                && tables.meta.get(parent.as_str()).map_err(backend)?.is_some()
            {
                orphan = false;
            }
        }
        let may = unchanged && orphan;
        if may {
            going.insert(&c.task_id);
        }
        keep.push(may);
    }
    Ok(keep)
}

/// Deletes every row of the task, and its listing entries and counts.
fn remove_task(tables: &mut Tables<'_>, doomed: &Doomed) -> StoreResult<()> {
    let id = doomed.candidate.task_id.as_str();
    // Every key whose first part is `id` sorts before one whose first part is `id\0`.
    let past = format!("{id}\0");
    let past = past.as_str();
    tables.tasks.remove(id).map_err(backend)?;
    tables.meta.remove(id).map_err(backend)?;
    tables.leases.remove(id).map_err(backend)?;
    tables
        .events
        .remove_range((id, 0)..=(id, u64::MAX))
        .map_err(backend)?;
    tables
        .history
        .remove_range((id, 0)..=(id, u64::MAX))
        .map_err(backend)?;
    tables
        .transcript
        .remove_range((id, 0)..=(id, u64::MAX))
        .map_err(backend)?;
    for table in [&mut tables.artifacts, &mut tables.push] {
        table.remove_range((id, "")..(past, "")).map_err(backend)?;
    }
    tables
        .message_ids
        .remove_range((id, "")..(past, ""))
        .map_err(backend)?;
    tables
        .inbox
        .remove_range((id, i64::MIN, 0, "")..(past, i64::MIN, 0, ""))
        .map_err(backend)?;
    tables
        .audit
        .remove_range((id, i64::MIN, 0, "")..(past, i64::MIN, 0, ""))
        .map_err(backend)?;
    let change = ListingChange {
        removed: doomed.entries.clone(),
        added: Vec::new(),
    };
    apply_listing(tables, id, &change)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use a2a::TaskState;
    use task_store::contract::{TEAM, at, record};
    use task_store::{AuditEntry, Change, NewTask, TaskStore, TaskUpdate};

    use super::*;

    #[tokio::test]
    async fn a_task_written_after_it_was_chosen_is_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(dir.path().join("t.redb")).expect("open");
        let rec = record("done", "ctx", TEAM, TaskState::Completed, at(0));
        store
            .commit(vec![Change::Create(Box::new(NewTask::new(rec)))])
            .await
            .expect("create");
        let now = at(0) + Duration::days(2);
        let chosen = store
            .read(|snapshot| choose(snapshot, now, Duration::days(1)))
            .expect("choose");
        assert_eq!(chosen.len(), 1);

        // A write lands between the choice and the writer's job (an audit entry of a
        // refused message): the task is no longer the version chosen.
        let task = store.get("done").await.expect("get").expect("exists");
        let mut update = TaskUpdate::new(task);
        update
            .audit
            .push(AuditEntry::new(at(5), "m", Some("eve"), false, "terminal"));
        store
            .commit(vec![Change::Update(Box::new(update))])
            .await
            .expect("update");

        assert!(store.remove(chosen).await.expect("remove").is_empty());
        assert!(store.get("done").await.expect("get").is_some());
        // The next purge weighs it again, and takes it.
        let purged = store.purge(now, Duration::days(1)).await.expect("purge");
        assert_eq!(purged.removed, ["done"]);
    }
}
