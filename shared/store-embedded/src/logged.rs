//! A redb table whose writes are also written down, for the write-ahead log ([`crate::wal`]).
//!
//! The writer's jobs write through [`Logged::insert`] and [`Logged::remove`]; each appends the
//! key and value bytes (redb's own encoding of them) to the table's op list. Reads go to the
//! table itself (`Deref`); there is no `DerefMut`, so a write cannot bypass the list. Replaying
//! a list on the same table in another transaction decodes the bytes and repeats the writes in
//! order, which leaves the table as the original writes left it.

use std::borrow::Borrow;
use std::ops::Deref;

use redb::{Key, StorageError, Table, Value};

const PUT: u8 = 1;
const DELETE: u8 = 2;
const FIRST_OPS_CAPACITY: usize = 4096;

pub(crate) struct Logged<'t, K: Key + 'static, V: Value + 'static> {
    table: Table<'t, K, V>,
    ops: Vec<u8>,
}

impl<'t, K: Key + 'static, V: Value + 'static> Logged<'t, K, V> {
    pub(crate) fn new(table: Table<'t, K, V>) -> Self {
        Self {
            table,
            ops: Vec::new(),
        }
    }

    pub(crate) fn insert<'k, 'v>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
        value: impl Borrow<V::SelfType<'v>>,
    ) -> Result<(), StorageError> {
        self.table.insert(key.borrow(), value.borrow())?;
        let key = K::as_bytes(key.borrow());
        let value = V::as_bytes(value.borrow());
        let (key, value) = (key.as_ref(), value.as_ref());
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
        self.table.remove(key.borrow())?;
        self.ops.push(DELETE);
        put_bytes(&mut self.ops, K::as_bytes(key.borrow()).as_ref());
        Ok(())
    }
}

/// A table's side of the write-ahead log, whatever its key and value types.
pub(crate) trait Journal {
    /// The writes since the last call (none if the table was not written).
    fn take_ops(&mut self) -> Vec<u8>;

    /// Repeats the writes of `ops` (as [`take_ops`](Self::take_ops) gave them), unlogged.
    fn replay(&mut self, ops: &[u8]) -> Result<(), ReplayError>;
}

impl<K: Key + 'static, V: Value + 'static> Journal for Logged<'_, K, V> {
    fn take_ops(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.ops)
    }

    fn replay(&mut self, mut ops: &[u8]) -> Result<(), ReplayError> {
        while let Some((&kind, rest)) = ops.split_first() {
            let (key, rest) = take_bytes(rest)?;
            ops = match kind {
                PUT => {
                    let (value, rest) = take_bytes(rest)?;
                    self.table
                        .insert(K::from_bytes(key), V::from_bytes(value))?;
                    rest
                }
                DELETE => {
                    self.table.remove(K::from_bytes(key))?;
                    rest
                }
                other => return Err(ReplayError::Malformed(format!("unknown op {other}"))),
            };
        }
        Ok(())
    }
}

impl<'t, K: Key + 'static, V: Value + 'static> Deref for Logged<'t, K, V> {
    type Target = Table<'t, K, V>;

    fn deref(&self) -> &Self::Target {
        &self.table
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
    use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

    const T: TableDefinition<(&str, u64), &str> = TableDefinition::new("t");

    #[test]
    fn replayed_writes_leave_the_table_as_the_logged_ones_did() {
        let dir = tempfile::tempdir().expect("tempdir");
        let original = Database::create(dir.path().join("a.redb")).expect("db");
        let copy = Database::create(dir.path().join("b.redb")).expect("db");
        let txn = original.begin_write().expect("txn");
        let ops = {
            let mut table = Logged::new(txn.open_table(T).expect("table"));
            table.insert(("task", 1), "one").expect("insert");
            table.insert(("task", 2), "two").expect("insert");
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
            table.take_ops()
        };
        txn.commit().expect("commit");
        let txn = copy.begin_write().expect("txn");
        Logged::new(txn.open_table(T).expect("table"))
            .replay(&ops)
            .expect("replay");
        txn.commit().expect("commit");

        let rows = |db: &Database| -> Vec<((String, u64), String)> {
            let txn = db.begin_read().expect("read");
            let table = txn.open_table(T).expect("table");
            table
                .iter()
                .expect("iter")
                .map(|row| {
                    let (k, v) = row.expect("row");
                    let (task, n) = k.value();
                    ((task.to_owned(), n), v.value().to_owned())
                })
                .collect()
        };
        assert_eq!(rows(&copy), rows(&original));
        assert_eq!(rows(&copy).len(), 2);
    }

    #[test]
    fn a_cut_or_unknown_op_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::create(dir.path().join("a.redb")).expect("db");
        let txn = db.begin_write().expect("txn");
        let mut table = Logged::new(txn.open_table(T).expect("table"));
        table.insert(("task", 1), "one").expect("insert");
        let ops = table.take_ops();
        assert!(table.replay(&ops[..ops.len() - 1]).is_err());
        assert!(table.replay(&[9]).is_err());
    }
}
