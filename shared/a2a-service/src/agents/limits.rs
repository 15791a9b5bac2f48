//! What bounds the model agent's calls: the context window (compaction before a call that
//! would pass three quarters of it; a message too long for it refused), the task's token
//! budget, and how a failed call ends the run (a conversation waits out an outage).

use std::collections::BTreeMap;

use models::{ModelError, Turn, Usage};
use task_core::extension::Lifecycle;
use task_core::task::TokenUsage;
use task_store::{StoreError, StoredTask};

use super::compaction;
use super::model::{ModelAgent, system_prompt};
use super::port::{AgentReply, TurnEnd};
use super::transcript::{Compaction, Entry, Transcript, estimate, estimate_turn};
use super::turn::TurnContext;

/// The window of a model that has none (`models::context_window` of the offline models).
const UNBOUNDED: u64 = u64::MAX;

/// The last call's size as the provider counted it: its input and output tokens, and how
/// many turns it was sent.
pub(super) struct LastCall {
    pub tokens: u64,
    pub turns: usize,
}

/// Whether the next call may go.
pub(super) enum Compacted {
    /// It fits (compacted or not): the call to send.
    Ready(models::ModelRequest),
    /// The task left WORKING while a compaction was committed: the run ends.
    TaskLeft,
    /// The compaction call failed.
    Failed(ModelError),
}

/// One call's usage as the task's totals count it, under the model's id (nothing when the
/// provider reported none).
pub(super) fn spent(
    task: &StoredTask,
    model: &str,
    usage: Option<Usage>,
) -> BTreeMap<String, TokenUsage> {
    let Some(usage) = usage else {
        return BTreeMap::new();
    };
    tracing::info!(
        task_id = %task.record.id,
        model,
        input_tokens = usage.input_tokens,
        output_tokens = usage.output_tokens,
        cached_input_tokens = usage.cached_input_tokens,
        "model call"
    );
    telemetry::metrics::model_tokens(
        model,
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_input_tokens,
    );
    BTreeMap::from([(
        model.to_owned(),
        TokenUsage {
            calls: 1,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cached_input_tokens: usage.cached_input_tokens,
        },
    )])
}

/// The run stops for `reason` without failing a conversation: it waits for the next
/// message; a delegated task fails.
pub(super) fn stop(task: &StoredTask, reason: String) -> AgentReply {
    match task.record.extension.effective_lifecycle() {
        Lifecycle::Conversation => AgentReply::text(reason).ending(TurnEnd::Wait),
        Lifecycle::Delegated => AgentReply::fail(reason),
    }
}

impl ModelAgent {
    /// The refusal of a message too long for the model's window with the task's context
    /// (`None`: it fits).
    pub(super) fn too_long(
        &self,
        task: &StoredTask,
        transcript: &Transcript,
        user: &Turn,
    ) -> Option<String> {
        let model = self.config.catalog.model_for(&task.record.extension);
        let window = models::context_window(model);
        if window == UNBOUNDED {
            return None;
        }
        let system = system_prompt(&self.config, task, transcript.summary().0);
        let needs = estimate(&system) + self.tools_tokens + estimate_turn(user);
        (needs > compaction::threshold(window)).then(|| {
            format!(
                "message not accepted: it is too long for the model's context window (about \
                 {needs} tokens with the task's context; the model {} takes {window}): send it \
                 in shorter parts",
                model.id
            )
        })
    }

    /// Why the task may not spend more (`None`: it may).
    pub(super) fn budget_spent(&self, task: &StoredTask) -> Option<String> {
        let budget = self.config.token_budget?;
        let spent = task.record.agent.tokens_spent();
        (spent >= budget).then(|| {
            format!(
                "the task's token budget is spent ({spent} of {budget} tokens): the agent \
                 stops until the budget is raised"
            )
        })
    }

    /// Compacts the oldest turns while the next call would pass three quarters of the
    /// window (or the provider refused it as too long: `force`), each compaction committed
    /// like a turn (with the turns not yet committed before it).
    pub(super) async fn compact(
        &self,
        turn: &mut TurnContext<'_>,
        transcript: &mut Transcript,
        last_call: &mut Option<LastCall>,
        mut force: bool,
    ) -> Result<Compacted, StoreError> {
        loop {
            // The request the projection is made on is the call sent when it fits: rendered
            // once. A model without a window (the offline ones) is never compacted.
            let request = self.request(turn.task(), transcript);
            let window = models::context_window(&request.model);
            if window == UNBOUNDED {
                return Ok(Compacted::Ready(request));
            }
            let threshold = compaction::threshold(window);
            if !force && self.projected(&request, last_call.as_ref()) <= threshold {
                return Ok(Compacted::Ready(request));
            }
            force = false;
            let seen = transcript.seen();
            let (previous, _) = transcript.summary();
            // The summarizer reads the head, the earlier summary and its instructions, and
            // answers within the window.
            let limit = (window / 2).saturating_sub(compaction::overhead(previous));
            let Some(cut) = compaction::cut(&seen, limit) else {
                // Nothing more may go: the call is sent as it is.
                return Ok(Compacted::Ready(request));
            };
            let call = compaction::request(&request, previous, &seen[..cut.turns]);
            let started = telemetry::metrics::Timer::start();
            let answer = self.config.models.complete(&call).await;
            telemetry::metrics::model_call(&request.model.id, answer.is_ok(), started);
            let reply = match answer {
                Ok(reply) => reply,
                Err(err) => return Ok(Compacted::Failed(err)),
            };
            let model_id = request.model.id.clone();
            let usage = spent(turn.task(), &model_id, reply.usage);
            let entry = Entry {
                compaction: Some(Compaction {
                    summary: reply.text.unwrap_or_default().trim().to_owned(),
                    covers: cut.covers,
                }),
                turn: None,
                model: Some(model_id),
                usage: reply.usage,
                ..Entry::turn(
                    &turn.message().message_id,
                    Turn::User {
                        text: String::new(),
                    },
                )
            };
            tracing::info!(
                task_id = %turn.task().record.id,
                turns = cut.turns,
                "the conversation was compacted"
            );
            let written = transcript.to_write(&[entry]);
            let values: Vec<_> = written.iter().map(Entry::value).collect();
            let committed = turn
                .commit_turn(|task| {
                    let mut record = task.record.clone();
                    for (model, spent) in &usage {
                        record.agent.spend(model, spent);
                    }
                    super::turn::TurnWrite {
                        record: (!usage.is_empty()).then_some(record),
                        transcript: values.clone(),
                        ..Default::default()
                    }
                })
                .await?;
            if !committed {
                return Ok(Compacted::TaskLeft);
            }
            transcript.committed(written);
            *last_call = None;
        }
    }

    /// The size of `request` in tokens: the last call's as the provider counted it plus an
    /// estimate of the turns added since, or an estimate of all of it.
    fn projected(&self, request: &models::ModelRequest, last: Option<&LastCall>) -> u64 {
        match last {
            Some(last) if request.turns.len() > last.turns => {
                let added = &request.turns[last.turns + 1..];
                last.tokens + added.iter().map(estimate_turn).sum::<u64>()
            }
            _ => {
                estimate(&request.system)
                    + self.tools_tokens
                    + request.turns.iter().map(estimate_turn).sum::<u64>()
            }
        }
    }

    /// How a failed call ends the run: a conversation waits out a transient outage (the
    /// message kept) or a context it cannot fit; anything else fails the task.
    pub(super) fn failed(
        &self,
        turn: &TurnContext<'_>,
        err: ModelError,
        transcript: &Transcript,
    ) -> AgentReply {
        let task = turn.task();
        let task_id = &task.record.id;
        // The details (endpoint, status, answer) are for the log only: the participants
        // read the class of the failure.
        let conversation = task.record.extension.effective_lifecycle() == Lifecycle::Conversation;
        if conversation && err.is_transient() {
            tracing::warn!(task_id, class = err.class(), error = %err, "the model failed; the conversation waits");
            let text = format!(
                "{}; your message is kept: send another message to try again",
                err.public_message()
            );
            return AgentReply::text(text)
                .ending(TurnEnd::Wait)
                .with_transcript(transcript.pending_values());
        }
        if conversation && matches!(err, ModelError::ContextOverflow(_)) {
            tracing::warn!(task_id, error = %err, "the model refused the context; the conversation waits");
            return AgentReply::text(format!("message not accepted: {}", err.public_message()))
                .ending(TurnEnd::Wait);
        }
        tracing::warn!(task_id, class = err.class(), error = %err, "the model failed; the run fails");
        AgentReply::fail(err.public_message()).with_transcript(transcript.pending_values())
    }
}
