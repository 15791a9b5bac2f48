//! `RetentionStore`: the purge, under the store's one lock (so nothing comes between the
//! choice of tasks and their removal).

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use task_store::listing::{ListingChange, listed};
use task_store::retention::{Candidate, eligible};
use task_store::{Purged, RetentionStore, StoreResult};

use crate::MemoryStore;

#[async_trait]
impl RetentionStore for MemoryStore {
    async fn purge(&self, now: DateTime<Utc>, keep: Duration) -> StoreResult<Purged> {
        let mut items = self.lock()?;
        let mut candidates = Vec::new();
        for task in items.tasks.values() {
            candidates.extend(Candidate::of(&task.stored()?));
        }
        let removed: Vec<String> =
            eligible(&candidates, now, keep, |id| items.tasks.contains_key(id))
                .into_iter()
                .map(|c| c.task_id.clone())
                .collect();
        for id in &removed {
            if let Some(task) = items.tasks.remove(id) {
                let change = ListingChange {
                    removed: listed(&task.record()?),
                    added: Vec::new(),
                };
                items.listing.apply(id, &change);
            }
            items.leases.remove(id);
        }
        Ok(Purged {
            removed,
            expiring: Vec::new(),
        })
    }
}
