//! The push-config part of the contract: owners, who may replace and delete what, the caps,
//! and their atomicity under concurrent writers.

use std::sync::Arc;

use a2a::{TaskPushNotificationConfig, TaskState};

use super::fixtures::{conflict, race, task_in};
use crate::error::{Conflict, StoreError};
use crate::limits::{MAX_PUSH_CONFIGS_PER_PARTICIPANT, MAX_PUSH_CONFIGS_PER_TASK};
use crate::model::*;
use crate::port::Store;

fn push(task: &str, id: &str, url: &str) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        url: url.into(),
        id: Some(id.into()),
        task_id: task.into(),
        token: Some("tok".into()),
        authentication: None,
        tenant: None,
    }
}

fn owned(owner: &str, config: TaskPushNotificationConfig) -> StoredPushConfig {
    StoredPushConfig {
        owner: Some(owner.into()),
        config,
    }
}

fn taken(task: &str, id: &str) -> Conflict {
    Conflict::PushConfigTaken {
        task_id: task.into(),
        config_id: id.into(),
    }
}

fn too_many(task: &str, per_participant: bool) -> Conflict {
    Conflict::TooManyPushConfigs {
        task_id: task.into(),
        per_participant,
        max: if per_participant {
            MAX_PUSH_CONFIGS_PER_PARTICIPANT
        } else {
            MAX_PUSH_CONFIGS_PER_TASK
        },
    }
}

/// Deletes config `id` of `task` within `scope`: whether there was one to delete.
async fn deleted(store: &dyn Store, task: &str, id: &str, scope: DeleteScope<'_>) -> bool {
    store
        .delete_push_config(task, id, scope)
        .await
        .expect("delete")
}

async fn working_task(store: &dyn Store, id: &str) {
    task_in(store, id, TaskState::Working).await;
}

pub async fn push_configs(store: Arc<dyn Store>) {
    working_task(&*store, "t-1").await;
    let missing = store
        .put_push_config("alice", push("nope", "c1", "https://x"))
        .await;
    assert!(
        matches!(missing, Err(StoreError::NotFound(_))),
        "{missing:?}"
    );
    let mut no_id = push("t-1", "c1", "https://x");
    no_id.id = None;
    assert!(matches!(
        store.put_push_config("alice", no_id).await,
        Err(StoreError::Invalid(_))
    ));

    store
        .put_push_config("alice", push("t-1", "c2", "https://b"))
        .await
        .expect("put");
    // "No configs" may only be said of a task that has none.
    assert!(store.may_have_push_configs("t-1"));
    store
        .put_push_config("ops", push("t-1", "c1", "https://a"))
        .await
        .expect("put");
    assert_eq!(
        store.get_push_config("t-1", "c1").await.expect("get"),
        Some(owned("ops", push("t-1", "c1", "https://a")))
    );
    store
        .put_push_config("ops", push("t-1", "c1", "https://a2"))
        .await
        .expect("the owner replaces it");
    let listed = store.list_push_configs("t-1").await.expect("list");
    assert_eq!(
        listed,
        vec![
            owned("ops", push("t-1", "c1", "https://a2")),
            owned("alice", push("t-1", "c2", "https://b")),
        ]
    );
    assert!(deleted(&*store, "t-1", "c1", DeleteScope::Owner("ops")).await);
    assert!(
        !store
            .delete_push_config("t-1", "c1", DeleteScope::Owner("ops"))
            .await
            .expect("delete is idempotent")
    );
    assert_eq!(store.get_push_config("t-1", "c1").await.expect("get"), None);
    assert_eq!(store.list_push_configs("t-1").await.expect("list").len(), 1);
    assert!(
        store
            .list_push_configs("nope")
            .await
            .expect("list")
            .is_empty()
    );
}

/// Another participant cannot take over an id, and deletes only what their scope covers.
pub async fn push_configs_belong_to_their_owner(store: Arc<dyn Store>) {
    working_task(&*store, "t-1").await;
    let alices = push("t-1", "c1", "https://alice");
    store
        .put_push_config("alice", alices.clone())
        .await
        .expect("put");
    let hijack = store
        .put_push_config("bob", push("t-1", "c1", "https://bob"))
        .await;
    assert_eq!(conflict(hijack), taken("t-1", "c1"));
    assert_eq!(
        store.get_push_config("t-1", "c1").await.expect("get"),
        Some(owned("alice", alices.clone())),
        "a refused replacement writes nothing"
    );

    for scope in [DeleteScope::Owner("bob"), DeleteScope::Ownerless] {
        assert!(!deleted(&*store, "t-1", "c1", scope).await, "{scope:?}");
    }
    assert_eq!(
        store.get_push_config("t-1", "c1").await.expect("get"),
        Some(owned("alice", alices)),
        "a delete out of scope leaves it"
    );
    assert!(
        store
            .delete_push_config("t-1", "c1", DeleteScope::AnyOwner)
            .await
            .expect("an admin's delete")
    );
    assert_eq!(store.get_push_config("t-1", "c1").await.expect("get"), None);

    // Once deleted, the id is free for anyone.
    store
        .put_push_config("bob", push("t-1", "c1", "https://bob"))
        .await
        .expect("a free id");
    assert!(
        store
            .get_push_config("t-1", "c1")
            .await
            .expect("get")
            .is_some_and(|c| c.is_owned_by("bob"))
    );
}

/// The caps per participant per task and per task; a replacement counts once; a delete
/// (the owner's or an admin's) frees a slot; other tasks are not affected.
pub async fn push_configs_are_capped(store: Arc<dyn Store>) {
    working_task(&*store, "t-1").await;
    working_task(&*store, "t-2").await;
    let per = MAX_PUSH_CONFIGS_PER_PARTICIPANT;
    for i in 0..per {
        store
            .put_push_config("alice", push("t-1", &format!("a{i:02}"), "https://a"))
            .await
            .expect("under the cap");
    }
    let over = store
        .put_push_config("alice", push("t-1", "a-extra", "https://a"))
        .await;
    assert_eq!(conflict(over), too_many("t-1", true));
    assert_eq!(
        store.get_push_config("t-1", "a-extra").await.expect("get"),
        None
    );
    store
        .put_push_config("alice", push("t-1", "a00", "https://a-again"))
        .await
        .expect("replacing one's own config is no new config");
    let over = store
        .put_push_config("alice", push("t-1", "a-extra", "https://a"))
        .await;
    assert_eq!(conflict(over), too_many("t-1", true), "still at the cap");
    // The cap is per task.
    store
        .put_push_config("alice", push("t-2", "a-extra", "https://a"))
        .await
        .expect("another task");
    // Deleting frees a slot, whoever deletes.
    assert!(deleted(&*store, "t-1", "a00", DeleteScope::Owner("alice")).await);
    store
        .put_push_config("alice", push("t-1", "a-extra", "https://a"))
        .await
        .expect("a freed slot");
    assert!(deleted(&*store, "t-1", "a01", DeleteScope::AnyOwner).await);
    store
        .put_push_config("alice", push("t-1", "a-extra-2", "https://a"))
        .await
        .expect("a slot an admin freed");

    // The task's cap, over all participants.
    let owners: Vec<String> = (0..MAX_PUSH_CONFIGS_PER_TASK.div_ceil(per) + 1)
        .map(|i| format!("p{i}"))
        .collect();
    let mut total = per; // alice's
    'fill: for owner in &owners {
        for i in 0..per {
            if total == MAX_PUSH_CONFIGS_PER_TASK {
                break 'fill;
            }
            store
                .put_push_config(owner, push("t-1", &format!("{owner}-{i:02}"), "https://p"))
                .await
                .expect("under the task's cap");
            total += 1;
        }
    }
    let newcomer = owners.last().expect("owners");
    let over = store
        .put_push_config(newcomer, push("t-1", "one-too-many", "https://p"))
        .await;
    assert_eq!(conflict(over), too_many("t-1", false));
    assert_eq!(
        store.list_push_configs("t-1").await.expect("list").len(),
        MAX_PUSH_CONFIGS_PER_TASK
    );
    store
        .put_push_config("alice", push("t-1", "a02", "https://a-replaced"))
        .await
        .expect("a replacement at the task's cap");
    assert!(deleted(&*store, "t-1", "a03", DeleteScope::Owner("alice")).await);
    store
        .put_push_config(newcomer, push("t-1", "one-too-many", "https://p"))
        .await
        .expect("a slot freed under the task's cap");
}

/// Creations racing for the last slots never pass a cap; puts of one id racing between
/// participants leave it with one owner.
pub async fn concurrent_push_config_writes_keep_the_rules(store: Arc<dyn Store>) {
    working_task(&*store, "t-1").await;
    let per = MAX_PUSH_CONFIGS_PER_PARTICIPANT;
    let (wins, losses) = race(per * 2, |i| {
        let store = store.clone();
        async move {
            store
                .put_push_config("alice", push("t-1", &format!("c{i:02}"), "https://a"))
                .await
        }
    })
    .await;
    assert_eq!(wins.len(), per);
    for loss in losses {
        assert_eq!(conflict(loss), too_many("t-1", true));
    }
    assert_eq!(
        store.list_push_configs("t-1").await.expect("list").len(),
        per
    );

    let outcomes = futures::future::join_all((0..10).map(|i| {
        let store = store.clone();
        tokio::spawn(async move {
            let owner = format!("u{i}");
            let put = store
                .put_push_config(&owner, push("t-1", "shared", &format!("https://{owner}")))
                .await;
            (owner, put)
        })
    }))
    .await;
    let mut winners = Vec::new();
    for outcome in outcomes {
        let (owner, put) = outcome.expect("task");
        match put {
            Ok(_) => winners.push(owner),
            Err(err) => assert_eq!(conflict(Err::<(), _>(err)), taken("t-1", "shared")),
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let stored = store
        .get_push_config("t-1", "shared")
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(stored.owner.as_deref(), Some(winners[0].as_str()));
    assert_eq!(stored.config.url, format!("https://{}", winners[0]));
}

/// The config a store wrote before configs had owners: the one an adapter's own test writes,
/// the old way, as `old` on task `t-1` before calling [`a_config_without_owner_is_nobodys`].
pub fn config_without_owner() -> TaskPushNotificationConfig {
    push("t-1", "old", "https://example.com/old")
}

/// A config stored before configs had owners (written by the adapter's own test, the way
/// that adapter wrote configs then: [`config_without_owner`] on task `t-1`, where alice is an
/// admin) reads back without owner, nobody can take its id over, only a delete scoped to
/// configs without owner removes it, and the caps never counted it.
pub async fn a_config_without_owner_is_nobodys(store: &dyn Store) {
    let old = store
        .get_push_config("t-1", "old")
        .await
        .expect("get")
        .expect("read back");
    assert_eq!((old.owner, old.config), (None, config_without_owner()));
    assert_eq!(
        conflict(store.put_push_config("alice", config_without_owner()).await),
        taken("t-1", "old")
    );
    // Not counted: alice still has her whole allowance.
    for i in 0..MAX_PUSH_CONFIGS_PER_PARTICIPANT {
        store
            .put_push_config("alice", push("t-1", &format!("a{i:02}"), "https://x"))
            .await
            .expect("under the cap");
    }
    assert!(!deleted(store, "t-1", "old", DeleteScope::Owner("alice")).await);
    assert!(deleted(store, "t-1", "old", DeleteScope::Ownerless).await);
    assert_eq!(
        store.get_push_config("t-1", "old").await.expect("get"),
        None
    );
    // Deleting it freed nothing: alice is still at her cap.
    assert_eq!(
        conflict(
            store
                .put_push_config("alice", push("t-1", "one-more", "https://x"))
                .await
        ),
        too_many("t-1", true)
    );
}
