//! The `Runner` handle: what it holds, the runs it started in the background, and the entry
//! points that start a run (here, in the background, or on a lease the caller holds).

use std::sync::Arc;

use a2a::Message;
use chrono::Duration;
use task_store::{InboxItem, Lease, Store, StoreError, StoredTask};
use tracing::warn;

use super::interrupts::Interruptible;
use crate::agents::Agent;
use crate::config::ServiceConfig;
use crate::listener::EventListener;

/// A task its creator just committed with its first message queued and its lease held:
/// what the creator hands its runner so the first run reads neither back.
pub struct Created {
    pub task: StoredTask,
    pub item: InboxItem,
    /// Told the task as the run of this message committed it (dropped unanswered if the run
    /// stopped, or another runner recorded the message): a blocking send in this process
    /// answers from it instead of following the event log.
    pub processed: Option<tokio::sync::oneshot::Sender<Processed>>,
}

/// How the run of a task's first message left the task.
pub struct Processed {
    pub task: StoredTask,
    /// The task's whole history at that version, when the run knows it without reading it
    /// back: the outcome's commit appended it to a task that had none.
    pub history: Option<Vec<Message>>,
}

/// What processing a message hands back besides the task, set up by the caller and filled
/// in by the commit of its outcome.
#[derive(Default)]
pub(super) struct RunEnd {
    /// The runner's lease, when this message ends the run: the outcome's commit gives it up
    /// (and takes it out of here).
    pub(super) lease: Option<Lease>,
    /// Whether the caller wants [`history`](Self::history).
    pub(super) wants_history: bool,
    /// The task's whole history after the outcome, if the outcome knows it (see
    /// [`Processed::history`]).
    pub(super) history: Option<Vec<Message>>,
    /// Open while the agent runs on the message: an interrupt may cut the work then.
    pub(super) interruptible: Interruptible,
}

#[derive(Clone)]
pub struct Runner {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) store: Arc<dyn Store>,
    pub(super) config: Arc<ServiceConfig>,
    pub(super) agent: Arc<dyn Agent>,
    listener: Option<Arc<dyn EventListener>>,
    /// Runs started in the background and maybe not finished (see [`Runner::settle`]).
    in_flight: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The clock interrupt watches look at the inbox by (one timer per runner).
    pub(super) looks: super::interrupts::LookClock,
}

/// How many times a runner re-reads a task whose version moved under it before giving the
/// message back to the inbox (another writer is very busy; the next run retries).
pub(super) const MAX_RETRIES: usize = 20;

impl Runner {
    pub fn new(
        store: Arc<dyn Store>,
        config: Arc<ServiceConfig>,
        agent: Arc<dyn Agent>,
        listener: Option<Arc<dyn EventListener>>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                config,
                agent,
                listener,
                in_flight: std::sync::Mutex::new(Vec::new()),
                looks: Default::default(),
            }),
        }
    }

    fn track(&self, run: tokio::task::JoinHandle<()>) {
        let mut in_flight = self
            .inner
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        in_flight.retain(|r| !r.is_finished());
        in_flight.push(run);
    }

    /// Waits for every run started so far in the background. A Lambda invocation calls it
    /// before it ends: the execution environment is frozen between invocations, and a run
    /// frozen half-way would hold its lease and its message until it thaws.
    pub async fn settle(&self) {
        loop {
            let runs: Vec<_> = std::mem::take(
                &mut *self
                    .inner
                    .in_flight
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()),
            );
            if runs.is_empty() {
                return;
            }
            for run in runs {
                let _ = run.await; // a run that panicked is over all the same
            }
        }
    }

    pub(super) fn ttl(&self) -> Duration {
        Duration::from_std(self.inner.config.lease_ttl).unwrap_or(Duration::seconds(30))
    }

    pub(super) fn owner(&self) -> String {
        format!("{}:{}", self.inner.config.instance_id, uuid::Uuid::new_v4())
    }

    /// Runs the task in the background (if nobody else runs it).
    pub fn kick(&self, task_id: &str) {
        let runner = self.clone();
        let task_id = task_id.to_owned();
        // The run stays in the trace of the request (or turn) that queued its message.
        // Boxed where it starts: the run's future is large, and a spawned future is copied
        // each time the runtime moves it (spawned, bound, finished).
        self.track(tokio::spawn(telemetry::traces::carry(async move {
            Box::pin(runner.run(&task_id)).await
        })));
    }

    /// Runs in the background a task whose lease this runner already holds; `first`, when
    /// the caller just created the task, is what it committed (the first queued message is
    /// then run without reading the inbox and the task back).
    pub fn kick_leased(&self, lease: Lease, first: Option<Created>) {
        let runner = self.clone();
        self.track(tokio::spawn(telemetry::traces::carry(async move {
            let task_id = lease.task_id.clone();
            let run = Box::pin(runner.try_run(&task_id, Some(lease), first));
            runner.report(&task_id, run.await);
        })));
    }

    /// Takes the lease and drains the inbox; returns at once if another runner holds it.
    pub async fn run(&self, task_id: &str) {
        self.report(task_id, self.try_run(task_id, None, None).await);
    }

    /// Runs the task here and now: with `lease` when the caller hands one over (a run
    /// dispatched by another process), else by taking it.
    pub async fn run_with(&self, task_id: &str, lease: Option<Lease>) {
        self.report(task_id, self.try_run(task_id, lease, None).await);
    }

    fn report(&self, task_id: &str, outcome: Result<(), StoreError>) {
        if let Err(err) = outcome {
            warn!(task_id, error = %err, "run stopped; the inbox keeps what was not processed");
        }
    }

    pub(super) fn appended(&self, task_id: &str) {
        if let Some(listener) = &self.inner.listener {
            listener.events_appended(task_id);
        }
    }

    /// An event for this process's streams only (not stored).
    pub(super) fn transient(&self, task_id: &str, after: u64, event: a2a::StreamResponse) {
        if let Some(listener) = &self.inner.listener {
            listener.transient(task_id, after, event);
        }
    }

    pub(super) async fn read(&self, task_id: &str) -> Result<StoredTask, StoreError> {
        self.inner
            .store
            .get(task_id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("task {task_id}")))
    }
}
