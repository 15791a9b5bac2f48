//! The agent port (what runs a turn) and the offline agents behind it: `echo` (the local
//! default) and `tck` (the A2A TCK's scenarios, driven by the message id).

mod echo;
mod tck;

use a2a::{Artifact, Message};
use async_trait::async_trait;
use task_store::StoredTask;

pub use echo::EchoAgent;
pub use tck::TckAgent;

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

/// What a turn produced: the agent's message (the status message of the turn's final
/// status), artifacts in the order they were produced, and how the turn ends.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentReply {
    pub text: String,
    pub artifacts: Vec<ArtifactChunk>,
    pub end: TurnEnd,
}

impl AgentReply {
    /// A reply that leaves the outcome to the lifecycle rule.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            artifacts: Vec::new(),
            end: TurnEnd::Lifecycle,
        }
    }

    /// The run failed for `reason`.
    pub fn fail(reason: impl Into<String>) -> Self {
        let reason = reason.into();
        Self {
            text: reason.clone(),
            artifacts: Vec::new(),
            end: TurnEnd::Fail(reason),
        }
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

/// The agent behind the tasks. The agent runtime brings model providers and the tool loop;
/// until then the service runs an offline agent.
#[async_trait]
pub trait Agent: Send + Sync {
    /// One turn on `task`: `message` is the accepted message being processed (with the task's
    /// id and context), `input` what the agent reads of it (see `runner::agent_input`).
    async fn respond(&self, task: &StoredTask, message: &Message, input: &str) -> AgentReply;

    /// A direct answer to a message that would start a new task: the text of an agent
    /// Message sent back instead of a task, and nothing is stored. `None` (the default): the
    /// message starts a task.
    fn direct_reply(&self, _message: &Message) -> Option<String> {
        None
    }
}
