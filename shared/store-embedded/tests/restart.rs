//! The embedded store keeps everything across a process restart, including a process that
//! dies without any shutdown right after its writes returned.
#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed fixture is a failed test

use std::path::Path;
use std::process::{Command, ExitStatus};

use chrono::Duration;
use store_embedded::EmbeddedStore;
use task_core::extension::Role;
use task_store::contract::{at, record, status_event, user_message, version_of};
use task_store::{
    AuditEntry, Change, DeleteScope, InboxItem, InboxKey, InboxStore, LeaseStore, NewTask,
    PushConfigStore, TaskStore, TaskUpdate,
};

const DB_ENV: &str = "EMBEDDED_RESTART_TEST_DB";
const TEAM: &[(&str, Role)] = &[("alice", Role::Reporter), ("agent", Role::Assignee)];

/// Runs the ignored test `writer` of this binary in a child process, on the store file
/// `path` (passed in `env`), and returns how the child ended.
fn run_in_child(writer: &str, env: &str, path: &Path, what: &str) -> ExitStatus {
    Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", writer, "--ignored", "--nocapture"])
        .env(env, path)
        .status()
        .expect(what)
}

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
    new.audit = vec![AuditEntry::new(
        at(0),
        "m-1",
        Some("alice"),
        true,
        "accepted",
    )];
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
    for id in ["c1", "c2"] {
        let config = a2a::TaskPushNotificationConfig {
            id: Some(id.into()),
            ..config.clone()
        };
        store
            .put_push_config("alice", config)
            .await
            .expect("push config");
    }
    assert!(
        store
            .delete_push_config("t-1", "c2", DeleteScope::Owner("alice"))
            .await
            .expect("delete")
    );
    // No drop, no flush, no shutdown: the process dies here.
    std::process::abort();
}

#[tokio::test]
async fn survives_a_crash_after_its_writes() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let path = dir.path().join("tasks.redb");
    let status = run_in_child("writer_then_crash", DB_ENV, &path, "run the writer");
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
    let configs = store.list_push_configs("t-1").await.expect("configs");
    let kept: Vec<_> = configs
        .iter()
        .map(|c| (c.config.id.as_deref(), c.owner.as_deref()))
        .collect();
    assert_eq!(kept, [(Some("c1"), Some("alice"))], "with its owner");
    // Which tasks have configs is read back from the file (the push dispatcher lists only
    // theirs).
    assert!(store.may_have_push_configs("t-1"));
    assert!(!store.may_have_push_configs("t-2"));
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

const GROUP_DB_ENV: &str = "EMBEDDED_GROUP_COMMIT_TEST_DB";
const WRITERS: usize = 200;

/// Run by `concurrent_writes_survive_a_crash` in a child process: many writes at once (so the
/// writer groups them under one sync), each creating its own task and, for every even one,
/// a duplicate create that must fail alone; then it aborts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "the writer half of concurrent_writes_survive_a_crash, run in a child process"]
async fn concurrent_writers_then_crash() {
    let Ok(path) = std::env::var(GROUP_DB_ENV) else {
        return;
    };
    let store = EmbeddedStore::open(&path).expect("open");
    let create = |n: usize| {
        let rec = record(
            &format!("g-{n}"),
            "ctx",
            TEAM,
            a2a::TaskState::Working,
            at(n as i64),
        );
        let mut new = NewTask::new(rec.clone());
        new.events = vec![status_event(&rec, "created")];
        Change::Create(Box::new(new))
    };
    let mut writes = Vec::new();
    for n in 0..WRITERS {
        let first = store.clone();
        let change = create(n);
        writes.push(tokio::spawn(async move {
            first.commit(vec![change]).await.is_ok()
        }));
        if n % 2 == 0 {
            let second = store.clone();
            let twin = create(n);
            writes.push(tokio::spawn(async move {
                second.commit(vec![twin]).await.is_ok()
            }));
        }
    }
    let mut succeeded = 0;
    for write in writes {
        succeeded += usize::from(write.await.expect("join"));
    }
    // Every task was created exactly once; each duplicate failed without spoiling its batch.
    assert_eq!(succeeded, WRITERS);
    std::process::abort();
}

#[tokio::test]
async fn concurrent_writes_survive_a_crash() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let path = dir.path().join("tasks.redb");
    let status = run_in_child(
        "concurrent_writers_then_crash",
        GROUP_DB_ENV,
        &path,
        "run the writers",
    );
    assert!(
        !status.success(),
        "the writers must have died by abort (a failed assertion exits with 101)"
    );
    assert_eq!(
        status.code(),
        None,
        "killed by SIGABRT, not a failed assertion"
    );

    let store = EmbeddedStore::open(&path).expect("reopen after the crash");
    let page = store
        .list(
            "alice",
            &task_store::ListQuery {
                page_size: 100,
                ..Default::default()
            },
        )
        .await
        .expect("list");
    assert_eq!(
        page.total_size, WRITERS,
        "every acknowledged write survived"
    );
    for n in 0..WRITERS {
        let task = store
            .get(&format!("g-{n}"))
            .await
            .expect("get")
            .expect("exists");
        assert_eq!((task.version, task.counters.events), (1, 1));
    }
}

const CHECKPOINT_DB_ENV: &str = "EMBEDDED_RESTART_TEST_CHECKPOINT_DB";

fn groups_in_log(path: &std::path::Path) -> usize {
    store_embedded::groups_in_log(path).expect("read the log")
}

async fn bump(store: &EmbeddedStore, id: &str, message_id: &str) {
    let base = store.get(id).await.expect("get").expect("exists");
    let mut update = TaskUpdate::new(base);
    update.history = vec![user_message(message_id, "more")];
    store
        .commit(vec![Change::Update(Box::new(update))])
        .await
        .expect("update");
}

/// Waits until the log is empty: the checkpointer wrote its groups into the file.
async fn until_checkpointed(path: &std::path::Path) {
    for _ in 0..100 {
        if groups_in_log(path) == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no checkpoint emptied the log within 5 s");
}

/// Updates after the checkpoint below, paced to go on across the next one.
const LATER_BUMPS: usize = 30;

/// Run by `writes_on_both_sides_of_a_checkpoint_survive_a_crash` in a child process: writes,
/// waits until an idle checkpoint has written them into the file and emptied the log, writes
/// on (into the log's other file, then across the next checkpoint, which writes them into the
/// file while more come), then aborts.
#[tokio::test]
#[ignore = "the writer half of writes_on_both_sides_of_a_checkpoint_survive_a_crash, run in a child process"]
async fn writer_across_a_checkpoint_then_crash() {
    let Ok(path) = std::env::var(CHECKPOINT_DB_ENV) else {
        return;
    };
    let path = std::path::PathBuf::from(path);
    let store = EmbeddedStore::open(&path).expect("open");
    let rec = record("t-1", "ctx", TEAM, a2a::TaskState::Working, at(0));
    store
        .commit(vec![Change::Create(Box::new(NewTask::new(rec)))])
        .await
        .expect("create");
    bump(&store, "t-1", "m-1").await;
    assert!(groups_in_log(&path) > 0, "the writes so far are in the log");
    until_checkpointed(&path).await;
    bump(&store, "t-1", "m-2").await;
    bump(&store, "t-1", "m-3").await;
    assert!(groups_in_log(&path) > 0);
    for n in 0..LATER_BUMPS {
        bump(&store, "t-1", &format!("later-{n}")).await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    std::process::abort();
}

#[tokio::test]
async fn writes_on_both_sides_of_a_checkpoint_survive_a_crash() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let path = dir.path().join("tasks.redb");
    let status = run_in_child(
        "writer_across_a_checkpoint_then_crash",
        CHECKPOINT_DB_ENV,
        &path,
        "run the writer",
    );
    assert_eq!(
        status.code(),
        None,
        "killed by SIGABRT, not a failed assertion"
    );

    let store = EmbeddedStore::open(&path).expect("reopen after the crash");
    let task = store.get("t-1").await.expect("get").expect("exists");
    assert_eq!(
        task.version,
        4 + LATER_BUMPS as u64,
        "the create and every update"
    );
    let history = store.history("t-1", None).await.expect("history");
    let ids: Vec<_> = history.iter().map(|m| m.message_id.as_str()).collect();
    let mut want = vec!["m-1".to_owned(), "m-2".to_owned(), "m-3".to_owned()];
    want.extend((0..LATER_BUMPS).map(|n| format!("later-{n}")));
    assert_eq!(ids, want);
    assert_eq!(
        groups_in_log(&path),
        0,
        "the replayed groups are checkpointed and the log emptied"
    );
    // Writes go on after the replay, and a clean close leaves nothing to replay.
    bump(&store, "t-1", "m-4").await;
    drop(store);
    assert_eq!(groups_in_log(&path), 0);
    let store = EmbeddedStore::open(&path).expect("reopen");
    assert_eq!(version_of(&store, "t-1").await, 5 + LATER_BUMPS as u64);
}
