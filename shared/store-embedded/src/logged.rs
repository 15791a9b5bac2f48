//! The writer's view of a table: reads see every layer and the file, writes go into the
//! active layer ([`crate::memtable`]) and are written down for the write-ahead log
//! ([`crate::wal`]).
//!
//! The writer's jobs write through [`Logged::insert`] and [`Logged::remove`]; each records
//! the write in the active layer under the group's sequence, and appends the key and value
//! bytes (redb's own encoding of them) to the table's op list. Replaying a list on the redb
//! table ([`replay`]) decodes the bytes and repeats the writes in order, which leaves the
//! table as the writes left the layer; the same lists tell which keys to forget of a group
//! that did not become durable ([`undo`]).

use std::borrow::Borrow;
use std::cell::OnceCell;
use std::ops::{Bound, RangeBounds};

use redb::{Key, ReadOnlyTable, ReadTransaction, ReadableDatabase, StorageError, Table, Value};

use crate::items::Def;
use crate::memtable::{Found, Lookup, MemTable, Merged, overlay};

const PUT: u8 = 1;
const DELETE: u8 = 2;
const FIRST_OPS_CAPACITY: usize = 4096;

/// Where the writer's reads that no layer answers go: the file as last checkpointed,
/// read in a transaction begun at the first such read of a group.
pub(crate) struct Disk<'a> {
    db: &'a redb::Database,
    txn: OnceCell<Result<ReadTransaction, String>>,
}

impl<'a> Disk<'a> {
    pub(crate) fn new(db: &'a redb::Database) -> Self {
        Self {
            db,
            txn: OnceCell::new(),
        }
    }

    fn txn(&self) -> Result<&ReadTransaction, String> {
        self.txn
            .get_or_init(|| self.db.begin_read().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(Clone::clone)
    }
}

pub(crate) struct Logged<'a, K: Key + 'static, V: Value + 'static> {
    def: Def<K, V>,
    /// The active layer's rows of the table (the writer holds the layer for the group).
    mem: &'a mut MemTable,
    /// The frozen layer's, while one is being checkpointed.
    older: Option<&'a MemTable>,
    disk: &'a Disk<'a>,
    table: OnceCell<Result<ReadOnlyTable<K, V>, String>>,
    /// The group the writes belong to.
    seq: u64,
    ops: Vec<u8>,
}

impl<'a, K: Key + 'static, V: Value + 'static> Logged<'a, K, V> {
    pub(crate) fn new(
        def: Def<K, V>,
        mem: &'a mut MemTable,
        older: Option<&'a MemTable>,
        disk: &'a Disk<'a>,
        seq: u64,
    ) -> Self {
        Self {
            def,
            mem,
            older,
            disk,
            table: OnceCell::new(),
            seq,
            ops: Vec::new(),
        }
    }

    /// The row of `key` as the writer sees it: its newest version in a layer, else the file's.
    pub(crate) fn get<'k>(
        &self,
        key: impl Borrow<K::SelfType<'k>>,
    ) -> Result<Option<Found<V>>, String> {
        let bytes = K::as_bytes(key.borrow());
        for layer in std::iter::once(&*self.mem).chain(self.older) {
            match layer.newest(bytes.as_ref()) {
                Lookup::Value(value) => return Ok(Some(Found::Memory(value.clone()))),
                Lookup::Deleted => return Ok(None),
                Lookup::Absent => {}
            }
        }
        let found = self.file()?.get(key.borrow()).map_err(|e| e.to_string())?;
        Ok(found.map(Found::Disk))
    }

    /// The rows of `range` in key order as the writer sees them: each key's newest version in
    /// a layer, else the file's row.
    pub(crate) fn range<'k, KR: Borrow<K::SelfType<'k>>>(
        &self,
        range: impl RangeBounds<KR>,
    ) -> Result<Merged<K, V>, String> {
        let encode = |bound: Bound<&KR>| bound.map(|k| K::as_bytes(k.borrow()).as_ref().to_vec());
        let (lower, upper) = (encode(range.start_bound()), encode(range.end_bound()));
        let (lower, upper) = (
            lower.as_ref().map(Vec::as_slice),
            upper.as_ref().map(Vec::as_slice),
        );
        let older = self
            .older
            .map(|layer| layer.range(lower, upper, u64::MAX))
            .unwrap_or_default();
        let rows = overlay(self.mem.range(lower, upper, u64::MAX), older, K::compare);
        let file = self
            .file()?
            .range::<KR>((range.start_bound(), range.end_bound()))
            .map_err(|e| e.to_string())?;
        Ok(Merged::new(rows, Box::new(file), false))
    }

    /// Removes every row of `range` as the writer sees it; returns how many there were.
    pub(crate) fn remove_range<'k, KR: Borrow<K::SelfType<'k>>>(
        &mut self,
        range: impl RangeBounds<KR>,
    ) -> Result<usize, String> {
        let keys: Vec<Vec<u8>> = self
            .range(range)?
            .map(|row| {
                row.map(|(key, _)| K::as_bytes(&key.value()).as_ref().to_vec())
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<_, _>>()?;
        for key in &keys {
            self.mem.put(self.seq, key, None);
            self.ops.push(DELETE);
            put_bytes(&mut self.ops, key);
        }
        Ok(keys.len())
    }

    /// The table in the file as last checkpointed.
    fn file(&self) -> Result<&ReadOnlyTable<K, V>, String> {
        self.table
            .get_or_init(|| {
                let txn = self.disk.txn()?;
                txn.open_table(self.def.table).map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    pub(crate) fn insert<'k, 'v>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
        value: impl Borrow<V::SelfType<'v>>,
    ) -> Result<(), StorageError> {
        let key = K::as_bytes(key.borrow());
        let value = V::as_bytes(value.borrow());
        let (key, value) = (key.as_ref(), value.as_ref());
        self.mem.put(self.seq, key, Some(value));
        if self.ops.capacity() == 0 {
            // Most groups write a few KB to a table: one allocation, not a dozen regrowths.
            self.ops
                .reserve(FIRST_OPS_CAPACITY.max(9 + key.len() + value.len()));
        }
        self.ops.push(PUT);
        put_bytes(&mut self.ops, key);
        put_bytes(&mut self.ops, value);
        Ok(())
    }

    pub(crate) fn remove<'k>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
    ) -> Result<(), StorageError> {
        let key = K::as_bytes(key.borrow());
        self.mem.put(self.seq, key.as_ref(), None);
        self.ops.push(DELETE);
        put_bytes(&mut self.ops, key.as_ref());
        Ok(())
    }
}

/// A table's side of the write-ahead log, whatever its key and value types.
pub(crate) trait Journal {
    /// The writes since the last call (none if the table was not written).
    fn take_ops(&mut self) -> Vec<u8>;
}

impl<K: Key + 'static, V: Value + 'static> Journal for Logged<'_, K, V> {
    fn take_ops(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.ops)
    }
}

/// A redb table that takes encoded writes: what a checkpoint and a replay write into.
pub(crate) trait Sink {
    /// Writes `value` under `key`, or deletes `key` (`None`).
    fn put(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), StorageError>;
}

impl<K: Key + 'static, V: Value + 'static> Sink for Table<'_, K, V> {
    fn put(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), StorageError> {
        match value {
            Some(value) => {
                self.insert(K::from_bytes(key), V::from_bytes(value))?;
            }
            None => {
                self.remove(K::from_bytes(key))?;
            }
        }
        Ok(())
    }
}

/// The writes of an op list, in order: (key, value), the value `None` for a delete.
pub(crate) fn writes(
    mut ops: &[u8],
) -> impl Iterator<Item = Result<(&[u8], Option<&[u8]>), ReplayError>> {
    std::iter::from_fn(move || {
        let (&kind, rest) = ops.split_first()?;
        let write = take_bytes(rest).and_then(|(key, rest)| match kind {
            PUT => take_bytes(rest).map(|(value, rest)| ((key, Some(value)), rest)),
            DELETE => Ok(((key, None), rest)),
            other => Err(ReplayError::Malformed(format!("unknown op {other}"))),
        });
        match write {
            Ok((write, rest)) => {
                ops = rest;
                Some(Ok(write))
            }
            Err(err) => {
                ops = &[];
                Some(Err(err))
            }
        }
    })
}

/// Repeats the writes of `ops` on `table`.
pub(crate) fn replay(table: &mut dyn Sink, ops: &[u8]) -> Result<(), ReplayError> {
    for write in writes(ops) {
        let (key, value) = write?;
        table.put(key, value)?;
    }
    Ok(())
}

/// Forgets what group `seq` wrote to `table` by `ops` (the group did not become durable).
pub(crate) fn undo(table: &mut MemTable, seq: u64, ops: &[u8]) {
    for (key, _) in writes(ops).map_while(Result::ok) {
        table.undo(seq, key);
    }
}

#[derive(Debug)]
pub(crate) enum ReplayError {
    Malformed(String),
    Storage(StorageError),
}

impl From<StorageError> for ReplayError {
    fn from(err: StorageError) -> Self {
        Self::Storage(err)
    }
}

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Malformed(why) => write!(f, "a logged write is malformed: {why}"),
            Self::Storage(err) => write!(f, "{err}"),
        }
    }
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    // redb refuses keys and values over 3 GiB, so the length fits.
    out.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(bytes);
}

pub(crate) fn take_bytes(ops: &[u8]) -> Result<(&[u8], &[u8]), ReplayError> {
    let short = || ReplayError::Malformed("cut short".to_owned());
    let (len, rest) = ops.split_first_chunk::<4>().ok_or_else(short)?;
    let len = u32::from_le_bytes(*len) as usize;
    if rest.len() < len {
        return Err(short());
    }
    Ok(rest.split_at(len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::{Database, ReadableTable};

    const T: Def<(&str, u64), &str> = Def::new(0, "t");

    fn rows(db: &Database) -> Vec<((String, u64), String)> {
        let txn = db.begin_read().expect("read");
        let Ok(table) = txn.open_table(T.table) else {
            return Vec::new();
        };
        table
            .iter()
            .expect("iter")
            .map(|row| {
                let (k, v) = row.expect("row");
                let (task, n) = k.value();
                ((task.to_owned(), n), v.value().to_owned())
            })
            .collect()
    }

    #[test]
    fn replayed_writes_leave_the_table_as_the_logged_ones_left_the_layer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::create(dir.path().join("a.redb")).expect("db");
        let txn = db.begin_write().expect("txn");
        txn.open_table(T.table)
            .expect("table")
            .insert(("task", 2), "on file")
            .expect("insert");
        txn.commit().expect("commit");

        let disk = Disk::new(&db);
        let mut mem = MemTable::new(<(&str, u64)>::compare);
        let ops = {
            let mut table = Logged::new(T, &mut mem, None, &disk, 7);
            assert_eq!(
                table
                    .get(("task", 2))
                    .expect("get")
                    .map(|v| v.value().to_owned()),
                Some("on file".to_owned()),
                "reads fall through to the file"
            );
            table.insert(("task", 1), "one").expect("insert");
            table.insert(("task", 1), "one again").expect("insert");
            table.remove(("task", 2)).expect("remove");
            table.insert(("other", 7), "").expect("insert");
            assert_eq!(
                table
                    .get(("task", 1))
                    .expect("get")
                    .map(|v| v.value().to_owned()),
                Some("one again".to_owned()),
                "reads see the writes"
            );
            assert!(
                table.get(("task", 2)).expect("get").is_none(),
                "and the deletes"
            );
            table.take_ops()
        };
        drop(disk);
        let txn = db.begin_write().expect("txn");
        replay(&mut txn.open_table(T.table).expect("table"), &ops).expect("replay");
        txn.commit().expect("commit");
        let layer: Vec<((String, u64), String)> = mem
            .newest_rows()
            .filter_map(|(k, v)| {
                let (task, n) = <(&str, u64)>::from_bytes(k);
                Some(((task.to_owned(), n), <&str>::from_bytes(v?).to_owned()))
            })
            .collect();
        let mut sorted = layer.clone();
        sorted.sort();
        assert_eq!(rows(&db), sorted);
        assert_eq!(rows(&db).len(), 2);

        undo(&mut mem, 7, &ops);
        assert!(
            mem.is_empty(),
            "undoing the group forgets every write of it"
        );
    }

    #[test]
    fn a_cut_or_unknown_op_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::create(dir.path().join("a.redb")).expect("db");
        let disk = Disk::new(&db);
        let mut mem = MemTable::new(<(&str, u64)>::compare);
        let mut table = Logged::new(T, &mut mem, None, &disk, 1);
        table.insert(("task", 1), "one").expect("insert");
        let ops = table.take_ops();
        drop(disk);
        let txn = db.begin_write().expect("txn");
        let mut file = txn.open_table(T.table).expect("table");
        assert!(replay(&mut file, &ops[..ops.len() - 1]).is_err());
        assert!(replay(&mut file, &[9]).is_err());
    }
}
