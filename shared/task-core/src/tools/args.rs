//! Typed arguments of the intrinsic tools. They are read only after the call passed the
//! tool's `input_schema`, so these types mirror the schemas and never loosen them.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::extension::Role;
use crate::plan::PlanStepArgs;
use crate::skills::ResourceKind;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreatePlanArgs {
    pub steps: Vec<PlanStepArgs>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompleteStepArgs {
    pub step: String,
    pub output: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpawnSubtaskArgs {
    pub name: String,
    pub goal: String,
    #[serde(default)]
    pub acceptance_criteria: Vec<String>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub step: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskParticipantArgs {
    pub participant_id: String,
    pub question: String,
    #[serde(default)]
    pub options: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTaskForParticipantArgs {
    pub participant_id: String,
    pub name: String,
    pub goal: String,
    #[serde(default)]
    pub acceptance_criteria: Vec<String>,
    #[serde(default)]
    pub step: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetParticipantRoleArgs {
    pub participant_id: String,
    pub role: Role,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillNameArgs {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadSkillResourceArgs {
    pub name: String,
    pub kind: ResourceKind,
    pub resource: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmitUiArgs {
    pub messages: Vec<Map<String, Value>>,
}

/// A validated intrinsic call.
#[derive(Debug, Clone, PartialEq)]
pub enum IntrinsicCall {
    CreatePlan(CreatePlanArgs),
    CompleteStep(CompleteStepArgs),
    SpawnSubtask(SpawnSubtaskArgs),
    AskParticipant(AskParticipantArgs),
    CreateTaskForParticipant(CreateTaskForParticipantArgs),
    SetParticipantRole(SetParticipantRoleArgs),
    ListSkills,
    LoadSkill(SkillNameArgs),
    UnloadSkill(SkillNameArgs),
    ListSkillResources(SkillNameArgs),
    LoadSkillResource(LoadSkillResourceArgs),
    EmitUi(EmitUiArgs),
}

impl IntrinsicCall {
    /// Types the arguments of the tool `name` (already checked against its schema).
    pub(super) fn from_arguments(name: &str, arguments: Value) -> Result<Self, serde_json::Error> {
        use serde::de::Error as _;
        use serde_json::from_value as typed;
        Ok(match name {
            "create_plan" => Self::CreatePlan(typed(arguments)?),
            "complete_step" => Self::CompleteStep(typed(arguments)?),
            "spawn_subtask" => Self::SpawnSubtask(typed(arguments)?),
            "ask_participant" => Self::AskParticipant(typed(arguments)?),
            "create_task_for_participant" => Self::CreateTaskForParticipant(typed(arguments)?),
            "set_participant_role" => Self::SetParticipantRole(typed(arguments)?),
            "list_skills" => Self::ListSkills,
            "load_skill" => Self::LoadSkill(typed(arguments)?),
            "unload_skill" => Self::UnloadSkill(typed(arguments)?),
            "list_skill_resources" => Self::ListSkillResources(typed(arguments)?),
            "load_skill_resource" => Self::LoadSkillResource(typed(arguments)?),
            "emit_ui" => Self::EmitUi(typed(arguments)?),
            other => {
                return Err(serde_json::Error::custom(format!(
                    "no typed arguments for {other}"
                )));
            }
        })
    }

    /// The tool's name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::CreatePlan(_) => "create_plan",
            Self::CompleteStep(_) => "complete_step",
            Self::SpawnSubtask(_) => "spawn_subtask",
            Self::AskParticipant(_) => "ask_participant",
            Self::CreateTaskForParticipant(_) => "create_task_for_participant",
            Self::SetParticipantRole(_) => "set_participant_role",
            Self::ListSkills => "list_skills",
            Self::LoadSkill(_) => "load_skill",
            Self::UnloadSkill(_) => "unload_skill",
            Self::ListSkillResources(_) => "list_skill_resources",
            Self::LoadSkillResource(_) => "load_skill_resource",
            Self::EmitUi(_) => "emit_ui",
        }
    }
}
