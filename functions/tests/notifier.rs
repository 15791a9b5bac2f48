//! The push notifier in process: a DynamoDB Streams batch (the stream fixture, with the keys
//! of the events the functions just wrote) delivered to loopback webhooks, in order, with the
//! configs' credentials; a failing webhook is given up after the sender's attempts, as on the
//! local server, without holding the others or the batch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use a2a_http::{Method, Serves};
use a2a_service::push::{PushOptions, PushSender, WebhookPolicy};
use common::*;
use functions::Notifier;
use serde_json::{Value, json};

/// A task created through the send-message function with an inline push config.
async fn task_with_webhook(deployment: &Deployment, url: &str, token: &str) -> String {
    let serves = Serves::Rest(Method::SendMessage);
    let body = json!({
        "message": message(Some("alice"), "notify me"),
        "configuration": {"taskPushNotificationConfig": {
            "url": url, "token": token,
            "authentication": {"scheme": "Bearer", "credentials": format!("secret-{token}")}
        }}
    });
    let got = invoke(
        &deployment.app(serves),
        serves,
        Call::post("/message:send", &body).request(Payload::FunctionUrl, "function-url.json"),
    )
    .await;
    assert_eq!(got.status, 200, "{}", got.body);
    got.json()["task"]["id"].as_str().unwrap().to_owned()
}

/// The stream batch of these tasks' events, interleaved task by task, with a record of the
/// task item between them (not a notification): the fixture's records with new keys.
async fn stream_batch(
    deployment: &Deployment,
    tasks: &[&str],
) -> (Value, Vec<(String, u64, String)>) {
    let template = fixture("dynamodb-stream.json");
    let insert = template["Records"][0].clone();
    let modify = template["Records"][1].clone();
    let mut per_task = Vec::new();
    for task in tasks {
        let events = deployment.store.events(task, 0, 100).await.unwrap();
        per_task.push(
            events
                .iter()
                .map(|e| (task.to_string(), e.seq))
                .collect::<Vec<_>>(),
        );
    }
    let mut records = Vec::new();
    let mut expected = Vec::new();
    let mut n = 0u64;
    let longest = per_task.iter().map(Vec::len).max().unwrap_or(0);
    for i in 0..longest {
        for events in &per_task {
            let Some((task, seq)) = events.get(i) else {
                continue;
            };
            n += 1;
            let sequence = format!("{:021}", 111100000000000000000u128 + u128::from(n));
            let mut record = insert.clone();
            let sk = store_dynamodb::keys::event_sk(*seq, 0);
            record["dynamodb"]["Keys"]["PK"]["S"] = json!(format!("TASK#{task}"));
            record["dynamodb"]["Keys"]["SK"]["S"] = json!(sk);
            record["dynamodb"]["NewImage"]["PK"]["S"] = json!(format!("TASK#{task}"));
            record["dynamodb"]["NewImage"]["SK"]["S"] = json!(sk);
            record["dynamodb"]["SequenceNumber"] = json!(sequence);
            records.push(record);
            expected.push((task.clone(), *seq, sequence));
            let mut other = modify.clone();
            n += 1;
            other["dynamodb"]["Keys"]["PK"]["S"] = json!(format!("TASK#{task}"));
            other["dynamodb"]["SequenceNumber"] =
                json!(format!("{:021}", 111100000000000000000u128 + u128::from(n)));
            records.push(other);
        }
    }
    (json!({"Records": records}), expected)
}

fn notifier(deployment: &Deployment) -> Notifier {
    let sender = PushSender::new(PushOptions {
        policy: WebhookPolicy {
            allow_private: true,
        },
        attempts: 2,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
        request_timeout: Duration::from_secs(5),
    })
    .unwrap();
    Notifier::new(deployment.store.clone(), Arc::new(sender))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_delivered_in_order_and_a_failing_webhook_holds_nothing() {
    let deployment = Deployment::with_env(&[("TH_ALLOW_PRIVATE_WEBHOOKS", "true")]);
    let hook = Webhook::answering_paths(&[("/flaky", 503), ("/gone", 410)]).await;
    let good = task_with_webhook(&deployment, &hook.url("/good"), "g").await;
    let flaky = task_with_webhook(&deployment, &hook.url("/flaky"), "f").await;
    let gone = task_with_webhook(&deployment, &hook.url("/gone"), "x").await;
    let (batch, expected) = stream_batch(&deployment, &[&good, &flaky, &gone]).await;

    let event: aws_lambda_events::event::dynamodb::Event = serde_json::from_value(batch).unwrap();
    let found = functions::notifier::new_events(&event);
    assert_eq!(
        found.len(),
        expected.len(),
        "only the events' first chunks are notifications"
    );
    let response = notifier(&deployment).handle(&event).await;

    // The good webhook got all three events of its task, in order, with its credentials.
    let received = hook.received();
    let good_got: Vec<&Delivery> = received.iter().filter(|d| d.path == "/good").collect();
    let kinds: Vec<String> = good_got.iter().map(|d| event_kind(&d.body)).collect();
    assert_eq!(
        kinds,
        [
            "task:TASK_STATE_SUBMITTED",
            "status:TASK_STATE_WORKING",
            "status:TASK_STATE_INPUT_REQUIRED"
        ]
    );
    assert!(
        good_got
            .iter()
            .all(|d| d.header("authorization") == Some("Bearer secret-g"))
    );
    // The webhook that is gone for good was tried once per event and is not retried.
    assert_eq!(received.iter().filter(|d| d.path == "/gone").count(), 3);
    // The flaky one: each event given up after the sender's two attempts, as the local
    // server's dispatcher does, in order; nothing is reported for retry, which would hold
    // the shard (every other task's notifications) behind one dead webhook.
    let flaky_got: Vec<String> = received
        .iter()
        .filter(|d| d.path == "/flaky")
        .map(|d| event_kind(&d.body))
        .collect();
    assert_eq!(
        flaky_got,
        [
            "task:TASK_STATE_SUBMITTED",
            "task:TASK_STATE_SUBMITTED",
            "status:TASK_STATE_WORKING",
            "status:TASK_STATE_WORKING",
            "status:TASK_STATE_INPUT_REQUIRED",
            "status:TASK_STATE_INPUT_REQUIRED"
        ]
    );
    assert!(
        response.batch_item_failures.is_empty(),
        "{:?}",
        response.batch_item_failures
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_without_notifications_or_configs_delivers_nothing() {
    let deployment = Deployment::new();
    // A task without a push config.
    let serves = Serves::Rest(Method::SendMessage);
    let got = invoke(
        &deployment.app(serves),
        serves,
        Call::post(
            "/message:send",
            &json!({"message": message(Some("alice"), "hi")}),
        )
        .request(Payload::RestV1, "rest-v1.json"),
    )
    .await;
    let task = got.json()["task"]["id"].as_str().unwrap().to_owned();
    let (batch, _) = stream_batch(&deployment, &[&task]).await;
    let event: aws_lambda_events::event::dynamodb::Event = serde_json::from_value(batch).unwrap();
    let response = notifier(&deployment).handle(&event).await;
    assert!(response.batch_item_failures.is_empty());
    // Only MODIFY records of task items: nothing is a notification.
    let fixture_event: aws_lambda_events::event::dynamodb::Event =
        serde_json::from_value(json!({"Records": [fixture("dynamodb-stream.json")["Records"][1]]}))
            .unwrap();
    assert!(functions::notifier::new_events(&fixture_event).is_empty());
}

/// Rewrites the task's participants through the store (as an admin's envelope edit would),
/// with the edit's event.
async fn set_participants(
    deployment: &Deployment,
    task_id: &str,
    edit: impl FnOnce(&mut Vec<task_core::extension::Participant>),
) {
    use task_store::{Change, TaskUpdate};
    let base = deployment.store.get(task_id).await.unwrap().unwrap();
    let mut record = base.record.clone();
    edit(&mut record.extension.participants);
    let event = a2a::StreamResponse::StatusUpdate(a2a::TaskStatusUpdateEvent {
        task_id: task_id.to_owned(),
        context_id: record.context_id.clone(),
        status: record.status.clone(),
        metadata: None,
    });
    let mut update = TaskUpdate::new(base);
    update.events.push(event);
    update.record = Some(record);
    deployment
        .store
        .commit(vec![Change::Update(Box::new(update))])
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_whose_owner_left_the_task_gets_nothing_and_is_removed() {
    use task_core::extension::{Participant, ParticipantKind, Role};
    let deployment = Deployment::with_env(&[("TH_ALLOW_PRIVATE_WEBHOOKS", "true")]);
    let hook = Webhook::start().await;
    let task = task_with_webhook(&deployment, &hook.url("/alice"), "a").await;
    set_participants(&deployment, &task, |p| {
        p.push(Participant::new(
            "bob",
            ParticipantKind::Human,
            Role::Watcher,
        ))
    })
    .await;
    let bobs = a2a::TaskPushNotificationConfig {
        url: hook.url("/bob"),
        id: Some("bobs".into()),
        task_id: task.clone(),
        token: None,
        authentication: None,
        tenant: None,
    };
    deployment.store.put_push_config("bob", bobs).await.unwrap();
    // Bob leaves before the notifier sees the task's events: at delivery time he is gone.
    set_participants(&deployment, &task, |p| p.retain(|p| p.id != "bob")).await;

    let (batch, expected) = stream_batch(&deployment, &[&task]).await;
    let event: aws_lambda_events::event::dynamodb::Event = serde_json::from_value(batch).unwrap();
    let response = notifier(&deployment).handle(&event).await;
    assert!(response.batch_item_failures.is_empty());
    let received = hook.received();
    assert_eq!(
        received.iter().filter(|d| d.path == "/alice").count(),
        expected.len(),
        "the owner who stayed gets every event"
    );
    assert_eq!(
        received.iter().filter(|d| d.path == "/bob").count(),
        0,
        "nothing goes to a config whose owner left"
    );
    assert_eq!(
        deployment
            .store
            .get_push_config(&task, "bobs")
            .await
            .unwrap(),
        None,
        "and it is removed"
    );
}
