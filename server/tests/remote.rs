//! A sub-task delegated to a remote A2A agent: two local servers, the second the registered
//! remote agent of the first (`--remote-agent`). The first's agent spawns a sub-task naming
//! it; the relay sends the goal over A2A, follows the remote task to its end, and the child
//! and then the parent complete with the remote's answer. Both ways: the parent's `TaskRef`
//! names the remote task, a remote that asks a question has it answered by the parent's
//! agent (or a participant), a cancel reaches the remote task, and a remote that is gone
//! fails the link after `--remote-lost-after-secs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_task_runs_on_a_remote_agent_and_its_outcome_comes_back() {
    // The remote: completes every task with an echo of its message (the tck profile's default).
    let remote = server_with("--agent-profile", "tck");
    let setup = AgentSetup::new(ledger_subtask_script("the ledger agent answered"));
    let local = setup
        .builder()
        .arg("--agent-id")
        .arg("agent-a")
        .arg("--remote-agent")
        .arg(format!("ledger={}", remote.url))
        .start();
    let api = local.client().api(Binding::JsonRpc).as_participant("alice");
    let task = api.send_text("alice", "Parent").await;
    let id = id_of(&task).to_owned();
    // The new task is named after its first line, so the script for "Parent" plays.
    assert_eq!(status_text(&task), "asked the ledger agent", "{task}");
    let sub = &ext(&task)["sub_tasks"][0];
    assert_eq!(sub["agent"]["id"], "ledger");
    let child_id = format!("{id}.1");

    let parent = poll_task(&api, &id, "the remote outcome to come back", |read| {
        status_text(read) == "the ledger agent answered"
    })
    .await;
    assert_eq!(
        ext(&parent)["sub_tasks"][0]["state"],
        "TASK_STATE_COMPLETED"
    );
    let child = api.get_task(&child_id, None).await.unwrap();
    assert_eq!(state(&child), "TASK_STATE_COMPLETED");
    assert_eq!(
        status_text(&child),
        "check the remote ledger",
        "the remote's answer"
    );

    // On the remote, the task was created by the first service's agent.
    let remote_api = remote.client().api(Binding::Rest).as_participant("agent-a");
    let listed = remote_api.list_tasks(json!({})).await.unwrap();
    assert_eq!(listed["totalSize"], 1, "{listed}");
    let remote_task = &listed["tasks"][0];
    assert_eq!(state(remote_task), "TASK_STATE_COMPLETED");
    assert_eq!(ext(remote_task)["participants"][0]["id"], "agent-a");
}

/// The remote's script: its task (whatever its name) asks the first server's agent
/// (`agent-a`) which year, then answers.
fn asking_remote() -> AgentSetup {
    AgentSetup::new(json!({"tasks": {"*": {"turns": [
        {"tool_calls": [{"name": "ask_participant", "arguments": {
            "participant_id": "agent-a", "question": "Which year's ledger?"}}]},
        {"text": "the 2025 ledger balances"}
    ]}}}))
}

/// The parent's script: spawns the sub-task on `ledger`, says so, then plays `then` on each
/// wake (the remote's question first).
fn parent_script(then: Vec<serde_json::Value>) -> AgentSetup {
    let mut turns = vec![
        json!({"tool_calls": [{"name": "spawn_subtask", "arguments": {
            "name": "Ledger check", "goal": "check the remote ledger",
            "acceptance_criteria": ["balanced"], "agent": "ledger"}}]}),
        json!({"text": "asked the ledger agent"}),
    ];
    turns.extend(then);
    AgentSetup::new(json!({"tasks": {
        "Parent": {"turns": turns},
        "*": {"turns": [{"text": "not relayed"}]}
    }}))
}

/// The first server (`agent-a`) over `setup`, `ledger` being `remote`, with more flags.
fn local_server(setup: &AgentSetup, remote: &Server, more: &[&str]) -> Server {
    setup
        .builder()
        .arg("--agent-id")
        .arg("agent-a")
        .arg("--remote-agent")
        .arg(format!("ledger={}", remote.url))
        .args(more.iter().copied())
        .start()
}

/// The one task on the remote, as the first server's agent reads it.
async fn the_remote_task(remote: &Server) -> serde_json::Value {
    let remote_api = remote.client().api(Binding::Rest).as_participant("agent-a");
    let listed = remote_api.list_tasks(json!({})).await.unwrap();
    assert_eq!(listed["totalSize"], 1, "{listed}");
    listed["tasks"][0].clone()
}

/// Polls the parent until its sub-task's ref shows the remote's question waiting, and the
/// parent's own run is over (it waits on alice).
async fn until_the_question_waits(api: &Api, id: &str) -> serde_json::Value {
    poll_task(
        api,
        id,
        "the sub-task to wait on the remote's question",
        |t| {
            let sub = &ext(t)["sub_tasks"][0];
            sub["state"] == "TASK_STATE_INPUT_REQUIRED"
                && sub["sub_state"] == "awaiting-answer"
                && state(t) == "TASK_STATE_INPUT_REQUIRED"
        },
    )
    .await
}

/// The parent asks alice what to answer (so the remote's question stays open).
fn parent_asks_alice() -> Vec<serde_json::Value> {
    vec![
        json!({"tool_calls": [{"name": "ask_participant", "arguments": {
        "participant_id": "alice", "question": "The ledger agent asks which year: which one?"}}]}),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_question_is_answered_by_the_parents_agent() {
    let remote_setup = asking_remote();
    let remote = remote_setup.builder().start();
    let setup = parent_script(vec![
        json!({"text": "Use the 2025 ledger"}),
        json!({"text": "the ledger agent answered"}),
    ]);
    let local = local_server(&setup, &remote, &[]);
    let api = local.client().api(Binding::JsonRpc).as_participant("alice");
    let task = api.send_text("alice", "Parent").await;
    let id = id_of(&task).to_owned();

    let parent = poll_task(
        &api,
        &id,
        "the parent's agent told of the outcome",
        |read| status_text(read) == "the ledger agent answered",
    )
    .await;
    let remote_task = the_remote_task(&remote).await;
    let remote_id = id_of(&remote_task).to_owned();
    assert_eq!(state(&remote_task), "TASK_STATE_COMPLETED", "{remote_task}");
    assert_eq!(status_text(&remote_task), "the 2025 ledger balances");
    // The parent's ref names the remote task and agent, in the remote's final state.
    let sub = &ext(&parent)["sub_tasks"][0];
    assert_eq!(sub["task_id"], json!(remote_id), "{sub}");
    assert_eq!(sub["agent"]["kind"], "agent", "{sub}");
    assert_eq!(sub["agent"]["id"], "ledger", "{sub}");
    assert_eq!(sub["state"], "TASK_STATE_COMPLETED");
    // The remote task is the sub-task's own (the goal's task envelope): delegated, with its
    // name and criteria, and it knows its parent on the first agent.
    assert_eq!(ext(&remote_task)["name"], "Ledger check");
    assert_eq!(ext(&remote_task)["lifecycle"], "delegated");
    assert_eq!(
        ext(&remote_task)["acceptance_criteria"][0]["text"],
        "balanced"
    );
    let parent_ref = &ext(&remote_task)["parent_tasks"][0];
    assert_eq!(
        parent_ref["task_id"],
        json!(format!("{id}.1")),
        "{parent_ref}"
    );
    assert_eq!(parent_ref["agent"]["id"], "agent-a", "{parent_ref}");

    // The parent's agent was told the question, then the outcome; its reply was the answer.
    let parent = api.get_task(&id, Some(100)).await.unwrap();
    let told = history_texts(&parent);
    let question = format!("Sub-task {remote_id} is INPUT_REQUIRED: Which year's ledger?");
    assert!(told.iter().any(|t| t.starts_with(&question)), "{told:?}");
    let done = format!("Sub-task {remote_id} is COMPLETED: the 2025 ledger balances");
    assert!(told.contains(&done), "{told:?}");
    let remote_api = remote.client().api(Binding::Rest).as_participant("agent-a");
    let remote_task = remote_api.get_task(&remote_id, Some(100)).await.unwrap();
    assert!(
        history_texts(&remote_task).contains(&"Use the 2025 ledger".to_owned()),
        "{remote_task}"
    );
    let child = api.get_task(&format!("{id}.1"), None).await.unwrap();
    assert_eq!(state(&child), "TASK_STATE_COMPLETED");
    assert_eq!(status_text(&child), "the 2025 ledger balances");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canceling_the_parent_cancels_the_remote_task() {
    let remote_setup = asking_remote();
    let remote = remote_setup.builder().start();
    let setup = parent_script(parent_asks_alice());
    let local = local_server(&setup, &remote, &[]);
    let api = local.client().api(Binding::JsonRpc).as_participant("alice");
    let task = api.send_text("alice", "Parent").await;
    let id = id_of(&task).to_owned();
    let parent = until_the_question_waits(&api, &id).await;
    let remote_id = id_of(&the_remote_task(&remote).await).to_owned();
    assert_eq!(ext(&parent)["sub_tasks"][0]["task_id"], json!(remote_id));

    let canceled = api.cancel(&id).await.unwrap();
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
    let child = api.get_task(&format!("{id}.1"), None).await.unwrap();
    assert_eq!(state(&child), "TASK_STATE_CANCELED", "{child}");
    let remote_api = remote.client().api(Binding::Rest).as_participant("agent-a");
    poll_state(&remote_api, &remote_id, "TASK_STATE_CANCELED").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_remote_agent_fails_the_link_after_the_timeout() {
    let remote_setup = asking_remote();
    let remote = remote_setup.builder().start();
    let setup = parent_script(parent_asks_alice());
    let local = local_server(&setup, &remote, &["--remote-lost-after-secs", "2"]);
    let api = local.client().api(Binding::JsonRpc).as_participant("alice");
    let task = api.send_text("alice", "Parent").await;
    let id = id_of(&task).to_owned();
    until_the_question_waits(&api, &id).await;
    drop(remote);

    // Alice, a participant of the sub-task, answers it directly; the remote is gone.
    let child_id = format!("{id}.1");
    api.follow_up(child_id.as_str(), "alice", "2025").await;
    let child = poll_state(&api, &child_id, "TASK_STATE_FAILED").await;
    assert_eq!(
        status_text(&child),
        "the remote agent ledger was lost: no answer for 2 s"
    );
    poll_task(&api, &id, "the parent's ref to show the failure", |t| {
        ext(t)["sub_tasks"][0]["state"] == "TASK_STATE_FAILED"
    })
    .await;
}
