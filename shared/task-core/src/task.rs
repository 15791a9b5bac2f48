//! A task as the agent works on it: the A2A identity, the extension, and the agent's own
//! state kept beside them (loaded skills, A2UI surfaces, the open help request). The store
//! persists all of it with the task; the intrinsic tools map one such value to the next.

use std::collections::{BTreeMap, BTreeSet};

use a2a::{Message, Part, Role as MessageRole};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::a2ui::SurfaceRegistry;
use crate::extension::TaskExtension;
use crate::{CHANNEL_MEDIA_TYPE, schemas};

/// What the agent keeps about a task beyond the A2A task and the extension.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentState {
    /// Skills whose bodies are in the agent's context.
    pub loaded_skills: BTreeSet<String>,
    /// A2UI surfaces this task created, for checking later updates and user actions.
    pub surfaces: SurfaceRegistry,
    /// The help request the task waits on, if any.
    pub pending_help: Option<HelpRequest>,
    /// Help requests made so far (numbers their message ids).
    pub help_requests: u32,
    /// `emit_ui` calls so far (numbers their artifacts).
    pub ui_emits: u32,
    /// Set on a task made by `create_task_for_participant`: the participant whose first
    /// accepted message completes it. Such a task runs no agent.
    pub awaiting_participant: Option<String>,
    /// Set on a sub-task delegated to a registered remote A2A agent: its runner relays the
    /// goal to that agent and the remote task's states back.
    pub remote_agent: Option<String>,
    /// The remote agent's task, once known (a relay taken over subscribes to it).
    pub remote_task: Option<String>,
    /// The task has no name of its own yet (a command created it): the first message that
    /// runs the agent names it, unless a participant names it first.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub untitled: bool,
    /// On a relayed sub-task: the id of the remote task's status message when the relay last
    /// left it waiting (INPUT_REQUIRED / AUTH_REQUIRED). After a follow-up is sent, only a
    /// waiting state with another status message is the remote's new answer.
    pub remote_status_id: Option<String>,
    /// On a parent: its relayed sub-tasks whose remote task is known, proxy id → remote task
    /// id. The parent's `TaskRef` names the remote task; this finds the proxy (this
    /// service's task that relays it) for its notes, its mirror and the cancel cascade.
    pub relays: BTreeMap<String, String>,
    /// On a parent: the relayed sub-task (proxy id) whose help request the parent's agent
    /// was woken with; the agent's next reply that asks no one is sent to it as the answer.
    pub answering: Option<String>,
    /// Tokens the task's model calls spent so far, by model id (turns, compactions).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub usage: BTreeMap<String, TokenUsage>,
}

/// Tokens spent by a task's calls to one model, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TokenUsage {
    /// Model calls made.
    pub calls: u64,
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache (part of `input_tokens`).
    pub cached_input_tokens: u64,
}

impl TokenUsage {
    /// Input and output tokens together: what a budget counts.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    pub fn add(&mut self, other: &TokenUsage) {
        self.calls = self.calls.saturating_add(other.calls);
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(other.cached_input_tokens);
    }
}

impl AgentState {
    /// Tokens spent on every model together.
    pub fn tokens_spent(&self) -> u64 {
        self.usage.values().map(TokenUsage::total).sum()
    }

    /// Adds one call's usage under `model`.
    pub fn spend(&mut self, model: &str, usage: &TokenUsage) {
        self.usage.entry(model.to_owned()).or_default().add(usage);
    }

    /// The id a parent's `TaskRef` gives its sub-task `child_id`: the remote task's id for a
    /// relayed child whose remote task is known, else `child_id`.
    pub fn listed_id<'a>(&'a self, child_id: &'a str) -> &'a str {
        self.relays.get(child_id).map_or(child_id, String::as_str)
    }

    /// The sub-task on this service behind the id a `TaskRef` names: the proxy of a remote
    /// task id it relays, else the id itself.
    pub fn local_id<'a>(&'a self, listed_id: &'a str) -> &'a str {
        self.relays
            .iter()
            .find(|(_, remote)| remote.as_str() == listed_id)
            .map_or(listed_id, |(proxy, _)| proxy.as_str())
    }
}

/// An open `ask_participant` request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelpRequest {
    pub participant_id: String,
    pub question: String,
    #[serde(default)]
    pub options: Vec<String>,
    /// Id of the INPUT_REQUIRED status message that carries the request (`<task>:help:<n>`).
    pub message_id: String,
    /// What other participants said while the request was open, oldest first: they do not
    /// resume the task, and reach the agent with the answer (at most [`MAX_HELP_COMMENTS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comments: Vec<HelpComment>,
    /// Older comments dropped to keep [`MAX_HELP_COMMENTS`]; the agent is told how many.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_comments: u32,
}

/// The most comments an open help request keeps: the oldest are dropped first (counted).
pub const MAX_HELP_COMMENTS: usize = 20;
/// The longest comment kept, in bytes (cut on a character boundary, marked with `…`); the
/// whole message stays in the history.
pub const MAX_HELP_COMMENT_BYTES: usize = 4 * 1024;

/// A message another participant sent while a help request was open, as the agent reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelpComment {
    pub sender: String,
    pub text: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The task the intrinsic tools read and produce.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkingTask {
    pub id: String,
    pub context_id: String,
    pub extension: TaskExtension,
    pub agent: AgentState,
}

impl HelpRequest {
    /// The question as the asked participant reads it: `question`, then `Options: a, b`.
    pub fn text(&self) -> String {
        if self.options.is_empty() {
            self.question.clone()
        } else {
            format!("{}\nOptions: {}", self.question, self.options.join(", "))
        }
    }

    /// The message of the INPUT_REQUIRED status: a text part with the question and a channel
    /// data part (`kind: help_request`, see `schemas/channel.schema.json`).
    pub fn status_message(&self, task_id: &str, context_id: &str, agent_id: &str) -> Message {
        let data = json!({
            "channel_id": task_id,
            "sender": agent_id,
            "kind": "help_request",
            "text": self.question,
            "parts": [],
            "in_reply_to": null,
        });
        debug_assert!(schemas::validators().channel.is_valid(&data));
        let mut message = Message::new(
            MessageRole::Agent,
            vec![
                Part::text(self.text()),
                Part::data(data).with_media_type(CHANNEL_MEDIA_TYPE),
            ],
        );
        message.message_id.clone_from(&self.message_id);
        message.task_id = Some(task_id.to_owned());
        message.context_id = Some(context_id.to_owned());
        message
    }

    /// Keeps `sender`'s comment, cut to [`MAX_HELP_COMMENT_BYTES`], dropping the oldest past
    /// [`MAX_HELP_COMMENTS`].
    pub fn add_comment(&mut self, sender: &str, text: &str) {
        self.comments.push(HelpComment {
            sender: sender.to_owned(),
            text: crate::envelope::cut(text, MAX_HELP_COMMENT_BYTES),
        });
        let excess = self.comments.len().saturating_sub(MAX_HELP_COMMENTS);
        if excess > 0 {
            self.comments.drain(..excess);
            self.dropped_comments = self.dropped_comments.saturating_add(excess as u32);
        }
    }

    /// How the answer reaches the agent: `Reply from <pid> to "<question>": <text>`, then the
    /// comments made meanwhile, if any, in a delimited block, one `<sender>: <text>` each in
    /// arrival order (a comment's further lines indented, so each line's author is clear).
    pub fn frame_answer(&self, text: &str) -> String {
        let mut out = format!(
            "Reply from {} to {:?}: {text}",
            self.participant_id, self.question
        );
        if self.comments.is_empty() && self.dropped_comments == 0 {
            return out;
        }
        out.push_str(
            "\n\n[Comments other participants sent while the question was open, oldest first]",
        );
        if self.dropped_comments > 0 {
            out.push_str(&format!(
                "\n[{} older comments dropped]",
                self.dropped_comments
            ));
        }
        for comment in &self.comments {
            let text = comment.text.replace('\n', "\n  ");
            out.push_str(&format!("\n{}: {text}", comment.sender));
        }
        out.push_str("\n[End of comments]");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(options: &[&str]) -> HelpRequest {
        HelpRequest {
            participant_id: "alice".into(),
            question: "Full or partial refund?".into(),
            options: options.iter().map(|s| (*s).to_owned()).collect(),
            message_id: "t-1:help:1".into(),
            comments: Vec::new(),
            dropped_comments: 0,
        }
    }

    #[test]
    fn the_help_request_message() {
        let msg = request(&["full", "partial"]).status_message("t-1", "ctx-1", "tiny-harness");
        let wire = serde_json::to_value(&msg).expect("serialises");
        assert_eq!(
            wire,
            json!({"messageId": "t-1:help:1", "contextId": "ctx-1", "taskId": "t-1", "role": "ROLE_AGENT",
                   "parts": [{"text": "Full or partial refund?\nOptions: full, partial"},
                             {"data": {"channel_id": "t-1", "sender": "tiny-harness", "kind": "help_request",
                                       "text": "Full or partial refund?", "parts": [], "in_reply_to": null},
                              "mediaType": "application/vnd.tiny-harness.channel+json"}]})
        );
        assert!(
            schemas::validators()
                .channel
                .is_valid(&wire["parts"][1]["data"])
        );
        assert_eq!(request(&[]).text(), "Full or partial refund?");
    }

    #[test]
    fn answers_are_framed() {
        assert_eq!(
            request(&[]).frame_answer("Full."),
            "Reply from alice to \"Full or partial refund?\": Full."
        );
    }

    #[test]
    fn comments_follow_the_answer_in_order_attributed() {
        let mut help = request(&[]);
        help.add_comment("bob", "hurry up");
        help.add_comment("carol", "partial is fine\nif it helps");
        assert_eq!(
            help.frame_answer("Full."),
            "Reply from alice to \"Full or partial refund?\": Full.\n\n\
             [Comments other participants sent while the question was open, oldest first]\n\
             bob: hurry up\n\
             carol: partial is fine\n  if it helps\n\
             [End of comments]"
        );
        // Kept with the request: it round-trips, and an old request without them still parses.
        let value = serde_json::to_value(&help).expect("serialises");
        assert_eq!(
            serde_json::from_value::<HelpRequest>(value).expect("parses"),
            help
        );
        let old = json!({"participant_id": "alice", "question": "Full or partial refund?",
                         "message_id": "t-1:help:1"});
        assert_eq!(
            serde_json::from_value::<HelpRequest>(old).expect("parses"),
            request(&[])
        );
    }

    #[test]
    fn comments_are_bounded_oldest_dropped_first() {
        let mut help = request(&[]);
        for n in 0..MAX_HELP_COMMENTS + 3 {
            help.add_comment("bob", &format!("comment {n}"));
        }
        help.add_comment("carol", &"x".repeat(MAX_HELP_COMMENT_BYTES + 10));
        assert_eq!(help.comments.len(), MAX_HELP_COMMENTS);
        assert_eq!(help.dropped_comments, 4);
        assert_eq!(help.comments[0].text, "comment 4");
        let long = &help.comments[MAX_HELP_COMMENTS - 1];
        assert_eq!(long.sender, "carol");
        assert!(long.text.len() <= MAX_HELP_COMMENT_BYTES && long.text.ends_with('…'));
        let framed = help.frame_answer("Full.");
        assert!(
            framed.contains("oldest first]\n[4 older comments dropped]\nbob: comment 4\n"),
            "{framed}"
        );
        assert!(framed.ends_with("…\n[End of comments]"), "{framed}");
    }

    #[test]
    fn agent_state_round_trips_and_defaults() {
        let mut state = AgentState::default();
        state.loaded_skills.insert("summarize".into());
        state.pending_help = Some(request(&["a"]));
        state.help_requests = 1;
        state.untitled = true;
        state.relays.insert("t-1.1".into(), "remote-9".into());
        state.answering = Some("t-1.1".into());
        let value = serde_json::to_value(&state).expect("serialises");
        assert_eq!(value["untitled"], true);
        assert!(
            serde_json::to_value(AgentState::default())
                .expect("serialises")
                .get("untitled")
                .is_none(),
            "a titled task's document does not carry the flag"
        );
        assert_eq!(
            serde_json::from_value::<AgentState>(value).expect("parses"),
            state
        );
        assert_eq!(
            serde_json::from_value::<AgentState>(json!({})).expect("parses"),
            AgentState::default()
        );
    }

    #[test]
    fn relays_map_proxies_and_remote_ids_both_ways() {
        let mut state = AgentState::default();
        state.relays.insert("t-1.1".into(), "remote-9".into());
        assert_eq!(state.listed_id("t-1.1"), "remote-9");
        assert_eq!(state.listed_id("t-1.2"), "t-1.2");
        assert_eq!(state.local_id("remote-9"), "t-1.1");
        assert_eq!(state.local_id("t-1.2"), "t-1.2");
    }
}
