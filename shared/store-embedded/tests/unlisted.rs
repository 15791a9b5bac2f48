//! The service's own agent, on every task, is not listed: its ListTasks entries and counts
//! are not written (`without_listing_for`), while every other participant's are.

use a2a::{TaskState, TaskStatus};
use chrono::{TimeZone, Utc};
use store_embedded::EmbeddedStore;
use task_core::extension::{Participant, ParticipantKind, Role, TaskExtension};
use task_store::{Change, ListQuery, NewTask, TaskRecord, TaskStore};

fn record(id: &str, secs: i64) -> TaskRecord {
    let mut extension = TaskExtension::new(format!("task {id}"), "do it");
    extension.participants = vec![
        Participant::new("alice", ParticipantKind::Human, Role::Admin),
        Participant::new("agent", ParticipantKind::Agent, Role::Assignee),
    ];
    TaskRecord {
        id: id.to_owned(),
        context_id: "ctx".to_owned(),
        status: TaskStatus {
            state: TaskState::Working,
            message: None,
            timestamp: Utc.timestamp_opt(1_790_000_000 + secs, 0).single(),
        },
        sub_state: None,
        extension,
        agent: Default::default(),
    }
}

#[tokio::test]
async fn the_unlisted_participant_has_no_entries_or_counts() {
    let dir = tempfile::tempdir().expect("dir");
    let store = EmbeddedStore::open(dir.path().join("t.redb"))
        .expect("open")
        .without_listing_for("agent");
    for n in 0..3 {
        let rec = record(&format!("t-{n}"), n);
        let new = NewTask::new(rec);
        store
            .commit(vec![Change::Create(Box::new(new))])
            .await
            .expect("create");
    }
    let query = ListQuery {
        page_size: 10,
        ..Default::default()
    };
    let alice = store.list("alice", &query).await.expect("alice");
    assert_eq!((alice.tasks.len(), alice.total_size), (3, 3));
    let agent = store.list("agent", &query).await.expect("agent");
    assert_eq!((agent.tasks.len(), agent.total_size), (0, 0));
}
