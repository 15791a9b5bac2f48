//! Sub-tasks delegated to a registered remote A2A agent (`spawn_subtask` with `agent`).
//!
//! Such a child (the "proxy") is a task on this service like any other (its id
//! `<parent>.<n>`, its participants, its notes to the parent); what runs it is this relay
//! instead of the model. Run on its goal, the relay finds the remote agent's JSON-RPC
//! interface on its agent card, sends the goal as a message (as this service's agent,
//! `metadata.participant_id`; with a task envelope making the remote task `delegated`, the
//! proxy its parent, when the card declares the Task extension), follows the remote task's
//! stream, and ends the proxy's run
//! where the remote task settled (COMPLETED, FAILED, CANCELED, REJECTED, or INPUT_REQUIRED /
//! AUTH_REQUIRED, which the parent is told of and which keep the proxy unresolved; a remote
//! waiting on a help request, a status message with a channel `help_request` part, makes the
//! proxy wait awaiting-answer), with the remote's last message as the proxy's status. The
//! remote task's id is written on the proxy as soon as it is known, so a run that dies and is
//! taken over subscribes to that task instead of sending the goal again.
//!
//! Run on any later message (an answer, a follow-up), the relay sends it to the remote task
//! (same message id, so a run taken over that sends it again is a duplicate the remote
//! ignores) and follows the task until it settles again: a waiting state settles only with
//! another status message than the one the proxy waited on.
//!
//! A remote that does not answer (connect errors, 5xx, timeouts) is tried again with backoff;
//! after `lost_after` without an answer the proxy fails with `the remote agent <id> was lost:
//! no answer for <n> s`. Any other failure fails the proxy at once with a short class of it
//! (`… refused the request`, `… answered something that could not be read`): the remote's
//! URL, status line and answer go to the log only.

use std::time::Duration;

use a2a::{Message, Part, PartContent, Role, StreamResponse, TaskState};
use serde_json::{Value, json};
use task_core::{CHANNEL_MEDIA_TYPE, TASK_MEDIA_TYPE};
use task_store::{StoreError, StoredTask, TaskRecord};
use tokio::time::Instant;

use super::a2a_client::{self, Class, RelayError, err};
use super::port::{AgentReply, RemoteEnd, TurnEnd};
use super::turn::{TurnContext, TurnWrite};
use crate::identity::PARTICIPANT_KEY;

/// How long the relay follows a remote task before giving up (re-subscribing in between
/// when the remote closes its stream early).
const RELAY_LIMIT: Duration = Duration::from_secs(3600);

/// The first wait before trying a remote that did not answer again; doubled each time.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// How long a canceled proxy's `CancelTask` to its remote may take in all.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(10);

/// The remote agent a proxy relays to.
pub struct Remote<'a> {
    pub http: &'a reqwest::Client,
    /// Its id in the registry.
    pub id: &'a str,
    /// Its base URL, `None` when it is not registered (any more).
    pub base: Option<&'a str>,
    /// How long it may go without answering before it counts as lost.
    pub lost_after: Duration,
}

/// Whether a status message asks for help: a channel data part of kind `help_request`.
fn asks_for_help(message: &Message) -> bool {
    message.parts.iter().any(|part| {
        part.media_type.as_deref() == Some(CHANNEL_MEDIA_TYPE)
            && matches!(&part.content, PartContent::Data(data)
                if data.get("kind").and_then(Value::as_str) == Some("help_request"))
    })
}

/// Whether an event showing the remote task in `state` with the status message `status_id`
/// is where it settled. `answered` is, after a follow-up was sent, the status message the
/// proxy waited on: the same waiting state again (a snapshot of the task as it was, a
/// duplicate answered with the task) is not the remote's answer; nor is a snapshot whose
/// status has no message to tell it apart.
fn settles(
    state: &TaskState,
    status_id: Option<&str>,
    snapshot: bool,
    answered: Option<&Option<String>>,
) -> bool {
    if state.is_terminal() {
        return true;
    }
    if !matches!(state, TaskState::InputRequired | TaskState::AuthRequired) {
        return false;
    }
    match answered {
        None => true,
        Some(waited_on) => status_id != waited_on.as_deref() || (!snapshot && status_id.is_none()),
    }
}

/// What the remote task has reached so far.
#[derive(Default)]
struct Seen {
    task_id: Option<String>,
    /// After a follow-up: the status message id the proxy waited on.
    answered: Option<Option<String>>,
    events: usize,
    state: Option<TaskState>,
    status_id: Option<String>,
    help_request: bool,
    text: String,
    settled: bool,
}

impl Seen {
    fn take(&mut self, event: &StreamResponse) {
        self.events += 1;
        let (task_id, status, snapshot) = match event {
            StreamResponse::Task(task) => (Some(task.id.clone()), Some(&task.status), true),
            StreamResponse::StatusUpdate(update) => {
                (Some(update.task_id.clone()), Some(&update.status), false)
            }
            _ => (None, None, false),
        };
        if let Some(id) = task_id {
            self.task_id.get_or_insert(id);
        }
        let Some(status) = status else {
            return;
        };
        self.state = Some(status.state.clone());
        let message = status.message.as_ref();
        self.status_id = message.map(|m| m.message_id.clone());
        self.help_request = message.is_some_and(asks_for_help);
        if let Some(text) = message.and_then(|m| m.parts.iter().find_map(Part::as_text)) {
            self.text = text.to_owned();
        }
        self.settled = settles(
            &status.state,
            self.status_id.as_deref(),
            snapshot,
            self.answered.as_ref(),
        );
    }
}

/// Runs a proxy on the message of `turn`: returns the reply that ends its run where the
/// remote task settled.
pub async fn relay(
    remote: Remote<'_>,
    turn: &mut TurnContext<'_>,
) -> Result<AgentReply, StoreError> {
    let task_id = turn.task().record.id.clone();
    let id = remote.id;
    if remote.base.is_none() {
        tracing::warn!(%task_id, remote = id, "the sub-task names a remote agent that is not registered");
        return Ok(AgentReply::fail(format!(
            "the remote agent {id} is not registered"
        )));
    }
    match follow(&remote, turn).await {
        Ok(reply) => Ok(reply),
        Err(Failure::Store(e)) => Err(e),
        Err(Failure::Lost(e)) => {
            tracing::warn!(%task_id, remote = id, error = %e, "the remote agent was lost; the run fails");
            Ok(AgentReply::fail(format!(
                "the remote agent {id} was lost: no answer for {} s",
                remote.lost_after.as_secs()
            )))
        }
        Err(Failure::Relay(e)) => {
            tracing::warn!(%task_id, remote = id, class = ?e.class, error = %e, "the relay to a remote agent failed; the run fails");
            Ok(AgentReply::fail(format!(
                "the remote agent {id} {}",
                e.class.public()
            )))
        }
    }
}

enum Failure {
    Store(StoreError),
    Relay(RelayError),
    /// No answer for the whole of `lost_after`; the last failure.
    Lost(RelayError),
}

impl From<RelayError> for Failure {
    fn from(e: RelayError) -> Self {
        Failure::Relay(e)
    }
}

/// Tells transient failures (tried again until the remote counts as lost) from the rest.
struct Retries {
    lost_after: Duration,
    failing_since: Option<Instant>,
    backoff: Duration,
}

impl Retries {
    fn new(lost_after: Duration) -> Self {
        Self {
            lost_after,
            failing_since: None,
            backoff: FIRST_BACKOFF,
        }
    }

    /// The remote answered.
    fn answered(&mut self) {
        self.failing_since = None;
        self.backoff = FIRST_BACKOFF;
    }

    /// A call failed: the wait before the next try, or the failure that ends the relay.
    fn failed(&mut self, e: RelayError) -> Result<Duration, Failure> {
        if !e.class.is_transient() {
            return Err(Failure::Relay(e));
        }
        let now = Instant::now();
        let since = *self.failing_since.get_or_insert(now);
        let left = self.lost_after.saturating_sub(now - since);
        if left.is_zero() {
            return Err(Failure::Lost(e));
        }
        tracing::debug!(error = %e, "the remote agent did not answer; trying again");
        let wait = self.backoff.min(left);
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        Ok(wait)
    }
}

/// The task envelope of a goal sent to a remote that declares the Task extension: the
/// proxy's name, goal and criteria, and the proxy as the remote task's parent on this agent (which makes the remote task `delegated`: it completes
/// when its agent is done instead of waiting for a next message).
fn task_envelope(record: &TaskRecord, agent_id: &str) -> Part {
    let ext = &record.extension;
    let data = json!({
        "name": ext.name,
        "goal": ext.goal,
        "acceptance_criteria": ext.acceptance_criteria.iter().map(|c| json!({"text": c.text})).collect::<Vec<_>>(),
        "parent_tasks": [{"task_id": record.id, "agent": {"kind": "agent", "id": agent_id}}],
    });
    Part::data(data).with_media_type(TASK_MEDIA_TYPE)
}

/// The message the relay sends: the goal (with a task envelope when the remote declares the
/// Task extension), or a later message for the remote task `to`.
fn outgoing(turn: &TurnContext<'_>, agent_id: &str, to: Option<&str>, envelope: bool) -> Value {
    let mut parts = vec![Part::text(turn.input())];
    if to.is_none() && envelope {
        parts.push(task_envelope(&turn.task().record, agent_id));
    }
    let mut message = Message::new(Role::User, parts);
    message.message_id = turn.message().message_id.clone();
    message.task_id = to.map(str::to_owned);
    message.metadata = Some(std::collections::HashMap::from([(
        PARTICIPANT_KEY.to_owned(),
        Value::from(agent_id),
    )]));
    json!({"message": serde_json::to_value(&message).unwrap_or(Value::Null)})
}

async fn follow(remote: &Remote<'_>, turn: &mut TurnContext<'_>) -> Result<AgentReply, Failure> {
    let base = remote.base.unwrap_or_default();
    let agent_id = turn.agent_id().to_owned();
    let record = &turn.task().record;
    let is_goal = turn.message().message_id == format!("{}:goal", record.id);
    let mut seen = Seen {
        task_id: record.agent.remote_task.clone(),
        answered: (!is_goal).then(|| record.agent.remote_status_id.clone()),
        ..Seen::default()
    };
    if !is_goal && seen.task_id.is_none() {
        return Err(err(
            Class::Refused,
            "a follow-up before the remote task is known",
        )
        .into());
    }
    // The goal is sent unless a run before this one did; a later message always is (the
    // remote drops a duplicate).
    let mut send = !is_goal || seen.task_id.is_none();
    let mut retries = Retries::new(remote.lost_after);
    let mut card: Option<a2a_client::RemoteCard> = None;
    let deadline = Instant::now() + RELAY_LIMIT;
    let mut wait = Duration::ZERO;
    while !seen.settled {
        if Instant::now() > deadline {
            return Err(err(Class::TimedOut, "the remote task did not finish in time").into());
        }
        tokio::time::sleep(wait).await;
        wait = Duration::from_millis(500); // a stream closed early is followed again
        let known = seen.task_id.clone();
        let card = match &card {
            Some(card) => card.clone(),
            None => match a2a_client::read_card(remote.http, base).await {
                Ok(read) => card.insert(read).clone(),
                Err(e) => {
                    wait = retries.failed(e)?;
                    continue;
                }
            },
        };
        let (method, params) = match &known {
            Some(task_id) if !send => ("SubscribeToTask", json!({"id": task_id})),
            to => {
                let message = outgoing(turn, &agent_id, to.as_deref(), card.task_extension);
                ("SendStreamingMessage", message)
            }
        };
        let events_before = seen.events;
        let called =
            a2a_client::stream_call(remote.http, &card, &agent_id, method, params, |event| {
                seen.take(&event);
                if seen.settled {
                    std::ops::ControlFlow::Break(())
                } else {
                    std::ops::ControlFlow::Continue(())
                }
            })
            .await;
        if seen.events > events_before {
            // The message got through: from now on the task is followed.
            send = false;
        }
        match called {
            Ok(()) => retries.answered(),
            Err(e) => wait = retries.failed(e)?,
        }
        // The remote task's id, written once, so a run taken over subscribes to it.
        if known.is_none()
            && let Some(task_id) = seen.task_id.clone()
        {
            let written = turn
                .commit_turn(|task| {
                    let mut record = task.record.clone();
                    record.agent.remote_task = Some(task_id.clone());
                    TurnWrite {
                        record: Some(record),
                        ..TurnWrite::default()
                    }
                })
                .await
                .map_err(Failure::Store)?;
            if !written {
                return Ok(AgentReply::text(String::new()));
            }
        }
    }
    let end = RemoteEnd {
        state: seen.state.unwrap_or(TaskState::Failed),
        help_request: seen.help_request,
        status_message_id: seen.status_id,
    };
    Ok(AgentReply::text(seen.text).ending(TurnEnd::Remote(end)))
}

/// A canceled proxy's remote task is canceled too (`CancelTask` as this service's agent),
/// best effort within a bounded time: a failure is logged, the cancel here stands.
pub async fn cancel_remote_task(remote: Remote<'_>, proxy: &StoredTask, agent_id: &str) {
    let Some(remote_task) = proxy.record.agent.remote_task.as_deref() else {
        return;
    };
    let Some(base) = remote.base else {
        return;
    };
    let call = async {
        let card = a2a_client::read_card(remote.http, base).await?;
        a2a_client::call(
            remote.http,
            &card.url,
            agent_id,
            "CancelTask",
            json!({"id": remote_task}),
        )
        .await
    };
    let task_id = &proxy.record.id;
    match tokio::time::timeout(CANCEL_TIMEOUT, call).await {
        Ok(Ok(_)) => {
            tracing::debug!(%task_id, remote = remote.id, remote_task, "the remote task was canceled with its proxy");
        }
        Ok(Err(e)) => {
            tracing::warn!(%task_id, remote = remote.id, remote_task, class = ?e.class, error = %e, "the remote task was not canceled with its proxy");
        }
        Err(_) => {
            tracing::warn!(%task_id, remote = remote.id, remote_task, "the remote task's cancel timed out");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_message(parts: Vec<Part>) -> Message {
        Message::new(Role::Agent, parts)
    }

    #[test]
    fn a_help_request_is_a_channel_part_of_kind_help_request() {
        let channel = |kind: &str| {
            Part::data(json!({"kind": kind, "text": "Which year?"}))
                .with_media_type(CHANNEL_MEDIA_TYPE)
        };
        let asks = status_message(vec![Part::text("Which year?"), channel("help_request")]);
        assert!(asks_for_help(&asks));
        assert!(!asks_for_help(&status_message(vec![Part::text(
            "Which year?"
        )])));
        assert!(!asks_for_help(&status_message(vec![channel("message")])));
        let untyped = Part::data(json!({"kind": "help_request"}));
        assert!(!asks_for_help(&status_message(vec![untyped])));
    }

    #[test]
    fn the_first_settle_is_any_waiting_or_final_state() {
        use TaskState::*;
        for (state, settles_here) in [
            (Working, false),
            (Submitted, false),
            (InputRequired, true),
            (AuthRequired, true),
            (Completed, true),
            (Failed, true),
            (Canceled, true),
        ] {
            assert_eq!(
                settles(&state, Some("m"), true, None),
                settles_here,
                "{state:?}"
            );
        }
    }

    #[test]
    fn after_a_follow_up_the_old_wait_does_not_settle() {
        use TaskState::*;
        let waited_on = Some("r:help:1".to_owned());
        let answered = Some(&waited_on);
        // The task as it was (the stream's first snapshot, a duplicate answered with it).
        assert!(!settles(&InputRequired, Some("r:help:1"), true, answered));
        assert!(!settles(&InputRequired, Some("r:help:1"), false, answered));
        assert!(!settles(&Working, Some("x"), false, answered));
        // A new question, or an end.
        assert!(settles(&InputRequired, Some("r:help:2"), false, answered));
        assert!(settles(&InputRequired, Some("r:help:2"), true, answered));
        assert!(settles(&Completed, Some("r:help:1"), true, answered));
        // Waits without status messages: only a status update tells the new one apart.
        let none = None;
        assert!(!settles(&InputRequired, None, true, Some(&none)));
        assert!(settles(&InputRequired, None, false, Some(&none)));
    }

    #[test]
    fn transient_failures_are_retried_until_the_remote_is_lost() {
        let mut retries = Retries::new(Duration::from_secs(300));
        let first = retries.failed(err(Class::Unavailable, "down")).ok();
        assert_eq!(first, Some(FIRST_BACKOFF));
        let second = retries.failed(err(Class::TimedOut, "slow")).ok();
        assert_eq!(second, Some(FIRST_BACKOFF * 2));
        retries.answered();
        assert_eq!(
            retries.failed(err(Class::Unavailable, "down")).ok(),
            Some(FIRST_BACKOFF)
        );
        assert!(matches!(
            retries.failed(err(Class::Refused, "no")),
            Err(Failure::Relay(_))
        ));
        let mut at_once = Retries::new(Duration::ZERO);
        assert!(matches!(
            at_once.failed(err(Class::Unavailable, "down")),
            Err(Failure::Lost(_))
        ));
    }
}
