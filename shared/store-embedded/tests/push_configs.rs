//! Push configs stored before configs had owners (the bare config JSON in `push_configs`):
//! they read back without owner, nobody can take their id over, only a delete scoped to
//! configs without owner (or an admin's) removes them, and the caps do not count them.
#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed fixture is a failed test

use redb::{Database, TableDefinition};
use store_embedded::EmbeddedStore;
use task_store::PushConfigStore;
use task_store::contract;

const PUSH: TableDefinition<(&str, &str), &str> = TableDefinition::new("push_configs");

#[tokio::test]
async fn configs_without_owner_are_nobodys() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let path = dir.path().join("tasks.redb");
    {
        // A file holding a config as this store wrote them before configs had owners.
        let db = Database::create(&path).expect("create");
        let txn = db.begin_write().expect("write");
        let legacy = serde_json::to_string(&contract::config_without_owner()).unwrap();
        txn.open_table(PUSH)
            .expect("table")
            .insert(("t-1", "old"), legacy.as_str())
            .expect("insert");
        txn.commit().expect("commit");
    }
    let store = EmbeddedStore::open(&path).expect("open");
    contract::create_task_of_config_without_owner(&store).await;
    assert!(store.may_have_push_configs("t-1"));

    contract::a_config_without_owner_is_nobodys(&store).await;
}
