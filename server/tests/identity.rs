//! Identity and access (SPEC section 4) over HTTP: refusals of non-participants, reads that
//! cannot tell a stranger's task from a missing one, no identity at all, and the operator's
//! default participant.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

const REFUSAL: &str = "message not accepted: not a participant";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_from_a_non_participant_sees_only_the_refusal() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api.send_text("alice", "private matter").await;

        // Blocking send: a view with id, contextId and a status that says why; nothing else.
        let refused = api.follow_up(&task, "mallory", "let me in").await;
        assert_eq!(keys(&refused), ["contextId", "id", "status"], "{refused}");
        assert_eq!(refused["id"], task["id"]);
        assert_eq!(refused["contextId"], task["contextId"]);
        assert_eq!(
            state(&refused),
            "TASK_STATE_INPUT_REQUIRED",
            "state unchanged"
        );
        assert_eq!(status_text(&refused), REFUSAL);
        assert_eq!(refused["status"]["message"]["role"], "ROLE_AGENT");

        // Stream: exactly that one status update.
        let events = api
            .send_streaming(send_req(on(text("mallory", "again"), &task)))
            .await
            .expect("stream")
            .collect()
            .await;
        assert_eq!(
            event_kinds(&events),
            ["status:TASK_STATE_INPUT_REQUIRED"],
            "{binding:?}: {events:?}"
        );
        let update = &events[0]["statusUpdate"];
        assert_eq!(status_text(update), REFUSAL);
        assert_eq!(update["taskId"], task["id"]);
        assert!(
            update
                .get("metadata")
                .is_none_or(|m| m.get(TASK_METADATA_KEY).is_none()),
            "no extension leaks: {update}"
        );

        // Nothing changed for the participants.
        let read = api.read_as("alice", id_of(&task)).await;
        assert_eq!(state(&read), "TASK_STATE_INPUT_REQUIRED");
        assert_eq!(status_text(&read), "private matter");
        assert_eq!(read["history"].as_array().map(Vec::len), Some(2));
        assert_eq!(ext(&read), ext(&task));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_by_a_non_participant_answers_like_a_missing_task() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api.send_text("alice", "mine").await;
        let id = id_of(&task);
        let mallory = api.as_participant("mallory");
        let alice = api.as_participant("alice");
        let config = json!({"url": "https://example.com/hook"});

        let not_found = |err: ApiError, what: &str| {
            err.assert_is(-32001, 404, "TASK_NOT_FOUND");
            assert_eq!(err.message, format!("task not found: {id}"), "{what}");
        };
        not_found(
            mallory.get_task(id, None).await.expect_err("get"),
            "GetTask",
        );
        not_found(mallory.cancel(id).await.expect_err("cancel"), "CancelTask");
        match mallory.subscribe(id).await {
            Err(err) => not_found(err, "SubscribeToTask"),
            Ok(_) => panic!("{binding:?}: a stranger subscribed"),
        }
        not_found(
            mallory
                .create_push(id, config.clone())
                .await
                .expect_err("create"),
            "CreateTaskPushNotificationConfig",
        );
        not_found(
            mallory.get_push(id, "any").await.expect_err("get"),
            "GetTaskPushNotificationConfig",
        );
        not_found(
            mallory.list_push(id).await.expect_err("list"),
            "ListTaskPushNotificationConfigs",
        );
        not_found(
            mallory.delete_push(id, "any").await.expect_err("delete"),
            "DeleteTaskPushNotificationConfig",
        );
        let list = mallory.list_tasks(json!({})).await.expect("list");
        assert_eq!(list["tasks"], json!([]));

        // A task that does not exist answers the same way.
        let missing = alice
            .get_task("no-such-task", None)
            .await
            .refused_not_found("get");
        assert_eq!(missing.message, "task not found: no-such-task");

        // The task is intact: the stranger's cancel did nothing.
        let read = alice.get_task(id, None).await.expect("get");
        assert_eq!(state(&read), "TASK_STATE_INPUT_REQUIRED");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_participant_asserted_is_invalid_params() {
    let server = Server::start();
    for binding in BOTH {
        let anonymous = server.client().api(binding);
        let err = anonymous
            .send(send_req(message(None, vec![text_part("who?")])))
            .await
            .refused_invalid_params("no participant");
        assert_eq!(err.message, "no participant asserted");
        let Err(err) = anonymous
            .send_streaming(send_req(message(None, vec![text_part("who?")])))
            .await
        else {
            panic!("{binding:?}: an anonymous stream");
        };
        err.assert_is(-32602, 400, "INVALID_PARAMS");

        // A participant id that is not a string asserts nothing.
        let mut numeric = message(None, vec![text_part("who?")]);
        numeric["metadata"] = json!({"participant_id": 7});
        anonymous
            .send(send_req(numeric))
            .await
            .refused_invalid_params("a number is no participant");

        let err = anonymous
            .list_tasks(json!({}))
            .await
            .refused_invalid_params("list");
        assert_eq!(err.message, "no participant asserted");
        let err = anonymous.get_task("any", None).await.expect_err("get");
        assert_eq!(err.message, "no participant asserted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_participant_serves_a_plain_client() {
    let server = Server::builder().default_participant("guest").start();
    for binding in BOTH {
        // A plain A2A client: no participant in the message, no X-Participant-Id.
        let plain = server.client().api(binding);
        let task = plain
            .send_ok(send_req(message(None, vec![text_part("hello")])))
            .await;
        assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED");
        assert_eq!(
            ext(&task)["participants"][0],
            json!({"id": "guest", "kind": "human", "role": "reporter", "display_name": ""}),
            "{binding:?}"
        );
        let id = id_of(&task);
        let read = plain.get_task(id, None).await.expect("the guest reads it");
        assert_eq!(read["id"], task["id"]);
        let list = plain.list_tasks(json!({})).await.expect("list");
        let ids: Vec<&Value> = list["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| &t["id"])
            .collect();
        assert!(ids.contains(&&task["id"]), "{list}");
        let next = plain
            .send_ok(send_req(on(message(None, vec![text_part("again")]), &task)))
            .await;
        assert_eq!(status_text(&next), "again");

        // Someone who names themselves is not the guest.
        plain
            .as_participant("alice")
            .get_task(id, None)
            .await
            .refused_not_found("alice is no participant");
    }
}
