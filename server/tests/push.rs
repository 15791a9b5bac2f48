//! Push notifications delivered end to end: the server POSTs task events to a webhook
//! receiver on 127.0.0.1, with the config's credentials; loopback webhooks need the operator's
//! `--allow-private-webhooks`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::json;

/// Whether a delivery is the status update to INPUT_REQUIRED (the end of a turn).
fn waits_for_input(d: &Delivery) -> bool {
    d.body["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
}

fn assert_notification(d: &Delivery, path: &str, token: &str) {
    assert_eq!(d.method, "POST", "{d:?}");
    assert_eq!(d.path, path, "{d:?}");
    assert_eq!(d.header("authorization"), Some("Bearer secret"), "{d:?}");
    assert_eq!(d.header("x-a2a-notification-token"), Some(token), "{d:?}");
    assert!(
        d.header("content-type")
            .is_some_and(|ct| ct.starts_with("application/a2a+json")),
        "{d:?}"
    );
    // A StreamResponse in its REST shape: one key.
    assert_eq!(keys(&d.body).len(), 1, "{}", d.body);
}

fn kinds(deliveries: &[Delivery]) -> Vec<String> {
    deliveries.iter().map(|d| event_kind(&d.body)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_config_receives_the_status_updates_of_a_follow_up() {
    let server = Server::builder().allow_private_webhooks().start();
    for binding in BOTH {
        let mut hook = Webhook::start().await;
        let api = server.client().api(binding);
        let task = api.send_ok(send_req(text("alice", "hello"))).await;
        let task_id = task["id"].as_str().unwrap();
        let config = api
            .as_participant("alice")
            .create_push(
                task_id,
                json!({
                    "url": hook.url("/hook"),
                    "token": "tok-1",
                    "authentication": {"scheme": "Bearer", "credentials": "secret"}
                }),
            )
            .await
            .expect("create");
        assert_eq!(config["taskId"], task["id"]);

        api.send_ok(send_req(on(text("alice", "notify me"), &task)))
            .await;
        let got = hook.until(waits_for_input).await;
        assert_eq!(
            kinds(&got),
            [
                "status:TASK_STATE_WORKING",
                "status:TASK_STATE_INPUT_REQUIRED"
            ],
            "{binding:?}: only what happened after the config was created"
        );
        for d in &got {
            assert_notification(d, "/hook", "tok-1");
            assert_eq!(d.body["statusUpdate"]["taskId"], task["id"]);
            assert_eq!(d.body["statusUpdate"]["contextId"], task["contextId"]);
        }
        assert_eq!(status_text(&got[1].body["statusUpdate"]), "notify me");

        // Canceling the task is notified too.
        api.as_participant("alice")
            .cancel(task_id)
            .await
            .expect("cancel");
        let canceled = hook.next().await;
        assert_notification(&canceled, "/hook", "tok-1");
        assert_eq!(event_kind(&canceled.body), "status:TASK_STATE_CANCELED");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inline_push_config_delivers_the_new_task_from_its_first_event() {
    let server = Server::builder().allow_private_webhooks().start();
    for binding in BOTH {
        let mut hook = Webhook::start().await;
        let api = server.client().api(binding);
        let mut req = send_req(text("alice", "tell me everything"));
        req["configuration"] = json!({
            "taskPushNotificationConfig": {
                "url": hook.url("/inline"),
                "token": "tok-inline",
                "authentication": {"scheme": "Bearer", "credentials": "secret"}
            }
        });
        let task = api.send_ok(req).await;
        let got = hook.until(waits_for_input).await;
        assert_eq!(
            kinds(&got),
            [
                "task:TASK_STATE_SUBMITTED",
                "status:TASK_STATE_WORKING",
                "status:TASK_STATE_INPUT_REQUIRED"
            ],
            "{binding:?}: every event of the task, the created task first"
        );
        for d in &got {
            assert_notification(d, "/inline", "tok-inline");
        }
        assert_eq!(got[0].body["task"]["id"], task["id"]);

        // The inline config is a config of the task like any other.
        let listed = api
            .as_participant("alice")
            .list_push(task["id"].as_str().unwrap())
            .await
            .expect("list");
        let configs = listed["configs"].as_array().expect("configs");
        assert_eq!(configs.len(), 1, "{listed}");
        assert_eq!(configs[0]["url"], hook.url("/inline"));
        assert!(configs[0]["id"].as_str().is_some_and(|id| !id.is_empty()));
    }
}

/// The part of [`an_inline_push_config_delivers_the_new_task_from_its_first_event`] that does
/// not depend on the first event: the rest of the task's events arrive, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inline_push_config_delivers_the_new_tasks_updates() {
    let server = Server::builder().allow_private_webhooks().start();
    for binding in BOTH {
        let mut hook = Webhook::start().await;
        let api = server.client().api(binding);
        let mut req = send_req(text("alice", "tell me"));
        req["configuration"] = json!({
            "taskPushNotificationConfig": {
                "url": hook.url("/inline"),
                "token": "tok-inline",
                "authentication": {"scheme": "Bearer", "credentials": "secret"}
            }
        });
        let task = api.send_ok(req).await;
        let got = hook.until(waits_for_input).await;
        let updates: Vec<String> = kinds(&got)
            .into_iter()
            .filter(|k| k.starts_with("status:"))
            .collect();
        assert_eq!(
            updates,
            [
                "status:TASK_STATE_WORKING",
                "status:TASK_STATE_INPUT_REQUIRED"
            ],
            "{binding:?}"
        );
        for d in &got {
            assert_notification(d, "/inline", "tok-inline");
        }
        assert_eq!(
            got.last().unwrap().body["statusUpdate"]["taskId"],
            task["id"]
        );
    }
}

/// A push config on a fresh task of `server`, pointing at `hook`; returns the task.
async fn task_with_config(server: &Server, hook: &Webhook, path: &str) -> serde_json::Value {
    let api = server.client().api(Binding::Rest);
    let task = api.send_ok(send_req(text("alice", "hello"))).await;
    api.as_participant("alice")
        .create_push(
            task["id"].as_str().unwrap(),
            json!({"url": hook.url(path), "token": "tok",
                   "authentication": {"scheme": "Bearer", "credentials": "secret"}}),
        )
        .await
        .expect("create");
    task
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_that_fails_for_a_while_gets_the_event_again_in_order() {
    let server = Server::builder().allow_private_webhooks().start();
    // 503 and 429 are worth retrying.
    let mut hook = Webhook::answering(&[503, 429]).await;
    let task = task_with_config(&server, &hook, "/flaky").await;
    server
        .client()
        .api(Binding::JsonRpc)
        .send_ok(send_req(on(text("alice", "retry me"), &task)))
        .await;
    let got = hook.until(waits_for_input).await;
    let answered: Vec<u16> = got.iter().map(|d| d.answered).collect();
    assert_eq!(answered, [503, 429, 200, 200], "{got:?}");
    assert_eq!(
        kinds(&got),
        [
            "status:TASK_STATE_WORKING",
            "status:TASK_STATE_WORKING",
            "status:TASK_STATE_WORKING",
            "status:TASK_STATE_INPUT_REQUIRED"
        ],
        "the same event until it is taken, then the next"
    );
    assert_eq!(
        got[0].body, got[2].body,
        "a retry sends the same notification"
    );
    for d in &got {
        assert_notification(d, "/flaky", "tok");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_that_rejects_an_event_is_not_asked_again_but_gets_the_next_one() {
    let server = Server::builder().allow_private_webhooks().start();
    let mut hook = Webhook::answering(&[400]).await;
    let task = task_with_config(&server, &hook, "/picky").await;
    server
        .client()
        .api(Binding::JsonRpc)
        .send_ok(send_req(on(text("alice", "reject the first"), &task)))
        .await;
    let got = hook.until(waits_for_input).await;
    assert_eq!(
        kinds(&got),
        [
            "status:TASK_STATE_WORKING",
            "status:TASK_STATE_INPUT_REQUIRED"
        ],
        "{got:?}"
    );
    assert_eq!(got[0].answered, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_config_is_not_notified_while_another_one_is() {
    let server = Server::builder().allow_private_webhooks().start();
    for binding in BOTH {
        let mut hook = Webhook::start().await;
        let api = server.client().api(binding);
        let alice = api.as_participant("alice");
        let task = api.send_ok(send_req(text("alice", "hello"))).await;
        let task_id = task["id"].as_str().unwrap();
        let auth = json!({"scheme": "Bearer", "credentials": "secret"});
        for (id, path) in [("kept", "/kept"), ("gone", "/gone")] {
            alice
                .create_push(
                    task_id,
                    json!({"id": id, "url": hook.url(path), "token": id, "authentication": auth}),
                )
                .await
                .expect("create");
        }
        alice.delete_push(task_id, "gone").await.expect("delete");

        api.send_ok(send_req(on(text("alice", "who hears this?"), &task)))
            .await;
        let got = hook
            .until(|d| d.path == "/kept" && waits_for_input(d))
            .await;
        let mut got: Vec<Delivery> = got.into_iter().chain(hook.drain()).collect();
        assert!(
            got.iter().all(|d| d.path == "/kept"),
            "{binding:?}: the deleted config was notified: {got:?}"
        );
        got.retain(|d| d.path == "/kept");
        assert_eq!(
            kinds(&got),
            [
                "status:TASK_STATE_WORKING",
                "status:TASK_STATE_INPUT_REQUIRED"
            ]
        );
        for d in &got {
            assert_notification(d, "/kept", "kept");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_webhooks_are_refused_unless_the_operator_allows_them() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api.send_ok(send_req(text("alice", "hello"))).await;
        for url in ["http://127.0.0.1:9/hook", "http://localhost:9/hook"] {
            api.as_participant("alice")
                .create_push(task["id"].as_str().unwrap(), json!({ "url": url }))
                .await
                .expect_err("loopback")
                .assert_is(-32602, 400, "INVALID_PARAMS");
        }

        // Inline with a new task: refused before the task is created.
        let mut req = send_req(text("carol", "hello"));
        req["configuration"] =
            json!({"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/hook"}});
        api.send(req)
            .await
            .expect_err("loopback")
            .assert_is(-32602, 400, "INVALID_PARAMS");
        let list = api
            .as_participant("carol")
            .list_tasks(json!({}))
            .await
            .expect("list");
        assert_eq!(list["totalSize"], 0, "{binding:?}: {list}");
        let configs = api
            .as_participant("alice")
            .list_push(task["id"].as_str().unwrap())
            .await
            .expect("list");
        assert_eq!(
            configs["configs"].as_array().map_or(0, Vec::len),
            0,
            "{configs}"
        );
    }
}
