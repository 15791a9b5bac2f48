//! ListTasks against the caller's task count on the embedded store (docs/performance.md,
//! "ListTasks"): `cargo bench -p store-embedded --bench list_tasks`. What it seeds and times:
//! `task_store::contract::list_bench`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use store_embedded::EmbeddedStore;
use task_store::contract::list_bench;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        list_bench::header();
        for n in list_bench::sizes() {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = EmbeddedStore::open(dir.path().join("tasks.redb")).expect("open");
            list_bench::run("embedded", Arc::new(store), None, n, (100, 4)).await;
        }
    });
}
