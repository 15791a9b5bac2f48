//! A sub-task delegated to a remote A2A agent: two local servers, the second the registered
//! remote agent of the first (`--remote-agent`). The first's agent spawns a sub-task naming
//! it; the relay sends the goal over A2A, follows the remote task to its end, and the child
//! and then the parent complete with the remote's answer.
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
