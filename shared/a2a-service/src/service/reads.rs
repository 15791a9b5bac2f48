//! Reading tasks: GetTask (also as JSON kept rendered per version), ListTasks, the extended
//! card, and the task views every room answers with.

use a2a::{
    AgentCard, GetTaskRequest, ListTasksRequest, ListTasksResponse, Message, Task, TaskState,
};
use serde_json::value::RawValue;
use task_core::ids::IdKind;
use task_core::policy::Action;
use task_store::{ListQuery, Newer, StoredTask};

use super::base::Service;
use crate::api::render;
use crate::error::ServiceError;
use crate::identity::{self, Who};
use crate::view;
use crate::views::View;

/// The longest page token a client may send back (ours are far shorter).
const MAX_PAGE_TOKEN_BYTES: usize = 1024;

impl Service {
    pub(super) async fn task_view(
        &self,
        caller: &Who,
        req: GetTaskRequest,
    ) -> Result<Task, ServiceError> {
        let history = view::history_limit(req.history_length)?;
        let stored = self.visible(&req.id, caller).await?;
        self.full_view(&stored, history, true).await
    }

    /// The whole view (all the history) is kept rendered per version: a task polled while
    /// it does not change costs a version check, not a read and a rendering.
    pub(super) async fn task_json(
        &self,
        caller: &Who,
        req: GetTaskRequest,
    ) -> Result<Box<RawValue>, ServiceError> {
        identity::check(IdKind::Task, "id", &req.id)?;
        if view::history_limit(req.history_length)?.is_some() {
            return render(&self.task_view(caller, req).await?);
        }
        let id = req.id;
        let not_found = || ServiceError::TaskNotFound(id.clone());
        let may_read = |ext: &task_core::extension::TaskExtension| {
            identity::authorize(ext, caller, Action::Read).is_ok()
        };
        let stored = match self.views.get(&id) {
            Some(kept) => match self.store.get_newer(&id, kept.version).await? {
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

    pub(super) async fn task_page(
        &self,
        caller: &Who,
        req: ListTasksRequest,
    ) -> Result<ListTasksResponse, ServiceError> {
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
        let page = self.store.list(&caller.id, &query).await?;
        let mut tasks = Vec::with_capacity(page.tasks.len());
        for stored in &page.tasks {
            // The store lists by participant id; the policy decides (a self-asserted caller
            // is not the agent participant it names).
            if identity::authorize(&stored.record.extension, caller, Action::Read).is_err() {
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

    pub(super) fn extended_card(&self) -> Result<AgentCard, ServiceError> {
        self.config.extended_card.clone().ok_or_else(|| {
            ServiceError::UnsupportedOperation(
                "this agent offers no extended agent card".to_owned(),
            )
        })
    }

    pub(super) async fn full_view(
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
    pub(super) async fn full_view_knowing(
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
            (limit, None) => Some(self.store.history(id, limit).await?),
        };
        // The counters say whether there is any artifact to read.
        let artifacts = if artifacts && !stored.counters.artifact_ids.is_empty() {
            Some(self.store.artifacts(id).await?).filter(|a| !a.is_empty())
        } else {
            None
        };
        Ok(view::task(&stored.record, history, artifacts))
    }

    /// The task as it was at `stored`'s version, though the store may have moved on: the
    /// history it had then (its first messages), no artifacts if it had none.
    pub(super) async fn view_at_version(
        &self,
        stored: &StoredTask,
        history: Option<usize>,
    ) -> Result<Task, ServiceError> {
        let mut view = self.full_view(stored, Some(0), true).await?;
        if history != Some(0) {
            let id = &stored.record.id;
            let mut messages = self.store.history(id, None).await?;
            messages.truncate(usize::try_from(stored.counters.history).unwrap_or(usize::MAX));
            if let Some(limit) = history {
                messages.drain(..messages.len().saturating_sub(limit));
            }
            view.history = Some(messages);
        }
        Ok(view)
    }
}
