//! The embedded store keeps everything across a restart: the server is killed (no graceful
//! shutdown) and started again on the same data directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_survives_a_kill_and_restart_and_takes_follow_ups() {
    let server = Server::builder().allow_private_webhooks().start();
    let mut hook = Webhook::start().await;
    let api = server.client().api(Binding::JsonRpc);
    let task = api.send_text("alice", "before the restart").await;
    let id = id_of(&task).to_owned();
    api.as_participant("alice")
        .create_push(
            &id,
            json!({"url": hook.url("/hook"), "token": "tok",
                   "authentication": {"scheme": "Bearer", "credentials": "secret"}}),
        )
        .await
        .expect("push config");
    let old_url = server.url.clone();

    let data = server.kill();
    let server = Server::builder()
        .allow_private_webhooks()
        .data_dir(data)
        .start();
    assert_ne!(server.url, old_url, "a new process on a new port");

    for binding in BOTH {
        let alice = server.client().as_participant("alice").api(binding);
        let read = alice.get_task(&id, None).await.expect("the task survived");
        assert_eq!(state(&read), "TASK_STATE_INPUT_REQUIRED", "{binding:?}");
        assert_eq!(read["contextId"], task["contextId"]);
        assert_eq!(ext(&read), ext(&task));
        let list = alice.list_tasks(json!({})).await.expect("list");
        assert_eq!(list["totalSize"], 1);
        let configs = alice.list_push(&id).await.expect("configs survived");
        assert_eq!(configs["configs"].as_array().map(Vec::len), Some(1));
    }

    let next = server
        .client()
        .api(Binding::Rest)
        .follow_up(&task, "alice", "after the restart")
        .await;
    assert_eq!(state(&next), "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(status_text(&next), "after the restart");
    let history = next["history"].as_array().expect("history");
    let texts: Vec<&str> = history
        .iter()
        .map(|m| m["parts"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "before the restart",
            "before the restart",
            "after the restart",
            "after the restart"
        ]
    );

    // The push config made before the restart is served by the new process: its receiver
    // hears of the turn's outcome.
    let got = hook
        .until(|d| d.body["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED")
        .await;
    let last = got.last().unwrap();
    assert_eq!(last.header("authorization"), Some("Bearer secret"));
    assert_eq!(status_text(&last.body["statusUpdate"]), "after the restart");

    // The card names the new address.
    let card = server
        .client()
        .rest(reqwest::Method::GET, "/.well-known/agent-card.json", None)
        .await
        .json();
    assert_eq!(card["supportedInterfaces"][0]["url"], server.url);
}
