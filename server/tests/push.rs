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

/// Alice's new task with `text`, and an inline push config to `/inline` on `hook`
/// (token `tok-inline`, Bearer `secret`).
fn with_inline_config(text_body: &str, hook: &Webhook) -> serde_json::Value {
    let mut req = send_req(text("alice", text_body));
    req["configuration"] = json!({
        "taskPushNotificationConfig": {
            "url": hook.url("/inline"),
            "token": "tok-inline",
            "authentication": {"scheme": "Bearer", "credentials": "secret"}
        }
    });
    req
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_config_receives_the_status_updates_of_a_follow_up() {
    let server = Server::builder().allow_private_webhooks().start();
    for binding in BOTH {
        let mut hook = Webhook::start().await;
        let api = server.client().api(binding);
        let task = api.send_text("alice", "hello").await;
        let task_id = id_of(&task);
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

        api.follow_up(&task, "alice", "notify me").await;
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
        let task = api
            .send_ok(with_inline_config("tell me everything", &hook))
            .await;
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
            .list_push(id_of(&task))
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
        let task = api.send_ok(with_inline_config("tell me", &hook)).await;
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
    let task = api.send_text("alice", "hello").await;
    api.as_participant("alice")
        .create_push(
            id_of(&task),
            json!({"url": hook.url(path), "token": "tok",
                   "authentication": {"scheme": "Bearer", "credentials": "secret"}}),
        )
        .await
        .expect("create");
    task
}

/// What a webhook answering `first` (then 200) gets, until the task waits for input, of
/// alice's follow-up `text` on a task whose push config points at `path`.
async fn deliveries_to_a_hook_answering(first: &[u16], path: &str, text: &str) -> Vec<Delivery> {
    let server = Server::builder().allow_private_webhooks().start();
    let mut hook = Webhook::answering(first).await;
    let task = task_with_config(&server, &hook, path).await;
    server
        .client()
        .api(Binding::JsonRpc)
        .follow_up(&task, "alice", text)
        .await;
    hook.until(waits_for_input).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_that_fails_for_a_while_gets_the_event_again_in_order() {
    // 503 and 429 are worth retrying.
    let got = deliveries_to_a_hook_answering(&[503, 429], "/flaky", "retry me").await;
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
    let got = deliveries_to_a_hook_answering(&[400], "/picky", "reject the first").await;
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
        let task = api.send_text("alice", "hello").await;
        let task_id = id_of(&task);
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

        api.follow_up(&task, "alice", "who hears this?").await;
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
        let task = api.send_text("alice", "hello").await;
        for url in ["http://127.0.0.1:9/hook", "http://localhost:9/hook"] {
            api.as_participant("alice")
                .create_push(id_of(&task), json!({ "url": url }))
                .await
                .refused_invalid_params("loopback");
        }

        // Inline with a new task: refused before the task is created.
        let mut req = send_req(text("carol", "hello"));
        req["configuration"] =
            json!({"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/hook"}});
        api.send(req).await.refused_invalid_params("loopback");
        let list = api.list_as("carol").await;
        assert_eq!(list["totalSize"], 0, "{binding:?}: {list}");
        let configs = api
            .as_participant("alice")
            .list_push(id_of(&task))
            .await
            .expect("list");
        assert_eq!(
            configs["configs"].as_array().map_or(0, Vec::len),
            0,
            "{configs}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Push configs belong to the participant who created them
// ---------------------------------------------------------------------------------------------

/// The configs of a ListTaskPushNotificationConfigs answer (an empty list may be left out).
fn configs_in(listed: &serde_json::Value) -> Vec<serde_json::Value> {
    listed["configs"].as_array().cloned().unwrap_or_default()
}

/// The participants `team` (each `(id, role)`, humans) and the agent as assignee.
fn team_and_agent(team: &[(&str, &str)]) -> Vec<serde_json::Value> {
    let mut participants: Vec<serde_json::Value> = team
        .iter()
        .map(|(id, role)| json!({"id": id, "kind": "human", "role": role}))
        .collect();
    participants.push(json!({"id": "tiny-harness", "kind": "agent", "role": "assignee"}));
    participants
}

/// A task whose participants are set by `creator`'s envelope (each `(id, role)`, humans).
async fn team_task(api: &Api, creator: &str, team: &[(&str, &str)]) -> serde_json::Value {
    let envelope = json!({"name": "Team", "goal": "g", "participants": team_and_agent(team)});
    api.send_ok(new_task_req(creator, "team work", envelope))
        .await
}

/// `admin`'s envelope that sets the task's participants to `team` (and the agent).
async fn set_team(api: &Api, admin: &str, task: &serde_json::Value, team: &[(&str, &str)]) {
    let envelope = json!({"participants": team_and_agent(team)});
    api.send_ok(edit_req(admin, task, envelope)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_cannot_see_take_over_or_delete_the_reporters_push_config() {
    let server = Server::builder().allow_private_webhooks().start();
    for binding in BOTH {
        let mut hook = Webhook::start().await;
        let api = server.client().api(binding);
        let team = [("alice", "reporter"), ("wes", "watcher"), ("ada", "admin")];
        let task = team_task(&api, "alice", &team).await;
        let task_id = id_of(&task);
        let (alice, wes, ada) = (
            api.as_participant("alice"),
            api.as_participant("wes"),
            api.as_participant("ada"),
        );
        let alices = json!({
            "id": "alices", "url": hook.url("/alice"), "token": "tok-alice",
            "authentication": {"scheme": "Bearer", "credentials": "secret-alice"}
        });
        alice
            .create_push(task_id, alices.clone())
            .await
            .expect("create");

        // Listing shows the watcher nothing of it, and no secret.
        let listed = wes.list_push(task_id).await.expect("a watcher lists");
        assert!(configs_in(&listed).is_empty(), "{binding:?}: {listed}");
        let shown = listed.to_string();
        assert!(
            !shown.contains("secret-alice") && !shown.contains("tok-alice"),
            "{shown}"
        );
        // Getting it is getting a config that does not exist.
        let got = wes
            .get_push(task_id, "alices")
            .await
            .refused_not_found("not his");
        let missing = wes.get_push(task_id, "no-such").await.expect_err("missing");
        assert_eq!(got.message, missing.message, "{binding:?}");
        assert!(!got.raw.to_string().contains("secret-alice"));

        // Reusing its id to redirect the notifications is refused.
        let hijack = wes
            .create_push(
                task_id,
                json!({"id": "alices", "url": hook.url("/wes"), "token": "tok-wes"}),
            )
            .await
            .refused_invalid_params("an id of someone else's config");
        assert!(
            hijack.message.contains("push config id alices is taken"),
            "{binding:?}: {hijack:?}"
        );

        // A watcher's delete is answered like the delete of a missing config, and deletes
        // nothing.
        let deleted = wes.delete_push(task_id, "alices").await.expect("answered");
        let deleted_missing = wes.delete_push(task_id, "no-such").await.expect("answered");
        assert_eq!(deleted, deleted_missing, "{binding:?}");
        let kept = alice
            .get_push(task_id, "alices")
            .await
            .expect("still there");
        assert_eq!(kept["url"], hook.url("/alice"));
        assert_eq!(kept["token"], "tok-alice", "the owner sees her token");
        assert_eq!(kept["authentication"]["credentials"], "secret-alice");

        // The notifications still go to alice's webhook, and only there.
        api.follow_up(&task, "alice", "who hears this?").await;
        let got = hook.until(waits_for_input).await;
        let got: Vec<Delivery> = got.into_iter().chain(hook.drain()).collect();
        assert!(got.iter().all(|d| d.path == "/alice"), "{got:?}");
        for d in &got {
            assert_eq!(d.header("x-a2a-notification-token"), Some("tok-alice"));
        }

        // An admin may delete it (without seeing it).
        assert!(configs_in(&ada.list_push(task_id).await.expect("list")).is_empty());
        ada.delete_push(task_id, "alices")
            .await
            .expect("an admin deletes");
        alice
            .get_push(task_id, "alices")
            .await
            .refused_not_found("gone");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_participants_webhook_gets_nothing_after_the_removal() {
    let server = Server::builder().allow_private_webhooks().start();
    for binding in BOTH {
        let mut adas_hook = Webhook::start().await;
        let mut bobs_hook = Webhook::start().await;
        let api = server.client().api(binding);
        let team = [("ada", "admin"), ("bob", "watcher")];
        let task = team_task(&api, "ada", &team).await;
        let task_id = id_of(&task);
        for (who, hook) in [("ada", &adas_hook), ("bob", &bobs_hook)] {
            api.as_participant(who)
                .create_push(
                    task_id,
                    json!({"id": format!("{who}s"), "url": hook.url("/hook"), "token": who}),
                )
                .await
                .expect("create");
        }
        api.follow_up(&task, "ada", "first").await;
        adas_hook.until(waits_for_input).await;
        bobs_hook.until(waits_for_input).await;

        // Bob leaves: neither the removal nor anything after reaches his webhook.
        set_team(&api, "ada", &task, &[("ada", "admin")]).await;
        api.follow_up(&task, "ada", "second").await;
        // The removal's own event (the task still waits for input), then the next turn.
        let mut after = adas_hook.until(waits_for_input).await;
        after.extend(adas_hook.until(waits_for_input).await);
        assert_eq!(
            kinds(&after),
            [
                "status:TASK_STATE_INPUT_REQUIRED",
                "status:TASK_STATE_WORKING",
                "status:TASK_STATE_INPUT_REQUIRED"
            ],
            "{binding:?}: ada gets the removal and the next turn"
        );
        let leaked = bobs_hook.drain();
        assert!(leaked.is_empty(), "{binding:?}: {leaked:?}");

        // His config went with him: back on the task, he has none.
        set_team(&api, "ada", &task, &[("ada", "admin"), ("bob", "watcher")]).await;
        let bob = api.as_participant("bob");
        bob.get_push(task_id, "bobs")
            .await
            .refused_not_found("removed with its owner");
        assert!(configs_in(&bob.list_push(task_id).await.expect("list")).is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_configs_are_capped_per_participant_and_per_task() {
    const PER_PARTICIPANT: usize = 10;
    const PER_TASK: usize = 50;
    let server = Server::builder().allow_private_webhooks().start();
    let hook = Webhook::start().await;
    for binding in BOTH {
        let api = server.client().api(binding);
        let names: Vec<String> = (0..PER_TASK / PER_PARTICIPANT + 1)
            .map(|i| format!("p{i}"))
            .collect();
        let team: Vec<(&str, &str)> = std::iter::once(("alice", "reporter"))
            .chain(names.iter().map(|n| (n.as_str(), "watcher")))
            .collect();
        let task = team_task(&api, "alice", &team).await;
        let task_id = id_of(&task);
        let alice = api.as_participant("alice");
        let config = |id: String| json!({"id": id, "url": hook.url("/capped")});
        for i in 0..PER_PARTICIPANT {
            alice
                .create_push(task_id, config(format!("a{i}")))
                .await
                .expect("under the cap");
        }
        let over = alice
            .create_push(task_id, config("a-extra".into()))
            .await
            .refused_invalid_params("over the cap");
        assert_eq!(
            over.message,
            format!("at most {PER_PARTICIPANT} push configs per participant per task"),
            "{binding:?}"
        );
        // Replacing one is no new config; deleting one frees a slot.
        alice
            .create_push(task_id, config("a0".into()))
            .await
            .expect("a replacement");
        alice.delete_push(task_id, "a1").await.expect("delete");
        alice
            .create_push(task_id, config("a-extra".into()))
            .await
            .expect("a freed slot");

        // The task's cap, over everyone's configs.
        let mut total = PER_PARTICIPANT;
        'fill: for name in &names {
            for i in 0..PER_PARTICIPANT {
                if total == PER_TASK {
                    break 'fill;
                }
                api.as_participant(name)
                    .create_push(task_id, config(format!("{name}-{i}")))
                    .await
                    .expect("under the task's cap");
                total += 1;
            }
        }
        let last = names.last().unwrap();
        let over = api
            .as_participant(last)
            .create_push(task_id, config("one-too-many".into()))
            .await
            .refused_invalid_params("over the task's cap");
        assert_eq!(
            over.message,
            format!("at most {PER_TASK} push configs per task"),
            "{binding:?}"
        );
    }
}
