//! Push configs stored before configs had owners (a `PUSH#<id>` item without `owner`): they
//! read back without owner, nobody can take their id over, only a delete scoped to configs
//! without owner (or an admin's) removes them, and the counters never counted them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use a2a::{TaskPushNotificationConfig, TaskState};
use aws_sdk_dynamodb::types::AttributeValue;
use task_core::extension::Role;
use task_store::contract::{at, record};
use task_store::limits::MAX_PUSH_CONFIGS_PER_PARTICIPANT;
use task_store::*;

fn config(id: &str) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        url: format!("https://example.com/{id}"),
        id: Some(id.into()),
        task_id: "t-1".into(),
        token: Some("tok".into()),
        authentication: None,
        tenant: None,
    }
}

#[tokio::test]
async fn configs_without_owner_are_nobodys() {
    let (store, _guard) = common::fresh_table().await;
    let rec = record(
        "t-1",
        "ctx",
        &[("alice", Role::Admin)],
        TaskState::Working,
        at(0),
    );
    store
        .commit(vec![Change::Create(Box::new(NewTask::new(rec)))])
        .await
        .expect("create");
    // The item as this adapter wrote configs before they had owners.
    store
        .client()
        .put_item()
        .table_name(store.table_name())
        .item("PK", AttributeValue::S("TASK#t-1".into()))
        .item("SK", AttributeValue::S("PUSH#old".into()))
        .item(
            "doc",
            AttributeValue::S(serde_json::to_string(&config("old")).unwrap()),
        )
        .send()
        .await
        .expect("put the old item");

    let old = store
        .get_push_config("t-1", "old")
        .await
        .expect("get")
        .expect("read back");
    assert_eq!((old.owner, old.config), (None, config("old")));

    let takeover = store.put_push_config("alice", config("old")).await;
    assert!(
        matches!(
            takeover,
            Err(StoreError::Conflict(Conflict::PushConfigTaken { .. }))
        ),
        "{takeover:?}"
    );
    for i in 0..MAX_PUSH_CONFIGS_PER_PARTICIPANT {
        store
            .put_push_config("alice", config(&format!("a{i:02}")))
            .await
            .expect("not counted: under the cap");
    }
    assert!(
        !store
            .delete_push_config("t-1", "old", DeleteScope::Owner("alice"))
            .await
            .expect("delete")
    );
    assert!(
        store
            .delete_push_config("t-1", "old", DeleteScope::Ownerless)
            .await
            .expect("delete")
    );
    assert_eq!(
        store.get_push_config("t-1", "old").await.expect("get"),
        None
    );
    // Deleting it freed nothing: alice is still at her cap.
    let over = store.put_push_config("alice", config("one-more")).await;
    assert!(
        matches!(
            over,
            Err(StoreError::Conflict(Conflict::TooManyPushConfigs {
                per_participant: true,
                ..
            }))
        ),
        "{over:?}"
    );
}
