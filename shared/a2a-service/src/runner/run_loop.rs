//! The run loop: the lease holder drains the task's inbox in order, and each message goes
//! from intake (again: the task may have ended or the sender left since it was queued) to
//! the agent's turn, or to the room that records it otherwise (a refusal, a note, an answer).

use std::collections::HashSet;

use a2a::{Message, Part, TaskState};
use chrono::{DateTime, Utc};
use task_core::envelope;
use task_core::lifecycle::{self, LifecycleEvent};
use task_core::policy::{self, Action};
use task_store::{Conflict, InboxItem, Lease, StoreError, StoredTask, TaskRecord, TaskUpdate};
use tracing::{Instrument as _, debug};

use super::handle::{Created, MAX_RETRIES, Processed, RunEnd, Runner};
use super::interrupts::{Held, Interruptible, Watch};
use super::items::{agent_input, audit, consuming, message_text};
use crate::agents::TurnContext;
use crate::{subtasks, view};

impl Runner {
    /// Drains the task's inbox under its lease (`held`, or taken here; returns at once if
    /// another runner holds it), then gives the lease up; `first` is the task its creator just
    /// committed, run without reading it back.
    pub(super) async fn try_run(
        &self,
        task_id: &str,
        mut held: Option<Lease>,
        mut first: Option<Created>,
    ) -> Result<(), StoreError> {
        let store = &self.inner.store;
        let owner = self.owner();
        let ttl = self.ttl();
        let mut spent_interrupts = HashSet::new();
        loop {
            let acquired = match held.take() {
                Some(lease) => Some(lease),
                None => self.acquire_as(task_id, &owner).await?,
            };
            // Another runner holds the task: its holder drains the inbox.
            let Some(mut lease) = acquired else {
                return Ok(());
            };
            let given_up = loop {
                let (items, mut known, mut processed) = match first.take() {
                    Some(created) => (vec![created.item], Some(created.task), created.processed),
                    None => (store.inbox(task_id).await?, None, None),
                };
                if items.is_empty() {
                    break false;
                }
                // The run ends with the last message it has: that message's outcome gives the
                // lease up in the same write (the look at the inbox below catches a message
                // queued meanwhile).
                let last = items.len() - 1;
                let mut given_up = false;
                for (n, item) in items.into_iter().enumerate() {
                    let mut end = RunEnd {
                        lease: (n == last).then(|| lease.clone()),
                        wants_history: processed.is_some(),
                        history: None,
                        interruptible: Interruptible::default(),
                    };
                    let watch = Watch {
                        task_id,
                        current: &item.key,
                        interruptible: end.interruptible.clone(),
                        spent: &spent_interrupts,
                    };
                    // Boxed: a message's processing (intake, the agent's turn, its outcome) is
                    // a large future; on the heap it is not copied into the run's task when
                    // the run is spawned, nor into the lease keeper that polls it.
                    let work = Box::pin(self.process(task_id, &item, known.take(), &mut end));
                    let (held, renewed) = self.holding(lease, ttl, Some(watch), work).await?;
                    lease = renewed;
                    match held {
                        Held::Done(outcome) => {
                            given_up = n == last && end.lease.is_none();
                            if let (Some(tell), Some(task)) = (processed.take(), outcome?) {
                                let history = end.history.take();
                                let _ = tell.send(Processed { task, history }); // the sender may have gone
                            }
                        }
                        // The agent's run was dropped with its model call; the lease is still
                        // ours, and the next look at the inbox finds the interrupt.
                        Held::Interrupted(by) => {
                            given_up = false;
                            spent_interrupts.extend(by.iter().map(|i| i.key.message_id.clone()));
                            // Boxed: a rare path whose large future would otherwise be
                            // part of every run's task (copied when each run is spawned).
                            Box::pin(self.record_interruption(task_id, &item, &by)).await?;
                        }
                    }
                }
                if given_up {
                    break true;
                }
            };
            if !given_up {
                self.release(&lease).await?;
            }
            // A message queued after the last look found the lease held: it is ours.
            if store.inbox(task_id).await?.is_empty() {
                return Ok(());
            }
        }
    }

    /// One inbox item, from intake to the committed outcome; `known` is the task as its
    /// creator committed it, if the caller has it (a retry reads it again). Returns the task
    /// as the outcome left it, `None` if another runner recorded the item.
    async fn process(
        &self,
        task_id: &str,
        item: &InboxItem,
        known: Option<StoredTask>,
        end: &mut RunEnd,
    ) -> Result<Option<StoredTask>, StoreError> {
        let span = tracing::debug_span!(
            "a2a.turn",
            task.id = task_id,
            message.id = %item.key.message_id,
            turn.outcome = tracing::field::Empty,
        );
        telemetry::traces::adopt(&span);
        let processed = Box::pin(self.process_item(task_id, item, known, end))
            .instrument(span.clone())
            .await;
        if let Ok(Some(task)) = &processed {
            span.record("turn.outcome", tracing::field::debug(task.record.state()));
        }
        processed
    }

    async fn process_item(
        &self,
        task_id: &str,
        item: &InboxItem,
        mut known: Option<StoredTask>,
        end: &mut RunEnd,
    ) -> Result<Option<StoredTask>, StoreError> {
        for _ in 0..MAX_RETRIES {
            let stored = match known.take() {
                Some(task) => task,
                None => self.read(task_id).await?,
            };
            match self.attempt(&stored, item, end).await {
                Err(StoreError::Conflict(Conflict::TaskChanged(_))) => continue,
                // Another runner recorded it (a lease that expired under a slow turn).
                Err(StoreError::Conflict(Conflict::InboxItemGone(_))) => return Ok(None),
                other => return other.map(Some),
            }
        }
        Err(StoreError::Conflict(Conflict::TaskChanged(
            task_id.to_owned(),
        )))
    }

    /// One try at an item on the task as read: intake, then the agent's turn or the record
    /// of why not (a `TaskChanged` conflict sends the caller round again).
    async fn attempt(
        &self,
        stored: &StoredTask,
        item: &InboxItem,
        end: &mut RunEnd,
    ) -> Result<StoredTask, StoreError> {
        let record = &stored.record;
        let now = Utc::now();
        let note =
            subtasks::Note::of(&item.message).filter(|_| item.sender == self.inner.config.agent_id);
        if let Some(reason) = intake_refusal(record, item, note.is_some()) {
            let update = consuming(stored, item, audit(item, now, false, &reason));
            debug!(task_id = %record.id, message_id = %item.key.message_id, %reason, "queued message refused");
            return self.commit(update).await;
        }
        if let Some(note) = note {
            return Box::pin(self.take_note(stored, item, &note, end)).await;
        }
        if record.agent.awaiting_participant.as_deref() == Some(item.sender.as_str()) {
            return Box::pin(self.assignee_replied(stored, item)).await;
        }

        let answers = record
            .agent
            .pending_help
            .as_ref()
            .is_some_and(|h| h.participant_id == item.sender)
            || waits_on_remote_help(record);
        let lifecycle = record.extension.effective_lifecycle();
        let event = LifecycleEvent::MessageAccepted {
            answers_help_request: answers,
        };
        let accepted = match lifecycle::next(record.state(), record.sub_state, lifecycle, event) {
            Ok(transition) => transition,
            Err(err) => {
                let update = consuming(stored, item, audit(item, now, false, &err.to_string()));
                return self.commit(update).await;
            }
        };
        if !accepted.runs_agent || record.agent.awaiting_participant.is_some() {
            let update = recorded_while_waiting(stored, item, &accepted, now);
            return self.commit(update).await;
        }

        let input = agent_input(item, record.agent.pending_help.as_ref().filter(|_| answers));
        self.run_agent(stored, item, &accepted, answers, input, end)
            .await
    }

    /// Moves the task to WORKING (if it is not) and runs the agent on `input`, then commits
    /// the run's outcome with the lifecycle rule.
    pub(super) async fn run_agent(
        &self,
        stored: &StoredTask,
        item: &InboxItem,
        accepted: &lifecycle::Transition,
        answers: bool,
        input: String,
        end: &mut RunEnd,
    ) -> Result<StoredTask, StoreError> {
        let record = &stored.record;
        let mid = item.key.message_id.as_str();
        // The task works on it; the message stays queued until its outcome is committed.
        let mut working = stored.clone();
        if accepted.changes(record.state(), record.sub_state) || answers || record.agent.untitled {
            let mut next = record.clone();
            next.status = view::status(TaskState::Working, None, Utc::now());
            next.sub_state = None;
            if answers {
                next.agent.pending_help = None;
            }
            if next.agent.untitled && item.sender != self.inner.config.agent_id {
                name_untitled(&mut next, &item.message);
            }
            let mut update = TaskUpdate::new(stored.clone());
            update.allowed_states = accepted.from.to_vec();
            update.events = vec![view::status_update(&next, Some(mid))];
            update.record = Some(next);
            working = self.commit(update).await?;
        }

        telemetry::metrics::turn(if working.record.agent.remote_agent.is_some() {
            "remote"
        } else {
            "local"
        });
        let mut turn = TurnContext::new(self, working, item, input);
        let run = self.inner.agent.run(&mut turn);
        let reply = end.interruptible.during(run).await?;
        let latest = turn.into_task();
        // Boxed, as the rare paths of `attempt`: a future that holds these inline is copied
        // whole each time it moves (into its box, into a spawned task).
        Box::pin(self.record_outcome(latest, item, reply, end)).await
    }
}

/// A relayed sub-task waiting on its remote task's help request takes any accepted
/// sender's message as the answer (the relay sends it on to the remote task).
fn waits_on_remote_help(record: &TaskRecord) -> bool {
    record.agent.remote_agent.is_some()
        && *record.state() == TaskState::InputRequired
        && record.sub_state == Some(task_core::extension::SubState::AwaitingAnswer)
}

/// Intake again: the task may have ended, or the sender left it, since the message was
/// queued. A note comes from this runtime, whatever the participants.
fn intake_refusal(record: &TaskRecord, item: &InboxItem, is_note: bool) -> Option<String> {
    if lifecycle::TERMINAL.contains(record.state()) {
        Some("the task is in a terminal state".to_owned())
    } else if !is_note && policy::authorize(&record.extension, &item.sender, Action::Send).is_err()
    {
        Some("not a participant".to_owned())
    } else {
        None
    }
}

/// A message recorded while the task waits for someone else's answer: in the history, with
/// a notice saying whom the task waits for.
fn recorded_while_waiting(
    stored: &StoredTask,
    item: &InboxItem,
    accepted: &lifecycle::Transition,
    now: DateTime<Utc>,
) -> TaskUpdate {
    let record = &stored.record;
    let waiting_for = record
        .agent
        .pending_help
        .as_ref()
        .map(|h| h.participant_id.as_str())
        .or(record.agent.awaiting_participant.as_deref())
        .unwrap_or("the asked participant");
    let text = format!("message recorded; the task waits for {waiting_for} to answer");
    let mut update = consuming(stored, item, audit(item, now, true, "recorded"));
    update.allowed_states = accepted.from.to_vec();
    update.history = vec![item.message.clone()];
    // A comment on an open help request reaches the agent with the answer. A participant's
    // task (`awaiting_participant`) runs no agent: its messages are only recorded.
    if record.agent.awaiting_participant.is_none()
        && let Some(help) = &record.agent.pending_help
    {
        let comment = message_text(&item.message, &item.sender);
        if !comment.trim().is_empty() {
            let mut next = record.clone();
            let mut help = help.clone();
            help.add_comment(&item.sender, &comment);
            next.agent.pending_help = Some(help);
            update.record = Some(next);
        }
    }
    update.events = vec![a2a::StreamResponse::StatusUpdate(view::notice(
        stored,
        &text,
        now,
        Some(&item.key.message_id),
    ))];
    update
}

/// A task a command created takes its name and goal from the first message that runs the
/// agent, as a task created by that message would (a message without text leaves it
/// untitled).
fn name_untitled(next: &mut TaskRecord, message: &Message) {
    let text = message
        .parts
        .iter()
        .filter_map(Part::as_text)
        .collect::<Vec<_>>()
        .join("\n");
    if text.trim().is_empty() {
        return;
    }
    let (name, goal) = envelope::default_name_and_goal(&text);
    next.extension.name = name;
    next.extension.goal = goal;
    next.agent.untitled = false;
}
