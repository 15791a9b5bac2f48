use serde_json::{Value, json};

use super::*;
use crate::extension::StepState;
use crate::task::AgentState;
use crate::test_support::roles;
use crate::tools::intrinsics;

struct Fixture {
    skills: SkillLibrary,
    remote_agents: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let skill = dir.path().join("orders-support");
        std::fs::create_dir_all(skill.join("references")).expect("mkdir");
        std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: orders-support\ndescription: Handle order problems.\n---\n# Orders\nCheck the ledger first.\n",
        )
        .expect("write");
        std::fs::write(
            skill.join("references/policy.md"),
            "Refunds within 30 days.",
        )
        .expect("write");
        let (skills, skipped) = SkillLibrary::load_dir(dir.path()).expect("loads");
        assert!(skipped.is_empty(), "{skipped:?}");
        Self {
            skills,
            remote_agents: vec!["billing".to_owned()],
            _dir: dir,
        }
    }

    fn env(&self) -> ToolEnv<'_> {
        ToolEnv {
            agent_id: "agent",
            skills: &self.skills,
            remote_agents: &self.remote_agents,
        }
    }

    /// Validates and executes, as the runtime does.
    fn call(
        &self,
        task: &WorkingTask,
        actor: Option<&str>,
        tool: &str,
        args: Value,
    ) -> ToolOutcome {
        match intrinsics().invoke(tool, &args) {
            Ok(call) => execute(task, actor, &call, &self.env()),
            Err(failure) => panic!("{tool} {args}: {failure}"),
        }
    }
}

fn task() -> WorkingTask {
    let extension = TaskExtension::from_value(&json!({
        "name": "Refund order 48213", "goal": "Refund order 48213", "lifecycle": "conversation",
        "participants": [
            {"id": "alice", "kind": "human", "role": "reporter"},
            {"id": "ops", "kind": "human", "role": "admin"},
            {"id": "agent", "kind": "agent", "role": "assignee"},
            {"id": "wes", "kind": "human", "role": "watcher"}]
    }))
    .expect("valid");
    WorkingTask {
        id: "t-1".into(),
        context_id: "ctx-1".into(),
        extension,
        agent: AgentState::default(),
    }
}

/// Applies a successful call and returns the next task.
fn then(outcome: ToolOutcome) -> WorkingTask {
    assert!(outcome.result.is_ok(), "{}", outcome.text());
    outcome.task.expect("the call changes the task")
}

fn failed(outcome: &ToolOutcome, text: &str) {
    assert_eq!(outcome.text(), text);
    assert_eq!(
        (outcome.task.as_ref(), outcome.effects.len()),
        (None, 0),
        "a failed call changes nothing"
    );
}

fn pinned_plan() -> Value {
    json!({"steps": [{"name": "Gather facts", "description": "Read the order"},
                     {"name": "Decide", "description": "Refund or not", "depends_on": ["Gather facts"]}]})
}

#[test]
fn create_plan_and_complete_step_as_pinned_upstream() {
    let f = Fixture::new();
    let out = f.call(&task(), None, "create_plan", pinned_plan());
    assert_eq!(out.text(), "plan attached with 2 steps");
    let t = then(out);
    let out = f.call(
        &t,
        None,
        "complete_step",
        json!({"step": "Gather facts", "output": "Order 42 was late"}),
    );
    assert_eq!(out.text(), "step gather-facts done");
    let t = then(out);
    assert_eq!(
        t.extension.to_value()["plan"],
        json!({"steps": [
            {"id": "gather-facts", "name": "Gather facts", "description": "Read the order", "depends_on": [],
             "output": "Order 42 was late", "linked_tasks": [], "state": "done"},
            {"id": "decide", "name": "Decide", "description": "Refund or not", "depends_on": ["gather-facts"],
             "output": null, "linked_tasks": [], "state": "pending"}]})
    );
}

#[test]
fn plan_refusals() {
    let f = Fixture::new();
    let cycle = json!({"steps": [{"name": "A", "description": "", "depends_on": ["B"]},
                                 {"name": "B", "description": "", "depends_on": ["A"]}]});
    let (fresh, planned) = (
        task(),
        then(f.call(&task(), None, "create_plan", pinned_plan())),
    );
    for (t, tool, args, text) in [
        (
            &fresh,
            "create_plan",
            cycle,
            "[plan.cycle] plan has a cycle: a -> b -> a",
        ),
        (
            &fresh,
            "complete_step",
            json!({"step": "a", "output": "x"}),
            "[plan.missing] no plan; call create_plan first",
        ),
        (
            &planned,
            "complete_step",
            json!({"step": "Zed", "output": "x"}),
            "[plan.unknown_step] no such step: Zed",
        ),
        (
            &planned,
            "complete_step",
            json!({"step": "decide", "output": "x"}),
            "[plan.not_ready] step decide cannot complete before the steps it depends on are done: gather-facts",
        ),
    ] {
        failed(&f.call(t, None, tool, args), text);
    }
}

#[test]
fn a_revised_plan_keeps_the_progress_of_steps_it_keeps() {
    let f = Fixture::new();
    let t = then(f.call(&task(), None, "create_plan", pinned_plan()));
    let t = then(f.call(
        &t,
        None,
        "complete_step",
        json!({"step": "gather-facts", "output": "late"}),
    ));
    let revised = json!({"steps": [{"name": "Gather facts", "description": "Read it again"},
                                   {"name": "Ask finance", "description": "", "depends_on": ["gather-facts"]}]});
    let t = then(f.call(&t, None, "create_plan", revised));
    let plan = t.extension.plan.expect("plan");
    assert_eq!(
        (plan.steps[0].state, plan.steps[0].output.as_deref()),
        (StepState::Done, Some("late"))
    );
    assert_eq!(plan.steps[0].description, "Read it again");
    assert_eq!(plan.steps[1].state, StepState::Pending);
}

#[test]
fn spawn_subtask_creates_and_links_a_delegated_child() {
    let f = Fixture::new();
    let t = then(f.call(&task(), None, "create_plan", pinned_plan()));
    let out = f.call(&t, Some("alice"), "spawn_subtask",
        json!({"name": "Check", "goal": "Check the ledger", "acceptance_criteria": ["Ledger read"], "step": "gather-facts"}));
    assert_eq!(out.text(), "sub-task Check spawned as t-1.1");
    let [ToolEffect::CreateChild(child)] = out.effects.as_slice() else {
        panic!("{:?}", out.effects)
    };
    assert_eq!(child.id, "t-1.1");
    assert_eq!(child.kind, ChildKind::Agent { remote_agent: None });
    let ext = &child.extension;
    assert_eq!(
        (ext.name.as_str(), ext.goal.as_str()),
        ("Check", "Check the ledger")
    );
    assert_eq!(ext.effective_lifecycle(), Lifecycle::Delegated);
    assert_eq!(ext.lifecycle, Some(Lifecycle::Delegated));
    assert_eq!(ext.parent_tasks, vec![TaskRef::local("t-1")]);
    assert_eq!(
        ext.participants, t.extension.participants,
        "participants are inherited"
    );
    assert_eq!(
        ext.acceptance_criteria,
        vec![AcceptanceCriterion::new("Ledger read")]
    );
    TaskExtension::from_value(&ext.to_value()).expect("the child's extension is valid");

    let t = then(out);
    let link = json!({"task_id": "t-1.1", "agent": null, "state": "TASK_STATE_SUBMITTED", "sub_state": null});
    assert_eq!(t.extension.to_value()["sub_tasks"], json!([link]));
    let step = &t.extension.plan.as_ref().expect("plan").steps[0];
    assert_eq!(
        serde_json::to_value(&step.linked_tasks).expect("json"),
        json!([link])
    );
    assert_eq!(
        step.state,
        StepState::Active,
        "work on the step has started"
    );

    let second = f.call(
        &t,
        None,
        "spawn_subtask",
        json!({"name": "Again", "goal": "g", "step": "decide"}),
    );
    assert_eq!(second.text(), "sub-task Again spawned as t-1.2");
    let t2 = then(second);
    assert_eq!(
        t2.extension.plan.expect("plan").steps[1].state,
        StepState::Pending,
        "decide is not ready yet"
    );
}

#[test]
fn linking_a_new_sub_task_retries_a_failed_step() {
    let f = Fixture::new();
    let mut t = then(f.call(&task(), None, "create_plan", pinned_plan()));
    t.extension.plan.as_mut().expect("plan").steps[0].state = StepState::Failed;
    let out = f.call(
        &t,
        None,
        "spawn_subtask",
        json!({"name": "Retry", "goal": "g", "step": "gather-facts"}),
    );
    assert_eq!(
        then(out).extension.plan.expect("plan").steps[0].state,
        StepState::Active
    );
}

#[test]
fn spawn_subtask_on_a_remote_agent() {
    let f = Fixture::new();
    let out = f.call(
        &task(),
        None,
        "spawn_subtask",
        json!({"name": "Bill", "goal": "Bill it", "agent": "billing"}),
    );
    let [ToolEffect::CreateChild(child)] = out.effects.as_slice() else {
        panic!("{:?}", out.effects)
    };
    assert_eq!(
        child.kind,
        ChildKind::Agent {
            remote_agent: Some("billing".into())
        }
    );
    let t = then(out);
    assert_eq!(
        t.extension.to_value()["sub_tasks"][0]["agent"],
        json!({"kind": "agent", "id": "billing", "version": null})
    );
}

#[test]
fn spawn_subtask_refusals_create_nothing() {
    let f = Fixture::new();
    let (fresh, planned) = (
        task(),
        then(f.call(&task(), None, "create_plan", pinned_plan())),
    );
    for (t, args, text) in [
        (
            &fresh,
            json!({"name": "x", "goal": "g", "agent": "nobody"}),
            "[agent.not_found] no registered remote agent: nobody",
        ),
        (
            &fresh,
            json!({"name": "x", "goal": "g", "step": "a"}),
            "[plan.missing] no plan; call create_plan first",
        ),
        (
            &planned,
            json!({"name": "x", "goal": "g", "step": "zzz"}),
            "[plan.unknown_step] no such step: zzz",
        ),
    ] {
        failed(&f.call(t, None, "spawn_subtask", args), text);
    }
}

#[test]
fn a_task_without_participants_gives_its_child_the_agent() {
    let f = Fixture::new();
    let mut t = task();
    t.extension.participants.clear();
    let out = f.call(&t, None, "spawn_subtask", json!({"name": "x", "goal": "g"}));
    let [ToolEffect::CreateChild(child)] = out.effects.as_slice() else {
        panic!()
    };
    assert_eq!(
        child.extension.participants,
        vec![Participant::new(
            "agent",
            ParticipantKind::Agent,
            Role::Assignee
        )]
    );
}

#[test]
fn ask_participant_opens_a_help_request() {
    let f = Fixture::new();
    failed(
        &f.call(
            &task(),
            None,
            "ask_participant",
            json!({"participant_id": "mallory", "question": "?"}),
        ),
        "[channel.not_a_member] no such participant on this task",
    );
    let out = f.call(&task(), None, "ask_participant",
        json!({"participant_id": "alice", "question": "Full or partial refund?", "options": ["full", "partial"]}));
    assert_eq!(out.text(), "asked alice; waiting for the reply");
    let expected = HelpRequest {
        participant_id: "alice".into(),
        question: "Full or partial refund?".into(),
        options: vec!["full".into(), "partial".into()],
        message_id: "t-1:help:1".into(),
        comments: Vec::new(),
        dropped_comments: 0,
    };
    assert_eq!(
        out.effects,
        vec![ToolEffect::HelpRequested(expected.clone())]
    );
    let t = then(out);
    assert_eq!(t.agent.pending_help, Some(expected));
    let again = then(f.call(
        &t,
        None,
        "ask_participant",
        json!({"participant_id": "ops", "question": "Approve?"}),
    ));
    assert_eq!(
        again.agent.pending_help.expect("open").message_id,
        "t-1:help:2",
        "the last request wins"
    );
}

#[test]
fn create_task_for_participant_makes_the_target_the_assignee() {
    let f = Fixture::new();
    failed(
        &f.call(
            &task(),
            None,
            "create_task_for_participant",
            json!({"participant_id": "mallory", "name": "n", "goal": "g"}),
        ),
        "[channel.not_a_member] no such participant on this task",
    );
    let out = f.call(&task(), None, "create_task_for_participant", json!({"participant_id": "alice",
        "name": "Approve the refund", "goal": "Approve the refund of order 48213 in the finance system"}));
    assert_eq!(out.text(), "task for alice created as t-1.1");
    let [ToolEffect::CreateChild(child)] = out.effects.as_slice() else {
        panic!("{:?}", out.effects)
    };
    assert_eq!(
        child.kind,
        ChildKind::Participant {
            assignee: "alice".into()
        }
    );
    assert_eq!(
        roles(&child.extension),
        [
            ("alice", Role::Assignee),
            ("ops", Role::Admin),
            ("agent", Role::Watcher),
            ("wes", Role::Watcher)
        ]
    );
    assert_eq!(
        child.extension.goal,
        "Approve the refund of order 48213 in the finance system"
    );
    assert_eq!(then(out).extension.sub_tasks[0].task_id, "t-1.1");
}

#[test]
fn set_participant_role_is_for_admins() {
    let f = Fixture::new();
    let args = json!({"participant_id": "alice", "role": "admin"});
    for actor in [None, Some("alice"), Some("agent"), Some("mallory")] {
        failed(
            &f.call(&task(), actor, "set_participant_role", args.clone()),
            "[channel.not_a_member] only an admin may change roles",
        );
    }
    failed(
        &f.call(
            &task(),
            Some("ops"),
            "set_participant_role",
            json!({"participant_id": "bob", "role": "admin"}),
        ),
        "[channel.not_a_member] no such participant on this task",
    );
    let out = f.call(&task(), Some("ops"), "set_participant_role", args);
    assert_eq!(out.text(), "alice is now admin");
    assert_eq!(
        out.effects,
        vec![ToolEffect::RoleChanged {
            actor: "ops".into(),
            participant_id: "alice".into(),
            from: Role::Reporter,
            to: Role::Admin
        }]
    );
    let t = then(out);
    assert_eq!(
        t.extension.participant("alice").expect("there").role,
        Role::Admin
    );
    let same = f.call(
        &t,
        Some("ops"),
        "set_participant_role",
        json!({"participant_id": "alice", "role": "admin"}),
    );
    assert_eq!(
        (
            same.text().as_str(),
            same.task.is_none(),
            same.effects.is_empty()
        ),
        ("alice is now admin", true, true)
    );
    // The last admin cannot be demoted (here by itself); with another admin, it can.
    failed(
        &f.call(
            &task(),
            Some("ops"),
            "set_participant_role",
            json!({"participant_id": "ops", "role": "watcher"}),
        ),
        "[participants.last_admin] the last admin cannot be removed or demoted",
    );
    let out = f.call(
        &t,
        Some("ops"),
        "set_participant_role",
        json!({"participant_id": "ops", "role": "watcher"}),
    );
    assert_eq!(out.text(), "ops is now watcher");
}

#[test]
fn the_skill_tools() {
    let f = Fixture::new();
    let t = task();
    assert_eq!(
        f.call(&t, None, "list_skills", json!({})).text(),
        "- orders-support: Handle order problems."
    );
    failed(
        &f.call(&t, None, "load_skill", json!({"name": "nope"})),
        "[skill.invalid] no such skill",
    );
    failed(
        &f.call(
            &t,
            None,
            "list_skill_resources",
            json!({"name": "orders-support"}),
        ),
        "[skill.invalid] skill is not loaded; call load_skill first",
    );
    failed(
        &f.call(
            &t,
            None,
            "load_skill_resource",
            json!({"name": "orders-support", "kind": "references", "resource": "policy.md"}),
        ),
        "[skill.invalid] skill is not loaded; call load_skill first",
    );
    failed(
        &f.call(&t, None, "unload_skill", json!({"name": "orders-support"})),
        "[skill.invalid] skill is not loaded; call load_skill first",
    );

    let out = f.call(&t, None, "load_skill", json!({"name": "orders-support"}));
    assert_eq!(out.text(), "# Orders\nCheck the ledger first.\n");
    let t = then(out);
    assert!(t.agent.loaded_skills.contains("orders-support"));
    let again = f.call(&t, None, "load_skill", json!({"name": "orders-support"}));
    assert!(
        again.result.is_ok() && again.task.is_none(),
        "loading twice changes nothing"
    );
    assert_eq!(
        f.call(
            &t,
            None,
            "list_skill_resources",
            json!({"name": "orders-support"})
        )
        .text(),
        "- references/policy.md"
    );
    let resource = json!({"name": "orders-support", "kind": "references", "resource": "policy.md"});
    assert_eq!(
        f.call(&t, None, "load_skill_resource", resource).text(),
        "Refunds within 30 days."
    );
    failed(
        &f.call(
            &t,
            None,
            "load_skill_resource",
            json!({"name": "orders-support", "kind": "references", "resource": "../SKILL.md"}),
        ),
        "[skill.invalid] no such skill resource",
    );
    let out = f.call(&t, None, "unload_skill", json!({"name": "orders-support"}));
    assert_eq!(out.text(), "unloaded orders-support");
    assert!(then(out).agent.loaded_skills.is_empty());
}

fn pinned_ui() -> Value {
    json!({"messages": [
        {"version": "v0.9.1", "createSurface": {"surfaceId": "resolution",
            "catalogId": "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"}},
        {"version": "v0.9.1", "updateComponents": {"surfaceId": "resolution", "components": [
            {"id": "root", "component": "Column", "children": ["q", "pick", "ok"]},
            {"id": "q", "component": "Text", "text": "Proposed resolution"},
            {"id": "pick", "component": "ChoicePicker", "label": "Resolution",
             "options": [{"label": "Ship replacement now", "value": "replace"},
                         {"label": "Refund after photo", "value": "refund"}], "value": {"path": "/choice"}},
            {"id": "ok", "component": "Button", "child": "ok-label",
             "action": {"event": {"name": "confirm", "context": {"choice": {"path": "/choice"}}}}},
            {"id": "ok-label", "component": "Text", "text": "Confirm"}]}}]})
}

#[test]
fn emit_ui_publishes_one_artifact_and_remembers_surfaces() {
    let f = Fixture::new();
    let out = f.call(&task(), None, "emit_ui", pinned_ui());
    assert_eq!(out.text(), "2 UI message(s) emitted");
    let [ToolEffect::Artifact(artifact)] = out.effects.as_slice() else {
        panic!("{:?}", out.effects)
    };
    assert_eq!(
        (artifact.artifact_id.as_str(), artifact.name.as_deref()),
        ("a2ui:1", Some("a2ui"))
    );
    assert_eq!(artifact.parts.len(), 2);
    assert!(
        artifact
            .parts
            .iter()
            .all(|p| p.media_type.as_deref() == Some("application/a2ui+json"))
    );
    assert_eq!(
        serde_json::to_value(&artifact.parts[0]).expect("json")["data"],
        pinned_ui()["messages"][0]
    );
    let t = then(out);
    assert_eq!(t.agent.ui_emits, 1);
    let action = json!({"version": "v0.9.1", "action": {"name": "confirm", "surfaceId": "resolution",
        "sourceComponentId": "ok", "timestamp": "2026-10-09T12:00:00Z", "context": {"choice": "replace"}}});
    assert!(t.agent.surfaces.check_client_message(&action).is_ok());

    let update = json!({"messages": [{"version": "v0.9.1", "updateDataModel": {"surfaceId": "resolution",
        "path": "/choice", "value": "refund"}}]});
    let out = f.call(&t, None, "emit_ui", update);
    let [ToolEffect::Artifact(second)] = out.effects.as_slice() else {
        panic!("{:?}", out.effects)
    };
    assert_eq!(second.artifact_id, "a2ui:2");
}

#[test]
fn emit_ui_refuses_invalid_messages_whole() {
    let f = Fixture::new();
    let out = f.call(
        &task(),
        None,
        "emit_ui",
        json!({"messages": [
        {"version": "v0.9.1", "updateComponents": {"surfaceId": "nowhere", "components": [
            {"id": "root", "component": "Text", "text": "hi"}]}}]}),
    );
    assert!(out.text().starts_with("[a2ui.invalid] "), "{}", out.text());
    assert_eq!((out.task, out.effects.len()), (None, 0));
}
