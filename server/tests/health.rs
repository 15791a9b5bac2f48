//! The server's probes: `/healthz` answers while the process serves; `/readyz` answers 200
//! while the store does and 503 when it does not (a DynamoDB table deleted under the server,
//! against DynamoDB Local under `make test`), with nothing of the store's error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use reqwest::Method;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn liveness_and_readiness_on_the_embedded_store() {
    let server = Server::start();
    let client = server.client();
    let live = Client::send(client.request(Method::GET, "/healthz")).await;
    assert_eq!(live.status, 200);
    assert_eq!(live.json()["status"], "ok");
    let ready = Client::send(client.request(Method::GET, "/readyz")).await;
    assert_eq!(ready.status, 200);
    assert_eq!(ready.json()["status"], "ready");
    assert_eq!(ready.header("cache-control"), Some("no-store"));
    // Not an A2A route: another method is the bindings' answer, not a probe.
    let posted = Client::send(client.request(Method::POST, "/healthz")).await;
    assert_ne!(posted.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_fails_when_the_table_is_gone() {
    if std::env::var("AWS_ENDPOINT_URL_DYNAMODB").is_err() {
        panic!(
            "needs DynamoDB Local: run through `make test` (localstack/dynamodb-local.sh run -- cargo test ...)"
        );
    }
    let aws = aws_sdk_dynamodb::Client::new(&store_dynamodb::sdk_config().await);
    let table = format!("tasks-health-{}", std::process::id());
    let server = Server::builder().dynamodb_table(&table).start();
    let client = server.client();
    let ready = Client::send(client.request(Method::GET, "/readyz")).await;
    assert_eq!(ready.status, 200, "{}", ready.text);
    aws.delete_table()
        .table_name(&table)
        .send()
        .await
        .expect("delete");
    let unready = Client::send(client.request(Method::GET, "/readyz")).await;
    assert_eq!(unready.status, 503);
    assert_eq!(unready.text, r#"{"status":"unavailable"}"#);
    let live = Client::send(client.request(Method::GET, "/healthz")).await;
    assert_eq!(live.status, 200, "alive all the same");
}
