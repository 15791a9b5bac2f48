//! The service's use cases end to end over the memory store, with the echo agent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use a2a::{
    DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, ListTaskPushNotificationConfigsRequest, ListTasksRequest,
    Message, Part, Role, SendMessageConfiguration, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig, TaskState,
};
use a2a_service::{A2aApi, EchoAgent, ServiceConfig, ServiceError};
use common::{
    Fixture, as_participant, assert_status, cancel_request, ctx, get_request, list_request, on,
    send, send_task, status_text,
};
use futures::StreamExt;
use serde_json::{Value, json};
use task_core::{EVENT_MEDIA_TYPE, TASK_MEDIA_TYPE, TASK_METADATA_KEY};

/// The echo agent, polling quickly, with the config as `configure` leaves it.
fn fixture_with(configure: impl FnOnce(&mut ServiceConfig)) -> Fixture {
    common::fixture_with(Arc::new(EchoAgent), |config| {
        common::quick(config);
        configure(config);
    })
}

fn fixture() -> Fixture {
    fixture_with(|_| {})
}

fn message(from: &str, id: &str, parts: Vec<Part>) -> Message {
    let mut m = common::from(from, parts);
    m.message_id = id.into();
    m
}

fn text(from: &str, id: &str, text: &str) -> Message {
    message(from, id, vec![Part::text(text)])
}

fn ext(task: &Task) -> &Value {
    &task.metadata.as_ref().expect("metadata")[TASK_METADATA_KEY]
}

async fn events(f: &Fixture, task_id: &str) -> Vec<(String, Option<TaskState>)> {
    f.store
        .events(task_id, 0, 1000)
        .await
        .expect("events")
        .into_iter()
        .map(|e| match e.event {
            StreamResponse::Task(t) => ("task".to_owned(), Some(t.status.state)),
            StreamResponse::StatusUpdate(s) => ("status".to_owned(), Some(s.status.state)),
            StreamResponse::ArtifactUpdate(_) => ("artifact".to_owned(), None),
            StreamResponse::Message(_) => ("message".to_owned(), None),
        })
        .collect()
}

#[tokio::test]
async fn a_new_conversation_echoes_and_waits_for_the_next_message() {
    let f = fixture();
    let task = send_task(
        &f,
        send(text("alice", "m-1", "Refund order 48213\nIt was late")),
    )
    .await;
    assert_status(
        &task,
        TaskState::InputRequired,
        "Refund order 48213\nIt was late",
    );
    let history = task.history.as_ref().expect("history");
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].message_id, "m-1");
    assert_eq!(
        history[0].task_id.as_deref(),
        Some(task.id.as_str()),
        "kept with its task and context"
    );
    assert_eq!(
        history[0].context_id.as_deref(),
        Some(task.context_id.as_str())
    );
    assert_eq!(history[1].role, Role::Agent);
    let ext = ext(&task);
    assert_eq!(ext["name"], "Refund order 48213");
    assert_eq!(ext["lifecycle"], "conversation");
    assert_eq!(
        ext["participants"][0],
        json!({"id": "alice", "kind": "human", "role": "reporter", "display_name": ""})
    );
    assert_eq!(
        events(&f, &task.id).await,
        vec![
            ("task".into(), Some(TaskState::Submitted)),
            ("status".into(), Some(TaskState::Working)),
            ("status".into(), Some(TaskState::InputRequired)),
        ]
    );

    let next = send_task(&f, on(&task, text("alice", "m-2", "And the shipping?"))).await;
    assert_status(&next, TaskState::InputRequired, "And the shipping?");
    assert_eq!(next.history.expect("history").len(), 4);
    let audit = f.store.audit(&task.id).await.expect("audit");
    assert!(audit.iter().all(|e| e.accepted));
}

#[tokio::test]
async fn a_conversation_completes_when_every_criterion_is_met() {
    let f = fixture();
    let envelope = Part::data(json!({"name": "Audit", "goal": "Audit the ledger",
        "acceptance_criteria": [{"text": "ledger read"}]}))
    .with_media_type(TASK_MEDIA_TYPE);
    let task = send_task(
        &f,
        send(message("alice", "m-1", vec![Part::text("start"), envelope])),
    )
    .await;
    assert_eq!(task.status.state, TaskState::InputRequired);
    assert_eq!(ext(&task)["name"], "Audit");
    // The reporter marks the criterion met with an upstream-form envelope and a comment.
    let met = Part::data(json!({"kind": "task", "payload": {"acceptance_criteria": [{"text": "ledger read", "met": true}]}}))
        .with_media_type(EVENT_MEDIA_TYPE);
    let done = send_task(
        &f,
        on(
            &task,
            message("alice", "m-2", vec![Part::text("done, thanks"), met]),
        ),
    )
    .await;
    assert_status(&done, TaskState::Completed, "done, thanks");
    assert_eq!(ext(&done)["acceptance_criteria"][0]["met"], true);
    // A terminal task takes no more messages.
    let err = f
        .service
        .send_message(&ctx(), on(&task, text("alice", "m-3", "more")))
        .await
        .expect_err("terminal");
    assert!(
        matches!(err, ServiceError::UnsupportedOperation(ref m) if m.contains("terminal state")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_non_participant_is_refused_with_a_status_update_that_says_why() {
    let f = fixture();
    let task = send_task(&f, send(text("alice", "m-1", "private matter"))).await;
    let before = events(&f, &task.id).await;
    let refused = send_task(&f, on(&task, text("mallory", "m-2", "let me in"))).await;
    assert_eq!(refused.id, task.id);
    assert_eq!(
        refused.status.state,
        TaskState::InputRequired,
        "state unchanged"
    );
    assert_eq!(
        status_text(&refused),
        "message not accepted: not a participant"
    );
    assert!(
        refused.history.is_none() && refused.metadata.is_none() && refused.artifacts.is_none(),
        "nothing leaks"
    );
    assert_eq!(events(&f, &task.id).await, before, "nothing else changes");
    let audit = f.store.audit(&task.id).await.expect("audit");
    let entry = audit
        .iter()
        .find(|e| e.message_id == "m-2")
        .expect("audited");
    assert_eq!(
        (entry.accepted, entry.reason.as_str()),
        (false, "not a participant")
    );
    // The stream gets exactly that one event.
    let mut stream = f
        .service
        .send_streaming_message(&ctx(), on(&task, text("mallory", "m-3", "again")))
        .await
        .expect("stream");
    let only = stream.next().await.expect("one event").expect("ok");
    assert!(
        matches!(only, StreamResponse::StatusUpdate(ref s) if s.status.message.as_ref().unwrap().parts[0].as_text() == Some("message not accepted: not a participant"))
    );
    assert!(stream.next().await.is_none());
    // And reads by a stranger look like a task that does not exist.
    let get = f
        .service
        .get_task(&as_participant("mallory"), get_request(&task.id, None))
        .await;
    assert_eq!(get, Err(ServiceError::TaskNotFound(task.id.clone())));
    let missing = f
        .service
        .get_task(&as_participant("alice"), get_request("nope", None))
        .await;
    assert_eq!(missing, Err(ServiceError::TaskNotFound("nope".into())));
}

#[tokio::test]
async fn identity_is_required_unless_a_default_is_configured() {
    let f = fixture();
    let mut anonymous = Message::new(Role::User, vec![Part::text("hi")]);
    anonymous.message_id = "m-1".into();
    let err = f
        .service
        .send_message(&ctx(), send(anonymous.clone()))
        .await
        .expect_err("no participant");
    assert_eq!(
        err,
        ServiceError::InvalidParams("no participant asserted".into())
    );
    let with_default = fixture_with(|c| c.default_participant = Some("guest".into()));
    let task = send_task(&with_default, send(anonymous)).await;
    assert_eq!(ext(&task)["participants"][0]["id"], "guest");
    // The header names the participant when the message does not.
    let mut by_header = Message::new(Role::User, vec![Part::text("hi")]);
    by_header.message_id = "m-2".into();
    let got = f
        .service
        .send_message(&as_participant("bob"), send(by_header))
        .await
        .expect("send");
    let SendMessageResponse::Task(task) = got else {
        panic!()
    };
    assert_eq!(ext(&task)["participants"][0]["id"], "bob");
}

#[tokio::test]
async fn commands_change_model_and_effort_without_running_the_agent() {
    let f = fixture();
    // A command as the first message opens a conversation waiting for the next one.
    let task = send_task(&f, send(text("alice", "m-1", "/effort high"))).await;
    assert_status(
        &task,
        TaskState::InputRequired,
        "reasoning effort set to high",
    );
    assert_eq!(ext(&task)["reasoning_effort"], "high");
    let shown = send_task(&f, on(&task, text("alice", "m-2", "/model"))).await;
    assert_eq!(
        status_text(&shown),
        "model: echo (default); available: echo (echo)"
    );
    let refused = send_task(&f, on(&task, text("alice", "m-3", "/model gpt-9"))).await;
    assert_eq!(
        status_text(&refused),
        "unknown model \"gpt-9\"; available: echo (echo)"
    );
    assert_eq!(
        refused.status.state,
        TaskState::InputRequired,
        "state unchanged"
    );
    let set = send_task(&f, on(&task, text("alice", "m-4", "/model echo"))).await;
    assert_eq!(status_text(&set), "model set to echo (echo)");
    assert_eq!(ext(&set)["model"], "echo");
    let history = f.store.history(&task.id, None).await.expect("history");
    assert!(
        history.is_empty(),
        "commands are not prompts: the agent never saw them"
    );
}

#[tokio::test]
async fn envelopes_that_set_server_controlled_fields_are_refused_whole() {
    let f = fixture();
    for (key, value) in [
        ("model", json!("m")),
        ("lifecycle", json!("delegated")),
        ("reasoning_effort", json!("low")),
    ] {
        let mut payload = json!({"name": "x", "goal": "y"});
        payload[key] = value;
        let part = Part::data(payload).with_media_type(TASK_MEDIA_TYPE);
        let err = f
            .service
            .send_message(
                &ctx(),
                send(message("alice", &format!("m-{key}"), vec![part])),
            )
            .await
            .expect_err("refused");
        assert_eq!(
            err,
            ServiceError::InvalidParams(format!(
                "task envelope cannot set server-controlled field(s): {key}"
            ))
        );
    }
    let list = f
        .service
        .list_tasks(&as_participant("alice"), list_request())
        .await
        .expect("list");
    assert_eq!(list.total_size, 0, "no task was created");
    let bogus =
        Part::data(json!({"kind": "bogus", "payload": {}})).with_media_type(EVENT_MEDIA_TYPE);
    let err = f
        .service
        .send_message(&ctx(), send(message("alice", "m-b", vec![bogus])))
        .await
        .expect_err("refused");
    assert!(
        matches!(err, ServiceError::InvalidParams(ref m) if m.starts_with("invalid event envelope"))
    );
}

#[tokio::test]
async fn a_repeated_message_id_is_processed_once() {
    let f = fixture();
    let task = send_task(&f, send(text("alice", "m-1", "hello"))).await;
    let again = send_task(&f, on(&task, text("alice", "m-2", "second"))).await;
    let repeat = send_task(&f, on(&task, text("alice", "m-2", "second"))).await;
    assert_eq!(repeat.id, again.id);
    let history = f.store.history(&task.id, None).await.expect("history");
    assert_eq!(history.iter().filter(|m| m.message_id == "m-2").count(), 1);
}

#[tokio::test]
async fn context_ids_and_history_lengths() {
    let f = fixture();
    let mut first = text("alice", "m-1", "hello");
    first.context_id = Some("ctx-mine".into());
    let task = send_task(&f, send(first)).await;
    assert_eq!(
        task.context_id, "ctx-mine",
        "a client-provided context id is kept"
    );
    let mut wrong = text("alice", "m-2", "hi");
    wrong.context_id = Some("other".into());
    let err = f
        .service
        .send_message(&ctx(), on(&task, wrong))
        .await
        .expect_err("mismatch");
    assert!(matches!(err, ServiceError::InvalidParams(ref m) if m.contains("does not match")));
    let get = |n| get_request(&task.id, n);
    let alice = as_participant("alice");
    assert!(
        f.service
            .get_task(&alice, get(Some(0)))
            .await
            .expect("get")
            .history
            .is_none()
    );
    assert_eq!(
        f.service
            .get_task(&alice, get(Some(1)))
            .await
            .expect("get")
            .history
            .expect("h")
            .len(),
        1
    );
    assert_eq!(
        f.service
            .get_task(&alice, get(None))
            .await
            .expect("get")
            .history
            .expect("h")
            .len(),
        2
    );
    assert!(matches!(
        f.service.get_task(&alice, get(Some(-1))).await,
        Err(ServiceError::InvalidParams(_))
    ));
    let unknown = f
        .service
        .send_message(
            &ctx(),
            on(
                &Task {
                    id: "nope".into(),
                    ..task.clone()
                },
                text("alice", "m-3", "x"),
            ),
        )
        .await;
    assert_eq!(
        unknown.expect_err("unknown"),
        ServiceError::TaskNotFound("nope".into())
    );
}

/// A blocking send answers with the task as GetTask shows it at the same version: the history
/// its run handed over for a first message, the one it reads for a follow-up, cut to the
/// requested length either way.
#[tokio::test]
async fn a_blocking_send_answers_with_the_history_get_task_shows() {
    let f = fixture();
    let alice = as_participant("alice");
    let sent = |message: Message, length: Option<i32>| {
        let mut req = send(message);
        req.configuration = Some(SendMessageConfiguration {
            history_length: length,
            return_immediately: None,
            accepted_output_modes: None,
            task_push_notification_config: None,
        });
        req
    };
    let same_as_get = |answer: Task, length: Option<i32>, what: String| {
        let (f, alice) = (&f, &alice);
        async move {
            let get = get_request(&answer.id, length);
            let got = f.service.get_task(alice, get).await.expect("get");
            assert_eq!(
                serde_json::to_value(&answer.history).expect("json"),
                serde_json::to_value(&got.history).expect("json"),
                "{what}, history length {length:?}"
            );
            answer.history.map_or(0, |h| h.len())
        }
    };
    let lengths = [None, Some(0), Some(1), Some(2), Some(5)];
    for (n, length) in lengths.into_iter().enumerate() {
        let first = text("alice", "first", &format!("hello {n}"));
        let answer = send_task(&f, sent(first, length)).await;
        let shown = same_as_get(answer, length, format!("first message {n}")).await;
        assert_eq!(shown, length.map_or(2, |l| (l as usize).min(2)));
    }
    let task = send_task(&f, send(text("alice", "m-0", "start"))).await;
    for (n, length) in lengths.into_iter().enumerate() {
        let more = text("alice", &format!("m-{}", n + 1), &format!("more {n}"));
        let answer = send_task(&f, sent(on(&task, more).message, length)).await;
        same_as_get(answer, length, format!("follow-up {n}")).await;
    }
}

#[tokio::test]
async fn return_immediately_answers_before_the_agent_runs() {
    let f = fixture();
    let mut req = send(text("alice", "m-1", "hello"));
    req.configuration = Some(SendMessageConfiguration {
        return_immediately: Some(true),
        accepted_output_modes: None,
        task_push_notification_config: None,
        history_length: None,
    });
    let task = send_task(&f, req).await;
    assert!(matches!(
        task.status.state,
        TaskState::Submitted | TaskState::Working | TaskState::InputRequired
    ));
    // The run goes on in the background.
    for _ in 0..200 {
        let now = f
            .service
            .get_task(&as_participant("alice"), get_request(&task.id, None))
            .await
            .expect("get");
        if now.status.state == TaskState::InputRequired {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the background run never finished");
}

#[tokio::test]
async fn a_stream_gives_the_task_then_its_updates_and_ends_when_it_waits() {
    let f = fixture();
    let stream = f
        .service
        .send_streaming_message(&ctx(), send(text("alice", "m-1", "stream me")))
        .await
        .expect("stream");
    let events: Vec<_> = stream.collect().await;
    let kinds: Vec<_> = events
        .iter()
        .map(|e| match e.as_ref().expect("ok") {
            StreamResponse::Task(t) => format!("task:{:?}", t.status.state),
            StreamResponse::StatusUpdate(s) => format!("status:{:?}", s.status.state),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        ["task:Submitted", "status:Working", "status:InputRequired"]
    );
    let StreamResponse::Task(task) = events[0].as_ref().expect("ok") else {
        panic!()
    };
    assert!(
        ext(task).is_object(),
        "the first event carries the extension"
    );
}

#[tokio::test]
async fn subscribe_follows_a_task_until_it_waits_or_ends() {
    let f = fixture();
    let task = send_task(&f, send(text("alice", "m-1", "hello"))).await;
    let alice = as_participant("alice");
    let sub = f
        .service
        .subscribe_to_task(
            &alice,
            SubscribeToTaskRequest {
                id: task.id.clone(),
                tenant: None,
            },
        )
        .await
        .expect("subscribe");
    let follower =
        tokio::spawn(async move { sub.map(|e| e.expect("ok")).collect::<Vec<_>>().await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    send_task(&f, on(&task, text("alice", "m-2", "again"))).await;
    let seen = tokio::time::timeout(Duration::from_secs(5), follower)
        .await
        .expect("ends")
        .expect("task");
    assert!(
        matches!(seen[0], StreamResponse::Task(ref t) if t.status.state == TaskState::InputRequired)
    );
    let states: Vec<_> = seen[1..]
        .iter()
        .map(|e| match e {
            StreamResponse::StatusUpdate(s) => s.status.state.clone(),
            _ => TaskState::Unspecified,
        })
        .collect();
    assert_eq!(states, [TaskState::Working, TaskState::InputRequired]);
    // Strangers and terminal tasks.
    let stranger = f
        .service
        .subscribe_to_task(
            &as_participant("mallory"),
            SubscribeToTaskRequest {
                id: task.id.clone(),
                tenant: None,
            },
        )
        .await;
    assert!(matches!(stranger, Err(ServiceError::TaskNotFound(_))));
    f.service
        .cancel_task(&alice, cancel_request(&task.id))
        .await
        .expect("cancel");
    let ended = f
        .service
        .subscribe_to_task(
            &alice,
            SubscribeToTaskRequest {
                id: task.id.clone(),
                tenant: None,
            },
        )
        .await;
    assert!(matches!(ended, Err(ServiceError::UnsupportedOperation(_))));
}

#[tokio::test]
async fn cancel_is_for_reporters_and_admins_and_happens_once() {
    let f = fixture();
    let envelope = Part::data(json!({"name": "n", "goal": "g", "participants": [
        {"id": "alice", "kind": "human", "role": "reporter"},
        {"id": "carol", "kind": "human", "role": "assignee"}]}))
    .with_media_type(TASK_MEDIA_TYPE);
    let task = send_task(
        &f,
        send(message("alice", "m-1", vec![Part::text("go"), envelope])),
    )
    .await;
    let req = || cancel_request(&task.id);
    let err = f
        .service
        .cancel_task(&as_participant("carol"), req())
        .await
        .expect_err("assignee");
    assert_eq!(
        err,
        ServiceError::TaskNotCancelable(
            "the task cannot be canceled: only a reporter or an admin may cancel this task".into()
        )
    );
    assert!(matches!(
        f.service
            .cancel_task(&as_participant("mallory"), req())
            .await,
        Err(ServiceError::TaskNotFound(_))
    ));
    let canceled = f
        .service
        .cancel_task(&as_participant("alice"), req())
        .await
        .expect("reporter");
    assert_status(&canceled, TaskState::Canceled, "canceled by alice");
    let again = f
        .service
        .cancel_task(&as_participant("alice"), req())
        .await
        .expect_err("terminal");
    assert!(matches!(again, ServiceError::TaskNotCancelable(_)));
}

#[tokio::test]
async fn list_tasks_is_scoped_to_the_caller() {
    let f = fixture();
    let a = send_task(&f, send(text("alice", "m-1", "one"))).await;
    send_task(&f, send(text("bob", "m-2", "two"))).await;
    let b = send_task(&f, send(text("alice", "m-3", "three"))).await;
    let alice = as_participant("alice");
    let list = f
        .service
        .list_tasks(&alice, list_request())
        .await
        .expect("list");
    let ids: Vec<_> = list.tasks.iter().map(|t| t.id.clone()).collect();
    assert_eq!(
        ids,
        vec![b.id.clone(), a.id.clone()],
        "newest first, only alice's"
    );
    assert_eq!(
        (
            list.total_size,
            list.page_size,
            list.next_page_token.as_str()
        ),
        (2, 50, "")
    );
    assert!(
        list.tasks
            .iter()
            .all(|t| t.history.is_none() && t.artifacts.is_none())
    );
    let page = f
        .service
        .list_tasks(
            &alice,
            ListTasksRequest {
                page_size: Some(1),
                history_length: Some(5),
                ..list_request()
            },
        )
        .await
        .expect("list");
    assert_eq!(page.tasks.len(), 1);
    assert_eq!(page.tasks[0].history.as_ref().expect("asked for").len(), 2);
    assert!(!page.next_page_token.is_empty());
    for bad in [0, 101] {
        let err = f
            .service
            .list_tasks(
                &alice,
                ListTasksRequest {
                    page_size: Some(bad),
                    ..list_request()
                },
            )
            .await;
        assert!(matches!(err, Err(ServiceError::InvalidParams(_))), "{bad}");
    }
}

#[tokio::test]
async fn push_configs_and_the_private_webhook_guard() {
    let f = fixture();
    let task = send_task(&f, send(text("alice", "m-1", "hello"))).await;
    let alice = as_participant("alice");
    let config = |url: &str| TaskPushNotificationConfig {
        url: url.into(),
        id: None,
        task_id: task.id.clone(),
        token: Some("tok".into()),
        authentication: None,
        tenant: None,
    };
    let refused = f
        .service
        .create_push_config(&alice, config("http://127.0.0.1:9/hook"))
        .await;
    assert!(
        matches!(refused, Err(ServiceError::InvalidParams(ref m)) if m.contains("private") || m.contains("loopback")),
        "{refused:?}"
    );
    let allowed = fixture_with(|c| c.allow_private_webhooks = true);
    let task2 = send_task(&allowed, send(text("alice", "m-1", "hello"))).await;
    let created = allowed
        .service
        .create_push_config(
            &alice,
            TaskPushNotificationConfig {
                task_id: task2.id.clone(),
                ..config("http://127.0.0.1:9/hook")
            },
        )
        .await
        .expect("allowed");
    let id = created.id.clone().expect("an id is assigned");
    let get = GetTaskPushNotificationConfigRequest {
        task_id: task2.id.clone(),
        id: id.clone(),
        tenant: None,
    };
    assert_eq!(
        allowed
            .service
            .get_push_config(&alice, get.clone())
            .await
            .expect("get"),
        created
    );
    let list = ListTaskPushNotificationConfigsRequest {
        task_id: task2.id.clone(),
        page_size: None,
        page_token: None,
        tenant: None,
    };
    assert_eq!(
        allowed
            .service
            .list_push_configs(&alice, list.clone())
            .await
            .expect("list")
            .configs
            .len(),
        1
    );
    assert!(matches!(
        allowed
            .service
            .get_push_config(&as_participant("mallory"), get.clone())
            .await,
        Err(ServiceError::TaskNotFound(_))
    ));
    let delete = DeleteTaskPushNotificationConfigRequest {
        task_id: task2.id.clone(),
        id,
        tenant: None,
    };
    allowed
        .service
        .delete_push_config(&alice, delete.clone())
        .await
        .expect("delete");
    allowed
        .service
        .delete_push_config(&alice, delete)
        .await
        .expect("idempotent");
    assert!(matches!(
        allowed.service.get_push_config(&alice, get).await,
        Err(ServiceError::TaskNotFound(_))
    ));
}

#[tokio::test]
async fn parts_the_agent_does_not_accept_are_refused() {
    let f = fixture();
    let image = Part::raw(vec![1, 2, 3]).with_media_type("image/png");
    let err = f
        .service
        .send_message(
            &ctx(),
            send(message("alice", "m-1", vec![Part::text("look"), image])),
        )
        .await
        .expect_err("refused");
    assert!(
        matches!(err, ServiceError::ContentTypeNotSupported(ref m) if m.starts_with("part 2 has media type image/png")),
        "{err:?}"
    );
    let data = Part::data(json!({"order": 48213}));
    let task = send_task(&f, send(message("alice", "m-2", vec![data]))).await;
    assert_eq!(
        status_text(&task),
        "{\"order\":48213}",
        "data parts reach the agent as JSON"
    );
}

#[tokio::test]
async fn the_extended_card_is_offered_only_when_configured() {
    let f = fixture();
    let err = f
        .service
        .get_extended_agent_card(
            &as_participant("alice"),
            GetExtendedAgentCardRequest { tenant: None },
        )
        .await;
    assert!(matches!(err, Err(ServiceError::UnsupportedOperation(_))));
    assert_eq!(
        f.service.agent_card().capabilities.extended_agent_card,
        Some(false)
    );
}

#[tokio::test]
async fn get_task_json_is_get_task_at_the_current_version_for_readers_only() {
    let f = fixture();
    let as_json = |task: Task| serde_json::to_value(task).expect("json");
    let rendered = |raw: Box<serde_json::value::RawValue>| -> Value {
        serde_json::from_str(raw.get()).expect("rendered json")
    };
    let task = send_task(&f, send(text("alice", "m-1", "hello"))).await;
    let alice = as_participant("alice");
    for _ in 0..2 {
        // The second answer comes from the kept view.
        let json = f
            .service
            .get_task_json(&alice, get_request(&task.id, None))
            .await;
        let typed = f
            .service
            .get_task(&alice, get_request(&task.id, None))
            .await;
        assert_eq!(rendered(json.expect("json")), as_json(typed.expect("task")));
        assert!(matches!(
            f.service
                .get_task_json(&as_participant("mallory"), get_request(&task.id, None))
                .await,
            Err(ServiceError::TaskNotFound(_))
        ));
    }
    // A change of the task is seen at once.
    let after = send_task(&f, on(&task, text("alice", "m-2", "again"))).await;
    let json = rendered(
        f.service
            .get_task_json(&alice, get_request(&task.id, None))
            .await
            .expect("json"),
    );
    assert_eq!(json["history"].as_array().map(Vec::len), Some(4));
    assert_eq!(json, as_json(after));
    // A limited history is rendered as get_task renders it.
    let limited = f
        .service
        .get_task_json(&alice, get_request(&task.id, Some(1)))
        .await
        .expect("json");
    let typed = f
        .service
        .get_task(&alice, get_request(&task.id, Some(1)))
        .await
        .expect("task");
    assert_eq!(rendered(limited), as_json(typed));
    assert!(matches!(
        f.service
            .get_task_json(&alice, get_request("no-such-task", None))
            .await,
        Err(ServiceError::TaskNotFound(_))
    ));
}
