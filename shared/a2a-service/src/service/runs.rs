//! Running a queued message: here (with the lease its task was created with, or by taking
//! it) or handed to the dispatcher, once the write that queued it is durable.

use task_store::PendingCommit;
use tracing::warn;

use super::base::Service;
use super::outcome::Run;
use crate::error::ServiceError;
use crate::runner::Processed;

impl Service {
    /// Waits for the commit that created the task of a queued message, if it is still on its
    /// way, then tells the listeners of the events it appended.
    pub(super) async fn settle(
        &self,
        task_id: &str,
        committing: Option<PendingCommit>,
    ) -> Result<(), ServiceError> {
        if let Some(committing) = committing {
            committing.await?;
            self.appended(task_id);
        }
        Ok(())
    }

    /// Runs a queued message: here, or handed to the dispatcher when `hand_off` asks for it
    /// and one is configured. Returns once the write that queued it is durable, with what
    /// will tell the task as its run here processed the message (if it runs here and says).
    pub(super) async fn launch(
        &self,
        task_id: &str,
        mut run: Run,
        hand_off: bool,
    ) -> Result<Option<tokio::sync::oneshot::Receiver<Processed>>, ServiceError> {
        let processed = run.processed.take();
        if let (Some(dispatcher), true) = (&self.dispatcher, hand_off) {
            // Another process reads the task: it must be there first.
            self.settle(task_id, run.committing.take()).await?;
            if let Err(why) = dispatcher.dispatch(task_id, run.lease.clone()).await {
                // Run it here rather than leave it to the sweeper.
                warn!(
                    task_id,
                    why, "the run could not be handed off; running it here"
                );
                self.start(task_id, run);
                return Ok(processed);
            }
            return Ok(None);
        }
        // The run may start before its task's creation is durable: whatever it writes is
        // ordered after that commit, and group commit can make both durable together.
        let committing = run.committing.take();
        self.start(task_id, run);
        self.settle(task_id, committing).await?;
        Ok(processed)
    }

    /// Runs a queued message here: with the lease the task was created with (and what its
    /// creation committed), or by taking it.
    pub(super) fn start(&self, task_id: &str, run: Run) {
        match run.lease {
            Some(lease) => self.runner.kick_leased(lease, run.created.map(|c| *c)),
            None => self.runner.kick(task_id),
        };
    }
}
