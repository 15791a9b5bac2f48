//! `LeaseStore`: run leases, one row per task in `leases` (owner, token, expiry); whether a
//! lease has expired is `task_store::Lease::expired`, the rule every adapter applies.

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use task_store::{Conflict, Lease, LeaseStore, StoreResult};

use crate::EmbeddedStore;
use crate::commit::held_by;
use crate::error::backend;
use crate::items::{LEASES, LeaseDoc, lease_doc, parse};
use crate::tables::Tables;

fn put_lease(tables: &mut Tables, lease: Lease, doc: String) -> StoreResult<Lease> {
    tables
        .leases
        .insert(lease.task_id.as_str(), doc.as_str())
        .map_err(backend)?;
    Ok(lease)
}

#[async_trait]
impl LeaseStore for EmbeddedStore {
    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "acquire"))]
    async fn acquire(
        &self,
        task_id: &str,
        owner: &str,
        now: DateTime<Utc>,
        ttl: Duration,
    ) -> StoreResult<Lease> {
        let lease = Lease {
            task_id: task_id.to_owned(),
            owner: owner.to_owned(),
            token: uuid::Uuid::new_v4().to_string(),
            expires_at: now + ttl,
        };
        let doc = lease_doc(&lease)?;
        self.writer
            .write(
                (lease, doc),
                move |tables, (lease, _)| {
                    if let Some(held) =
                        tables.leases.get(lease.task_id.as_str()).map_err(backend)?
                    {
                        let held: LeaseDoc = parse("lease", held.value())?;
                        if !Lease::expired(held.expires_at, now) {
                            return Err(Conflict::LeaseHeld {
                                task_id: lease.task_id.clone(),
                                expires_at: held.expires_at,
                            }
                            .into());
                        }
                    }
                    Ok(())
                },
                |tables, (lease, doc), ()| put_lease(tables, lease, doc),
            )
            .await
    }

    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "renew"))]
    async fn renew(&self, lease: &Lease, now: DateTime<Utc>, ttl: Duration) -> StoreResult<Lease> {
        let renewed = Lease {
            expires_at: now + ttl,
            ..lease.clone()
        };
        let doc = lease_doc(&renewed)?;
        self.writer
            .write(
                (renewed, doc),
                |tables, (renewed, _)| held_by(tables, renewed),
                |tables, (renewed, doc), ()| put_lease(tables, renewed, doc),
            )
            .await
    }

    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "release"))]
    async fn release(&self, lease: &Lease) -> StoreResult<()> {
        self.writer
            .write(lease.clone(), held_by, |tables, lease, ()| {
                tables
                    .leases
                    .remove(lease.task_id.as_str())
                    .map_err(backend)?;
                Ok(())
            })
            .await
    }

    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "expired_leases"))]
    async fn expired_leases(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<Vec<String>> {
        self.read(|snapshot| {
            let mut expired = Vec::new();
            for entry in snapshot.table(LEASES)?.range::<&str>(.., false)? {
                let (task, doc) = entry.map_err(backend)?;
                let doc: LeaseDoc = parse("lease", doc.value())?;
                if Lease::expired(doc.expires_at, now) {
                    expired.push((doc.expires_at, task.value().to_owned()));
                }
            }
            expired.sort();
            Ok(expired
                .into_iter()
                .take(limit)
                .map(|(_, task)| task)
                .collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use task_store::contract::at;

    use super::*;

    /// The boundary of `Lease::expired`: a lease that expires at `now` has expired, for the
    /// sweeper and for another runner alike.
    #[tokio::test]
    async fn a_lease_expiring_exactly_now_is_expired() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(dir.path().join("store.redb")).expect("open");
        let ttl = Duration::seconds(30);
        let a = store.acquire("t-1", "runner-a", at(0), ttl).await;
        let expires_at = a.expect("free").expires_at;
        assert_eq!(expires_at, at(30));
        let mut listed = Vec::new();
        for now in [at(29), expires_at] {
            listed.push(store.expired_leases(now, 10).await.expect("expired"));
        }
        assert_eq!(listed, [vec![], vec!["t-1".to_owned()]]);
        let b = store.acquire("t-1", "runner-b", expires_at, ttl).await;
        assert_eq!(b.expect("taken as it expires").owner, "runner-b");
    }
}
