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
//! The turn played is the number of model turns already in the conversation, so a script
//! replays the same way after a restart. A conversation past the script's end fails the call
//! (`Misconfigured`), which fails the task with that reason.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;

use crate::{Model, ModelError, ModelReply, ModelRequest, ToolCall, Turn};

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
        serde_json::from_str(text)
            .map_err(|e| ModelError::Misconfigured(format!("the script is not valid: {e}")))
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
            tokio::time::sleep(std::time::Duration::from_millis(turn.delay_ms)).await;
        }
        let text = if turn.echo_input {
            request.turns.iter().rev().find_map(|t| match t {
                Turn::User { text } => Some(text.clone()),
                _ => None,
            })
        } else {
            turn.text.clone()
        };
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
            usage: None,
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

    #[test]
    fn malformed_scripts_are_refused_with_the_reason() {
        for bad in [
            r#"{"turns": [{"say": "x"}]}"#,
            "[]",
            "{",
            r#"{"turns": [{"tool_calls": [{}]}]}"#,
        ] {
            assert!(
                matches!(Script::from_json(bad), Err(ModelError::Misconfigured(_))),
                "{bad}"
            );
        }
    }
}
