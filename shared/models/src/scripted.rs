//! `scripted`: replays a JSON script of turns, for tests and demos. Each turn is either tool
//! calls or a final text:
//!
//! ```json
//! {"turns": [
//!   {"tool_calls": [{"name": "create_plan", "arguments": {"steps": [{"name": "Look", "description": "…"}]}}]},
//!   {"text": "Planned."}
//! ]}
//! ```
//!
//! or, for tasks that need different scripts (a parent and the sub-tasks it spawns), by task
//! name with `"*"` for the rest:
//!
//! ```json
//! {"tasks": {"Refund 48213": {"turns": [...]}, "*": {"turns": [{"text": "done"}]}}}
//! ```
//!
//! A turn may also say `"delay_ms": 500` to answer only after that long, like a slow model
//! (`"delay_unless_input_contains": "stop"`: not when the last user turn contains `stop`),
//! and `"echo_input": true` to answer with the last user input it was sent (what the agent
//! read of the latest message), so a test sees that input in the task's status message.
//!
//! **Streaming.** `"pieces": ["Hel", "lo"]` is the turn's text in pieces (instead of `text`);
//! `"pieces": 3` cuts the text (or the echoed input) into 3 pieces of about equal length.
//! `"piece_delay_ms": 100` waits that long before each piece. A streamed call passes each
//! piece to the sink after its wait; a plain call waits as long and answers the whole text.
//! Without `pieces` the text streams as one piece.
//!
//! **Usage.** `"usage": {"input_tokens": 1200, "output_tokens": 80}` (and optionally
//! `cached_input_tokens`) is reported as the call's usage; without it the call reports none.
//!
//! The turn played is the number of model turns already in the conversation, so a script
//! replays the same way after a restart. A conversation past the script's end fails the call
//! (`Misconfigured`), which fails the task with that reason.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;

use crate::{Model, ModelError, ModelReply, ModelRequest, NoSink, TextSink, ToolCall, Turn, Usage};

/// One turn of a script.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedTurn {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ScriptedCall>,
    /// Wait this long before answering, like a slow model (demos, crash tests).
    #[serde(default)]
    pub delay_ms: u64,
    /// No delay when the conversation's last user turn contains this text (a slow turn an
    /// interrupt cut, played again fast for the interrupt).
    #[serde(default)]
    pub delay_unless_input_contains: Option<String>,
    /// Answer with the text of the conversation's last user turn (instead of `text`).
    #[serde(default)]
    pub echo_input: bool,
    /// Stream the text in these pieces, or cut into this many.
    #[serde(default)]
    pub pieces: Option<Pieces>,
    /// Wait this long before each piece.
    #[serde(default)]
    pub piece_delay_ms: u64,
    /// The usage the call reports.
    #[serde(default)]
    pub usage: Option<Usage>,
}

/// How a scripted turn's text streams.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Pieces {
    /// The text itself, in these pieces.
    Given(Vec<String>),
    /// The text (or the echoed input) cut into this many pieces.
    Count(usize),
}

impl ScriptedTurn {
    /// What a turn cannot say: `pieces` as text beside `text` or `echo_input`, zero pieces.
    fn check(&self) -> Result<(), String> {
        match &self.pieces {
            Some(Pieces::Given(_)) if self.text.is_some() || self.echo_input => {
                Err("a turn gives its text either as \"pieces\" or by \"text\"/\"echo_input\", not both".into())
            }
            Some(Pieces::Count(0)) => Err("\"pieces\" must be at least 1".into()),
            _ => Ok(()),
        }
    }

    /// The turn's text (`echoed`: the input an `echo_input` turn answers with) in the pieces
    /// it streams in.
    fn text_pieces(&self, echoed: Option<String>) -> Vec<String> {
        let text = if self.echo_input {
            echoed
        } else {
            self.text.clone()
        };
        match (&self.pieces, text) {
            (Some(Pieces::Given(pieces)), _) => pieces.clone(),
            (Some(Pieces::Count(n)), Some(text)) => split(&text, *n),
            (None, Some(text)) => vec![text],
            (_, None) => Vec::new(),
        }
    }
}

/// `text` in at most `n` pieces of about equal length (whole characters).
fn split(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    let size = chars.len().div_ceil(n.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// The turns of one script.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turns {
    pub turns: Vec<ScriptedTurn>,
}

/// A parsed script: one for every task, or one per task name (`"*"` for the rest).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Script {
    One(Turns),
    ByTask { tasks: BTreeMap<String, Turns> },
}

impl Script {
    pub fn from_json(text: &str) -> Result<Self, ModelError> {
        let script: Script = serde_json::from_str(text)
            .map_err(|e| ModelError::Misconfigured(format!("the script is not valid: {e}")))?;
        let all: Vec<&ScriptedTurn> = match &script {
            Script::One(one) => one.turns.iter().collect(),
            Script::ByTask { tasks } => tasks.values().flat_map(|t| &t.turns).collect(),
        };
        for turn in all {
            turn.check()
                .map_err(|e| ModelError::Misconfigured(format!("the script is not valid: {e}")))?;
        }
        Ok(script)
    }

    pub fn from_file(path: &Path) -> Result<Self, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ModelError::Misconfigured(format!("cannot read the script {}: {e}", path.display()))
        })?;
        Self::from_json(&text)
    }

    fn turns_for(&self, task_name: &str) -> Option<&[ScriptedTurn]> {
        match self {
            Script::One(one) => Some(&one.turns),
            Script::ByTask { tasks } => tasks
                .get(task_name)
                .or_else(|| tasks.get("*"))
                .map(|t| t.turns.as_slice()),
        }
    }
}

/// The scripted model: over one script, or over the script file each catalog entry names in
/// its settings (`"settings": {"script": "path/to/script.json"}`), read once.
#[derive(Debug, Default)]
pub struct ScriptedModel {
    fixed: Option<Arc<Script>>,
    files: Mutex<HashMap<PathBuf, Arc<Script>>>,
}

impl ScriptedModel {
    /// Every model plays `script`.
    pub fn new(script: Script) -> Self {
        Self {
            fixed: Some(Arc::new(script)),
            files: Mutex::default(),
        }
    }

    /// Each model plays the file its `script` setting names.
    pub fn from_settings() -> Self {
        Self::default()
    }

    fn script_for(&self, request: &ModelRequest) -> Result<Arc<Script>, ModelError> {
        if let Some(script) = &self.fixed {
            return Ok(script.clone());
        }
        let path = request
            .model
            .settings
            .get("script")
            .and_then(|v| v.as_str())
            .ok_or_else(|| {
                ModelError::Misconfigured(format!(
                    "the scripted model {:?} has no \"script\" setting",
                    request.model.id
                ))
            })?;
        let path = PathBuf::from(path);
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(script) = files.get(&path) {
            return Ok(script.clone());
        }
        let script = Arc::new(Script::from_file(&path)?);
        files.insert(path, script.clone());
        Ok(script)
    }
}

#[async_trait]
impl Model for ScriptedModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ModelError> {
        self.play(request, &NoSink).await
    }

    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        sink: &dyn TextSink,
    ) -> Result<ModelReply, ModelError> {
        self.play(request, sink).await
    }
}

impl ScriptedModel {
    /// Plays the request's turn, its text to `sink` piece by piece.
    async fn play(
        &self,
        request: &ModelRequest,
        sink: &dyn TextSink,
    ) -> Result<ModelReply, ModelError> {
        let script = self.script_for(request)?;
        let played = request
            .turns
            .iter()
            .filter(|t| matches!(t, Turn::Assistant { .. }))
            .count();
        let turns = script.turns_for(&request.task_name).ok_or_else(|| {
            ModelError::Misconfigured(format!(
                "the script has no turns for task {:?} (and no \"*\")",
                request.task_name
            ))
        })?;
        let turn = turns.get(played).ok_or_else(|| {
            ModelError::Misconfigured(format!(
                "the script of task {:?} has {} turns; turn {} was asked for",
                request.task_name,
                turns.len(),
                played + 1
            ))
        })?;
        if turn.delay_ms > 0 && !skips_delay(turn, &request.turns) {
            tokio::time::sleep(Duration::from_millis(turn.delay_ms)).await;
        }
        let pieces = turn.text_pieces(request.last_user_text().map(str::to_owned));
        for piece in &pieces {
            if turn.piece_delay_ms > 0 {
                tokio::time::sleep(Duration::from_millis(turn.piece_delay_ms)).await;
            }
            // A turn without `pieces` answers whole, like a model that does not stream.
            if turn.pieces.is_some() && !piece.is_empty() {
                sink.text(piece);
            }
        }
        let text = (!pieces.is_empty()).then(|| pieces.concat());
        Ok(ModelReply {
            text,
            tool_calls: turn
                .tool_calls
                .iter()
                .enumerate()
                .map(|(i, call)| ToolCall {
                    id: format!("call-{}-{}", played + 1, i + 1),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                })
                .collect(),
            usage: turn.usage,
        })
    }
}

/// Whether `turn` answers at once: its `delay_unless_input_contains` is in the last user turn.
fn skips_delay(turn: &ScriptedTurn, turns: &[Turn]) -> bool {
    let last_input = turns.iter().rev().find_map(|t| match t {
        Turn::User { text } => Some(text.as_str()),
        _ => None,
    });
    turn.delay_unless_input_contains
        .as_deref()
        .zip(last_input)
        .is_some_and(|(wanted, input)| input.contains(wanted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use task_core::commands::ModelCatalog;

    fn request(task_name: &str, turns: Vec<Turn>) -> ModelRequest {
        ModelRequest {
            task_name: task_name.to_owned(),
            model: ModelCatalog::echo_only().default_model().clone(),
            effort: None,
            system: String::new(),
            turns,
            tools: Default::default(),
        }
    }

    fn assistant() -> Turn {
        Turn::Assistant {
            text: None,
            tool_calls: vec![],
        }
    }

    #[test]
    fn a_delay_is_skipped_when_the_last_input_says_so() {
        let script = Script::from_json(
            &json!({"turns": [{"text": "t", "delay_ms": 60000, "delay_unless_input_contains": "stop"}]})
                .to_string(),
        )
        .unwrap();
        let Script::One(one) = script else {
            panic!("one script")
        };
        let turn = &one.turns[0];
        let user = |text: &str| Turn::User { text: text.into() };
        assert!(!skips_delay(turn, &[user("go")]));
        assert!(skips_delay(turn, &[user("go"), user("stop now")]));
        assert!(!skips_delay(turn, &[user("stop now"), user("go on")]));
    }

    #[tokio::test]
    async fn turns_are_played_by_how_many_the_conversation_has() {
        let model = ScriptedModel::new(
            Script::from_json(
                &json!({"turns": [
                    {"tool_calls": [{"name": "create_plan", "arguments": {"steps": []}}, {"name": "list_skills"}]},
                    {"text": "done"}
                ]})
                .to_string(),
            )
            .unwrap(),
        );
        let first = model
            .complete(&request("t", vec![Turn::User { text: "go".into() }]))
            .await
            .unwrap();
        assert_eq!(first.text, None);
        assert_eq!(first.tool_calls.len(), 2);
        assert_eq!(first.tool_calls[0].id, "call-1-1");
        assert_eq!(first.tool_calls[1].arguments, json!({}));
        let second = model
            .complete(&request("t", vec![assistant()]))
            .await
            .unwrap();
        assert_eq!(second, ModelReply::text("done"));
        let past = model
            .complete(&request("t", vec![assistant(), assistant()]))
            .await
            .unwrap_err();
        assert_eq!(
            past,
            ModelError::Misconfigured(
                "the script of task \"t\" has 2 turns; turn 3 was asked for".into()
            )
        );
    }

    #[tokio::test]
    async fn an_echo_turn_answers_with_the_last_user_input() {
        let model = ScriptedModel::new(
            Script::from_json(
                &json!({"turns": [{"text": "first"}, {"echo_input": true}]}).to_string(),
            )
            .unwrap(),
        );
        let turns = vec![
            Turn::User { text: "go".into() },
            Turn::Assistant {
                text: Some("first".into()),
                tool_calls: vec![],
            },
            Turn::User {
                text: "Reply from alice: yes".into(),
            },
        ];
        assert_eq!(
            model.complete(&request("t", turns)).await.unwrap(),
            ModelReply::text("Reply from alice: yes")
        );
    }

    #[tokio::test]
    async fn scripts_by_task_name_fall_back_to_star() {
        let script = Script::from_json(
            &json!({"tasks": {"parent": {"turns": [{"text": "p"}]}, "*": {"turns": [{"text": "child"}]}}})
                .to_string(),
        )
        .unwrap();
        let model = ScriptedModel::new(script);
        assert_eq!(
            model.complete(&request("parent", vec![])).await.unwrap(),
            ModelReply::text("p")
        );
        assert_eq!(
            model.complete(&request("other", vec![])).await.unwrap(),
            ModelReply::text("child")
        );
        let only = ScriptedModel::new(
            Script::from_json(&json!({"tasks": {"parent": {"turns": []}}}).to_string()).unwrap(),
        );
        assert!(matches!(
            only.complete(&request("other", vec![])).await,
            Err(ModelError::Misconfigured(_))
        ));
    }

    #[tokio::test]
    async fn the_script_file_comes_from_the_models_settings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("script.json");
        std::fs::write(
            &path,
            json!({"turns": [{"text": "from the file"}]}).to_string(),
        )
        .unwrap();
        let model = ScriptedModel::from_settings();
        let mut req = request("t", vec![]);
        req.model
            .settings
            .insert("script".into(), json!(path.to_str().unwrap()));
        assert_eq!(
            model.complete(&req).await.unwrap(),
            ModelReply::text("from the file")
        );
        // Read once: the file may go away.
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            model.complete(&req).await.unwrap(),
            ModelReply::text("from the file")
        );
        let mut missing = request("t", vec![]);
        missing
            .model
            .settings
            .insert("script".into(), json!("/nonexistent/script.json"));
        assert!(matches!(
            model.complete(&missing).await,
            Err(ModelError::Misconfigured(_))
        ));
        assert!(matches!(
            model.complete(&request("t", vec![])).await,
            Err(ModelError::Misconfigured(m)) if m.contains("no \"script\" setting")
        ));
    }

    /// Records the pieces and when each arrived.
    #[derive(Default)]
    struct Timed(Mutex<Vec<(String, tokio::time::Instant)>>);

    impl TextSink for Timed {
        fn text(&self, delta: &str) {
            self.0
                .lock()
                .unwrap()
                .push((delta.to_owned(), tokio::time::Instant::now()));
        }
    }

    impl Timed {
        fn pieces(&self) -> Vec<String> {
            self.0
                .lock()
                .unwrap()
                .iter()
                .map(|(p, _)| p.clone())
                .collect()
        }
    }

    fn model(script: serde_json::Value) -> ScriptedModel {
        ScriptedModel::new(Script::from_json(&script.to_string()).unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn a_turn_streams_its_pieces_after_their_delays() {
        let model = model(json!({"turns": [
            {"pieces": ["Hel", "lo"], "piece_delay_ms": 100}
        ]}));
        let sink = Timed::default();
        let started = tokio::time::Instant::now();
        let reply = model
            .complete_streaming(&request("t", vec![]), &sink)
            .await
            .unwrap();
        assert_eq!(reply, ModelReply::text("Hello"));
        let got = sink.0.lock().unwrap().clone();
        assert_eq!(sink.pieces(), ["Hel", "lo"]);
        // Paused time: each piece comes exactly after its delay.
        assert_eq!(got[0].1 - started, Duration::from_millis(100));
        assert_eq!(got[1].1 - started, Duration::from_millis(200));

        // A plain call waits as long and answers the whole text.
        let started = tokio::time::Instant::now();
        assert_eq!(
            model.complete(&request("t", vec![])).await.unwrap(),
            ModelReply::text("Hello")
        );
        assert_eq!(started.elapsed(), Duration::from_millis(200));
    }

    #[tokio::test]
    async fn a_text_or_an_echo_is_cut_into_n_pieces() {
        let model = model(json!({"turns": [
            {"text": "abcdefg", "pieces": 3},
            {"echo_input": true, "pieces": 2},
            {"text": "whole"}
        ]}));
        let sink = Timed::default();
        let reply = model
            .complete_streaming(&request("t", vec![]), &sink)
            .await
            .unwrap();
        assert_eq!(reply.text.as_deref(), Some("abcdefg"));
        assert_eq!(sink.pieces(), ["abc", "def", "g"]);

        let sink = Timed::default();
        let turns = vec![
            assistant(),
            Turn::User {
                text: "ping".into(),
            },
        ];
        let reply = model
            .complete_streaming(&request("t", turns), &sink)
            .await
            .unwrap();
        assert_eq!(reply.text.as_deref(), Some("ping"));
        assert_eq!(sink.pieces(), ["pi", "ng"]);

        let sink = Timed::default();
        model
            .complete_streaming(&request("t", vec![assistant(), assistant()]), &sink)
            .await
            .unwrap();
        assert!(
            sink.pieces().is_empty(),
            "a turn without pieces does not stream"
        );
    }

    #[tokio::test]
    async fn a_turn_reports_the_usage_it_gives() {
        let model = model(json!({"turns": [
            {"text": "a", "usage": {"input_tokens": 1200, "output_tokens": 80}},
            {"text": "b", "usage": {"input_tokens": 10, "output_tokens": 2, "cached_input_tokens": 4}},
            {"text": "c"}
        ]}));
        let usage = |turns| async { model.complete(&request("t", turns)).await.unwrap().usage };
        assert_eq!(
            usage(vec![]).await,
            Some(Usage {
                input_tokens: 1200,
                output_tokens: 80,
                cached_input_tokens: 0
            })
        );
        assert_eq!(
            usage(vec![assistant()]).await.unwrap().cached_input_tokens,
            4
        );
        assert_eq!(usage(vec![assistant(), assistant()]).await, None);
    }

    #[test]
    fn malformed_scripts_are_refused_with_the_reason() {
        for bad in [
            r#"{"turns": [{"say": "x"}]}"#,
            "[]",
            "{",
            r#"{"turns": [{"tool_calls": [{}]}]}"#,
            r#"{"turns": [{"text": "a", "pieces": ["a"]}]}"#,
            r#"{"tasks": {"*": {"turns": [{"echo_input": true, "pieces": ["a"]}]}}}"#,
            r#"{"turns": [{"text": "a", "pieces": 0}]}"#,
            r#"{"turns": [{"text": "a", "usage": {"input_tokens": 1}}]}"#,
        ] {
            assert!(
                matches!(Script::from_json(bad), Err(ModelError::Misconfigured(_))),
                "{bad}"
            );
        }
    }
}
