//! The size rules: documents over the cap refused, a long conversation stored intact.

use std::sync::Arc;

use a2a::{Part, TaskState};

use super::fixtures::{
    TEAM, artifact, at, commit_one, no_history, record, task_in, update, user_message,
};
use crate::error::StoreError;
use crate::limits::MAX_DOCUMENT_BYTES;
use crate::model::*;
use crate::port::Store;

pub async fn documents_over_the_cap_are_refused(store: Arc<dyn Store>) {
    let base = task_in(&*store, "t-1", TaskState::Working).await;
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
    assert!(no_history(&*store, "t-1").await, "nothing applied");

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

/// 5 MB of history in 100 KB messages and 200 artifacts, read back byte for byte.
pub async fn a_long_conversation_is_stored_intact(store: Arc<dyn Store>) {
    let mut base = task_in(&*store, "t-1", TaskState::Working).await;
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
