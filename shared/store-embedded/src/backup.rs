//! Online backup: a consistent copy of the store into a new file while writes go on. The
//! copy is one reader's [`Snapshot`] (the groups published when it began: the layers in
//! memory and the file in one redb read transaction, which no later write or checkpoint
//! changes), written table by table into a fresh redb file with one durable commit. The
//! copy holds every write acknowledged before it began and none half; it needs no log
//! beside it (its checkpoint records the last group it holds).

use std::path::{Path, PathBuf};

use redb::{Database, Key, Value};
use task_store::{StoreError, StoreResult};

use crate::EmbeddedStore;
use crate::error::backend;
use crate::items::{
    ARTIFACTS, AUDIT, BY_CONTEXT, BY_STATE, Def, EVENTS, HISTORY, INBOX, INDEX, LEASES,
    LIST_COUNTS, MESSAGE_IDS, META, PUSH, TASKS, TRANSCRIPT,
};
use crate::snapshot::Snapshot;
use crate::tables::FileTables;
use crate::writer::set_checkpoint;

/// The copy's file name, the store's own.
pub const BACKUP_FILE: &str = "tasks.redb";

impl EmbeddedStore {
    /// Writes a consistent copy of the store into the directory `dir` (created; it must
    /// not hold a store file already) as [`BACKUP_FILE`], and returns the file's path. Runs
    /// on the caller's thread (blocking: give it one of its own); the store's writer and
    /// readers carry on meanwhile. To restore, stop the server and put the copy in place of
    /// the data directory's `tasks.redb`, removing its `tasks.redb.wal*` files.
    pub fn backup_to(&self, dir: &Path) -> StoreResult<PathBuf> {
        std::fs::create_dir_all(dir).map_err(backend)?;
        let path = dir.join(BACKUP_FILE);
        if path.exists() {
            return Err(StoreError::Invalid(format!(
                "{} exists already",
                path.display()
            )));
        }
        let snapshot = self.view.snapshot(&self.db)?;
        let copy = Database::builder()
            .set_cache_size(16 << 20)
            .create(&path)
            .map_err(backend)?;
        let txn = copy.begin_write().map_err(backend)?;
        {
            let mut t = FileTables::open(&txn).map_err(backend)?;
            copy_table(&snapshot, TASKS, &mut t.tasks)?;
            copy_table(&snapshot, META, &mut t.meta)?;
            copy_table(&snapshot, EVENTS, &mut t.events)?;
            copy_table(&snapshot, HISTORY, &mut t.history)?;
            copy_table(&snapshot, TRANSCRIPT, &mut t.transcript)?;
            copy_table(&snapshot, ARTIFACTS, &mut t.artifacts)?;
            copy_table(&snapshot, MESSAGE_IDS, &mut t.message_ids)?;
            copy_table(&snapshot, INBOX, &mut t.inbox)?;
            copy_table(&snapshot, AUDIT, &mut t.audit)?;
            copy_table(&snapshot, PUSH, &mut t.push)?;
            copy_table(&snapshot, LEASES, &mut t.leases)?;
            copy_table(&snapshot, INDEX, &mut t.index)?;
            copy_table(&snapshot, BY_STATE, &mut t.by_state)?;
            copy_table(&snapshot, BY_CONTEXT, &mut t.by_context)?;
            copy_table(&snapshot, LIST_COUNTS, &mut t.list_counts)?;
        }
        set_checkpoint(&txn, snapshot.upto)?;
        txn.commit().map_err(backend)?;
        Ok(path)
    }
}

/// Every row of one table as the snapshot sees it, into the copy's table.
fn copy_table<K: Key + Send + Sync + 'static, V: Value + Send + Sync + 'static>(
    snapshot: &Snapshot,
    def: Def<K, V>,
    into: &mut redb::Table<'_, K, V>,
) -> StoreResult<()> {
    for row in snapshot
        .table(def)?
        .range::<K::SelfType<'static>>(.., false)?
    {
        let (key, value) = row.map_err(backend)?;
        into.insert(key.value(), value.value()).map_err(backend)?;
    }
    Ok(())
}
