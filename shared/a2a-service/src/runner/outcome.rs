//! Recording a turn's outcome: the message and the reply in the history, the next state by
//! the lifecycle rule, the reply's artifacts and transcript entries, in one commit that may
//! also give the lease up; a task that ended during the turn, or an outcome too large to
//! store, recorded as such.

use a2a::{Artifact, Message, StreamResponse, TaskArtifactUpdateEvent, TaskState};
use chrono::Utc;
use task_core::DomainError;
use task_core::extension::{SubState, TaskExtension};
use task_core::lifecycle::{self, LifecycleEvent, Transition, TurnSummary};
use task_store::{Conflict, InboxItem, StoreError, StoredTask, TaskRecord, TaskUpdate};
use tracing::warn;

use super::handle::{MAX_RETRIES, RunEnd, Runner};
use super::items::{audit, consuming};
use crate::agents::{AgentReply, ArtifactChunk, TurnEnd};
use crate::commit_step::Step;
use crate::view;

impl Runner {
    /// Commits the outcome of a run: the message and the reply in the history, the next
    /// state by the lifecycle rule, the reply's artifacts and transcript entries.
    /// `end.lease`, when the run ends with this message, is the runner's lease: the outcome's
    /// commit gives it up (and takes it out of `end`).
    pub(super) async fn record_outcome(
        &self,
        latest: StoredTask,
        item: &InboxItem,
        reply: AgentReply,
        end: &mut RunEnd,
    ) -> Result<StoredTask, StoreError> {
        let task_id = latest.record.id.clone();
        // On the task as the run left it: unless someone changed it meanwhile (then the
        // commit's version check fails and we read it again).
        let mut fresh = Some(latest);
        for _ in 0..MAX_RETRIES {
            let current = match fresh.take() {
                Some(task) => task,
                None => self.read(&task_id).await?,
            };
            if lifecycle::TERMINAL.contains(current.record.state()) {
                return self.commit(ended_during_turn(&current, item, &reply)).await;
            }
            let transition = match outcome_transition(&current.record, &reply.end) {
                Ok(t) => t,
                Err(err) => {
                    warn!(task_id, error = %err, "turn outcome does not fit the task's state");
                    return Err(StoreError::Conflict(Conflict::TaskChanged(task_id)));
                }
            };
            let mut update = self
                .outcome_update(&current, item, &reply, &transition)
                .await?;
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

    /// The update recording the reply on `current` by `transition`: the status (with the
    /// whole reply in its event, a bounded copy on the task), the history, the transcript
    /// entries, the artifacts merged with those stored.
    async fn outcome_update(
        &self,
        current: &StoredTask,
        item: &InboxItem,
        reply: &AgentReply,
        transition: &Transition,
    ) -> Result<TaskUpdate, StoreError> {
        let mut next = current.record.clone();
        let message = status_message(&mut next, reply, &self.inner.config.agent_id);
        let bounded = Some(view::bounded(&message));
        let mid = Some(item.key.message_id.as_str());
        let mut step = Step::new(next, transition.clone(), bounded, Utc::now(), mid);
        let mut update = TaskUpdate::new(current.clone());
        update.consume_inbox = vec![item.key.clone()];
        update.history = vec![item.message.clone(), message.clone()];
        if let StreamResponse::StatusUpdate(event) = &mut step.event {
            // The event carries the whole reply; the task document a bounded copy.
            event.status.message = Some(message);
        }
        update.transcript = reply.transcript.clone();
        if !reply.artifacts.is_empty() {
            let stored = self.inner.store.artifacts(&current.record.id).await?;
            update.artifacts = merge_artifacts(&stored, &reply.artifacts);
            update.events = artifact_events(&current.record, reply);
        }
        step.write_into(&mut update);
        update.audit = vec![audit(item, Utc::now(), true, "accepted")];
        Ok(update)
    }

    /// A turn whose outcome is too large to store fails the task (rather than leaving the
    /// message queued to fail again on every run); the reason is the store's.
    pub(super) async fn fail_unstorable(
        &self,
        current: &StoredTask,
        item: &InboxItem,
        why: &str,
    ) -> Result<StoredTask, StoreError> {
        let record = &current.record;
        warn!(task_id = %record.id, reason = why, "the turn's outcome is too large to store");
        let lifecycle = record.extension.effective_lifecycle();
        let reason = format!("the reply could not be stored: {why}");
        let mut update = consuming(current, item, audit(item, Utc::now(), true, &reason));
        if let Ok(transition) = lifecycle::next(
            record.state(),
            record.sub_state,
            lifecycle,
            LifecycleEvent::RunFailed,
        ) {
            let message = Some(view::agent_message(record, reason));
            let mid = Some(item.key.message_id.as_str());
            Step::new(record.clone(), transition, message, Utc::now(), mid).write_into(&mut update);
        }
        self.commit(update).await
    }
}

/// The task ended (canceled, say) while the agent worked: the message, and the transcript
/// entries of the turn, recorded without a status.
fn ended_during_turn(current: &StoredTask, item: &InboxItem, reply: &AgentReply) -> TaskUpdate {
    let reason = format!(
        "the task became {} during the turn",
        lifecycle::short_state_name(current.record.state())
    );
    let mut update = consuming(current, item, audit(item, Utc::now(), true, &reason));
    update.history = vec![item.message.clone()];
    update.transcript = reply.transcript.clone();
    update
}

/// Where the turn's end takes the task: the lifecycle rule, except that a relayed sub-task
/// waits where the remote task waits (and the parent is told).
fn outcome_transition(record: &TaskRecord, end: &TurnEnd) -> Result<Transition, DomainError> {
    match (end, record.state()) {
        (
            TurnEnd::Remote(remote @ (TaskState::InputRequired | TaskState::AuthRequired)),
            TaskState::Working,
        ) => Ok(Transition {
            from: &[TaskState::Working],
            to: remote.clone(),
            sub_state: (*remote == TaskState::InputRequired)
                .then_some(SubState::AwaitingNextMessage),
            runs_agent: false,
        }),
        _ => lifecycle::next(
            record.state(),
            record.sub_state,
            record.extension.effective_lifecycle(),
            turn_event(&record.extension, end),
        ),
    }
}

/// The lifecycle event a turn's end is.
fn turn_event(extension: &TaskExtension, end: &TurnEnd) -> LifecycleEvent {
    match end {
        TurnEnd::Lifecycle => LifecycleEvent::TurnEnded(TurnSummary::of(extension, false, false)),
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
    }
}

/// The run's status message: the reply, the failure's reason, or the help request (which
/// `next` then awaits).
fn status_message(next: &mut TaskRecord, reply: &AgentReply, agent_id: &str) -> Message {
    match &reply.end {
        TurnEnd::AwaitAnswer(help) => {
            next.agent.pending_help = Some(help.clone());
            help.status_message(&next.id, &next.context_id, agent_id)
        }
        TurnEnd::Fail(reason) => view::agent_message(next, reason.clone()),
        TurnEnd::TurnLimit => view::agent_message(next, "turn limit reached"),
        _ => view::agent_message(next, reply.text.clone()),
    }
}

/// The artifact updates of a turn, in the order the agent produced them.
fn artifact_events(record: &TaskRecord, reply: &AgentReply) -> Vec<StreamResponse> {
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
