//! The embedded store's online backup: `kill -USR1` makes the running server write a
//! consistent copy of its store under `<data dir>/backups/<UTC time>/` while requests go
//! on; a second server started on a copy of that directory reads the tasks created before.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

/// The path of the first backup the server's log reports, once it does.
fn backup_written(server: &Server) -> Option<String> {
    server
        .log()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|l| l["fields"]["message"] == "backup: wrote a copy of the store")
        .and_then(|l| l["fields"]["path"].as_str().map(str::to_owned))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_the_server_writes_restores_the_tasks_before_it() {
    let server = Server::start();
    let api = server.client().api(Binding::JsonRpc);
    let mut before = Vec::new();
    for i in 0..5 {
        let task = api
            .send_text("alice", &format!("before the backup {i}"))
            .await;
        before.push(id_of(&task).to_owned());
    }

    let sent = std::process::Command::new("kill")
        .args(["-USR1", &server.pid().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
    // Writes go on while the copy is made.
    let writer = {
        let api = api.clone();
        tokio::spawn(async move {
            for i in 0..20 {
                api.send_text("bob", &format!("during the backup {i}"))
                    .await;
            }
        })
    };
    let path = poll(
        "the backup",
        || async { backup_written(&server).unwrap_or_default() },
        |found| !found.is_empty(),
    )
    .await;
    writer.await.expect("writer");
    let file = std::path::PathBuf::from(&path);
    let backup_dir = file.parent().expect("backup dir");
    assert!(
        backup_dir.starts_with(server.dir().join("backups")),
        "{path}"
    );
    assert!(path.ends_with("tasks.redb"), "{path}");

    // Restore: a data directory holding the backup's files, and a server on it.
    let restored = scratch_dir("restored-");
    for entry in std::fs::read_dir(backup_dir).expect("backup files") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), restored.path().join(entry.file_name())).expect("copy");
    }
    let second = Server::builder().data_dir(restored).start();
    let alice = second.client().as_participant("alice").api(Binding::Rest);
    for id in &before {
        let task = alice.get_task(id, None).await.expect("restored");
        assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED", "{task}");
        let history = task["history"].as_array().expect("history");
        assert_eq!(history.len(), 2, "the message and the reply: {task}");
    }
    let list = alice.list_tasks(json!({})).await.expect("list");
    assert_eq!(list["totalSize"], 5, "{list}");
    // The restored store takes writes.
    let next = second
        .client()
        .api(Binding::Rest)
        .follow_up(&before[0], "alice", "after the restore")
        .await;
    assert_eq!(status_text(&next), "after the restore");
}
