//! The agent port: the [`Agent`] trait the runner calls on each accepted message, and the
//! [`AgentReply`] a run hands back (its text, artifacts and how the turn ends).

use a2a::{Artifact, Message};
use async_trait::async_trait;
use serde_json::Value;
use std::collections::BTreeMap;

use task_core::task::{HelpRequest, TokenUsage};
use task_store::{InboxItem, StoreError, StoredTask};

use super::turn::TurnContext;

/// How an agent's turn ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEnd {
    /// The lifecycle rule of SPEC section 5 decides (a conversation waits for the next
    /// message unless its criteria are met; a delegated task completes).
    Lifecycle,
    /// The agent declares the task done (a parent still waits for unresolved sub-tasks).
    Complete,
    /// The agent refuses the task: REJECTED.
    Reject,
    /// The run failed: FAILED, the reason as the status message.
    Fail(String),
    /// The run reached its turn limit: FAILED with "turn limit reached".
    TurnLimit,
    /// The run asked a participant (`ask_participant`): INPUT_REQUIRED with the request as
    /// the status message, until the asked participant answers.
    AwaitAnswer(HelpRequest),
    /// A relayed sub-task: where the remote agent's task settled.
    Remote(RemoteEnd),
    /// The agent cannot go on now and waits for the next message (INPUT_REQUIRED, awaiting
    /// the next message), the reply saying why: the model provider was unavailable, the
    /// token budget is spent, the message did not fit the model's context window.
    Wait,
}

/// Where a remote agent's task settled, as a relay saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteEnd {
    pub state: a2a::TaskState,
    /// The remote waits on a help request (its status message carries a channel
    /// `help_request`): the relayed task waits awaiting-answer, not awaiting-next-message.
    pub help_request: bool,
    /// The id of the remote's status message (kept on the relayed task while it waits).
    pub status_message_id: Option<String>,
}

impl RemoteEnd {
    pub fn new(state: a2a::TaskState) -> Self {
        Self {
            state,
            help_request: false,
            status_message_id: None,
        }
    }
}

/// One artifact (or one chunk of it) produced by a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct ArtifactChunk {
    pub artifact: Artifact,
    /// Append these parts to the artifact already stored under the same id (a new artifact
    /// when there is none).
    pub append: bool,
    /// The artifact's final chunk.
    pub last_chunk: bool,
}

impl ArtifactChunk {
    /// A whole artifact in one piece.
    pub fn whole(artifact: Artifact) -> Self {
        Self {
            artifact,
            append: false,
            last_chunk: false,
        }
    }
}

/// What a run produced: the agent's message (the status message of the run's final
/// status), artifacts in the order they were produced, how the run ends, and the transcript
/// entries to write with the outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentReply {
    pub text: String,
    pub artifacts: Vec<ArtifactChunk>,
    pub end: TurnEnd,
    /// Transcript entries written with the run's outcome (the model's last turn).
    pub transcript: Vec<Value>,
    /// Tokens spent by calls not yet committed (the last turn's), by model id: added to the
    /// task's totals with the outcome.
    pub usage: BTreeMap<String, TokenUsage>,
}

impl AgentReply {
    /// A reply that leaves the outcome to the lifecycle rule.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            artifacts: Vec::new(),
            end: TurnEnd::Lifecycle,
            transcript: Vec::new(),
            usage: BTreeMap::new(),
        }
    }

    /// The run failed for `reason`.
    pub fn fail(reason: impl Into<String>) -> Self {
        let reason = reason.into();
        Self {
            text: reason.clone(),
            artifacts: Vec::new(),
            end: TurnEnd::Fail(reason),
            transcript: Vec::new(),
            usage: BTreeMap::new(),
        }
    }

    pub fn with_transcript(mut self, entries: Vec<Value>) -> Self {
        self.transcript = entries;
        self
    }

    /// With the tokens its uncommitted calls spent, by model id.
    pub fn with_usage(mut self, usage: BTreeMap<String, TokenUsage>) -> Self {
        self.usage = usage;
        self
    }

    pub fn ending(mut self, end: TurnEnd) -> Self {
        self.end = end;
        self
    }

    pub fn with_artifact(mut self, chunk: ArtifactChunk) -> Self {
        self.artifacts.push(chunk);
        self
    }
}

/// The agent behind the tasks.
#[async_trait]
pub trait Agent: Send + Sync {
    /// Runs on one accepted message: `turn` gives the task (WORKING), the message, what the
    /// agent reads of it, and a way to commit intermediate turns (each a conditional write);
    /// the reply is committed by the runner as the run's outcome.
    async fn run(&self, turn: &mut TurnContext<'_>) -> Result<AgentReply, StoreError>;

    /// A direct answer to a message that would start a new task: the text of an agent
    /// Message sent back instead of a task, and nothing is stored. `None` (the default): the
    /// message starts a task.
    fn direct_reply(&self, _message: &Message) -> Option<String> {
        None
    }

    /// Told after `task` was canceled (its cancel committed), so what the agent runs
    /// elsewhere for it can be canceled too (a relayed sub-task's remote task); `agent_id` is
    /// this service's agent. Best effort: failures are the agent's to log. Default: nothing.
    async fn task_canceled(&self, _task: &StoredTask, _agent_id: &str) {}

    /// The transcript entries to write when an interrupt cut the run on `item` (`input`: what
    /// the agent read of it), committed with the message's record so that what it said still
    /// reaches the agent's next run. Default: nothing.
    fn interrupted(&self, _item: &InboxItem, _input: &str) -> Vec<Value> {
        Vec::new()
    }
}
