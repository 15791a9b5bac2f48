//! One runner per task: the holder of the task's lease drains its inbox, one message at a
//! time, in inbox order, and runs the agent on each.
//!
//! Any invocation that queued a message may become the runner: it tries the lease, and if
//! another holds it the message waits for that holder, which drains the inbox before it
//! releases and looks once more after releasing (a message queued in between is picked up).
//! The release goes with the outcome of the last message the runner has (one write, not
//! two); when that outcome is not the usual one (a refusal, a note), it is a write of its own.
//! A message leaves the inbox only in the commit that records its outcome (the reply, the
//! refusal), so a runner that dies mid-turn leaves it queued for the next one.

use std::sync::Arc;

use a2a::{Artifact, Message, PartContent, StreamResponse, TaskArtifactUpdateEvent, TaskState};
use chrono::{Duration, Utc};
use task_core::envelope::{self, Envelope};
use task_core::lifecycle::{self, LifecycleEvent, TurnSummary};
use task_core::policy::{self, Action};
use task_core::task::HelpRequest;
use task_core::{A2UI_MEDIA_TYPE, EVENT_MEDIA_TYPE, TASK_MEDIA_TYPE};
use task_store::{
    AuditEntry, Change, Conflict, InboxItem, Lease, Store, StoreError, StoredTask, TaskUpdate,
};
use tracing::{debug, warn};

use crate::agents::{Agent, AgentReply, ArtifactChunk, TurnEnd};
use crate::config::ServiceConfig;
use crate::listener::EventListener;
use crate::{subtasks, view};

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
struct RunEnd {
    /// The runner's lease, when this message ends the run: the outcome's commit gives it up
    /// (and takes it out of here).
    lease: Option<Lease>,
    /// Whether the caller wants [`history`](Self::history).
    wants_history: bool,
    /// The task's whole history after the outcome, if the outcome knows it (see
    /// [`Processed::history`]).
    history: Option<Vec<Message>>,
}

#[derive(Clone)]
pub struct Runner {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    config: Arc<ServiceConfig>,
    agent: Arc<dyn Agent>,
    listener: Option<Arc<dyn EventListener>>,
    /// Runs started in the background and maybe not finished (see [`Runner::settle`]).
    in_flight: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// How many times a runner re-reads a task whose version moved under it before giving the
/// message back to the inbox (another writer is very busy; the next run retries).
const MAX_RETRIES: usize = 20;

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

    fn ttl(&self) -> Duration {
        Duration::from_std(self.inner.config.lease_ttl).unwrap_or(Duration::seconds(30))
    }

    fn owner(&self) -> String {
        format!("{}:{}", self.inner.config.instance_id, uuid::Uuid::new_v4())
    }

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
        match self
            .inner
            .store
            .acquire(task_id, &self.owner(), Utc::now(), self.ttl())
            .await
        {
            Ok(lease) => Ok(Some(lease)),
            Err(StoreError::Conflict(Conflict::LeaseHeld { .. })) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Runs again the tasks whose runner died: every lease that expired before now is taken
    /// over and its task's inbox drained. Returns the tasks taken over.
    pub async fn sweep(&self) -> Result<Vec<String>, StoreError> {
        let expired = self.inner.store.expired_leases(Utc::now(), 100).await?;
        for task_id in &expired {
            tracing::info!(task_id, "a runner's lease expired; running the task again");
            self.kick(task_id);
        }
        Ok(expired)
    }

    /// Runs the task in the background (if nobody else runs it).
    pub fn kick(&self, task_id: &str) {
        let runner = self.clone();
        let task_id = task_id.to_owned();
        self.track(tokio::spawn(async move { runner.run(&task_id).await }));
    }

    /// Runs in the background a task whose lease this runner already holds; `first`, when
    /// the caller just created the task, is what it committed (the first queued message is
    /// then run without reading the inbox and the task back).
    pub fn kick_leased(&self, lease: Lease, first: Option<Created>) {
        let runner = self.clone();
        self.track(tokio::spawn(async move {
            let task_id = lease.task_id.clone();
            runner.report(&task_id, runner.try_run(&task_id, Some(lease), first).await);
        }));
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

    async fn try_run(
        &self,
        task_id: &str,
        mut held: Option<Lease>,
        mut first: Option<Created>,
    ) -> Result<(), StoreError> {
        let store = &self.inner.store;
        let owner = self.owner();
        let ttl = self.ttl();
        loop {
            let acquired = match held.take() {
                Some(lease) => Ok(lease),
                None => store.acquire(task_id, &owner, Utc::now(), ttl).await,
            };
            let mut lease = match acquired {
                Ok(lease) => lease,
                Err(StoreError::Conflict(Conflict::LeaseHeld { .. })) => return Ok(()),
                Err(err) => return Err(err),
            };
            let given_up = loop {
                let (items, mut known, mut processed) = match first.take() {
                    Some(created) => (vec![created.item], Some(created.task), created.processed),
                    None => (store.inbox(task_id).await?, None, None),
                };
                if items.is_empty() {
                    break false;
                }
                // The run ends with the last message it has: that message's outcome gives the
                // lease up in the same write (the look at the inbox below catches a message
                // queued meanwhile).
                let last = items.len() - 1;
                let mut given_up = false;
                for (n, item) in items.into_iter().enumerate() {
                    let mut end = RunEnd {
                        lease: (n == last).then(|| lease.clone()),
                        wants_history: processed.is_some(),
                        history: None,
                    };
                    let work = self.process(task_id, &item, known.take(), &mut end);
                    let (outcome, renewed) = self.holding(lease, ttl, work).await?;
                    lease = renewed;
                    given_up = n == last && end.lease.is_none();
                    if let (Some(tell), Some(task)) = (processed.take(), outcome?) {
                        let history = end.history.take();
                        let _ = tell.send(Processed { task, history }); // the sender may have gone
                    }
                }
                if given_up {
                    break true;
                }
            };
            if !given_up {
                match store.release(&lease).await {
                    Ok(()) | Err(StoreError::Conflict(Conflict::LeaseLost(_))) => {}
                    Err(err) => return Err(err),
                }
            }
            // A message queued after the last look found the lease held: it is ours.
            if store.inbox(task_id).await?.is_empty() {
                return Ok(());
            }
        }
    }

    /// Drives `work` while keeping the lease: renewed whenever half of its lifetime is gone,
    /// however long the work takes (a model call may outlast the lease). A renewal that fails
    /// (the lease was lost, the store is down) drops the work at its next await: another
    /// runner may hold the task by then, and the store's conditional writes let nothing the
    /// dropped work began be recorded twice.
    async fn holding<T>(
        &self,
        mut lease: Lease,
        ttl: Duration,
        work: impl std::future::Future<Output = T>,
    ) -> Result<(T, Lease), StoreError> {
        tokio::pin!(work);
        loop {
            let renew_at = lease.expires_at - ttl / 2;
            let wait = (renew_at - Utc::now()).to_std().unwrap_or_default();
            tokio::select! {
                biased;
                done = &mut work => return Ok((done, lease)),
                () = tokio::time::sleep(wait) => {
                    match self.inner.store.renew(&lease, Utc::now(), ttl).await {
                        Ok(renewed) => lease = renewed,
                        // The work's last write, queued before the renewal, may have given
                        // the lease up: then the work is done as soon as it looks.
                        Err(err @ StoreError::Conflict(Conflict::LeaseLost(_))) => {
                            return match futures::FutureExt::now_or_never(&mut work) {
                                Some(done) => Ok((done, lease)),
                                None => Err(err),
                            };
                        }
                        Err(err) => return Err(err),
                    }
                }
            }
        }
    }

    fn appended(&self, task_id: &str) {
        if let Some(listener) = &self.inner.listener {
            listener.events_appended(task_id);
        }
    }

    /// Commits one update with the notes its change of state owes the task's parents, and
    /// returns the task as it now is (no read back). A parent that ended meanwhile takes no
    /// note: the commit is tried again without them.
    async fn commit(&self, update: TaskUpdate) -> Result<StoredTask, StoreError> {
        self.commit_with(update, Vec::new()).await
    }

    /// [`commit`](Self::commit), with more changes in the same transaction (children).
    async fn commit_with(
        &self,
        update: TaskUpdate,
        more: Vec<Change>,
    ) -> Result<StoredTask, StoreError> {
        let applied = update.applied();
        let has_events = !update.events.is_empty();
        let mut changes = vec![Change::Update(Box::new(update))];
        changes.extend(more);
        let created: Vec<String> = changes
            .iter()
            .filter_map(|c| match c {
                Change::Create(new) => Some(new.record.id.clone()),
                _ => None,
            })
            .collect();
        let noted =
            subtasks::commit(&*self.inner.store, changes, &self.inner.config.agent_id).await?;
        if has_events {
            self.appended(&applied.record.id);
        }
        for task_id in created {
            self.appended(&task_id);
        }
        for parent in noted {
            self.kick(&parent);
        }
        Ok(applied)
    }

    async fn read(&self, task_id: &str) -> Result<StoredTask, StoreError> {
        self.inner
            .store
            .get(task_id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("task {task_id}")))
    }

    /// One inbox item, from intake to the committed outcome; `known` is the task as its
    /// creator committed it, if the caller has it (a retry reads it again). Returns the task
    /// as the outcome left it, `None` if another runner recorded the item.
    async fn process(
        &self,
        task_id: &str,
        item: &InboxItem,
        mut known: Option<StoredTask>,
        end: &mut RunEnd,
    ) -> Result<Option<StoredTask>, StoreError> {
        for _ in 0..MAX_RETRIES {
            let stored = match known.take() {
                Some(task) => task,
                None => self.read(task_id).await?,
            };
            match self.attempt(&stored, item, end).await {
                Err(StoreError::Conflict(Conflict::TaskChanged(_))) => continue,
                // Another runner recorded it (a lease that expired under a slow turn).
                Err(StoreError::Conflict(Conflict::InboxItemGone(_))) => return Ok(None),
                other => return other.map(Some),
            }
        }
        Err(StoreError::Conflict(Conflict::TaskChanged(
            task_id.to_owned(),
        )))
    }

    async fn attempt(
        &self,
        stored: &StoredTask,
        item: &InboxItem,
        end: &mut RunEnd,
    ) -> Result<StoredTask, StoreError> {
        let record = &stored.record;
        let now = Utc::now();
        let audit = |accepted: bool, reason: &str| {
            AuditEntry::new(
                now,
                &item.key.message_id,
                Some(&item.sender),
                accepted,
                reason,
            )
        };
        let note =
            subtasks::Note::of(&item.message).filter(|_| item.sender == self.inner.config.agent_id);
        // Intake again: the task may have ended, or the sender left it, since the message was
        // queued. A note comes from this runtime, whatever the participants.
        let refusal = if lifecycle::TERMINAL.contains(record.state()) {
            Some("the task is in a terminal state".to_owned())
        } else if note.is_none()
            && policy::authorize(&record.extension, &item.sender, Action::Send).is_err()
        {
            Some("not a participant".to_owned())
        } else {
            None
        };
        if let Some(reason) = refusal {
            let mut update = TaskUpdate::new(stored.clone());
            update.consume_inbox = vec![item.key.clone()];
            update.audit = vec![audit(false, &reason)];
            debug!(task_id = %record.id, message_id = %item.key.message_id, %reason, "queued message refused");
            return self.commit(update).await;
        }
        if let Some(note) = note {
            return self.take_note(stored, item, &note, end).await;
        }
        if record.agent.awaiting_participant.as_deref() == Some(item.sender.as_str()) {
            return self.assignee_replied(stored, item).await;
        }

        let answers = record
            .agent
            .pending_help
            .as_ref()
            .is_some_and(|h| h.participant_id == item.sender);
        let lifecycle = record.extension.effective_lifecycle();
        let event = LifecycleEvent::MessageAccepted {
            answers_help_request: answers,
        };
        let accepted = match lifecycle::next(record.state(), record.sub_state, lifecycle, event) {
            Ok(transition) => transition,
            Err(err) => {
                let mut update = TaskUpdate::new(stored.clone());
                update.consume_inbox = vec![item.key.clone()];
                update.audit = vec![audit(false, &err.to_string())];
                return self.commit(update).await;
            }
        };
        let mid = item.key.message_id.as_str();

        if !accepted.runs_agent || record.agent.awaiting_participant.is_some() {
            // Recorded while the task waits for someone else's answer.
            let waiting_for = record
                .agent
                .pending_help
                .as_ref()
                .map(|h| h.participant_id.as_str())
                .or(record.agent.awaiting_participant.as_deref())
                .unwrap_or("the asked participant");
            let text = format!("message recorded; the task waits for {waiting_for} to answer");
            let mut update = TaskUpdate::new(stored.clone());
            update.allowed_states = accepted.from.to_vec();
            update.consume_inbox = vec![item.key.clone()];
            update.history = vec![item.message.clone()];
            update.events = vec![a2a::StreamResponse::StatusUpdate(view::notice(
                stored,
                &text,
                now,
                Some(mid),
            ))];
            update.audit = vec![audit(true, "recorded")];
            return self.commit(update).await;
        }

        let input = agent_input(item, record.agent.pending_help.as_ref().filter(|_| answers));
        self.run_agent(stored, item, &accepted, answers, input, end)
            .await
    }

    /// Moves the task to WORKING (if it is not) and runs the agent on `input`, then commits
    /// the run's outcome with the lifecycle rule.
    async fn run_agent(
        &self,
        stored: &StoredTask,
        item: &InboxItem,
        accepted: &lifecycle::Transition,
        answers: bool,
        input: String,
        end: &mut RunEnd,
    ) -> Result<StoredTask, StoreError> {
        let record = &stored.record;
        let mid = item.key.message_id.as_str();
        // The task works on it; the message stays queued until its outcome is committed.
        let mut working = stored.clone();
        if accepted.changes(record.state(), record.sub_state) || answers {
            let mut next = record.clone();
            next.status = view::status(TaskState::Working, None, Utc::now());
            next.sub_state = None;
            if answers {
                next.agent.pending_help = None;
            }
            let mut update = TaskUpdate::new(stored.clone());
            update.allowed_states = accepted.from.to_vec();
            update.events = vec![view::status_update(&next, Some(mid))];
            update.record = Some(next);
            working = self.commit(update).await?;
        }

        let mut turn = TurnContext {
            runner: self,
            task: working,
            item,
            input,
        };
        let reply = self.inner.agent.run(&mut turn).await?;
        let latest = turn.task;
        self.record_outcome(latest, item, reply, end).await
    }

    /// Commits the outcome of a run: the message and the reply in the history, the next
    /// state by the lifecycle rule, the reply's artifacts and transcript entries.
    /// `end.lease`, when the run ends with this message, is the runner's lease: the outcome's
    /// commit gives it up (and takes it out of `end`).
    async fn record_outcome(
        &self,
        latest: StoredTask,
        item: &InboxItem,
        reply: AgentReply,
        end: &mut RunEnd,
    ) -> Result<StoredTask, StoreError> {
        let task_id = latest.record.id.clone();
        let mid = item.key.message_id.as_str();
        let audit = |accepted: bool, reason: &str| {
            AuditEntry::new(
                Utc::now(),
                &item.key.message_id,
                Some(&item.sender),
                accepted,
                reason,
            )
        };
        // On the task as the run left it: unless someone changed it meanwhile (then the
        // commit's version check fails and we read it again).
        let mut fresh = Some(latest);
        for _ in 0..MAX_RETRIES {
            let current = match fresh.take() {
                Some(task) => task,
                None => self.read(&task_id).await?,
            };
            if lifecycle::TERMINAL.contains(current.record.state()) {
                let mut update = TaskUpdate::new(current.clone());
                update.consume_inbox = vec![item.key.clone()];
                update.history = vec![item.message.clone()];
                update.transcript = reply.transcript.clone();
                let reason = format!(
                    "the task became {} during the turn",
                    lifecycle::short_state_name(current.record.state())
                );
                update.audit = vec![audit(true, &reason)];
                return self.commit(update).await;
            }
            let extension = &current.record.extension;
            let event = match &reply.end {
                TurnEnd::Lifecycle => {
                    LifecycleEvent::TurnEnded(TurnSummary::of(extension, false, false))
                }
                TurnEnd::AwaitAnswer(_) => {
                    LifecycleEvent::TurnEnded(TurnSummary::of(extension, true, true))
                }
                TurnEnd::Complete => LifecycleEvent::AgentCompleted {
                    unresolved_sub_tasks: extension.unresolved_sub_tasks().next().is_some(),
                },
                TurnEnd::Reject => LifecycleEvent::Reject,
                TurnEnd::Fail(_) => LifecycleEvent::RunFailed,
                TurnEnd::TurnLimit => LifecycleEvent::TurnLimitReached,
                TurnEnd::Remote(state) => match state {
                    TaskState::Completed => LifecycleEvent::AgentCompleted {
                        unresolved_sub_tasks: false,
                    },
                    TaskState::Rejected => LifecycleEvent::Reject,
                    TaskState::Canceled => LifecycleEvent::Cancel,
                    _ => LifecycleEvent::RunFailed,
                },
            };
            let lifecycle = extension.effective_lifecycle();
            let transition = match (&reply.end, current.record.state()) {
                // A relayed sub-task waits where the remote task waits; the parent is told.
                (
                    TurnEnd::Remote(remote @ (TaskState::InputRequired | TaskState::AuthRequired)),
                    TaskState::Working,
                ) => lifecycle::Transition {
                    from: &[TaskState::Working],
                    to: remote.clone(),
                    sub_state: (*remote == TaskState::InputRequired)
                        .then_some(task_core::extension::SubState::AwaitingNextMessage),
                    runs_agent: false,
                },
                _ => match lifecycle::next(
                    current.record.state(),
                    current.record.sub_state,
                    lifecycle,
                    event,
                ) {
                    Ok(t) => t,
                    Err(err) => {
                        warn!(task_id, error = %err, "turn outcome does not fit the task's state");
                        return Err(StoreError::Conflict(Conflict::TaskChanged(task_id)));
                    }
                },
            };
            let now = Utc::now();
            let mut next = current.record.clone();
            let message = match &reply.end {
                TurnEnd::AwaitAnswer(help) => {
                    next.agent.pending_help = Some(help.clone());
                    help.status_message(&next.id, &next.context_id, &self.inner.config.agent_id)
                }
                TurnEnd::Fail(reason) => view::agent_message(&current.record, reason.clone()),
                TurnEnd::TurnLimit => view::agent_message(&current.record, "turn limit reached"),
                _ => view::agent_message(&current.record, reply.text.clone()),
            };
            next.status = view::status(transition.to.clone(), Some(view::bounded(&message)), now);
            next.sub_state = transition.sub_state;
            let mut update = TaskUpdate::new(current.clone());
            update.allowed_states = transition.from.to_vec();
            update.consume_inbox = vec![item.key.clone()];
            update.history = vec![item.message.clone(), message.clone()];
            update.transcript = reply.transcript.clone();
            if !reply.artifacts.is_empty() {
                let stored = self.inner.store.artifacts(&task_id).await?;
                update.artifacts = merge_artifacts(&stored, &reply.artifacts);
                update.events = artifact_events(&current.record, &reply);
            }
            let mut event = view::status_update(&next, Some(mid));
            if let StreamResponse::StatusUpdate(update) = &mut event {
                // The event carries the whole reply; the task document a bounded copy.
                update.status.message = Some(message);
            }
            update.events.push(event);
            update.audit = vec![audit(true, "accepted")];
            update.record = Some(next);
            update.release = end.lease.clone();
            // A task that had no history has exactly the two messages appended here.
            let whole_history = (end.wants_history && current.counters.history == 0)
                .then(|| update.history.clone());
            match self.commit(update).await {
                Err(StoreError::Conflict(Conflict::TaskChanged(_))) => continue,
                Err(StoreError::TooLarge(why)) => {
                    return self.fail_unstorable(&current, item, &why).await;
                }
                Ok(task) => {
                    end.lease = None; // given up with the outcome
                    end.history = whole_history;
                    return Ok(task);
                }
                other => return other,
            }
        }
        Err(StoreError::Conflict(Conflict::TaskChanged(task_id)))
    }

    /// A sub-task's note: the child's state mirrored into this task's `TaskRef`, and, when
    /// the child ended or waits, the agent told (the note resumes the run by the lifecycle
    /// rule).
    async fn take_note(
        &self,
        stored: &StoredTask,
        item: &InboxItem,
        note: &subtasks::Note,
        end: &mut RunEnd,
    ) -> Result<StoredTask, StoreError> {
        let record = &stored.record;
        if !subtasks::lists_child(record, &note.task_id) {
            // Only a link the service made carries notes (both ends record it).
            let mut update = TaskUpdate::new(stored.clone());
            update.consume_inbox = vec![item.key.clone()];
            update.audit = vec![AuditEntry::new(
                Utc::now(),
                &item.key.message_id,
                Some(&item.sender),
                false,
                &format!(
                    "note of task {} dropped: not a sub-task of this task",
                    note.task_id
                ),
            )];
            return self.commit(update).await;
        }
        let mut next = record.clone();
        lifecycle::mirror_sub_task(
            &mut next.extension,
            &note.task_id,
            &note.state,
            note.sub_state,
        );
        let audit = AuditEntry::new(
            Utc::now(),
            &item.key.message_id,
            Some(&item.sender),
            true,
            &format!(
                "sub-task {} is {}",
                note.task_id,
                lifecycle::short_state_name(&note.state)
            ),
        );
        let lifecycle = record.extension.effective_lifecycle();
        let transition = if note.wake {
            lifecycle::next(
                record.state(),
                record.sub_state,
                lifecycle,
                LifecycleEvent::SubtaskChanged,
            )
            .ok()
        } else {
            None
        };
        match transition {
            Some(t) if t.runs_agent => {
                // The mirror goes with the move to WORKING; the note is what the agent reads.
                let mut mirrored = stored.clone();
                if next != *record {
                    let mut update = TaskUpdate::new(stored.clone());
                    update.record = Some(next);
                    mirrored = self.commit(update).await?;
                }
                let input = agent_input(item, None);
                self.run_agent(&mirrored, item, &t, false, input, end).await
            }
            _ => {
                let mut update = TaskUpdate::new(stored.clone());
                update.consume_inbox = vec![item.key.clone()];
                if note.wake {
                    update.history = vec![item.message.clone()];
                }
                update.audit = vec![audit];
                if next != *record {
                    update.record = Some(next);
                }
                self.commit(update).await
            }
        }
    }

    /// The assignee of a participant's task answered: the task is done, with the answer as
    /// its status message.
    async fn assignee_replied(
        &self,
        stored: &StoredTask,
        item: &InboxItem,
    ) -> Result<StoredTask, StoreError> {
        let record = &stored.record;
        let audit = AuditEntry::new(
            Utc::now(),
            &item.key.message_id,
            Some(&item.sender),
            true,
            "the assignee answered",
        );
        let mut update = TaskUpdate::new(stored.clone());
        update.consume_inbox = vec![item.key.clone()];
        update.history = vec![item.message.clone()];
        update.audit = vec![audit];
        match lifecycle::next(
            record.state(),
            record.sub_state,
            record.extension.effective_lifecycle(),
            LifecycleEvent::AssigneeReplied,
        ) {
            Ok(transition) => {
                let mut next = record.clone();
                let text = message_text(&item.message, &item.sender);
                let mut answer = view::agent_message(record, text);
                answer.role = a2a::Role::User;
                next.status = view::status(transition.to, Some(view::bounded(&answer)), Utc::now());
                next.sub_state = transition.sub_state;
                next.agent.awaiting_participant = None;
                update.allowed_states = transition.from.to_vec();
                update.events = vec![view::status_update(&next, Some(&item.key.message_id))];
                update.record = Some(next);
            }
            Err(err) => {
                debug!(task_id = %record.id, error = %err, "the assignee's message came at a state that completes nothing");
            }
        }
        self.commit(update).await
    }
}

/// What an agent's run works with: the task (WORKING, as last committed), the message it
/// runs on, what it reads of it, and [`commit_turn`](Self::commit_turn) for its turns.
pub struct TurnContext<'a> {
    runner: &'a Runner,
    task: StoredTask,
    item: &'a InboxItem,
    input: String,
}

/// What one turn of an agent writes.
#[derive(Debug, Clone, Default)]
pub struct TurnWrite {
    /// The task after the turn (extension, agent state); `None` keeps it.
    pub record: Option<task_store::TaskRecord>,
    pub transcript: Vec<serde_json::Value>,
    /// Artifacts written whole, each with its artifact update event.
    pub artifacts: Vec<Artifact>,
    /// Children to create in the same commit (`spawn_subtask`, `create_task_for_participant`).
    pub children: Vec<task_core::tools::ChildTask>,
    /// The actor must still hold this role (a role change).
    pub actor_role: Option<(String, task_core::extension::Role)>,
}

impl TurnContext<'_> {
    pub fn task(&self) -> &StoredTask {
        &self.task
    }

    pub fn message(&self) -> &Message {
        &self.item.message
    }

    /// The participant whose message drives this run.
    pub fn sender(&self) -> &str {
        &self.item.sender
    }

    /// What the agent reads of the message.
    pub fn input(&self) -> &str {
        &self.input
    }

    pub fn store(&self) -> &dyn Store {
        &*self.runner.inner.store
    }

    pub fn config(&self) -> &ServiceConfig {
        &self.runner.inner.config
    }

    /// Commits one turn, built by `build` from the task as it is; if the task changed
    /// meanwhile it is read again and `build` runs again on the fresh copy (so a turn's pure
    /// effects always apply to the current task). Returns false, writing nothing, once the
    /// task is no longer WORKING (canceled, say): the run should end.
    pub async fn commit_turn(
        &mut self,
        mut build: impl FnMut(&StoredTask) -> TurnWrite + Send,
    ) -> Result<bool, StoreError> {
        for _ in 0..MAX_RETRIES {
            if *self.task.record.state() != TaskState::Working {
                return Ok(false);
            }
            let write = build(&self.task);
            let now = Utc::now();
            let mut update = TaskUpdate::new(self.task.clone());
            update.allowed_states = vec![TaskState::Working];
            update.actor_role.clone_from(&write.actor_role);
            update.transcript = write.transcript;
            let record = write
                .record
                .clone()
                .unwrap_or_else(|| self.task.record.clone());
            for artifact in &write.artifacts {
                update
                    .events
                    .push(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                        task_id: record.id.clone(),
                        context_id: record.context_id.clone(),
                        artifact: artifact.clone(),
                        append: None,
                        last_chunk: None,
                        metadata: None,
                    }));
            }
            update.artifacts = write.artifacts;
            update.record = write.record;
            let mut leases = Vec::new();
            let children: Vec<Change> = write
                .children
                .iter()
                .map(|child| {
                    let lease = match child.kind {
                        task_core::tools::ChildKind::Agent { .. } => {
                            let lease = self.runner.new_lease(&child.id);
                            leases.push(lease.clone());
                            Some(lease)
                        }
                        task_core::tools::ChildKind::Participant { .. } => None,
                    };
                    Change::Create(Box::new(subtasks::child_task(
                        &record,
                        child,
                        &self.runner.inner.config.agent_id,
                        lease,
                        now,
                    )))
                })
                .collect();
            match self.runner.commit_with(update, children).await {
                Ok(applied) => {
                    self.task = applied;
                    for lease in leases {
                        self.runner.kick_leased(lease, None);
                    }
                    return Ok(true);
                }
                Err(StoreError::Conflict(Conflict::TaskChanged(_))) => {
                    self.task = self.runner.read(&self.task.record.id).await?;
                }
                Err(err) => return Err(err),
            }
        }
        Err(StoreError::Conflict(Conflict::TaskChanged(
            self.task.record.id.clone(),
        )))
    }
}

impl Runner {
    /// A turn whose outcome is too large to store fails the task (rather than leaving the
    /// message queued to fail again on every run); the reason is the store's.
    async fn fail_unstorable(
        &self,
        current: &StoredTask,
        item: &InboxItem,
        why: &str,
    ) -> Result<StoredTask, StoreError> {
        let record = &current.record;
        warn!(task_id = %record.id, reason = why, "the turn's outcome is too large to store");
        let lifecycle = record.extension.effective_lifecycle();
        let reason = format!("the reply could not be stored: {why}");
        let audit = AuditEntry::new(
            Utc::now(),
            &item.key.message_id,
            Some(&item.sender),
            true,
            &reason,
        );
        let mut update = TaskUpdate::new(current.clone());
        update.consume_inbox = vec![item.key.clone()];
        update.audit = vec![audit];
        if let Ok(transition) = lifecycle::next(
            record.state(),
            record.sub_state,
            lifecycle,
            LifecycleEvent::RunFailed,
        ) {
            let mut next = record.clone();
            next.status = view::status(
                transition.to,
                Some(view::agent_message(record, reason)),
                Utc::now(),
            );
            next.sub_state = None;
            update.allowed_states = transition.from.to_vec();
            update.events = vec![view::status_update(&next, Some(&item.key.message_id))];
            update.record = Some(next);
        }
        self.commit(update).await
    }
}

/// The artifact updates of a turn, in the order the agent produced them.
fn artifact_events(record: &task_store::TaskRecord, reply: &AgentReply) -> Vec<StreamResponse> {
    reply
        .artifacts
        .iter()
        .map(|chunk| {
            StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: record.id.clone(),
                context_id: record.context_id.clone(),
                artifact: chunk.artifact.clone(),
                append: chunk.append.then_some(true),
                last_chunk: chunk.last_chunk.then_some(true),
                metadata: None,
            })
        })
        .collect()
}

/// The artifacts to write whole after a turn's chunks: an appended chunk extends the parts
/// of the artifact with its id (written earlier in the turn or stored before), any other
/// chunk replaces it. Each artifact appears once, in the order of its first chunk.
fn merge_artifacts(stored: &[Artifact], chunks: &[ArtifactChunk]) -> Vec<Artifact> {
    let mut merged: Vec<Artifact> = Vec::new();
    for chunk in chunks {
        let id = &chunk.artifact.artifact_id;
        let index = match merged.iter().position(|a| &a.artifact_id == id) {
            Some(i) => i,
            None => {
                let Some(existing) = stored.iter().find(|a| &a.artifact_id == id) else {
                    merged.push(chunk.artifact.clone());
                    continue;
                };
                merged.push(existing.clone());
                merged.len() - 1
            }
        };
        if chunk.append {
            merged[index]
                .parts
                .extend(chunk.artifact.parts.iter().cloned());
        } else {
            merged[index] = chunk.artifact.clone();
        }
    }
    merged
}

/// What the agent reads of a message: its text parts, A2UI actions and recorded events
/// rendered as text, other data as JSON, files by name; the answer to a help request framed
/// as such. Task envelopes were applied on arrival and are left out.
pub fn agent_input(item: &InboxItem, answering: Option<&HelpRequest>) -> String {
    let text = message_text(&item.message, &item.sender);
    match answering {
        Some(request) => request.frame_answer(&text),
        None => text,
    }
}

fn message_text(message: &Message, sender: &str) -> String {
    let mut lines = Vec::new();
    for part in &message.parts {
        let media_type = part.media_type.as_deref();
        match (&part.content, media_type) {
            (PartContent::Text(text), _) => lines.push(text.clone()),
            (PartContent::Data(_), Some(TASK_MEDIA_TYPE)) => {}
            (PartContent::Data(data), Some(EVENT_MEDIA_TYPE)) => {
                let parts = std::slice::from_ref(part);
                if let Ok(Some(Envelope::Recorded { kind, payload })) =
                    envelope::find_envelope(parts)
                {
                    lines.push(envelope::render_recorded(kind, sender, &payload));
                } else if data.get("kind").and_then(|k| k.as_str()) != Some("task") {
                    lines.push(data.to_string());
                }
            }
            // Checked against the task's surfaces on arrival.
            (PartContent::Data(data), Some(A2UI_MEDIA_TYPE)) => lines.push(render_action(data)),
            (PartContent::Data(data), _) => lines.push(data.to_string()),
            (PartContent::Raw(bytes), _) => lines.push(format!(
                "[file {} ({}, {} bytes)]",
                part.filename.as_deref().unwrap_or("unnamed"),
                media_type.unwrap_or("application/octet-stream"),
                bytes.len()
            )),
            (PartContent::Url(url), _) => lines.push(format!(
                "[file {} ({}) at {url}]",
                part.filename.as_deref().unwrap_or("unnamed"),
                media_type.unwrap_or("application/octet-stream")
            )),
        }
    }
    lines.join("\n")
}

/// `[A2UI action] <name> on surface <surface> from <component>: <context>` (serde_json's maps
/// keep keys sorted, so the same action always reads the same).
fn render_action(data: &serde_json::Value) -> String {
    let action = data.get("action").unwrap_or(data);
    let field = |k: &str| {
        action
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_owned()
    };
    let context = action
        .get("context")
        .map(|c| c.to_string())
        .unwrap_or_else(|| "{}".to_owned());
    format!(
        "[A2UI action] {} on surface {} from {}: {context}",
        field("name"),
        field("surfaceId"),
        field("sourceComponentId")
    )
}
