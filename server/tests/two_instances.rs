//! Two server processes share one DynamoDB table: a subscriber on one sees the events the
//! other produces, because streams follow the table's event log, not process memory.
//! The same holds for the extension's changes (a plan made and its steps completed by one
//! process's agent reach a subscriber on the other).
//! Runs against the endpoint in `AWS_ENDPOINT_URL_DYNAMODB` (DynamoDB Local under `make test`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::json;

fn require_endpoint() {
    if std::env::var("AWS_ENDPOINT_URL_DYNAMODB").is_err() {
        panic!(
            "needs DynamoDB Local: run through `make test` (localstack/dynamodb-local.sh run -- cargo test ...)"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_on_one_instance_sees_events_written_by_another() {
    require_endpoint();
    let aws = aws_sdk_dynamodb::Client::new(&store_dynamodb::sdk_config().await);
    let table = format!("tasks-two-instances-{}", std::process::id());

    let a = Server::builder().dynamodb_table(&table).start();
    let described = aws
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .expect("the first server created the table (--create-table)");
    assert_eq!(
        described.table().and_then(|t| t.table_name()),
        Some(table.as_str())
    );
    let b = Server::builder().dynamodb_table(&table).start();
    let on_a = a.client().api(Binding::JsonRpc);
    let created = on_a.send_text("alice", "hello from A").await;
    let task_id = id_of(&created).to_owned();
    assert_eq!(state(&created), "TASK_STATE_INPUT_REQUIRED");

    // B follows the task over REST SSE.
    let mut followed = b
        .client()
        .api(Binding::Rest)
        .as_participant("alice")
        .subscribe(&task_id)
        .await
        .expect("subscribe");
    let mut events = vec![followed.next().await.expect("the task")];
    // The subscriber has the task: now A processes a follow-up.
    on_a.follow_up(&task_id, "alice", "again, from A").await;
    events.extend(followed.collect().await);

    assert_eq!(events[0]["task"]["id"], task_id.as_str());
    assert_eq!(
        event_kinds(&events[1..]),
        [
            "status:TASK_STATE_WORKING",
            "status:TASK_STATE_INPUT_REQUIRED"
        ]
    );
    assert_eq!(status_text(&events[2]["statusUpdate"]), "again, from A");

    drop((a, b));
    store_dynamodb::table::delete_table(&aws, &table)
        .await
        .expect("delete table");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_on_one_instance_sees_the_plan_another_instance_makes() {
    require_endpoint();
    let aws = aws_sdk_dynamodb::Client::new(&store_dynamodb::sdk_config().await);
    let table = format!("tasks-two-instances-plan-{}", std::process::id());
    let setup = AgentSetup::new(json!({"turns": [
        {"text": "ready"},
        {"tool_calls": [{"name": "create_plan", "arguments": {"steps": [
            {"name": "Look", "description": "look at it"}]}}]},
        {"tool_calls": [{"name": "complete_step", "arguments": {"step": "Look", "output": "seen"}}]},
        {"text": "planned"}
    ]}));
    let a = setup.builder().dynamodb_table(&table).start();
    let b = setup.builder().dynamodb_table(&table).start();
    let on_a = a.client().api(Binding::JsonRpc);
    let created = on_a.send_text("alice", "plan on A").await;
    assert_eq!(status_text(&created), "ready");
    let task_id = id_of(&created).to_owned();

    let mut followed = b
        .client()
        .api(Binding::JsonRpc)
        .as_participant("alice")
        .subscribe(&task_id)
        .await
        .expect("subscribe");
    followed.next().await.expect("the task");
    on_a.follow_up(&task_id, "alice", "make a plan").await;
    let events = followed.collect().await;
    let steps: Vec<String> = events
        .iter()
        .filter_map(|e| e["statusUpdate"]["metadata"].get(TASK_METADATA_KEY))
        .map(|ext| {
            ext["plan"]["steps"][0]["state"]
                .as_str()
                .unwrap_or("none")
                .to_owned()
        })
        .collect();
    assert_eq!(steps, ["pending", "done"], "{events:#?}");

    drop((a, b));
    store_dynamodb::table::delete_table(&aws, &table)
        .await
        .expect("delete table");
}
