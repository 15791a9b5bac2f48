//! The 11 A2A methods and the agent card against the real server, through both bindings:
//! what each answers on the wire (result documents, SSE frames, errors with ErrorInfo).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_message_blocks_until_the_echo_waits_for_input() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let sent = text("alice", "Refund order 48213\nIt was late");
        let task = api.send_ok(send_req(sent.clone())).await;

        assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED", "{binding:?}");
        assert_eq!(status_text(&task), "Refund order 48213\nIt was late");
        let reply = &task["status"]["message"];
        assert_eq!(reply["role"], "ROLE_AGENT");
        assert_eq!(reply["taskId"], task["id"]);
        assert_eq!(reply["contextId"], task["contextId"]);
        assert!(task["status"]["timestamp"].is_string());
        assert!(!task["contextId"].as_str().unwrap().is_empty());

        let ext = ext(&task);
        assert_eq!(ext["name"], "Refund order 48213");
        assert_eq!(ext["goal"], "Refund order 48213\nIt was late");
        assert_eq!(ext["lifecycle"], "conversation");
        assert_eq!(
            ext["participants"],
            json!([
                {"id": "alice", "kind": "human", "role": "reporter", "display_name": ""},
                {"id": "tiny-harness", "kind": "agent", "role": "assignee", "display_name": ""}
            ])
        );

        let history = task["history"].as_array().expect("history");
        assert_eq!(history.len(), 2, "the message and the reply: {task}");
        assert_eq!(history[0]["messageId"], sent["messageId"]);
        assert_eq!(history[0]["role"], "ROLE_USER");
        assert_eq!(history[1]["role"], "ROLE_AGENT");

        // configuration.historyLength bounds the history of the answer.
        let mut req = send_req(on(text("alice", "and now?"), &task));
        req["configuration"] = json!({"historyLength": 1});
        let next = api.send_ok(req).await;
        let history = next["history"].as_array().expect("history");
        assert_eq!(history.len(), 1, "{binding:?}: {next}");
        assert_eq!(history[0]["parts"][0]["text"], "and now?");
        assert_eq!(history[0]["role"], "ROLE_AGENT");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_streaming_message_gives_the_task_then_working_then_input_required() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let stream = api
            .send_streaming(send_req(text("alice", "stream me")))
            .await
            .expect("stream");
        assert_eq!(stream.headers["content-type"], "text/event-stream");
        assert_eq!(stream.headers["cache-control"], "no-store");
        let events = stream.collect().await;
        assert_eq!(
            event_kinds(&events),
            [
                "task:TASK_STATE_SUBMITTED",
                "status:TASK_STATE_WORKING",
                "status:TASK_STATE_INPUT_REQUIRED"
            ],
            "{binding:?}: {events:?}"
        );
        let task = &events[0]["task"];
        assert!(
            ext(task).is_object(),
            "the first event carries the extension"
        );
        for update in &events[1..] {
            assert_eq!(update["statusUpdate"]["taskId"], task["id"]);
            assert_eq!(update["statusUpdate"]["contextId"], task["contextId"]);
        }
        assert_eq!(status_text(&events[2]["statusUpdate"]), "stream me");
        // The task the stream created is the task GetTask reads.
        let read = api.read_as("alice", id_of(task)).await;
        assert_eq!(state(&read), "TASK_STATE_INPUT_REQUIRED");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_task_honours_history_length() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api.send_text("alice", "hello").await;
        let id = id_of(&task);
        let alice = api.as_participant("alice");

        let all = alice.get_task(id, None).await.expect("get");
        assert_eq!(all["id"], task["id"]);
        assert_eq!(all["history"].as_array().expect("history").len(), 2);
        assert!(ext(&all).is_object());

        let last = alice.get_task(id, Some(1)).await.expect("get");
        let history = last["history"].as_array().expect("history");
        assert_eq!(history.len(), 1, "{binding:?}");
        assert_eq!(history[0]["role"], "ROLE_AGENT", "the newest message");

        let none = alice.get_task(id, Some(0)).await.expect("get");
        assert!(none.get("history").is_none(), "historyLength 0: {none}");

        alice
            .get_task(id, Some(-1))
            .await
            .refused_invalid_params("negative");
        alice
            .get_task("no-such-task", None)
            .await
            .refused_not_found("unknown");
    }
}

fn ids(list: &Value) -> Vec<String> {
    list["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| id_of(t).to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_tasks_is_scoped_to_the_caller_paged_and_filtered() {
    let server = Server::start();
    let api = server.client().api(Binding::JsonRpc);
    let a = api.send_text("alice", "one").await;
    let mut in_context = text("alice", "two");
    in_context["contextId"] = json!("ctx-e2e");
    let b = api.send_ok(send_req(in_context)).await;
    assert_eq!(b["contextId"], "ctx-e2e");
    let c = api.send_text("alice", "three").await;
    let bobs = api.send_text("bob", "bob's").await;
    let canceled = api
        .as_participant("alice")
        .cancel(id_of(&c))
        .await
        .expect("cancel");
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
    let alices: BTreeSet<String> = [&a, &b, &c].iter().map(|t| id_of(t).to_owned()).collect();

    for binding in BOTH {
        let alice = server.client().as_participant("alice").api(binding);
        let list = alice.list_tasks(json!({})).await.expect("list");
        assert_eq!(
            ids(&list).into_iter().collect::<BTreeSet<_>>(),
            alices,
            "{binding:?}: only alice's tasks"
        );
        assert_eq!(list["totalSize"], 3);
        assert_eq!(list["pageSize"], 50);
        assert_eq!(
            list["nextPageToken"], "",
            "always present, empty on the last page"
        );
        for task in list["tasks"].as_array().unwrap() {
            assert!(
                task.get("artifacts").is_none(),
                "includeArtifacts is false by default: the field is absent: {task}"
            );
            assert!(task.get("history").is_none(), "no history unless asked");
            assert!(ext(task).is_object());
        }
        // Newest status first: the canceled one changed last.
        assert_eq!(ids(&list)[0], id_of(&c));

        let bob = server.client().as_participant("bob").api(binding);
        let list = bob.list_tasks(json!({})).await.expect("list");
        assert_eq!(ids(&list), [id_of(&bobs)]);
        assert_eq!(list["totalSize"], 1);

        // Pages of two.
        let first = alice
            .list_tasks(json!({"pageSize": 2}))
            .await
            .expect("page 1");
        assert_eq!(ids(&first).len(), 2);
        assert_eq!(first["pageSize"], 2);
        assert_eq!(first["totalSize"], 3);
        let token = first["nextPageToken"].as_str().unwrap().to_owned();
        assert!(!token.is_empty());
        let second = alice
            .list_tasks(json!({"pageSize": 2, "pageToken": token}))
            .await
            .expect("page 2");
        assert_eq!(ids(&second).len(), 1);
        assert_eq!(second["nextPageToken"], "");
        let mut paged = ids(&first);
        paged.extend(ids(&second));
        assert_eq!(paged, ids(&list_all(&alice).await), "pages in list order");

        // Filters.
        let by_state = alice
            .list_tasks(json!({"status": "TASK_STATE_CANCELED"}))
            .await
            .expect("status filter");
        assert_eq!(ids(&by_state), [id_of(&c)]);
        let waiting = alice
            .list_tasks(json!({"status": "TASK_STATE_INPUT_REQUIRED"}))
            .await
            .expect("status filter");
        assert_eq!(ids(&waiting).len(), 2);
        let by_context = alice
            .list_tasks(json!({"contextId": "ctx-e2e"}))
            .await
            .expect("context filter");
        assert_eq!(ids(&by_context), [id_of(&b)]);

        // Asking for history.
        let with_history = alice
            .list_tasks(json!({"historyLength": 1, "pageSize": 1}))
            .await
            .expect("history");
        assert_eq!(
            with_history["tasks"][0]["history"].as_array().map(Vec::len),
            Some(1)
        );

        let explicit = alice
            .list_tasks(json!({"includeArtifacts": true}))
            .await
            .expect("includeArtifacts");
        assert_eq!(explicit["totalSize"], 3);
        let after = alice
            .list_tasks(json!({"statusTimestampAfter": "2000-01-01T00:00:00Z"}))
            .await
            .expect("statusTimestampAfter");
        assert_eq!(after["totalSize"], 3);
        let future = alice
            .list_tasks(json!({"statusTimestampAfter": "2999-01-01T00:00:00Z"}))
            .await
            .expect("statusTimestampAfter");
        assert_eq!(future["totalSize"], 0, "{future}");

        alice
            .list_tasks(json!({"pageSize": 101}))
            .await
            .refused_invalid_params("too big");
    }
}

async fn list_all(api: &Api) -> Value {
    api.list_tasks(json!({})).await.expect("list")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_task_by_the_reporter_once_and_not_by_a_stranger() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api.send_text("alice", "cancel me").await;
        let id = id_of(&task);

        api.as_participant("mallory")
            .cancel(id)
            .await
            .refused_not_found("a stranger");

        let canceled = api
            .as_participant("alice")
            .cancel(id)
            .await
            .expect("cancel");
        assert_eq!(canceled["id"], task["id"]);
        assert_eq!(state(&canceled), "TASK_STATE_CANCELED", "{binding:?}");
        assert_eq!(status_text(&canceled), "canceled by alice");

        api.as_participant("alice").cancel(id).await.refused(
            "already canceled",
            -32002,
            400,
            "TASK_NOT_CANCELABLE",
        );

        let read = api.read_as("alice", id).await;
        assert_eq!(state(&read), "TASK_STATE_CANCELED");
    }
}

/// How a subscription is opened.
#[derive(Debug, Clone, Copy)]
enum Subscribe {
    JsonRpc,
    RestPost,
    RestGet,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_follows_a_waiting_task_through_a_follow_up_from_another_connection() {
    let server = Server::start();
    for how in [Subscribe::JsonRpc, Subscribe::RestPost, Subscribe::RestGet] {
        let sender = server.client().api(Binding::JsonRpc);
        let task = sender.send_text("alice", "first").await;
        let id = id_of(&task);

        let watcher = server.client().fresh_connection().as_participant("alice");
        let mut events = match how {
            Subscribe::JsonRpc => watcher.api(Binding::JsonRpc).subscribe(id).await,
            Subscribe::RestPost => watcher.api(Binding::Rest).subscribe(id).await,
            Subscribe::RestGet => watcher.api(Binding::Rest).subscribe_get(id).await,
        }
        .expect("subscribe");
        assert_eq!(events.headers["content-type"], "text/event-stream");

        // The current task comes first…
        let first = events.next().await.expect("the task");
        assert_eq!(
            event_kind(&first),
            "task:TASK_STATE_INPUT_REQUIRED",
            "{how:?}"
        );
        assert_eq!(first["task"]["id"], task["id"]);
        assert!(ext(&first["task"]).is_object());

        // …then what a follow-up sent on another connection causes, and the stream ends.
        let next = sender.follow_up(&task, "alice", "second").await;
        assert_eq!(state(&next), "TASK_STATE_INPUT_REQUIRED");
        let rest = events.collect().await;
        assert_eq!(
            event_kinds(&rest),
            [
                "status:TASK_STATE_WORKING",
                "status:TASK_STATE_INPUT_REQUIRED"
            ],
            "{how:?}"
        );
        assert_eq!(status_text(&rest[1]["statusUpdate"]), "second");
    }
}

/// Alice's subscription to `id` over `binding`, on a connection of its own.
async fn alice_subscribes(server: &Server, binding: Binding, id: &str) -> Events {
    server
        .client()
        .fresh_connection()
        .as_participant("alice")
        .api(binding)
        .subscribe(id)
        .await
        .expect("subscribe")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_subscribers_get_the_same_events_in_the_same_order() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api.send_text("alice", "watched twice").await;
        let id = id_of(&task);
        let mut subscribers = Vec::new();
        for _ in 0..2 {
            let mut events = alice_subscribes(&server, binding, id).await;
            assert_eq!(
                event_kind(&events.next().await.expect("the task")),
                "task:TASK_STATE_INPUT_REQUIRED"
            );
            subscribers.push(events);
        }
        api.follow_up(&task, "alice", "for both").await;
        let mut seen = Vec::new();
        for events in subscribers {
            seen.push(events.collect().await);
        }
        assert_eq!(
            event_kinds(&seen[0]),
            [
                "status:TASK_STATE_WORKING",
                "status:TASK_STATE_INPUT_REQUIRED"
            ],
            "{binding:?}"
        );
        assert_eq!(seen[0], seen[1], "the same events, byte for byte");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_closed_by_the_client_does_not_stop_the_run() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let mut events = api
            .send_streaming(send_req(text("alice", "I will not wait")))
            .await
            .expect("stream");
        let first = events.next().await.expect("the task");
        let id = first["task"]["id"].as_str().unwrap().to_owned();
        drop(events);
        let done = poll_state(
            &api.as_participant("alice"),
            &id,
            "TASK_STATE_INPUT_REQUIRED",
        )
        .await;
        assert_eq!(status_text(&done), "I will not wait", "{binding:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_ends_with_the_cancellation_of_its_task() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api.send_text("alice", "soon canceled").await;
        let id = id_of(&task);
        let mut events = alice_subscribes(&server, binding, id).await;
        let first = events.next().await.expect("the task");
        assert_eq!(event_kind(&first), "task:TASK_STATE_INPUT_REQUIRED");
        api.as_participant("alice")
            .cancel(id)
            .await
            .expect("cancel");
        let rest = events.collect().await;
        assert_eq!(
            event_kinds(&rest),
            ["status:TASK_STATE_CANCELED"],
            "{binding:?}"
        );
        assert_eq!(status_text(&rest[0]["statusUpdate"]), "canceled by alice");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_to_a_terminal_task_is_a_plain_error_not_a_stream() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api.send_text("alice", "short-lived").await;
        let id = id_of(&task);
        let alice = api.as_participant("alice");
        alice.cancel(id).await.expect("cancel");
        let Err(err) = alice.subscribe(id).await else {
            panic!("{binding:?}: a stream for a canceled task");
        };
        err.assert_is(-32004, 400, "UNSUPPORTED_OPERATION");
        let Err(err) = alice.subscribe("no-such-task").await else {
            panic!("{binding:?}: a stream for no task");
        };
        err.assert_is(-32001, 404, "TASK_NOT_FOUND");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_config_methods_create_get_list_and_delete() {
    let server = Server::builder().allow_private_webhooks().start();
    let hook = Webhook::start().await;
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api.send_text("alice", "notify me").await;
        let task_id = id_of(&task);
        let alice = api.as_participant("alice");

        let assigned = alice
            .create_push(task_id, json!({"url": hook.url("/a"), "token": "tok-a"}))
            .await
            .expect("create without id");
        let assigned_id = assigned["id"]
            .as_str()
            .expect("an id is assigned")
            .to_owned();
        assert!(!assigned_id.is_empty());
        assert_eq!(assigned["taskId"], task["id"]);
        assert_eq!(assigned["url"], hook.url("/a"));
        assert_eq!(assigned["token"], "tok-a");

        let named = alice
            .create_push(
                task_id,
                json!({"id": "cfg-mine", "url": hook.url("/b"),
                       "authentication": {"scheme": "Bearer", "credentials": "secret"}}),
            )
            .await
            .expect("create with id");
        assert_eq!(named["id"], "cfg-mine", "{binding:?}");
        assert_eq!(named["authentication"]["scheme"], "Bearer");

        assert_eq!(
            alice.get_push(task_id, &assigned_id).await.expect("get"),
            assigned
        );
        assert_eq!(
            alice.get_push(task_id, "cfg-mine").await.expect("get"),
            named
        );

        // Creating with an id that exists replaces that config.
        let replaced = alice
            .create_push(task_id, json!({"id": "cfg-mine", "url": hook.url("/c")}))
            .await
            .expect("replace");
        assert_eq!(replaced["url"], hook.url("/c"));
        assert_eq!(
            alice.get_push(task_id, "cfg-mine").await.expect("get")["url"],
            hook.url("/c")
        );

        let listed = alice.list_push(task_id).await.expect("list");
        let mut listed_ids: Vec<&str> = listed["configs"]
            .as_array()
            .expect("configs")
            .iter()
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        listed_ids.sort_unstable();
        let mut expected = vec![assigned_id.as_str(), "cfg-mine"];
        expected.sort_unstable();
        assert_eq!(listed_ids, expected);

        assert_eq!(
            alice
                .delete_push(task_id, "cfg-mine")
                .await
                .expect("delete"),
            json!({}),
            "google.protobuf.Empty"
        );
        assert_eq!(
            alice
                .delete_push(task_id, "cfg-mine")
                .await
                .expect("delete is idempotent"),
            json!({})
        );
        alice
            .get_push(task_id, "cfg-mine")
            .await
            .refused_not_found("deleted");
        let listed = alice.list_push(task_id).await.expect("list");
        assert_eq!(listed["configs"].as_array().map(Vec::len), Some(1));

        alice
            .create_push(task_id, json!({"token": "no url"}))
            .await
            .refused_invalid_params("url is required");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_extended_agent_card_is_unsupported_when_none_is_configured() {
    let server = Server::start();
    for binding in BOTH {
        server
            .client()
            .as_participant("alice")
            .api(binding)
            .extended_card()
            .await
            .refused("no extended card", -32004, 400, "UNSUPPORTED_OPERATION");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_card_is_served_with_caching_and_names_this_server() {
    let server = Server::start();
    // No A2A-Version: the card is not an A2A method.
    let client = server.client().without_version();
    let reply = client
        .rest(Method::GET, "/.well-known/agent-card.json", None)
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.content_type().starts_with("application/json"));
    let etag = reply.header("etag").expect("ETag").to_owned();
    assert!(etag.starts_with("W/\""), "{etag}");
    assert_eq!(reply.header("cache-control"), Some("public, max-age=300"));
    let card = reply.json();

    let interfaces = card["supportedInterfaces"].as_array().expect("interfaces");
    let bindings: Vec<&str> = interfaces
        .iter()
        .map(|i| i["protocolBinding"].as_str().unwrap())
        .collect();
    assert_eq!(bindings, ["JSONRPC", "HTTP+JSON"]);
    for interface in interfaces {
        // No trailing slash: a client appending `/message:send` builds a clean path.
        assert_eq!(interface["url"], server.url.as_str());
        assert_eq!(interface["protocolVersion"], "1.0");
    }
    let caps = &card["capabilities"];
    assert_eq!(caps["streaming"], true);
    assert_eq!(caps["pushNotifications"], true);
    assert_eq!(caps["extendedAgentCard"], false);
    let uris: Vec<&str> = caps["extensions"]
        .as_array()
        .expect("extensions")
        .iter()
        .map(|e| e["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        [
            TASK_EXTENSION_URI,
            "https://madarauchiha-314.github.io/tiny-harness/a2a/ext/channel/v1",
            "https://a2ui.org/a2a-extension/a2ui/v0.9.1"
        ]
    );
    for field in ["name", "description", "version"] {
        assert!(card[field].is_string(), "{field}");
    }
    assert!(!card["skills"].as_array().expect("skills").is_empty());

    // The same bytes again: 304 with the validator.
    let again = client
        .get_with_header("/.well-known/agent-card.json", "If-None-Match", &etag)
        .await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    assert!(again.text.is_empty());
    assert_eq!(again.header("etag"), Some(etag.as_str()));
    let changed = client
        .get_with_header(
            "/.well-known/agent-card.json",
            "If-None-Match",
            "W/\"something-else\"",
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK);

    // Both advertised interfaces answer at the advertised URL.
    let url = interfaces[0]["url"].as_str().unwrap();
    let by_card = Client::new(url).as_participant("alice");
    let task = by_card
        .api(Binding::JsonRpc)
        .send_text("alice", "via the card")
        .await;
    let rest = Client::send(
        Client::new(url.trim_end_matches('/'))
            .as_participant("alice")
            .request(Method::GET, &format!("/tasks/{}", id_of(&task))),
    )
    .await;
    assert_eq!(rest.status, StatusCode::OK, "{}", rest.text);
}
