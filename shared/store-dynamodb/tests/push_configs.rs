//! Push configs stored before configs had owners (a `PUSH#<id>` item without `owner`): they
//! read back without owner, nobody can take their id over, only a delete scoped to configs
//! without owner (or an admin's) removes them, and the counters never counted them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use task_store::contract;

#[tokio::test]
async fn configs_without_owner_are_nobodys() {
    let (store, _guard) = common::fresh_table().await;
    contract::create_task_of_config_without_owner(&store).await;
    // The item as this adapter wrote configs before they had owners.
    store
        .client()
        .put_item()
        .table_name(store.table_name())
        .item("PK", AttributeValue::S("TASK#t-1".into()))
        .item("SK", AttributeValue::S("PUSH#old".into()))
        .item(
            "doc",
            AttributeValue::S(serde_json::to_string(&contract::config_without_owner()).unwrap()),
        )
        .send()
        .await
        .expect("put the old item");

    contract::a_config_without_owner_is_nobodys(&store).await;
}
