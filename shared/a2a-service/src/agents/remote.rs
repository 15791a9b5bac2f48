//! Sub-tasks delegated to a registered remote A2A agent (`spawn_subtask` with `agent`).
//!
//! Such a child is a task on this service like any other (its id `<parent>.<n>`, its
//! participants, its notes to the parent); what runs it is this relay instead of the model.
//! The relay finds the remote agent's JSON-RPC interface on its agent card, sends the child's
//! goal as a message (as this service's agent, `metadata.participant_id`), follows the
//! remote task's stream, and ends the child's run in the state the remote task reached
//! (COMPLETED, FAILED, CANCELED, REJECTED, or INPUT_REQUIRED / AUTH_REQUIRED, which the parent
//! is told of and which keep the child unresolved), with the remote's last message as the
//! child's status. The remote task's id is written on the child as soon as it is known, so a
//! run that dies and is taken over subscribes to that task instead of sending the goal again.
//!
//! A relay that fails fails the child with a short class of the failure (`the remote agent
//! <id> is unavailable`, `… refused the request`, `… timed out`, `… answered something that
//! could not be read`): the remote's URL, status line and answer go to the log only.

use std::time::Duration;

use a2a::{Message, Part, Role, StreamResponse, TaskState};
use futures::StreamExt;
use serde_json::{Value, json};
use task_store::StoreError;

use super::port::{AgentReply, TurnEnd};
use super::turn::{TurnContext, TurnWrite};
use crate::identity::PARTICIPANT_KEY;

/// How long the relay follows a remote task before giving up (re-subscribing in between
/// when the remote closes its stream early).
const RELAY_LIMIT: Duration = Duration::from_secs(3600);

/// What went wrong with a relay, as far as the task's participants are told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Unavailable,
    Refused,
    TimedOut,
    Unreadable,
}

impl Class {
    fn public(self) -> &'static str {
        match self {
            Class::Unavailable => "is unavailable",
            Class::Refused => "refused the request",
            Class::TimedOut => "timed out",
            Class::Unreadable => "answered something that could not be read",
        }
    }

    /// The class of a call that got no (whole) answer.
    fn of_transport(error: &reqwest::Error) -> Self {
        if error.is_timeout() {
            Class::TimedOut
        } else if error.is_decode() {
            Class::Unreadable
        } else {
            Class::Unavailable
        }
    }

    /// The class of an answer that is not a success.
    fn of_status(status: reqwest::StatusCode) -> Self {
        match status.as_u16() {
            408 | 504 => Class::TimedOut,
            500.. => Class::Unavailable,
            _ => Class::Refused,
        }
    }
}

/// A relay failure: its class, and the details for the log (URLs, statuses, bodies).
#[derive(Debug, thiserror::Error)]
#[error("{detail}")]
struct RelayError {
    class: Class,
    detail: String,
}

fn err(class: Class, detail: impl Into<String>) -> RelayError {
    RelayError {
        class,
        detail: detail.into(),
    }
}

fn transport(what: String, error: &reqwest::Error) -> RelayError {
    err(Class::of_transport(error), format!("{what}: {error}"))
}

/// The remote agent's JSON-RPC URL, from its agent card at `base/.well-known/agent-card.json`.
async fn jsonrpc_url(http: &reqwest::Client, base: &str) -> Result<String, RelayError> {
    let url = format!("{}/.well-known/agent-card.json", base.trim_end_matches('/'));
    let response = http
        .get(&url)
        .send()
        .await
        .map_err(|e| transport(format!("cannot read the agent card at {url}"), &e))?;
    let status = response.status();
    if !status.is_success() {
        return Err(err(
            Class::of_status(status),
            format!("the agent card at {url} answered {status}"),
        ));
    }
    let card: Value = response
        .json()
        .await
        .map_err(|e| transport(format!("the agent card at {url} is not JSON"), &e))?;
    card["supportedInterfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["protocolBinding"] == "JSONRPC")
        .and_then(|i| i["url"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| {
            err(
                Class::Unreadable,
                format!("the agent card at {url} offers no JSON-RPC interface"),
            )
        })
}

/// One JSON-RPC streaming call: each `result` StreamResponse in order.
async fn stream_call(
    http: &reqwest::Client,
    url: &str,
    agent_id: &str,
    method: &str,
    params: Value,
    mut on_event: impl FnMut(StreamResponse) -> std::ops::ControlFlow<()>,
) -> Result<(), RelayError> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let response = http
        .post(url)
        .header("A2A-Version", "1.0")
        .header("Accept", "text/event-stream")
        .header("X-Participant-Id", agent_id)
        .json(&body)
        .send()
        .await
        .map_err(|e| transport(format!("{method} to {url}"), &e))?;
    let status = response.status();
    let is_sse = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"));
    if !status.is_success() || !is_sse {
        let class = if status.is_success() {
            Class::Unreadable
        } else {
            Class::of_status(status)
        };
        let text = response.text().await.unwrap_or_default();
        let text: String = text.chars().take(500).collect();
        return Err(err(
            class,
            format!("{method} to {url} answered {status}: {text}"),
        ));
    }
    let mut body = response.bytes_stream();
    let mut pending = String::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| transport(format!("{method} stream from {url}"), &e))?;
        pending.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = pending.find("\n\n") {
            let frame: String = pending.drain(..end + 2).collect();
            for line in frame.lines() {
                let Some(data) = line.strip_prefix("data:") else {
                    continue;
                };
                let value: Value = serde_json::from_str(data.trim()).map_err(|e| {
                    err(
                        Class::Unreadable,
                        format!("{method} from {url} sent bad JSON: {e}"),
                    )
                })?;
                if let Some(error) = value.get("error") {
                    return Err(err(
                        Class::Refused,
                        format!("{method} to {url} failed: {error}"),
                    ));
                }
                let event: StreamResponse = serde_json::from_value(value["result"].clone())
                    .map_err(|e| err(Class::Unreadable, format!("{method} from {url}: {e}")))?;
                if on_event(event).is_break() {
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

/// What the remote task has reached so far.
#[derive(Default)]
struct Seen {
    task_id: Option<String>,
    state: Option<TaskState>,
    text: String,
}

impl Seen {
    fn take(&mut self, event: &StreamResponse) {
        let (task_id, status) = match event {
            StreamResponse::Task(task) => (Some(task.id.clone()), Some(&task.status)),
            StreamResponse::StatusUpdate(update) => {
                (Some(update.task_id.clone()), Some(&update.status))
            }
            _ => (None, None),
        };
        if let Some(id) = task_id {
            self.task_id.get_or_insert(id);
        }
        if let Some(status) = status {
            self.state = Some(status.state.clone());
            if let Some(text) = status
                .message
                .as_ref()
                .and_then(|m| m.parts.iter().find_map(Part::as_text))
            {
                self.text = text.to_owned();
            }
        }
    }

    fn settled(&self) -> bool {
        self.state.as_ref().is_some_and(|s| {
            s.is_terminal() || matches!(s, TaskState::InputRequired | TaskState::AuthRequired)
        })
    }
}

/// Runs a child delegated to `remote` (its id in the registry): returns the reply that ends
/// the child's run in the remote task's state.
pub async fn relay(
    http: &reqwest::Client,
    base_url: Option<&str>,
    remote: &str,
    turn: &mut TurnContext<'_>,
) -> Result<AgentReply, StoreError> {
    let task_id = turn.task().record.id.clone();
    let Some(base) = base_url else {
        tracing::warn!(%task_id, remote, "the sub-task names a remote agent that is not registered");
        return Ok(AgentReply::fail(format!(
            "the remote agent {remote} is not registered"
        )));
    };
    match follow(http, base, turn).await {
        Ok(reply) => Ok(reply),
        Err(Failure::Store(e)) => Err(e),
        Err(Failure::Relay(e)) => {
            tracing::warn!(%task_id, remote, class = ?e.class, error = %e, "the relay to a remote agent failed; the run fails");
            Ok(AgentReply::fail(format!(
                "the remote agent {remote} {}",
                e.class.public()
            )))
        }
    }
}

enum Failure {
    Store(StoreError),
    Relay(RelayError),
}

impl From<RelayError> for Failure {
    fn from(e: RelayError) -> Self {
        Failure::Relay(e)
    }
}

async fn follow(
    http: &reqwest::Client,
    base: &str,
    turn: &mut TurnContext<'_>,
) -> Result<AgentReply, Failure> {
    let url = jsonrpc_url(http, base).await?;
    let agent_id = turn.agent_id().to_owned();
    let mut seen = Seen {
        task_id: turn.task().record.agent.remote_task.clone(),
        ..Seen::default()
    };
    let deadline = tokio::time::Instant::now() + RELAY_LIMIT;
    let mut first = true;
    while !seen.settled() {
        if tokio::time::Instant::now() > deadline {
            return Err(err(Class::TimedOut, "the remote task did not finish in time").into());
        }
        let known = seen.task_id.clone();
        let (method, params) = match &known {
            Some(task_id) => ("SubscribeToTask", json!({"id": task_id})),
            None => {
                let mut message = Message::new(Role::User, vec![Part::text(turn.input())]);
                message.message_id = turn.message().message_id.clone();
                message.metadata = Some(std::collections::HashMap::from([(
                    PARTICIPANT_KEY.to_owned(),
                    Value::from(agent_id.as_str()),
                )]));
                (
                    "SendStreamingMessage",
                    json!({"message": serde_json::to_value(&message).unwrap_or(Value::Null)}),
                )
            }
        };
        if !first {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        first = false;
        stream_call(http, &url, &agent_id, method, params, |event| {
            seen.take(&event);
            if seen.settled() {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        })
        .await?;
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
    let state = seen.state.unwrap_or(TaskState::Failed);
    Ok(AgentReply::text(seen.text).ending(TurnEnd::Remote(state)))
}
