//! ListTasks: the participant index says where a participant's tasks are and in what order;
//! the task items say who is on each task and what it is now. Every entry read is checked
//! against its task before the task is listed, and the index is read on until the page is
//! full or the index ends. Entries that disagree with their task are repaired on the way
//! (best effort, conditionally: see `index.rs` for why that never loses an entry).

use std::collections::{HashMap, VecDeque};

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{ReturnConsumedCapacity, Select};
use chrono::{Duration, Utc};
use task_store::{ListQuery, StoreResult, StoredTask, TaskPage};

use crate::DynamoDbStore;
use crate::error::DynamoDbError;
use crate::index::{self, Single};
use crate::items::{self, Item, attr, key, s};
use crate::keys::{self, PageToken};
use crate::schema::{GSI1, GSI1_PK, GSI1_SK, PK, SK};
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

fn token_at(sort_key: &str, entry: &Item) -> StoreResult<String> {
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
                // Unchanged since read: a creation retried since would have rewritten it.
                let condition = Condition::new("#gsk = :gsk")
                    .name("#gsk", GSI1_SK)
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
    /// The task items of a batch of entries, by task id.
    async fn tasks_of(&self, entries: &[Item]) -> StoreResult<HashMap<String, StoredTask>> {
        let mut ids: Vec<&str> = entries
            .iter()
            .map(|e| items::get_s(e, attr::TASK))
            .collect::<Result<_, _>>()?;
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

    /// Reads the index from `start` and checks its entries until one more task than the
    /// page takes is found, the index ends, or [`MAX_EXAMINED`] entries were examined.
    async fn scan(
        &self,
        participant: &str,
        query: &ListQuery,
        index_query: QueryFluentBuilder,
        start: Option<Item>,
        first_limit: i32,
    ) -> StoreResult<Scan> {
        let want = query.page_size + 1;
        let mut scan = Scan::default();
        let mut pending: VecDeque<Item> = VecDeque::new();
        let (mut start, mut ended, mut limit) = (start, false, first_limit);
        let mut examined = 0;
        let mut last_examined = None;
        while scan.listed.len() < want {
            if pending.is_empty() && ended {
                break;
            }
            if examined >= MAX_EXAMINED {
                scan.stopped_at = last_examined;
                break;
            }
            if pending.is_empty() {
                let out = self
                    .query_page(
                        index_query
                            .clone()
                            .limit(limit)
                            .set_exclusive_start_key(start.take()),
                    )
                    .await?;
                pending.extend(out.items.unwrap_or_default());
                match out.last_evaluated_key {
                    Some(k) if !k.is_empty() => start = Some(k),
                    _ => ended = true,
                }
                // Entries left out call for more reading: read more per call.
                limit = limit.saturating_mul(2).min(1000);
                continue;
            }
            // As many task reads as the page still needs, plus as many as were left out so
            // far (up to one more call's worth): no extra reads while the index is right.
            let take = pending
                .len()
                .min(want - scan.listed.len() + scan.left_out.min(100))
                .min(MAX_EXAMINED - examined);
            let batch: Vec<Item> = pending.drain(..take).collect();
            examined += take;
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
        let partition = keys::participant_partition(participant_id);
        let mut key_condition = "#gpk = :gpk".to_owned();
        let mut names = HashMap::from([("#gpk".to_owned(), GSI1_PK.to_owned())]);
        let mut values = HashMap::from([(":gpk".to_owned(), s(partition.clone()))]);
        if let Some(after) = query.status_after {
            key_condition.push_str(" AND #gsk >= :after");
            names.insert("#gsk".into(), GSI1_SK.into());
            values.insert(":after".into(), s(keys::time(after)?));
        }
        let mut filters = Vec::new();
        if let Some(context) = &query.context_id {
            filters.push("#ctx = :ctx");
            names.insert("#ctx".into(), attr::CONTEXT.into());
            values.insert(":ctx".into(), s(context.clone()));
        }
        if let Some(state) = &query.state {
            filters.push("#state = :state");
            names.insert("#state".into(), attr::STATE.into());
            values.insert(":state".into(), s(items::state_name(state)?));
        }
        let base = self
            .client
            .query()
            .table_name(&*self.table)
            .index_name(GSI1)
            .key_condition_expression(key_condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .set_filter_expression((!filters.is_empty()).then(|| filters.join(" AND ")))
            .return_consumed_capacity(ReturnConsumedCapacity::Total);
        // Without filters one extra entry tells whether a next page exists; with filters,
        // read more per call (a call costs by bytes read, rounded up to 4 KB).
        let per_call = if filters.is_empty() {
            query.page_size + 1
        } else {
            (query.page_size + 1).saturating_mul(4)
        };
        let per_call = i32::try_from(per_call.clamp(1, 1000)).unwrap_or(1000);
        let index_query = base.clone().scan_index_forward(false);
        let count_query = base.select(Select::Count);
        let start_key = start.map(|token| {
            HashMap::from([
                (PK.to_owned(), s(keys::task_pk(&token.task))),
                (SK.to_owned(), s(keys::participant_sk(participant_id))),
                (GSI1_PK.to_owned(), s(partition.clone())),
                (GSI1_SK.to_owned(), s(token.index_sk())),
            ])
        });
        let (scan, total) = futures::join!(
            async {
                if query.page_size == 0 {
                    Ok(Scan::default())
                } else {
                    self.scan(participant_id, query, index_query, start_key, per_call)
                        .await
                }
            },
            self.count_matches(count_query)
        );
        let (mut scan, total) = (scan?, total?);
        self.repair(std::mem::take(&mut scan.repairs)).await;

        let more = scan.listed.len() > query.page_size;
        scan.listed.truncate(query.page_size);
        let next_page_token = match (more, scan.listed.last(), &scan.stopped_at) {
            (true, Some((entry, _)), _) => token_at(items::get_s(entry, GSI1_SK)?, entry)?,
            (false, _, Some(sort_key)) => token_at(sort_key, &HashMap::new())?,
            _ => String::new(),
        };
        let tasks: Vec<StoredTask> = scan.listed.into_iter().map(|(_, task)| task).collect();
        Ok(TaskPage {
            total_size: total.saturating_sub(scan.left_out).max(tasks.len()),
            tasks,
            next_page_token,
        })
    }
}
