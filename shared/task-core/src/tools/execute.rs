//! Each intrinsic's effect: (task, actor, arguments) → (next task, effects, result text).
//!
//! Nothing here performs I/O. What must happen outside the task value (create and run a child
//! task, move the task to INPUT_REQUIRED after the turn, write a role change conditionally,
//! publish an artifact) is returned as a [`ToolEffect`] for the runtime to carry out. A failed
//! call changes nothing and has no effects.

use a2a::{Artifact, Part};
use serde_json::Value;

use super::args::*;
use super::{IntrinsicCall, ToolFailure};
use crate::extension::{
    AcceptanceCriterion, EntityKind, EntityRef, ExtraFields, Lifecycle, Participant,
    ParticipantKind, Role, StepState, TaskExtension, TaskRef,
};
use crate::lifecycle::state_name;
use crate::plan::{self, PlanError};
use crate::policy::{self, Action};
use crate::skills::{SkillInvalid, SkillLibrary};
use crate::task::{HelpRequest, WorkingTask};
use crate::{A2UI_EXTENSION_URI, A2UI_MEDIA_TYPE};

/// What the tools may consult besides the task.
#[derive(Debug, Clone, Copy)]
pub struct ToolEnv<'a> {
    /// This agent's participant id.
    pub agent_id: &'a str,
    pub skills: &'a SkillLibrary,
    /// Ids of the registered remote A2A agents `spawn_subtask` may delegate to.
    pub remote_agents: &'a [String],
}

/// What a call asks the runtime to do beyond the next task value.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolEffect {
    /// Create (and start) a child task; the parent's `sub_tasks` already link it.
    CreateChild(ChildTask),
    /// After the turn, the task waits for this participant (INPUT_REQUIRED, awaiting-answer)
    /// with the request as its status message. When a turn asks several times, the last
    /// request is the one the task waits on.
    HelpRequested(HelpRequest),
    /// A role change: the store writes it only if the actor is still an admin and the target
    /// still has role `from` (conditional write).
    RoleChanged {
        actor: String,
        participant_id: String,
        from: Role,
        to: Role,
    },
    /// An artifact to publish (`emit_ui`).
    Artifact(Artifact),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChildTask {
    /// `<parent>.<n>`.
    pub id: String,
    pub extension: TaskExtension,
    pub kind: ChildKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildKind {
    /// Run by an agent: this service's (`remote_agent: None`) or a registered remote A2A agent.
    Agent { remote_agent: Option<String> },
    /// Waits for `assignee`, whose first accepted message completes it; its status message is
    /// the goal.
    Participant { assignee: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    /// The result text the model reads, or the failure it reads as `[code] message`.
    pub result: Result<String, ToolFailure>,
    /// The task after the call; `None` when the call changed nothing.
    pub task: Option<WorkingTask>,
    pub effects: Vec<ToolEffect>,
}

impl ToolOutcome {
    fn failed(failure: ToolFailure) -> Self {
        Self {
            result: Err(failure),
            task: None,
            effects: Vec::new(),
        }
    }

    fn read(text: impl Into<String>) -> Self {
        Self {
            result: Ok(text.into()),
            task: None,
            effects: Vec::new(),
        }
    }

    fn changed(text: impl Into<String>, task: WorkingTask, effects: Vec<ToolEffect>) -> Self {
        Self {
            result: Ok(text.into()),
            task: Some(task),
            effects,
        }
    }

    /// The text as the model reads it.
    pub fn text(&self) -> String {
        match &self.result {
            Ok(text) => text.clone(),
            Err(failure) => failure.to_string(),
        }
    }
}

fn plan_failure(err: PlanError) -> ToolFailure {
    ToolFailure::new(err.code(), err.to_string())
}

fn skill_failure(err: SkillInvalid) -> ToolFailure {
    ToolFailure::new(err.code(), err.to_string())
}

fn not_a_member() -> ToolFailure {
    ToolFailure::new("channel.not_a_member", "no such participant on this task")
}

/// Applies one validated call. `actor` is the participant whose message drove this turn.
pub fn execute(
    task: &WorkingTask,
    actor: Option<&str>,
    call: &IntrinsicCall,
    env: &ToolEnv<'_>,
) -> ToolOutcome {
    match run(task, actor, call, env) {
        Ok(outcome) => outcome,
        Err(failure) => ToolOutcome::failed(failure),
    }
}

fn run(
    task: &WorkingTask,
    actor: Option<&str>,
    call: &IntrinsicCall,
    env: &ToolEnv<'_>,
) -> Result<ToolOutcome, ToolFailure> {
    match call {
        IntrinsicCall::CreatePlan(args) => create_plan(task, args),
        IntrinsicCall::CompleteStep(args) => {
            let mut next = task.clone();
            let plan = next
                .extension
                .plan
                .as_mut()
                .ok_or_else(|| plan_failure(PlanError::Missing))?;
            let id = plan
                .complete(&args.step, &args.output)
                .map_err(plan_failure)?
                .id
                .clone();
            Ok(ToolOutcome::changed(
                format!("step {id} done"),
                next,
                vec![],
            ))
        }
        IntrinsicCall::SpawnSubtask(args) => spawn_subtask(task, args, env),
        IntrinsicCall::AskParticipant(args) => {
            task.extension
                .participant(&args.participant_id)
                .ok_or_else(not_a_member)?;
            let mut next = task.clone();
            next.agent.help_requests += 1;
            let request = HelpRequest {
                participant_id: args.participant_id.clone(),
                question: args.question.clone(),
                options: args.options.clone(),
                message_id: format!("{}:help:{}", task.id, next.agent.help_requests),
                comments: Vec::new(),
                dropped_comments: 0,
            };
            next.agent.pending_help = Some(request.clone());
            let text = format!("asked {}; waiting for the reply", args.participant_id);
            Ok(ToolOutcome::changed(
                text,
                next,
                vec![ToolEffect::HelpRequested(request)],
            ))
        }
        IntrinsicCall::CreateTaskForParticipant(args) => create_task_for_participant(task, args),
        IntrinsicCall::SetParticipantRole(args) => set_participant_role(task, actor, args),
        IntrinsicCall::ListSkills => Ok(ToolOutcome::read(env.skills.index())),
        IntrinsicCall::LoadSkill(args) => {
            let skill = env.skills.get(&args.name).map_err(skill_failure)?;
            let mut next = task.clone();
            next.agent.loaded_skills.insert(skill.name.clone());
            Ok(if next.agent == task.agent {
                ToolOutcome::read(skill.body.clone())
            } else {
                ToolOutcome::changed(skill.body.clone(), next, vec![])
            })
        }
        IntrinsicCall::UnloadSkill(args) => {
            require_loaded(task, &args.name)?;
            let mut next = task.clone();
            next.agent.loaded_skills.remove(&args.name);
            Ok(ToolOutcome::changed(
                format!("unloaded {}", args.name),
                next,
                vec![],
            ))
        }
        IntrinsicCall::ListSkillResources(args) => {
            let skill = env.skills.get(&args.name).map_err(skill_failure)?;
            require_loaded(task, &args.name)?;
            Ok(ToolOutcome::read(skill.resource_index()))
        }
        IntrinsicCall::LoadSkillResource(args) => {
            let skill = env.skills.get(&args.name).map_err(skill_failure)?;
            require_loaded(task, &args.name)?;
            let text = skill
                .resource(args.kind, &args.resource)
                .map_err(skill_failure)?;
            Ok(ToolOutcome::read(text))
        }
        IntrinsicCall::EmitUi(args) => emit_ui(task, args),
    }
}

/// Resources belong to a loaded skill (the tools' own descriptions say so): the agent reads
/// a skill's instructions before its files.
fn require_loaded(task: &WorkingTask, name: &str) -> Result<(), ToolFailure> {
    if task.agent.loaded_skills.contains(name) {
        Ok(())
    } else {
        Err(ToolFailure::new(
            "skill.invalid",
            "skill is not loaded; call load_skill first",
        ))
    }
}

/// Replaces the plan. Steps that keep their id keep their progress (state, output, linked
/// tasks), so revising a plan never loses work already recorded.
fn create_plan(task: &WorkingTask, args: &CreatePlanArgs) -> Result<ToolOutcome, ToolFailure> {
    let mut plan = plan::build(&args.steps).map_err(plan_failure)?;
    if let Some(old) = &task.extension.plan {
        for step in &mut plan.steps {
            if let Some(previous) = old.steps.iter().find(|s| s.id == step.id) {
                step.state = previous.state;
                step.output.clone_from(&previous.output);
                step.linked_tasks.clone_from(&previous.linked_tasks);
            }
        }
    }
    let mut next = task.clone();
    let text = format!("plan attached with {} steps", plan.steps.len());
    next.extension.plan = Some(plan);
    Ok(ToolOutcome::changed(text, next, vec![]))
}

/// Resolves the optional step a child is linked to, before anything is created.
fn resolve_step(task: &WorkingTask, step: Option<&str>) -> Result<Option<usize>, ToolFailure> {
    let Some(step) = step else { return Ok(None) };
    let plan = task
        .extension
        .plan
        .as_ref()
        .ok_or_else(|| plan_failure(PlanError::Missing))?;
    plan.find(step)
        .map(Some)
        .ok_or_else(|| plan_failure(PlanError::UnknownStep(step.to_owned())))
}

/// `<parent>.<n>`, n = one more than the children so far (skipping any id already taken).
fn next_child_id(task: &WorkingTask) -> String {
    let mut n = task.extension.sub_tasks.len() + 1;
    loop {
        let id = format!("{}.{n}", task.id);
        if !task.extension.sub_tasks.iter().any(|r| r.task_id == id) {
            return id;
        }
        n += 1;
    }
}

fn child_extension(
    parent: &WorkingTask,
    name: &str,
    goal: &str,
    criteria: &[String],
    participants: Vec<Participant>,
) -> TaskExtension {
    let mut ext = TaskExtension::new(name, goal);
    ext.acceptance_criteria = criteria.iter().map(AcceptanceCriterion::new).collect();
    ext.participants = participants;
    ext.parent_tasks = vec![TaskRef::local(parent.id.clone())];
    ext.lifecycle = Some(Lifecycle::Delegated);
    ext
}

/// Links a new child in `sub_tasks` and, when given, in the step's `linked_tasks`; a pending
/// step whose dependencies are done becomes active, since work on it has started, and so does
/// a failed step (a new sub-task retries it).
fn link_child(next: &mut WorkingTask, child: TaskRef, step: Option<usize>) {
    if let (Some(index), Some(plan)) = (step, next.extension.plan.as_mut()) {
        plan.steps[index].linked_tasks.push(child.clone());
        let starts = match plan.steps[index].state {
            StepState::Pending => plan.waiting_on(index).is_empty(),
            StepState::Failed => true,
            StepState::Active | StepState::Done => false,
        };
        if starts {
            plan.steps[index].state = StepState::Active;
        }
    }
    next.extension.sub_tasks.push(child);
}

fn new_ref(id: &str, agent: Option<&str>) -> TaskRef {
    let mut r = TaskRef::local(id);
    r.agent = agent.map(|id| EntityRef {
        kind: EntityKind::Agent,
        id: id.to_owned(),
        version: None,
        extra: ExtraFields::new(),
    });
    r.state = Some(state_name(&a2a::TaskState::Submitted).to_owned());
    r
}

fn spawn_subtask(
    task: &WorkingTask,
    args: &SpawnSubtaskArgs,
    env: &ToolEnv<'_>,
) -> Result<ToolOutcome, ToolFailure> {
    if let Some(agent) = &args.agent
        && !env.remote_agents.iter().any(|a| a == agent)
    {
        return Err(ToolFailure::new(
            "agent.not_found",
            format!("no registered remote agent: {agent}"),
        ));
    }
    let participants = if task.extension.participants.is_empty() {
        vec![Participant::new(
            env.agent_id,
            ParticipantKind::Agent,
            Role::Assignee,
        )]
    } else {
        task.extension.participants.clone()
    };
    let child = NewChild {
        name: &args.name,
        goal: &args.goal,
        acceptance_criteria: &args.acceptance_criteria,
        step: args.step.as_deref(),
        participants,
        kind: ChildKind::Agent {
            remote_agent: args.agent.clone(),
        },
    };
    create_child(task, child, |id| {
        format!("sub-task {} spawned as {id}", args.name)
    })
}

/// The child's participants are the parent's with the target as assignee and every former
/// assignee as watcher.
fn create_task_for_participant(
    task: &WorkingTask,
    args: &CreateTaskForParticipantArgs,
) -> Result<ToolOutcome, ToolFailure> {
    task.extension
        .participant(&args.participant_id)
        .ok_or_else(not_a_member)?;
    let participants = task
        .extension
        .participants
        .iter()
        .map(|p| {
            let mut p = p.clone();
            if p.id == args.participant_id {
                p.role = Role::Assignee;
            } else if p.role == Role::Assignee {
                p.role = Role::Watcher;
            }
            p
        })
        .collect();
    let child = NewChild {
        name: &args.name,
        goal: &args.goal,
        acceptance_criteria: &args.acceptance_criteria,
        step: args.step.as_deref(),
        participants,
        kind: ChildKind::Participant {
            assignee: args.participant_id.clone(),
        },
    };
    create_child(task, child, |id| {
        format!("task for {} created as {id}", args.participant_id)
    })
}

/// What the two child-creating tools ask for, from their arguments.
struct NewChild<'a> {
    name: &'a str,
    goal: &'a str,
    acceptance_criteria: &'a [String],
    /// The plan step the child is linked to.
    step: Option<&'a str>,
    participants: Vec<Participant>,
    kind: ChildKind,
}

/// Resolves the step, names the child, links it into the parent (`sub_tasks`, the step's
/// `linked_tasks`) and asks the runtime to create it; `text` says so, given the child's id.
fn create_child(
    task: &WorkingTask,
    child: NewChild<'_>,
    text: impl FnOnce(&str) -> String,
) -> Result<ToolOutcome, ToolFailure> {
    let step = resolve_step(task, child.step)?;
    let id = next_child_id(task);
    let text = text(&id);
    let extension = child_extension(
        task,
        child.name,
        child.goal,
        child.acceptance_criteria,
        child.participants,
    );
    let kind = child.kind;
    let remote_agent = match &kind {
        ChildKind::Agent { remote_agent } => remote_agent.as_deref(),
        ChildKind::Participant { .. } => None,
    };
    let mut next = task.clone();
    link_child(&mut next, new_ref(&id, remote_agent), step);
    let child = ChildTask {
        id,
        extension,
        kind,
    };
    Ok(ToolOutcome::changed(
        text,
        next,
        vec![ToolEffect::CreateChild(child)],
    ))
}

fn set_participant_role(
    task: &WorkingTask,
    actor: Option<&str>,
    args: &SetParticipantRoleArgs,
) -> Result<ToolOutcome, ToolFailure> {
    let actor = actor
        .filter(|a| policy::authorize(&task.extension, a, Action::ChangeRole).is_ok())
        .ok_or_else(|| {
            ToolFailure::new("channel.not_a_member", "only an admin may change roles")
        })?;
    let from = task
        .extension
        .participant(&args.participant_id)
        .ok_or_else(not_a_member)?
        .role;
    let text = format!("{} is now {}", args.participant_id, args.role);
    if from == args.role {
        return Ok(ToolOutcome::read(text));
    }
    let mut next = task.clone();
    if let Some(p) = next.extension.participant_mut(&args.participant_id) {
        p.role = args.role;
    }
    policy::check_roster(&task.extension, &next.extension, None)
        .map_err(|refused| ToolFailure::new("participants.last_admin", refused.to_string()))?;
    let effect = ToolEffect::RoleChanged {
        actor: actor.to_owned(),
        participant_id: args.participant_id.clone(),
        from,
        to: args.role,
    };
    Ok(ToolOutcome::changed(text, next, vec![effect]))
}

fn emit_ui(task: &WorkingTask, args: &EmitUiArgs) -> Result<ToolOutcome, ToolFailure> {
    let messages: Vec<Value> = args.messages.iter().cloned().map(Value::Object).collect();
    let surfaces = task
        .agent
        .surfaces
        .apply_server_messages(&messages)
        .map_err(|e| ToolFailure::new("a2ui.invalid", e.to_string()))?;
    let mut next = task.clone();
    next.agent.surfaces = surfaces;
    next.agent.ui_emits += 1;
    let artifact = Artifact {
        artifact_id: format!("a2ui:{}", next.agent.ui_emits),
        name: Some("a2ui".to_owned()),
        description: None,
        parts: messages
            .into_iter()
            .map(|m| Part::data(m).with_media_type(A2UI_MEDIA_TYPE))
            .collect(),
        metadata: None,
        extensions: Some(vec![A2UI_EXTENSION_URI.to_owned()]),
    };
    let text = format!("{} UI message(s) emitted", args.messages.len());
    Ok(ToolOutcome::changed(
        text,
        next,
        vec![ToolEffect::Artifact(artifact)],
    ))
}

#[cfg(test)]
#[path = "execute_tests.rs"]
mod tests;
