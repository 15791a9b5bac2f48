//! The transaction a commit is building: its items with their guards, the ListTasks counts
//! and participant-index writes placed in it or around it ([`Plan::fit`]), and the writes of one task's documents
//! ([`Builder`]): task item, message ids, events, history, transcript, artifacts, audit.

use std::collections::HashSet;

use aws_sdk_dynamodb::types::TransactWriteItem;
use task_store::{
    AuditEntry, Committed, Conflict, StoreError, StoreResult, TaskCounters, TaskRecord, limits,
};

use crate::counts::{CountDeltas, CountUpdate};
use crate::error::Guard;
use crate::index::{self, IndexWrite};
use crate::items::{self, Item, attr, key, s};
use crate::keys;
use crate::schema::{MAX_ITEM_BYTES, MAX_TRANSACTION_ITEMS};
use crate::txn::{Condition, put};

/// A commit ready to send.
#[derive(Debug, Default)]
pub struct Plan {
    /// The transaction's items, each with the guard of its condition.
    pub items: Vec<TransactWriteItem>,
    pub guards: Vec<Guard>,
    /// Participant-index writes, until [`Plan::fit`] places them.
    pub index: Vec<IndexWrite>,
    /// Index puts that did not fit: written before the transaction.
    pub before: Vec<IndexWrite>,
    /// Index deletes that did not fit: written after the transaction.
    pub after: Vec<IndexWrite>,
    /// ListTasks' count changes, until [`Plan::fit`] places them (before any index write).
    pub counts: CountDeltas,
    /// Count updates that did not fit: written after the transaction.
    pub counts_after: Vec<CountUpdate>,
    pub committed: Vec<Committed>,
}

impl Plan {
    /// Moves as many index writes into the transaction as fit (deletes first, so that little
    /// is left for after it); the puts left over go before it, the deletes after it.
    /// `TooLarge` if even the rest does not fit.
    pub fn fit(&mut self, table: &str) -> StoreResult<()> {
        if self.items.len() > MAX_TRANSACTION_ITEMS {
            return Err(StoreError::TooLarge(format!(
                "one write would take {} DynamoDB items (documents are stored in chunks of at most {} KiB), \
                 over the {MAX_TRANSACTION_ITEMS} a transaction may take",
                self.items.len(),
                limits::CHUNK_BYTES / 1024
            )));
        }
        // Counts first: in the transaction they never disagree with the tasks; only what
        // does not fit beside the documents goes after it.
        let mut counts = std::mem::take(&mut self.counts).updates();
        let outside =
            counts.split_off((MAX_TRANSACTION_ITEMS - self.items.len()).min(counts.len()));
        // No condition: these never fail one; the guard names a task of the commit anyway.
        let task_id = self
            .committed
            .first()
            .map(|c| c.task_id.clone())
            .unwrap_or_default();
        for update in counts {
            let task_id = task_id.clone();
            self.items.push(update.transact_item(table)?);
            self.guards.push(Guard::Log {
                task_id,
                creating: false,
            });
        }
        self.counts_after = outside;
        let room = MAX_TRANSACTION_ITEMS - self.items.len();
        let mut inside = std::mem::take(&mut self.index);
        if inside.len() > room {
            inside.sort_by_key(IndexWrite::is_put);
        }
        let outside = inside.split_off(room.min(inside.len()));
        for write in inside {
            self.items.push(write.transact_item(table)?);
            self.guards.push(Guard::Log {
                task_id: write.task_id().unwrap_or_default(),
                creating: false,
            });
        }
        for write in outside {
            if write.is_put() {
                self.before.push(write);
            } else {
                self.after.push(write);
            }
        }
        Ok(())
    }
}

/// Adds the writes of one task's change to a [`Plan`].
pub struct Builder<'a> {
    pub table: &'a str,
    pub plan: &'a mut Plan,
    pub task_id: &'a str,
    /// The task's partition key.
    pub pk: String,
}

impl<'a> Builder<'a> {
    pub fn new(table: &'a str, plan: &'a mut Plan, task_id: &'a str) -> Self {
        Builder {
            table,
            plan,
            task_id,
            pk: keys::task_pk(task_id),
        }
    }

    pub fn push(&mut self, item: TransactWriteItem, guard: Guard) {
        self.plan.items.push(item);
        self.plan.guards.push(guard);
    }

    /// Pushes an item of the task's logs (conditioned only as a safeguard): if it fails,
    /// the task moved on, or (`creating`) already existed.
    pub fn push_log(&mut self, item: TransactWriteItem, creating: bool) {
        let task_id = self.task_id.to_owned();
        self.push(item, Guard::Log { task_id, creating });
    }

    pub fn task_item(
        &mut self,
        item: Item,
        condition: &Condition,
        guard: Guard,
    ) -> StoreResult<()> {
        let size = items::approximate_size(&item);
        if size > MAX_ITEM_BYTES {
            return Err(StoreError::TooLarge(format!(
                "task {} would be a {} KiB item (document, roles and artifact ids), over DynamoDB's 400 KiB",
                self.task_id,
                size / 1024
            )));
        }
        let put = put(self.table, item, Some(condition))?;
        self.push(put, guard);
        Ok(())
    }

    pub fn message_ids(&mut self, ids: &[String]) -> StoreResult<()> {
        let mut seen = HashSet::new();
        for id in ids {
            if !seen.insert(id.as_str()) {
                // The second of two equal ids in one write is a repeat of the first.
                return Err(Conflict::DuplicateMessage {
                    task_id: self.task_id.to_owned(),
                    message_id: id.clone(),
                }
                .into());
            }
            let item = put(
                self.table,
                key(&self.pk, keys::message_id_sk(id)),
                Some(&Condition::not_exists()),
            )?;
            self.push(
                item,
                Guard::MessageId {
                    task_id: self.task_id.to_owned(),
                    message_id: id.clone(),
                },
            );
        }
        Ok(())
    }

    /// Events get the next sequence numbers; returns them.
    pub fn events(
        &mut self,
        first_seq: u64,
        events: &[String],
        creating: bool,
    ) -> StoreResult<Vec<u64>> {
        let mut seqs = Vec::with_capacity(events.len());
        for (i, json) in events.iter().enumerate() {
            let seq = first_seq + i as u64;
            for item in items::chunk_items(&self.pk, |c| keys::event_sk(seq, c), json, None) {
                let item = put(self.table, item, Some(&Condition::not_exists()))?;
                self.push_log(item, creating);
            }
            seqs.push(seq);
        }
        Ok(seqs)
    }

    pub fn history(&mut self, first: u64, history: &[String], creating: bool) -> StoreResult<()> {
        self.numbered(first, history, creating, keys::history_sk)
    }

    pub fn transcript(&mut self, first: u64, entries: &[String]) -> StoreResult<()> {
        self.numbered(first, entries, false, keys::transcript_sk)
    }

    /// Documents numbered from `first` (history messages, transcript entries), chunked.
    pub fn numbered(
        &mut self,
        first: u64,
        docs: &[String],
        creating: bool,
        sk: fn(u64, usize) -> String,
    ) -> StoreResult<()> {
        for (i, json) in docs.iter().enumerate() {
            let number = first + i as u64;
            for item in items::chunk_items(&self.pk, |c| sk(number, c), json, None) {
                let item = put(self.table, item, Some(&Condition::not_exists()))?;
                self.push_log(item, creating);
            }
        }
        Ok(())
    }

    /// Artifacts are keyed by the position their id first took in the task's artifact
    /// list; a replaced one is rewritten in place, its chunks marked with the new version.
    pub fn artifacts(
        &mut self,
        counters: &mut TaskCounters,
        artifacts: Vec<(String, String)>,
        version: u64,
    ) -> StoreResult<()> {
        // The last write of an id in one update wins (one transaction cannot write an item twice).
        let mut latest: Vec<(String, String)> = Vec::new();
        for (id, json) in artifacts {
            match latest.iter_mut().find(|(seen, _)| *seen == id) {
                Some(slot) => slot.1 = json,
                None => latest.push((id, json)),
            }
        }
        for (id, json) in latest {
            let position = match counters.artifact_ids.iter().position(|a| *a == id) {
                Some(p) => p,
                None => {
                    counters.artifact_ids.push(id);
                    counters.artifact_ids.len() - 1
                }
            } as u64;
            for item in items::chunk_items(
                &self.pk,
                |c| keys::artifact_sk(position, c),
                &json,
                Some(version),
            ) {
                let item = put(self.table, item, None)?;
                self.push_log(item, false);
            }
        }
        Ok(())
    }

    pub fn audit(&mut self, audit: Vec<(AuditEntry, String)>, creating: bool) -> StoreResult<()> {
        // Keyed by (time, message id): a later entry with both equal replaces the earlier.
        let mut latest: Vec<(String, String)> = Vec::new();
        for (entry, json) in audit {
            let sk = keys::audit_sk(&keys::time(entry.at)?, &entry.message_id);
            match latest.iter_mut().find(|(seen, _)| *seen == sk) {
                Some(slot) => slot.1 = json,
                None => latest.push((sk, json)),
            }
        }
        for (sk, json) in latest {
            if json.len() > limits::CHUNK_BYTES {
                return Err(StoreError::TooLarge(format!(
                    "an audit entry of task {} is {} KiB, over the {} KiB one may take",
                    self.task_id,
                    json.len() / 1024,
                    limits::CHUNK_BYTES / 1024
                )));
            }
            let mut item = key(&self.pk, sk);
            item.insert(attr::DOC.into(), s(json));
            let item = put(self.table, item, None)?;
            self.push_log(item, creating);
        }
        Ok(())
    }

    pub fn index_put(
        &mut self,
        record: &TaskRecord,
        participant: &str,
        version: u64,
    ) -> StoreResult<()> {
        let item = index::entry(record, participant, version)?;
        self.plan.index.push(IndexWrite::Put { item, version });
        Ok(())
    }

    pub fn index_delete(&mut self, participant: &str, version: u64) {
        let key = key(&self.pk, keys::participant_sk(participant));
        self.plan.index.push(IndexWrite::Delete { key, version });
    }
}
