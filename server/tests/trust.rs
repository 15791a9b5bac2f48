//! Trust boundaries (SPEC section 9) attacked through the real binary: links to other
//! people's tasks, the service agent's identity, agent participants, unbounded ids, refusals
//! that would fill the store, and watchers' event envelopes. Each test is a finding of the
//! review that filed issue 21, reproduced end to end.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const AGENT: &str = "tiny-harness";

/// A new task from `from` whose envelope sets only its `participants`.
fn team_task(from: &str, text: &str, participants: Value) -> Value {
    new_task_req(
        from,
        text,
        json!({"name": "n", "goal": "g", "participants": participants}),
    )
}

fn invalid_params(err: &ApiError) {
    err.assert_is(-32602, 400, "INVALID_PARAMS");
}

/// INVALID_PARAMS, and the message says `part` (the field at fault, or why).
fn invalid_params_naming(err: &ApiError, part: &str) {
    invalid_params(err);
    assert!(
        err.message.contains(part),
        "{:?} {part}: {}",
        err.binding,
        err.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_task_cannot_link_to_tasks_on_this_service() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let victim = api.send_text("alice", "alice's work").await;
        let victim_id = id_of(&victim);
        let name = format!("mallory-{binding:?}");
        let mallory = api.as_participant(&name);
        let links = [
            (
                "sub_tasks",
                json!({"name": "n", "goal": "g", "sub_tasks": [{"task_id": victim_id}]}),
            ),
            (
                "parent_tasks",
                json!({"name": "n", "goal": "g", "parent_tasks": [{"task_id": victim_id, "agent": null}]}),
            ),
            (
                "plan.steps[0].linked_tasks",
                json!({"name": "n", "goal": "g", "plan": {"steps": [
                    {"id": "a", "name": "A", "linked_tasks": [{"task_id": victim_id}]}]}}),
            ),
        ];
        for (field, payload) in links {
            let err = mallory
                .send(new_task_req(&name, "cancel me, and them", payload))
                .await
                .expect_err("a link to a task here is refused");
            invalid_params_naming(&err, field);
        }
        // Nothing was created, and the victim's task is as it was.
        let listed = mallory.list_tasks(json!({})).await.expect("list");
        assert_eq!(listed["tasks"], json!([]), "{binding:?}");
        let after = api.read_as("alice", victim_id).await;
        assert_eq!(state(&after), "TASK_STATE_INPUT_REQUIRED");
        assert_eq!(after["history"], victim["history"]);

        // An existing task's links cannot be edited either.
        let own = mallory.send_text(&name, "mine").await;
        let err = mallory
            .send(edit_req(
                &name,
                &own,
                json!({"sub_tasks": [{"task_id": victim_id}]}),
            ))
            .await
            .expect_err("refused");
        invalid_params_naming(&err, "sub_tasks");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_to_tasks_on_other_agents_are_information_only() {
    let server = Server::start();
    let api = server.client().api(Binding::JsonRpc);
    let victim = api.send_text("alice", "alice's work").await;
    let victim_id = id_of(&victim);
    // A link that says "on another agent" is accepted, even naming a task id that exists
    // here, and nothing travels along it: no cancel, no mirrored state.
    let mallory = api.as_participant("mallory");
    let own = mallory
        .send_ok(new_task_req(
            "mallory",
            "hi",
            json!({"name": "n", "goal": "g",
                    "sub_tasks": [{"task_id": victim_id, "state": "TASK_STATE_WORKING",
                                   "agent": {"kind": "agent", "id": "billing"}}]}),
        ))
        .await;
    assert_eq!(
        ext(&own)["sub_tasks"][0]["task_id"],
        victim_id,
        "kept as given"
    );
    api.follow_up(&victim, "alice", "more work").await;
    let canceled = mallory.cancel(id_of(&own)).await.expect("cancel");
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
    assert_eq!(
        ext(&canceled)["sub_tasks"][0]["state"],
        "TASK_STATE_WORKING",
        "the victim's state was not mirrored"
    );
    let after = api.read_as("alice", victim_id).await;
    assert_eq!(state(&after), "TASK_STATE_INPUT_REQUIRED", "not canceled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_may_act_as_the_service_agent() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api.send_text("alice", "alice's work").await;
        let id = id_of(&task);
        let impostor = api.as_participant(AGENT);

        // Listing as the agent would list every task on the service.
        let err = impostor.list_tasks(json!({})).await.expect_err("refused");
        invalid_params_naming(&err, "reserved");
        invalid_params(&impostor.get_task(id, None).await.expect_err("refused"));
        invalid_params(&impostor.cancel(id).await.expect_err("refused"));
        let err = api
            .send(send_req(on(text(AGENT, "as the agent"), &task)))
            .await
            .expect_err("refused");
        invalid_params(&err);
        let err = api
            .send(send_req(text(AGENT, "a new task as the agent")))
            .await
            .expect_err("refused");
        invalid_params(&err);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_participant_needs_a_verified_identity() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api
            .send_ok(team_task(
                "alice",
                "with a bot",
                json!([{"id": "alice", "kind": "human", "role": "admin"},
                        {"id": "billing-bot", "kind": "agent", "role": "watcher"}]),
            ))
            .await;
        let id = id_of(&task);
        let bot = api.as_participant("billing-bot");
        bot.get_task(id, None)
            .await
            .refused_not_found("not the bot");
        let listed = bot.list_tasks(json!({})).await.expect("list");
        assert_eq!(listed["tasks"], json!([]));
        let refused = api.follow_up(&task, "billing-bot", "I am the bot").await;
        assert_eq!(
            status_text(&refused),
            "message not accepted: not a participant"
        );

        // Nor may a self-asserted sender make itself an agent participant.
        let err = api
            .send(team_task(
                "mallory",
                "hi",
                json!([{"id": "mallory", "kind": "agent", "role": "admin"}]),
            ))
            .await
            .expect_err("refused");
        invalid_params_naming(&err, "verified identity");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_are_never_blank_and_have_a_length_limit() {
    let server = Server::start();
    let long = "x".repeat(300);
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api.send_text("alice", "alice's work").await;
        let mut cases = vec![
            ("participant_id", send_req(text("", "hi"))),
            ("participant_id", send_req(text("  ", "hi"))),
            ("participant_id", send_req(text(&long, "hi"))),
        ];
        let mut m = text("alice", "hi");
        m["messageId"] = json!(long);
        cases.push(("messageId", send_req(m)));
        let mut m = text("alice", "hi");
        m["contextId"] = json!(long);
        cases.push(("contextId", send_req(m)));
        let mut m = text("alice", "hi");
        m["taskId"] = json!(format!("{}\n", id_of(&task)));
        cases.push(("taskId", send_req(m)));
        for (field, req) in cases {
            let err = api.send(req).await.expect_err("refused");
            invalid_params_naming(&err, field);
        }
        invalid_params(
            &api.as_participant(&long)
                .list_tasks(json!({}))
                .await
                .expect_err("refused"),
        );
        invalid_params(
            &api.as_participant("alice")
                .get_task(&long, None)
                .await
                .expect_err("refused"),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_requests_do_not_fill_the_store() {
    let mut server = Server::start();
    let api = server.client().api(Binding::JsonRpc);
    let task = api.send_text("alice", "alice's work").await;
    // The store's file once a graceful stop has checkpointed its log into it. (The log files
    // beside it keep a fixed room that is reused, whatever is written.)
    server.terminate();
    let data = server.kill();
    let store_file = data.path().join("tasks.redb");
    let before = std::fs::metadata(&store_file).expect("store file").len();
    let mut server = Server::builder().data_dir(data).start();
    let api = server.client().api(Binding::JsonRpc);

    // Ten requests of about 1.8 MB each: a huge message id and participant id.
    let huge = "m".repeat(900 * 1024);
    for i in 0..10 {
        let mut m = text(&format!("{huge}{i}"), "let me in");
        m["messageId"] = json!(format!("{huge}{i}"));
        let err = api.send(send_req(on(m, &task))).await.expect_err("refused");
        invalid_params(&err);
    }
    // Ten refusals of a stranger's 1.8 MB message: each is a bounded audit record (the
    // message itself was never audited; this half guards that it stays so).
    let text_body = "t".repeat(1800 * 1024);
    for _ in 0..10 {
        let refused = api.follow_up(&task, "mallory", &text_body).await;
        assert_eq!(
            status_text(&refused),
            "message not accepted: not a participant"
        );
    }
    server.terminate();
    let data = server.kill();
    let after = std::fs::metadata(data.path().join("tasks.redb"))
        .expect("store file")
        .len();
    let grown = after.saturating_sub(before);
    assert!(grown < 2 * 1024 * 1024, "the store grew by {grown} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_rate_limited_per_caller_and_per_task() {
    let server = Server::start();
    let client = server.client();
    let api = client.api(Binding::JsonRpc);
    let task = api.send_text("alice", "alice's work").await;
    let refuse = |from: &str| {
        json!({"jsonrpc": "2.0", "id": fresh_id("rpc"), "method": "SendMessage",
               "params": send_req(on(text(from, "let me in"), &task))})
    };
    // One caller: 30 refusals are written down, the next is 429.
    for _ in 0..30 {
        let reply = Client::send(client.request(Method::POST, "/").json(&refuse("mallory"))).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    }
    let reply = Client::send(client.request(Method::POST, "/").json(&refuse("mallory"))).await;
    assert_eq!(
        reply.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        reply.text
    );
    let retry: u64 = reply
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    let body = reply.json();
    assert_eq!(body["error"]["code"], -32000, "{body}");
    assert_eq!(body["error"]["data"][0]["reason"], "RATE_LIMITED", "{body}");
    // Over REST too.
    let reply = client
        .rest(
            Method::POST,
            "/message:send",
            Some(send_req(on(text("mallory", "again"), &task))),
        )
        .await;
    assert_eq!(
        reply.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        reply.text
    );
    assert!(reply.header("retry-after").is_some());
    assert_eq!(reply.json()["error"]["status"], "RESOURCE_EXHAUSTED");

    // One task: strangers that change their name every time are counted on the task.
    let other = api.send_text("bob", "bob's work").await;
    let refuse_other = |from: String| {
        json!({"jsonrpc": "2.0", "id": fresh_id("rpc"), "method": "SendMessage",
               "params": send_req(on(text(&from, "let me in"), &other))})
    };
    for i in 0..30 {
        let reply = Client::send(
            client
                .request(Method::POST, "/")
                .json(&refuse_other(format!("x{i}"))),
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    }
    let reply = Client::send(
        client
            .request(Method::POST, "/")
            .json(&refuse_other("x-last".into())),
    )
    .await;
    assert_eq!(
        reply.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        reply.text
    );

    // The participants themselves are not limited.
    let answered = api.follow_up(&task, "alice", "still here").await;
    assert_eq!(status_text(&answered), "still here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_cannot_send_event_envelopes() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api
            .send_ok(team_task(
                "alice",
                "watched",
                json!([{"id": "alice", "kind": "human", "role": "reporter"},
                        {"id": "wes", "kind": "human", "role": "watcher"}]),
            ))
            .await;
        let event = data_part(
            EVENT_MEDIA_TYPE,
            json!({"kind": "status_update", "payload": {"state": "TASK_STATE_COMPLETED"}}),
        );
        let err = api
            .send(send_req(on(
                message(Some("wes"), vec![text_part("done!"), event.clone()]),
                &task,
            )))
            .await
            .expect_err("refused");
        invalid_params_naming(&err, "a watcher may not send event envelopes");
        let after = api.read_as("alice", id_of(&task)).await;
        assert_eq!(after["history"], task["history"], "nothing recorded");
        // A watcher's plain comment is still accepted.
        let commented = api.follow_up(&task, "wes", "looks good").await;
        assert_ne!(
            status_text(&commented),
            "message not accepted: not a participant"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_and_the_last_admin_stay_on_the_task() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api
            .send_ok(team_task(
                "ops",
                "administered",
                json!([{"id": "ops", "kind": "human", "role": "admin"},
                        {"id": "alice", "kind": "human", "role": "reporter"}]),
            ))
            .await;
        let edit =
            |participants: Value| edit_req("ops", &task, json!({"participants": participants}));
        let without_agent = json!([
            {"id": "ops", "kind": "human", "role": "admin"},
            {"id": "alice", "kind": "human", "role": "reporter"}]);
        let err = api.send(edit(without_agent)).await.expect_err("refused");
        invalid_params_naming(&err, "agent cannot be removed");
        let no_admin = json!([
            {"id": "ops", "kind": "human", "role": "watcher"},
            {"id": "alice", "kind": "human", "role": "reporter"},
            {"id": AGENT, "kind": "agent", "role": "assignee"}]);
        let err = api.send(edit(no_admin)).await.expect_err("refused");
        invalid_params_naming(&err, "last admin");
        let after = api.read_as("ops", id_of(&task)).await;
        assert_eq!(ext(&after)["participants"], ext(&task)["participants"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_to_ipv4_hidden_in_ipv6_are_refused() {
    let server = Server::start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let task = api.send_text("alice", "hello").await;
        let alice = api.as_participant("alice");
        for url in [
            // IPv4-translated 127.0.0.1, NAT64 local-use 127.0.0.1 and 169.254.169.254,
            // Teredo with a loopback server, 6to4 of 10.0.0.1.
            "https://[::ffff:0:7f00:1]/hook",
            "https://[64:ff9b:1::7f00:1]/hook",
            "https://[64:ff9b:1::a9fe:a9fe]/hook",
            "https://[2001:0:7f00:1::1]/hook",
            "https://[2002:a00:1::1]/hook",
        ] {
            alice
                .create_push(id_of(&task), json!({ "url": url }))
                .await
                .expect_err(url)
                .assert_is(-32602, 400, "INVALID_PARAMS");
        }
    }
}
