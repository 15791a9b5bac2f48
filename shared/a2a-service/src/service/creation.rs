//! A new task from a message without a task id: its participants from the sender and any
//! envelope, then one of three first steps (a command answered at once, content queued for
//! this process's runner, an envelope alone leaving a conversation waiting). A command's task
//! is `New conversation` until its first message that runs the agent names it.

use a2a::{Message, Part, StreamResponse, Task, TaskState};
use chrono::{DateTime, Utc};
use task_core::A2UI_MEDIA_TYPE;
use task_core::commands::{self, Command};
use task_core::envelope::{self, Envelope};
use task_core::lifecycle::{self, LifecycleEvent};
use task_core::policy::Action;
use task_core::task::AgentState;
use task_core::{DomainError, extension::Lifecycle};
use task_store::{AuditEntry, Change, NewTask, TaskRecord};

use super::base::{Service, inbox_item};
use super::outcome::{Intake, LogPosition, Run};
use crate::commit_step::Step;
use crate::error::ServiceError;
use crate::identity::{self, Who};
use crate::message_checks::{carries_content, media_type};
use crate::runner::Created;
use crate::view;

/// The name and goal of a task a command created, until a message or a participant names it.
pub const UNTITLED_NAME: &str = "New conversation";

impl Service {
    pub(super) async fn new_task(
        &self,
        who: &Who,
        message: &Message,
    ) -> Result<Intake, ServiceError> {
        let sender = who.as_str();
        let text = text_of(message);
        let task_id = a2a::new_task_id();
        let context_id = message
            .context_id
            .clone()
            .unwrap_or_else(a2a::new_context_id);
        let envelope = envelope::find_envelope(&message.parts)?;
        let payload = match &envelope {
            Some(Envelope::Task(payload)) => Some(payload),
            _ => None,
        };
        let command = commands::parse(&message.parts);
        // A command names nothing: the task waits under a placeholder name for the first
        // message that runs the agent to name it (an envelope's name stands).
        let untitled = command.is_some() && payload.is_none();
        let named_by = if untitled { UNTITLED_NAME } else { &text };
        let extension =
            envelope::new_task_extension(sender, &self.config.agent_id, named_by, payload)?;
        if identity::authorize(&extension, who, Action::Read).is_err() {
            // The envelope made its self-asserted sender an agent participant.
            return Err(ServiceError::InvalidParams(format!(
                "participant {sender:?} is listed as an agent; acting as an agent participant needs a verified identity"
            )));
        }
        if message
            .parts
            .iter()
            .any(|p| media_type(p) == A2UI_MEDIA_TYPE)
        {
            return Err(ServiceError::InvalidParams(
                "a new task has no A2UI surfaces to act on (a2ui.unknown_surface_or_component)"
                    .to_owned(),
            ));
        }
        let now = Utc::now();
        let record = TaskRecord {
            id: task_id,
            context_id,
            status: view::status(TaskState::Submitted, None, now),
            sub_state: None,
            extension,
            agent: AgentState {
                untitled,
                ..Default::default()
            },
        };
        let created = view::task(&record, None, None);
        let mut new = NewTask::new(record.clone());
        new.events.push(StreamResponse::Task(created.clone()));
        new.audit.push(AuditEntry::new(
            now,
            &message.message_id,
            Some(sender),
            true,
            "created the task",
        ));

        if let Some(command) = command {
            return Box::pin(self.create_with_command(record, new, created, message, command, now))
                .await;
        }
        if carries_content(message) {
            return self
                .create_queued(sender, record, new, created, message, now)
                .await;
        }
        // An envelope alone creates the task and asks nothing of the agent: like a command,
        // it leaves a conversation waiting for the next message.
        let transition = lifecycle::next(
            &TaskState::Submitted,
            None,
            record.extension.effective_lifecycle(),
            LifecycleEvent::CommandApplied,
        )?;
        let step = Step::new(record, transition, None, now, Some(&message.message_id));
        Box::pin(self.create_answered(new, step, created, message)).await
    }

    /// A command as the first message opens a conversation that waits for the next one.
    async fn create_with_command(
        &self,
        mut record: TaskRecord,
        new: NewTask,
        created: Task,
        message: &Message,
        command: Result<Command, DomainError>,
        now: DateTime<Utc>,
    ) -> Result<Intake, ServiceError> {
        let reply = command
            .and_then(|c| commands::apply(&record.extension, &self.config.catalog, &c))
            .map(|outcome| {
                if let Some(ext) = outcome.task {
                    record.extension = ext;
                }
                outcome.reply
            })
            .unwrap_or_else(|refusal| refusal.to_string());
        let transition = lifecycle::next(
            &TaskState::Submitted,
            None,
            Lifecycle::Conversation,
            LifecycleEvent::CommandApplied,
        )?;
        let answer = Some(view::agent_message(&record, reply));
        let in_reply_to = Some(message.message_id.as_str());
        let step = Step::new(record, transition, answer, now, in_reply_to);
        Box::pin(self.create_answered(new, step, created, message)).await
    }

    /// Creates a task whose first message is answered by its creation (`step`): the message
    /// is recorded as received, and the stream starts with the task, then that answer.
    async fn create_answered(
        &self,
        mut new: NewTask,
        step: Step,
        created: Task,
        message: &Message,
    ) -> Result<Intake, ServiceError> {
        let task = Box::new(view::task(&step.record, Some(vec![]), None));
        let events = vec![StreamResponse::Task(created), step.event.clone()];
        step.create(&mut new);
        new.message_ids.push(message.message_id.clone());
        self.commit_create(new).await?;
        Ok(Intake::Answered {
            task,
            events,
            push_from: Some(0),
        })
    }

    /// The task is created with its message accepted and this process running it: the
    /// transition to WORKING, its event and the run lease go in the creating write.
    async fn create_queued(
        &self,
        sender: &str,
        record: TaskRecord,
        mut new: NewTask,
        created: Task,
        message: &Message,
        now: DateTime<Utc>,
    ) -> Result<Intake, ServiceError> {
        let accepted = lifecycle::next(
            &TaskState::Submitted,
            None,
            record.extension.effective_lifecycle(),
            LifecycleEvent::MessageAccepted {
                answers_help_request: false,
            },
        )?;
        let item = inbox_item(sender, message, &record);
        new.inbox.push(item.clone());
        let task_id = record.id.clone();
        Step::new(record, accepted, None, now, Some(&message.message_id)).create(&mut new);
        let lease = self.runner.new_lease(&task_id);
        new.lease = Some(lease.clone());
        let task = new.applied();
        let (tell, processed) = tokio::sync::oneshot::channel();
        // A creation owes no parent a note: the store's submit, announced in `settle`.
        let committing =
            crate::metered::submit(&*self.store, vec![Change::Create(Box::new(new))]).await?;
        Ok(Intake::Queued {
            log: LogPosition {
                task_id,
                first: Box::new(created),
                from_seq: 1,
                message_id: Some(message.message_id.clone()),
            },
            push_from: 0,
            run: Run {
                lease: Some(lease),
                created: Some(Box::new(Created {
                    task,
                    item,
                    processed: Some(tell),
                })),
                committing: Some(committing),
                processed: Some(processed),
            },
        })
    }
}

fn text_of(message: &Message) -> String {
    message
        .parts
        .iter()
        .filter_map(Part::as_text)
        .collect::<Vec<_>>()
        .join("\n")
}
