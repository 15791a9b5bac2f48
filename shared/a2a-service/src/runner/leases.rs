//! The runner's lease on a task: a new one for a task about to be created, taking one,
//! keeping it renewed while a turn works, giving it up, and the sweep that takes over the
//! tasks whose runner died (an expired lease).

use chrono::{Duration, Utc};
use task_store::{Conflict, Lease, StoreError};

use super::handle::Runner;
use super::interrupts::{Held, Watch};

impl Runner {
    /// A lease on a task about to be created, for [`NewTask::lease`]: its creator then runs
    /// it with [`kick_leased`](Self::kick_leased), without taking the lease in another write.
    ///
    /// [`NewTask::lease`]: task_store::NewTask::lease
    pub fn new_lease(&self, task_id: &str) -> Lease {
        Lease {
            task_id: task_id.to_owned(),
            owner: self.owner(),
            token: uuid::Uuid::new_v4().to_string(),
            expires_at: Utc::now() + self.ttl(),
        }
    }

    /// The task's lease, if nobody holds it: the caller then runs the task with
    /// [`kick_leased`](Self::kick_leased), even if it queued nothing after all (a message
    /// another sender queued meanwhile waits for this holder).
    pub async fn try_lease(&self, task_id: &str) -> Result<Option<Lease>, StoreError> {
        self.acquire_as(task_id, &self.owner()).await
    }

    /// The task's lease for `owner`; `None` if another holds it.
    pub(super) async fn acquire_as(
        &self,
        task_id: &str,
        owner: &str,
    ) -> Result<Option<Lease>, StoreError> {
        match self
            .inner
            .store
            .acquire(task_id, owner, Utc::now(), self.ttl())
            .await
        {
            Ok(lease) => Ok(Some(lease)),
            Err(StoreError::Conflict(Conflict::LeaseHeld { .. })) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Gives the lease up; one already lost (expired and taken over) is given up all the same.
    pub(super) async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        match self.inner.store.release(lease).await {
            Ok(()) | Err(StoreError::Conflict(Conflict::LeaseLost(_))) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Runs again the tasks whose runner died: every lease that expired before now is taken
    /// over and its task's inbox drained. Returns the tasks taken over.
    pub async fn sweep(&self) -> Result<Vec<String>, StoreError> {
        let expired = self.inner.store.expired_leases(Utc::now(), 100).await?;
        telemetry::metrics::lease_takeovers(expired.len());
        for task_id in &expired {
            tracing::info!(task_id, "a runner's lease expired; running the task again");
            self.kick(task_id);
        }
        Ok(expired)
    }

    /// Drives `work` while keeping the lease: renewed whenever half of its lifetime is gone,
    /// however long the work takes (a model call may outlast the lease). A renewal that fails
    /// (the lease was lost, the store is down) drops the work at its next await: another
    /// runner may hold the task by then, and the store's conditional writes let nothing the
    /// dropped work began be recorded twice. With a `watch`, an interrupt queued while the
    /// agent runs drops the work too ([`Held::Interrupted`]), the lease kept.
    pub(super) async fn holding<T>(
        &self,
        mut lease: Lease,
        ttl: Duration,
        watch: Option<Watch<'_>>,
        work: impl std::future::Future<Output = T>,
    ) -> Result<(Held<T>, Lease), StoreError> {
        tokio::pin!(work);
        let interrupts = async {
            match watch {
                Some(watch) => self.interrupts(watch).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(interrupts);
        loop {
            let renew_at = lease.expires_at - ttl / 2;
            let wait = (renew_at - Utc::now()).to_std().unwrap_or_default();
            tokio::select! {
                biased;
                done = &mut work => return Ok((Held::Done(done), lease)),
                by = &mut interrupts => return Ok((Held::Interrupted(by), lease)),
                () = tokio::time::sleep(wait) => {
                    match self.inner.store.renew(&lease, Utc::now(), ttl).await {
                        Ok(renewed) => lease = renewed,
                        // The work's last write, queued before the renewal, may have given
                        // the lease up: then the work is done as soon as it looks.
                        Err(err @ StoreError::Conflict(Conflict::LeaseLost(_))) => {
                            return match futures::FutureExt::now_or_never(&mut work) {
                                Some(done) => Ok((Held::Done(done), lease)),
                                None => Err(err),
                            };
                        }
                        Err(err) => return Err(err),
                    }
                }
            }
        }
    }
}
