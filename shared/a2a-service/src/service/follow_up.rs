//! A message on an existing task: the task's own checks (context, participant, terminal
//! state, A2UI actions), refusals written to its audit log, commands, task envelopes that
//! edit it, then the message queued for the runner; retried on a fresh read when the task
//! moved under it.

use std::collections::HashMap;

use a2a::{Message, Part, PartContent, StreamResponse, TaskStatusUpdateEvent};
use chrono::Utc;
use serde_json::{Map, Value};
use task_core::envelope::{self, Envelope};
use task_core::lifecycle;
use task_core::policy::{AccessDenied, Action};
use task_core::{A2UI_MEDIA_TYPE, DomainError, TASK_METADATA_KEY};
use task_store::{AuditEntry, Conflict, StoreError, StoredTask, TaskUpdate};

use super::base::{MAX_RETRIES, Service, inbox_item};
use super::outcome::{Intake, LogPosition, Retry, Run};
use crate::error::ServiceError;
use crate::identity::{self, Who};
use crate::message_checks::{carries_content, media_type};
use crate::view;

impl Service {
    pub(super) async fn follow_up(
        &self,
        sender: &Who,
        task_id: &str,
        message: &Message,
    ) -> Result<Intake, ServiceError> {
        for _ in 0..MAX_RETRIES {
            let stored = self
                .read(task_id)
                .await?
                .ok_or_else(|| ServiceError::TaskNotFound(task_id.to_owned()))?;
            match self.follow_up_on(sender, &stored, message).await {
                Err(Retry::Again) => continue,
                Err(Retry::Fail(err)) => return Err(err),
                Ok(intake) => return Ok(intake),
            }
        }
        Err(ServiceError::Unavailable)
    }

    /// Refuses a message with a status update that says why; the task is unchanged but for
    /// its audit log, and the sender sees nothing of it beyond id, context and state.
    async fn refuse(
        &self,
        stored: &StoredTask,
        who: &Who,
        message: &Message,
        reason: &str,
    ) -> Result<Intake, Retry> {
        let sender = who.as_str();
        // Over the budget, nothing is written: the sender is told when to try again.
        self.refusals
            .admit(&stored.record.id, sender)
            .map_err(|retry_after_secs| {
                Retry::Fail(ServiceError::RateLimited { retry_after_secs })
            })?;
        let now = Utc::now();
        let text = format!("message not accepted: {reason}");
        let notice = view::notice(stored, &text, now, Some(&message.message_id));
        let mut update = TaskUpdate::new(stored.clone());
        let size = serde_json::to_vec(&message.parts).map_or(0, |b| b.len() as u64);
        update.audit.push(
            AuditEntry::new(now, &message.message_id, Some(sender), false, reason).describing(
                size,
                message.parts.iter().find_map(Part::as_text).unwrap_or(""),
            ),
        );
        self.commit_update(update).await?;
        let task = if identity::authorize(&stored.record.extension, who, Action::Read).is_ok() {
            let mut task = view::task(&stored.record, None, None);
            task.status = notice.status.clone();
            task
        } else {
            view::refusal_task(stored, notice.status.clone())
        };
        Ok(Intake::Answered {
            task: Box::new(task),
            events: vec![StreamResponse::StatusUpdate(notice)],
            push_from: None,
        })
    }

    async fn follow_up_on(
        &self,
        who: &Who,
        stored: &StoredTask,
        message: &Message,
    ) -> Result<Intake, Retry> {
        let sender = who.as_str();
        let record = &stored.record;
        if let Some(ctx) = &message.context_id
            && *ctx != record.context_id
        {
            return Err(Retry::Fail(ServiceError::InvalidParams(format!(
                "contextId {ctx} does not match the task's context {}",
                record.context_id
            ))));
        }
        if identity::authorize(&record.extension, who, Action::Send).is_err() {
            return self
                .refuse(
                    stored,
                    who,
                    message,
                    &AccessDenied::NotParticipant.to_string(),
                )
                .await;
        }
        if lifecycle::TERMINAL.contains(record.state()) {
            return Err(DomainError::TaskTerminal(record.state().clone()).into());
        }
        if let Some(command) = task_core::commands::parse(&message.parts) {
            return self.command(sender, stored, message, command).await;
        }
        // A2UI actions must name a surface and component this task emitted.
        for part in &message.parts {
            if let (PartContent::Data(data), A2UI_MEDIA_TYPE) = (&part.content, media_type(part))
                && let Err(refused) = record.agent.surfaces.check_client_message(data)
            {
                return self
                    .refuse(
                        stored,
                        who,
                        message,
                        &format!("{}: {refused}", refused.code()),
                    )
                    .await;
            }
        }
        let envelope = envelope::find_envelope(&message.parts)?;
        if let Some(Envelope::Recorded { .. }) = &envelope {
            envelope::check_recorded(&record.extension, sender)?;
        }
        let mut edited = false;
        if let Some(Envelope::Task(payload)) = &envelope {
            if let Some(answered) = self.edit(sender, stored, message, payload).await? {
                return Ok(answered);
            }
            edited = true;
        }
        self.enqueue(sender, stored, message, edited).await
    }

    /// Applies a task envelope to the task. Answered at once (`Some`) when the message
    /// carries nothing else; otherwise the message is still to be queued.
    async fn edit(
        &self,
        sender: &str,
        stored: &StoredTask,
        message: &Message,
        payload: &Map<String, Value>,
    ) -> Result<Option<Intake>, Retry> {
        let record = &stored.record;
        let edit =
            envelope::apply_envelope(&record.extension, sender, &self.config.agent_id, payload)?;
        let mut next = record.clone();
        next.extension = edit.task.clone();
        // A participant named the task: its first message no longer does.
        if payload.contains_key("name") {
            next.agent.untitled = false;
        }
        let mut update = TaskUpdate::new(stored.clone());
        if edit.changes_participants() {
            update.actor_role = Some((sender.to_owned(), task_core::extension::Role::Admin));
        }
        let mut event = TaskStatusUpdateEvent {
            task_id: record.id.clone(),
            context_id: record.context_id.clone(),
            status: record.status.clone(),
            metadata: Some(HashMap::from([(
                TASK_METADATA_KEY.to_owned(),
                next.extension.to_value(),
            )])),
        };
        if !edit.changed.is_empty() {
            event.metadata.get_or_insert_default().insert(
                view::IN_REPLY_TO_KEY.to_owned(),
                Value::from(message.message_id.as_str()),
            );
            update
                .events
                .push(StreamResponse::StatusUpdate(event.clone()));
            update.record = Some(next.clone());
        } else if next.agent != record.agent {
            update.record = Some(next.clone());
        }
        let has_content = carries_content(message);
        if !has_content {
            update.message_ids.push(message.message_id.clone());
        }
        let next_seq = stored.counters.events + update.events.len() as u64;
        self.commit_update(update).await?;
        if edit.changes_participants() {
            self.remove_leavers_push_configs(&next).await;
        }
        if has_content {
            return Ok(None);
        }
        let task = view::task(&next, None, None);
        Ok(Some(Intake::answered(
            task,
            StreamResponse::StatusUpdate(event),
            next_seq,
        )))
    }

    /// Queues the message for the runner. The log position is taken before queueing, so the
    /// sender's stream cannot miss the answer.
    async fn enqueue(
        &self,
        sender: &str,
        stored: &StoredTask,
        message: &Message,
        edited: bool,
    ) -> Result<Intake, Retry> {
        let record = &stored.record;
        let current = if edited {
            self.read(&record.id).await?.ok_or(Retry::Again)?
        } else {
            stored.clone()
        };
        // The lease first (when free), then the message: a process that dies in between
        // leaves an expiring lease for the sweeper, never a message nobody will run. Any
        // store error taking it fails the request (none is retried).
        let lease = self
            .runner
            .try_lease(&record.id)
            .await
            .map_err(|e| Retry::Fail(e.into()))?;
        let queued = self
            .store
            .enqueue(&record.id, inbox_item(sender, message, record))
            .await;
        if let (Err(_), Some(lease)) = (&queued, &lease) {
            // Not simply given back: a sender that found the lease held queued its message
            // for this holder to run.
            self.runner.kick_leased(lease.clone(), None);
        }
        match queued {
            Ok(()) => Ok(Intake::Queued {
                log: LogPosition {
                    task_id: record.id.clone(),
                    first: Box::new(view::task(&current.record, None, None)),
                    from_seq: current.counters.events,
                    message_id: Some(message.message_id.clone()),
                },
                push_from: current.counters.events,
                run: Run {
                    lease,
                    created: None,
                    committing: None,
                    processed: None,
                },
            }),
            Err(StoreError::Conflict(Conflict::DuplicateMessage { .. })) => {
                // A repeat of a message already received: answer with the task as it is.
                let task = view::task(&current.record, None, None);
                let next_seq = current.counters.events;
                Ok(Intake::answered(
                    task.clone(),
                    StreamResponse::Task(task),
                    next_seq,
                ))
            }
            Err(StoreError::Conflict(Conflict::TaskTerminal(_))) => Err(Retry::Again),
            Err(err) => Err(Retry::Fail(err.into())),
        }
    }
}
