//! What messages do over HTTP: task and event envelopes, commands, terminal tasks, repeated
//! message ids, `returnImmediately`, refused media types and mismatched contexts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_envelope_sets_criteria_and_an_event_envelope_meeting_them_completes_the_task() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let created = api
            .send_ok(new_task_req(
                "alice",
                "start the audit",
                json!({
                    "name": "Audit", "goal": "Audit the ledger",
                    "acceptance_criteria": [{"text": "ledger read"}]
                }),
            ))
            .await;
        assert_eq!(state(&created), "TASK_STATE_INPUT_REQUIRED", "{binding:?}");
        assert_eq!(
            status_text(&created),
            "start the audit",
            "the envelope is not echoed"
        );
        let ext_created = ext(&created);
        assert_eq!(ext_created["name"], "Audit");
        assert_eq!(ext_created["goal"], "Audit the ledger");
        assert_eq!(ext_created["acceptance_criteria"][0]["text"], "ledger read");
        assert_eq!(ext_created["acceptance_criteria"][0]["met"], false);
        let roles: Vec<(&str, &str)> = ext_created["participants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["id"].as_str().unwrap(), p["role"].as_str().unwrap()))
            .collect();
        assert_eq!(roles, [("alice", "reporter"), ("tiny-harness", "assignee")]);

        // The upstream form of the envelope, with a comment.
        let done = api
            .send_ok(send_req(on(
                message(
                    Some("alice"),
                    vec![
                        text_part("done, thanks"),
                        event_envelope(
                            "task",
                            json!({"acceptance_criteria": [{"text": "ledger read", "met": true}]}),
                        ),
                    ],
                ),
                &created,
            )))
            .await;
        assert_eq!(state(&done), "TASK_STATE_COMPLETED", "{binding:?}: {done}");
        assert_eq!(status_text(&done), "done, thanks");
        assert_eq!(ext(&done)["acceptance_criteria"][0]["met"], true);

        // A terminal task takes no more messages, blocking or streaming.
        let more = send_req(on(text("alice", "one more thing"), &created));
        let err =
            api.send(more.clone())
                .await
                .refused("terminal", -32004, 400, "UNSUPPORTED_OPERATION");
        assert!(err.message.contains("terminal state"), "{err:?}");
        let Err(err) = api.send_streaming(more).await else {
            panic!("{binding:?}: a stream on a completed task");
        };
        err.assert_is(-32004, 400, "UNSUPPORTED_OPERATION");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_envelope_setting_a_server_controlled_field_is_refused_whole() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let err = api
            .send(new_task_req(
                "carol",
                "pick my model",
                json!({"name": "x", "goal": "y", "model": "gpt-9"}),
            ))
            .await
            .refused_invalid_params("model is server-controlled");
        assert_eq!(
            err.message,
            "task envelope cannot set server-controlled field(s): model"
        );
        let list = api.list_as("carol").await;
        assert_eq!(list["totalSize"], 0, "{binding:?}: no task was created");

        // On an existing task too: refused, nothing applied.
        let task = api.send_text("alice", "a task").await;
        api.send(send_req(on(
            message(
                Some("alice"),
                vec![event_envelope(
                    "task",
                    json!({"name": "renamed", "reasoning_effort": "low"}),
                )],
            ),
            &task,
        )))
        .await
        .refused_invalid_params("reasoning_effort is server-controlled");
        let read = api.read_as("alice", id_of(&task)).await;
        assert_eq!(ext(&read), ext(&task), "nothing applied");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watchers_envelope_and_commands_are_refused() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api
            .send_ok(new_task_req(
                "alice",
                "watched work",
                json!({
                    "name": "Watched", "goal": "g",
                    "participants": [
                        {"id": "alice", "kind": "human", "role": "reporter"},
                        {"id": "wes", "kind": "human", "role": "watcher"}
                    ]
                }),
            ))
            .await;
        let err = api
            .send(edit_req("wes", &task, json!({"name": "hijacked"})))
            .await
            .refused_invalid_params("a watcher may not edit");
        assert_eq!(
            err.message, "a watcher may not edit this task",
            "{binding:?}"
        );

        // A command from a watcher is answered with a status update saying no.
        let refused = api.follow_up(&task, "wes", "/effort low").await;
        assert_eq!(status_text(&refused), "a watcher may not send commands");
        assert_eq!(state(&refused), "TASK_STATE_INPUT_REQUIRED");

        let read = api.read_as("wes", id_of(&task)).await;
        assert_eq!(ext(&read)["name"], "Watched");
        assert_eq!(ext(&read)["reasoning_effort"], Value::Null);
        let list = api.list_as("wes").await;
        assert!(listed_ids(&list).contains(&id_of(&task)), "{list}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn participants_an_admin_adds_or_removes_gain_or_lose_the_task() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let alice = json!({"id": "alice", "kind": "human", "role": "admin"});
        let agent = json!({"id": "tiny-harness", "kind": "agent", "role": "assignee"});
        let zoe = json!({"id": "zoe", "kind": "human", "role": "watcher"});
        let task = api
            .send_ok(new_task_req(
                "alice",
                "team work",
                json!({"name": "Team", "goal": "g",
                        "participants": [alice.clone(), agent.clone()]}),
            ))
            .await;
        let id = id_of(&task);
        let as_zoe = api.as_participant("zoe");
        as_zoe.get_task(id, None).await.refused_not_found("not yet");

        // The admin adds zoe: she reads it and finds it in her list.
        let added = api
            .send_ok(edit_req(
                "alice",
                &task,
                json!({"participants": [alice.clone(), agent.clone(), zoe]}),
            ))
            .await;
        assert_eq!(
            ext(&added)["participants"].as_array().map(Vec::len),
            Some(3),
            "{binding:?}: {added}"
        );
        let read = as_zoe.get_task(id, None).await.expect("zoe reads it");
        assert_eq!(state(&read), state(&task));
        let list = as_zoe.list_tasks(json!({})).await.expect("list");
        assert_eq!(listed_ids(&list), [id], "{binding:?}: {list}");

        // And removes her: it is gone for her again.
        api.send_ok(edit_req(
            "alice",
            &task,
            json!({"participants": [alice, agent]}),
        ))
        .await;
        as_zoe.get_task(id, None).await.refused_not_found("removed");
        let list = as_zoe.list_tasks(json!({})).await.expect("list");
        assert_eq!(list["totalSize"], 0, "{binding:?}: {list}");

        // Only an admin changes participants.
        let reporter_task = api.send_text("bob", "mine").await;
        let err = api
            .send(edit_req(
                "bob",
                &reporter_task,
                json!({"participants": [
                    {"id": "bob", "kind": "human", "role": "admin"}
                ]}),
            ))
            .await
            .refused_invalid_params("a reporter may not change participants");
        assert_eq!(err.message, "only an admin may change participants");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_are_answered_by_a_status_update_and_do_not_run_the_agent() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api.send_text("alice", "hello").await;

        let shown = api.follow_up(&task, "alice", "/model").await;
        assert_eq!(
            status_text(&shown),
            "model: echo (default); available: echo (echo)",
            "{binding:?}"
        );
        assert_eq!(state(&shown), "TASK_STATE_INPUT_REQUIRED");

        let effort = api.follow_up(&task, "alice", "/effort high").await;
        assert_eq!(status_text(&effort), "reasoning effort set to high");
        assert_eq!(ext(&effort)["reasoning_effort"], "high");

        let refused = api.follow_up(&task, "alice", "/model nope").await;
        assert_eq!(
            status_text(&refused),
            "unknown model \"nope\"; available: echo (echo)"
        );
        assert_eq!(
            state(&refused),
            "TASK_STATE_INPUT_REQUIRED",
            "state unchanged"
        );
        assert_eq!(ext(&refused)["model"], Value::Null);

        // Streamed, a command is one status update.
        let events = api
            .send_streaming(send_req(on(text("alice", "/effort low"), &task)))
            .await
            .expect("stream")
            .collect()
            .await;
        assert_eq!(event_kinds(&events), ["status:TASK_STATE_INPUT_REQUIRED"]);
        assert_eq!(
            status_text(&events[0]["statusUpdate"]),
            "reasoning effort set to low"
        );

        let read = api.read_as("alice", id_of(&task)).await;
        assert_eq!(ext(&read)["reasoning_effort"], "low");
        assert_eq!(
            read["history"].as_array().map(Vec::len),
            Some(2),
            "the agent never saw the commands: {read}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_as_the_first_message_opens_a_conversation_its_first_message_names() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api.send_text("alice", "/effort high").await;
        assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED", "{binding:?}");
        assert_eq!(status_text(&task), "reasoning effort set to high");
        assert_eq!(ext(&task)["reasoning_effort"], "high");
        assert_eq!(ext(&task)["lifecycle"], "conversation");
        assert_eq!(ext(&task)["name"], "New conversation", "not the command");
        assert_eq!(ext(&task)["goal"], "New conversation");

        let first = "Refund order 48213\nit was late";
        let named = api.follow_up(&task, "alice", first).await;
        assert_eq!(state(&named), "TASK_STATE_INPUT_REQUIRED", "{binding:?}");
        assert_eq!(status_text(&named), first, "the agent ran on it");
        assert_eq!(ext(&named)["name"], "Refund order 48213");
        assert_eq!(ext(&named)["goal"], first);
        assert_eq!(ext(&named)["reasoning_effort"], "high");
    }
}

/// A2A §3.1.2: a stream about a task starts with the task (the service's own contract:
/// "the stream's first event is the task (or the one refusal status update)").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_as_the_first_message_streamed_starts_with_the_task() {
    let server = Server::start();
    for binding in BOTH {
        let events = server
            .client()
            .api(binding)
            .send_streaming(send_req(text("alice", "/effort high")))
            .await
            .expect("stream")
            .collect()
            .await;
        let kinds = event_kinds(&events);
        assert!(
            kinds.first().is_some_and(|k| k.starts_with("task:")),
            "{binding:?}: the first event is the task: {events:?}"
        );
        let last = events.last().unwrap();
        let last = last.get("statusUpdate").unwrap_or(&last["task"]);
        assert_eq!(state(last), "TASK_STATE_INPUT_REQUIRED");
        assert_eq!(status_text(last), "reasoning effort set to high");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_message_id_is_processed_once() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api.send_text("alice", "hello").await;
        let repeated = on(text("alice", "only once"), &task);
        let first = api.send_ok(send_req(repeated.clone())).await;
        assert_eq!(status_text(&first), "only once");
        let second = api.send_ok(send_req(repeated.clone())).await;
        assert_eq!(second["id"], task["id"]);
        assert_eq!(state(&second), "TASK_STATE_INPUT_REQUIRED");

        let read = api.read_as("alice", id_of(&task)).await;
        let history = read["history"].as_array().unwrap();
        assert_eq!(
            history
                .iter()
                .filter(|m| m["messageId"] == repeated["messageId"])
                .count(),
            1,
            "{binding:?}: {read}"
        );
        assert_eq!(history.len(), 4, "two messages, two replies");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn return_immediately_answers_before_the_run_which_finishes_in_the_background() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let mut req = send_req(text("alice", "in the background"));
        req["configuration"] = json!({"returnImmediately": true});
        let task = api.send_ok(req).await;
        assert!(
            matches!(state(&task), "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING"),
            "{binding:?}: answered before the run: {task}"
        );
        let done = poll_state(
            &api.as_participant("alice"),
            id_of(&task),
            "TASK_STATE_INPUT_REQUIRED",
        )
        .await;
        assert_eq!(status_text(&done), "in the background");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_with_an_unaccepted_media_type_is_content_type_not_supported() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let image =
            json!({"raw": "iVBORw0KGgo=", "filename": "diagram.png", "mediaType": "image/png"});
        let err = api
            .send(send_req(message(
                Some("carol"),
                vec![text_part("look at this"), image],
            )))
            .await
            .refused("image/png", -32005, 400, "CONTENT_TYPE_NOT_SUPPORTED");
        assert!(
            err.message.starts_with("part 2 has media type image/png"),
            "{err:?}"
        );
        let list = api.list_as("carol").await;
        assert_eq!(list["totalSize"], 0, "nothing stored");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_with_another_context_or_an_unknown_task_is_refused() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api.send_text("alice", "hello").await;
        let mut wrong = on(text("alice", "hi"), &task);
        wrong["contextId"] = json!("some-other-context");
        let err = api
            .send(send_req(wrong))
            .await
            .refused_invalid_params("mismatch");
        assert!(err.message.contains("does not match"), "{err:?}");

        // The right context is fine.
        let mut right = on(text("alice", "hi"), &task);
        right["contextId"] = task["contextId"].clone();
        assert_eq!(status_text(&api.send_ok(send_req(right)).await), "hi");

        api.send(send_req(on(text("alice", "hi"), &json!("no-such-task"))))
            .await
            .refused_not_found("unknown task");
    }
}

/// A follow-up well within the limits (a message may take 1 MiB; the request 4 MiB) whose
/// echo does not fit the 300 KiB task document (the reply becomes the status message): the
/// turn must settle somehow (a reply, a failure, a refusal) and the task keep taking messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_too_large_for_the_task_document_does_not_wedge_the_task() {
    let server = Server::start();
    let api = server.client().api(Binding::JsonRpc);
    let task = api.send_text("alice", "small start").await;
    let big = "y".repeat(400 * 1024);
    match api
        .send_streaming(send_req(on(text("alice", &big), &task)))
        .await
    {
        // Refusing it up front would do.
        Err(err) => err.assert_is(-32602, 400, "INVALID_PARAMS"),
        Ok(events) => {
            let events = events.collect().await;
            let last = events.last().expect("events");
            let last = last.get("statusUpdate").unwrap_or(&last["task"]);
            assert_ne!(
                state(last),
                "TASK_STATE_WORKING",
                "{}",
                event_kinds(&events).join(", ")
            );
        }
    }
    let read = api
        .as_participant("alice")
        .get_task(id_of(&task), Some(0))
        .await
        .expect("get");
    if state(&read) == "TASK_STATE_INPUT_REQUIRED" {
        let next = api.follow_up(&task, "alice", "small again").await;
        assert_eq!(state(&next), "TASK_STATE_INPUT_REQUIRED");
        assert_eq!(status_text(&next), "small again");
    }
}
