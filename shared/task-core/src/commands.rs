//! The `/model` and `/effort` commands (SPEC section 6) and the model catalog they check.
//!
//! A message whose first text part starts with `/model` or `/effort` (as a whole word) is a
//! command, not a prompt. Commands change the server-controlled `model` and
//! `reasoning_effort` fields; they never run the agent, and each is answered with a status
//! update whose text is [`CommandOutcome::reply`] (or, when refused, the refusal's text).

use std::collections::HashSet;
use std::fmt;

use a2a::Part;
use serde::{Deserialize, Serialize};

use crate::error::DomainError;
use crate::extension::{Effort, TaskExtension};

/// Which provider serves a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// Amazon Bedrock, Converse API.
    Bedrock,
    /// Any OpenAI-compatible chat-completions endpoint.
    Openai,
    /// Offline: answers with the text it got.
    Echo,
    /// Offline: replays a JSON script of turns.
    Scripted,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Bedrock => "bedrock",
            ProviderKind::Openai => "openai",
            ProviderKind::Echo => "echo",
            ProviderKind::Scripted => "scripted",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One model a task may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// The id users name in `/model <id>`.
    pub id: String,
    pub provider: ProviderKind,
    /// The effort used when the task has none set.
    #[serde(default)]
    pub default_effort: Option<Effort>,
    /// Provider-specific settings (the provider's own model id, endpoint, script file…),
    /// read by the provider, opaque here.
    #[serde(default)]
    pub settings: serde_json::Map<String, serde_json::Value>,
    /// The model's context window in tokens; absent: the provider's usual size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
}

/// The configured models: ids, providers, default efforts, and the default model. Always
/// checked: at least one model, unique ids, a listed default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "CatalogFile")]
pub struct ModelCatalog {
    default_model: String,
    models: Vec<ModelSpec>,
    /// Tokens (input and output) a task may spend in all; `None`: unbounded. A server
    /// option overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    task_token_budget: Option<u64>,
}

/// The catalog file as written, before its checks.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    default_model: String,
    models: Vec<ModelSpec>,
    #[serde(default)]
    task_token_budget: Option<u64>,
}

impl TryFrom<CatalogFile> for ModelCatalog {
    type Error = CatalogError;

    fn try_from(file: CatalogFile) -> Result<Self, CatalogError> {
        Ok(ModelCatalog::new(file.default_model, file.models)?
            .with_task_token_budget(file.task_token_budget))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    #[error("the model catalog lists no models")]
    Empty,
    #[error("model id {0:?} appears more than once in the catalog")]
    DuplicateId(String),
    #[error("the default model {0:?} is not in the catalog")]
    UnknownDefault(String),
    #[error("the model catalog is not valid JSON: {0}")]
    Malformed(String),
}

impl ModelCatalog {
    /// A catalog whose every id is unique and whose default is listed.
    pub fn new(
        default_model: impl Into<String>,
        models: Vec<ModelSpec>,
    ) -> Result<Self, CatalogError> {
        let catalog = Self {
            default_model: default_model.into(),
            models,
            task_token_budget: None,
        };
        catalog.check()?;
        Ok(catalog)
    }

    /// Parses and checks a catalog file.
    pub fn from_json(text: &str) -> Result<Self, CatalogError> {
        let file: CatalogFile =
            serde_json::from_str(text).map_err(|e| CatalogError::Malformed(e.to_string()))?;
        file.try_into()
    }

    /// The offline default: one `echo` model.
    pub fn echo_only() -> Self {
        Self {
            default_model: "echo".to_owned(),
            models: vec![ModelSpec {
                id: "echo".to_owned(),
                provider: ProviderKind::Echo,
                default_effort: None,
                settings: serde_json::Map::new(),
                context_window: None,
            }],
            task_token_budget: None,
        }
    }

    /// The same catalog with a per-task token budget (`None`: unbounded).
    pub fn with_task_token_budget(mut self, budget: Option<u64>) -> Self {
        self.task_token_budget = budget;
        self
    }

    /// Tokens a task may spend in all, if bounded.
    pub fn task_token_budget(&self) -> Option<u64> {
        self.task_token_budget
    }

    fn check(&self) -> Result<(), CatalogError> {
        if self.models.is_empty() {
            return Err(CatalogError::Empty);
        }
        let mut seen = HashSet::new();
        for m in &self.models {
            if !seen.insert(m.id.as_str()) {
                return Err(CatalogError::DuplicateId(m.id.clone()));
            }
        }
        if self.get(&self.default_model).is_none() {
            return Err(CatalogError::UnknownDefault(self.default_model.clone()));
        }
        Ok(())
    }

    pub fn default_model(&self) -> &ModelSpec {
        self.get(&self.default_model).unwrap_or(&self.models[0])
    }

    pub fn models(&self) -> &[ModelSpec] {
        &self.models
    }

    /// Whether any listed model is served by `provider`.
    pub fn uses(&self, provider: ProviderKind) -> bool {
        self.models.iter().any(|m| m.provider == provider)
    }

    pub fn get(&self, id: &str) -> Option<&ModelSpec> {
        self.models.iter().find(|m| m.id == id)
    }

    /// The model a task uses: its own, or the catalog's default. A task whose model left the
    /// catalog falls back to the default rather than failing every turn.
    pub fn model_for(&self, task: &TaskExtension) -> &ModelSpec {
        task.model
            .as_deref()
            .and_then(|id| self.get(id))
            .unwrap_or_else(|| self.default_model())
    }

    /// The effort a task's turns use: its own, else its model's default.
    pub fn effort_for(&self, task: &TaskExtension) -> Option<Effort> {
        task.reasoning_effort
            .or(self.model_for(task).default_effort)
    }

    fn listing(&self) -> String {
        self.models
            .iter()
            .map(|m| format!("{} ({})", m.id, m.provider))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `/model`: report the current model and the catalog.
    ShowModel,
    /// `/model <id>`.
    SetModel(String),
    /// `/effort`: report the current effort.
    ShowEffort,
    /// `/effort low|medium|high`.
    SetEffort(Effort),
}

/// Reads the command in a message's first text part. `None`: the message is not a command.
/// `Some(Err)`: it is one, but malformed (answered with a refusal; state unchanged).
pub fn parse(parts: &[Part]) -> Option<Result<Command, DomainError>> {
    let text = parts.iter().find_map(Part::as_text)?;
    let mut words = text.split_whitespace();
    let head = words.next()?;
    let args: Vec<&str> = words.collect();
    let refused = |msg: String| Some(Err(DomainError::CommandRefused(msg)));
    match head {
        "/model" => match args.as_slice() {
            [] => Some(Ok(Command::ShowModel)),
            [id] => Some(Ok(Command::SetModel((*id).to_owned()))),
            _ => refused("usage: /model [id]".to_owned()),
        },
        "/effort" => match args.as_slice() {
            [] => Some(Ok(Command::ShowEffort)),
            [value] => match Effort::parse(&value.to_ascii_lowercase()) {
                Some(effort) => Some(Ok(Command::SetEffort(effort))),
                None => refused(format!("unknown effort {value:?}; use low, medium or high")),
            },
            _ => refused("usage: /effort low|medium|high".to_owned()),
        },
        _ => None,
    }
}

/// A command applied to a task.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandOutcome {
    /// The task after the command (`None`: the command only reported).
    pub task: Option<TaskExtension>,
    /// The status update's text.
    pub reply: String,
}

/// Applies `command` to `task` against `catalog`.
pub fn apply(
    task: &TaskExtension,
    catalog: &ModelCatalog,
    command: &Command,
) -> Result<CommandOutcome, DomainError> {
    match command {
        Command::ShowModel => {
            let current = match task.model.as_deref() {
                Some(id) => id.to_owned(),
                None => format!("{} (default)", catalog.default_model().id),
            };
            Ok(CommandOutcome {
                task: None,
                reply: format!("model: {current}; available: {}", catalog.listing()),
            })
        }
        Command::SetModel(id) => {
            let spec = catalog.get(id).ok_or_else(|| {
                DomainError::CommandRefused(format!(
                    "unknown model {id:?}; available: {}",
                    catalog.listing()
                ))
            })?;
            let mut next = task.clone();
            next.model = Some(spec.id.clone());
            Ok(CommandOutcome {
                task: Some(next),
                reply: format!("model set to {} ({})", spec.id, spec.provider),
            })
        }
        Command::ShowEffort => {
            let reply = match (task.reasoning_effort, catalog.effort_for(task)) {
                (Some(effort), _) => format!("reasoning effort: {effort}"),
                (None, Some(default)) => {
                    format!("reasoning effort: {default} (the model's default)")
                }
                (None, None) => "reasoning effort: not set (the provider's default)".to_owned(),
            };
            Ok(CommandOutcome { task: None, reply })
        }
        Command::SetEffort(effort) => {
            let mut next = task.clone();
            next.reasoning_effort = Some(*effort);
            Ok(CommandOutcome {
                task: Some(next),
                reply: format!("reasoning effort set to {effort}"),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn catalog() -> ModelCatalog {
        ModelCatalog::from_json(
            &json!({"default_model": "echo", "models": [
                {"id": "echo", "provider": "echo"},
                {"id": "claude", "provider": "bedrock", "default_effort": "medium",
                 "settings": {"model_id": "anthropic.claude"}},
                {"id": "gpt", "provider": "openai"}]})
            .to_string(),
        )
        .expect("valid catalog")
    }

    fn cmd(text: &str) -> Option<Result<Command, DomainError>> {
        parse(&[Part::text(text)])
    }

    #[test]
    fn parsing() {
        assert_eq!(cmd("/model"), Some(Ok(Command::ShowModel)));
        assert_eq!(
            cmd("  /model   claude \n"),
            Some(Ok(Command::SetModel("claude".into())))
        );
        assert_eq!(cmd("/effort"), Some(Ok(Command::ShowEffort)));
        assert_eq!(
            cmd("/effort HIGH"),
            Some(Ok(Command::SetEffort(Effort::High)))
        );
        assert_eq!(
            cmd("/effort low"),
            Some(Ok(Command::SetEffort(Effort::Low)))
        );
        // Not commands: another word, a longer word, not at the start, no text part.
        assert_eq!(cmd("/modelx claude"), None);
        assert_eq!(cmd("please /model claude"), None);
        assert_eq!(cmd("/help"), None);
        assert_eq!(parse(&[Part::data(json!({}))]), None);
        // The first *text* part decides.
        assert_eq!(
            parse(&[Part::data(json!({})), Part::text("/model")]),
            Some(Ok(Command::ShowModel))
        );
        assert_eq!(parse(&[Part::text("hello"), Part::text("/model")]), None);
    }

    #[test]
    fn malformed_commands_are_refused_with_reasons() {
        let refusal = |text| match cmd(text) {
            Some(Err(e)) => e.to_string(),
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(
            refusal("/effort max"),
            "unknown effort \"max\"; use low, medium or high"
        );
        assert_eq!(
            refusal("/effort low high"),
            "usage: /effort low|medium|high"
        );
        assert_eq!(refusal("/model a b"), "usage: /model [id]");
    }

    #[test]
    fn set_and_show_model() {
        let c = catalog();
        let task = TaskExtension::new("n", "g");
        let shown = apply(&task, &c, &Command::ShowModel).expect("ok");
        assert_eq!(shown.task, None);
        assert_eq!(
            shown.reply,
            "model: echo (default); available: echo (echo), claude (bedrock), gpt (openai)"
        );
        let set = apply(&task, &c, &Command::SetModel("claude".into())).expect("ok");
        assert_eq!(set.reply, "model set to claude (bedrock)");
        let task = set.task.expect("changed");
        assert_eq!(task.model.as_deref(), Some("claude"));
        assert_eq!(c.model_for(&task).provider, ProviderKind::Bedrock);
        assert_eq!(
            c.effort_for(&task),
            Some(Effort::Medium),
            "the model's default effort"
        );
        let err = apply(&task, &c, &Command::SetModel("gpt-9".into())).expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "unknown model \"gpt-9\"; available: echo (echo), claude (bedrock), gpt (openai)"
        );
    }

    #[test]
    fn set_and_show_effort() {
        let c = catalog();
        let task = TaskExtension::new("n", "g");
        assert_eq!(
            apply(&task, &c, &Command::ShowEffort).expect("ok").reply,
            "reasoning effort: not set (the provider's default)"
        );
        let task = apply(&task, &c, &Command::SetEffort(Effort::High))
            .expect("ok")
            .task
            .expect("changed");
        assert_eq!(task.reasoning_effort, Some(Effort::High));
        assert_eq!(
            apply(&task, &c, &Command::ShowEffort).expect("ok").reply,
            "reasoning effort: high"
        );
        let mut on_claude = TaskExtension::new("n", "g");
        on_claude.model = Some("claude".into());
        assert_eq!(
            apply(&on_claude, &c, &Command::ShowEffort)
                .expect("ok")
                .reply,
            "reasoning effort: medium (the model's default)"
        );
    }

    #[test]
    fn a_model_gone_from_the_catalog_falls_back_to_the_default() {
        let mut task = TaskExtension::new("n", "g");
        task.model = Some("retired".into());
        assert_eq!(catalog().model_for(&task).id, "echo");
    }

    #[test]
    fn the_catalog_says_which_providers_it_needs() {
        let catalog = catalog();
        assert!(catalog.uses(ProviderKind::Bedrock));
        assert!(!catalog.uses(ProviderKind::Scripted));
        assert!(!ModelCatalog::echo_only().uses(ProviderKind::Bedrock));
    }

    #[test]
    fn catalog_checks() {
        let spec = |id: &str| ModelSpec {
            id: id.into(),
            provider: ProviderKind::Echo,
            default_effort: None,
            settings: Default::default(),
            context_window: None,
        };
        assert_eq!(ModelCatalog::new("a", vec![]), Err(CatalogError::Empty));
        assert_eq!(
            ModelCatalog::new("a", vec![spec("a"), spec("a")]),
            Err(CatalogError::DuplicateId("a".into()))
        );
        assert_eq!(
            ModelCatalog::new("b", vec![spec("a")]),
            Err(CatalogError::UnknownDefault("b".into()))
        );
        assert!(matches!(
            ModelCatalog::from_json("{\"default_model\": \"a\"}"),
            Err(CatalogError::Malformed(_))
        ));
        assert!(matches!(
            ModelCatalog::from_json(
                r#"{"default_model": "a", "models": [{"id": "a", "provider": "gemini"}]}"#
            ),
            Err(CatalogError::Malformed(_))
        ));
        assert_eq!(
            ModelCatalog::echo_only()
                .model_for(&TaskExtension::new("n", "g"))
                .id,
            "echo"
        );
    }
}
