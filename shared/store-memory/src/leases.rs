//! `LeaseStore`: one run lease per task id, judged by `Lease::expired`, the port's one
//! lease-expiry rule.

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use task_store::{Conflict, Lease, LeaseStore, StoreError, StoreResult};

use crate::MemoryStore;

fn lost(lease: &Lease) -> StoreError {
    Conflict::LeaseLost(lease.task_id.clone()).into()
}

#[async_trait]
impl LeaseStore for MemoryStore {
    async fn acquire(
        &self,
        task_id: &str,
        owner: &str,
        now: DateTime<Utc>,
        ttl: Duration,
    ) -> StoreResult<Lease> {
        let mut items = self.lock()?;
        if let Some(held) = items.leases.get(task_id)
            && !Lease::expired(held.expires_at, now)
        {
            return Err(Conflict::LeaseHeld {
                task_id: task_id.to_owned(),
                expires_at: held.expires_at,
            }
            .into());
        }
        items.leases_granted += 1;
        let lease = Lease {
            task_id: task_id.to_owned(),
            owner: owner.to_owned(),
            token: format!("lease-{}", items.leases_granted),
            expires_at: now + ttl,
        };
        items.leases.insert(task_id.to_owned(), lease.clone());
        Ok(lease)
    }

    async fn renew(&self, lease: &Lease, now: DateTime<Utc>, ttl: Duration) -> StoreResult<Lease> {
        let mut items = self.lock()?;
        if !items.holds(lease) {
            return Err(lost(lease));
        }
        let renewed = Lease {
            expires_at: now + ttl,
            ..lease.clone()
        };
        items.leases.insert(lease.task_id.clone(), renewed.clone());
        Ok(renewed)
    }

    async fn release(&self, lease: &Lease) -> StoreResult<()> {
        let mut items = self.lock()?;
        if !items.holds(lease) {
            return Err(lost(lease));
        }
        items.leases.remove(&lease.task_id);
        Ok(())
    }

    async fn expired_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<Vec<String>> {
        let items = self.lock()?;
        let mut expired: Vec<_> = items
            .leases
            .values()
            .filter(|lease| Lease::expired(lease.expires_at, now))
            .map(|lease| (lease.expires_at, lease.task_id.clone()))
            .collect();
        expired.sort();
        Ok(expired
            .into_iter()
            .take(limit)
            .map(|(_, task_id)| task_id)
            .collect())
    }
}
