//! The twelve intrinsic tools: their definitions (from `schemas/intrinsics/*.json`), the
//! validating invoker, and each tool's effect.
//!
//! A model's tool call goes through [`ToolRegistry::invoke`]: an unknown tool is
//! `[tool.not_found] …`, arguments that fail the tool's `input_schema` are
//! `[tool.invalid_arguments] …`; otherwise the typed call goes to [`execute`], a pure
//! function of (task, actor, arguments) → (next task, effects, result text).

mod args;
mod execute;

use std::fmt;
use std::sync::LazyLock;

use jsonschema::Validator;
use serde::Deserialize;
use serde_json::Value;

pub use args::*;
pub use execute::{ChildKind, ChildTask, ToolEffect, ToolEnv, ToolOutcome, execute};

use crate::schemas;

/// A tool result the model reads as an error: `[<code>] <message>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    pub code: &'static str,
    pub message: String,
}

impl ToolFailure {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.code, self.message)
    }
}

/// Whether a failed call may be retried (from the definition's `idempotency`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Idempotency {
    Idempotent,
    NotIdempotent,
}

/// One tool as the model sees it.
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub idempotency: Idempotency,
    /// The JSON schema of the arguments: what the model sees and what calls are checked against.
    pub input_schema: Value,
    validator: Validator,
}

impl fmt::Debug for ToolSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolSpec")
            .field("name", &self.name)
            .field("idempotency", &self.idempotency)
            .finish()
    }
}

#[derive(Deserialize)]
struct ToolFile {
    name: String,
    description: String,
    idempotency: Idempotency,
    input_schema: Value,
}

/// The intrinsic tools, compiled once.
#[derive(Debug)]
pub struct ToolRegistry {
    tools: Vec<ToolSpec>,
}

static INTRINSICS: LazyLock<ToolRegistry> = LazyLock::new(|| {
    let tools = schemas::INTRINSICS
        .iter()
        .map(|file| {
            let parsed: ToolFile = match serde_json::from_value(schemas::parse(*file)) {
                Ok(parsed) => parsed,
                Err(err) => panic!("embedded tool definition {} is malformed: {err}", file.path),
            };
            let validator = match jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .build(&parsed.input_schema)
            {
                Ok(v) => v,
                Err(err) => panic!("input schema of {} does not compile: {err}", file.path),
            };
            ToolSpec {
                name: parsed.name,
                description: parsed.description,
                idempotency: parsed.idempotency,
                input_schema: parsed.input_schema,
                validator,
            }
        })
        .collect();
    ToolRegistry { tools }
});

/// The twelve intrinsic tools.
pub fn intrinsics() -> &'static ToolRegistry {
    &INTRINSICS
}

impl ToolRegistry {
    /// Every tool, in definition order.
    pub fn specs(&self) -> &[ToolSpec] {
        &self.tools
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// Checks a model's tool call and types its arguments.
    pub fn invoke(&self, name: &str, arguments: &Value) -> Result<IntrinsicCall, ToolFailure> {
        let spec = self
            .get(name)
            .ok_or_else(|| ToolFailure::new("tool.not_found", format!("no such tool: {name}")))?;
        schemas::check(&spec.validator, arguments)
            .map_err(|e| ToolFailure::new("tool.invalid_arguments", e))?;
        IntrinsicCall::from_arguments(name, arguments.clone())
            .map_err(|e| ToolFailure::new("tool.invalid_arguments", e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn twelve_tools_from_the_contract_files() {
        let names: Vec<_> = intrinsics()
            .specs()
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "create_plan",
                "complete_step",
                "spawn_subtask",
                "ask_participant",
                "create_task_for_participant",
                "set_participant_role",
                "list_skills",
                "load_skill",
                "unload_skill",
                "list_skill_resources",
                "load_skill_resource",
                "emit_ui"
            ]
        );
        let not_idempotent: Vec<_> = intrinsics()
            .specs()
            .iter()
            .filter(|t| t.idempotency == Idempotency::NotIdempotent)
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(
            not_idempotent,
            [
                "spawn_subtask",
                "ask_participant",
                "create_task_for_participant",
                "emit_ui"
            ]
        );
        let create_plan = intrinsics().get("create_plan").expect("defined");
        assert_eq!(
            create_plan.description,
            "Attach a plan: a DAG of steps for the current task."
        );
        assert_eq!(create_plan.input_schema["required"], json!(["steps"]));
    }

    #[test]
    fn unknown_tools() {
        let err = intrinsics()
            .invoke("rm_rf", &json!({}))
            .expect_err("unknown");
        assert_eq!(err.to_string(), "[tool.not_found] no such tool: rm_rf");
    }

    #[test]
    fn invalid_arguments_name_the_failing_path() {
        let cases = [
            (
                "create_plan",
                json!({"steps": []}),
                "[tool.invalid_arguments] /steps: [] has less than 1 item",
            ),
            (
                "create_plan",
                json!({"steps": [{"name": "", "description": "d"}]}),
                "[tool.invalid_arguments] /steps/0/name: ",
            ),
            (
                "create_plan",
                json!({"steps": [{"name": "a"}]}),
                "[tool.invalid_arguments] /steps/0: \"description\" is a required property",
            ),
            (
                "complete_step",
                json!({"step": "a"}),
                "[tool.invalid_arguments] /: \"output\" is a required property",
            ),
            (
                "ask_participant",
                json!({"participant_id": "a", "question": "q", "cc": "b"}),
                "[tool.invalid_arguments] /: Additional properties are not allowed ('cc' was unexpected)",
            ),
            (
                "set_participant_role",
                json!({"participant_id": "a", "role": "owner"}),
                "[tool.invalid_arguments] /role: ",
            ),
            (
                "load_skill_resource",
                json!({"name": "s", "kind": "bin", "resource": "x"}),
                "[tool.invalid_arguments] /kind: ",
            ),
            (
                "emit_ui",
                json!({"messages": []}),
                "[tool.invalid_arguments] /messages: [] has less than 1 item",
            ),
            (
                "list_skills",
                json!({"verbose": true}),
                "[tool.invalid_arguments] /: Additional properties are not allowed",
            ),
            (
                "spawn_subtask",
                json!("not an object"),
                "[tool.invalid_arguments] /: ",
            ),
        ];
        for (tool, args, text) in cases {
            let err = intrinsics()
                .invoke(tool, &args)
                .expect_err("invalid")
                .to_string();
            assert!(err.starts_with(text), "{tool} {args}: {err}");
        }
    }

    #[test]
    fn valid_calls_are_typed() {
        let call = intrinsics()
            .invoke(
                "create_plan",
                &json!({"steps": [{"name": "Gather facts", "description": "Read the order"}]}),
            )
            .expect("valid");
        assert!(
            matches!(call, IntrinsicCall::CreatePlan(ref a) if a.steps[0].depends_on.is_empty())
        );
        let call = intrinsics()
            .invoke("list_skills", &json!({}))
            .expect("valid");
        assert_eq!(call, IntrinsicCall::ListSkills);
        let call = intrinsics()
            .invoke(
                "spawn_subtask",
                &json!({"name": "Check", "goal": "Check the ledger", "step": "gather-facts"}),
            )
            .expect("valid");
        assert_eq!(
            call,
            IntrinsicCall::SpawnSubtask(SpawnSubtaskArgs {
                name: "Check".into(),
                goal: "Check the ledger".into(),
                acceptance_criteria: vec![],
                agent: None,
                step: Some("gather-facts".into()),
            })
        );
    }
}
