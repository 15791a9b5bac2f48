//! The Task extension v1 object carried in `Task.metadata[TASK_METADATA_KEY]`.
//!
//! Serde types for every field of `schemas/task.schema.json`. The object is always written
//! whole: every field, defaults and nulls included, snake_case keys. It is read only through
//! [`TaskExtension::from_value`] (in [`crate::validation`]), which validates against the schema first, so the types never
//! see an object the contract refuses. Nested objects (participants, steps, task refs…) keep
//! keys the schema allows but does not name, so a valid object round-trips unchanged.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::states;

/// Keys a nested object carries beyond the ones the schema names (the schema allows them).
pub type ExtraFields = BTreeMap<String, Value>;

/// The extension object (`TaskExtensionData`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskExtension {
    pub name: String,
    #[serde(default, rename = "type")]
    pub task_type: Option<String>,
    pub goal: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub acceptance_criteria: Vec<AcceptanceCriterion>,
    #[serde(default)]
    pub participants: Vec<Participant>,
    #[serde(default)]
    pub parent_tasks: Vec<TaskRef>,
    #[serde(default)]
    pub sub_tasks: Vec<TaskRef>,
    #[serde(default)]
    pub plan: Option<Plan>,
    /// Server-controlled; `None` on tasks stored before the field existed (see
    /// [`TaskExtension::effective_lifecycle`]).
    #[serde(default)]
    pub lifecycle: Option<Lifecycle>,
    /// Server-controlled; changed only by the `/model` command.
    #[serde(default)]
    pub model: Option<String>,
    /// Server-controlled; changed only by the `/effort` command.
    #[serde(default)]
    pub reasoning_effort: Option<Effort>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptanceCriterion {
    pub text: String,
    #[serde(default)]
    pub met: bool,
    #[serde(flatten)]
    pub extra: ExtraFields,
}

impl AcceptanceCriterion {
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            met: false,
            extra: ExtraFields::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Participant {
    pub id: String,
    pub kind: ParticipantKind,
    pub role: Role,
    #[serde(default)]
    pub display_name: String,
    #[serde(flatten)]
    pub extra: ExtraFields,
}

impl Participant {
    pub fn new(id: impl Into<String>, kind: ParticipantKind, role: Role) -> Self {
        Self {
            id: id.into(),
            kind,
            role,
            display_name: String::new(),
            extra: ExtraFields::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParticipantKind {
    Human,
    Agent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Assignee,
    Reporter,
    Watcher,
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Assignee, Role::Reporter, Role::Watcher, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Assignee => "assignee",
            Role::Reporter => "reporter",
            Role::Watcher => "watcher",
            Role::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A reference to a task on this service (`agent: None`) or on a remote agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRef {
    pub task_id: String,
    #[serde(default)]
    pub agent: Option<EntityRef>,
    /// The referenced task's A2A state as its ProtoJSON name (`TASK_STATE_WORKING`), kept
    /// current in a parent's `sub_tasks`.
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub sub_state: Option<SubState>,
    #[serde(flatten)]
    pub extra: ExtraFields,
}

impl TaskRef {
    pub fn local(task_id: impl Into<String>) -> Self {
        Self {
            task_id: task_id.into(),
            agent: None,
            state: None,
            sub_state: None,
            extra: ExtraFields::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntityRef {
    pub kind: EntityKind,
    pub id: String,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(flatten)]
    pub extra: ExtraFields,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityKind {
    Prompt,
    Skill,
    Tool,
    Llm,
    SystemOne,
    Hook,
    Channel,
    Renderer,
    Surface,
    Store,
    Agent,
    Command,
}

/// Why an interrupted task waits (mirrored into a parent's `TaskRef`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SubState {
    #[serde(rename = "awaiting-next-message")]
    AwaitingNextMessage,
    #[serde(rename = "awaiting-answer")]
    AwaitingAnswer,
}

impl SubState {
    pub fn as_str(self) -> &'static str {
        match self {
            SubState::AwaitingNextMessage => "awaiting-next-message",
            SubState::AwaitingAnswer => "awaiting-answer",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub steps: Vec<Step>,
    #[serde(flatten)]
    pub extra: ExtraFields,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub depends_on: Vec<String>,
    #[serde(default)]
    pub output: Option<String>,
    #[serde(default)]
    pub linked_tasks: Vec<TaskRef>,
    #[serde(default)]
    pub state: StepState,
    #[serde(flatten)]
    pub extra: ExtraFields,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepState {
    #[default]
    Pending,
    Active,
    Done,
    Failed,
}

impl StepState {
    pub fn as_str(self) -> &'static str {
        match self {
            StepState::Pending => "pending",
            StepState::Active => "active",
            StepState::Done => "done",
            StepState::Failed => "failed",
        }
    }
}

impl fmt::Display for StepState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a task ends (SPEC section 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    /// A top-level task: waits for the next message after each answer; completes when every
    /// acceptance criterion is met, or by `CancelTask`.
    Conversation,
    /// A sub-task: runs to completion on its own.
    Delegated,
}

/// Reasoning effort for the model provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effort {
    Low,
    Medium,
    High,
}

impl Effort {
    pub const ALL: [Effort; 3] = [Effort::Low, Effort::Medium, Effort::High];

    pub fn as_str(self) -> &'static str {
        match self {
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
        }
    }

    pub fn parse(value: &str) -> Option<Effort> {
        Effort::ALL.into_iter().find(|e| e.as_str() == value)
    }
}

impl fmt::Display for Effort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The keys an envelope may never set (SPEC section 3).
pub const SERVER_CONTROLLED_FIELDS: [&str; 3] = ["lifecycle", "model", "reasoning_effort"];

impl TaskExtension {
    /// A minimal extension with every other field at its default.
    pub fn new(name: impl Into<String>, goal: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            task_type: None,
            goal: goal.into(),
            description: String::new(),
            acceptance_criteria: Vec::new(),
            participants: Vec::new(),
            parent_tasks: Vec::new(),
            sub_tasks: Vec::new(),
            plan: None,
            lifecycle: None,
            model: None,
            reasoning_effort: None,
        }
    }

    /// The whole object: every field, defaults and nulls included.
    pub fn to_value(&self) -> Value {
        // Serialising plain structs of strings, vectors and JSON values cannot fail.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The lifecycle, defaulted for tasks stored without it: a task with a parent is
    /// `delegated`, any other task is a `conversation`.
    pub fn effective_lifecycle(&self) -> Lifecycle {
        self.lifecycle.unwrap_or(if self.parent_tasks.is_empty() {
            Lifecycle::Conversation
        } else {
            Lifecycle::Delegated
        })
    }

    pub fn participant(&self, id: &str) -> Option<&Participant> {
        self.participants.iter().find(|p| p.id == id)
    }

    pub fn participant_mut(&mut self, id: &str) -> Option<&mut Participant> {
        self.participants.iter_mut().find(|p| p.id == id)
    }

    pub fn has_assignee(&self) -> bool {
        self.participants.iter().any(|p| p.role == Role::Assignee)
    }

    /// Every criterion met, and there is at least one.
    pub fn all_criteria_met(&self) -> bool {
        !self.acceptance_criteria.is_empty() && self.acceptance_criteria.iter().all(|c| c.met)
    }

    /// Sub-tasks that are not in a terminal state (a child whose state is unknown counts as
    /// unresolved).
    pub fn unresolved_sub_tasks(&self) -> impl Iterator<Item = &TaskRef> {
        self.sub_tasks.iter().filter(|r| {
            !r.state
                .as_deref()
                .and_then(states::parse_state)
                .is_some_and(|s| s.is_terminal())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::DomainError;
    use crate::schemas;
    use serde_json::{Map, json};

    fn pinned_example() -> Value {
        json!({
            "name": "Refund order 48213", "type": null, "goal": "Refund order 48213\nIt was late",
            "description": "", "acceptance_criteria": [],
            "participants": [
                {"id": "alice", "kind": "human", "role": "reporter", "display_name": ""},
                {"id": "tiny-harness", "kind": "agent", "role": "assignee", "display_name": ""}],
            "parent_tasks": [], "sub_tasks": [], "plan": null,
            "lifecycle": "conversation", "model": null, "reasoning_effort": null
        })
    }

    #[test]
    fn a_full_object_round_trips_unchanged() {
        let value = pinned_example();
        let ext = TaskExtension::from_value(&value).expect("valid");
        assert_eq!(ext.to_value(), value);
    }

    #[test]
    fn defaults_and_nulls_are_written_out() {
        let ext = TaskExtension::from_value(&json!({"name": "n", "goal": "g"})).expect("valid");
        assert_eq!(
            ext.to_value(),
            json!({"name": "n", "type": null, "goal": "g", "description": "",
                   "acceptance_criteria": [], "participants": [], "parent_tasks": [],
                   "sub_tasks": [], "plan": null, "lifecycle": null, "model": null,
                   "reasoning_effort": null})
        );
    }

    #[test]
    fn nested_defaults_are_written_out() {
        let ext = TaskExtension::from_value(&json!({
            "name": "n", "goal": "g",
            "acceptance_criteria": [{"text": "done"}],
            "sub_tasks": [{"task_id": "t.1"}],
            "plan": {"steps": [{"id": "a", "name": "A"}]}
        }))
        .expect("valid");
        let v = ext.to_value();
        assert_eq!(
            v["acceptance_criteria"],
            json!([{"text": "done", "met": false}])
        );
        assert_eq!(
            v["sub_tasks"],
            json!([{"task_id": "t.1", "agent": null, "state": null, "sub_state": null}])
        );
        assert_eq!(
            v["plan"],
            json!({"steps": [{"id": "a", "name": "A", "description": "", "depends_on": [],
                              "output": null, "linked_tasks": [], "state": "pending"}]})
        );
    }

    #[test]
    fn keys_the_schema_allows_on_nested_objects_are_kept() {
        let value = json!({"name": "n", "goal": "g", "participants": [
            {"id": "a", "kind": "human", "role": "admin", "display_name": "", "email": "a@x"}]});
        let ext = TaskExtension::from_value(&value).expect("valid");
        assert_eq!(ext.to_value()["participants"][0]["email"], "a@x");
    }

    #[test]
    fn schema_violations_are_refused_with_their_path() {
        let cases = [
            (json!({"goal": "g"}), "/: "),
            (json!({"name": "n", "goal": "g", "extra": 1}), "/: "),
            (
                json!({"name": "n", "goal": "g", "lifecycle": "forever"}),
                "/lifecycle: ",
            ),
            (
                json!({"name": "n", "goal": "g", "reasoning_effort": "max"}),
                "/reasoning_effort: ",
            ),
            (
                json!({"name": "n", "goal": "g", "participants": [{"id": "a", "kind": "robot", "role": "admin"}]}),
                "/participants/0/kind: ",
            ),
            (
                json!({"name": "n", "goal": "g", "sub_tasks": [{"task_id": "x", "sub_state": "sleeping"}]}),
                "/sub_tasks/0/sub_state: ",
            ),
        ];
        for (value, prefix) in cases {
            match TaskExtension::from_value(&value) {
                Err(DomainError::InvalidExtension(msg)) => {
                    assert!(msg.starts_with(prefix), "{value}: {msg}")
                }
                other => panic!("{value}: expected a refusal, got {other:?}"),
            }
        }
    }

    #[test]
    fn duplicate_participants_are_refused() {
        let value = json!({"name": "n", "goal": "g", "participants": [
            {"id": "a", "kind": "human", "role": "admin"},
            {"id": "a", "kind": "human", "role": "watcher"}]});
        let err = TaskExtension::from_value(&value).expect_err("duplicate");
        assert_eq!(
            err.to_string(),
            "invalid task extension: /participants: participant id \"a\" appears more than once"
        );
    }

    #[test]
    fn a_stored_plan_must_be_a_dag() {
        let value = json!({"name": "n", "goal": "g", "plan": {"steps": [
            {"id": "a", "name": "A", "depends_on": ["b"]},
            {"id": "b", "name": "B", "depends_on": ["a"]}]}});
        let err = TaskExtension::from_value(&value).expect_err("cycle");
        assert_eq!(
            err.to_string(),
            "invalid task extension: /plan: plan has a cycle: a -> b -> a"
        );
    }

    #[test]
    fn lifecycle_defaults_by_parent() {
        let mut ext = TaskExtension::new("n", "g");
        assert_eq!(ext.effective_lifecycle(), Lifecycle::Conversation);
        ext.parent_tasks.push(TaskRef::local("p"));
        assert_eq!(ext.effective_lifecycle(), Lifecycle::Delegated);
        ext.lifecycle = Some(Lifecycle::Conversation);
        assert_eq!(ext.effective_lifecycle(), Lifecycle::Conversation);
    }

    #[test]
    fn criteria_met_needs_at_least_one() {
        let mut ext = TaskExtension::new("n", "g");
        assert!(!ext.all_criteria_met());
        ext.acceptance_criteria.push(AcceptanceCriterion::new("a"));
        assert!(!ext.all_criteria_met());
        ext.acceptance_criteria[0].met = true;
        assert!(ext.all_criteria_met());
    }

    mod round_trip {
        use super::*;
        use proptest::collection::{btree_map, vec};
        use proptest::option;
        use proptest::prelude::*;

        fn text() -> impl Strategy<Value = String> {
            "\\PC{0,12}"
        }

        fn one_of(values: &'static [&'static str]) -> impl Strategy<Value = Value> {
            proptest::sample::select(values).prop_map(|v| json!(v))
        }

        /// Keys the schema does not name on nested objects, which it allows.
        fn extras() -> impl Strategy<Value = Map<String, Value>> {
            btree_map(
                "x-[a-z]{1,6}",
                prop_oneof![
                    text().prop_map(Value::from),
                    any::<i64>().prop_map(Value::from)
                ],
                0..2,
            )
            .prop_map(|m| m.into_iter().collect())
        }

        fn with_extras(base: Value, extra: Map<String, Value>) -> Value {
            let mut base = base;
            if let Value::Object(map) = &mut base {
                map.extend(extra);
            }
            base
        }

        fn entity_ref() -> impl Strategy<Value = Value> {
            let kinds = &[
                "prompt",
                "skill",
                "tool",
                "llm",
                "system_one",
                "hook",
                "channel",
                "renderer",
                "surface",
                "store",
                "agent",
                "command",
            ];
            (one_of(kinds), text(), option::of(text()), extras()).prop_map(
                |(kind, id, version, x)| {
                    with_extras(json!({"kind": kind, "id": id, "version": version}), x)
                },
            )
        }

        fn task_ref() -> impl Strategy<Value = Value> {
            let states = &["TASK_STATE_WORKING", "TASK_STATE_COMPLETED", "anything"];
            (
                text(),
                option::of(entity_ref()),
                option::of(one_of(states)),
                option::of(one_of(&["awaiting-next-message", "awaiting-answer"])),
                extras(),
            )
                .prop_map(|(id, agent, state, sub, x)| {
                    with_extras(
                        json!({"task_id": id, "agent": agent, "state": state, "sub_state": sub}),
                        x,
                    )
                })
        }

        fn participants() -> impl Strategy<Value = Value> {
            vec((one_of(&["human", "agent"]), one_of(&["assignee", "reporter", "watcher", "admin"]), text(), extras()), 0..4)
                .prop_map(|ps| {
                    // Ids are unique by construction (the semantic rule).
                    Value::Array(ps.into_iter().enumerate().map(|(i, (kind, role, name, x))| {
                        with_extras(json!({"id": format!("p{i}"), "kind": kind, "role": role, "display_name": name}), x)
                    }).collect())
                })
        }

        fn plan() -> impl Strategy<Value = Value> {
            vec((text(), text(), vec(any::<prop::sample::Index>(), 0..3), option::of(text()), vec(task_ref(), 0..2),
                 one_of(&["pending", "active", "done", "failed"]), extras()), 0..5)
                .prop_map(|steps| {
                    // Dependencies only point at earlier steps: always a DAG.
                    let steps: Vec<Value> = steps.into_iter().enumerate().map(|(i, (name, desc, deps, output, linked, state, x))| {
                        let deps: Vec<String> = if i == 0 { vec![] } else {
                            let mut d: Vec<String> = deps.iter().map(|ix| format!("s{}", ix.index(i))).collect();
                            d.sort();
                            d.dedup();
                            d
                        };
                        with_extras(json!({"id": format!("s{i}"), "name": name, "description": desc, "depends_on": deps,
                                           "output": output, "linked_tasks": linked, "state": state}), x)
                    }).collect();
                    json!({"steps": steps})
                })
        }

        fn extension() -> impl Strategy<Value = Value> {
            let criteria = vec((text(), any::<bool>(), extras()), 0..3).prop_map(|cs| {
                Value::Array(
                    cs.into_iter()
                        .map(|(t, met, x)| with_extras(json!({"text": t, "met": met}), x))
                        .collect(),
                )
            });
            (
                (
                    text(),
                    option::of(text()),
                    text(),
                    text(),
                    criteria,
                    participants(),
                ),
                (
                    vec(task_ref(), 0..2),
                    vec(task_ref(), 0..3),
                    option::of(plan()),
                    option::of(one_of(&["conversation", "delegated"])),
                    option::of(text()),
                    option::of(one_of(&["low", "medium", "high"])),
                ),
            )
                .prop_map(
                    |(
                        (name, ty, goal, desc, criteria, participants),
                        (parents, subs, plan, lifecycle, model, effort),
                    )| {
                        json!({"name": name, "type": ty, "goal": goal, "description": desc,
                           "acceptance_criteria": criteria, "participants": participants,
                           "parent_tasks": parents, "sub_tasks": subs, "plan": plan,
                           "lifecycle": lifecycle, "model": model, "reasoning_effort": effort})
                    },
                )
        }

        proptest! {
            #[test]
            fn any_valid_extension_round_trips_unchanged(value in extension()) {
                prop_assert!(schemas::validators().task_extension.is_valid(&value), "generator made an invalid object");
                let ext = TaskExtension::from_value(&value).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(ext.to_value(), value.clone());
                // And the typed value survives a second trip.
                prop_assert_eq!(TaskExtension::from_value(&ext.to_value()).ok(), Some(ext));
            }
        }
    }

    #[test]
    fn unresolved_sub_tasks_are_the_non_terminal_ones() {
        let mut ext = TaskExtension::new("n", "g");
        for (id, state) in [
            ("t.1", None),
            ("t.2", Some("TASK_STATE_WORKING")),
            ("t.3", Some("TASK_STATE_FAILED")),
            ("t.4", Some("TASK_STATE_COMPLETED")),
        ] {
            let mut r = TaskRef::local(id);
            r.state = state.map(str::to_owned);
            ext.sub_tasks.push(r);
        }
        let ids: Vec<_> = ext
            .unresolved_sub_tasks()
            .map(|r| r.task_id.as_str())
            .collect();
        assert_eq!(ids, ["t.1", "t.2"]);
    }
}
