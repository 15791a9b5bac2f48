//! The concurrency guarantees: 50 writers at once lose nothing, and of conflicting writes,
//! role changes or lease acquisitions exactly one wins.

use std::collections::BTreeSet;
use std::sync::Arc;

use a2a::{StreamResponse, TaskState};
use chrono::Duration;
use task_core::extension::Role;

use super::fixtures::{
    at, commit_one, conflict, create, race, record, seqs, status_event, task_in, version_of,
};
use crate::error::{Conflict, StoreError};
use crate::model::*;
use crate::port::Store;

/// 50 writers each append one event and change the task, re-reading on conflict: every
/// write lands exactly once, versions advance by one per write, events are gapless.
pub async fn concurrent_updates_lose_nothing(store: Arc<dyn Store>) {
    task_in(&*store, "t-1", TaskState::Working).await;
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
    let base = task_in(&*store, "t-1", TaskState::Working).await;
    let (wins, losses) = race(50, |w| {
        let store = store.clone();
        let base = base.clone();
        async move {
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
        }
    })
    .await;
    assert_eq!(wins.len(), 1);
    for loss in losses {
        assert_eq!(conflict(loss), Conflict::TaskChanged("t-1".into()));
    }
    assert_eq!(seqs(&*store, "t-1").await, vec![0, 1]);
    assert_eq!(version_of(&*store, "t-1").await, 2);
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
    let (wins, _) = race(50, |i| {
        let store = store.clone();
        let base = base.clone();
        async move {
            let mut rec = base.record.clone();
            rec.extension
                .participant_mut(&format!("u{i}"))
                .expect("member")
                .role = Role::Admin;
            let mut u = TaskUpdate::new(base);
            u.actor_role = Some(("ops".into(), Role::Admin));
            u.record = Some(rec);
            commit_one(&*store, u).await
        }
    })
    .await;
    assert_eq!(wins.len(), 1);
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
    let (wins, losses) = race(50, |i| {
        let store = store.clone();
        async move {
            store
                .acquire("t-1", &format!("runner-{i}"), at(0), Duration::seconds(30))
                .await
        }
    })
    .await;
    assert_eq!(wins.len(), 1);
    assert!(
        losses
            .into_iter()
            .all(|l| matches!(conflict(l), Conflict::LeaseHeld { .. }))
    );
}
