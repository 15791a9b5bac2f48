//! The 11 methods over the core and the store.
//!
//! A message goes through intake here (identity, participants, commands, envelopes, A2UI
//! actions, de-duplication), then into the task's inbox; the runner (see `runner`) turns it
//! into the agent's reply. Blocking sends and streams follow the task's event log, so they
//! work the same whichever process runs the task.

use std::collections::HashMap;
use std::sync::Arc;

use a2a::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, Message, Part, PartContent, Role, SendMessageRequest,
    SendMessageResponse, StreamResponse, SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
    TaskState, TaskStatusUpdateEvent,
};
use async_trait::async_trait;
use chrono::Utc;
use futures::StreamExt;
use futures::stream;
use serde_json::Value;
use serde_json::value::RawValue;
use task_core::commands::{self, Command};
use task_core::envelope::{self, Envelope};
use task_core::ids::IdKind;
use task_core::lifecycle::{self, LifecycleEvent};
use task_core::policy::{self, AccessDenied, Action};
use task_core::{A2UI_MEDIA_TYPE, DomainError, TASK_METADATA_KEY};
use task_store::{
    AuditEntry, Change, Conflict, InboxItem, InboxKey, Lease, ListQuery, NewTask, Newer,
    PendingCommit, Store, StoreError, StoredTask, TaskRecord, TaskUpdate,
};
use tracing::{error, warn};

use crate::agents::Agent;
use crate::api::{A2aApi, EventStream, RequestContext, render};
use crate::card;
use crate::config::ServiceConfig;
use crate::error::ServiceError;
use crate::identity::{self, Who};
use crate::listener::{EventListener, Wakeup};
use crate::message_checks::{self, media_type};
use crate::push::configs as push_configs;
use crate::push::{WebhookPolicy, check_webhook_url};
use crate::refusals::RefusalBudget;
use crate::runner::{Created, Processed, Runner};
use crate::views::{View, Views};
use crate::{subtasks, view};

/// The longest page token a client may send back (ours are far shorter).
const MAX_PAGE_TOKEN_BYTES: usize = 1024;

/// How many times a request re-reads a task whose version moved under it.
const MAX_RETRIES: usize = 20;

pub struct Service {
    store: Arc<dyn Store>,
    config: Arc<ServiceConfig>,
    card: AgentCard,
    runner: Runner,
    agent: Arc<dyn Agent>,
    /// Hears every append: wakes this process's streams, then tells the configured listener.
    listener: Arc<dyn EventListener>,
    wakeup: Arc<Wakeup>,
    /// Where `returnImmediately` runs go (deployed: the runner function); `None`: this
    /// process runs them in the background.
    dispatcher: Option<Arc<dyn RunDispatcher>>,
    /// GetTask's rendered answers, per task and version.
    views: Views,
    /// Refusals written down per task and per caller.
    refusals: RefusalBudget,
}

/// Bytes of rendered task views kept for GetTask.
const VIEWS_BUDGET: usize = 32 * 1024 * 1024;

/// Hands a run to another process: the task, and the lease its creator took (or `None`: the
/// receiver takes the lease itself).
#[async_trait::async_trait]
pub trait RunDispatcher: Send + Sync {
    async fn dispatch(&self, task_id: &str, lease: Option<Lease>) -> Result<(), String>;
}

/// What intake made of a message.
enum Intake {
    /// Answered at once (a command, a refusal, a repeat, an envelope with nothing else): the
    /// task view for a blocking call and the events for a stream (a new task's first).
    /// `push_from`: where an inline push config starts, `None` when the sender may not
    /// follow the task (a refusal).
    Answered {
        task: Box<Task>,
        events: Vec<StreamResponse>,
        push_from: Option<u64>,
    },
    /// Queued for the runner; the answer is in the log from `from_seq` on.
    Queued {
        task_id: String,
        message_id: String,
        first: Box<Task>,
        from_seq: u64,
        push_from: u64,
        run: Run,
    },
    /// The agent answered a new message directly: no task, nothing stored.
    Direct(Box<Message>),
}

/// How a queued message is to be run.
struct Run {
    /// The run lease, when the task was created with it (this process runs it).
    lease: Option<Lease>,
    /// The task as just created with the message queued, for its runner.
    created: Option<Box<Created>>,
    /// The commit that creates the task, submitted and not yet known to be done
    /// (`TaskStore::submit`): the runner may start before it is, as its own writes come
    /// after it, but no client is answered until it is.
    committing: Option<PendingCommit>,
    /// Told the task as the run processed the message, when this process runs it.
    processed: Option<tokio::sync::oneshot::Receiver<Processed>>,
}

impl Intake {
    /// Answered on a task the sender follows, with the one event of its stream.
    fn answered(task: Task, event: StreamResponse, push_from: u64) -> Self {
        Intake::Answered {
            task: Box::new(task),
            events: vec![event],
            push_from: Some(push_from),
        }
    }
}

fn internal(context: &str, err: impl std::fmt::Display) -> ServiceError {
    error!(%err, "{context}");
    ServiceError::Internal
}

/// Store errors a request cannot act on.
fn store_error(err: StoreError) -> ServiceError {
    match err {
        StoreError::TooLarge(text) | StoreError::Invalid(text) => ServiceError::InvalidParams(text),
        StoreError::NotFound(what) => {
            ServiceError::TaskNotFound(what.trim_start_matches("task ").to_owned())
        }
        StoreError::Backend(err) => {
            warn!(%err, "storage backend failed");
            ServiceError::Unavailable
        }
        other => internal("store", other),
    }
}

fn domain_error(err: DomainError) -> ServiceError {
    match err {
        DomainError::TaskTerminal(_) => ServiceError::UnsupportedOperation(err.to_string()),
        DomainError::NotCancelable(_) => ServiceError::TaskNotCancelable(err.to_string()),
        DomainError::TransitionNotAllowed { .. } => internal("lifecycle", err),
        other => ServiceError::InvalidParams(other.to_string()),
    }
}

/// The agent's direct answer to `request`: a Message in the request's context (or a new one)
/// that belongs to no task.
fn direct_message(request: &Message, text: String) -> Message {
    let mut message = Message::new(Role::Agent, vec![Part::text(text)]);
    message.context_id = Some(
        request
            .context_id
            .clone()
            .filter(|c| !c.is_empty())
            .unwrap_or_else(a2a::new_context_id),
    );
    message
}

fn text_of(message: &Message) -> String {
    message
        .parts
        .iter()
        .filter_map(Part::as_text)
        .collect::<Vec<_>>()
        .join("\n")
}

impl Service {
    pub fn new(
        store: Arc<dyn Store>,
        config: ServiceConfig,
        agent: Arc<dyn Agent>,
        listener: Option<Arc<dyn EventListener>>,
    ) -> Self {
        let config = Arc::new(config);
        let refusals = RefusalBudget::new(config.refusal_limits);
        let card = card::agent_card(&config);
        let wakeup = Arc::new(Wakeup::new(listener));
        let listener: Arc<dyn EventListener> = wakeup.clone();
        let runner = Runner::new(
            store.clone(),
            config.clone(),
            agent.clone(),
            Some(listener.clone()),
        );
        Self {
            store,
            config,
            card,
            runner,
            agent,
            listener,
            wakeup,
            dispatcher: None,
            views: Views::new(VIEWS_BUDGET),
            refusals,
        }
    }

    /// Hands `returnImmediately` runs to `dispatcher` instead of running them here.
    pub fn with_dispatcher(mut self, dispatcher: Arc<dyn RunDispatcher>) -> Self {
        self.dispatcher = Some(dispatcher);
        self
    }

    pub fn runner(&self) -> &Runner {
        &self.runner
    }

    fn default_participant(&self) -> Option<&str> {
        self.config.default_participant.as_deref()
    }

    /// The caller of a request without a message.
    fn caller(&self, ctx: &RequestContext) -> Result<Who, ServiceError> {
        identity::caller(ctx, self.default_participant(), &self.config.agent_id)
    }

    fn appended(&self, task_id: &str) {
        self.listener.events_appended(task_id);
    }

    async fn read(&self, task_id: &str) -> Result<Option<StoredTask>, ServiceError> {
        self.store.get(task_id).await.map_err(store_error)
    }

    /// A task the caller may see, or not found (a stranger cannot tell the difference).
    async fn visible(&self, task_id: &str, caller: &Who) -> Result<StoredTask, ServiceError> {
        identity::check(IdKind::Task, "id", task_id)?;
        match self.read(task_id).await? {
            Some(t) if identity::authorize(&t.record.extension, caller, Action::Read).is_ok() => {
                Ok(t)
            }
            _ => Err(ServiceError::TaskNotFound(task_id.to_owned())),
        }
    }

    async fn full_view(
        &self,
        stored: &StoredTask,
        history: Option<usize>,
        artifacts: bool,
    ) -> Result<Task, ServiceError> {
        self.full_view_knowing(stored, history, artifacts, None)
            .await
    }

    /// [`full_view`](Self::full_view), with the task's whole history at `stored`'s version
    /// if the caller has it (`known`), which then is not read.
    async fn full_view_knowing(
        &self,
        stored: &StoredTask,
        history: Option<usize>,
        artifacts: bool,
        known: Option<Vec<Message>>,
    ) -> Result<Task, ServiceError> {
        let id = &stored.record.id;
        let known = known.filter(|k| k.len() as u64 == stored.counters.history);
        let history = match (history, known) {
            (Some(0), _) => None,
            (limit, Some(mut whole)) => {
                if let Some(limit) = limit {
                    whole.drain(..whole.len().saturating_sub(limit));
                }
                Some(whole)
            }
            (limit, None) => Some(self.store.history(id, limit).await.map_err(store_error)?),
        };
        // The counters say whether there is any artifact to read.
        let artifacts = if artifacts && !stored.counters.artifact_ids.is_empty() {
            Some(self.store.artifacts(id).await.map_err(store_error)?).filter(|a| !a.is_empty())
        } else {
            None
        };
        Ok(view::task(&stored.record, history, artifacts))
    }

    /// The task as it was at `stored`'s version, though the store may have moved on: the
    /// history it had then (its first messages), no artifacts if it had none.
    async fn view_at_version(
        &self,
        stored: &StoredTask,
        history: Option<usize>,
    ) -> Result<Task, ServiceError> {
        let mut view = self.full_view(stored, Some(0), true).await?;
        if history != Some(0) {
            let id = &stored.record.id;
            let mut messages = self.store.history(id, None).await.map_err(store_error)?;
            messages.truncate(usize::try_from(stored.counters.history).unwrap_or(usize::MAX));
            if let Some(limit) = history {
                messages.drain(..messages.len().saturating_sub(limit));
            }
            view.history = Some(messages);
        }
        Ok(view)
    }

    /// Commits with the notes the changes owe the tasks' parents (`subtasks::commit`).
    async fn commit(&self, changes: Vec<Change>) -> Result<(), StoreError> {
        let touched: Vec<String> = changes
            .iter()
            .filter(|c| match c {
                Change::Create(new) => !new.events.is_empty(),
                Change::Update(update) => !update.events.is_empty(),
                Change::Enqueue { .. } => false,
            })
            .map(|c| c.task_id().to_owned())
            .collect();
        let noted = subtasks::commit(&*self.store, changes, &self.config.agent_id).await?;
        for task_id in touched {
            self.appended(&task_id);
        }
        for parent in noted {
            self.runner.kick(&parent);
        }
        Ok(())
    }

    /// Intake of a message: refusals, commands, envelopes, new tasks, queueing.
    async fn intake(
        &self,
        ctx: &RequestContext,
        req: &SendMessageRequest,
    ) -> Result<Intake, ServiceError> {
        let message = &req.message;
        message_checks::check(message, &self.card.default_input_modes)?;
        let sender = identity::sender(
            ctx,
            message,
            self.default_participant(),
            &self.config.agent_id,
        )?;
        let push = req
            .configuration
            .as_ref()
            .and_then(|c| c.task_push_notification_config.clone());
        if let Some(config) = &push {
            if let Some(id) = config.id.as_deref().filter(|id| !id.is_empty()) {
                identity::check(IdKind::PushConfig, "taskPushNotificationConfig.id", id)?;
            }
            check_webhook_url(&config.url, &self.webhook_policy()).await?;
        }
        let mut intake = match &message.task_id {
            None => match self.agent.direct_reply(message) {
                Some(text) => Intake::Direct(Box::new(direct_message(message, text))),
                None => self.new_task(&sender, message).await?,
            },
            Some(task_id) => self.follow_up(&sender, task_id, message).await?,
        };
        let push_from = match &intake {
            Intake::Answered {
                push_from, task, ..
            } => push_from.map(|from| (task.id.clone(), from)),
            Intake::Queued {
                task_id, push_from, ..
            } => Some((task_id.clone(), *push_from)),
            Intake::Direct(_) => None,
        };
        if let (Some(mut config), Some((task_id, from))) = (push, push_from) {
            // The config is stored on the task, which must be created first.
            if let Intake::Queued { task_id, run, .. } = &mut intake {
                self.settle(task_id, run.committing.take()).await?;
            }
            config.task_id = task_id;
            if let Err(err) = self.put_push_config(config, from, &sender.id).await {
                // The message is queued all the same: run it rather than strand it.
                if let Intake::Queued { task_id, run, .. } = intake {
                    self.start(&task_id, run);
                }
                return Err(err);
            }
        }
        Ok(intake)
    }

    /// Waits for the commit that created the task of a queued message, if it is still on its
    /// way, then tells the listeners of the events it appended.
    async fn settle(
        &self,
        task_id: &str,
        committing: Option<PendingCommit>,
    ) -> Result<(), ServiceError> {
        if let Some(committing) = committing {
            committing.await.map_err(store_error)?;
            self.appended(task_id);
        }
        Ok(())
    }

    /// Runs a queued message: here, or handed to the dispatcher when `hand_off` asks for it
    /// and one is configured. Returns once the write that queued it is durable, with what
    /// will tell the task as its run here processed the message (if it runs here and says).
    async fn launch(
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
    fn start(&self, task_id: &str, run: Run) {
        match run.lease {
            Some(lease) => self.runner.kick_leased(lease, run.created.map(|c| *c)),
            None => self.runner.kick(task_id),
        };
    }

    /// The move to CANCELED of a task, or why it cannot be canceled in its state.
    fn cancel_transition(record: &TaskRecord) -> Result<lifecycle::Transition, DomainError> {
        lifecycle::next(
            record.state(),
            record.sub_state,
            record.extension.effective_lifecycle(),
            LifecycleEvent::Cancel,
        )
    }

    /// Cancels one task with `transition` (a conditional write from the states it names).
    async fn cancel_one(
        &self,
        stored: &StoredTask,
        transition: lifecycle::Transition,
        why: &str,
    ) -> Result<StoredTask, StoreError> {
        let record = &stored.record;
        let mut next = record.clone();
        let message = view::agent_message(record, why.to_owned());
        next.status = view::status(transition.to.clone(), Some(message), Utc::now());
        next.sub_state = None;
        next.agent.pending_help = None;
        let mut update = TaskUpdate::new(stored.clone());
        update.allowed_states = transition.from.to_vec();
        update.events.push(view::status_update(&next, None));
        update.record = Some(next);
        let canceled = update.applied();
        self.commit(vec![Change::Update(Box::new(update))]).await?;
        Ok(canceled)
    }

    /// A canceled task's unfinished sub-tasks on this service are canceled with it, and
    /// theirs in turn (best effort: a child that cannot be canceled is logged and left). Only
    /// along links the service made, which both ends record: a child that does not name its
    /// parent in `parent_tasks` is not the parent's to cancel.
    async fn cancel_children(&self, parent: &TaskRecord) {
        let mut queue: Vec<(String, String)> = unfinished_children(parent)
            .into_iter()
            .map(|child| (parent.id.clone(), child))
            .collect();
        let mut seen = std::collections::HashSet::new();
        while let Some((parent_id, child_id)) = queue.pop() {
            if !seen.insert(child_id.clone()) {
                continue;
            }
            for _ in 0..MAX_RETRIES {
                let Ok(Some(child)) = self.read(&child_id).await else {
                    break;
                };
                if !names_parent(&child.record, &parent_id) {
                    warn!(task_id = %child_id, parent = %parent_id, "not canceled with a task it does not name as its parent");
                    break;
                }
                if lifecycle::TERMINAL.contains(child.record.state()) {
                    break;
                }
                let Ok(transition) = Self::cancel_transition(&child.record) else {
                    break;
                };
                let why = format!("canceled with its parent {}", parent.id);
                match self.cancel_one(&child, transition, &why).await {
                    Ok(canceled) => {
                        queue.extend(
                            unfinished_children(&canceled.record)
                                .into_iter()
                                .map(|grandchild| (child_id.clone(), grandchild)),
                        );
                        break;
                    }
                    Err(StoreError::Conflict(Conflict::TaskChanged(_))) => continue,
                    Err(err) => {
                        warn!(task_id = %child_id, error = %err, "a sub-task was not canceled with its parent");
                        break;
                    }
                }
            }
        }
    }

    fn webhook_policy(&self) -> WebhookPolicy {
        WebhookPolicy {
            allow_private: self.config.allow_private_webhooks,
        }
    }

    /// The message as the task keeps it: with the task and context it belongs to.
    fn inbox_item(sender: &str, message: &Message, record: &TaskRecord) -> InboxItem {
        let mut message = message.clone();
        message.task_id = Some(record.id.clone());
        message.context_id = Some(record.context_id.clone());
        InboxItem {
            key: InboxKey {
                enqueued_at: Utc::now(),
                message_id: message.message_id.clone(),
            },
            sender: sender.to_owned(),
            message,
        }
    }

    async fn new_task(&self, who: &Who, message: &Message) -> Result<Intake, ServiceError> {
        let sender = who.as_str();
        let text = text_of(message);
        let task_id = a2a::new_task_id();
        let context_id = message
            .context_id
            .clone()
            .unwrap_or_else(a2a::new_context_id);
        let envelope = envelope::find_envelope(&message.parts).map_err(domain_error)?;
        let payload = match &envelope {
            Some(Envelope::Task(payload)) => Some(payload),
            _ => None,
        };
        let extension = envelope::new_task_extension(sender, &self.config.agent_id, &text, payload)
            .map_err(domain_error)?;
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
        let mut record = TaskRecord {
            id: task_id.clone(),
            context_id: context_id.clone(),
            status: view::status(TaskState::Submitted, None, now),
            sub_state: None,
            extension,
            agent: Default::default(),
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

        if let Some(command) = commands::parse(&message.parts) {
            // A command as the first message opens a conversation that waits for the next one.
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
                task_core::extension::Lifecycle::Conversation,
                LifecycleEvent::CommandApplied,
            )
            .map_err(domain_error)?;
            record.status = view::status(
                transition.to,
                Some(view::agent_message(&record, reply)),
                now,
            );
            record.sub_state = transition.sub_state;
            new.record = record.clone();
            new.message_ids.push(message.message_id.clone());
            let event = view::status_update(&record, Some(&message.message_id));
            new.events.push(event.clone());
            self.commit(vec![Change::Create(Box::new(new))])
                .await
                .map_err(store_error)?;
            // The stream starts with the task, then the command's answer.
            return Ok(Intake::Answered {
                task: Box::new(view::task(&record, Some(vec![]), None)),
                events: vec![StreamResponse::Task(created), event],
                push_from: Some(0),
            });
        }

        let has_content = message
            .parts
            .iter()
            .any(|p| !matches!(envelope_kind(p), Some(EnvelopePart::Task)));
        if has_content {
            // The task is created with its message accepted and this process running it: the
            // transition to WORKING, its event and the run lease go in the creating write.
            let accepted = lifecycle::next(
                &TaskState::Submitted,
                None,
                record.extension.effective_lifecycle(),
                LifecycleEvent::MessageAccepted {
                    answers_help_request: false,
                },
            )
            .map_err(domain_error)?;
            let item = Self::inbox_item(sender, message, &record);
            new.inbox.push(item.clone());
            record.status = view::status(accepted.to, None, now);
            record.sub_state = accepted.sub_state;
            new.events
                .push(view::status_update(&record, Some(&message.message_id)));
            new.record = record;
            let lease = self.runner.new_lease(&task_id);
            new.lease = Some(lease.clone());
            let task = new.applied();
            let (tell, processed) = tokio::sync::oneshot::channel();
            // A creation owes no parent a note: the store's submit, announced in `settle`.
            let committing = self
                .store
                .submit(vec![Change::Create(Box::new(new))])
                .await
                .map_err(store_error)?;
            return Ok(Intake::Queued {
                task_id,
                message_id: message.message_id.clone(),
                first: Box::new(created),
                from_seq: 1,
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
            });
        }
        // An envelope alone creates the task and asks nothing of the agent: like a command,
        // it leaves a conversation waiting for the next message.
        let transition = lifecycle::next(
            &TaskState::Submitted,
            None,
            record.extension.effective_lifecycle(),
            LifecycleEvent::CommandApplied,
        )
        .map_err(domain_error)?;
        record.status = view::status(transition.to, None, now);
        record.sub_state = transition.sub_state;
        new.record = record.clone();
        new.message_ids.push(message.message_id.clone());
        let event = view::status_update(&record, Some(&message.message_id));
        new.events.push(event.clone());
        self.commit(vec![Change::Create(Box::new(new))])
            .await
            .map_err(store_error)?;
        Ok(Intake::Answered {
            task: Box::new(view::task(&record, Some(vec![]), None)),
            events: vec![StreamResponse::Task(created), event],
            push_from: Some(0),
        })
    }

    async fn follow_up(
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
        self.commit(vec![Change::Update(Box::new(update))])
            .await
            .map_err(Retry::from)?;
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
            return Err(Retry::Fail(domain_error(DomainError::TaskTerminal(
                record.state().clone(),
            ))));
        }
        if let Some(command) = commands::parse(&message.parts) {
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
        let envelope =
            envelope::find_envelope(&message.parts).map_err(|e| Retry::Fail(domain_error(e)))?;
        if let Some(Envelope::Recorded { .. }) = &envelope {
            envelope::check_recorded(&record.extension, sender)
                .map_err(|e| Retry::Fail(domain_error(e)))?;
        }
        let mut edited = false;
        if let Some(Envelope::Task(payload)) = &envelope {
            let edit =
                envelope::apply_envelope(&record.extension, sender, &self.config.agent_id, payload)
                    .map_err(|e| Retry::Fail(domain_error(e)))?;
            let mut next = record.clone();
            next.extension = edit.task.clone();
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
            }
            let has_content = message
                .parts
                .iter()
                .any(|p| !matches!(envelope_kind(p), Some(EnvelopePart::Task)));
            if !has_content {
                update.message_ids.push(message.message_id.clone());
            }
            let next_seq = stored.counters.events + update.events.len() as u64;
            self.commit(vec![Change::Update(Box::new(update))])
                .await
                .map_err(Retry::from)?;
            if edit.changes_participants() {
                self.remove_leavers_push_configs(&next).await;
            }
            if !has_content {
                let task = view::task(&next, None, None);
                return Ok(Intake::answered(
                    task,
                    StreamResponse::StatusUpdate(event),
                    next_seq,
                ));
            }
            edited = true;
        }
        // Queue it for the runner. The log position is taken before queueing, so the sender's
        // stream cannot miss the answer.
        let current = if edited {
            self.read(&record.id)
                .await
                .map_err(Retry::Fail)?
                .ok_or(Retry::Again)?
        } else {
            stored.clone()
        };
        // The lease first (when free), then the message: a process that dies in between
        // leaves an expiring lease for the sweeper, never a message nobody will run.
        let lease = self
            .runner
            .try_lease(&record.id)
            .await
            .map_err(|e| Retry::Fail(store_error(e)))?;
        let queued = self
            .store
            .enqueue(&record.id, Self::inbox_item(sender, message, record))
            .await;
        if let (Err(_), Some(lease)) = (&queued, &lease) {
            // Not simply given back: a sender that found the lease held queued its message
            // for this holder to run.
            self.runner.kick_leased(lease.clone(), None);
        }
        match queued {
            Ok(()) => Ok(Intake::Queued {
                task_id: record.id.clone(),
                message_id: message.message_id.clone(),
                first: Box::new(view::task(&current.record, None, None)),
                from_seq: current.counters.events,
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
            Err(err) => Err(Retry::Fail(store_error(err))),
        }
    }

    async fn command(
        &self,
        sender: &str,
        stored: &StoredTask,
        message: &Message,
        command: Result<Command, DomainError>,
    ) -> Result<Intake, Retry> {
        let record = &stored.record;
        let reply = match policy::authorize(&record.extension, sender, Action::Command) {
            Err(denied) => Err(denied.to_string()),
            Ok(_) => command
                .and_then(|c| commands::apply(&record.extension, &self.config.catalog, &c))
                .map_err(|e| e.to_string()),
        };
        let now = Utc::now();
        let (text, changed) = match reply {
            Ok(outcome) => (outcome.reply, outcome.task),
            Err(refusal) => (refusal, None),
        };
        let lifecycle = record.extension.effective_lifecycle();
        let transition = lifecycle::next(
            record.state(),
            record.sub_state,
            lifecycle,
            LifecycleEvent::CommandApplied,
        )
        .map_err(|e| Retry::Fail(domain_error(e)))?;
        let mut next = record.clone();
        if let Some(ext) = changed {
            next.extension = ext;
        }
        next.status = view::status(
            transition.to.clone(),
            Some(view::agent_message(record, text)),
            now,
        );
        next.sub_state = transition.sub_state;
        let event = view::status_update(&next, Some(&message.message_id));
        let mut update = TaskUpdate::new(stored.clone());
        update.allowed_states = transition.from.to_vec();
        update.message_ids.push(message.message_id.clone());
        update.events.push(event.clone());
        update.audit.push(AuditEntry::new(
            now,
            &message.message_id,
            Some(sender),
            true,
            "command",
        ));
        update.record = Some(next.clone());
        let next_seq = stored.counters.events + 1;
        match self.commit(vec![Change::Update(Box::new(update))]).await {
            Ok(()) => Ok(Intake::answered(
                view::task(&next, None, None),
                event,
                next_seq,
            )),
            Err(StoreError::Conflict(Conflict::DuplicateMessage { .. })) => {
                let task = view::task(record, None, None);
                Ok(Intake::answered(
                    task.clone(),
                    StreamResponse::Task(task),
                    stored.counters.events,
                ))
            }
            Err(err) => Err(Retry::from(err)),
        }
    }

    /// Stores `owner`'s config (see `push::configs` for the rules the store enforces).
    async fn put_push_config(
        &self,
        mut config: TaskPushNotificationConfig,
        from_seq: u64,
        owner: &str,
    ) -> Result<TaskPushNotificationConfig, ServiceError> {
        let id = config
            .id
            .clone()
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        identity::check(IdKind::PushConfig, "id", &id)?;
        config.id = Some(id.clone());
        // Someone else's id is refused before the dispatcher hears of it (being told would
        // move that config's cursor); the store's own check is the one that counts.
        let existing = self
            .store
            .get_push_config(&config.task_id, &id)
            .await
            .map_err(store_error)?;
        if existing.is_some_and(|c| !c.is_owned_by(owner)) {
            return Err(ServiceError::InvalidParams(
                Conflict::PushConfigTaken {
                    task_id: config.task_id.clone(),
                    config_id: id,
                }
                .to_string(),
            ));
        }
        self.listener
            .push_config_storing(&config.task_id, &id, from_seq);
        let stored = self
            .store
            .put_push_config(owner, config)
            .await
            .map_err(|err| push_configs::put_refusal(err).unwrap_or_else(store_error))?;
        self.listener.push_config_stored(&stored.task_id);
        Ok(stored)
    }

    /// After an edit of the participants: the configs of those who left go (deliveries skip
    /// them anyway; a failure here is logged).
    async fn remove_leavers_push_configs(&self, task: &TaskRecord) {
        if let Err(err) = push_configs::remove_strays(&*self.store, &task.id, &task.extension).await
        {
            warn!(task_id = %task.id, %err, "cannot remove the push configs of those who left the task");
        }
    }

    /// Events of the task from `from_seq` on, after `first`; ends after a terminal state, or an
    /// interrupted one that answers `message_id` (any interrupted one when `None`).
    fn follow(
        &self,
        task_id: String,
        first: Task,
        from_seq: u64,
        message_id: Option<String>,
    ) -> EventStream {
        let ends_at_once = lifecycle::TERMINAL.contains(&first.status.state);
        let store = self.store.clone();
        let poll = self.config.poll_interval;
        let first = stream::once(async move { Ok(StreamResponse::Task(first)) });
        if ends_at_once {
            return first.boxed();
        }
        // Subscribed before the first read, so no append between the read and the wait is missed.
        let woken = self.wakeup.subscribe(&task_id);
        let rest = stream::unfold(
            (
                store,
                from_seq,
                Vec::<StreamResponse>::new().into_iter(),
                false,
                woken,
            ),
            move |(store, mut next, mut pending, mut done, mut woken)| {
                let task_id = task_id.clone();
                let message_id = message_id.clone();
                async move {
                    loop {
                        if let Some(event) = pending.next() {
                            let state = view::event_state(&event);
                            let terminal = state.is_some_and(|s| lifecycle::TERMINAL.contains(s));
                            let answers = match (&message_id, view::event_in_reply_to(&event)) {
                                (None, _) => true,
                                (Some(mine), Some(theirs)) => mine == theirs,
                                (Some(_), None) => false,
                            };
                            if terminal || (state.is_some_and(view::is_interrupted) && answers) {
                                done = true;
                            }
                            return Some((Ok(event), (store, next, pending, done, woken)));
                        }
                        if done {
                            return None;
                        }
                        match store.events(&task_id, next, 100).await {
                            Ok(events) if events.is_empty() => {
                                // An append in this process wakes us at once; another
                                // process's append is seen at the next poll.
                                tokio::select! {
                                    _ = woken.next() => {}
                                    _ = tokio::time::sleep(poll) => {}
                                }
                            }
                            Ok(events) => {
                                next = events.last().map_or(next, |e| e.seq + 1);
                                pending = events
                                    .into_iter()
                                    .map(|e| e.event)
                                    .collect::<Vec<_>>()
                                    .into_iter();
                            }
                            Err(err) => {
                                return Some((
                                    Err(store_error(err)),
                                    (store, next, pending, true, woken),
                                ));
                            }
                        }
                    }
                }
            },
        );
        first.chain(rest).boxed()
    }
}

/// Whether `child` names `parent_id` among its parents on this service.
fn names_parent(child: &TaskRecord, parent_id: &str) -> bool {
    child
        .extension
        .parent_tasks
        .iter()
        .any(|r| r.agent.is_none() && r.task_id == parent_id)
}

/// The sub-tasks on this service of `record` that have not ended.
fn unfinished_children(record: &TaskRecord) -> Vec<String> {
    record
        .extension
        .unresolved_sub_tasks()
        .filter(|r| r.agent.is_none())
        .map(|r| r.task_id.clone())
        .collect()
}

/// A follow-up attempt: retry on a fresh read, or fail with this error.
enum Retry {
    Again,
    Fail(ServiceError),
}

impl From<StoreError> for Retry {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict(Conflict::TaskChanged(_)) => Retry::Again,
            StoreError::Conflict(Conflict::DuplicateMessage { .. }) => Retry::Fail(
                ServiceError::InvalidParams("this message id was already received".to_owned()),
            ),
            other => Retry::Fail(store_error(other)),
        }
    }
}

enum EnvelopePart {
    Task,
}

/// Whether a part is a task envelope (applied on arrival, never shown to the agent).
fn envelope_kind(part: &Part) -> Option<EnvelopePart> {
    match (media_type(part), &part.content) {
        (task_core::TASK_MEDIA_TYPE, _) => Some(EnvelopePart::Task),
        (task_core::EVENT_MEDIA_TYPE, PartContent::Data(data))
            if data.get("kind").and_then(Value::as_str) == Some("task") =>
        {
            Some(EnvelopePart::Task)
        }
        _ => None,
    }
}

#[async_trait]
impl A2aApi for Service {
    fn agent_card(&self) -> &AgentCard {
        &self.card
    }

    async fn send_message(
        &self,
        ctx: &RequestContext,
        req: SendMessageRequest,
    ) -> Result<SendMessageResponse, ServiceError> {
        let history =
            view::history_limit(req.configuration.as_ref().and_then(|c| c.history_length))?;
        let immediately = req
            .configuration
            .as_ref()
            .and_then(|c| c.return_immediately)
            .unwrap_or(false);
        match self.intake(ctx, &req).await? {
            Intake::Answered { task, .. } => Ok(SendMessageResponse::Task(*task)),
            Intake::Direct(message) => Ok(SendMessageResponse::Message(*message)),
            Intake::Queued {
                task_id,
                message_id,
                first,
                from_seq,
                run,
                ..
            } => {
                // An immediate answer shows a new task as its creation left it, not what
                // its run (which may already be done) made of it.
                let as_created = run
                    .created
                    .as_ref()
                    .filter(|_| immediately)
                    .map(|c| c.task.clone());
                let processed = self.launch(&task_id, run, immediately).await?;
                if let Some(created) = as_created {
                    return Ok(SendMessageResponse::Task(
                        self.view_at_version(&created, history).await?,
                    ));
                }
                let mut settled = None;
                if !immediately {
                    // Blocking: until the task ends or waits on the answer to this message.
                    // A run in this process says how it left the task; if that is not yet
                    // the answer (or the run is elsewhere), the event log tells.
                    let deadline = tokio::time::Instant::now() + self.config.blocking_timeout;
                    if let Some(processed) = processed
                        && let Ok(Ok(processed)) =
                            tokio::time::timeout_at(deadline, processed).await
                    {
                        let state = processed.task.record.state();
                        if lifecycle::TERMINAL.contains(state) || view::is_interrupted(state) {
                            settled = Some(processed);
                        }
                    }
                    if settled.is_none() {
                        let mut events =
                            self.follow(task_id.clone(), *first, from_seq, Some(message_id));
                        let wait = async { while events.next().await.is_some() {} };
                        if tokio::time::timeout_at(deadline, wait).await.is_err() {
                            warn!(task_id, "blocking send answered before the task settled");
                        }
                    }
                }
                let (stored, known) = match settled {
                    Some(Processed { task, history }) => (task, history),
                    None => (
                        self.read(&task_id)
                            .await?
                            .ok_or_else(|| ServiceError::TaskNotFound(task_id.clone()))?,
                        None,
                    ),
                };
                Ok(SendMessageResponse::Task(
                    self.full_view_knowing(&stored, history, true, known)
                        .await?,
                ))
            }
        }
    }

    async fn send_streaming_message(
        &self,
        ctx: &RequestContext,
        req: SendMessageRequest,
    ) -> Result<EventStream, ServiceError> {
        match self.intake(ctx, &req).await? {
            Intake::Answered { events, .. } => Ok(stream::iter(events.into_iter().map(Ok)).boxed()),
            Intake::Direct(message) => {
                Ok(stream::once(async move { Ok(StreamResponse::Message(*message)) }).boxed())
            }
            Intake::Queued {
                task_id,
                message_id,
                first,
                from_seq,
                run,
                ..
            } => {
                self.launch(&task_id, run, false).await?;
                Ok(self.follow(task_id, *first, from_seq, Some(message_id)))
            }
        }
    }

    async fn get_task(
        &self,
        ctx: &RequestContext,
        req: GetTaskRequest,
    ) -> Result<Task, ServiceError> {
        let caller = self.caller(ctx)?;
        let history = view::history_limit(req.history_length)?;
        let stored = self.visible(&req.id, &caller).await?;
        self.full_view(&stored, history, true).await
    }

    /// The whole view (all the history) is kept rendered per version: a task polled while
    /// it does not change costs a version check, not a read and a rendering.
    async fn get_task_json(
        &self,
        ctx: &RequestContext,
        req: GetTaskRequest,
    ) -> Result<Box<RawValue>, ServiceError> {
        let caller = self.caller(ctx)?;
        identity::check(IdKind::Task, "id", &req.id)?;
        if view::history_limit(req.history_length)?.is_some() {
            return render(&self.get_task(ctx, req).await?);
        }
        let id = req.id;
        let not_found = || ServiceError::TaskNotFound(id.clone());
        let may_read = |ext: &task_core::extension::TaskExtension| {
            identity::authorize(ext, &caller, Action::Read).is_ok()
        };
        let stored = match self.views.get(&id) {
            Some(kept) => match self
                .store
                .get_newer(&id, kept.version)
                .await
                .map_err(store_error)?
            {
                Newer::Unchanged if may_read(&kept.extension) => return Ok(kept.json.clone()),
                Newer::Unchanged => return Err(not_found()),
                Newer::Missing => {
                    self.views.forget(&id);
                    return Err(not_found());
                }
                Newer::Changed(task) => *task,
            },
            None => self.read(&id).await?.ok_or_else(not_found)?,
        };
        if !may_read(&stored.record.extension) {
            return Err(not_found());
        }
        let json = render(&self.full_view(&stored, None, true).await?)?;
        self.views.keep(
            &id,
            View {
                version: stored.version,
                extension: stored.record.extension.clone(),
                json: json.clone(),
            },
        );
        Ok(json)
    }

    async fn list_tasks(
        &self,
        ctx: &RequestContext,
        req: ListTasksRequest,
    ) -> Result<ListTasksResponse, ServiceError> {
        let caller = self.caller(ctx)?;
        let page_size = match req.page_size {
            None => 50,
            Some(n) if (1..=100).contains(&n) => n as usize,
            Some(n) => {
                return Err(ServiceError::InvalidParams(format!(
                    "pageSize must be between 1 and 100 (got {n})"
                )));
            }
        };
        // Lists carry no history unless asked: 50 full conversations would be a heavy page.
        let history = view::history_limit(req.history_length)?.or(Some(0));
        if let Some(context) = req.context_id.as_deref().filter(|c| !c.is_empty()) {
            identity::check(IdKind::Context, "contextId", context)?;
        }
        if req
            .page_token
            .as_ref()
            .is_some_and(|t| t.len() > MAX_PAGE_TOKEN_BYTES)
        {
            return Err(ServiceError::InvalidParams(format!(
                "pageToken is longer than {MAX_PAGE_TOKEN_BYTES} bytes"
            )));
        }
        let query = ListQuery {
            context_id: req.context_id.clone().filter(|c| !c.is_empty()),
            state: req.status.clone().filter(|s| *s != TaskState::Unspecified),
            status_after: req.status_timestamp_after,
            page_size,
            page_token: req.page_token.clone().filter(|t| !t.is_empty()),
        };
        let page = self
            .store
            .list(&caller.id, &query)
            .await
            .map_err(store_error)?;
        let mut tasks = Vec::with_capacity(page.tasks.len());
        for stored in &page.tasks {
            // The store lists by participant id; the policy decides (a self-asserted caller
            // is not the agent participant it names).
            if identity::authorize(&stored.record.extension, &caller, Action::Read).is_err() {
                continue;
            }
            tasks.push(
                self.full_view(stored, history, req.include_artifacts.unwrap_or(false))
                    .await?,
            );
        }
        Ok(ListTasksResponse {
            tasks,
            next_page_token: page.next_page_token,
            page_size: page_size as i32,
            total_size: page.total_size as i32,
        })
    }

    async fn cancel_task(
        &self,
        ctx: &RequestContext,
        req: CancelTaskRequest,
    ) -> Result<Task, ServiceError> {
        let caller = self.caller(ctx)?;
        for _ in 0..MAX_RETRIES {
            let stored = self.visible(&req.id, &caller).await?;
            identity::authorize(&stored.record.extension, &caller, Action::Cancel).map_err(
                |denied| {
                    ServiceError::TaskNotCancelable(format!(
                        "the task cannot be canceled: {denied}"
                    ))
                },
            )?;
            let transition = Self::cancel_transition(&stored.record).map_err(domain_error)?;
            match self
                .cancel_one(&stored, transition, &format!("canceled by {}", caller.id))
                .await
            {
                Ok(canceled) => {
                    self.cancel_children(&canceled.record).await;
                    return self.full_view(&canceled, None, true).await;
                }
                Err(StoreError::Conflict(Conflict::TaskChanged(_))) => continue,
                Err(err) => return Err(store_error(err)),
            }
        }
        Err(ServiceError::Unavailable)
    }

    async fn subscribe_to_task(
        &self,
        ctx: &RequestContext,
        req: SubscribeToTaskRequest,
    ) -> Result<EventStream, ServiceError> {
        let caller = self.caller(ctx)?;
        let stored = self.visible(&req.id, &caller).await?;
        if lifecycle::TERMINAL.contains(stored.record.state()) {
            return Err(domain_error(DomainError::TaskTerminal(
                stored.record.state().clone(),
            )));
        }
        let first = self.full_view(&stored, None, true).await?;
        Ok(self.follow(req.id, first, stored.counters.events, None))
    }

    async fn create_push_config(
        &self,
        ctx: &RequestContext,
        req: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, ServiceError> {
        let caller = self.caller(ctx)?;
        let stored = self.visible(&req.task_id, &caller).await?;
        check_webhook_url(&req.url, &self.webhook_policy()).await?;
        self.put_push_config(req, stored.counters.events, &caller.id)
            .await
    }

    async fn get_push_config(
        &self,
        ctx: &RequestContext,
        req: GetTaskPushNotificationConfigRequest,
    ) -> Result<TaskPushNotificationConfig, ServiceError> {
        let caller = self.caller(ctx)?;
        identity::check(IdKind::PushConfig, "id", &req.id)?;
        self.visible(&req.task_id, &caller).await?;
        let stored = self
            .store
            .get_push_config(&req.task_id, &req.id)
            .await
            .map_err(store_error)?;
        // A2A answers a missing config as a missing task; someone else's is missing to the
        // caller.
        push_configs::owned_by(stored, &caller.id)
            .ok_or_else(|| ServiceError::TaskNotFound(req.task_id.clone()))
    }

    async fn list_push_configs(
        &self,
        ctx: &RequestContext,
        req: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, ServiceError> {
        let caller = self.caller(ctx)?;
        self.visible(&req.task_id, &caller).await?;
        let configs = self
            .store
            .list_push_configs(&req.task_id)
            .await
            .map_err(store_error)?;
        Ok(ListTaskPushNotificationConfigsResponse {
            configs: push_configs::those_of(configs, &caller.id),
            next_page_token: None,
        })
    }

    async fn delete_push_config(
        &self,
        ctx: &RequestContext,
        req: DeleteTaskPushNotificationConfigRequest,
    ) -> Result<(), ServiceError> {
        let caller = self.caller(ctx)?;
        identity::check(IdKind::PushConfig, "id", &req.id)?;
        let stored = self.visible(&req.task_id, &caller).await?;
        // Out of the caller's scope, nothing is deleted and the answer is that of a config
        // already gone.
        let scope = push_configs::delete_scope(&stored.record.extension, &caller.id);
        self.store
            .delete_push_config(&req.task_id, &req.id, scope)
            .await
            .map_err(store_error)?;
        Ok(())
    }

    async fn get_extended_agent_card(
        &self,
        ctx: &RequestContext,
        _req: GetExtendedAgentCardRequest,
    ) -> Result<AgentCard, ServiceError> {
        self.caller(ctx)?;
        self.config.extended_card.clone().ok_or_else(|| {
            ServiceError::UnsupportedOperation(
                "this agent offers no extended agent card".to_owned(),
            )
        })
    }
}
