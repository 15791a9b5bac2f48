//! `RetentionStore` on DynamoDB: the purge *marks* instead of deleting. Every item of an
//! eligible task gets the table's TTL attribute (`ttl`, epoch seconds; the one TTL attribute
//! a table may have, which lease items already carry) set to the instant its retention ends,
//! and DynamoDB deletes the items itself, without charge, usually within 48 hours of that.
//! Its index entries get `expires` instead, and the pass deletes them with their ListTasks
//! counts once expired (`retention_index.rs`).
//!
//! Nothing is added to the request path: one pass reads the table (a `Scan` that returns the
//! task items, the items without `ttl` and the index entries), marks each terminal task not yet marked as soon
//! as it is terminal (its expiry may be in the future) unless a parent on this service still
//! exists unmarked, and gives a child the later of its own expiry and its parent's; items
//! written to a marked task after it was marked are marked by the next pass. An item is
//! marked by a conditional `UpdateItem` that never recreates a deleted item; the task item
//! is marked last (conditional on the version read), so a pass cut short is finished by the
//! next one. What a pass costs: `docs/operations.md`, "Retention".

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity};
use chrono::{DateTime, Duration, Utc};
use task_store::retention::Candidate;
use task_store::{Purged, RetentionStore, StoreResult};

use crate::DynamoDbStore;
use crate::calls::Kind;
use crate::error::DynamoDbError;
use crate::items::{Item, attr, get_s, key, n, parse_task, s};
use crate::keys;
use crate::retention_index::{Entry, members};
use crate::schema::{EXPIRES, PK, SK, TTL};

/// What one scan found.
#[derive(Default)]
struct Found {
    /// Every task item: task id → its expiry if marked.
    tasks: HashMap<String, Option<i64>>,
    /// Terminal tasks not yet marked, with the version read.
    unmarked: Vec<Candidate>,
    /// Sort keys of the items without `ttl` (index entries: without `expires`), per task id
    /// (task items left out).
    bare: HashMap<String, Vec<String>>,
    /// Every index entry.
    entries: Vec<Entry>,
    /// Every task item's participants.
    members: HashMap<String, HashSet<String>>,
}

#[async_trait]
impl RetentionStore for DynamoDbStore {
    async fn purge(&self, now: DateTime<Utc>, keep: Duration) -> StoreResult<Purged> {
        let found = self.scan_for_retention().await?;
        let mut expiries: HashMap<String, i64> = found
            .tasks
            .iter()
            .filter_map(|(id, ttl)| ttl.map(|t| (id.clone(), t)))
            .collect();
        let mut expiring = Vec::new();
        // Parents first: a child waits for a round in which each local parent is gone or
        // marked.
        let mut done: HashSet<String> = HashSet::new();
        loop {
            let before = done.len();
            for c in &found.unmarked {
                if done.contains(&c.task_id) {
                    continue;
                }
                let mut expiry = c.expires_at(keep).timestamp();
                let mut free = true;
                for parent in &c.local_parents {
                    match (found.tasks.contains_key(parent), expiries.get(parent)) {
                        (_, Some(parent_expiry)) => expiry = expiry.max(*parent_expiry),
                        (true, None) => free = false,
                        (false, None) => {}
                    }
                }
                if !free {
                    continue;
                }
                let bare = found.bare.get(&c.task_id).map(Vec::as_slice).unwrap_or(&[]);
                if self.mark_task(c, bare, expiry).await? {
                    expiries.insert(c.task_id.clone(), expiry);
                    let when =
                        DateTime::from_timestamp(expiry, 0).unwrap_or(DateTime::<Utc>::MAX_UTC);
                    expiring.push((c.task_id.clone(), when));
                }
                done.insert(c.task_id.clone());
            }
            if done.len() == before {
                break;
            }
        }
        // Items written to a marked task after it was marked.
        for (task_id, sks) in &found.bare {
            if let Some(Some(expiry)) = found.tasks.get(task_id) {
                for sk in sks {
                    self.mark_item(task_id, sk, *expiry, None).await?;
                }
            }
        }
        // Index entries leave with their counts once expired, whether TTL has taken the
        // task's other items yet or not. An entry marked above expires with its task.
        let entries: Vec<Entry> = found
            .entries
            .into_iter()
            .map(|entry| Entry {
                expiry: entry
                    .expiry
                    .or_else(|| expiries.get(&entry.task_id).copied()),
                ..entry
            })
            .collect();
        let removed = self
            .remove_expired_entries(&entries, &found.members, now)
            .await?;
        tracing::debug!(table = %self.table, marked = expiring.len(), entries_removed = removed,
            "retention pass done");
        Ok(Purged {
            removed: Vec::new(),
            expiring,
        })
    }
}

impl DynamoDbStore {
    /// One pass over the table: the task items, every item without `ttl`, every index entry.
    async fn scan_for_retention(&self) -> StoreResult<Found> {
        let mut found = Found::default();
        let mut start = None;
        loop {
            let out = self
                .client
                .scan()
                .table_name(&*self.table)
                .filter_expression(
                    "#sk = :task OR attribute_not_exists(#ttl) OR begins_with(#sk, :entry)",
                )
                .expression_attribute_names("#sk", SK)
                .expression_attribute_names("#ttl", TTL)
                .expression_attribute_values(":task", s(keys::TASK_SK))
                .expression_attribute_values(":entry", s(keys::PARTICIPANT_PREFIX))
                .set_exclusive_start_key(start)
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await
                .map_err(|e| DynamoDbError::call("Scan", e))?;
            self.count(Kind::Read, out.consumed_capacity());
            for item in out.items.unwrap_or_default() {
                found.add(&item)?;
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(found),
            }
        }
    }

    /// Marks the items of `bare` and then the task item, if the task is still at the version
    /// read; whether the task item was marked.
    async fn mark_task(&self, c: &Candidate, bare: &[String], expiry: i64) -> StoreResult<bool> {
        for sk in bare {
            self.mark_item(&c.task_id, sk, expiry, None).await?;
        }
        self.mark_item(&c.task_id, keys::TASK_SK, expiry, Some(c.version))
            .await
    }

    /// Sets `ttl` on one item if it exists (and, with `version`, is at that version); on an
    /// index entry `expires`, which TTL leaves alone (`retention_index.rs`).
    async fn mark_item(
        &self,
        task_id: &str,
        sk: &str,
        expiry: i64,
        version: Option<u64>,
    ) -> StoreResult<bool> {
        let attribute = if sk.starts_with(keys::PARTICIPANT_PREFIX) {
            EXPIRES
        } else {
            TTL
        };
        let mut update = self
            .client
            .update_item()
            .table_name(&*self.table)
            .set_key(Some(key(keys::task_pk(task_id), sk)))
            .update_expression("SET #ttl = :ttl")
            .expression_attribute_names("#ttl", attribute)
            .expression_attribute_names("#pk", PK)
            .expression_attribute_values(":ttl", n(expiry))
            .return_consumed_capacity(ReturnConsumedCapacity::Total);
        update = match version {
            Some(v) => update
                .condition_expression("attribute_exists(#pk) AND #version = :version")
                .expression_attribute_names("#version", attr::VERSION)
                .expression_attribute_values(":version", n(v)),
            None => update.condition_expression("attribute_exists(#pk)"),
        };
        match update.send().await {
            Ok(out) => {
                self.count(Kind::Write, out.consumed_capacity());
                Ok(true)
            }
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(err) => Err(DynamoDbError::call("UpdateItem", err).into()),
        }
    }
}

impl Found {
    fn add(&mut self, item: &Item) -> StoreResult<()> {
        let pk = get_s(item, PK)?;
        let sk = get_s(item, SK)?;
        let Some(task_id) = keys::task_of_pk(pk) else {
            return Ok(()); // not a task's partition
        };
        let ttl = match item.get(TTL) {
            Some(AttributeValue::N(text)) => text.parse::<i64>().ok(),
            _ => None,
        };
        if let Some(entry) = Entry::of(task_id, sk, item) {
            if entry.expiry.is_none() {
                self.bare
                    .entry(task_id.to_owned())
                    .or_default()
                    .push(sk.to_owned());
            }
            self.entries.push(entry);
            return Ok(());
        }
        if sk != keys::TASK_SK {
            if ttl.is_none() {
                self.bare
                    .entry(task_id.to_owned())
                    .or_default()
                    .push(sk.to_owned());
            }
            return Ok(());
        }
        self.tasks.insert(task_id.to_owned(), ttl);
        self.members.insert(task_id.to_owned(), members(item));
        if ttl.is_none()
            && let Some(candidate) = Candidate::of(&parse_task(item)?)
        {
            self.unmarked.push(candidate);
        }
        Ok(())
    }
}
