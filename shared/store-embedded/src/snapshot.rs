//! What a reader reads: a [`Snapshot`] of the published groups (the layers, then the file
//! as of the last checkpoint, [`FileReader`]), and each table as it sees it ([`Reader`]).

use std::any::Any;
use std::borrow::Borrow;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, OnceLock};

use redb::{Database, Key, ReadOnlyTable, ReadableDatabase, Value};
use task_store::StoreResult;

use crate::error::backend;
use crate::items::{Def, TABLES};
use crate::memtable::{self, Found, Layer, Lookup, Merged};

/// The file as one checkpoint left it: a read transaction, and each table opened in it once.
///
/// Why shared: the file changes only when a checkpoint commits, so every read between two
/// checkpoints can read the same transaction. Beginning one and opening a table in it for
/// each read (redb checks the table's key and value types by their names, which it formats)
/// cost a task read more than finding the task did.
pub(crate) struct FileReader {
    txn: redb::ReadTransaction,
    /// By [`Def::tag`]: the `ReadOnlyTable<K, V>` of the table, once a reader opened it.
    tables: [OnceLock<Arc<dyn Any + Send + Sync>>; TABLES],
}

impl FileReader {
    /// Reads the file as of its last commit.
    pub(crate) fn begin(db: &Database) -> StoreResult<Self> {
        Ok(Self {
            txn: db.begin_read().map_err(backend)?,
            tables: std::array::from_fn(|_| OnceLock::new()),
        })
    }

    fn table<K: Key + Send + Sync + 'static, V: Value + Send + Sync + 'static>(
        &self,
        def: Def<K, V>,
    ) -> StoreResult<Arc<ReadOnlyTable<K, V>>> {
        let slot = &self.tables[def.tag];
        if let Some(opened) = slot.get().and_then(|t| t.clone().downcast().ok()) {
            return Ok(opened);
        }
        let opened = Arc::new(self.txn.open_table(def.table).map_err(backend)?);
        // Two readers may open it at once; either copy reads the same transaction.
        let _ = slot.set(opened.clone());
        Ok(opened)
    }
}

/// What a reader reads: the groups published when it began, in the layers and the file.
pub(crate) struct Snapshot {
    /// The last group it sees.
    pub(crate) upto: u64,
    /// The active layer, then the frozen one if there is one.
    pub(crate) layers: Vec<Arc<Layer>>,
    pub(crate) file: Arc<FileReader>,
}

impl Snapshot {
    pub(crate) fn table<K: Key + Send + Sync + 'static, V: Value + Send + Sync + 'static>(
        &self,
        def: Def<K, V>,
    ) -> StoreResult<Reader<'_, K, V>> {
        Ok(Reader {
            snapshot: self,
            def,
            file: self.file.table(def)?,
        })
    }
}

/// One table as a [`Snapshot`] sees it.
pub(crate) struct Reader<'s, K: Key + 'static, V: Value + 'static> {
    snapshot: &'s Snapshot,
    def: Def<K, V>,
    file: Arc<ReadOnlyTable<K, V>>,
}

impl<K: Key + 'static, V: Value + 'static> Reader<'_, K, V> {
    pub(crate) fn get<'k>(
        &self,
        key: impl Borrow<K::SelfType<'k>>,
    ) -> StoreResult<Option<Found<V>>> {
        let bytes = K::as_bytes(key.borrow());
        for layer in &self.snapshot.layers {
            let rows = layer.read();
            match rows[self.def.tag].visible(bytes.as_ref(), self.snapshot.upto) {
                Lookup::Value(value) => return Ok(Some(Found::Memory(value.clone()))),
                Lookup::Deleted => return Ok(None),
                Lookup::Absent => {}
            }
        }
        Ok(self
            .file
            .get(key.borrow())
            .map_err(backend)?
            .map(Found::Disk))
    }

    /// The rows of a range in key order, or in reverse.
    pub(crate) fn range<'k, KR: Borrow<K::SelfType<'k>>>(
        &self,
        range: impl RangeBounds<KR>,
        reverse: bool,
    ) -> StoreResult<Merged<K, V>> {
        let encode = |bound: Bound<&KR>| bound.map(|k| K::as_bytes(k.borrow()).as_ref().to_vec());
        let (lower, upper) = (encode(range.start_bound()), encode(range.end_bound()));
        let mut rows = Vec::new();
        for layer in self.snapshot.layers.iter().rev() {
            let newer = layer.read()[self.def.tag].range(
                lower.as_ref().map(Vec::as_slice),
                upper.as_ref().map(Vec::as_slice),
                self.snapshot.upto,
            );
            rows = memtable::overlay(newer, rows, K::compare);
        }
        let file = self
            .file
            .range::<KR>((range.start_bound(), range.end_bound()))
            .map_err(backend)?;
        let file: Box<dyn Iterator<Item = _>> = if reverse {
            Box::new(file.rev())
        } else {
            Box::new(file)
        };
        Ok(Merged::new(rows, file, reverse))
    }
}
