use async_trait::async_trait;
use task_store::StoreError;

use super::port::{Agent, AgentReply};
use super::turn::TurnContext;

/// Answers with the text it got and leaves the outcome to the lifecycle rule, so every path
/// runs with no model at all.
pub struct EchoAgent;

#[async_trait]
impl Agent for EchoAgent {
    async fn run(&self, turn: &mut TurnContext<'_>) -> Result<AgentReply, StoreError> {
        Ok(AgentReply::text(turn.input()))
    }
}
