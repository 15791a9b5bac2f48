//! The `Service` itself: what it holds, its constructor, and the few helpers every room
//! stands on (the caller, reading a visible task, committing and announcing a write).

use std::sync::Arc;

use a2a::{AgentCard, Message};
use chrono::Utc;
use task_core::ids::IdKind;
use task_core::policy::Action;
use task_store::{
    Change, InboxItem, InboxKey, Lease, NewTask, Store, StoreError, StoredTask, TaskRecord,
    TaskUpdate,
};

use crate::agents::Agent;
use crate::api::RequestContext;
use crate::card;
use crate::config::ServiceConfig;
use crate::error::ServiceError;
use crate::extension_events;
use crate::identity::{self, Who};
use crate::listener::{EventListener, Wakeup};
use crate::push::WebhookPolicy;
use crate::refusals::RefusalBudget;
use crate::runner::Runner;
use crate::subtasks;
use crate::views::Views;

/// How many times a request re-reads a task whose version moved under it.
pub(super) const MAX_RETRIES: usize = 20;

/// The task id the readiness probe reads: no task has it (ids are UUIDs and their children).
const READINESS_PROBE: &str = "readiness-probe";

/// Bytes of rendered task views kept for GetTask.
const VIEWS_BUDGET: usize = 32 * 1024 * 1024;

pub struct Service {
    pub(super) store: Arc<dyn Store>,
    pub(super) config: Arc<ServiceConfig>,
    pub(super) card: AgentCard,
    pub(super) runner: Runner,
    pub(super) agent: Arc<dyn Agent>,
    /// Hears every append: wakes this process's streams, then tells the configured listener.
    pub(super) listener: Arc<dyn EventListener>,
    pub(super) wakeup: Arc<Wakeup>,
    /// Where `returnImmediately` runs go (deployed: the runner function); `None`: this
    /// process runs them in the background.
    pub(super) dispatcher: Option<Arc<dyn RunDispatcher>>,
    /// GetTask's rendered answers, per task and version.
    pub(super) views: Views,
    /// Refusals written down per task and per caller.
    pub(super) refusals: RefusalBudget,
}

/// Hands a run to another process: the task, and the lease its creator took (or `None`: the
/// receiver takes the lease itself).
#[async_trait::async_trait]
pub trait RunDispatcher: Send + Sync {
    async fn dispatch(&self, task_id: &str, lease: Option<Lease>) -> Result<(), String>;
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

    /// Whether the store answers: one read of a task id no task has (a readiness probe).
    pub async fn ready(&self) -> Result<(), ServiceError> {
        self.store.get(READINESS_PROBE).await?;
        Ok(())
    }

    pub(super) fn default_participant(&self) -> Option<&str> {
        self.config.default_participant.as_deref()
    }

    /// The caller of a request without a message.
    pub(super) fn caller(&self, ctx: &RequestContext) -> Result<Who, ServiceError> {
        identity::caller(ctx, self.default_participant(), &self.config.agent_id)
    }

    pub(super) fn appended(&self, task_id: &str) {
        self.listener.events_appended(task_id);
    }

    pub(super) async fn read(&self, task_id: &str) -> Result<Option<StoredTask>, ServiceError> {
        Ok(self.store.get(task_id).await?)
    }

    /// A task the caller may see, or not found (a stranger cannot tell the difference).
    pub(super) async fn visible(
        &self,
        task_id: &str,
        caller: &Who,
    ) -> Result<StoredTask, ServiceError> {
        self.allowed(task_id, caller, Action::Read).await
    }

    /// A task on which the caller may do `action`, or not found: a participant who may not
    /// is told no more than a stranger.
    pub(super) async fn allowed(
        &self,
        task_id: &str,
        caller: &Who,
        action: Action,
    ) -> Result<StoredTask, ServiceError> {
        identity::check(IdKind::Task, "id", task_id)?;
        match self.read(task_id).await? {
            Some(t) if identity::authorize(&t.record.extension, caller, action).is_ok() => Ok(t),
            _ => Err(ServiceError::TaskNotFound(task_id.to_owned())),
        }
    }

    /// Commits with the notes the changes owe the tasks' parents (`subtasks::commit`), each
    /// change of an extension told by an event (`extension_events`).
    pub(super) async fn commit(&self, mut changes: Vec<Change>) -> Result<(), StoreError> {
        extension_events::announce_all(&mut changes);
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

    /// [`commit`](Self::commit) of one task's update.
    pub(super) async fn commit_update(&self, update: TaskUpdate) -> Result<(), StoreError> {
        self.commit(vec![Change::Update(Box::new(update))]).await
    }

    /// [`commit`](Self::commit) of one task's creation.
    pub(super) async fn commit_create(&self, new: NewTask) -> Result<(), StoreError> {
        self.commit(vec![Change::Create(Box::new(new))]).await
    }

    pub(super) fn webhook_policy(&self) -> WebhookPolicy {
        WebhookPolicy {
            allow_private: self.config.allow_private_webhooks,
        }
    }
}

/// The message as the task keeps it: with the task and context it belongs to.
pub(super) fn inbox_item(sender: &str, message: &Message, record: &TaskRecord) -> InboxItem {
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
