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
            (store, from_seq, Queued::default(), (false, false), woken),
            move |(store, mut next, mut queued, (mut done, mut seen_mine), mut woken)| {
                let task_id = task_id.clone();
                let message_id = message_id.clone();
                async move {
                    loop {
                        if let Some(event) = queued.pop(next) {
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
                                (store, next, queued, (done, seen_mine), woken),
                            ));
                        }
                        if done {
                            return None;
                        }
                        queued.chunks.extend(woken.transient_ready());
                        match store.events(&task_id, next, 100).await {
                            Ok(events) if events.is_empty() => {
                                // A chunk placed after events this process cannot read yet
                                // goes out all the same.
                                if queued.release_chunk() {
                                    continue;
                                }
                                // An append in this process wakes us at once; another
                                // process's append is seen at the next poll. A transient
                                // event (a chunk of the model's text) goes out as it comes.
                                tokio::select! {
                                    news = woken.news() => queued.chunks.extend(news),
                                    _ = tokio::time::sleep(poll) => {}
                                }
                            }
                            Ok(events) => {
                                next = events.last().map_or(next, |e| e.seq + 1);
                                queued
                                    .log
                                    .extend(events.into_iter().map(|e| (e.seq, e.event)));
                            }
                            Err(err) => {
                                return Some((
                                    Err(err.into()),
                                    (store, next, queued, (true, seen_mine), woken),
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

/// What a follower has read and not yet sent: stored events with their numbers, and
/// transient chunks with the number of stored events that come before each.
#[derive(Default)]
struct Queued {
    log: VecDeque<(u64, StreamResponse)>,
    chunks: VecDeque<(u64, StreamResponse)>,
    /// A chunk that may go before the events it was placed after (they are not readable).
    released: Option<StreamResponse>,
}

impl Queued {
    /// The next event in the task's order: a chunk once every stored event before it was
    /// sent, else the next stored event; `next` is the number of the first event not read.
    fn pop(&mut self, next: u64) -> Option<StreamResponse> {
        if let Some(chunk) = self.released.take() {
            return Some(chunk);
        }
        let sent_before = self.log.front().map_or(next, |(seq, _)| *seq);
        if self
            .chunks
            .front()
            .is_some_and(|(after, _)| *after <= sent_before)
        {
            return self.chunks.pop_front().map(|(_, event)| event);
        }
        self.log.pop_front().map(|(_, event)| event)
    }

    /// Lets the oldest waiting chunk go out now; false if there is none.
    fn release_chunk(&mut self) -> bool {
        self.released = self.chunks.pop_front().map(|(_, event)| event);
        self.released.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(n: u64) -> StreamResponse {
        StreamResponse::Message(a2a::Message::new(
            a2a::Role::Agent,
            vec![a2a::Part::text(format!("event {n}"))],
        ))
    }

    fn text(event: Option<StreamResponse>) -> Option<String> {
        match event? {
            StreamResponse::Message(m) => m.parts[0].as_text().map(str::to_owned),
            _ => None,
        }
    }

    fn chunk(text: &str) -> StreamResponse {
        StreamResponse::Message(a2a::Message::new(
            a2a::Role::Agent,
            vec![a2a::Part::text(text)],
        ))
    }

    #[test]
    fn chunks_go_between_the_events_they_were_placed_between() {
        let mut q = Queued::default();
        // Events 3 and 4 read; a chunk placed after 4 events (0..=3), another after 5.
        q.log.extend([(3, status(3)), (4, status(4))]);
        q.chunks.extend([(4, chunk("a")), (5, chunk("b"))]);
        assert_eq!(text(q.pop(5)).as_deref(), Some("event 3"));
        assert_eq!(text(q.pop(5)).as_deref(), Some("a"));
        assert_eq!(text(q.pop(5)).as_deref(), Some("event 4"));
        assert_eq!(text(q.pop(5)).as_deref(), Some("b"));
        assert!(q.pop(5).is_none());
    }

    #[test]
    fn a_chunk_after_unread_events_waits_unless_released() {
        let mut q = Queued::default();
        q.chunks.push_back((7, chunk("a")));
        assert!(q.pop(5).is_none(), "events 5 and 6 come first");
        assert!(q.release_chunk());
        assert_eq!(text(q.pop(5)).as_deref(), Some("a"));
        assert!(!q.release_chunk());
    }
}
