//! The store's recent writes, in memory, in front of the redb file.
//!
//! A group commit is made durable by the write-ahead log alone; its writes then go into a
//! [`Layer`] here instead of into a redb transaction of their own (a redb commit copies and
//! checksums every B-tree page it touches, which cost more than the rest of a SendMessage's
//! write). Once a second the layer is frozen and written into redb in one durable transaction
//! by the checkpointer ([`crate::writer`]), which touches each page once for thousands of
//! writes; a fresh layer takes the writes meanwhile. A read looks in the active layer, then
//! the frozen one, then in redb.
//!
//! Keys and values are kept as redb encodes them (the bytes the log holds too), ordered by the
//! key type's own `compare`, so that a layer's rows and the file's merge in the file's order.
//! Every write is a *version* tagged with its group's sequence. Readers see the versions of the
//! groups published when they began (a group is published once it is in the log on disk), so a
//! read never sees a write before it is durable, and a read of several rows sees one state.
//! The writer sees every version, its own group's included. A layer keeps all its versions
//! until it is checkpointed and dropped (a second or two of writes), so a reader that began
//! before a newer version always finds the one it may see.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use redb::{AccessGuard, Key, StorageError, Value};

use crate::items::{Compare, TABLES};

/// Encoded bytes, shared between a layer and its readers.
pub(crate) type Bytes = Arc<[u8]>;

/// An encoded key, ordered as its table orders keys.
#[derive(Clone)]
struct MemKey {
    bytes: Bytes,
    cmp: Compare,
}

// Keys of one table share its comparator.
impl PartialEq for MemKey {
    fn eq(&self, other: &Self) -> bool {
        (self.cmp)(&self.bytes, &other.bytes) == Ordering::Equal
    }
}

impl Eq for MemKey {}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.cmp)(&self.bytes, &other.bytes)
    }
}

/// One write of a key: its group and the value, `None` for a delete.
struct Version {
    seq: u64,
    value: Option<Bytes>,
}

/// What a layer holds for a key.
#[derive(Debug, PartialEq)]
pub(crate) enum Lookup<'a> {
    /// Nothing this reader may see: ask the layer below.
    Absent,
    /// Deleted.
    Deleted,
    Value(&'a Bytes),
}

/// One table's rows in a layer: every version of every key written since the layer began.
pub(crate) struct MemTable {
    cmp: Compare,
    rows: BTreeMap<MemKey, Vec<Version>>,
}

impl MemTable {
    pub(crate) fn new(cmp: Compare) -> Self {
        Self {
            cmp,
            rows: BTreeMap::new(),
        }
    }

    fn key(&self, bytes: &[u8]) -> MemKey {
        MemKey {
            bytes: Bytes::from(bytes),
            cmp: self.cmp,
        }
    }

    /// The newest version of `key` (the writer's view).
    pub(crate) fn newest(&self, key: &[u8]) -> Lookup<'_> {
        self.visible(key, u64::MAX)
    }

    /// The newest version of `key` written by a group up to `upto`.
    pub(crate) fn visible(&self, key: &[u8], upto: u64) -> Lookup<'_> {
        match self.rows.get(&self.key(key)) {
            None => Lookup::Absent,
            Some(versions) => pick(versions, upto),
        }
    }

    /// Records a write of `key` by group `seq` (`None`: a delete). A key written twice by
    /// one group keeps the later write.
    pub(crate) fn put(&mut self, seq: u64, key: &[u8], value: Option<&[u8]>) {
        let value = value.map(Bytes::from);
        let versions = self.rows.entry(self.key(key)).or_default();
        match versions.last_mut() {
            Some(last) if last.seq == seq => last.value = value,
            _ => versions.push(Version { seq, value }),
        }
    }

    /// Forgets what group `seq` wrote of `key` (a group that did not become durable).
    pub(crate) fn undo(&mut self, seq: u64, key: &[u8]) {
        let key = self.key(key);
        if let Some(versions) = self.rows.get_mut(&key) {
            versions.retain(|v| v.seq != seq);
            if versions.is_empty() {
                self.rows.remove(&key);
            }
        }
    }

    /// The keys in `lower..upper` with a version up to `upto`, in key order, with that
    /// version (`None`: deleted).
    pub(crate) fn range(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        upto: u64,
    ) -> Vec<(Bytes, Option<Bytes>)> {
        if self.rows.is_empty() || !self.is_valid(lower, upper) {
            return Vec::new();
        }
        let lower = lower.map(|b| self.key(b));
        let upper = upper.map(|b| self.key(b));
        self.rows
            .range((lower, upper))
            .filter_map(|(key, versions)| match pick(versions, upto) {
                Lookup::Absent => None,
                Lookup::Deleted => Some((key.bytes.clone(), None)),
                Lookup::Value(value) => Some((key.bytes.clone(), Some(value.clone()))),
            })
            .collect()
    }

    /// `BTreeMap::range` panics on a range whose start is after its end (or equal to it,
    /// both excluded); such a range is empty.
    fn is_valid(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> bool {
        match (lower, upper) {
            (Bound::Included(a), Bound::Included(b)) => (self.cmp)(a, b) != Ordering::Greater,
            (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
                (self.cmp)(a, b) == Ordering::Less
            }
            _ => true,
        }
    }

    /// Every key with its newest version (`None`: deleted), in key order: what the layer
    /// leaves in the file once checkpointed.
    pub(crate) fn newest_rows(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.rows.iter().filter_map(|(key, versions)| {
            versions.last().map(|v| (&*key.bytes, v.value.as_deref()))
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

fn pick(versions: &[Version], upto: u64) -> Lookup<'_> {
    match versions.iter().rev().find(|v| v.seq <= upto) {
        None => Lookup::Absent,
        Some(Version { value: None, .. }) => Lookup::Deleted,
        Some(Version {
            value: Some(value), ..
        }) => Lookup::Value(value),
    }
}

/// The store's tables, in the order of their tags.
pub(crate) type MemTables = [MemTable; TABLES];

/// The writes of a span of groups, for every table; shared by the writer and readers.
pub(crate) struct Layer {
    tables: RwLock<MemTables>,
    /// An estimate of the memory the rows take (keys and values), for the writer's limits.
    bytes: std::sync::atomic::AtomicUsize,
}

impl Layer {
    pub(crate) fn new(compares: [Compare; TABLES]) -> Self {
        Self {
            tables: RwLock::new(compares.map(MemTable::new)),
            bytes: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, MemTables> {
        self.tables.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, MemTables> {
        self.tables.write().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn add_bytes(&self, n: usize) {
        self.bytes
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.read().iter().all(MemTable::is_empty)
    }
}

/// A row as found: in a layer (its encoded bytes) or in the file.
pub(crate) enum Found<T: Value + 'static> {
    Memory(Bytes),
    Disk(AccessGuard<'static, T>),
}

impl<T: Value + 'static> Found<T> {
    pub(crate) fn value(&self) -> T::SelfType<'_> {
        match self {
            Self::Memory(bytes) => T::from_bytes(bytes),
            Self::Disk(guard) => guard.value(),
        }
    }
}

type DiskRow<K, V> = Result<(AccessGuard<'static, K>, AccessGuard<'static, V>), StorageError>;

/// A range of a table as a reader sees it: the layers' rows merged into the file's, a
/// layer's row (or delete) standing for the file's row of the same key.
pub(crate) struct Merged<K: Key + 'static, V: Value + 'static> {
    memory: std::iter::Peekable<std::vec::IntoIter<(Bytes, Option<Bytes>)>>,
    disk: std::iter::Peekable<Box<dyn Iterator<Item = DiskRow<K, V>>>>,
    reverse: bool,
}

impl<K: Key + 'static, V: Value + 'static> Merged<K, V> {
    /// `memory`: the layers' rows of the range in key order (newest layer first where two
    /// hold a key, see [`overlay`]); `disk`: the file's rows of the same range, in key order
    /// or, with `reverse`, in reverse (and `memory` is then reversed here).
    pub(crate) fn new(
        mut memory: Vec<(Bytes, Option<Bytes>)>,
        disk: Box<dyn Iterator<Item = DiskRow<K, V>>>,
        reverse: bool,
    ) -> Self {
        if reverse {
            memory.reverse();
        }
        Self {
            memory: memory.into_iter().peekable(),
            disk: disk.peekable(),
            reverse,
        }
    }
}

impl<K: Key + 'static, V: Value + 'static> Iterator for Merged<K, V> {
    type Item = Result<(Found<K>, Found<V>), StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let order = match (self.memory.peek(), self.disk.peek()) {
                (None, None) => return None,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) | (Some(_), Some(Err(_))) => Ordering::Greater,
                (Some((memory, _)), Some(Ok((disk, _)))) => {
                    let order = K::compare(memory, K::as_bytes(&disk.value()).as_ref());
                    if self.reverse { order.reverse() } else { order }
                }
            };
            if order == Ordering::Greater {
                return self
                    .disk
                    .next()
                    .map(|row| row.map(|(k, v)| (Found::Disk(k), Found::Disk(v))));
            }
            if order == Ordering::Equal {
                self.disk.next(); // the layer's row stands for it
            }
            match self.memory.next() {
                Some((key, Some(value))) => {
                    return Some(Ok((Found::Memory(key), Found::Memory(value))));
                }
                Some((_, None)) => {} // deleted
                None => return None,
            }
        }
    }
}

/// The rows of two layers' ranges as one, in key order: `newer`'s row where both hold a key.
pub(crate) fn overlay(
    newer: Vec<(Bytes, Option<Bytes>)>,
    older: Vec<(Bytes, Option<Bytes>)>,
    cmp: Compare,
) -> Vec<(Bytes, Option<Bytes>)> {
    if older.is_empty() {
        return newer;
    }
    if newer.is_empty() {
        return older;
    }
    let mut merged = Vec::with_capacity(newer.len() + older.len());
    let mut newer = newer.into_iter().peekable();
    let mut older = older.into_iter().peekable();
    loop {
        let order = match (newer.peek(), older.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((a, _)), Some((b, _))) => cmp(a, b),
        };
        match order {
            Ordering::Greater => merged.extend(older.next()),
            Ordering::Equal => {
                older.next();
                merged.extend(newer.next());
            }
            Ordering::Less => merged.extend(newer.next()),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::{Database, ReadableDatabase, TableDefinition};

    const T: TableDefinition<(&str, u64), &str> = TableDefinition::new("t");

    fn key(task: &str, n: u64) -> Vec<u8> {
        <(&str, u64)>::as_bytes(&(task, n))
    }

    fn table() -> MemTable {
        MemTable::new(<(&str, u64)>::compare)
    }

    #[test]
    fn a_reader_sees_the_newest_version_of_the_groups_it_may_see() {
        let mut t = table();
        t.put(1, &key("a", 1), Some(b"one"));
        t.put(3, &key("a", 1), Some(b"three"));
        t.put(4, &key("a", 1), None);
        assert_eq!(t.visible(&key("a", 1), 0), Lookup::Absent);
        assert_eq!(
            t.visible(&key("a", 1), 2),
            Lookup::Value(&Bytes::from(&b"one"[..]))
        );
        assert_eq!(
            t.visible(&key("a", 1), 3),
            Lookup::Value(&Bytes::from(&b"three"[..]))
        );
        assert_eq!(t.newest(&key("a", 1)), Lookup::Deleted);
        assert_eq!(t.newest(&key("b", 1)), Lookup::Absent);
        t.undo(4, &key("a", 1));
        assert_eq!(
            t.newest(&key("a", 1)),
            Lookup::Value(&Bytes::from(&b"three"[..]))
        );
        t.undo(3, &key("a", 1));
        t.undo(1, &key("a", 1));
        assert!(t.is_empty(), "a key without versions is gone");
    }

    #[test]
    fn ranges_follow_the_key_types_order_not_the_bytes() {
        let mut t = table();
        // The numbers are encoded little-endian: in bytes, 256 comes before 9.
        for (task, n) in [("b", 10), ("b", 9), ("ab", 1), ("b", 256), ("c", 0)] {
            t.put(1, &key(task, n), Some(task.as_bytes()));
        }
        let lower = key("b", 0);
        let upper = key("b", u64::MAX);
        let rows = t.range(Bound::Included(&lower), Bound::Included(&upper), 1);
        let seqs: Vec<u64> = rows
            .iter()
            .map(|(k, _)| <(&str, u64)>::from_bytes(k).1)
            .collect();
        assert_eq!(seqs, [9, 10, 256]);
        let empty = t.range(Bound::Excluded(&upper), Bound::Excluded(&lower), 1);
        assert!(empty.is_empty(), "a reversed range is empty, not a panic");
    }

    #[test]
    fn merged_ranges_take_the_layers_rows_over_the_files_in_both_directions() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::create(dir.path().join("m.redb")).expect("db");
        let txn = db.begin_write().expect("txn");
        {
            let mut file = txn.open_table(T).expect("table");
            for n in [1, 2, 4, 6] {
                file.insert(("t", n), "file").expect("insert");
            }
        }
        txn.commit().expect("commit");
        let mut newer = table();
        newer.put(5, &key("t", 2), Some(b"newer"));
        newer.put(5, &key("t", 6), None);
        newer.put(5, &key("t", 7), Some(b"newer"));
        let mut older = table();
        older.put(2, &key("t", 2), Some(b"older"));
        older.put(2, &key("t", 3), Some(b"older"));
        let all = (Bound::Unbounded, Bound::Unbounded);
        let rows = overlay(
            newer.range(all.0, all.1, 9),
            older.range(all.0, all.1, 9),
            <(&str, u64)>::compare,
        );
        let read = db.begin_read().expect("read");
        let file = read.open_table(T).expect("table");
        for reverse in [false, true] {
            let disk: Box<dyn Iterator<Item = DiskRow<(&str, u64), &str>>> = if reverse {
                Box::new(file.range::<(&str, u64)>(..).expect("range").rev())
            } else {
                Box::new(file.range::<(&str, u64)>(..).expect("range"))
            };
            let got: Vec<(u64, String)> = Merged::new(rows.clone(), disk, reverse)
                .map(|row| {
                    let (k, v) = row.expect("row");
                    (k.value().1, v.value().to_owned())
                })
                .collect();
            let mut want = vec![
                (1, "file".to_owned()),
                (2, "newer".to_owned()),
                (3, "older".to_owned()),
                (4, "file".to_owned()),
                (7, "newer".to_owned()),
            ];
            if reverse {
                want.reverse();
            }
            assert_eq!(got, want, "reverse: {reverse}");
        }
    }
}
