//! The agent runtime end to end through the A2A API of the real server, with the scripted
//! model provider: every intrinsic, the lifecycle paths (a conversation to INPUT_REQUIRED and
//! on to COMPLETED, a parent waiting for its sub-task, FAILED at the turn limit, CANCELED
//! cascading to unfinished children), help requests answered by the right and the wrong
//! participant. Where a result is only in the agent's transcript, the test stops the server
//! and reads the store it left.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};
use store_embedded::EmbeddedStore;
use task_store::TaskStore;

fn agent_server(script: Value, extra: &[&str]) -> Server {
    let setup = AgentSetup::new(script);
    let mut builder = setup.builder();
    for arg in extra {
        builder = builder.arg(*arg);
    }
    let server = builder.start();
    // Keep the scripts for the server's lifetime.
    std::mem::forget(setup);
    server
}

/// A new task created by alice with an envelope (name, goal, criteria, participants) and a
/// text that starts the agent.
fn new_task(name: &str, criteria: Value, participants: Value, text: &str) -> Value {
    let envelope = json!({"name": name, "goal": format!("the goal of {name}"),
                          "acceptance_criteria": criteria, "participants": participants});
    new_task_req("alice", text, envelope)
}

/// Alice (as `role`) and bob, a watcher.
fn alice_and_bob_watching(role: &str) -> Value {
    json!([{"id": "alice", "kind": "human", "role": role},
           {"id": "bob", "kind": "human", "role": "watcher"}])
}

fn alice_only() -> Value {
    json!([{"id": "alice", "kind": "human", "role": "reporter"}])
}

/// The transcript the agent left for task `id`, read from the stopped server's store.
async fn transcript(mut server: Server, id: &str) -> Vec<Value> {
    assert!(server.terminate().success());
    let store = EmbeddedStore::open(server.dir().join("tasks.redb")).unwrap();
    store.transcript(id, 0).await.unwrap()
}

fn tool_results(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e["turn"]["role"] == "tool_results")
        .flat_map(|e| e["turn"]["results"].as_array().unwrap().clone())
        .map(|r| r["content"].as_str().unwrap().to_owned())
        .collect()
}

/// Each `(n, part)`: the n-th tool result holds `part` (the result is shown when not).
fn assert_results_contain(results: &[String], expected: &[(usize, &str)]) {
    for &(n, part) in expected {
        let result = &results[n];
        assert!(
            result.contains(part),
            "tool result {n} lacks {part:?}: {result}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_is_made_its_steps_completed_and_bad_calls_reported() {
    let script = json!({"turns": [
        {"tool_calls": [{"name": "create_plan", "arguments": {"steps": [
            {"name": "Look up the order", "description": "find order 48213"},
            {"name": "Refund", "description": "pay back", "depends_on": ["look-up-the-order"]}]}}]},
        {"tool_calls": [
            {"name": "complete_step", "arguments": {"step": "refund", "output": "too early"}},
            {"name": "complete_step", "arguments": {"step": "look-up-the-order", "output": "found, 42 EUR"}},
            {"name": "rm_rf", "arguments": {}},
            {"name": "complete_step", "arguments": {"step": 7}}]},
        {"text": "Looked the order up; the refund is next."}
    ]});
    let server = agent_server(script, &[]);
    let api = server.client().api(Binding::JsonRpc);
    let task = api
        .send_ok(new_task(
            "Refund 48213",
            json!([]),
            alice_only(),
            "please refund",
        ))
        .await;
    let id = id_of(&task).to_owned();
    assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED", "{task}");
    assert_eq!(
        status_text(&task),
        "Looked the order up; the refund is next."
    );
    let steps = &ext(&task)["plan"]["steps"];
    assert_eq!(steps[0]["state"], "done");
    assert_eq!(steps[0]["output"], "found, 42 EUR");
    assert_eq!(
        steps[1]["state"], "pending",
        "its dependency was not done when asked"
    );

    let entries = transcript(server, &id).await;
    let results = tool_results(&entries);
    assert_eq!(results.len(), 5, "{results:?}");
    assert_results_contain(
        &results,
        &[
            (0, "plan"),
            (1, "[plan.not_ready]"),
            (2, "step look-up-the-order done"),
            (3, "[tool.not_found] no such tool: rm_rf"),
            (4, "[tool.invalid_arguments]"),
        ],
    );
    assert!(
        results
            .iter()
            .all(|r| r.starts_with("[tool result: untrusted content"))
    );
    // The conversation as the model saw it: the message, three model turns, two results.
    let roles: Vec<&str> = entries
        .iter()
        .map(|e| e["turn"]["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool_results",
            "assistant",
            "tool_results",
            "assistant"
        ]
    );
    assert_eq!(entries[0]["turn"]["text"], "please refund");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_waits_for_its_sub_task_and_completes_when_its_criteria_are_met() {
    let script = json!({"tasks": {
        "Parent": {"turns": [
            {"tool_calls": [{"name": "spawn_subtask", "arguments": {
                "name": "Child", "goal": "check the ledger", "acceptance_criteria": ["balanced"]}}]},
            {"text": "waiting for the child"},
            {"text": "the child is done; so am I"}
        ]},
        "Child": {"turns": [{"text": "the ledger balances"}]}
    }});
    let server = agent_server(script, &[]);
    let api = server.client().api(Binding::Rest);
    let alice = api.as_participant("alice");
    let task = api
        .send(new_task(
            "Parent",
            json!([{"text": "the ledger is checked", "met": true}]),
            alice_only(),
            "check it",
        ))
        .await;
    // The turn ended with the criteria met but the child unresolved: the parent works on.
    let task = task.expect("send");
    let id = id_of(&task).to_owned();
    let child_id = format!("{id}.1");
    let done = poll_state(&alice, &id, "TASK_STATE_COMPLETED").await;
    assert_eq!(status_text(&done), "the child is done; so am I");
    let sub = &ext(&done)["sub_tasks"][0];
    assert_eq!(sub["task_id"], json!(child_id));
    assert_eq!(sub["state"], "TASK_STATE_COMPLETED", "mirrored");
    let history = history_texts(&alice.get_task(&id, None).await.unwrap());
    assert!(
        history
            .iter()
            .any(|t| t == &format!("Sub-task {child_id} is COMPLETED: the ledger balances")),
        "{history:?}"
    );
    let child = alice
        .get_task(&child_id, None)
        .await
        .expect("the child is readable");
    assert_eq!(state(&child), "TASK_STATE_COMPLETED");
    assert_eq!(ext(&child)["lifecycle"], "delegated");
    assert_eq!(ext(&child)["parent_tasks"][0]["task_id"], json!(id));
    assert_eq!(status_text(&child), "the ledger balances");
    assert_eq!(
        history_texts(&child)[0],
        "check the ledger\n\nAcceptance criteria:\n- balanced"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_help_request_waits_for_the_asked_participant_only() {
    let script = json!({"turns": [
        {"tool_calls": [{"name": "ask_participant", "arguments": {
            "participant_id": "bob", "question": "Full or partial refund?", "options": ["full", "partial"]}}]},
        {"text": "Refunding in full."}
    ]});
    let server = agent_server(script, &[]);
    let api = server.client().api(Binding::JsonRpc);
    let people = alice_and_bob_watching("reporter");
    let task = api
        .send_ok(new_task("Refund", json!([]), people, "refund 48213"))
        .await;
    let id = id_of(&task).to_owned();
    assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED");
    let help = &task["status"]["message"];
    assert_eq!(
        help["parts"][0]["text"],
        "Full or partial refund?\nOptions: full, partial"
    );
    assert_eq!(
        help["parts"][1]["mediaType"],
        "application/vnd.tiny-harness.channel+json"
    );
    assert_eq!(help["parts"][1]["data"]["kind"], "help_request");
    assert_eq!(help["parts"][1]["data"]["channel_id"], json!(id));

    // Alice is not the one asked: recorded, the task still waits for bob; her stream is
    // answered with a notice that says so.
    let mut stream = api
        .send_streaming(send_req(on(text("alice", "hurry up"), &task)))
        .await
        .expect("stream");
    let mut notice = None;
    while let Some(event) = stream.next().await {
        notice = Some(event);
    }
    let notice = notice.expect("a notice");
    assert_eq!(
        status_text(&notice["statusUpdate"]),
        "message recorded; the task waits for bob to answer",
        "{notice}"
    );
    let still = api
        .as_participant("alice")
        .get_task(&id, None)
        .await
        .unwrap();
    assert_eq!(state(&still), "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(
        status_text(&still),
        "Full or partial refund?\nOptions: full, partial"
    );
    assert!(history_texts(&still).contains(&"hurry up".to_owned()));

    // Bob answers: the run resumes with the framed answer, then alice's comment.
    let answered = api.follow_up(&task, "bob", "Full.").await;
    assert_eq!(state(&answered), "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(status_text(&answered), "Refunding in full.");
    let entries = transcript(server, &id).await;
    let users: Vec<&str> = entries
        .iter()
        .filter(|e| e["turn"]["role"] == "user")
        .map(|e| e["turn"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        users,
        [
            "refund 48213",
            "Reply from bob to \"Full or partial refund?\": Full.\n\n\
             [Comments other participants sent while the question was open, oldest first]\n\
             alice: hurry up\n\
             [End of comments]"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_for_a_participant_completes_on_their_answer() {
    let script = json!({"turns": [
        {"tool_calls": [{"name": "create_task_for_participant", "arguments": {
            "participant_id": "bob", "name": "Sign off", "goal": "Approve the refund of 42 EUR"}}]},
        {"text": "asked bob to sign off"},
        {"text": "bob signed off"}
    ]});
    let server = agent_server(script, &[]);
    let api = server.client().api(Binding::Rest);
    let people = alice_and_bob_watching("reporter");
    let task = api
        .send_ok(new_task("Refund", json!([]), people, "refund it"))
        .await;
    let id = id_of(&task).to_owned();
    assert_eq!(status_text(&task), "asked bob to sign off");
    let child_id = format!("{id}.1");
    let bob = api.as_participant("bob");
    let child = bob
        .get_task(&child_id, None)
        .await
        .expect("bob sees his task");
    assert_eq!(state(&child), "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(status_text(&child), "Approve the refund of 42 EUR");
    let roles: Vec<(String, String)> = ext(&child)["participants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap().into(),
                p["role"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(
        roles.contains(&("bob".into(), "assignee".into())),
        "{roles:?}"
    );
    assert!(
        roles.contains(&("tiny-harness".into(), "watcher".into())),
        "{roles:?}"
    );

    let done = api.follow_up(&child, "bob", "approved").await;
    assert_eq!(state(&done), "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(status_text(&done), "approved");
    let parent = poll_task(&api.as_participant("alice"), &id, "the parent told", |t| {
        status_text(t) == "bob signed off"
    })
    .await;
    assert_eq!(
        ext(&parent)["sub_tasks"][0]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_admin_changes_roles() {
    let script = json!({"turns": [
        {"tool_calls": [{"name": "set_participant_role", "arguments": {"participant_id": "bob", "role": "reporter"}}]},
        {"text": "done"}
    ]});
    let server = agent_server(script, &[]);
    let api = server.client().api(Binding::JsonRpc);
    // Driven by an admin: the role changes.
    let people = alice_and_bob_watching("admin");
    let task = api
        .send_ok(new_task("By admin", json!([]), people, "promote bob"))
        .await;
    let bob = participant(&task, "bob").clone();
    assert_eq!(bob["role"], "reporter");
    // Driven by a reporter: refused, nothing changes.
    let people = alice_and_bob_watching("reporter");
    let task = api
        .send_ok(new_task("By reporter", json!([]), people, "promote bob"))
        .await;
    let id = id_of(&task).to_owned();
    let bob = participant(&task, "bob").clone();
    assert_eq!(bob["role"], "watcher");
    let results = tool_results(&transcript(server, &id).await);
    assert_results_contain(&results, &[(0, "only an admin may change roles")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_are_listed_loaded_read_and_unloaded() {
    let script = json!({"turns": [
        {"tool_calls": [{"name": "list_skills"}, {"name": "load_skill", "arguments": {"name": "refunds"}},
                        {"name": "list_skill_resources", "arguments": {"name": "refunds"}},
                        {"name": "load_skill_resource", "arguments": {"name": "refunds", "kind": "references", "resource": "policy.md"}},
                        {"name": "load_skill_resource", "arguments": {"name": "refunds", "kind": "references", "resource": "../../etc/passwd"}}]},
        {"tool_calls": [{"name": "unload_skill", "arguments": {"name": "refunds"}}, {"name": "load_skill", "arguments": {"name": "nope"}}]},
        {"text": "read the policy"}
    ]});
    let server = agent_server(script, &[]);
    let api = server.client().api(Binding::Rest);
    let task = api
        .send_ok(new_task("Skills", json!([]), alice_only(), "read up"))
        .await;
    let id = id_of(&task).to_owned();
    assert_eq!(status_text(&task), "read the policy");
    let results = tool_results(&transcript(server, &id).await);
    assert_results_contain(
        &results,
        &[
            (0, "refunds"),
            (0, "How refunds are decided"),
            (1, "Refund in full when the parcel is lost."),
            (2, "references/policy.md"),
            (3, "Refunds over 500 EUR need a second approval."),
            (4, "[skill.invalid]"),
            (6, "[skill.invalid]"),
        ],
    );
    assert!(!results[5].contains("[skill."), "{}", results[5]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emit_ui_publishes_the_a2ui_artifact_and_actions_are_checked() {
    let create = json!({"version": "v0.9.1", "createSurface": {"surfaceId": "resolution",
        "catalogId": "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"}});
    let components = json!({"version": "v0.9.1", "updateComponents": {"surfaceId": "resolution", "components": [
        {"id": "root", "component": "Column", "children": ["q", "ok"]},
        {"id": "q", "component": "Text", "text": "Refund now?"},
        {"id": "ok", "component": "Button", "child": "ok-label",
         "action": {"event": {"name": "confirm", "context": {}}}},
        {"id": "ok-label", "component": "Text", "text": "Confirm"}]}});
    let script = json!({"turns": [
        {"tool_calls": [{"name": "emit_ui", "arguments": {"messages": [create, components]}}]},
        {"text": "shown"},
        {"text": "confirmed"}
    ]});
    let server = agent_server(script, &[]);
    let api = server.client().api(Binding::JsonRpc);
    let task = api
        .send_ok(new_task("UI", json!([]), alice_only(), "show it"))
        .await;
    let artifacts = task["artifacts"].as_array().expect("an artifact");
    assert_eq!(artifacts.len(), 1, "{task}");
    assert_eq!(artifacts[0]["name"], "a2ui");
    assert_eq!(
        artifacts[0]["parts"][0]["mediaType"],
        "application/a2ui+json"
    );
    // An action on the emitted surface reaches the agent; one on an unknown surface does not.
    let action = |surface: &str| {
        data_part(
            "application/a2ui+json",
            json!({"version": "v0.9.1", "action": {"name": "confirm", "surfaceId": surface,
                "sourceComponentId": "ok", "timestamp": "2026-12-01T12:00:00Z", "context": {}}}),
        )
    };
    let refused = api
        .send_ok(send_req(on(
            message(Some("alice"), vec![action("elsewhere")]),
            &task,
        )))
        .await;
    assert!(
        status_text(&refused).contains("a2ui.unknown_surface_or_component"),
        "{refused}"
    );
    let confirmed = api
        .send_ok(send_req(on(
            message(Some("alice"), vec![action("resolution")]),
            &task,
        )))
        .await;
    assert_eq!(status_text(&confirmed), "confirmed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turn_limit_fails_the_task() {
    let busy = json!({"tool_calls": [{"name": "list_skills"}]});
    let script = json!({"turns": [busy, busy, busy, busy, {"text": "never"}]});
    let server = agent_server(script, &["--max-turns", "3"]);
    let api = server.client().api(Binding::Rest);
    let task = api
        .send_ok(new_task("Busy", json!([]), alice_only(), "go"))
        .await;
    assert_eq!(state(&task), "TASK_STATE_FAILED", "{task}");
    assert_eq!(status_text(&task), "turn limit reached");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_fails_fails_the_task_with_the_reason() {
    // The script has no turn for this task: the model call fails (not retried: not transient).
    let script = json!({"tasks": {"Someone else": {"turns": [{"text": "hi"}]}}});
    let server = agent_server(script, &[]);
    let api = server.client().api(Binding::JsonRpc);
    let task = api
        .send_ok(new_task("Unscripted", json!([]), alice_only(), "go"))
        .await;
    assert_eq!(state(&task), "TASK_STATE_FAILED", "{task}");
    // The participants read the class; the log says what is wrong with the script.
    assert_eq!(status_text(&task), "the model is misconfigured", "{task}");
    let id = id_of(&task);
    let log = server.log();
    assert!(
        log.lines()
            .any(|l| l.contains(id) && l.contains("the script has no turns for task")),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canceling_a_parent_cancels_its_unfinished_children() {
    let script = json!({"tasks": {
        "Parent": {"turns": [
            {"tool_calls": [{"name": "spawn_subtask", "arguments": {"name": "Slow child", "goal": "take your time"}}]},
            {"text": "waiting"}
        ]},
        "Slow child": {"turns": [{"text": "finally", "delay_ms": 30000}]}
    }});
    let server = agent_server(script, &[]);
    let api = server.client().api(Binding::Rest);
    let alice = api.as_participant("alice");
    let task = api
        .send_ok(new_task("Parent", json!([]), alice_only(), "go"))
        .await;
    let id = id_of(&task).to_owned();
    let child_id = format!("{id}.1");
    poll_state(&alice, &child_id, "TASK_STATE_WORKING").await;
    let canceled = alice.cancel(&id).await.expect("cancel");
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
    let child = poll_state(&alice, &child_id, "TASK_STATE_CANCELED").await;
    assert_eq!(
        status_text(&child),
        format!("canceled with its parent {id}")
    );
}
