//! Following a task live: every change of the extension (the plan, its steps, sub-task links
//! and their mirrored states) reaches streams and webhooks as a status update carrying the
//! new extension, without polling GetTask; a child is mirrored into its parent from its first
//! state; a sub-task that fails fails its step, and a new sub-task retries it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

fn agent_server(script: Value) -> Server {
    let setup = AgentSetup::new(script);
    let server = setup.builder().allow_private_webhooks().start();
    // Keep the scripts for the server's lifetime.
    std::mem::forget(setup);
    server
}

/// The extension a stream event (or webhook body) carries in a status update, if any.
fn carried(event: &Value) -> Option<&Value> {
    event["statusUpdate"]["metadata"].get(TASK_METADATA_KEY)
}

/// `name:state` of each step of a carried extension's plan (empty without a plan).
fn step_states(ext: &Value) -> Vec<String> {
    ext["plan"]["steps"]
        .as_array()
        .map(|steps| {
            steps
                .iter()
                .map(|s| {
                    format!(
                        "{}:{}",
                        s["id"].as_str().unwrap(),
                        s["state"].as_str().unwrap()
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Consecutive repeats dropped.
fn changes<T: PartialEq>(values: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for v in values {
        if out.last() != Some(&v) {
            out.push(v);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_sees_the_plan_appear_and_its_steps_complete() {
    let script = json!({"turns": [
        {"tool_calls": [{"name": "create_plan", "arguments": {"steps": [
            {"name": "Look", "description": "look at it"},
            {"name": "Decide", "description": "decide", "depends_on": ["Look"]}]}}]},
        {"tool_calls": [{"name": "complete_step", "arguments": {"step": "Look", "output": "seen"}}]},
        {"tool_calls": [{"name": "complete_step", "arguments": {"step": "Decide", "output": "decided"}}]},
        {"text": "all done"}
    ]});
    let server = agent_server(script);
    for binding in BOTH {
        let mut hook = Webhook::start().await;
        let api = server.client().api(binding);
        let mut req = send_req(text("alice", "Plan it"));
        req["configuration"] = json!({
            "taskPushNotificationConfig": {"url": hook.url("/live"), "token": "tok"}
        });
        let events = api
            .send_streaming(req)
            .await
            .expect("stream")
            .collect()
            .await;
        let last = events.last().expect("events");
        assert_eq!(
            event_kind(last),
            "status:TASK_STATE_INPUT_REQUIRED",
            "{binding:?}: {events:#?}"
        );
        // Each commit that changed the plan told it, in commit order.
        let plans: Vec<Vec<String>> = events.iter().filter_map(carried).map(step_states).collect();
        assert_eq!(
            changes(plans),
            [
                vec!["look:pending", "decide:pending"],
                vec!["look:done", "decide:pending"],
                vec!["look:done", "decide:done"],
            ],
            "{binding:?}: {events:#?}"
        );
        let outputs: Vec<Value> = events
            .iter()
            .filter_map(carried)
            .map(|ext| ext["plan"]["steps"][1]["output"].clone())
            .collect();
        assert_eq!(outputs.last(), Some(&json!("decided")));

        // The task's webhook got the same changes, in the same order.
        let deliveries = hook
            .until(|d| d.body["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED")
            .await;
        let pushed: Vec<Vec<String>> = deliveries
            .iter()
            .filter_map(|d| carried(&d.body))
            .map(step_states)
            .collect();
        assert_eq!(changes(pushed).len(), 3, "{binding:?}: {deliveries:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_is_mirrored_into_its_parent_from_its_first_state() {
    let script = json!({"tasks": {
        "Delegate": {"turns": [
            {"tool_calls": [{"name": "spawn_subtask", "arguments": {
                "name": "Slow child", "goal": "take your time"}}]},
            {"text": "spawned"}
        ]},
        "Ask bob": {"turns": [
            {"tool_calls": [{"name": "create_task_for_participant", "arguments": {
                "participant_id": "bob", "name": "Sign off", "goal": "Approve it"}}]},
            {"text": "asked bob"}
        ]},
        "Slow child": {"turns": [{"text": "finally", "delay_ms": 30000}]}
    }});
    let server = agent_server(script);
    let api = server.client().api(Binding::JsonRpc);

    // An agent's child works from the commit that creates it.
    let parent = api.send_ok(send_req(text("alice", "Delegate"))).await;
    assert_eq!(status_text(&parent), "spawned");
    let sub = &ext(&parent)["sub_tasks"][0];
    assert_eq!(sub["state"], "TASK_STATE_WORKING", "{parent}");
    assert_eq!(sub["sub_state"], Value::Null);

    // A participant's task waits for its assignee's answer from the start.
    let people = json!([{"id": "alice", "kind": "human", "role": "reporter"},
                        {"id": "bob", "kind": "human", "role": "watcher"}]);
    let asking = api
        .send_ok(new_task_req(
            "alice",
            "go",
            json!({"name": "Ask bob", "goal": "get bob's sign-off", "participants": people}),
        ))
        .await;
    assert_eq!(status_text(&asking), "asked bob");
    let sub = &ext(&asking)["sub_tasks"][0];
    assert_eq!(sub["state"], "TASK_STATE_INPUT_REQUIRED", "{asking}");
    assert_eq!(sub["sub_state"], "awaiting-answer");

    api.as_participant("alice")
        .cancel(id_of(&parent))
        .await
        .expect("cancel the slow family");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sub_task_fails_its_step_and_a_new_one_retries_it() {
    let script = json!({"tasks": {
        "Check it": {"turns": [
            {"tool_calls": [{"name": "create_plan", "arguments": {"steps": [
                {"name": "Check", "description": "check the ledger"}]}}]},
            {"tool_calls": [{"name": "spawn_subtask", "arguments": {
                "name": "Broken child", "goal": "fail", "step": "check"}}]},
            {"text": "waiting"},
            {"tool_calls": [{"name": "spawn_subtask", "arguments": {
                "name": "Good child", "goal": "succeed", "step": "check"}}]},
            {"text": "retrying"},
            {"tool_calls": [{"name": "complete_step", "arguments": {
                "step": "check", "output": "checked"}}]},
            {"text": "done"}
        ]},
        // No turns: its model fails the first call, which fails the child.
        "Broken child": {"turns": []},
        "Good child": {"turns": [{"text": "fine"}]}
    }});
    let server = agent_server(script);
    let mut hook = Webhook::start().await;
    let api = server.client().api(Binding::Rest);
    let mut req = send_req(text("alice", "Check it"));
    req["configuration"] = json!({
        "taskPushNotificationConfig": {"url": hook.url("/family"), "token": "tok"}
    });
    let task = api.send_ok(req).await;
    let id = id_of(&task).to_owned();

    let deliveries = hook
        .until(|d| status_text(&d.body["statusUpdate"]) == "done")
        .await;
    let extensions: Vec<&Value> = deliveries.iter().filter_map(|d| carried(&d.body)).collect();
    assert_eq!(
        changes(extensions.iter().map(|e| step_states(e))),
        [
            vec!["check:pending"],
            vec!["check:active"],
            vec!["check:failed"],
            vec!["check:active"],
            vec!["check:done"],
        ],
        "{deliveries:#?}"
    );
    let failed = extensions
        .iter()
        .find(|e| step_states(e) == ["check:failed"])
        .unwrap();
    assert_eq!(
        failed["plan"]["steps"][0]["linked_tasks"][0]["state"],
        "TASK_STATE_FAILED"
    );
    assert_eq!(failed["sub_tasks"][0]["state"], "TASK_STATE_FAILED");

    // The parent's agent was told, in the history it reads.
    let history = history_texts(
        &api.as_participant("alice")
            .get_task(&id, None)
            .await
            .unwrap(),
    );
    assert!(
        history
            .iter()
            .any(|t| t.starts_with(&format!("Sub-task {id}.1 is FAILED"))),
        "{history:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_and_roles_changed_on_a_task_are_told_to_its_followers() {
    let script = json!({"turns": [
        {"text": "ready"},
        {"tool_calls": [{"name": "set_participant_role", "arguments": {
            "participant_id": "bob", "role": "admin"}}]},
        {"text": "bob is an admin"}
    ]});
    let server = agent_server(script);
    let api = server.client().api(Binding::JsonRpc);
    let people = json!([{"id": "alice", "kind": "human", "role": "admin"},
                        {"id": "bob", "kind": "human", "role": "watcher"}]);
    let task = api
        .send_ok(new_task_req(
            "alice",
            "hello",
            json!({"name": "Team", "goal": "work together", "participants": people}),
        ))
        .await;
    assert_eq!(status_text(&task), "ready");
    let mut followed = api
        .as_participant("bob")
        .subscribe(id_of(&task))
        .await
        .expect("subscribe");
    followed.next().await.expect("the task");

    // A command's answer carries the new setting.
    let effort = api.follow_up(&task, "alice", "/effort high").await;
    assert_eq!(ext(&effort)["reasoning_effort"], "high");
    let told = followed.next().await.expect("the command's answer");
    assert_eq!(
        carried(&told).map(|e| e["reasoning_effort"].clone()),
        Some(json!("high")),
        "{told}"
    );

    // (The stream ended with that answer: the task still waits. Follow it again.)
    assert!(followed.next().await.is_none());
    let mut followed = api
        .as_participant("bob")
        .subscribe(id_of(&task))
        .await
        .expect("subscribe");
    followed.next().await.expect("the task");
    // A role the agent changes mid-run reaches the follower before the turn ends.
    api.follow_up(&task, "alice", "make bob an admin").await;
    let mut events = Vec::new();
    while let Some(event) = followed.next().await {
        let done = event_kind(&event) == "status:TASK_STATE_INPUT_REQUIRED";
        events.push(event);
        if done {
            break;
        }
    }
    let roles: Vec<Value> = events
        .iter()
        .filter_map(carried)
        .map(|e| participant_role(e, "bob"))
        .collect();
    assert_eq!(roles, [json!("admin")], "{events:#?}");
    assert_eq!(
        event_kind(events.iter().find(|e| carried(e).is_some()).unwrap()),
        "status:TASK_STATE_WORKING",
        "told while the run works"
    );
}

fn participant_role(ext: &Value, id: &str) -> Value {
    ext["participants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == id)
        .map(|p| p["role"].clone())
        .unwrap_or(Value::Null)
}
