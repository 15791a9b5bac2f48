//! The `tck` agent profile: the executor behaviour the A2A TCK (a2aproject/a2a-tck, branch
//! 1.0-dev, `scenarios/*.feature`) drives in band through the message id prefix. Written
//! from the scenario table; the longest matching prefix wins (`tck-artifact-file-url` before
//! `tck-artifact-file`, `tck-stream-artifact-*` before `tck-stream-*`).

use std::time::Duration;

use a2a::{Artifact, Message, Part};
use async_trait::async_trait;
use serde_json::json;
use task_store::StoreError;

use super::port::{Agent, AgentReply, ArtifactChunk, TurnEnd};
use super::turn::TurnContext;

/// What a scenario does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    CompleteTask,
    InputRequired,
    ArtifactText,
    ArtifactFile,
    ArtifactFileUrl,
    ArtifactData,
    MessageResponse,
    RejectTask,
    /// WORKING, one text artifact, COMPLETED.
    StreamText(&'static str),
    /// COMPLETED, nothing else.
    StreamComplete,
    StreamArtifactFile,
    StreamArtifactChunked,
    /// WORKING, a pause of twice the TCK's streaming timeout, COMPLETED.
    LongRunning,
}

/// The scenarios by message id prefix.
const SCENARIOS: &[(&str, Scenario)] = &[
    ("tck-complete-task", Scenario::CompleteTask),
    ("tck-input-required", Scenario::InputRequired),
    ("tck-artifact-text", Scenario::ArtifactText),
    ("tck-artifact-file", Scenario::ArtifactFile),
    ("tck-artifact-file-url", Scenario::ArtifactFileUrl),
    ("tck-artifact-data", Scenario::ArtifactData),
    ("tck-message-response", Scenario::MessageResponse),
    ("tck-reject-task", Scenario::RejectTask),
    (
        "tck-stream-001",
        Scenario::StreamText("Stream hello from TCK"),
    ),
    ("tck-stream-002", Scenario::StreamComplete),
    (
        "tck-stream-003",
        Scenario::StreamText("Stream task lifecycle"),
    ),
    (
        "tck-stream-ordering-001",
        Scenario::StreamText("Ordered output"),
    ),
    (
        "tck-stream-artifact-text",
        Scenario::StreamText("Streamed text content"),
    ),
    ("tck-stream-artifact-file", Scenario::StreamArtifactFile),
    (
        "tck-stream-artifact-chunked",
        Scenario::StreamArtifactChunked,
    ),
    ("test-resubscribe-message-id", Scenario::LongRunning),
];

/// The scenario of the longest prefix of `message_id`, if any.
fn scenario(message_id: &str) -> Option<Scenario> {
    SCENARIOS
        .iter()
        .filter(|(prefix, _)| message_id.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, s)| *s)
}

/// The TCK's SUT agent. Anything without a scenario completes with an echo.
pub struct TckAgent {
    /// The pause of the long-running scenario (the TCK waits twice its 2 s streaming
    /// timeout).
    long_running: Duration,
}

impl Default for TckAgent {
    fn default() -> Self {
        Self::new()
    }
}

impl TckAgent {
    pub fn new() -> Self {
        Self::with_pause(Duration::from_secs(4))
    }

    /// With a shorter pause for the long-running scenario (tests).
    pub fn with_pause(long_running: Duration) -> Self {
        Self { long_running }
    }
}

fn artifact(name: &str, parts: Vec<Part>) -> Artifact {
    Artifact {
        artifact_id: a2a::new_artifact_id(),
        name: Some(name.to_owned()),
        description: None,
        parts,
        metadata: None,
        extensions: None,
    }
}

fn file_part() -> Part {
    let mut part = Part::raw(b"tck".to_vec()).with_media_type("text/plain");
    part.filename = Some("output.txt".to_owned());
    part
}

fn completed(text: &str) -> AgentReply {
    AgentReply::text(text).ending(TurnEnd::Complete)
}

fn with_text_artifact(text: &str) -> AgentReply {
    completed("Artifact generated").with_artifact(ArtifactChunk::whole(artifact(
        "text",
        vec![Part::text(text)],
    )))
}

const DIRECT_RESPONSE: &str = "Direct message response";

#[async_trait]
impl Agent for TckAgent {
    async fn run(&self, turn: &mut TurnContext<'_>) -> Result<AgentReply, StoreError> {
        Ok(self.respond(turn.message(), turn.input()).await)
    }

    fn direct_reply(&self, message: &Message) -> Option<String> {
        (scenario(&message.message_id) == Some(Scenario::MessageResponse))
            .then(|| DIRECT_RESPONSE.to_owned())
    }
}

impl TckAgent {
    async fn respond(&self, message: &Message, input: &str) -> AgentReply {
        let Some(scenario) = scenario(&message.message_id) else {
            return completed(input);
        };
        match scenario {
            Scenario::CompleteTask => completed("Hello from TCK"),
            Scenario::InputRequired => AgentReply::text("Input required: send the next message"),
            Scenario::ArtifactText => with_text_artifact("Generated text content"),
            Scenario::ArtifactFile | Scenario::StreamArtifactFile => completed("File generated")
                .with_artifact(ArtifactChunk::whole(artifact("file", vec![file_part()]))),
            Scenario::ArtifactFileUrl => {
                let mut part =
                    Part::url("https://example.com/output.txt").with_media_type("text/plain");
                part.filename = Some("output.txt".to_owned());
                completed("File URL generated")
                    .with_artifact(ArtifactChunk::whole(artifact("file-url", vec![part])))
            }
            Scenario::ArtifactData => {
                completed("Data generated").with_artifact(ArtifactChunk::whole(artifact(
                    "data",
                    vec![Part::data(json!({"key": "value", "count": 42}))],
                )))
            }
            // On a task that already exists, the direct answer becomes the turn's reply.
            Scenario::MessageResponse => completed(DIRECT_RESPONSE),
            Scenario::RejectTask => AgentReply::text("rejected").ending(TurnEnd::Reject),
            Scenario::StreamText(text) => with_text_artifact(text),
            Scenario::StreamComplete => completed("Stream completed"),
            Scenario::StreamArtifactChunked => {
                let first = artifact("chunked", vec![Part::text("chunk-1 ")]);
                let mut last = first.clone();
                last.parts = vec![Part::text("chunk-2")];
                completed("Chunked artifact generated")
                    .with_artifact(ArtifactChunk::whole(first))
                    .with_artifact(ArtifactChunk {
                        artifact: last,
                        append: true,
                        last_chunk: true,
                    })
            }
            Scenario::LongRunning => {
                tokio::time::sleep(self.long_running).await;
                completed("Long-running task completed")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prefix_wins() {
        let cases = [
            ("tck-complete-task-1a2b3c4d", Some(Scenario::CompleteTask)),
            ("tck-artifact-file-1a2b3c4d", Some(Scenario::ArtifactFile)),
            (
                "tck-artifact-file-url-1a2b3c4d",
                Some(Scenario::ArtifactFileUrl),
            ),
            (
                "tck-stream-artifact-file-1a2b3c4d",
                Some(Scenario::StreamArtifactFile),
            ),
            (
                "tck-stream-artifact-chunked-1a2b3c4d",
                Some(Scenario::StreamArtifactChunked),
            ),
            (
                "tck-stream-001-1a2b3c4d",
                Some(Scenario::StreamText("Stream hello from TCK")),
            ),
            ("test-resubscribe-message-id", Some(Scenario::LongRunning)),
            ("tck-push-1a2b3c4d", None),
            ("m-1", None),
        ];
        for (id, expected) in cases {
            assert_eq!(scenario(id), expected, "{id}");
        }
    }

    #[test]
    fn only_the_message_response_scenario_answers_directly() {
        let mut message = Message::new(a2a::Role::User, vec![Part::text("hi")]);
        message.message_id = "tck-message-response-1a2b3c4d".to_owned();
        assert_eq!(
            TckAgent::new().direct_reply(&message).as_deref(),
            Some(DIRECT_RESPONSE)
        );
        message.message_id = "tck-complete-task-1a2b3c4d".to_owned();
        assert_eq!(TckAgent::new().direct_reply(&message), None);
    }
}
