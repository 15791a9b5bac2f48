//! The store contract suite against the memory store, each test on a fresh store.
#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed fixture is a failed test

use std::sync::Arc;

use store_memory::MemoryStore;
use task_store::Store;

async fn fresh_store() -> Arc<dyn Store> {
    Arc::new(MemoryStore::new())
}

task_store::contract_suite!(fresh_store());

/// Configs stored before configs had owners (which this store holds only when a test puts
/// one there): nobody's.
#[tokio::test]
async fn configs_without_owner_are_nobodys() {
    use task_store::PushConfigStore;
    use task_store::contract;

    let store = MemoryStore::new();
    contract::create_task_of_config_without_owner(&store).await;
    store
        .put_ownerless_push_config(contract::config_without_owner())
        .expect("put");
    assert!(store.may_have_push_configs("t-1"));

    contract::a_config_without_owner_is_nobodys(&store).await;
}
