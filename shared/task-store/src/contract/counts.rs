//! ListTasks' `total_size` under every filter, as tasks are created, change state and gain or
//! lose participants; and pages that skip many non-matching tasks still come out whole.

use std::sync::Arc;

use a2a::TaskState;
use task_core::extension::{Participant, ParticipantKind, Role};

use super::fixtures::{at, commit_one, create, record, update};
use crate::model::*;
use crate::port::Store;

/// Every filter combination the port has, with its name (for the assertion messages).
fn queries() -> Vec<(&'static str, ListQuery)> {
    let q = |context: Option<&str>, state: Option<TaskState>, after: Option<i64>| ListQuery {
        context_id: context.map(str::to_owned),
        state,
        status_after: after.map(at),
        page_size: 1,
        page_token: None,
    };
    vec![
        ("all", q(None, None, None)),
        ("working", q(None, Some(TaskState::Working), None)),
        ("completed", q(None, Some(TaskState::Completed), None)),
        ("ctx a", q(Some("a"), None, None)),
        ("ctx b", q(Some("b"), None, None)),
        (
            "ctx a working",
            q(Some("a"), Some(TaskState::Working), None),
        ),
        (
            "ctx b completed",
            q(Some("b"), Some(TaskState::Completed), None),
        ),
        ("after 20", q(None, None, Some(20))),
        (
            "working after 20",
            q(None, Some(TaskState::Working), Some(20)),
        ),
        ("ctx a after 20", q(Some("a"), None, Some(20))),
        (
            "ctx a working after 20",
            q(Some("a"), Some(TaskState::Working), Some(20)),
        ),
    ]
}

/// `who`'s total for every query of [`queries`], in order; each checked against a full
/// listing (every page read), so a count is never right by accident of the page.
async fn totals(store: &dyn Store, who: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for (name, query) in queries() {
        let page = store.list(who, &query).await.expect("list");
        let mut listed = page.tasks.len();
        let mut token = page.next_page_token.clone();
        while !token.is_empty() {
            let next = ListQuery {
                page_token: Some(token),
                ..query.clone()
            };
            let page = store.list(who, &next).await.expect("list");
            listed += page.tasks.len();
            token = page.next_page_token;
        }
        assert_eq!(
            page.total_size, listed,
            "{who}, {name}: total against pages"
        );
        out.push(page.total_size);
    }
    out
}

fn participant(id: &str, role: Role) -> Participant {
    Participant::new(id, ParticipantKind::Human, role)
}

pub async fn list_counts_follow_creations_states_and_participants(store: Arc<dyn Store>) {
    // alice: t-0 (ctx a, working, at 0), t-1 (ctx b, completed, at 10), t-2 (ctx a, working,
    // at 20), t-3 (ctx a, completed, at 30); bob is on t-1 and t-3 too.
    let specs = [
        ("t-0", "a", TaskState::Working, 0, false),
        ("t-1", "b", TaskState::Completed, 10, true),
        ("t-2", "a", TaskState::Working, 20, false),
        ("t-3", "a", TaskState::Completed, 30, true),
    ];
    let mut tasks = Vec::new();
    for (id, ctx, state, seconds, with_bob) in specs {
        let mut team = vec![("alice", Role::Reporter)];
        if with_bob {
            team.push(("bob", Role::Watcher));
        }
        tasks.push(create(&*store, record(id, ctx, &team, state, at(seconds))).await);
    }
    // all, working, completed, ctx a, ctx b, ctx a working, ctx b completed, after 20,
    // working after 20, ctx a after 20, ctx a working after 20
    assert_eq!(
        totals(&*store, "alice").await,
        [4, 2, 2, 3, 1, 2, 1, 2, 1, 2, 1]
    );
    assert_eq!(
        totals(&*store, "bob").await,
        [2, 0, 2, 1, 1, 0, 1, 1, 0, 1, 0]
    );
    assert_eq!(totals(&*store, "carol").await, [0; 11]);

    // t-0 completes at 40: it leaves "working" and enters "completed" and "after 20".
    let mut done = tasks[0].record.clone();
    done.status.state = TaskState::Completed;
    done.status.timestamp = Some(at(40));
    let mut u = update(&tasks[0]);
    u.record = Some(done);
    commit_one(&*store, u).await.expect("complete t-0");
    assert_eq!(
        totals(&*store, "alice").await,
        [4, 1, 3, 3, 1, 1, 1, 3, 1, 3, 1]
    );

    // bob leaves t-1 and carol joins it; carol joins t-2 too.
    let mut moved = tasks[1].record.clone();
    moved.extension.participants.retain(|p| p.id != "bob");
    moved
        .extension
        .participants
        .push(participant("carol", Role::Watcher));
    let mut u = update(&tasks[1]);
    u.record = Some(moved);
    commit_one(&*store, u).await.expect("participants of t-1");
    let mut joined = tasks[2].record.clone();
    joined
        .extension
        .participants
        .push(participant("carol", Role::Watcher));
    let mut u = update(&tasks[2]);
    u.record = Some(joined);
    commit_one(&*store, u).await.expect("participants of t-2");
    assert_eq!(
        totals(&*store, "bob").await,
        [1, 0, 1, 1, 0, 0, 0, 1, 0, 1, 0]
    );
    assert_eq!(
        totals(&*store, "carol").await,
        [2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    );
    assert_eq!(
        totals(&*store, "alice").await,
        [4, 1, 3, 3, 1, 1, 1, 3, 1, 3, 1],
        "alice's counts do not move when others join or leave"
    );

    // An update without a new record, and one that keeps state, context and time, count
    // nothing twice.
    let current = store.get("t-2").await.expect("get").expect("exists");
    commit_one(&*store, update(&current))
        .await
        .expect("no record");
    let current = store.get("t-2").await.expect("get").expect("exists");
    let mut same = update(&current);
    let mut renamed = current.record.clone();
    renamed.extension.name = "renamed".into();
    same.record = Some(renamed);
    commit_one(&*store, same).await.expect("same place");
    assert_eq!(
        totals(&*store, "carol").await,
        [2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    );

    // Two tasks created in one commit both count.
    let pair = ["p-1", "p-2"].map(|id| {
        let rec = record(
            id,
            "b",
            &[("dave", Role::Reporter)],
            TaskState::Working,
            at(50),
        );
        Change::Create(Box::new(NewTask::new(rec)))
    });
    store.commit(pair.into()).await.expect("create two");
    assert_eq!(
        totals(&*store, "dave").await,
        [2, 2, 0, 0, 2, 0, 0, 2, 2, 0, 0]
    );
}

/// Pages under a filter come out whole and in order however many tasks of the participant
/// the filter leaves out between the matches.
pub async fn filtered_pages_skip_what_does_not_match(store: Arc<dyn Store>) {
    // 40 tasks of alice, at 0..40: every fifth in ctx "rare" and INPUT_REQUIRED, the rest in
    // ctx "common", WORKING.
    for i in 0..40 {
        let rare = i % 5 == 0;
        let (ctx, state) = if rare {
            ("rare", TaskState::InputRequired)
        } else {
            ("common", TaskState::Working)
        };
        let rec = record(
            &format!("t-{i:02}"),
            ctx,
            &[("alice", Role::Reporter)],
            state,
            at(i),
        );
        create(&*store, rec).await;
    }
    let expected: Vec<String> = (0..40)
        .rev()
        .filter(|i| i % 5 == 0)
        .map(|i| format!("t-{i:02}"))
        .collect();
    for query in [
        ListQuery {
            state: Some(TaskState::InputRequired),
            page_size: 3,
            ..Default::default()
        },
        ListQuery {
            context_id: Some("rare".into()),
            page_size: 3,
            ..Default::default()
        },
        ListQuery {
            context_id: Some("rare".into()),
            state: Some(TaskState::InputRequired),
            page_size: 3,
            ..Default::default()
        },
    ] {
        let mut seen = Vec::new();
        let mut next = query.clone();
        loop {
            let page = store.list("alice", &next).await.expect("list");
            assert_eq!(page.total_size, 8, "{query:?}");
            assert!(page.tasks.len() <= 3);
            seen.extend(page.tasks.iter().map(|t| t.record.id.clone()));
            if page.next_page_token.is_empty() {
                break;
            }
            next.page_token = Some(page.next_page_token);
        }
        assert_eq!(seen, expected, "{query:?}");
    }
    // Everything, newest first, in pages of 7; and since 25.
    let mut seen = Vec::new();
    let mut next = ListQuery {
        page_size: 7,
        ..Default::default()
    };
    loop {
        let page = store.list("alice", &next).await.expect("list");
        assert_eq!(page.total_size, 40);
        seen.extend(page.tasks.iter().map(|t| t.record.id.clone()));
        if page.next_page_token.is_empty() {
            break;
        }
        next.page_token = Some(page.next_page_token);
    }
    let all: Vec<String> = (0..40).rev().map(|i| format!("t-{i:02}")).collect();
    assert_eq!(seen, all);
    let recent = ListQuery {
        status_after: Some(at(25)),
        page_size: 100,
        ..Default::default()
    };
    let page = store.list("alice", &recent).await.expect("list");
    assert_eq!(page.total_size, 15);
    assert_eq!(page.tasks.len(), 15);
    assert_eq!(page.tasks[0].record.id, "t-39");
    assert_eq!(page.tasks[14].record.id, "t-25");
}
