//! ListTasks' counts: per participant, how many of its tasks are in each state, kept in
//! [`SHARDS`] items (partition `COUNT#<participant>`, sort key `SHARD#<nn>`, one number
//! attribute per state) that a commit changes by `ADD` in its own transaction. A task counts
//! in the shard of its id, so a participant's concurrent commits of different tasks rarely
//! meet on one item; a count is the sum over one strongly consistent query of the shards.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::{ReturnConsumedCapacity, TransactWriteItem, Update};
use task_store::StoreResult;
use task_store::listing::ListingChange;

use crate::DynamoDbStore;
use crate::calls::Kind;
use crate::error::DynamoDbError;
use crate::items::{Item, key, n, s};
use crate::keys;
use crate::schema::PK;

/// Items per participant over which its counts are spread: contention on one item falls
/// with it, the read of a count (all shards, about 100 bytes each) stays one 4 KB unit.
pub const SHARDS: u32 = 16;

/// The shard a task counts in: FNV-1a of its id (stable across builds and processes).
pub fn shard(task_id: &str) -> u32 {
    let hash = task_id.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    hash % SHARDS
}

/// What one commit adds to the counts, merged per item: a transaction may write an item
/// only once, and two tasks of one commit (a parent and its child) may share a shard.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CountDeltas(BTreeMap<(String, u32), BTreeMap<String, i64>>);

impl CountDeltas {
    /// Adds the count changes of one task's listing change, leaving out `unlisted`.
    pub fn add(&mut self, task_id: &str, change: &ListingChange, unlisted: Option<&str>) {
        let shard = shard(task_id);
        for ((participant, state), delta) in change.count_deltas() {
            // Per-state counts only: a participant's total is their sum.
            let Some(state) = state else { continue };
            if unlisted == Some(participant.as_str()) {
                continue;
            }
            let item = self.0.entry((participant, shard)).or_default();
            *item.entry(state).or_default() += delta;
        }
        for deltas in self.0.values_mut() {
            deltas.retain(|_, d| *d != 0);
        }
        self.0.retain(|_, deltas| !deltas.is_empty());
    }

    /// One `ADD` update per counter item the commit changes.
    pub fn updates(&self) -> Vec<CountUpdate> {
        self.0
            .iter()
            .map(|((participant, shard), deltas)| {
                let mut update = CountUpdate {
                    key: key(keys::count_pk(participant), keys::count_sk(*shard)),
                    expression: String::new(),
                    names: HashMap::new(),
                    values: HashMap::new(),
                };
                let mut clauses = Vec::new();
                for (i, (state, delta)) in deltas.iter().enumerate() {
                    clauses.push(format!("#c{i} :d{i}"));
                    update.names.insert(format!("#c{i}"), state.clone());
                    update.values.insert(format!(":d{i}"), n(*delta));
                }
                update.expression = format!("ADD {}", clauses.join(", "));
                update
            })
            .collect()
    }
}

/// An unconditional `ADD` on one counter item.
#[derive(Debug, Clone, PartialEq)]
pub struct CountUpdate {
    pub key: Item,
    pub expression: String,
    pub names: HashMap<String, String>,
    pub values: HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
}

impl CountUpdate {
    /// `delta` on `participant`'s count of `state` in the shard of `task_id`: what the
    /// retention pass adds when it removes an index entry.
    pub fn one(participant: &str, task_id: &str, state: &str, delta: i64) -> Self {
        CountUpdate {
            key: key(keys::count_pk(participant), keys::count_sk(shard(task_id))),
            expression: "ADD #c0 :d0".to_owned(),
            names: HashMap::from([("#c0".to_owned(), state.to_owned())]),
            values: HashMap::from([(":d0".to_owned(), n(delta))]),
        }
    }

    pub fn transact_item(&self, table: &str) -> Result<TransactWriteItem, DynamoDbError> {
        let update = Update::builder()
            .table_name(table)
            .set_key(Some(self.key.clone()))
            .update_expression(&self.expression)
            .set_expression_attribute_names(Some(self.names.clone()))
            .set_expression_attribute_values(Some(self.values.clone()))
            .build()?;
        Ok(TransactWriteItem::builder().update(update).build())
    }
}

/// A participant's counts as read: state (`TASK_STATE_…`) → tasks.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Counts(pub BTreeMap<String, u64>);

impl Counts {
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    pub fn of(&self, state: &str) -> u64 {
        self.0.get(state).copied().unwrap_or(0)
    }

    /// The states with at least one task, in no particular order.
    pub fn states(&self) -> impl Iterator<Item = &str> {
        self.0
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(state, _)| state.as_str())
    }
}

impl DynamoDbStore {
    /// A participant's counts: one strongly consistent query of its shards.
    pub(crate) async fn counts(&self, participant: &str) -> StoreResult<Counts> {
        let query = self
            .query()
            .key_condition_expression("#pk = :pk")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_values(":pk", s(keys::count_pk(participant)))
            .consistent_read(true);
        let mut counts = Counts::default();
        for item in self.query_all(query).await? {
            for (name, value) in &item {
                if !name.starts_with("TASK_STATE_") {
                    continue;
                }
                let count: i64 = value.as_n().ok().and_then(|v| v.parse().ok()).unwrap_or(0);
                let slot = counts.0.entry(name.clone()).or_default();
                *slot = slot.saturating_add_signed(count);
            }
        }
        Ok(counts)
    }

    /// Count updates that did not fit in their commit's transaction, after it: one that
    /// still fails leaves that participant's count off by its delta (logged).
    pub(crate) async fn write_counts_after(&self, updates: Vec<CountUpdate>) {
        for update in updates {
            let result = self
                .client
                .update_item()
                .table_name(&*self.table)
                .set_key(Some(update.key.clone()))
                .update_expression(&update.expression)
                .set_expression_attribute_names(Some(update.names.clone()))
                .set_expression_attribute_values(Some(update.values.clone()))
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await;
            match result {
                Ok(out) => self.count(Kind::Write, out.consumed_capacity()),
                Err(error) => {
                    let error = DynamoDbError::call("UpdateItem", error);
                    tracing::warn!(key = ?update.key, %error, table = %self.table,
                        "a ListTasks count outside its commit's transaction was not updated; the count is off until rebuilt");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use a2a::TaskState;
    use chrono::DateTime;
    use task_core::extension::{Participant, ParticipantKind, Role, TaskExtension};
    use task_store::TaskRecord;

    use super::*;

    fn rec(id: &str, state: TaskState, who: &[&str]) -> TaskRecord {
        let mut extension = TaskExtension::new("t", "g");
        extension.participants = who
            .iter()
            .map(|p| Participant::new(*p, ParticipantKind::Human, Role::Watcher))
            .collect();
        TaskRecord {
            id: id.into(),
            context_id: "c".into(),
            status: a2a::TaskStatus {
                state,
                message: None,
                timestamp: DateTime::from_timestamp(1, 0),
            },
            sub_state: None,
            extension,
            agent: Default::default(),
        }
    }

    #[test]
    fn one_update_per_item_with_the_agent_left_out() {
        let mut deltas = CountDeltas::default();
        let before = rec("t", TaskState::Working, &["a", "agent"]);
        let after = rec("t", TaskState::Completed, &["a", "agent"]);
        deltas.add(
            "t",
            &ListingChange::between(Some(&before), &after),
            Some("agent"),
        );
        let updates = deltas.updates();
        assert_eq!(updates.len(), 1);
        assert_eq!(updates[0].key["PK"], s("COUNT#a"));
        assert_eq!(updates[0].expression, "ADD #c0 :d0, #c1 :d1");
        assert_eq!(updates[0].names["#c0"], "TASK_STATE_COMPLETED");
        assert_eq!(updates[0].values[":d1"], n(-1));

        // A second task of the same commit in the same shard merges into the same item.
        let twin = (0..1000)
            .map(|i| format!("x{i}"))
            .find(|id| shard(id) == shard("t"))
            .unwrap();
        deltas.add(
            &twin,
            &ListingChange::between(None, &rec(&twin, TaskState::Working, &["a"])),
            Some("agent"),
        );
        let updates = deltas.updates();
        assert_eq!(updates.len(), 1, "{updates:?}");
        assert_eq!(updates[0].expression, "ADD #c0 :d0", "WORKING -1 +1 cancel");
    }

    #[test]
    fn a_single_update_lands_where_a_commit_counted_the_task() {
        let mut deltas = CountDeltas::default();
        let created = rec("t-42", TaskState::Completed, &["a"]);
        deltas.add("t-42", &ListingChange::between(None, &created), None);
        let minus = CountUpdate::one("a", "t-42", "TASK_STATE_COMPLETED", -1);
        assert_eq!(minus.key, deltas.updates()[0].key);
        assert_eq!(minus.names["#c0"], "TASK_STATE_COMPLETED");
        assert_eq!(minus.values[":d0"], n(-1));
    }

    #[test]
    fn shards_spread_and_stay_put() {
        assert_eq!(shard("task-1"), shard("task-1"));
        let used: std::collections::BTreeSet<u32> =
            (0..200).map(|i| shard(&format!("task-{i}"))).collect();
        assert_eq!(used.len(), SHARDS as usize);
    }
}
