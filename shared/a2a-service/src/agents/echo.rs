use a2a::Message;
use async_trait::async_trait;
use task_store::StoredTask;

use super::{Agent, AgentReply};

/// Answers with the text it got and leaves the outcome to the lifecycle rule, so every path
/// runs with no model at all.
pub struct EchoAgent;

#[async_trait]
impl Agent for EchoAgent {
    async fn respond(&self, _task: &StoredTask, _message: &Message, input: &str) -> AgentReply {
        AgentReply::text(input)
    }
}
