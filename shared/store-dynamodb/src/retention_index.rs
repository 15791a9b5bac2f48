//! The retention pass and the participant index: a task's index entries (`PART#…`) get
//! `expires` instead of the TTL attribute, and the pass itself deletes each expired entry in
//! one transaction with its ListTasks count, so that no count outlives its entry (TTL would
//! delete the entry and leave the count, and `totalSize` with it, too high for good).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use task_store::StoreResult;

use crate::DynamoDbStore;
use crate::counts::CountUpdate;
use crate::error::Guard;
use crate::index::Single;
use crate::items::{Item, attr, key, n, s};
use crate::keys;
use crate::schema::{EXPIRES, GSI1_PK, PK, TTL};
use crate::txn::{self, Condition};

/// An index entry as the pass's scan read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub task_id: String,
    pub participant: String,
    /// `GSI1PK`: the participant's partition of the state the entry counts under.
    pub partition: Option<String>,
    /// `expires`; on an entry marked before entries had it, its `ttl`.
    pub expiry: Option<i64>,
}

fn number(item: &Item, name: &str) -> Option<i64> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
}

impl Entry {
    /// The entry an item is, if it is one (its sort key is `PART#<participant>`).
    pub fn of(task_id: &str, sk: &str, item: &Item) -> Option<Entry> {
        let participant = sk.strip_prefix(keys::PARTICIPANT_PREFIX)?;
        Some(Entry {
            task_id: task_id.to_owned(),
            participant: participant.to_owned(),
            partition: item
                .get(GSI1_PK)
                .and_then(|v| v.as_s().ok())
                .map(String::from),
            expiry: number(item, EXPIRES).or_else(|| number(item, TTL)),
        })
    }

    /// The state the entry counts under: the text after the last `#` of its partition (state
    /// names hold none, whatever the participant id holds).
    pub fn state(&self) -> Option<&str> {
        let (_, state) = self.partition.as_deref()?.rsplit_once('#')?;
        state.starts_with("TASK_STATE_").then_some(state)
    }

    fn key(&self) -> Item {
        key(
            keys::task_pk(&self.task_id),
            keys::participant_sk(&self.participant),
        )
    }
}

/// The participants of a task item (the keys of its `roles`).
pub fn members(item: &Item) -> HashSet<String> {
    item.get(attr::ROLES)
        .and_then(|v| v.as_m().ok())
        .map(|roles| roles.keys().cloned().collect())
        .unwrap_or_default()
}

impl DynamoDbStore {
    /// Removes every entry whose expiry is at or before `now`, each with its count (`members`:
    /// the participants of each task whose item the scan read). How many were removed.
    pub(crate) async fn remove_expired_entries(
        &self,
        entries: &[Entry],
        members: &HashMap<String, HashSet<String>>,
        now: DateTime<Utc>,
    ) -> StoreResult<usize> {
        let now = now.timestamp();
        let mut removed = 0;
        for entry in entries {
            if entry.expiry.is_none_or(|expiry| expiry > now) {
                continue;
            }
            // The service's agent has no counts; an entry of a participant no longer on the
            // task is a leftover hint the commit that took them off already uncounted.
            let counted = self.unlisted.as_deref() != Some(entry.participant.as_str())
                && members
                    .get(&entry.task_id)
                    .is_none_or(|m| m.contains(&entry.participant));
            if self.remove_entry(entry, counted, now).await? {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Deletes one entry if it is still the one read and still expired at `now`, with (when
    /// `counted`) `-1` on its count of its state in the same transaction; whether it did.
    async fn remove_entry(&self, entry: &Entry, counted: bool, now: i64) -> StoreResult<bool> {
        let expired = Condition::new("(#exp <= :now OR #ttl <= :now)")
            .name("#exp", EXPIRES)
            .name("#ttl", TTL)
            .value(":now", n(now));
        let (Some(partition), Some(state), true) = (&entry.partition, entry.state(), counted)
        else {
            let condition = Condition {
                expression: format!("attribute_exists(#pk) AND {}", expired.expression),
                ..expired
            }
            .name("#pk", PK);
            let delete = Single::Delete {
                key: entry.key(),
                condition,
            };
            return self.write_single(&delete).await;
        };
        // The state decremented is the one deleted: a rewritten entry fails the condition.
        let condition = Condition {
            expression: format!("#gsi1pk = :partition AND {}", expired.expression),
            ..expired
        }
        .name("#gsi1pk", GSI1_PK)
        .value(":partition", s(partition.clone()));
        let count = CountUpdate::one(&entry.participant, &entry.task_id, state, -1);
        let items = vec![
            txn::delete(&self.table, entry.key(), Some(&condition))?,
            count.transact_item(&self.table)?,
        ];
        let guard = Guard::Log {
            task_id: entry.task_id.clone(),
            creating: false,
        };
        // A failed condition (deleted or rewritten meanwhile) leaves both as they are.
        Ok(self
            .transact(items, &[guard.clone(), guard], 3)
            .await?
            .is_ok())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn an_entry_reads_its_participant_state_and_expiry() {
        let mut item = key("TASK#t", "PART#a#b");
        item.insert(GSI1_PK.into(), s("PART#a#b#TASK_STATE_COMPLETED"));
        item.insert(EXPIRES.into(), n(7));
        let entry = Entry::of("t", "PART#a#b", &item).unwrap();
        assert_eq!(entry.participant, "a#b");
        assert_eq!(entry.state(), Some("TASK_STATE_COMPLETED"));
        assert_eq!(entry.expiry, Some(7));
        assert_eq!(entry.key(), key("TASK#t", "PART#a#b"));

        // Marked before entries had `expires`: its `ttl` is its expiry.
        item.remove(EXPIRES);
        item.insert(TTL.into(), n(9));
        assert_eq!(Entry::of("t", "PART#a#b", &item).unwrap().expiry, Some(9));
        assert!(Entry::of("t", "AUD#x", &item).is_none());
    }
}
