//! One runner per task, under load and across a crash: twenty messages sent at once to one
//! task through separate connections are each processed exactly once, in one history order;
//! a server killed (SIGKILL) in the middle of a scripted multi-turn run is started again and
//! the task completes, with no message lost and no committed turn repeated (the takeover
//! counted in the metrics).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use common::*;
use serde_json::json;
use store_embedded::EmbeddedStore;
use task_store::TaskStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_messages_are_each_processed_once_in_one_order() {
    // The echo model: each run answers with the message's text.
    let server = Server::start();
    let api = server.client().api(Binding::JsonRpc);
    let task = api.send_text("alice", "start").await;
    let id = id_of(&task).to_owned();

    let mut sends = Vec::new();
    for n in 0..20 {
        let api = api.client.fresh_connection().api(if n % 2 == 0 {
            Binding::JsonRpc
        } else {
            Binding::Rest
        });
        let message = on(text("alice", &format!("message {n}")), &task);
        sends.push(tokio::spawn(
            async move { api.send(send_req(message)).await },
        ));
    }
    for send in sends {
        send.await.unwrap().expect("every send is answered");
    }
    // Wait until every message has its reply (a blocking send answers at the reply to it, but
    // later messages may still be queued behind it when it returns).
    let read = poll_task(
        &api.as_participant("alice"),
        &id,
        "every message to be processed",
        |read| history_texts(read).len() == 2 + 40,
    )
    .await;
    let history = history_texts(&read);
    // One order: each message immediately followed by its own reply, each exactly once.
    let mut seen = BTreeSet::new();
    for pair in history.chunks(2) {
        assert_eq!(
            pair[0], pair[1],
            "a message and its reply are adjacent: {history:?}"
        );
        assert!(seen.insert(pair[0].clone()), "processed twice: {}", pair[0]);
    }
    assert_eq!(seen.len(), 21);
    assert_eq!(state(&read), "TASK_STATE_INPUT_REQUIRED");

    // The agent's transcript agrees: 21 runs, one model turn each, in the same order.
    let mut server = server;
    assert!(server.terminate().success());
    let store = EmbeddedStore::open(server.dir().join("tasks.redb")).unwrap();
    let entries = store.transcript(&id, 0).await.unwrap();
    assert_eq!(entries.len(), 42);
    let users: Vec<&str> = entries
        .iter()
        .filter(|e| e["turn"]["role"] == "user")
        .map(|e| e["turn"]["text"].as_str().unwrap())
        .collect();
    let messages: Vec<&str> = history.iter().step_by(2).map(String::as_str).collect();
    assert_eq!(users, messages);
    // No lease is left behind: every run gave its lease back.
    assert!(
        task_store::LeaseStore::expired_leases(
            &store,
            chrono::Utc::now() + chrono::Duration::days(1),
            10
        )
        .await
        .unwrap()
        .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_mid_way_completes_after_a_restart_without_repeating_a_turn() {
    let setup = AgentSetup::new(json!({"turns": [
        {"tool_calls": [{"name": "create_plan", "arguments": {"steps": [
            {"name": "One", "description": "first"}, {"name": "Two", "description": "second"}]}}]},
        {"tool_calls": [{"name": "complete_step", "arguments": {"step": "one", "output": "1"}}],
         "delay_ms": 3000},
        {"tool_calls": [{"name": "complete_step", "arguments": {"step": "two", "output": "2"}}]},
        {"text": "both steps done"}
    ]}));
    let quick = ["--lease-ttl-secs", "2", "--sweep-interval-secs", "1"];
    let mut builder = setup.builder();
    for arg in quick {
        builder = builder.arg(arg);
    }
    let server = builder.start();
    let api = server.client().api(Binding::Rest).as_participant("alice");
    // returnImmediately: the run goes on in the background.
    let mut req = send_req(text("alice", "do both steps"));
    req["configuration"] = json!({"returnImmediately": true});
    let task = api.send_ok(req).await;
    let id = id_of(&task).to_owned();
    // Wait for the first turn (the plan) to be committed, then kill the server while the
    // second turn's model call is in flight.
    let read = poll_task(&api, &id, "a plan", |read| !ext(read)["plan"].is_null()).await;
    assert_eq!(ext(&read)["plan"]["steps"][0]["state"], "pending");
    let data = server.kill();

    // Started again on the same data: the sweeper takes the expired lease over and the run
    // continues from its last committed turn (and counts the takeover).
    let mut builder = setup.builder().data_dir(data).arg("--metrics");
    for arg in quick {
        builder = builder.arg(arg);
    }
    let mut server = builder.start();
    let api = server
        .client()
        .api(Binding::JsonRpc)
        .as_participant("alice");
    let done = poll_state(&api, &id, "TASK_STATE_INPUT_REQUIRED").await;
    assert_eq!(status_text(&done), "both steps done");
    let steps = &ext(&done)["plan"]["steps"];
    assert_eq!(
        (steps[0]["state"].as_str(), steps[1]["state"].as_str()),
        (Some("done"), Some("done"))
    );
    assert_eq!(
        history_texts(&done),
        ["do both steps", "both steps done"],
        "the message once, its reply once"
    );
    let scrape = Client::send(server.client().request(reqwest::Method::GET, "/metrics")).await;
    assert!(
        scrape.text.lines().any(|line| line
            .strip_prefix("th_lease_takeovers_total ")
            .is_some_and(|n| n.parse::<f64>().unwrap() >= 1.0)),
        "{}",
        scrape.text
    );

    assert!(server.terminate().success());
    let store = EmbeddedStore::open(server.dir().join("tasks.redb")).unwrap();
    let entries = store.transcript(&id, 0).await.unwrap();
    let calls: Vec<String> = entries
        .iter()
        .filter(|e| e["turn"]["role"] == "assistant")
        .flat_map(|e| e["turn"]["tool_calls"].as_array().unwrap().clone())
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        calls,
        ["create_plan", "complete_step", "complete_step"],
        "the plan was made once: the committed turn was not repeated"
    );
    assert_eq!(
        entries
            .iter()
            .filter(|e| e["turn"]["role"] == "user")
            .count(),
        1,
        "the message entered the conversation once"
    );
}
