//! Benchmarks of the core's hot paths (figures in docs/performance.md):
//! - validating a stored task whose plan has 10,000 steps and which has 1,000 participants
//!   (schema check, typed read, unique participants, DAG check), as every read of a task does;
//! - one intrinsic call end to end: validate the arguments against the tool's schema, type
//!   them, apply the effect to the task.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use task_core::extension::TaskExtension;
use task_core::skills::SkillLibrary;
use task_core::task::{AgentState, WorkingTask};
use task_core::tools::{ToolEnv, execute, intrinsics};

/// A plan of `steps` steps where each step depends on up to three earlier ones (a wide DAG,
/// the worst case for the cycle check), and `participants` participants.
fn big_task(steps: usize, participants: usize) -> Value {
    let steps: Vec<Value> = (0..steps)
        .map(|i| {
            let deps: Vec<String> = [1, 7, 31].iter().filter(|&&d| i >= d).map(|d| format!("step-{}", i - d)).collect();
            json!({"id": format!("step-{i}"), "name": format!("Step {i}"), "description": "Do the thing",
                   "depends_on": deps, "output": null, "linked_tasks": [], "state": "pending"})
        })
        .collect();
    let roles = ["assignee", "reporter", "watcher", "admin"];
    let participants: Vec<Value> = (0..participants)
        .map(|i| json!({"id": format!("user-{i}"), "kind": "human", "role": roles[i % 4], "display_name": format!("User {i}")}))
        .collect();
    json!({"name": "Big", "type": null, "goal": "A task with a big plan", "description": "",
           "acceptance_criteria": [{"text": "All steps done", "met": false}],
           "participants": participants, "parent_tasks": [], "sub_tasks": [],
           "plan": {"steps": steps}, "lifecycle": "conversation", "model": null, "reasoning_effort": null})
}

fn validate_big_task(c: &mut Criterion) {
    let value = big_task(10_000, 1_000);
    // Fail loudly if the fixture itself is refused: a benchmark of an error path is no benchmark.
    if let Err(err) = TaskExtension::from_value(&value) {
        panic!("fixture refused: {err}");
    }
    c.bench_function("validate task (10,000 steps, 1,000 participants)", |b| {
        b.iter(|| TaskExtension::from_value(black_box(&value)))
    });
    // The parts of it, to see where the time goes.
    let schema = &task_core::schemas::validators().task_extension;
    c.bench_function("  of which: schema check", |b| {
        b.iter(|| schema.is_valid(black_box(&value)))
    });
    c.bench_function("  of which: typed read", |b| {
        b.iter(|| <TaskExtension as serde::Deserialize>::deserialize(black_box(&value)))
    });
    let typed: TaskExtension =
        serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{e}"));
    c.bench_function("  of which: unique participants and DAG check", |b| {
        b.iter(|| black_box(&typed).check_semantics())
    });
}

fn intrinsic_call(c: &mut Criterion) {
    let skills = SkillLibrary::empty();
    let env = ToolEnv {
        agent_id: "agent",
        skills: &skills,
        remote_agents: &[],
    };
    let small = {
        let mut value = big_task(20, 4);
        value["participants"][0]["id"] = json!("agent");
        TaskExtension::from_value(&value).unwrap_or_else(|e| panic!("fixture refused: {e}"))
    };
    let task = WorkingTask {
        id: "t-1".into(),
        context_id: "c-1".into(),
        extension: small,
        agent: AgentState::default(),
    };
    let complete_step = json!({"step": "Step 0", "output": "It is done."});
    let create_plan = json!({"steps": [
        {"name": "Gather facts", "description": "Read the order"},
        {"name": "Check ledger", "description": "Look it up", "depends_on": ["Gather facts"]},
        {"name": "Decide", "description": "Refund or not", "depends_on": ["Gather facts", "check-ledger"]}]});
    for (name, tool, args) in [
        (
            "intrinsic call: complete_step (validate args, apply)",
            "complete_step",
            &complete_step,
        ),
        (
            "intrinsic call: create_plan, 3 steps (validate args, apply)",
            "create_plan",
            &create_plan,
        ),
    ] {
        c.bench_function(name, |b| {
            b.iter(|| {
                let call = intrinsics()
                    .invoke(tool, black_box(args))
                    .map_err(|e| e.to_string());
                call.map(|call| execute(black_box(&task), Some("agent"), &call, &env))
            })
        });
    }
}

criterion_group!(benches, validate_big_task, intrinsic_call);
criterion_main!(benches);
