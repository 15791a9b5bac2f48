//! Traces: a request's W3C trace context (`traceparent`) goes on with the work it leads to.
//! The first server (no exporter: spans off) relays a sub-task to a second one (its remote
//! agent) and notifies a webhook; both get the caller's trace id under another parent span.
//! The second exports its spans over OTLP to a collector, which sees its request, the turn it
//! ran and its store calls, in the caller's trace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::json;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// `traceparent`'s trace id and parent span id.
fn ids(traceparent: &str) -> (String, String) {
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    assert_eq!(parts[0], "00", "{traceparent}");
    (parts[1].to_owned(), parts[2].to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_trace_reaches_the_webhook_and_the_remote_agent() {
    let collector = otlp::Collector::start().await;
    // The remote completes every task with an echo (the tck profile) and exports its spans.
    let remote = Server::builder()
        .args(["--agent-profile", "tck"])
        .args(["--otlp-endpoint", collector.endpoint.as_str()])
        .start();
    let setup = AgentSetup::new(ledger_subtask_script("the ledger agent answered"));
    let local = setup
        .builder()
        .allow_private_webhooks()
        .args(["--agent-id", "agent-a"])
        .arg("--remote-agent")
        .arg(format!("ledger={}", remote.url))
        .start();
    let mut hook = Webhook::start().await;

    let mut params = send_req(text("alice", "Parent"));
    params["configuration"] = json!({"taskPushNotificationConfig": {"url": hook.url("/hook")}});
    let (_, body) = Client::rpc_body("SendMessage", params);
    let client = local.client().as_participant("alice");
    let reply = Client::send(
        client
            .request(reqwest::Method::POST, "/")
            .header("traceparent", format!("00-{TRACE_ID}-{CALLER_SPAN}-01"))
            .header("tracestate", "vendor=opaque")
            .json(&body),
    )
    .await;
    assert!(reply.json().get("result").is_some(), "{}", reply.text);

    // (a) Every notification of the task, to the remote's answer, carries the caller's trace.
    let got = hook
        .until(|d| d.body.to_string().contains("the ledger agent answered"))
        .await;
    assert!(got.len() >= 3, "{got:#?}");
    for delivery in &got {
        let traceparent = delivery
            .header("traceparent")
            .unwrap_or_else(|| panic!("a notification without traceparent: {delivery:?}"));
        let (trace, parent) = ids(traceparent);
        assert_eq!(trace, TRACE_ID, "{traceparent}");
        assert_ne!(parent, CALLER_SPAN, "the service's own span is the parent");
        assert_eq!(delivery.header("tracestate"), Some("vendor=opaque"));
    }

    // (b) The remote's request span has the caller's trace id and a parent of the first
    // server's; the turn it ran and its store calls are under it.
    let spans = collector
        .until("the remote's request, turn and store spans", |spans| {
            spans
                .iter()
                .any(|s| s.name == "a2a.turn" && s.trace_id == TRACE_ID)
                && spans.iter().any(|s| s.name == "store.call")
        })
        .await;
    let request = spans
        .iter()
        .find(|s| {
            s.name == "a2a.request" && s.attribute("a2a.method") == Some("SendStreamingMessage")
        })
        .unwrap_or_else(|| panic!("no SendStreamingMessage request span: {spans:#?}"));
    assert_eq!(request.trace_id, TRACE_ID, "{request:#?}");
    assert!(
        !request.parent_span_id.is_empty() && request.parent_span_id != CALLER_SPAN,
        "{request:#?}"
    );
    assert_eq!(request.attribute("a2a.binding"), Some("jsonrpc"));
    assert_eq!(request.attribute("a2a.outcome"), Some("ok"));
    assert_eq!(request.service, "tiny-harness");
    let turn = spans
        .iter()
        .find(|s| s.name == "a2a.turn" && s.trace_id == TRACE_ID)
        .unwrap();
    assert_eq!(turn.parent_span_id, request.span_id, "{spans:#?}");
    assert!(turn.attribute("task.id").is_some_and(|id| !id.is_empty()));
    assert!(
        spans
            .iter()
            .any(|s| s.name == "store.call" && s.trace_id == TRACE_ID),
        "{spans:#?}"
    );
}
