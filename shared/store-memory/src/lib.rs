//! The in-memory reference store: the store port's contract (`task_store`) kept as plainly as
//! it can be, for tests that need a store but not a file. Every operation takes one lock over
//! plain maps ([`items`]), judges all its conditions, then applies all of it: a commit stands
//! or falls whole, and concurrent calls are serialised. Nothing is persisted.
//!
//! Documents are kept as the JSON `task_store::limits` encodes while it applies the size
//! rules, and parsed on reads, so what a test reads back has made the same round trip as in
//! the real adapters.

mod commit;
mod inbox;
mod items;
mod leases;
mod list;
mod push;
mod reads;
mod retention;
mod tasks;

use std::sync::{Arc, Mutex, MutexGuard};

use items::Items;
use task_store::{StoreError, StoreResult};

/// The store. Clones share the same state; it lives as long as the last clone.
#[derive(Clone, Default)]
pub struct MemoryStore {
    /// A std mutex: no operation awaits while it holds the lock.
    items: Arc<Mutex<Items>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The state, for one operation. A panic while the lock was held may have left a commit
    /// half applied, so a poisoned lock is an error from then on, never read.
    fn lock(&self) -> StoreResult<MutexGuard<'_, Items>> {
        self.items.lock().map_err(|_| {
            StoreError::Backend("the memory store was poisoned by a panic during a write".into())
        })
    }
}
