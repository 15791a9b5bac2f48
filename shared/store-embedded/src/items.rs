//! The stored shapes: the redb tables (their tags, key and value types, names) and the
//! documents stored in them, with their encoding and parsing.

use std::cmp::Ordering;

use chrono::{DateTime, Utc};
use redb::{Key, TableDefinition, Value};
use serde::{Deserialize, Serialize};
use task_store::{Lease, StoreError, StoreResult};

use crate::error::corrupt;

/// A key type's order over its encoded bytes (redb's `Key::compare`).
pub(crate) type Compare = fn(&[u8], &[u8]) -> Ordering;

/// A table: its tag (its place in every layer, and in the write-ahead log's records) and
/// its definition in the redb file.
pub(crate) struct Def<K: Key + 'static, V: Value + 'static> {
    pub(crate) tag: usize,
    pub(crate) table: TableDefinition<'static, K, V>,
}

impl<K: Key + 'static, V: Value + 'static> Clone for Def<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K: Key + 'static, V: Value + 'static> Copy for Def<K, V> {}

impl<K: Key + 'static, V: Value + 'static> Def<K, V> {
    pub(crate) const fn new(tag: usize, name: &'static str) -> Self {
        Self {
            tag,
            table: TableDefinition::new(name),
        }
    }

    pub(crate) fn compare(self) -> Compare {
        K::compare
    }
}

/// Task id → the task document (`TaskRecord` JSON).
pub(crate) const TASKS: Def<&str, &str> = Def::new(0, "task_records");
/// Task id → (version, terminal, events, history messages, transcript entries, artifact ids
/// as a JSON array): what the writer checks and counts, without parsing the document.
pub(crate) const META: Def<&str, (u64, bool, u64, u64, u64, &str)> = Def::new(1, "task_counters");
/// (task, seq) → event.
pub(crate) const EVENTS: Def<(&str, u64), &str> = Def::new(2, "events");
/// (task, n) → history message.
pub(crate) const HISTORY: Def<(&str, u64), &str> = Def::new(3, "history");
/// (task, n) → transcript entry.
pub(crate) const TRANSCRIPT: Def<(&str, u64), &str> = Def::new(4, "transcript");
/// (task, artifact id) → artifact.
pub(crate) const ARTIFACTS: Def<(&str, &str), &str> = Def::new(5, "artifacts");
/// (task, message id): the message ids a task received.
pub(crate) const MESSAGE_IDS: Def<(&str, &str), ()> = Def::new(6, "message_ids");
/// (task, seconds, nanos, message id) → (sender, message).
pub(crate) const INBOX: Def<(&str, i64, u32, &str), (&str, &str)> = Def::new(7, "inbox_items");
/// (task, seconds, nanos, message id) → audit entry.
pub(crate) const AUDIT: Def<(&str, i64, u32, &str), &str> = Def::new(8, "audit");
/// (task, config id) → push config with its owner (see [`push`]).
pub(crate) const PUSH: Def<(&str, &str), &str> = Def::new(9, "push_configs");
/// Task id → lease.
pub(crate) const LEASES: Def<&str, &str> = Def::new(10, "leases");
/// (participant, status seconds, status nanos, task id): ListTasks' index of the first
/// layouts, no longer written; opening a file that has rows in it builds the tables below from
/// the task documents and empties it ([`crate::open`]). Its tag stays so that a log written
/// before can still be replayed.
pub(crate) const INDEX: Def<(&str, i64, u32, &str), ()> = Def::new(11, "participant_index");
/// (participant, state, status seconds, status nanos, task id): ListTasks' index, one range per
/// participant and state (`task_store::listing`).
pub(crate) const BY_STATE: Def<StateKey, ()> = Def::new(12, "list_by_state");
/// (participant, context, task id): ListTasks' index by context.
pub(crate) const BY_CONTEXT: Def<(&str, &str, &str), ()> = Def::new(13, "list_by_context");
/// (participant, state, or "" for all its tasks) → how many tasks: ListTasks' totals, changed
/// in the write that moves the entries.
pub(crate) const LIST_COUNTS: Def<(&str, &str), u64> = Def::new(14, "list_counts");
/// How many tables there are; the tags are 0 to `TABLES - 1`.
pub(crate) const TABLES: usize = 15;
/// Tables of earlier file layouts (task documents with their counters inside; counters
/// without the transcript's), which this version does not read.
pub(crate) const OLD_LAYOUT_TABLES: &[&str] = &["tasks", "inbox", "task_meta"];

/// Each table's key order, by tag.
pub(crate) fn compares() -> [Compare; TABLES] {
    [
        TASKS.compare(),
        META.compare(),
        EVENTS.compare(),
        HISTORY.compare(),
        TRANSCRIPT.compare(),
        ARTIFACTS.compare(),
        MESSAGE_IDS.compare(),
        INBOX.compare(),
        AUDIT.compare(),
        PUSH.compare(),
        LEASES.compare(),
        INDEX.compare(),
        BY_STATE.compare(),
        BY_CONTEXT.compare(),
        LIST_COUNTS.compare(),
    ]
}

#[derive(Serialize, Deserialize)]
pub(crate) struct LeaseDoc {
    pub(crate) owner: String,
    pub(crate) token: String,
    pub(crate) expires_at: DateTime<Utc>,
}

/// (version, terminal, events, history messages, transcript entries, artifact ids as JSON).
pub(crate) type Counters = (u64, bool, u64, u64, u64, &'static str);
/// (task or participant, seconds, nanoseconds, message or task id).
pub(crate) type TimedKey = (&'static str, i64, u32, &'static str);
/// (participant, state, seconds, nanoseconds, task id).
pub(crate) type StateKey = (&'static str, &'static str, i64, u32, &'static str);

// The tables below are listed in the order of their tags.
const _: () = assert!(
    TASKS.tag == 0
        && META.tag == 1
        && EVENTS.tag == 2
        && HISTORY.tag == 3
        && TRANSCRIPT.tag == 4
        && ARTIFACTS.tag == 5
        && MESSAGE_IDS.tag == 6
        && INBOX.tag == 7
        && AUDIT.tag == 8
        && PUSH.tag == 9
        && LEASES.tag == 10
        && INDEX.tag == 11
        && BY_STATE.tag == 12
        && BY_CONTEXT.tag == 13
        && LIST_COUNTS.tag == 14
);

pub(crate) fn json<T: Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Invalid(format!("cannot encode: {e}")))
}

pub(crate) fn parse<T: for<'de> Deserialize<'de>>(what: &str, text: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|e| corrupt(what, e))
}

/// (seconds, nanoseconds) of an instant: an order-preserving key for any representable time.
pub(crate) fn time_key(t: DateTime<Utc>) -> (i64, u32) {
    (t.timestamp(), t.timestamp_subsec_nanos())
}

pub(crate) fn lease_doc(lease: &Lease) -> StoreResult<String> {
    json(&LeaseDoc {
        owner: lease.owner.clone(),
        token: lease.token.clone(),
        expires_at: lease.expires_at,
    })
}
