//! `--retention-days`: the running server purges finished tasks past their retention (once
//! at start, then every few minutes) and keeps live ones. The store is seeded directly with
//! tasks that finished or last moved long ago, so the test needs no clock of its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use a2a::{TaskState, TaskStatus};
use chrono::{TimeZone, Utc};
use common::*;
use serde_json::json;
use store_embedded::EmbeddedStore;
use task_core::extension::{Participant, ParticipantKind, Role, TaskExtension};
use task_store::{Change, NewTask, TaskRecord, TaskStore};

fn old_task(id: &str, state: TaskState) -> TaskRecord {
    let mut extension = TaskExtension::new(format!("task {id}"), "long ago");
    extension.participants = vec![
        Participant::new("alice", ParticipantKind::Human, Role::Reporter),
        Participant::new("tiny-harness", ParticipantKind::Agent, Role::Assignee),
    ];
    TaskRecord {
        id: id.to_owned(),
        context_id: "ctx".to_owned(),
        status: TaskStatus {
            state,
            message: None,
            timestamp: Utc.with_ymd_and_hms(2020, 1, 1, 0, 0, 0).single(),
        },
        sub_state: None,
        extension,
        agent: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_tasks_past_their_retention_are_purged_and_live_ones_kept() {
    let data = scratch_dir("retention-");
    {
        let store = EmbeddedStore::open(data.path().join("tasks.redb")).expect("open");
        let changes = [
            old_task("finished", TaskState::Completed),
            old_task("waiting", TaskState::InputRequired),
        ]
        .into_iter()
        .map(|rec| Change::Create(Box::new(NewTask::new(rec))))
        .collect();
        store.commit(changes).await.expect("seed");
    }
    let server = Server::builder()
        .arg("--retention-days")
        .arg("30")
        .data_dir(data)
        .start();
    let alice = server.client().as_participant("alice").api(Binding::Rest);
    poll(
        "the purge at start",
        || async {
            let list = alice.list_tasks(json!({})).await.expect("list");
            list["totalSize"].to_string()
        },
        |total| total == "1",
    )
    .await;
    assert!(alice.get_task("finished", None).await.is_err(), "purged");
    let waiting = alice.get_task("waiting", None).await.expect("kept");
    assert_eq!(state(&waiting), "TASK_STATE_INPUT_REQUIRED");
    assert!(
        server.log().contains("retention: purged"),
        "{}",
        server.log()
    );
}

#[test]
fn a_malformed_retention_stops_the_server_naming_the_flag() {
    let dir = scratch_dir("retention-bad-");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_local-server"))
        .args([
            "--addr",
            "127.0.0.1:0",
            "--retention-days",
            "a week",
            "--data-dir",
        ])
        .arg(dir.path())
        .env_remove("TH_RETENTION_DAYS")
        .output()
        .expect("run");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--retention-days (TH_RETENTION_DAYS)"),
        "{stderr}"
    );
}
