//! The store contract suite against the embedded store, each test on a fresh file.
#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed fixture is a failed test

use std::sync::Arc;

use store_embedded::EmbeddedStore;
use task_store::Store;

async fn fresh_store() -> Arc<dyn Store> {
    // Kept for the test's lifetime (the store holds the file open), under cargo's target/tmp.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tempdir")
        .keep();
    Arc::new(EmbeddedStore::open(dir.join("tasks.redb")).expect("open"))
}

task_store::contract_suite!(fresh_store());

/// The suite again with a checkpoint after every group: each test then reads rows from the
/// file and from the layers in memory at once, deletes included.
mod checkpoint_every_group {
    use std::sync::Arc;

    use store_embedded::{EmbeddedStore, Options};
    use task_store::Store;

    async fn fresh_store() -> Arc<dyn Store> {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("tempdir")
            .keep();
        let options = Options {
            checkpoint_interval: std::time::Duration::ZERO,
            ..Options::default()
        };
        Arc::new(EmbeddedStore::open_with(dir.join("tasks.redb"), options).expect("open"))
    }

    task_store::contract_suite!(fresh_store());
}
