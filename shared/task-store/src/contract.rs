//! The contract suite: every operation and every conflict path of the store ports, and the
//! concurrency guarantees, as async functions over any [`Store`]. Each adapter's tests run
//! all of them through [`contract_suite!`], each test on a fresh store (a new table, a new
//! file).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;

use a2a::{
    Artifact, Message, Part, Role as MessageRole, StreamResponse, Task, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};
use chrono::{DateTime, Duration, TimeZone, Utc};
use task_core::extension::{Participant, ParticipantKind, Role, TaskExtension};
use task_core::task::AgentState;

use crate::error::{Conflict, StoreError};
use crate::limits::MAX_DOCUMENT_BYTES;
use crate::model::*;
use crate::port::{Newer, Store};

mod push;
pub use push::*;

/// Runs every contract test against stores made by `$make` (an async expression giving an
/// `Arc<dyn Store>`), one `#[tokio::test]` each.
#[macro_export]
macro_rules! contract_suite {
    ($make:expr) => {
        $crate::contract_suite!(@tests $make;
            create_then_get, get_newer_reads_only_a_changed_task, a_commit_submitted_after_another_is_applied_after_it, create_conflicts_when_the_task_exists, update_needs_the_version_it_read,
            update_checks_the_allowed_states, update_checks_the_actors_role, events_are_gapless_and_readable_from_a_seq,
            message_ids_are_deduplicated, history_reads_all_or_the_newest, documents_over_the_cap_are_refused,
            artifacts_keep_their_first_order, an_update_applied_is_what_the_store_reads, a_multi_task_commit_is_atomic, a_task_is_created_with_its_first_message_queued, a_task_is_created_with_its_lease, an_update_gives_up_the_runners_lease, the_transcript_is_appended_and_read_from_a_number, a_commit_can_queue_a_message_for_another_task, list_is_scoped_ordered_filtered_and_paged,
            list_follows_participant_and_status_changes, push_configs, leases, inbox, audit_log,
            a_long_conversation_is_stored_intact, concurrent_updates_lose_nothing, one_winner_per_conflicting_pair,
            concurrent_role_changes_have_one_winner, concurrent_lease_acquisition_has_one_winner,
            push_configs_belong_to_their_owner, push_configs_are_capped,
            concurrent_push_config_writes_keep_the_rules);
    };
    (@tests $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let store = $make.await;
                $crate::contract::$name(store).await;
            }
        )*
    };
}

// ---------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------

pub fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_790_000_000 + seconds, 0)
        .single()
        .expect("valid time")
}

pub fn record(
    id: &str,
    context: &str,
    participants: &[(&str, Role)],
    state: TaskState,
    ts: DateTime<Utc>,
) -> TaskRecord {
    let mut extension = TaskExtension::new(format!("task {id}"), "do it");
    extension.participants = participants
        .iter()
        .map(|(p, role)| Participant::new(*p, ParticipantKind::Human, *role))
        .collect();
    TaskRecord {
        id: id.to_owned(),
        context_id: context.to_owned(),
        status: TaskStatus {
            state,
            message: None,
            timestamp: Some(ts),
        },
        sub_state: None,
        extension,
        agent: AgentState::default(),
    }
}

fn snapshot(record: &TaskRecord) -> StreamResponse {
    StreamResponse::Task(Task {
        id: record.id.clone(),
        context_id: record.context_id.clone(),
        status: record.status.clone(),
        artifacts: None,
        history: None,
        metadata: None,
    })
}

pub fn status_event(record: &TaskRecord, text: &str) -> StreamResponse {
    let mut message = Message::new(MessageRole::Agent, vec![Part::text(text)]);
    message.message_id = format!("{}:{text}", record.id);
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: record.id.clone(),
        context_id: record.context_id.clone(),
        status: TaskStatus {
            state: record.status.state.clone(),
            message: Some(message),
            timestamp: record.status.timestamp,
        },
        metadata: None,
    })
}

pub fn user_message(id: &str, text: &str) -> Message {
    let mut m = Message::new(MessageRole::User, vec![Part::text(text)]);
    m.message_id = id.to_owned();
    m
}

const TEAM: &[(&str, Role)] = &[
    ("alice", Role::Reporter),
    ("ops", Role::Admin),
    ("agent", Role::Assignee),
];

async fn create(store: &dyn Store, record: TaskRecord) -> StoredTask {
    let mut new = NewTask::new(record.clone());
    new.events.push(snapshot(&record));
    store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .expect("create");
    store.get(&record.id).await.expect("get").expect("exists")
}

fn update(base: &StoredTask) -> TaskUpdate {
    TaskUpdate::new(base.clone())
}

async fn commit_one(store: &dyn Store, update: TaskUpdate) -> Result<Committed, StoreError> {
    store
        .commit(vec![Change::Update(Box::new(update))])
        .await
        .map(|mut c| c.remove(0))
}

fn conflict(result: Result<impl std::fmt::Debug, StoreError>) -> Conflict {
    match result {
        Err(StoreError::Conflict(c)) => c,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

async fn seqs(store: &dyn Store, task: &str) -> Vec<u64> {
    store
        .events(task, 0, 10_000)
        .await
        .expect("events")
        .iter()
        .map(|e| e.seq)
        .collect()
}

// ---------------------------------------------------------------------------------------
// Tasks
// ---------------------------------------------------------------------------------------

pub async fn create_then_get(store: Arc<dyn Store>) {
    let rec = record("t-1", "ctx", TEAM, TaskState::Submitted, at(0));
    let mut new = NewTask::new(rec.clone());
    new.events = vec![snapshot(&rec), status_event(&rec, "hello")];
    new.history = vec![user_message("m-1", "Refund order 48213")];
    new.message_ids = vec!["m-1".into()];
    let applied = new.applied();
    let committed = store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .expect("create");
    assert_eq!(
        committed,
        vec![Committed {
            task_id: "t-1".into(),
            version: 1,
            event_seqs: vec![0, 1]
        }]
    );
    let got = store.get("t-1").await.expect("get").expect("exists");
    // What the creator uses instead of reading the new task back.
    assert_eq!(applied, got);
    assert_eq!(got.record, rec);
    assert_eq!(got.version, 1);
    assert_eq!(
        got.counters,
        TaskCounters {
            events: 2,
            history: 1,
            artifact_ids: vec![],
            transcript: 0,
        }
    );
    assert_eq!(
        store.history("t-1", None).await.expect("history"),
        vec![user_message("m-1", "Refund order 48213")]
    );
    let events = store.events("t-1", 0, 10).await.expect("events");
    assert_eq!(events.len(), 2);
    assert_eq!(
        events[0],
        StoredEvent {
            seq: 0,
            event: snapshot(&rec)
        }
    );
    assert!(store.get("nope").await.expect("get").is_none());
    assert!(
        store
            .events("nope", 0, 10)
            .await
            .expect("events")
            .is_empty()
    );
}

/// `get_newer` says whether the task moved past a version, and gives it when it did.
pub async fn get_newer_reads_only_a_changed_task(store: Arc<dyn Store>) {
    assert_eq!(
        store.get_newer("t-1", 1).await.expect("get_newer"),
        Newer::Missing
    );
    let base = create(
        &*store,
        record("t-1", "ctx", TEAM, TaskState::Working, at(0)),
    )
    .await;
    assert_eq!(
        store
            .get_newer("t-1", base.version)
            .await
            .expect("get_newer"),
        Newer::Unchanged
    );
    let mut u = update(&base);
    u.history = vec![user_message("m-1", "hi")];
    let applied = u.applied();
    commit_one(&*store, u).await.expect("update");
    assert_eq!(
        store
            .get_newer("t-1", base.version)
            .await
            .expect("get_newer"),
        Newer::Changed(Box::new(applied.clone()))
    );
    assert_eq!(
        store
            .get_newer("t-1", applied.version)
            .await
            .expect("get_newer"),
        Newer::Unchanged
    );
}

/// `submit` orders commits before they are done: an update submitted after the submit of
/// the creation it builds on sees it, whichever is awaited first; a refusal found when the
/// commit is applied comes from its future.
pub async fn a_commit_submitted_after_another_is_applied_after_it(store: Arc<dyn Store>) {
    let rec = record("t-1", "ctx", TEAM, TaskState::Working, at(0));
    let mut new = NewTask::new(rec.clone());
    new.events = vec![snapshot(&rec)];
    let created = new.applied();
    let creating = store
        .submit(vec![Change::Create(Box::new(new))])
        .await
        .expect("submit the creation");
    let mut next = rec.clone();
    next.status.state = TaskState::InputRequired;
    let mut u = update(&created);
    u.events = vec![status_event(&next, "answered")];
    u.history = vec![user_message("m-1", "hi")];
    u.record = Some(next.clone());
    let updating = store
        .submit(vec![Change::Update(Box::new(u))])
        .await
        .expect("submit the update");
    let updated = updating.await.expect("the update sees the creation");
    assert_eq!(updated[0].event_seqs, vec![1]);
    assert_eq!(creating.await.expect("created")[0].event_seqs, vec![0]);
    let got = store.get("t-1").await.expect("get").expect("exists");
    assert_eq!((got.version, got.record), (2, next));

    let again = store
        .submit(vec![Change::Create(Box::new(NewTask::new(rec)))])
        .await
        .expect("a conflict is found when the commit is applied");
    assert_eq!(conflict(again.await), Conflict::TaskExists("t-1".into()));
}

pub async fn create_conflicts_when_the_task_exists(store: Arc<dyn Store>) {
    let first = create(
        &*store,
        record("t-1", "ctx", TEAM, TaskState::Submitted, at(0)),
    )
    .await;
    let mut again = NewTask::new(record("t-1", "other", TEAM, TaskState::Working, at(5)));
    again.history = vec![user_message("m-9", "again")];
    let err = store.commit(vec![Change::Create(Box::new(again))]).await;
    assert_eq!(conflict(err), Conflict::TaskExists("t-1".into()));
    let now = store.get("t-1").await.expect("get").expect("exists");
    assert_eq!(now, first, "nothing of the refused create was written");
    assert!(
        store
            .history("t-1", None)
            .await
            .expect("history")
            .is_empty()
    );
}

pub async fn update_needs_the_version_it_read(store: Arc<dyn Store>) {
    let base = create(
        &*store,
        record("t-1", "ctx", TEAM, TaskState::Submitted, at(0)),
    )
    .await;
    let mut working = base.record.clone();
    working.status.state = TaskState::Working;
    let mut first = update(&base);
    first.record = Some(working.clone());
    first.events.push(status_event(&working, "working"));
    let committed = commit_one(&*store, first).await.expect("first update");
    assert_eq!(
        committed,
        Committed {
            task_id: "t-1".into(),
            version: 2,
            event_seqs: vec![1]
        }
    );

    // A second writer that read version 1 loses, and nothing of its write lands.
    let mut stale = update(&base);
    let mut failed = base.record.clone();
    failed.status.state = TaskState::Failed;
    stale.record = Some(failed);
    stale.events.push(status_event(&base.record, "stale"));
    stale.history.push(user_message("m-2", "stale"));
    assert_eq!(
        conflict(commit_one(&*store, stale).await),
        Conflict::TaskChanged("t-1".into())
    );
    let now = store.get("t-1").await.expect("get").expect("exists");
    assert_eq!(
        (now.version, &now.record.status.state),
        (2, &TaskState::Working)
    );
    assert_eq!(seqs(&*store, "t-1").await, vec![0, 1]);
    assert!(
        store
            .history("t-1", None)
            .await
            .expect("history")
            .is_empty()
    );

    // An update without a new record still advances the version.
    let bump = commit_one(&*store, update(&now)).await.expect("bump");
    assert_eq!(bump.version, 3);
    // Updating a task that does not exist is a conflict too (it changed: it is gone).
    let mut ghost = now.clone();
    ghost.record.id = "ghost".into();
    assert_eq!(
        conflict(commit_one(&*store, update(&ghost)).await),
        Conflict::TaskChanged("ghost".into())
    );
}

pub async fn update_checks_the_allowed_states(store: Arc<dyn Store>) {
    let base = create(
        &*store,
        record("t-1", "ctx", TEAM, TaskState::Working, at(0)),
    )
    .await;
    let mut wrong = update(&base);
    wrong.allowed_states = vec![TaskState::Submitted, TaskState::InputRequired];
    assert_eq!(
        conflict(commit_one(&*store, wrong).await),
        Conflict::TaskChanged("t-1".into())
    );
    let mut right = update(&base);
    right.allowed_states = vec![TaskState::Submitted, TaskState::Working];
    assert_eq!(
        commit_one(&*store, right).await.expect("allowed").version,
        2
    );
}

pub async fn update_checks_the_actors_role(store: Arc<dyn Store>) {
    let base = create(
        &*store,
        record("t-1", "ctx", TEAM, TaskState::Working, at(0)),
    )
    .await;
    let mut promoted = base.record.clone();
    promoted
        .extension
        .participant_mut("alice")
        .expect("alice")
        .role = Role::Admin;
    for actor in ["alice", "agent", "mallory"] {
        let mut by = update(&base);
        by.actor_role = Some((actor.into(), Role::Admin));
        by.record = Some(promoted.clone());
        assert_eq!(
            conflict(commit_one(&*store, by).await),
            Conflict::TaskChanged("t-1".into()),
            "{actor}"
        );
    }
    let mut by_admin = update(&base);
    by_admin.actor_role = Some(("ops".into(), Role::Admin));
    by_admin.record = Some(promoted.clone());
    commit_one(&*store, by_admin).await.expect("an admin may");
    let now = store.get("t-1").await.expect("get").expect("exists");
    assert_eq!(
        now.record
            .extension
            .participant("alice")
            .expect("alice")
            .role,
        Role::Admin
    );
    // The role condition reads the stored roles: alice is now an admin.
    let mut by_alice = update(&now);
    by_alice.actor_role = Some(("alice".into(), Role::Admin));
    commit_one(&*store, by_alice)
        .await
        .expect("alice is an admin now");
}

pub async fn events_are_gapless_and_readable_from_a_seq(store: Arc<dyn Store>) {
    let mut base = create(
        &*store,
        record("t-1", "ctx", TEAM, TaskState::Working, at(0)),
    )
    .await;
    for round in 0..4 {
        let mut u = update(&base);
        u.events = (0..3)
            .map(|i| status_event(&base.record, &format!("r{round}e{i}")))
            .collect();
        let c = commit_one(&*store, u).await.expect("append");
        let first = 1 + 3 * round;
        assert_eq!(c.event_seqs, vec![first, first + 1, first + 2]);
        base = store.get("t-1").await.expect("get").expect("exists");
    }
    assert_eq!(seqs(&*store, "t-1").await, (0..13).collect::<Vec<_>>());
    let tail = store.events("t-1", 10, 100).await.expect("events");
    assert_eq!(
        tail.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![10, 11, 12]
    );
    assert_eq!(tail[0].event, status_event(&base.record, "r3e0"));
    let window = store.events("t-1", 4, 2).await.expect("events");
    assert_eq!(window.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![4, 5]);
    assert!(
        store
            .events("t-1", 13, 10)
            .await
            .expect("events")
            .is_empty()
    );
}

pub async fn message_ids_are_deduplicated(store: Arc<dyn Store>) {
    let rec = record("t-1", "ctx", TEAM, TaskState::Working, at(0));
    let mut new = NewTask::new(rec.clone());
    new.message_ids = vec!["m-1".into()];
    store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .expect("create");
    let base = store.get("t-1").await.expect("get").expect("exists");

    let mut again = update(&base);
    again.message_ids = vec!["m-1".into()];
    again.history = vec![user_message("m-1", "again")];
    assert_eq!(
        conflict(commit_one(&*store, again).await),
        Conflict::DuplicateMessage {
            task_id: "t-1".into(),
            message_id: "m-1".into()
        }
    );
    assert!(
        store
            .history("t-1", None)
            .await
            .expect("history")
            .is_empty(),
        "nothing applied"
    );

    let item = |id: &str, secs| InboxItem {
        key: InboxKey {
            enqueued_at: at(secs),
            message_id: id.into(),
        },
        sender: "alice".into(),
        message: user_message(id, "hi"),
    };
    let dup = store.enqueue("t-1", item("m-1", 1)).await;
    assert_eq!(
        conflict(dup),
        Conflict::DuplicateMessage {
            task_id: "t-1".into(),
            message_id: "m-1".into()
        }
    );
    store.enqueue("t-1", item("m-2", 2)).await.expect("new id");
    let dup = store.enqueue("t-1", item("m-2", 3)).await;
    assert_eq!(
        conflict(dup),
        Conflict::DuplicateMessage {
            task_id: "t-1".into(),
            message_id: "m-2".into()
        }
    );
    let mut late = update(&base);
    late.message_ids = vec!["m-2".into()];
    assert!(matches!(
        conflict(commit_one(&*store, late).await),
        Conflict::DuplicateMessage { .. }
    ));
    // Ids are per task: another task may receive the same id.
    let mut other = NewTask::new(record("t-2", "ctx", TEAM, TaskState::Working, at(0)));
    other.message_ids = vec!["m-1".into()];
    store
        .commit(vec![Change::Create(Box::new(other))])
        .await
        .expect("ids are per task");
}

pub async fn history_reads_all_or_the_newest(store: Arc<dyn Store>) {
    let mut base = create(
        &*store,
        record("t-1", "ctx", TEAM, TaskState::Working, at(0)),
    )
    .await;
    for batch in 0..3 {
        let mut u = update(&base);
        u.history = (0..4)
            .map(|i| user_message(&format!("m-{batch}-{i}"), &format!("text {batch} {i}")))
            .collect();
        commit_one(&*store, u).await.expect("append");
        base = store.get("t-1").await.expect("get").expect("exists");
    }
    assert_eq!(base.counters.history, 12);
    let all = store.history("t-1", None).await.expect("history");
    let ids: Vec<_> = all.iter().map(|m| m.message_id.clone()).collect();
    let expected: Vec<_> = (0..3)
        .flat_map(|b| (0..4).map(move |i| format!("m-{b}-{i}")))
        .collect();
    assert_eq!(ids, expected);
    let newest = store.history("t-1", Some(5)).await.expect("history");
    assert_eq!(newest, all[7..].to_vec());
    assert!(
        store
            .history("t-1", Some(0))
            .await
            .expect("history")
            .is_empty()
    );
    assert_eq!(store.history("t-1", Some(100)).await.expect("history"), all);
}

pub async fn documents_over_the_cap_are_refused(store: Arc<dyn Store>) {
    let base = create(
        &*store,
        record("t-1", "ctx", TEAM, TaskState::Working, at(0)),
    )
    .await;
    let mut u = update(&base);
    let mut huge = user_message("m-big", "");
    huge.parts = vec![
        Part::text("short"),
        Part::text("x".repeat(MAX_DOCUMENT_BYTES + 10)),
    ];
    u.history = vec![user_message("m-ok", "fine"), huge];
    let err = commit_one(&*store, u).await.expect_err("too large");
    let text = err.to_string();
    assert!(matches!(err, StoreError::TooLarge(_)), "{err:?}");
    assert!(
        text.starts_with("message m-big is 1.0 MiB") && text.contains("part, #2,"),
        "{text}"
    );
    assert!(
        store
            .history("t-1", None)
            .await
            .expect("history")
            .is_empty(),
        "nothing applied"
    );

    let mut big_task = base.record.clone();
    big_task.extension.description = "d".repeat(400 * 1024);
    let mut u = update(&base);
    u.record = Some(big_task);
    let err = commit_one(&*store, u).await.expect_err("too large");
    assert!(err.to_string().starts_with("task t-1 is 400."), "{err}");

    let mut no_ts = record("t-2", "ctx", TEAM, TaskState::Working, at(0));
    no_ts.status.timestamp = None;
    let err = store
        .commit(vec![Change::Create(Box::new(NewTask::new(no_ts)))])
        .await
        .expect_err("invalid");
    assert!(matches!(err, StoreError::Invalid(_)), "{err:?}");
}

fn artifact(id: &str, text: &str) -> Artifact {
    Artifact {
        artifact_id: id.into(),
        name: Some(id.into()),
        description: None,
        parts: vec![Part::text(text)],
        metadata: None,
        extensions: None,
    }
}

pub async fn artifacts_keep_their_first_order(store: Arc<dyn Store>) {
    let base = create(
        &*store,
        record("t-1", "ctx", TEAM, TaskState::Working, at(0)),
    )
    .await;
    let mut u = update(&base);
    u.artifacts = vec![artifact("zeta", "z1"), artifact("alpha", "a1")];
    commit_one(&*store, u).await.expect("write");
    let base = store.get("t-1").await.expect("get").expect("exists");
    assert_eq!(
        base.counters.artifact_ids,
        vec!["zeta".to_owned(), "alpha".to_owned()]
    );
    let mut u = update(&base);
    u.artifacts = vec![artifact("beta", "b1"), artifact("zeta", "z2")];
    commit_one(&*store, u).await.expect("write");
    let got = store.artifacts("t-1").await.expect("artifacts");
    assert_eq!(
        got,
        vec![
            artifact("zeta", "z2"),
            artifact("alpha", "a1"),
            artifact("beta", "b1")
        ]
    );
}

/// `TaskUpdate::applied` (what callers use instead of reading back after a commit) agrees
/// with the store, for updates with and without a new record, events, history, artifacts.
pub async fn an_update_applied_is_what_the_store_reads(store: Arc<dyn Store>) {
    let mut base = create(
        &*store,
        record("t-1", "ctx", TEAM, TaskState::Submitted, at(0)),
    )
    .await;
    type Step = Box<dyn Fn(&mut TaskUpdate)>;
    let steps: Vec<Step> = vec![
        Box::new(|u| {
            let mut next = u.base.record.clone();
            next.status.state = TaskState::Working;
            u.events = vec![status_event(&next, "working")];
            u.record = Some(next);
        }),
        Box::new(|u| {
            u.history = vec![user_message("m-1", "hi"), user_message("m-2", "there")];
            u.artifacts = vec![artifact("zeta", "z1"), artifact("alpha", "a1")];
        }),
        Box::new(|u| {
            u.artifacts = vec![artifact("alpha", "a2"), artifact("beta", "b1")];
            u.events = vec![
                status_event(&u.base.record, "one"),
                status_event(&u.base.record, "two"),
            ];
        }),
        Box::new(|_| {}),
    ];
    for step in steps {
        let mut u = update(&base);
        step(&mut u);
        let applied = u.applied();
        let committed = commit_one(&*store, u).await.expect("commit");
        let read = store.get("t-1").await.expect("get").expect("exists");
        assert_eq!(committed.version, read.version);
        assert_eq!(applied, read);
        base = read;
    }
    assert_eq!(base.counters.artifact_ids, ["zeta", "alpha", "beta"]);
    assert_eq!((base.counters.events, base.counters.history), (4, 2));
}

pub async fn a_multi_task_commit_is_atomic(store: Arc<dyn Store>) {
    let parent = create(&*store, record("p", "ctx", TEAM, TaskState::Working, at(0))).await;
    let mut child_rec = record("p.1", "ctx", TEAM, TaskState::Submitted, at(1));
    child_rec
        .extension
        .parent_tasks
        .push(task_core::extension::TaskRef::local("p"));
    let mut linked = parent.record.clone();
    linked
        .extension
        .sub_tasks
        .push(task_core::extension::TaskRef::local("p.1"));

    // The parent changed meanwhile: neither the child nor the link is written.
    let stale_parent = parent.clone();
    commit_one(&*store, update(&parent))
        .await
        .expect("someone else writes the parent");
    let mut link = update(&stale_parent);
    link.record = Some(linked.clone());
    let err = store
        .commit(vec![
            Change::Create(Box::new(NewTask::new(child_rec.clone()))),
            Change::Update(Box::new(link)),
        ])
        .await;
    assert_eq!(conflict(err), Conflict::TaskChanged("p".into()));
    assert!(store.get("p.1").await.expect("get").is_none());

    let fresh = store.get("p").await.expect("get").expect("exists");
    let mut link = update(&fresh);
    link.record = Some(linked);
    let committed = store
        .commit(vec![
            Change::Create(Box::new(NewTask::new(child_rec))),
            Change::Update(Box::new(link)),
        ])
        .await
        .expect("both");
    assert_eq!(
        committed
            .iter()
            .map(|c| c.task_id.as_str())
            .collect::<Vec<_>>(),
        ["p.1", "p"]
    );
    assert!(store.get("p.1").await.expect("get").is_some());
    assert_eq!(
        store
            .get("p")
            .await
            .expect("get")
            .expect("exists")
            .record
            .extension
            .sub_tasks
            .len(),
        1
    );

    // An existing child id fails the whole commit, the parent's update included.
    let now = store.get("p").await.expect("get").expect("exists");
    let mut bump = update(&now);
    bump.events.push(status_event(&now.record, "x"));
    let err = store
        .commit(vec![
            Change::Update(Box::new(bump)),
            Change::Create(Box::new(NewTask::new(record(
                "p.1",
                "ctx",
                TEAM,
                TaskState::Submitted,
                at(2),
            )))),
        ])
        .await;
    assert_eq!(conflict(err), Conflict::TaskExists("p.1".into()));
    assert_eq!(
        store.get("p").await.expect("get").expect("exists").version,
        now.version
    );
}

pub async fn a_task_is_created_with_its_first_message_queued(store: Arc<dyn Store>) {
    let rec = record("t-1", "ctx", TEAM, TaskState::Submitted, at(0));
    let first = InboxItem {
        key: InboxKey {
            enqueued_at: at(0),
            message_id: "m-1".into(),
        },
        sender: "alice".into(),
        message: user_message("m-1", &"é".repeat(300 * 1024)),
    };
    let mut new = NewTask::new(rec.clone());
    new.events.push(snapshot(&rec));
    new.inbox.push(first.clone());
    store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .expect("create");
    assert_eq!(
        store.inbox("t-1").await.expect("inbox"),
        vec![first.clone()]
    );
    // Its id was recorded like an enqueued message's.
    let again = InboxItem {
        key: InboxKey {
            enqueued_at: at(1),
            message_id: "m-1".into(),
        },
        ..first.clone()
    };
    assert_eq!(
        conflict(store.enqueue("t-1", again).await),
        Conflict::DuplicateMessage {
            task_id: "t-1".into(),
            message_id: "m-1".into()
        }
    );
    // An id both listed and queued is a repeat within the creation: nothing is written.
    let rec2 = record("t-2", "ctx", TEAM, TaskState::Submitted, at(0));
    let mut twice = NewTask::new(rec2);
    twice.message_ids.push("m-1".into());
    twice.inbox.push(first);
    assert_eq!(
        conflict(store.commit(vec![Change::Create(Box::new(twice))]).await),
        Conflict::DuplicateMessage {
            task_id: "t-2".into(),
            message_id: "m-1".into()
        }
    );
    assert!(store.get("t-2").await.expect("get").is_none());
}

/// A task created with its run lease is leased exactly as if `acquire` had taken it.
pub async fn a_task_is_created_with_its_lease(store: Arc<dyn Store>) {
    let rec = record("t-1", "ctx", TEAM, TaskState::Working, at(0));
    let lease = Lease {
        task_id: "t-1".into(),
        owner: "creator".into(),
        token: "token-1".into(),
        expires_at: at(30),
    };
    let mut new = NewTask::new(rec.clone());
    new.events.push(snapshot(&rec));
    new.lease = Some(lease.clone());
    store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .expect("create");
    assert_eq!(
        conflict(
            store
                .acquire("t-1", "other", at(10), Duration::seconds(30))
                .await
        ),
        Conflict::LeaseHeld {
            task_id: "t-1".into(),
            expires_at: at(30)
        }
    );
    let renewed = store
        .renew(&lease, at(20), Duration::seconds(30))
        .await
        .expect("the creator holds it");
    assert_eq!(renewed.expires_at, at(50));
    assert_eq!(
        store.expired_leases(at(51), 10).await.expect("expired"),
        vec!["t-1".to_owned()]
    );
    store.release(&renewed).await.expect("release");
    store
        .acquire("t-1", "other", at(21), Duration::seconds(30))
        .await
        .expect("free after release");

    // A creation that fails writes no lease either.
    let mut again = NewTask::new(rec);
    again.lease = Some(Lease {
        token: "token-2".into(),
        ..lease
    });
    assert_eq!(
        conflict(store.commit(vec![Change::Create(Box::new(again))]).await),
        Conflict::TaskExists("t-1".into())
    );
}

/// An update may end its runner's run: the lease it names is given up once the update is
/// applied, unless another runner holds the task by then (that lease stays, and the update is
/// applied all the same).
pub async fn an_update_gives_up_the_runners_lease(store: Arc<dyn Store>) {
    let rec = record("t-1", "ctx", TEAM, TaskState::Working, at(0));
    let lease = Lease {
        task_id: "t-1".into(),
        owner: "runner-a".into(),
        token: "token-1".into(),
        expires_at: at(30),
    };
    let mut new = NewTask::new(rec);
    new.lease = Some(lease.clone());
    store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .expect("create");
    let base = store.get("t-1").await.expect("get").expect("exists");
    let mut update = TaskUpdate::new(base);
    update.history = vec![user_message("m-1", "last")];
    update.release = Some(lease.clone());
    store
        .commit(vec![Change::Update(Box::new(update))])
        .await
        .expect("the last write of the run");
    let b = store
        .acquire("t-1", "runner-b", at(10), Duration::seconds(30))
        .await
        .expect("given up with the update, long before it expired");

    // Runner A's lease is gone; runner B's stays when A names its old lease again.
    let base = store.get("t-1").await.expect("get").expect("exists");
    let mut late = TaskUpdate::new(base);
    late.history = vec![user_message("m-2", "late")];
    late.release = Some(lease);
    store
        .commit(vec![Change::Update(Box::new(late))])
        .await
        .expect("not refused for a lease it no longer holds");
    assert_eq!(
        conflict(
            store
                .acquire("t-1", "runner-c", at(20), Duration::seconds(30))
                .await
        ),
        Conflict::LeaseHeld {
            task_id: "t-1".into(),
            expires_at: b.expires_at
        }
    );
    let history = store.history("t-1", None).await.expect("history");
    assert_eq!(history.len(), 2, "both updates applied");
}

/// Transcript entries are numbered per task from 0, written with an update, read from a
/// number on; the counters count them.
pub async fn the_transcript_is_appended_and_read_from_a_number(store: Arc<dyn Store>) {
    let base = create(
        &*store,
        record("t-1", "ctx", TEAM, TaskState::Working, at(0)),
    )
    .await;
    assert!(store.transcript("t-1", 0).await.expect("read").is_empty());
    let mut u = update(&base);
    u.transcript = vec![
        serde_json::json!({"role": "user", "text": "hello"}),
        serde_json::json!({"role": "assistant", "text": null, "tool_calls": [{"id": "c1"}]}),
    ];
    commit_one(&*store, u).await.expect("write");
    let base = store.get("t-1").await.expect("get").expect("exists");
    assert_eq!(base.counters.transcript, 2);
    let mut u = update(&base);
    u.transcript = vec![serde_json::json!({"role": "tool_results", "results": []})];
    let big = "x".repeat(200 * 1024);
    u.transcript
        .push(serde_json::json!({"role": "user", "text": big}));
    commit_one(&*store, u).await.expect("write");
    let all = store.transcript("t-1", 0).await.expect("read");
    assert_eq!(all.len(), 4);
    assert_eq!(all[0]["text"], "hello");
    assert_eq!(all[3]["text"].as_str().map(str::len), Some(200 * 1024));
    let rest = store.transcript("t-1", 2).await.expect("read");
    assert_eq!(rest, all[2..].to_vec());
    assert!(store.transcript("t-1", 9).await.expect("read").is_empty());
    assert!(store.transcript("nope", 0).await.expect("read").is_empty());
    // An entry over the document cap is refused whole.
    let base = store.get("t-1").await.expect("get").expect("exists");
    let mut u = update(&base);
    u.transcript = vec![serde_json::json!({"text": "x".repeat(MAX_DOCUMENT_BYTES + 1)})];
    assert!(matches!(
        commit_one(&*store, u).await,
        Err(StoreError::TooLarge(_))
    ));
    assert_eq!(store.transcript("t-1", 0).await.expect("read").len(), 4);
}

/// An `Enqueue` queues a message for another task atomically with the commit's other
/// changes, with `enqueue`'s checks; a failed check fails the whole commit.
pub async fn a_commit_can_queue_a_message_for_another_task(store: Arc<dyn Store>) {
    let parent = create(&*store, record("p", "ctx", TEAM, TaskState::Working, at(0))).await;
    let child = create(
        &*store,
        record("p.1", "ctx", TEAM, TaskState::Working, at(1)),
    )
    .await;
    let note = |id: &str| InboxItem {
        key: InboxKey {
            enqueued_at: at(5),
            message_id: id.into(),
        },
        sender: "agent".into(),
        message: user_message(id, "Sub-task p.1 is COMPLETED: done"),
    };
    let mut done = child.record.clone();
    done.status.state = TaskState::Completed;
    let mut u = update(&child);
    u.record = Some(done.clone());
    u.events = vec![status_event(&done, "completed")];
    let committed = store
        .commit(vec![
            Change::Update(Box::new(u)),
            Change::Enqueue {
                task_id: "p".into(),
                item: Box::new(note("n-1")),
            },
        ])
        .await
        .expect("commit");
    assert_eq!(committed.len(), 2);
    assert_eq!(store.inbox("p").await.expect("inbox"), vec![note("n-1")]);
    let p = store.get("p").await.expect("get").expect("exists");
    assert_eq!(
        p.version, parent.version,
        "queueing does not touch the parent's version"
    );

    // A repeated id, a missing task, a terminal task: the commit fails, nothing is written.
    let child = store.get("p.1").await.expect("get").expect("exists");
    for (target, id, expect) in [
        ("p", "n-1", "duplicate"),
        ("nope", "n-2", "missing"),
        ("p.1", "n-3", "self"),
    ] {
        let mut u = update(&child);
        u.events = vec![status_event(&child.record, "again")];
        let result = store
            .commit(vec![
                Change::Update(Box::new(u)),
                Change::Enqueue {
                    task_id: target.into(),
                    item: Box::new(note(id)),
                },
            ])
            .await;
        match expect {
            "duplicate" => assert_eq!(
                conflict(result),
                Conflict::DuplicateMessage {
                    task_id: "p".into(),
                    message_id: "n-1".into()
                }
            ),
            "missing" => assert!(matches!(result, Err(StoreError::NotFound(_))), "{result:?}"),
            // The same task changed twice in one commit.
            _ => assert!(matches!(result, Err(StoreError::Invalid(_))), "{result:?}"),
        }
    }
    let mut canceled = store.get("p").await.expect("get").expect("exists");
    let mut rec = canceled.record.clone();
    rec.status.state = TaskState::Canceled;
    let mut u = update(&canceled);
    u.record = Some(rec);
    commit_one(&*store, u).await.expect("cancel the parent");
    canceled = store.get("p").await.expect("get").expect("exists");
    assert_eq!(canceled.record.state(), &TaskState::Canceled);
    let mut u = update(&child);
    u.events = vec![status_event(&child.record, "late")];
    let result = store
        .commit(vec![
            Change::Update(Box::new(u)),
            Change::Enqueue {
                task_id: "p".into(),
                item: Box::new(note("n-4")),
            },
        ])
        .await;
    assert_eq!(conflict(result), Conflict::TaskTerminal("p".into()));
    let after = store.get("p.1").await.expect("get").expect("exists");
    assert_eq!(
        after.version, child.version,
        "nothing of the failed commit was written"
    );
    assert_eq!(store.inbox("p").await.expect("inbox").len(), 1);
}

async fn list_ids(store: &dyn Store, who: &str, query: &ListQuery) -> (Vec<String>, String, usize) {
    let page = store.list(who, query).await.expect("list");
    (
        page.tasks.iter().map(|t| t.record.id.clone()).collect(),
        page.next_page_token,
        page.total_size,
    )
}

pub async fn list_is_scoped_ordered_filtered_and_paged(store: Arc<dyn Store>) {
    // Seven of alice's tasks with distinct status timestamps, in two contexts; one of bob's.
    for (i, state) in [
        TaskState::Working,
        TaskState::Completed,
        TaskState::Working,
        TaskState::InputRequired,
        TaskState::Working,
        TaskState::Completed,
        TaskState::Working,
    ]
    .into_iter()
    .enumerate()
    {
        let ctx = if i % 2 == 0 { "even" } else { "odd" };
        create(
            &*store,
            record(
                &format!("t-{i}"),
                ctx,
                &[("alice", Role::Reporter)],
                state,
                at(i as i64 * 10),
            ),
        )
        .await;
    }
    create(
        &*store,
        record(
            "b-1",
            "even",
            &[("bob", Role::Reporter)],
            TaskState::Working,
            at(1000),
        ),
    )
    .await;

    let all = |size| ListQuery {
        page_size: size,
        ..Default::default()
    };
    let (ids, token, total) = list_ids(&*store, "alice", &all(50)).await;
    assert_eq!(ids, ["t-6", "t-5", "t-4", "t-3", "t-2", "t-1", "t-0"]);
    assert_eq!((token.as_str(), total), ("", 7));
    assert_eq!(
        list_ids(&*store, "mallory", &all(50)).await,
        (vec![], String::new(), 0)
    );

    // Pages of 3, following the tokens.
    let mut seen = Vec::new();
    let mut query = all(3);
    loop {
        let (ids, token, total) = list_ids(&*store, "alice", &query).await;
        assert_eq!(total, 7);
        assert!(ids.len() <= 3);
        seen.extend(ids);
        if token.is_empty() {
            break;
        }
        query.page_token = Some(token);
    }
    assert_eq!(seen, ["t-6", "t-5", "t-4", "t-3", "t-2", "t-1", "t-0"]);

    let filtered = ListQuery {
        context_id: Some("even".into()),
        state: Some(TaskState::Working),
        ..all(2)
    };
    let (ids, token, total) = list_ids(&*store, "alice", &filtered).await;
    assert_eq!((ids, total), (vec!["t-6".to_owned(), "t-4".to_owned()], 4));
    let (ids, token, _) = list_ids(
        &*store,
        "alice",
        &ListQuery {
            page_token: Some(token),
            ..filtered.clone()
        },
    )
    .await;
    assert_eq!(
        (ids, token.as_str()),
        (vec!["t-2".to_owned(), "t-0".to_owned()], "")
    );

    let recent = ListQuery {
        status_after: Some(at(30)),
        ..all(50)
    };
    assert_eq!(
        list_ids(&*store, "alice", &recent).await.0,
        ["t-6", "t-5", "t-4", "t-3"]
    );
    let done = ListQuery {
        state: Some(TaskState::Completed),
        ..all(50)
    };
    assert_eq!(
        list_ids(&*store, "alice", &done).await,
        (vec!["t-5".to_owned(), "t-1".to_owned()], String::new(), 2)
    );

    let bad = ListQuery {
        page_token: Some("not a token".into()),
        ..all(5)
    };
    assert!(matches!(
        store.list("alice", &bad).await,
        Err(StoreError::Invalid(_))
    ));
}

pub async fn list_follows_participant_and_status_changes(store: Arc<dyn Store>) {
    let first = create(
        &*store,
        record("t-1", "ctx", TEAM, TaskState::Working, at(0)),
    )
    .await;
    create(
        &*store,
        record("t-2", "ctx", TEAM, TaskState::Working, at(10)),
    )
    .await;
    let q = ListQuery {
        page_size: 10,
        ..Default::default()
    };
    assert_eq!(list_ids(&*store, "alice", &q).await.0, ["t-2", "t-1"]);

    // t-1's status changes later: it moves to the front; bob joins it, alice leaves it.
    let mut changed = first.record.clone();
    changed.status.timestamp = Some(at(20));
    changed.status.state = TaskState::InputRequired;
    changed.extension.participants.retain(|p| p.id != "alice");
    changed.extension.participants.push(Participant::new(
        "bob",
        ParticipantKind::Human,
        Role::Watcher,
    ));
    let mut u = update(&first);
    u.record = Some(changed);
    commit_one(&*store, u).await.expect("update");
    assert_eq!(list_ids(&*store, "ops", &q).await.0, ["t-1", "t-2"]);
    assert_eq!(list_ids(&*store, "alice", &q).await.0, ["t-2"]);
    assert_eq!(list_ids(&*store, "bob", &q).await.0, ["t-1"]);
    let waiting = ListQuery {
        state: Some(TaskState::InputRequired),
        ..q.clone()
    };
    assert_eq!(list_ids(&*store, "ops", &waiting).await.0, ["t-1"]);
    let listed = store.list("bob", &q).await.expect("list");
    assert_eq!(
        listed.tasks[0].record.status.state,
        TaskState::InputRequired,
        "lists give the current task"
    );
}

// ---------------------------------------------------------------------------------------
// Leases, inbox, audit (push configs: `contract/push.rs`)
// ---------------------------------------------------------------------------------------

pub async fn leases(store: Arc<dyn Store>) {
    let ttl = Duration::seconds(30);
    let a = store
        .acquire("t-1", "runner-a", at(0), ttl)
        .await
        .expect("free");
    assert_eq!((a.owner.as_str(), a.expires_at), ("runner-a", at(30)));
    let held = store.acquire("t-1", "runner-b", at(10), ttl).await;
    assert_eq!(
        conflict(held),
        Conflict::LeaseHeld {
            task_id: "t-1".into(),
            expires_at: at(30)
        }
    );
    let a = store.renew(&a, at(20), ttl).await.expect("renew");
    assert_eq!(a.expires_at, at(50));
    assert!(
        store
            .expired_leases(at(40), 10)
            .await
            .expect("expired")
            .is_empty()
    );
    assert_eq!(
        store.expired_leases(at(51), 10).await.expect("expired"),
        vec!["t-1".to_owned()]
    );

    // After expiry another runner may steal it; the old holder has lost it.
    let b = store
        .acquire("t-1", "runner-b", at(51), ttl)
        .await
        .expect("steal an expired lease");
    assert_eq!(
        conflict(store.renew(&a, at(52), ttl).await),
        Conflict::LeaseLost("t-1".into())
    );
    assert_eq!(
        conflict(store.release(&a).await),
        Conflict::LeaseLost("t-1".into())
    );
    // The same owner acquiring again gets a new token; the old token is lost.
    store.release(&b).await.expect("release");
    assert_eq!(
        conflict(store.release(&b).await),
        Conflict::LeaseLost("t-1".into())
    );
    let b2 = store
        .acquire("t-1", "runner-b", at(60), ttl)
        .await
        .expect("free again");
    assert_ne!(b2.token, b.token);
    assert_eq!(
        conflict(store.renew(&b, at(61), ttl).await),
        Conflict::LeaseLost("t-1".into())
    );
    store
        .acquire("t-2", "runner-c", at(0), Duration::seconds(1))
        .await
        .expect("another task");
    assert_eq!(
        store.expired_leases(at(100), 10).await.expect("expired"),
        vec!["t-2".to_owned(), "t-1".to_owned()]
    );
    assert_eq!(
        store.expired_leases(at(100), 1).await.expect("expired"),
        vec!["t-2".to_owned()]
    );
}

pub async fn inbox(store: Arc<dyn Store>) {
    let item = |id: &str, secs| InboxItem {
        key: InboxKey {
            enqueued_at: at(secs),
            message_id: id.into(),
        },
        sender: "alice".into(),
        message: user_message(id, &format!("text of {id}")),
    };
    assert!(matches!(
        store.enqueue("nope", item("m-1", 0)).await,
        Err(StoreError::NotFound(_))
    ));
    let base = create(
        &*store,
        record("t-1", "ctx", TEAM, TaskState::Working, at(0)),
    )
    .await;
    for (id, secs) in [("m-3", 3), ("m-1", 1), ("m-2", 1)] {
        store.enqueue("t-1", item(id, secs)).await.expect("enqueue");
    }
    let waiting = store.inbox("t-1").await.expect("inbox");
    assert_eq!(
        waiting,
        vec![item("m-1", 1), item("m-2", 1), item("m-3", 3)]
    );

    // The runner moves two into the history and consumes them, atomically.
    let mut drain = update(&base);
    drain.consume_inbox = vec![waiting[0].key.clone(), waiting[1].key.clone()];
    drain.history = vec![waiting[0].message.clone(), waiting[1].message.clone()];
    commit_one(&*store, drain).await.expect("drain");
    assert_eq!(
        store.inbox("t-1").await.expect("inbox"),
        vec![item("m-3", 3)]
    );
    // A second runner with the same items (and a current version) finds them gone.
    let now = store.get("t-1").await.expect("get").expect("exists");
    let mut twice = update(&now);
    twice.consume_inbox = vec![waiting[0].key.clone()];
    twice.history = vec![waiting[0].message.clone()];
    assert_eq!(
        conflict(commit_one(&*store, twice).await),
        Conflict::InboxItemGone("t-1".into())
    );
    assert_eq!(
        store.history("t-1", None).await.expect("history").len(),
        2,
        "processed once"
    );

    // A terminal task takes no more messages.
    let mut done = now.record.clone();
    done.status.state = TaskState::Completed;
    let mut finish = update(&now);
    finish.record = Some(done);
    commit_one(&*store, finish).await.expect("complete");
    assert_eq!(
        conflict(store.enqueue("t-1", item("m-4", 4)).await),
        Conflict::TaskTerminal("t-1".into())
    );
}

pub async fn audit_log(store: Arc<dyn Store>) {
    let entry = |secs, id: &str, accepted| {
        AuditEntry::new(
            at(secs),
            id,
            Some("mallory"),
            accepted,
            if accepted {
                "accepted"
            } else {
                "not a participant"
            },
        )
    };
    let rec = record("t-1", "ctx", TEAM, TaskState::Working, at(0));
    let mut new = NewTask::new(rec);
    new.audit = vec![entry(0, "m-0", true)];
    store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .expect("create");
    let base = store.get("t-1").await.expect("get").expect("exists");
    let mut u = update(&base);
    // A refusal keeps the size and a short excerpt of what was refused, never all of it.
    let described = entry(1, "m-2", false).describing(1_800_000, &"x".repeat(10_000));
    u.audit = vec![entry(1, "m-1", false), described.clone()];
    commit_one(&*store, u).await.expect("audit");
    assert_eq!(
        store.audit("t-1").await.expect("audit"),
        vec![entry(0, "m-0", true), entry(1, "m-1", false), described]
    );
    let kept = store.audit("t-1").await.expect("audit");
    assert_eq!(kept[2].size_bytes, Some(1_800_000));
    assert_eq!(
        kept[2].excerpt.as_deref().map(str::len),
        Some(crate::AUDIT_EXCERPT_CHARS)
    );
}

/// 5 MB of history in 100 KB messages and 200 artifacts, read back byte for byte.
pub async fn a_long_conversation_is_stored_intact(store: Arc<dyn Store>) {
    let mut base = create(
        &*store,
        record("t-1", "ctx", TEAM, TaskState::Working, at(0)),
    )
    .await;
    let body = |i: usize| format!("{i:04}:{}", "lorem ipsum ".repeat(100 * 1024 / 12));
    let mut expected_history = Vec::new();
    for batch in 0..10 {
        let mut u = update(&base);
        for i in batch * 5..batch * 5 + 5 {
            u.history.push(user_message(&format!("m-{i}"), &body(i)));
        }
        for i in batch * 20..batch * 20 + 20 {
            u.artifacts
                .push(artifact(&format!("a-{i:03}"), &format!("artifact {i}")));
        }
        expected_history.extend(u.history.clone());
        commit_one(&*store, u).await.expect("append");
        base = store.get("t-1").await.expect("get").expect("exists");
    }
    let total: usize = expected_history
        .iter()
        .map(|m| serde_json::to_string(m).expect("json").len())
        .sum();
    assert!(total > 5_000_000, "{total} bytes of history");
    let history = store.history("t-1", None).await.expect("history");
    assert!(history == expected_history, "history differs");
    let artifacts = store.artifacts("t-1").await.expect("artifacts");
    assert_eq!(artifacts.len(), 200);
    assert_eq!(artifacts[199], artifact("a-199", "artifact 199"));
    // And a single message of nearly the cap (several chunks) comes back intact.
    let mut u = update(&base);
    let big = user_message("m-big", &"é".repeat(MAX_DOCUMENT_BYTES / 2 - 100));
    u.history.push(big.clone());
    commit_one(&*store, u).await.expect("append");
    assert_eq!(
        store.history("t-1", Some(1)).await.expect("history"),
        vec![big]
    );
}

// ---------------------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------------------

/// 50 writers each append one event and change the task, re-reading on conflict: every
/// write lands exactly once, versions advance by one per write, events are gapless.
pub async fn concurrent_updates_lose_nothing(store: Arc<dyn Store>) {
    create(
        &*store,
        record("t-1", "ctx", TEAM, TaskState::Working, at(0)),
    )
    .await;
    let writers: Vec<_> = (0..50)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut attempts = 0;
                loop {
                    attempts += 1;
                    let base = store.get("t-1").await.expect("get").expect("exists");
                    let mut rec = base.record.clone();
                    rec.extension.description.push_str(&format!("[w{w}]"));
                    let mut u = TaskUpdate::new(base.clone());
                    u.allowed_states = vec![TaskState::Working];
                    u.events = vec![status_event(&rec, &format!("w{w}"))];
                    u.record = Some(rec);
                    match commit_one(&*store, u).await {
                        Ok(c) => return (c.event_seqs[0], attempts),
                        Err(StoreError::Conflict(Conflict::TaskChanged(_))) => continue,
                        Err(other) => panic!("writer {w}: {other}"),
                    }
                }
            })
        })
        .collect();
    let mut seqs_won = BTreeSet::new();
    for result in futures::future::join_all(writers).await {
        let (seq, _) = result.expect("writer task");
        assert!(seqs_won.insert(seq), "seq {seq} given twice");
    }
    let now = store.get("t-1").await.expect("get").expect("exists");
    assert_eq!(now.version, 51);
    for w in 0..50 {
        assert_eq!(
            now.record
                .extension
                .description
                .matches(&format!("[w{w}]"))
                .count(),
            1,
            "writer {w}"
        );
    }
    assert_eq!(seqs(&*store, "t-1").await, (0..51).collect::<Vec<_>>());
    let events = store.events("t-1", 1, 100).await.expect("events");
    let mut texts: Vec<String> = events
        .iter()
        .map(|e| match &e.event {
            StreamResponse::StatusUpdate(s) => s.status.message.as_ref().expect("message").parts[0]
                .as_text()
                .expect("text")
                .to_owned(),
            other => panic!("{other:?}"),
        })
        .collect();
    texts.sort();
    let mut expected: Vec<String> = (0..50).map(|w| format!("w{w}")).collect();
    expected.sort();
    assert_eq!(texts, expected);
}

/// 50 writers commit against the same read: exactly one wins.
pub async fn one_winner_per_conflicting_pair(store: Arc<dyn Store>) {
    let base = create(
        &*store,
        record("t-1", "ctx", TEAM, TaskState::Working, at(0)),
    )
    .await;
    let outcomes = futures::future::join_all((0..50).map(|w| {
        let store = store.clone();
        let base = base.clone();
        tokio::spawn(async move {
            let mut rec = base.record.clone();
            rec.status.state = if w % 2 == 0 {
                TaskState::Completed
            } else {
                TaskState::Canceled
            };
            let mut u = TaskUpdate::new(base);
            u.allowed_states = vec![TaskState::Working];
            u.events = vec![status_event(&rec, &format!("w{w}"))];
            u.record = Some(rec);
            commit_one(&*store, u).await
        })
    }))
    .await;
    let (wins, losses): (Vec<_>, Vec<_>) = outcomes
        .into_iter()
        .map(|r| r.expect("task"))
        .partition(Result::is_ok);
    assert_eq!(wins.len(), 1);
    for loss in losses {
        assert_eq!(conflict(loss), Conflict::TaskChanged("t-1".into()));
    }
    assert_eq!(seqs(&*store, "t-1").await, vec![0, 1]);
    assert_eq!(
        store
            .get("t-1")
            .await
            .expect("get")
            .expect("exists")
            .version,
        2
    );
}

/// 50 concurrent role changes by the admin, all from one read: one lands.
pub async fn concurrent_role_changes_have_one_winner(store: Arc<dyn Store>) {
    let members: Vec<(String, Role)> = (0..50)
        .map(|i| (format!("u{i}"), Role::Watcher))
        .chain([("ops".to_owned(), Role::Admin)])
        .collect();
    let refs: Vec<(&str, Role)> = members.iter().map(|(p, r)| (p.as_str(), *r)).collect();
    let base = create(
        &*store,
        record("t-1", "ctx", &refs, TaskState::Working, at(0)),
    )
    .await;
    let outcomes = futures::future::join_all((0..50).map(|i| {
        let store = store.clone();
        let base = base.clone();
        tokio::spawn(async move {
            let mut rec = base.record.clone();
            rec.extension
                .participant_mut(&format!("u{i}"))
                .expect("member")
                .role = Role::Admin;
            let mut u = TaskUpdate::new(base);
            u.actor_role = Some(("ops".into(), Role::Admin));
            u.record = Some(rec);
            commit_one(&*store, u).await
        })
    }))
    .await;
    let wins = outcomes
        .into_iter()
        .map(|r| r.expect("task"))
        .filter(Result::is_ok)
        .count();
    assert_eq!(wins, 1);
    let now = store.get("t-1").await.expect("get").expect("exists");
    let admins = now
        .record
        .extension
        .participants
        .iter()
        .filter(|p| p.role == Role::Admin)
        .count();
    assert_eq!(admins, 2, "ops and exactly one promoted member");
}

/// 50 runners race for one lease: one holds it.
pub async fn concurrent_lease_acquisition_has_one_winner(store: Arc<dyn Store>) {
    let outcomes = futures::future::join_all((0..50).map(|i| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .acquire("t-1", &format!("runner-{i}"), at(0), Duration::seconds(30))
                .await
        })
    }))
    .await;
    let (wins, losses): (Vec<_>, Vec<_>) = outcomes
        .into_iter()
        .map(|r| r.expect("task"))
        .partition(Result::is_ok);
    assert_eq!(wins.len(), 1);
    assert!(
        losses
            .into_iter()
            .all(|l| matches!(conflict(l), Conflict::LeaseHeld { .. }))
    );
}
