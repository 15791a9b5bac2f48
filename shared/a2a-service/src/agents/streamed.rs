//! The model's text on its way to the streams while it is generated: pieces coalesced into
//! `TaskArtifactUpdateEvent` chunks of a `streamed-text` artifact that is never stored (the
//! final text is the run's status message, as without streaming).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use a2a::{Artifact, Part, StreamResponse, TaskArtifactUpdateEvent};
use models::TextSink;

use super::turn::TurnContext;

/// The name of every streamed-text artifact (clients show it as the reply being written).
pub const STREAMED_TEXT_ARTIFACT: &str = "streamed-text";

/// Pieces arriving closer together than this go out as one chunk.
const COALESCE: Duration = Duration::from_millis(75);

/// One model call's text, as chunks of the artifact `stream:<message id>:<call>`.
pub(super) struct StreamedText<'s, 't> {
    turn: &'s TurnContext<'t>,
    artifact_id: String,
    state: Mutex<Pending>,
}

struct Pending {
    text: String,
    /// A chunk of this attempt went out: the next one appends to it.
    sent: bool,
    last_sent: Option<Instant>,
}

impl<'s, 't> StreamedText<'s, 't> {
    /// The streamed text of model call `call` of the run on the turn's message.
    pub(super) fn new(turn: &'s TurnContext<'t>, call: usize) -> Self {
        Self {
            artifact_id: format!("stream:{}:{call}", turn.message().message_id),
            turn,
            state: Mutex::new(Pending {
                text: String::new(),
                sent: false,
                last_sent: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        // Only appends and takes happen under the lock: a poisoned one is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends what is left as the artifact's last chunk (nothing if nothing was streamed).
    pub(super) fn finish(&self) {
        let mut pending = self.lock();
        if pending.sent || !pending.text.is_empty() {
            self.send(&mut pending, true);
        }
    }

    fn send(&self, pending: &mut Pending, last: bool) {
        let task = &self.turn.task().record;
        let artifact = Artifact {
            artifact_id: self.artifact_id.clone(),
            name: Some(STREAMED_TEXT_ARTIFACT.to_owned()),
            description: None,
            parts: vec![Part::text(std::mem::take(&mut pending.text))],
            metadata: None,
            extensions: None,
        };
        self.turn
            .stream(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                artifact,
                append: Some(pending.sent),
                last_chunk: Some(last),
                metadata: None,
            }));
        pending.sent = true;
        pending.last_sent = Some(Instant::now());
    }
}

impl TextSink for StreamedText<'_, '_> {
    fn text(&self, delta: &str) {
        let mut pending = self.lock();
        pending.text.push_str(delta);
        // The first piece goes out at once; later ones at most every COALESCE.
        if pending.last_sent.is_none_or(|at| at.elapsed() >= COALESCE) {
            self.send(&mut pending, false);
        }
    }

    fn restart(&self) {
        // The next chunk replaces what this attempt streamed (append: false).
        let mut pending = self.lock();
        pending.text.clear();
        pending.sent = false;
    }
}
