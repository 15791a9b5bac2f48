//! `--rate-limit` against the real binary: past a caller's burst, HTTP 429 with `Retry-After`
//! in the binding the request used (a JSON-RPC error, a REST error body, the agent card too),
//! while a caller from another address is served.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

fn retry_after(reply: &Reply) -> u64 {
    let secs: u64 = reply
        .header("retry-after")
        .unwrap_or_else(|| panic!("no Retry-After: {reply:?}"))
        .parse()
        .unwrap();
    assert!(secs >= 1, "{reply:?}");
    secs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_burst_a_caller_gets_429_with_retry_after_in_its_binding() {
    // Two requests at once, then one every 100 s.
    let server = Server::builder()
        .args(["--rate-limit", "0.01", "--rate-limit-burst", "2"])
        .start();
    let alice = server.client().as_participant("alice");
    alice.rpc("ListTasks", json!({})).await;
    let card = alice
        .rest(Method::GET, "/.well-known/agent-card.json", None)
        .await;
    assert_eq!(card.status, StatusCode::OK);

    // Each refused request on a connection of its own: the server need not read a refused
    // request's body, and may close its connection rather than skip it.
    let (_, body) = Client::rpc_body("ListTasks", json!({}));
    let refused = alice.fresh_connection();
    let reply = Client::send(refused.request(Method::POST, "/").json(&body)).await;
    assert_eq!(
        reply.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        reply.text
    );
    assert!(retry_after(&reply) > 60, "a token every 100 s: {reply:?}");
    assert!(reply.content_type().starts_with("application/json"));
    let value = reply.json();
    assert_eq!(value["jsonrpc"], "2.0");
    assert_eq!(value["id"], Value::Null, "the body was not read");
    assert_eq!(value["error"]["code"], -32000, "{value}");
    assert_eq!(
        value["error"]["data"][0]["reason"], "RATE_LIMITED",
        "{value}"
    );

    for path in ["/tasks", "/.well-known/agent-card.json"] {
        let reply = alice.fresh_connection().rest(Method::GET, path, None).await;
        assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS, "{path}");
        retry_after(&reply);
        let error = &reply.json()["error"];
        assert_eq!(error["code"], 429, "{path}: {error}");
        assert_eq!(error["status"], "RESOURCE_EXHAUSTED", "{path}: {error}");
        assert_eq!(
            error["details"][0]["reason"], "RATE_LIMITED",
            "{path}: {error}"
        );
    }

    // Another client address is another caller, whatever participant it asserts.
    let other = server
        .client()
        .bound_to("127.0.0.2")
        .as_participant("alice");
    other.rpc("ListTasks", json!({})).await;
    let tasks = other.rest(Method::GET, "/tasks", None).await;
    assert_eq!(tasks.status, StatusCode::OK, "{}", tasks.text);
}

#[test]
fn rate_limit_and_connection_options_are_checked() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    for args in [
        &["--rate-limit", "0"][..],
        &["--rate-limit", "-1"],
        &["--rate-limit", "fast"],
        &["--rate-limit-burst", "5"],
        &["--rate-limit", "1", "--rate-limit-burst", "0"],
        &["--max-connections", "0"],
        &["--header-timeout-secs", "0"],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_local-server"))
            .args(["--addr", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run local-server");
        // A server that accepted the options would keep running: stop it and fail.
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{args:?} was accepted");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(2), "a usage error: {args:?}");
    }
}
