//! Commands (`/model`, `/effort`…) sent on an existing task: authorized, applied to the task's
//! settings and answered at once with a status message, never shown to the agent.

use a2a::{Message, StreamResponse};
use chrono::Utc;
use task_core::DomainError;
use task_core::commands::{self, Command};
use task_core::lifecycle::{self, LifecycleEvent};
use task_core::policy::{self, Action};
use task_store::{AuditEntry, Conflict, StoreError, StoredTask};

use super::base::Service;
use super::outcome::{Intake, Retry};
use crate::commit_step::Step;
use crate::{extension_events, view};

impl Service {
    pub(super) async fn command(
        &self,
        sender: &str,
        stored: &StoredTask,
        message: &Message,
        command: Result<Command, DomainError>,
    ) -> Result<Intake, Retry> {
        let record = &stored.record;
        let mid = message.message_id.as_str();
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
        )?;
        let mut next = record.clone();
        if let Some(ext) = changed {
            next.extension = ext;
        }
        let answer = Some(view::agent_message(record, text));
        let step = Step::new(next, transition, answer, now, Some(mid));
        let answered = view::task(&step.record, None, None);
        let mut update = step.update(stored);
        // The answer the sender gets is the event as stored: with the new setting in it.
        extension_events::announce(&mut update);
        let event = update
            .events
            .last()
            .cloned()
            .unwrap_or_else(|| StreamResponse::Task(answered.clone()));
        update.message_ids.push(mid.to_owned());
        update
            .audit
            .push(AuditEntry::new(now, mid, Some(sender), true, "command"));
        let next_seq = stored.counters.events + 1;
        match self.commit_update(update).await {
            Ok(()) => Ok(Intake::answered(answered, event, next_seq)),
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
}
