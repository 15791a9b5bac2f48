//! ListTasks: the participant index says where a participant's tasks are and in what order
//! (GSI1: one partition per state, merged newest first by `merge.rs`; GSI3: one per context,
//! read by `list_context.rs`), the counts
//! how many there are (`counts.rs`), the task items who is on each task and what it is now.
//! Every entry read is checked against its task before the task is listed, and the index is
//! read on until the page is full or the index ends. Entries that disagree with their task
//! are repaired on the way (best effort, conditionally: see `index.rs` for why that never
//! loses an entry).

use std::collections::{HashMap, VecDeque};

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::Select;
use chrono::{Duration, Utc};
use task_store::{ListQuery, StoreResult, StoredTask, TaskPage};

use crate::DynamoDbStore;
use crate::error::DynamoDbError;
use crate::index::{self, Single};
use crate::items::{self, Item, attr, key, s};
use crate::keys::{self, PageToken};
use crate::merge::Cursor;
use crate::schema::{EXPIRES, GSI1, GSI1_PK, GSI1_SK, PK, SK};
use crate::txn::Condition;

/// One call examines at most this many index entries; past them it returns the page it has
/// (possibly short, even empty) with a token that goes on from the last entry examined.
pub const MAX_EXAMINED: usize = 1000;

/// An entry of a task that does not exist is a creation's, written ahead of its
/// transaction: still under way if recent, failed if its status time is older than this.
fn orphan_age() -> Duration {
    Duration::hours(1)
}

/// What one pass over the index found.
#[derive(Default)]
struct Scan {
    /// (entry, task) of the tasks listed, up to one more than the page takes.
    listed: Vec<(Item, StoredTask)>,
    /// Entries examined and not listed: all of them matched the count query.
    left_out: usize,
    /// `GSI1SK` of the last entry examined when the scan stopped at [`MAX_EXAMINED`].
    stopped_at: Option<String>,
    repairs: Vec<Single>,
}

fn entry_key(entry: &Item) -> Item {
    entry
        .iter()
        .filter(|(name, _)| *name == PK || *name == SK)
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

pub(crate) fn token_at(sort_key: &str, entry: &Item) -> StoreResult<String> {
    Ok(PageToken::from_index_sk(sort_key)
        .ok_or_else(|| DynamoDbError::corrupt(items::describe_key(entry), "unreadable GSI1SK"))?
        .encode())
}

impl Scan {
    /// Sorts one entry: listed, or left out with the repair it calls for.
    fn examine(
        &mut self,
        participant: &str,
        query: &ListQuery,
        entry: Item,
        task: Option<&StoredTask>,
    ) -> StoreResult<()> {
        let entry_version = index::version_of(&entry);
        let Some(task) = task else {
            self.left_out += 1;
            let sort_key = items::get_s(&entry, GSI1_SK)?;
            let written = PageToken::from_index_sk(sort_key).and_then(|t| keys::parse_time(&t.ts));
            if written.is_some_and(|at| Utc::now() - at > orphan_age()) {
                // Unchanged since read: a creation retried since would have rewritten it. An
                // entry with `expires` is an expired task's, which TTL took: the retention
                // pass removes it with its count (`retention_index.rs`).
                let condition = Condition::new("#gsk = :gsk AND attribute_not_exists(#exp)")
                    .name("#gsk", GSI1_SK)
                    .name("#exp", EXPIRES)
                    .value(":gsk", s(sort_key));
                self.repairs.push(Single::Delete {
                    key: entry_key(&entry),
                    condition,
                });
            }
            return Ok(());
        };
        // An entry newer than the task read is a commit's still under way: not ours to touch.
        let in_flight = entry_version > task.version;
        let member = task
            .record
            .extension
            .participants
            .iter()
            .any(|p| p.id == participant);
        if !member {
            self.left_out += 1;
            if !in_flight {
                self.repairs.push(Single::Delete {
                    key: entry_key(&entry),
                    condition: index::not_newer(task.version),
                });
            }
            return Ok(());
        }
        let current = index::entry(&task.record, participant, task.version)?;
        if !in_flight && index::values_differ(&entry, &current) {
            // Only an entry that is still there, and no newer than the task read, moves.
            let condition = index::not_newer(task.version);
            let condition = Condition {
                expression: format!("attribute_exists(#pk) AND ({})", condition.expression),
                ..condition
            }
            .name("#pk", PK);
            self.repairs.push(Single::Put {
                item: current,
                condition,
            });
        }
        // The task's current values, not the index's copy of them (which may lag).
        if query.matches(&task.record) {
            self.listed.push((entry, task.clone()));
        } else {
            self.left_out += 1;
        }
        Ok(())
    }
}

impl DynamoDbStore {
    /// The task items of `ids`, by task id.
    pub(crate) async fn tasks_by_id(
        &self,
        mut ids: Vec<&str>,
    ) -> StoreResult<HashMap<String, StoredTask>> {
        ids.sort_unstable();
        ids.dedup();
        let keys = ids
            .iter()
            .map(|id| key(keys::task_pk(id), keys::TASK_SK))
            .collect();
        let mut tasks = HashMap::new();
        for item in self.batch_get(keys, None).await? {
            let task = items::parse_task(&item)?;
            tasks.insert(task.record.id.clone(), task);
        }
        Ok(tasks)
    }

    /// The task items of a batch of entries, by task id.
    async fn tasks_of(&self, entries: &[Item]) -> StoreResult<HashMap<String, StoredTask>> {
        let ids: Vec<&str> = entries
            .iter()
            .map(|e| items::get_s(e, attr::TASK))
            .collect::<Result<_, _>>()?;
        self.tasks_by_id(ids).await
    }

    /// Reads the merged partitions and checks their entries until one more task than the
    /// page takes is found, the index ends, or [`MAX_EXAMINED`] entries were examined.
    async fn scan(
        &self,
        participant: &str,
        query: &ListQuery,
        mut cursors: Vec<Cursor>,
    ) -> StoreResult<Scan> {
        let want = query.page_size + 1;
        let mut scan = Scan::default();
        let mut examined = 0;
        let mut last_examined = None;
        while scan.listed.len() < want {
            if examined >= MAX_EXAMINED {
                scan.stopped_at = last_examined;
                break;
            }
            // As many task reads as the page still needs, plus as many as were left out so
            // far (up to one more call's worth): no extra reads while the index is right.
            let take =
                (want - scan.listed.len() + scan.left_out.min(100)).min(MAX_EXAMINED - examined);
            let batch = self.next_entries(&mut cursors, take).await?;
            if batch.is_empty() {
                break;
            }
            examined += batch.len();
            let tasks = self.tasks_of(&batch).await?;
            for entry in batch {
                last_examined = Some(items::get_s(&entry, GSI1_SK)?.to_owned());
                let task = tasks.get(items::get_s(&entry, attr::TASK)?);
                scan.examine(participant, query, entry, task)?;
            }
        }
        Ok(scan)
    }

    /// Repairs entries a list found disagreeing with their tasks. Best effort: an entry not
    /// repaired is skipped again by the next list that meets it.
    async fn repair(&self, repairs: Vec<Single>) {
        for (write, result) in self.write_all(repairs).await {
            if let Err(error) = result {
                tracing::warn!(?write, %error, table = %self.table, "a stale index entry was not repaired");
            }
        }
    }

    async fn count_matches(&self, query: QueryFluentBuilder) -> StoreResult<usize> {
        let mut total = 0;
        let mut start = None;
        loop {
            let out = self
                .query_page(query.clone().set_exclusive_start_key(start))
                .await?;
            total += usize::try_from(out.count).unwrap_or(0);
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(total),
            }
        }
    }

    pub(crate) async fn list_tasks(
        &self,
        participant_id: &str,
        query: &ListQuery,
    ) -> StoreResult<TaskPage> {
        let start = query
            .page_token
            .as_deref()
            .map(PageToken::decode)
            .transpose()?;
        if let Some(context) = &query.context_id {
            return self
                .list_context(participant_id, query, context, start)
                .await;
        }
        let counts = self.counts(participant_id).await?;
        // The state partitions to merge: the filter's, or every state the counts name.
        let states: Vec<String> = match &query.state {
            Some(state) => vec![items::state_name(state)?],
            None => counts.states().map(str::to_owned).collect(),
        };
        let after = query.status_after.map(keys::time).transpose()?;
        let before = start.as_ref().map(PageToken::index_sk);
        // Key condition on the status time: from the filter's instant, before the token's
        // entry (`BETWEEN` includes the token's own entry, which the cursor skips).
        let (range, empty) = match (&after, &before) {
            (None, None) => (None, false),
            (Some(_), None) => (Some("#gsk >= :after"), false),
            (None, Some(_)) => (Some("#gsk < :before"), false),
            (Some(a), Some(b)) => (Some("#gsk BETWEEN :after AND :before"), a > b),
        };
        let partition_query = |state: &str, range: Option<&str>| {
            let mut q = self
                .query()
                .index_name(GSI1)
                .expression_attribute_names("#gpk", GSI1_PK)
                .expression_attribute_values(
                    ":gpk",
                    s(keys::listing_partition(participant_id, state)),
                );
            match range {
                Some(range) => {
                    q = q
                        .key_condition_expression(format!("#gpk = :gpk AND {range}"))
                        .expression_attribute_names("#gsk", GSI1_SK);
                    if let Some(after) = &after {
                        q = q.expression_attribute_values(":after", s(after.clone()));
                    }
                    if range.contains(":before")
                        && let Some(before) = &before
                    {
                        q = q.expression_attribute_values(":before", s(before.clone()));
                    }
                }
                None => q = q.key_condition_expression("#gpk = :gpk"),
            }
            q
        };
        // A partition's first call reads its share of the page by its count (two more for
        // slack); a cursor the page drains reads on, twice as many per call.
        let want = query.page_size + 1;
        let first_limit = |state: &str| {
            let total = counts.total();
            let share = if states.len() <= 1 || total == 0 {
                want
            } else {
                let part = u64::try_from(want).unwrap_or(u64::MAX) * counts.of(state);
                to_usize(part.div_ceil(total)).saturating_add(2).min(want)
            };
            i32::try_from(share.clamp(1, 1000)).unwrap_or(1000)
        };
        let cursors: Vec<Cursor> = if empty || query.page_size == 0 {
            Vec::new()
        } else {
            states
                .iter()
                .map(|state| Cursor {
                    query: partition_query(state, range).scan_index_forward(false),
                    start: None,
                    buffer: VecDeque::new(),
                    ended: false,
                    limit: first_limit(state),
                    before: before.clone().filter(|_| after.is_some()),
                })
                .collect()
        };
        // A time window is counted (no counts by time); otherwise the counts say.
        let counted = async {
            match &query.status_after {
                None => Ok(None),
                Some(_) => {
                    let counts = states.iter().map(|state| {
                        let range = Some("#gsk >= :after");
                        self.count_matches(partition_query(state, range).select(Select::Count))
                    });
                    let counts = futures::future::try_join_all(counts).await?;
                    Ok::<_, task_store::StoreError>(Some(counts.into_iter().sum::<usize>()))
                }
            }
        };
        let (scan, counted) = futures::join!(self.scan(participant_id, query, cursors), counted);
        let (mut scan, counted) = (scan?, counted?);
        self.repair(std::mem::take(&mut scan.repairs)).await;

        let more = scan.listed.len() > query.page_size;
        scan.listed.truncate(query.page_size);
        let next_page_token = match (more, scan.listed.last(), &scan.stopped_at) {
            (true, Some((entry, _)), _) => token_at(items::get_s(entry, GSI1_SK)?, entry)?,
            (false, _, Some(sort_key)) => token_at(sort_key, &HashMap::new())?,
            _ => String::new(),
        };
        let tasks: Vec<StoredTask> = scan.listed.into_iter().map(|(_, task)| task).collect();
        let total = match (counted, &query.state) {
            // Entries examined and left out were counted by their own (stale) values.
            (Some(counted), _) => counted.saturating_sub(scan.left_out),
            (None, Some(state)) => to_usize(counts.of(&items::state_name(state)?)),
            (None, None) => to_usize(counts.total()),
        };
        Ok(TaskPage {
            total_size: total.max(tasks.len()),
            tasks,
            next_page_token,
        })
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
