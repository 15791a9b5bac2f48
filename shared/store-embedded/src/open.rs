//! Opening the store: the redb file (refusing one of an earlier layout), every table created
//! up front, then recovery (the write-ahead log replayed, [`writer::Log::recover`]) and the
//! writer started.

use std::path::Path;
use std::sync::{Arc, RwLock};

use redb::{Database, ReadableDatabase, ReadableTable, TableHandle};
use task_store::{StoreError, StoreResult};

use crate::error::backend;
use crate::items::{INDEX, OLD_LAYOUT_TABLES};
use crate::push::tasks_with_push_configs;
use crate::tables::FileTables;
use crate::wal::wal_paths;
use crate::{EmbeddedStore, Options, writer};

impl EmbeddedStore {
    /// Opens the store at `path`, creating it if needed.
    pub fn open(path: impl AsRef<Path>) -> StoreResult<Self> {
        Self::open_with(path, Options::default())
    }

    /// Opens the store at `path` with `options`, creating it if needed.
    pub fn open_with(path: impl AsRef<Path>, options: Options) -> StoreResult<Self> {
        let path = path.as_ref();
        let db = Database::builder()
            .set_cache_size(options.cache_bytes)
            .create(path)
            .map_err(backend)?;
        let txn = db.begin_write().map_err(backend)?;
        if let Some(old) = txn
            .list_tables()
            .map_err(backend)?
            .find(|t| OLD_LAYOUT_TABLES.contains(&t.name()))
        {
            return Err(StoreError::Invalid(format!(
                "{} was written by an earlier version of the embedded store (table {:?}); \
                 move it away to start afresh",
                path.display(),
                old.name()
            )));
        }
        // Create every table up front, so readers never meet a missing one.
        drop(FileTables::open(&txn).map_err(backend)?);
        txn.commit().map_err(backend)?;
        let (log, spare) = writer::Log::recover(&db, &wal_paths(path))?;
        build_listing_if_old(&db)?;
        let db = Arc::new(db);
        let view = Arc::new(writer::View::new(log.last_group(), &db)?);
        let push_tasks = Arc::new(RwLock::new(tasks_with_push_configs(&db)?));
        let writer = Arc::new(writer::Writer::start(
            db.clone(),
            view.clone(),
            log,
            spare,
            options.checkpoint_interval,
        )?);
        Ok(Self {
            db,
            view,
            writer,
            push_tasks,
            unlisted: None,
        })
    }
}

/// A file whose ListTasks index is that of the earlier layout (`participant_index`, one row
/// per participant and task, counted by reading them all) gets the listing tables built from
/// its task documents, once, in one durable transaction that also empties the old index (a
/// crash before it commits leaves the old index, so the next opening builds again).
fn build_listing_if_old(db: &Database) -> StoreResult<()> {
    let old_rows = {
        let txn = db.begin_read().map_err(backend)?;
        let index = txn.open_table(INDEX.table).map_err(backend)?;
        index.first().map_err(backend)?.is_some()
    };
    if !old_rows {
        return Ok(());
    }
    let txn = db.begin_write().map_err(backend)?;
    {
        let mut tables = FileTables::open(&txn).map_err(backend)?;
        let tasks = crate::list::rebuild(&mut tables)?;
        tracing::info!(tasks, "built the ListTasks tables of an earlier layout");
    }
    txn.commit().map_err(backend)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use redb::TableDefinition;

    use super::*;

    #[test]
    fn a_file_of_the_first_layout_is_refused_with_the_reason() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("old.redb");
        {
            let db = Database::create(&path).expect("create");
            let txn = db.begin_write().expect("write");
            let old: TableDefinition<&str, &str> = TableDefinition::new("tasks");
            txn.open_table(old)
                .expect("table")
                .insert("t", "{}")
                .expect("insert");
            txn.commit().expect("commit");
        }
        let err = EmbeddedStore::open(&path).err().expect("refused");
        assert!(err.to_string().contains("earlier version"), "{err}");
        assert!(err.to_string().contains("move it away"), "{err}");
    }

    #[tokio::test]
    async fn a_file_with_the_earlier_index_gets_the_listing_tables_built() {
        use a2a::TaskState;
        use task_core::extension::Role;
        use task_store::contract::{at, record};
        use task_store::{Change, ListQuery, NewTask, TaskStore};

        use crate::items::{BY_CONTEXT, BY_STATE, INDEX, LIST_COUNTS};

        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("old.redb");
        {
            let store = EmbeddedStore::open(&path).expect("open");
            let changes = (0..3)
                .map(|i| {
                    let state = if i == 0 {
                        TaskState::Working
                    } else {
                        TaskState::Completed
                    };
                    let team = [("alice", Role::Reporter), ("bob", Role::Watcher)];
                    let rec = record(&format!("t-{i}"), "ctx", &team, state, at(i));
                    Change::Create(Box::new(NewTask::new(rec)))
                })
                .collect();
            store.commit(changes).await.expect("create");
        }
        // What the earlier layout left: the old index's rows, none of the listing tables'.
        {
            let db = Database::create(&path).expect("reopen");
            let txn = db.begin_write().expect("write");
            {
                let mut tables = FileTables::open(&txn).expect("tables");
                tables.by_state.retain(|_, _| false).expect("clear");
                tables.by_context.retain(|_, _| false).expect("clear");
                tables.list_counts.retain(|_, _| false).expect("clear");
                for i in 0..3i64 {
                    let id = format!("t-{i}");
                    for who in ["alice", "bob"] {
                        tables
                            .index
                            .insert((who, at(i).timestamp(), 0, id.as_str()), ())
                            .expect("row");
                    }
                }
            }
            txn.commit().expect("commit");
            let read = db.begin_read().expect("read");
            assert!(
                read.open_table(BY_STATE.table)
                    .expect("t")
                    .first()
                    .expect("f")
                    .is_none()
            );
            assert!(
                read.open_table(BY_CONTEXT.table)
                    .expect("t")
                    .first()
                    .expect("f")
                    .is_none()
            );
            assert!(
                read.open_table(LIST_COUNTS.table)
                    .expect("t")
                    .first()
                    .expect("f")
                    .is_none()
            );
        }
        let store = EmbeddedStore::open(&path).expect("open again");
        let all = ListQuery {
            page_size: 2,
            ..Default::default()
        };
        let page = store.list("bob", &all).await.expect("list");
        assert_eq!(page.total_size, 3);
        assert_eq!(page.tasks[0].record.id, "t-2");
        let working = ListQuery {
            state: Some(TaskState::Working),
            ..all.clone()
        };
        let page = store.list("alice", &working).await.expect("list");
        assert_eq!(
            (page.total_size, page.tasks[0].record.id.as_str()),
            (1, "t-0")
        );
        let by_context = ListQuery {
            context_id: Some("ctx".into()),
            ..all
        };
        assert_eq!(
            store
                .list("alice", &by_context)
                .await
                .expect("list")
                .total_size,
            3
        );
        drop(store);
        let db = Database::create(&path).expect("reopen");
        let read = db.begin_read().expect("read");
        assert!(
            read.open_table(INDEX.table)
                .expect("t")
                .first()
                .expect("f")
                .is_none(),
            "the old index is emptied"
        );
    }
}
