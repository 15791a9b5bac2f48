//! Recording a turn's outcome: the message and the reply in the history, the next state by
//! the lifecycle rule, the reply's artifacts and transcript entries, in one commit that may
//! also give the lease up; a task that ended during the turn, or an outcome too large to
//! store, recorded as such.

use std::collections::HashMap;

use a2a::{Artifact, Message, Part, Role, StreamResponse, TaskArtifactUpdateEvent, TaskState};
use chrono::Utc;
use serde_json::Value;
use task_core::DomainError;
use task_core::extension::{SubState, TaskExtension};
use task_core::lifecycle::{self, LifecycleEvent, Transition, TurnSummary};
use task_store::{
    Change, Conflict, InboxItem, InboxKey, StoreError, StoredTask, TaskRecord, TaskUpdate,
};
use tracing::warn;

use super::handle::{MAX_RETRIES, RunEnd, Runner};
use super::items::{audit, consuming};
use crate::agents::{AgentReply, ArtifactChunk, TurnEnd};
use crate::commit_step::Step;
use crate::identity::PARTICIPANT_KEY;
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
        // An answer for a relayed sub-task that can no longer take it is dropped.
        let mut forwards = true;
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
            let answer = answer_to_relay(&current, &reply, &self.inner.config.agent_id);
            let mut update =
                Box::pin(self.outcome_update(&current, item, &reply, &transition)).await?;
            update.release = end.lease.clone();
            if answer.is_some()
                && let Some(record) = update.record.as_mut()
            {
                record.agent.answering = None;
            }
            // A task that had no history has exactly the two messages appended here.
            let whole_history = (end.wants_history && current.counters.history == 0)
                .then(|| update.history.clone());
            let (proxy, more) = match answer.filter(|_| forwards) {
                Some((proxy, change)) => (Some(proxy), vec![change]),
                None => (None, Vec::new()),
            };
            match self.commit_with(update, more).await {
                Err(StoreError::Conflict(Conflict::TaskChanged(_))) => continue,
                Err(
                    StoreError::Conflict(Conflict::TaskTerminal(gone)) | StoreError::NotFound(gone),
                ) if proxy.as_ref().is_some_and(|p| gone.contains(p.as_str())) => {
                    warn!(task_id, sub_task = %gone, "the reply was not sent as the answer: the sub-task ended");
                    forwards = false;
                    fresh = Some(current);
                    continue;
                }
                Err(StoreError::TooLarge(why)) => {
                    return Box::pin(self.fail_unstorable(&current, item, &why)).await;
                }
                Ok(task) => {
                    end.lease = None; // given up with the outcome
                    end.history = whole_history;
                    if let Some(proxy) = proxy {
                        self.kick(&proxy);
                    }
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
        for (model, usage) in &reply.usage {
            next.agent.spend(model, usage);
        }
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

/// The reply of a parent's agent woken with a relayed sub-task's help request is that
/// sub-task's answer: a message from this service's agent queued for the sub-task (the proxy,
/// which sends it on to the remote task). Not a reply that asks someone itself, nor a failure.
fn answer_to_relay(
    current: &StoredTask,
    reply: &AgentReply,
    agent_id: &str,
) -> Option<(String, Change)> {
    let proxy = current.record.agent.answering.as_ref()?;
    if !matches!(reply.end, TurnEnd::Lifecycle | TurnEnd::Complete) || reply.text.is_empty() {
        return None;
    }
    let mut message = Message::new(Role::User, vec![Part::text(reply.text.clone())]);
    message.message_id = format!("{}:answer:{proxy}:{}", current.record.id, current.version);
    message.task_id = Some(proxy.clone());
    message.context_id = Some(current.record.context_id.clone());
    message.metadata = Some(HashMap::from([(
        PARTICIPANT_KEY.to_owned(),
        Value::from(agent_id),
    )]));
    let item = InboxItem {
        key: InboxKey {
            enqueued_at: Utc::now(),
            message_id: message.message_id.clone(),
        },
        sender: agent_id.to_owned(),
        message,
    };
    Some((
        proxy.clone(),
        Change::Enqueue {
            task_id: proxy.clone(),
            item: Box::new(item),
        },
    ))
}

/// Where the turn's end takes the task: the lifecycle rule, except that a relayed sub-task
/// waits where the remote task waits (and the parent is told): awaiting-answer when the
/// remote waits on a help request, else awaiting-next-message.
fn outcome_transition(record: &TaskRecord, end: &TurnEnd) -> Result<Transition, DomainError> {
    match (end, record.state()) {
        // Whatever the lifecycle: the agent waits for the next message.
        (TurnEnd::Wait, TaskState::Working) => Ok(Transition {
            from: &[TaskState::Working],
            to: TaskState::InputRequired,
            sub_state: Some(SubState::AwaitingNextMessage),
            runs_agent: false,
        }),
        (TurnEnd::Remote(remote), TaskState::Working)
            if matches!(
                remote.state,
                TaskState::InputRequired | TaskState::AuthRequired
            ) =>
        {
            let sub_state = if remote.help_request {
                SubState::AwaitingAnswer
            } else {
                SubState::AwaitingNextMessage
            };
            Ok(Transition {
                from: &[TaskState::Working],
                to: remote.state.clone(),
                sub_state: (remote.state == TaskState::InputRequired).then_some(sub_state),
                runs_agent: false,
            })
        }
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
        TurnEnd::Fail(_) | TurnEnd::Wait => LifecycleEvent::RunFailed,
        TurnEnd::TurnLimit => LifecycleEvent::TurnLimitReached,
        TurnEnd::Remote(remote) => match remote.state {
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
        TurnEnd::Remote(remote) => {
            next.agent
                .remote_status_id
                .clone_from(&remote.status_message_id);
            view::agent_message(next, reply.text.clone())
        }
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

#[cfg(test)]
mod tests {
    use task_core::extension::TaskExtension;

    use super::*;
    use crate::agents::RemoteEnd;

    fn task(state: TaskState) -> StoredTask {
        StoredTask {
            record: TaskRecord {
                id: "p".into(),
                context_id: "c".into(),
                status: view::status(state, None, Utc::now()),
                sub_state: None,
                extension: TaskExtension::new("Parent", "g"),
                agent: Default::default(),
            },
            version: 7,
            counters: Default::default(),
        }
    }

    #[test]
    fn a_relayed_task_waits_where_its_remote_waits() {
        let record = task(TaskState::Working).record;
        let mut remote = RemoteEnd::new(TaskState::InputRequired);
        let waits = |remote: &RemoteEnd| {
            outcome_transition(&record, &TurnEnd::Remote(remote.clone())).expect("fits")
        };
        assert_eq!(
            waits(&remote).sub_state,
            Some(SubState::AwaitingNextMessage)
        );
        remote.help_request = true;
        let asked = waits(&remote);
        assert_eq!(asked.to, TaskState::InputRequired);
        assert_eq!(asked.sub_state, Some(SubState::AwaitingAnswer));
        assert!(!asked.runs_agent);
        let auth = waits(&RemoteEnd::new(TaskState::AuthRequired));
        assert_eq!((auth.to, auth.sub_state), (TaskState::AuthRequired, None));
    }

    #[test]
    fn the_reply_after_a_relayed_question_is_its_answer() {
        let mut parent = task(TaskState::Working);
        let reply = AgentReply::text("Use 2025");
        assert!(
            answer_to_relay(&parent, &reply, "agent-a").is_none(),
            "nothing asked"
        );
        parent.record.agent.answering = Some("p.1".into());
        let (proxy, change) = answer_to_relay(&parent, &reply, "agent-a").expect("an answer");
        assert_eq!(proxy, "p.1");
        let Change::Enqueue { task_id, item } = change else {
            panic!("not queued: {change:?}");
        };
        assert_eq!(task_id, "p.1");
        assert_eq!(item.sender, "agent-a");
        assert_eq!(item.key.message_id, "p:answer:p.1:7");
        assert_eq!(item.message.parts[0].as_text(), Some("Use 2025"));
        // A reply that asks someone itself, or a failure, answers nothing.
        let help = task_core::task::HelpRequest {
            participant_id: "alice".into(),
            question: "Which year?".into(),
            options: Vec::new(),
            message_id: "p:help:1".into(),
            comments: Vec::new(),
            dropped_comments: 0,
        };
        let asks = AgentReply::text("Which year?").ending(TurnEnd::AwaitAnswer(help));
        assert!(answer_to_relay(&parent, &asks, "agent-a").is_none());
        assert!(answer_to_relay(&parent, &AgentReply::fail("boom"), "agent-a").is_none());
    }
}
