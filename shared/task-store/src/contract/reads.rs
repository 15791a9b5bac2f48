//! What a task's reads give back: events from a seq, history, artifacts in their first order,
//! the transcript, the audit log, and `TaskUpdate::applied` agreeing with them.

use std::sync::Arc;

use a2a::TaskState;

use super::fixtures::{
    TEAM, artifact, at, commit_one, create_new, record, seqs, status_event, task_in, update,
    user_message,
};
use crate::error::StoreError;
use crate::limits::MAX_DOCUMENT_BYTES;
use crate::model::*;
use crate::port::Store;

pub async fn events_are_gapless_and_readable_from_a_seq(store: Arc<dyn Store>) {
    let mut base = task_in(&*store, "t-1", TaskState::Working).await;
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

pub async fn history_reads_all_or_the_newest(store: Arc<dyn Store>) {
    let mut base = task_in(&*store, "t-1", TaskState::Working).await;
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

pub async fn artifacts_keep_their_first_order(store: Arc<dyn Store>) {
    let base = task_in(&*store, "t-1", TaskState::Working).await;
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
    let mut base = task_in(&*store, "t-1", TaskState::Submitted).await;
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

/// Transcript entries are numbered per task from 0, written with an update, read from a
/// number on; the counters count them.
pub async fn the_transcript_is_appended_and_read_from_a_number(store: Arc<dyn Store>) {
    let base = task_in(&*store, "t-1", TaskState::Working).await;
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
    let base = create_new(&*store, new).await;
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
