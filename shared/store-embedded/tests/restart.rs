//! The embedded store keeps everything across a process restart, including a process that
//! dies without any shutdown right after its writes returned.
#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed fixture is a failed test

use std::process::Command;

use chrono::Duration;
use store_embedded::EmbeddedStore;
use task_core::extension::Role;
use task_store::contract::{at, record, status_event, user_message};
use task_store::{
    AuditEntry, Change, InboxItem, InboxKey, InboxStore, LeaseStore, NewTask, PushConfigStore,
    TaskStore, TaskUpdate,
};

const DB_ENV: &str = "EMBEDDED_RESTART_TEST_DB";
const TEAM: &[(&str, Role)] = &[("alice", Role::Reporter), ("agent", Role::Assignee)];

/// Run by `survives_a_crash_after_its_writes` in a child process: writes, then aborts.
#[tokio::test]
#[ignore = "the writer half of survives_a_crash_after_its_writes, run in a child process"]
async fn writer_then_crash() {
    let Ok(path) = std::env::var(DB_ENV) else {
        return;
    };
    let store = EmbeddedStore::open(&path).expect("open");
    let rec = record("t-1", "ctx", TEAM, a2a::TaskState::Working, at(0));
    let mut new = NewTask::new(rec.clone());
    new.events = vec![status_event(&rec, "created")];
    new.history = vec![user_message("m-1", "hello")];
    new.message_ids = vec!["m-1".into()];
    new.audit = vec![AuditEntry {
        at: at(0),
        message_id: "m-1".into(),
        participant_id: Some("alice".into()),
        accepted: true,
        reason: "accepted".into(),
    }];
    store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .expect("create");
    let base = store.get("t-1").await.expect("get").expect("exists");
    let mut update = TaskUpdate::new(base);
    update.events = vec![status_event(&rec, "second")];
    update.history = vec![user_message("m-2", "again")];
    store
        .commit(vec![Change::Update(Box::new(update))])
        .await
        .expect("update");
    store
        .enqueue(
            "t-1",
            InboxItem {
                key: InboxKey {
                    enqueued_at: at(5),
                    message_id: "m-3".into(),
                },
                sender: "alice".into(),
                message: user_message("m-3", "queued"),
            },
        )
        .await
        .expect("enqueue");
    store
        .acquire("t-1", "runner", at(0), Duration::seconds(30))
        .await
        .expect("lease");
    let config = a2a::TaskPushNotificationConfig {
        url: "https://example.com/hook".into(),
        id: Some("c1".into()),
        task_id: "t-1".into(),
        token: None,
        authentication: None,
        tenant: None,
    };
    store.put_push_config(config).await.expect("push config");
    // No drop, no flush, no shutdown: the process dies here.
    std::process::abort();
}

#[tokio::test]
async fn survives_a_crash_after_its_writes() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let path = dir.path().join("tasks.redb");
    let status = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "writer_then_crash", "--ignored", "--nocapture"])
        .env(DB_ENV, &path)
        .status()
        .expect("run the writer");
    assert!(
        !status.success(),
        "the writer must have died by abort, not exited cleanly"
    );

    let store = EmbeddedStore::open(&path).expect("reopen after the crash");
    let task = store
        .get("t-1")
        .await
        .expect("get")
        .expect("the task survived");
    assert_eq!(
        (task.version, task.counters.events, task.counters.history),
        (2, 2, 2)
    );
    let history: Vec<_> = store
        .history("t-1", None)
        .await
        .expect("history")
        .into_iter()
        .map(|m| m.message_id)
        .collect();
    assert_eq!(history, ["m-1", "m-2"]);
    assert_eq!(store.events("t-1", 0, 10).await.expect("events").len(), 2);
    assert_eq!(store.audit("t-1").await.expect("audit").len(), 1);
    assert_eq!(
        store.inbox("t-1").await.expect("inbox")[0].message,
        user_message("m-3", "queued")
    );
    assert!(matches!(
        store
            .acquire("t-1", "other", at(1), Duration::seconds(30))
            .await,
        Err(task_store::StoreError::Conflict(
            task_store::Conflict::LeaseHeld { .. }
        ))
    ));
    assert_eq!(
        store.list_push_configs("t-1").await.expect("configs").len(),
        1
    );
    let page = store
        .list(
            "alice",
            &task_store::ListQuery {
                page_size: 10,
                ..Default::default()
            },
        )
        .await
        .expect("list");
    assert_eq!(page.total_size, 1);
}
