//! The methods that follow a task's event log: SendMessage (blocking until the task settles,
//! or answering at once), SendStreamingMessage and SubscribeToTask. They read the log, so
//! they work the same whichever process runs the task.

use std::collections::VecDeque;

use a2a::{SendMessageRequest, SendMessageResponse, StreamResponse, SubscribeToTaskRequest};
use futures::{StreamExt, stream};
use task_core::DomainError;
use task_core::lifecycle;
use tracing::warn;

use super::base::Service;
use super::outcome::{Intake, LogPosition};
use crate::api::{EventStream, RequestContext};
use crate::error::ServiceError;
use crate::identity::Who;
use crate::runner::Processed;
use crate::view;

impl Service {
    pub(super) async fn send(
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
            Intake::Queued { log, run, .. } => {
                let task_id = log.task_id.clone();
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
                        let mut events = self.follow(log);
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

    pub(super) async fn send_streaming(
        &self,
        ctx: &RequestContext,
        req: SendMessageRequest,
    ) -> Result<EventStream, ServiceError> {
        match self.intake(ctx, &req).await? {
            Intake::Answered { events, .. } => Ok(stream::iter(events.into_iter().map(Ok)).boxed()),
            Intake::Direct(message) => {
                Ok(stream::once(async move { Ok(StreamResponse::Message(*message)) }).boxed())
            }
            Intake::Queued { log, run, .. } => {
                self.launch(&log.task_id, run, false).await?;
                Ok(self.follow(log))
            }
        }
    }

    pub(super) async fn subscribe(
        &self,
        caller: &Who,
        req: SubscribeToTaskRequest,
    ) -> Result<EventStream, ServiceError> {
        let stored = self.visible(&req.id, caller).await?;
        if lifecycle::TERMINAL.contains(stored.record.state()) {
            return Err(DomainError::TaskTerminal(stored.record.state().clone()).into());
        }
        let first = self.full_view(&stored, None, true).await?;
        Ok(self.follow(LogPosition {
            task_id: req.id,
            first: Box::new(first),
            from_seq: stored.counters.events,
            message_id: None,
        }))
    }

    /// Events of the task from `log.from_seq` on, after `log.first`; ends after a terminal
    /// state, or an interrupted one that answers `log.message_id` (any interrupted one when
    /// `None`).
    fn follow(&self, log: LogPosition) -> EventStream {
        let LogPosition {
            task_id,
            first,
            from_seq,
            message_id,
        } = log;
        let first = *first;
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
                VecDeque::<StreamResponse>::new(),
                (false, false),
                woken,
            ),
            move |(store, mut next, mut pending, (mut done, mut seen_mine), mut woken)| {
                let task_id = task_id.clone();
                let message_id = message_id.clone();
                async move {
                    loop {
                        if let Some(event) = pending.pop_front() {
                            let state = view::event_state(&event);
                            let terminal = state.is_some_and(|s| lifecycle::TERMINAL.contains(s));
                            let answers = match (&message_id, view::event_in_reply_to(&event)) {
                                (None, _) => true,
                                (Some(mine), Some(theirs)) => mine == theirs,
                                (Some(_), None) => false,
                            };
                            // A run on this message that was cut by an interrupt ends with
                            // the interrupt's answer: after an update answering this message,
                            // the next wait ends the stream whatever it answers.
                            let interrupted = state.is_some_and(view::is_interrupted);
                            if terminal || (interrupted && (answers || seen_mine)) {
                                done = true;
                            }
                            seen_mine |= answers && message_id.is_some();
                            return Some((
                                Ok(event),
                                (store, next, pending, (done, seen_mine), woken),
                            ));
                        }
                        if done {
                            return None;
                        }
                        match store.events(&task_id, next, 100).await {
                            Ok(events) if events.is_empty() => {
                                // An append in this process wakes us at once; another
                                // process's append is seen at the next poll. A transient
                                // event (a chunk of the model's text) goes out as it comes.
                                tokio::select! {
                                    news = woken.news() => pending.extend(news),
                                    _ = tokio::time::sleep(poll) => {}
                                }
                            }
                            Ok(events) => {
                                // Transient events published before these appends were
                                // committed come first: a reply's chunks precede its status.
                                pending.extend(woken.transient_ready());
                                next = events.last().map_or(next, |e| e.seq + 1);
                                pending.extend(events.into_iter().map(|e| e.event));
                            }
                            Err(err) => {
                                return Some((
                                    Err(err.into()),
                                    (store, next, pending, (true, seen_mine), woken),
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
