//! `--metrics`: `GET /metrics` in the Prometheus text format, scraped before and after a
//! SendMessage on the echo model, a GetTask and a refused GetTask (the counters grow under
//! their labels); a scripted turn's tool error and tokens; answered before the rate limit;
//! and not served without the option.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use reqwest::Method;

/// One scrape: the series and their values.
struct Scrape(String);

impl Scrape {
    async fn of(client: &Client) -> Scrape {
        let reply = Client::send(client.request(Method::GET, "/metrics")).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(
            reply.content_type(),
            "text/plain; version=0.0.4; charset=utf-8"
        );
        assert_eq!(reply.header("cache-control"), Some("no-store"));
        Scrape(reply.text)
    }

    /// The value of `series` (`name{labels}` exactly as exposed), 0 when absent.
    fn value(&self, series: &str) -> f64 {
        self.0
            .lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .map(|v| v.parse().expect("a number"))
            .unwrap_or(0.0)
    }
}

impl std::fmt::Display for Scrape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

const SENT: &str = r#"th_requests_total{method="SendMessage",outcome="ok"}"#;
const READ: &str = r#"th_requests_total{method="GetTask",outcome="ok"}"#;
const REFUSED: &str = r#"th_requests_total{method="GetTask",outcome="client_error"}"#;
const SENT_TIMED: &str =
    r#"th_request_duration_milliseconds_count{method="SendMessage",outcome="ok"}"#;
const CREATED: &str = r#"th_tasks_created_total{lifecycle="conversation"}"#;
const TURNS: &str = r#"th_turns_total{agent="local"}"#;
const MODEL_CALLS: &str = r#"th_model_call_duration_milliseconds_count{model="echo",outcome="ok"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_counters_grow_with_the_requests_under_their_labels() {
    let server = Server::builder().arg("--metrics").start();
    let client = server.client();
    let before = Scrape::of(&client).await;
    assert!(
        before.0.contains("# TYPE th_requests_total counter\n"),
        "{before}"
    );

    let api = client.api(Binding::Rest);
    let task = api.send_text("alice", "hello metrics").await;
    let id = task["id"].as_str().expect("task id").to_owned();
    let read = client
        .as_participant("alice")
        .rpc("GetTask", serde_json::json!({"id": id}))
        .await;
    assert!(read.json().get("result").is_some(), "{}", read.text);
    let refused = client
        .as_participant("alice")
        .rest(Method::GET, "/tasks/no-such-task", None)
        .await;
    assert_eq!(refused.status, 404, "{}", refused.text);

    // The turn may end after SendMessage answers: read until it is counted.
    let after = poll(
        "the turn counted",
        || Scrape::of(&client),
        |scrape| scrape.value(TURNS) > before.value(TURNS),
    )
    .await;
    assert_eq!(after.value(SENT), before.value(SENT) + 1.0, "{after}");
    assert_eq!(after.value(SENT_TIMED), before.value(SENT_TIMED) + 1.0);
    assert_eq!(after.value(READ), before.value(READ) + 1.0);
    assert_eq!(after.value(REFUSED), before.value(REFUSED) + 1.0);
    assert_eq!(after.value(CREATED), before.value(CREATED) + 1.0);
    assert!(
        after.value(MODEL_CALLS) > before.value(MODEL_CALLS),
        "{after}"
    );
    // The scrapes themselves are not A2A requests.
    assert!(!after.0.contains("method=\"metrics\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_turn_counts_its_tool_error_and_its_tokens_by_model() {
    let setup = AgentSetup::new(serde_json::json!({"turns": [
        {"tool_calls": [{"name": "no_such_tool"}],
         "usage": {"input_tokens": 100, "output_tokens": 5, "cached_input_tokens": 20}},
        {"text": "done", "usage": {"input_tokens": 120, "output_tokens": 7}},
    ]}));
    let server = setup.builder().arg("--metrics").start();
    let client = server.client();
    client
        .api(Binding::Rest)
        .send_text("alice", "call a tool that is not there")
        .await;
    let after = poll(
        "both model calls counted",
        || Scrape::of(&client),
        |scrape| scrape.value(r#"th_model_tokens_total{model="scripted",kind="output"}"#) >= 12.0,
    )
    .await;
    assert_eq!(
        after.value(r#"th_tool_errors_total{code="tool.not_found"}"#),
        1.0,
        "{after}"
    );
    assert_eq!(
        after.value(r#"th_model_tokens_total{model="scripted",kind="input"}"#),
        220.0
    );
    assert_eq!(
        after.value(r#"th_model_tokens_total{model="scripted",kind="cached"}"#),
        20.0
    );
    assert_eq!(
        after.value(r#"th_model_call_duration_milliseconds_count{model="scripted",outcome="ok"}"#),
        2.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrapes_are_answered_before_the_rate_limit() {
    let server = Server::builder()
        .args([
            "--metrics",
            "--rate-limit",
            "0.01",
            "--rate-limit-burst",
            "1",
        ])
        .start();
    let client = server.client();
    for _ in 0..3 {
        Scrape::of(&client).await;
    }
    // A client request is still limited.
    let first = client.rest(Method::GET, "/tasks", None).await;
    let second = client.rest(Method::GET, "/tasks", None).await;
    assert!(
        [first.status, second.status].contains(&reqwest::StatusCode::TOO_MANY_REQUESTS),
        "{} {}",
        first.status,
        second.status
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_option_there_is_no_metrics_endpoint() {
    let server = Server::start();
    let reply = Client::send(server.client().request(Method::GET, "/metrics")).await;
    assert_eq!(reply.status, 404, "{}", reply.text);
    assert!(!reply.text.contains("th_requests_total"));
}
