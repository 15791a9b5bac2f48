//! ListTasks: a participant's tasks, newest status first, read from the listing tables
//! (`list_by_state`, `list_by_context`, `list_counts`; `task_store::listing`) so that a page
//! reads about as many rows as it returns and `total_size` is a stored count, whatever the
//! participant's task count. Page tokens are the index key of the page's last task.

use std::collections::BinaryHeap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use task_store::listing::{ListingChange, state_key};
use task_store::{ListQuery, StoreError, StoreResult, StoredTask, TaskPage, TaskRecord};

use crate::EmbeddedStore;
use crate::error::backend;
use crate::items::{BY_CONTEXT, BY_STATE, LIST_COUNTS, json, time_key};
use crate::reads;
use crate::snapshot::Snapshot;
use redb::ReadableTable;

use crate::tables::{FileTables, Tables};

/// Where a task is in a listing: (status seconds, status nanos, task id), newest first.
type Place = (i64, u32, String);

impl EmbeddedStore {
    /// One page of `participant_id`'s tasks that match `query`.
    pub(crate) fn list_tasks(
        &self,
        participant_id: &str,
        query: &ListQuery,
    ) -> StoreResult<TaskPage> {
        let cursor = query.page_token.as_deref().map(decode_token).transpose()?;
        self.read(|snapshot| match &query.context_id {
            Some(context) => by_context(snapshot, participant_id, context, query, cursor),
            None => by_state(snapshot, participant_id, query, cursor),
        })
    }
}

/// Without a context filter: the participant's state ranges (one, with a state filter),
/// merged newest first, read only as far as the page needs.
fn by_state(
    snapshot: &Snapshot,
    p: &str,
    query: &ListQuery,
    cursor: Option<Place>,
) -> StoreResult<TaskPage> {
    let states = match &query.state {
        Some(state) => vec![state_key(state)],
        None => states_with_tasks(snapshot, p)?,
    };
    let lower = query.status_after.map(time_key).unwrap_or((i64::MIN, 0));
    let table = snapshot.table(BY_STATE)?;
    let mut ranges = Vec::with_capacity(states.len());
    for state in &states {
        let low = (p, state.as_str(), lower.0, lower.1, "");
        let range = match &cursor {
            Some((secs, nanos, task)) => {
                table.range(low..(p, state.as_str(), *secs, *nanos, task.as_str()), true)?
            }
            None => table.range(low..(p, state.as_str(), i64::MAX, 0, ""), true)?,
        };
        ranges.push(range.map(|entry| {
            let (key, _) = entry.map_err(backend)?;
            let (_, _, secs, nanos, task) = key.value();
            Ok::<Place, StoreError>((secs, nanos, task.to_owned()))
        }));
    }
    // A k-way merge: the newest head of every range first.
    let mut heads = BinaryHeap::new();
    for (i, range) in ranges.iter_mut().enumerate() {
        if let Some(place) = range.next().transpose()? {
            heads.push((place, i));
        }
    }
    let mut places = Vec::with_capacity(query.page_size + 1);
    while places.len() <= query.page_size {
        let Some((place, i)) = heads.pop() else { break };
        if let Some(next) = ranges[i].next().transpose()? {
            heads.push((next, i));
        }
        places.push(place);
    }
    let total = match query.status_after {
        // A count of the entries at or after the instant: what lies in the window.
        Some(_) => {
            let mut n = 0;
            for state in &states {
                let low = (p, state.as_str(), lower.0, lower.1, "");
                n += table
                    .range(low..(p, state.as_str(), i64::MAX, 0, ""), false)?
                    .count() as u64;
            }
            n
        }
        None => count(snapshot, p, query.state.as_ref().map(state_key).as_deref())?,
    };
    let more = places.len() > query.page_size;
    places.truncate(query.page_size);
    let mut tasks = Vec::with_capacity(places.len());
    for (_, _, task_id) in &places {
        if let Some(task) = reads::task(snapshot, task_id)? {
            tasks.push(task);
        }
    }
    page(tasks, places.last().filter(|_| more), total)
}

/// With a context filter: every task of the participant in that context (its entries carry
/// no time, so that a status change leaves them alone), filtered, ordered and paged here.
fn by_context(
    snapshot: &Snapshot,
    p: &str,
    context: &str,
    query: &ListQuery,
    cursor: Option<Place>,
) -> StoreResult<TaskPage> {
    let mut matching: Vec<(Place, StoredTask)> = Vec::new();
    // Every key (p, context, _) sorts before (p, context + "\0", "").
    let past = format!("{context}\0");
    for entry in snapshot
        .table(BY_CONTEXT)?
        .range((p, context, "")..(p, past.as_str(), ""), false)?
    {
        let (key, _) = entry.map_err(backend)?;
        let (_, _, task_id) = key.value();
        let Some(task) = reads::task(snapshot, task_id)? else {
            continue;
        };
        if query.matches(&task.record) {
            matching.push((place_of(&task.record), task));
        }
    }
    matching.sort_by(|(a, _), (b, _)| b.cmp(a));
    let total = matching.len() as u64;
    let mut rest = matching
        .into_iter()
        .filter(|(place, _)| cursor.as_ref().is_none_or(|c| place < c));
    let tasks: Vec<_> = rest.by_ref().take(query.page_size).collect();
    let more = rest.next().is_some();
    let last = tasks.last().map(|(place, _)| place.clone());
    page(
        tasks.into_iter().map(|(_, task)| task).collect(),
        last.as_ref().filter(|_| more),
        total,
    )
}

fn page(tasks: Vec<StoredTask>, last: Option<&Place>, total: u64) -> StoreResult<TaskPage> {
    let next_page_token = match last {
        Some((secs, nanos, task)) => encode_token(&PageToken {
            secs: *secs,
            nanos: *nanos,
            task: task.clone(),
        })?,
        None => String::new(),
    };
    Ok(TaskPage {
        tasks,
        next_page_token,
        total_size: usize::try_from(total).unwrap_or(usize::MAX),
    })
}

fn place_of(record: &TaskRecord) -> Place {
    let (secs, nanos) = time_key(record.status_timestamp().unwrap_or_default());
    (secs, nanos, record.id.clone())
}

/// The participant's count of tasks in `state` (`None`: all).
fn count(snapshot: &Snapshot, p: &str, state: Option<&str>) -> StoreResult<u64> {
    Ok(snapshot
        .table(LIST_COUNTS)?
        .get((p, state.unwrap_or("")))?
        .map_or(0, |found| found.value()))
}

/// The states the participant has tasks in, from its counts.
fn states_with_tasks(snapshot: &Snapshot, p: &str) -> StoreResult<Vec<String>> {
    let mut states = Vec::new();
    let past = format!("{p}\0");
    for entry in snapshot
        .table(LIST_COUNTS)?
        .range((p, "")..(past.as_str(), ""), false)?
    {
        let (key, value) = entry.map_err(backend)?;
        let (_, state) = key.value();
        if !state.is_empty() && value.value() > 0 {
            states.push(state.to_owned());
        }
    }
    Ok(states)
}

/// A commit's writes to the listing tables, on the writer thread: entries moved, counts
/// changed, atomically with the rest of the commit.
pub(crate) fn apply_listing(
    tables: &mut Tables,
    task_id: &str,
    change: &ListingChange,
) -> StoreResult<()> {
    let kept_context = |p: &str, ctx: &str, other: &[task_store::listing::Listed]| {
        other.iter().any(|l| l.participant == p && l.context == ctx)
    };
    for l in &change.removed {
        let (secs, nanos) = time_key(l.status_time);
        let p = l.participant.as_str();
        tables
            .by_state
            .remove((p, l.state.as_str(), secs, nanos, task_id))
            .map_err(backend)?;
        if !kept_context(p, &l.context, &change.added) {
            tables
                .by_context
                .remove((p, l.context.as_str(), task_id))
                .map_err(backend)?;
        }
    }
    for l in &change.added {
        let (secs, nanos) = time_key(l.status_time);
        let p = l.participant.as_str();
        tables
            .by_state
            .insert((p, l.state.as_str(), secs, nanos, task_id), ())
            .map_err(backend)?;
        if !kept_context(p, &l.context, &change.removed) {
            tables
                .by_context
                .insert((p, l.context.as_str(), task_id), ())
                .map_err(backend)?;
        }
    }
    for ((p, state), delta) in change.count_deltas() {
        let key = (p.as_str(), state.as_deref().unwrap_or(""));
        let now = tables
            .list_counts
            .get(key)
            .map_err(backend)?
            .map_or(0, |found| found.value());
        let next = now.saturating_add_signed(delta);
        if next == 0 {
            tables.list_counts.remove(key).map_err(backend)?;
        } else {
            tables.list_counts.insert(key, next).map_err(backend)?;
        }
    }
    Ok(())
}

/// Builds the listing tables of a file from its task documents, and empties the index of
/// the earlier layout (`participant_index`): what opening a file of that layout does once.
pub(crate) fn rebuild(tables: &mut FileTables) -> StoreResult<u64> {
    let mut records: Vec<TaskRecord> = Vec::new();
    for row in tables.tasks.iter().map_err(backend)? {
        let (_, doc) = row.map_err(backend)?;
        records.push(crate::items::parse("task", doc.value())?);
    }
    tables.by_state.retain(|_, _| false).map_err(backend)?;
    tables.by_context.retain(|_, _| false).map_err(backend)?;
    tables.list_counts.retain(|_, _| false).map_err(backend)?;
    let mut counts: std::collections::BTreeMap<(String, String), u64> = Default::default();
    for record in &records {
        for l in ListingChange::between(None, record).added {
            let (secs, nanos) = time_key(l.status_time);
            let p = l.participant.as_str();
            tables
                .by_state
                .insert((p, l.state.as_str(), secs, nanos, record.id.as_str()), ())
                .map_err(backend)?;
            tables
                .by_context
                .insert((p, l.context.as_str(), record.id.as_str()), ())
                .map_err(backend)?;
            *counts
                .entry((l.participant.clone(), String::new()))
                .or_default() += 1;
            *counts.entry((l.participant, l.state)).or_default() += 1;
        }
    }
    for ((p, state), n) in &counts {
        tables
            .list_counts
            .insert((p.as_str(), state.as_str()), n)
            .map_err(backend)?;
    }
    tables.index.retain(|_, _| false).map_err(backend)?;
    Ok(records.len() as u64)
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

fn decode_token(text: &str) -> StoreResult<Place> {
    let invalid = || StoreError::Invalid("invalid page token".to_owned());
    let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| invalid())?;
    let token: PageToken = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    Ok((token.secs, token.nanos, token.task))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use a2a::TaskState;
    use task_core::extension::Role;
    use task_store::contract::{at, record};
    use task_store::{Change, ListQuery, NewTask, TaskStore};

    use super::*;
    use crate::reads::TASK_READS;

    /// Task reads of one listing on this thread.
    fn reads_of(store: &EmbeddedStore, query: &ListQuery) -> (TaskPage, usize) {
        TASK_READS.with(|n| n.set(0));
        let page = store.list_tasks("alice", query).expect("list");
        (page, TASK_READS.with(std::cell::Cell::get))
    }

    #[tokio::test]
    async fn a_page_reads_the_tasks_it_returns_not_the_participants_others() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(dir.path().join("t.redb")).expect("open");
        // 300 tasks of alice; the oldest waits for input, the rest are done.
        let changes: Vec<Change> = (0..300)
            .map(|i| {
                let state = if i == 0 {
                    TaskState::InputRequired
                } else {
                    TaskState::Completed
                };
                let rec = record(
                    &format!("t-{i:03}"),
                    "ctx",
                    &[("alice", Role::Reporter)],
                    state,
                    at(i),
                );
                Change::Create(Box::new(NewTask::new(rec)))
            })
            .collect();
        store.commit(changes).await.expect("seed");

        let first = ListQuery {
            page_size: 5,
            ..Default::default()
        };
        let (page, reads) = reads_of(&store, &first);
        assert_eq!((page.tasks.len(), page.total_size, reads), (5, 300, 5));

        let middle = ListQuery {
            page_token: Some(page.next_page_token),
            ..first.clone()
        };
        let (page, reads) = reads_of(&store, &middle);
        assert_eq!(page.tasks[0].record.id, "t-294");
        assert_eq!(reads, 5);

        let waiting = ListQuery {
            state: Some(TaskState::InputRequired),
            ..first.clone()
        };
        let (page, reads) = reads_of(&store, &waiting);
        assert_eq!((page.tasks.len(), page.total_size, reads), (1, 1, 1));
    }
}
