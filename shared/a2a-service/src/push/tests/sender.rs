//! The sender against real webhook receivers: headers, retries, budgets and the policy at
//! delivery time.

use std::time::{Duration, Instant};

use a2a::AuthenticationInfo;
use tokio::net::TcpListener;

use super::fixtures::{
    Call, Receiver, Reply, config, deliver_to, event, local_options, ok, sender, status, then_ok,
};
use crate::push::{AttemptFailure, DeliveryError, PushOptions, WebhookPolicy};

#[tokio::test]
async fn delivers_the_event_with_its_headers() {
    let receiver = Receiver::always(ok()).await;
    let mut cfg = config("t-1", "c-1", &receiver.url);
    cfg.authentication = Some(AuthenticationInfo {
        scheme: "Bearer".into(),
        credentials: Some("tok".into()),
    });
    cfg.token = Some("notif-token".into());
    let ev = event("hello");

    sender(local_options()).deliver(&cfg, &ev).await.unwrap();

    let calls = receiver.calls();
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!(call.body, serde_json::to_value(&ev).unwrap());
    assert!(call.body.get("statusUpdate").is_some(), "{}", call.body);
    assert_eq!(call.headers["content-type"], "application/a2a+json");
    assert_eq!(call.headers["authorization"], "Bearer tok");
    assert_eq!(call.headers["x-a2a-notification-token"], "notif-token");
    receiver.stop().await;
}

#[tokio::test]
async fn no_authorization_or_token_header_when_the_config_has_none() {
    let receiver = Receiver::always(status(204)).await;
    deliver_to(&receiver.url, local_options()).await.unwrap();
    let call = &receiver.calls()[0];
    assert!(call.headers.get("authorization").is_none());
    assert!(call.headers.get("x-a2a-notification-token").is_none());
    receiver.stop().await;
}

/// Delivers to a receiver scripted by `behaviour`, which must succeed in the end: the
/// receiver's calls, and how long the delivery took.
async fn delivered_after(
    behaviour: impl Fn(usize, &serde_json::Value) -> Reply + Send + Sync + 'static,
    options: PushOptions,
) -> (Vec<Call>, Duration) {
    let receiver = Receiver::start(behaviour).await;
    let started = Instant::now();
    deliver_to(&receiver.url, options).await.unwrap();
    let took = started.elapsed();
    let calls = receiver.calls();
    receiver.stop().await;
    (calls, took)
}

/// `first` would hold the sender up for long, but `options` cut that short: the second call
/// delivers, well within two seconds.
async fn second_call_delivers_quickly(first: Reply, options: PushOptions) {
    let (calls, took) = delivered_after(then_ok(1, first), options).await;
    assert!(took < Duration::from_secs(2));
    assert_eq!(calls.len(), 2);
}

#[tokio::test]
async fn retries_server_errors_then_succeeds() {
    let (calls, _) = delivered_after(then_ok(2, status(500)), local_options()).await;
    assert_eq!(calls.len(), 3);
}

#[tokio::test]
async fn honours_retry_after_on_429() {
    let (calls, _) =
        delivered_after(then_ok(1, status(429).retry_after("1")), local_options()).await;
    assert_eq!(calls.len(), 2);
    let waited = calls[1].at - calls[0].at;
    assert!(waited >= Duration::from_millis(950), "waited {waited:?}");
}

#[tokio::test]
async fn retry_after_is_capped() {
    let options = PushOptions {
        max_delay: Duration::from_millis(300),
        ..local_options()
    };
    second_call_delivers_quickly(status(503).retry_after("3600"), options).await;
}

#[tokio::test]
async fn does_not_retry_other_client_errors() {
    for code in [400, 401, 404] {
        let receiver = Receiver::always(status(code)).await;
        let result = deliver_to(&receiver.url, local_options()).await;
        assert_eq!(result, Err(DeliveryError::Rejected { status: code }));
        assert!(!result.unwrap_err().is_transient());
        assert_eq!(receiver.calls().len(), 1);
        receiver.stop().await;
    }
}

#[tokio::test]
async fn retries_408() {
    let (calls, _) = delivered_after(then_ok(1, status(408)), local_options()).await;
    assert_eq!(calls.len(), 2);
}

#[tokio::test]
async fn a_timeout_is_retried() {
    let options = PushOptions {
        request_timeout: Duration::from_millis(200),
        ..local_options()
    };
    second_call_delivers_quickly(ok().after(Duration::from_secs(3)), options).await;
}

#[tokio::test]
async fn gives_up_after_the_attempt_budget() {
    let receiver = Receiver::always(status(503)).await;
    let options = PushOptions {
        attempts: 3,
        ..local_options()
    };
    let result = deliver_to(&receiver.url, options).await;
    assert_eq!(
        result,
        Err(DeliveryError::Exhausted {
            attempts: 3,
            last: AttemptFailure::Status(503)
        })
    );
    assert!(result.unwrap_err().is_transient());
    assert_eq!(receiver.calls().len(), 3);

    let timeouts = Receiver::always(ok().after(Duration::from_secs(3))).await;
    let options = PushOptions {
        attempts: 2,
        request_timeout: Duration::from_millis(100),
        ..local_options()
    };
    let result = deliver_to(&timeouts.url, options).await;
    assert_eq!(
        result,
        Err(DeliveryError::Exhausted {
            attempts: 2,
            last: AttemptFailure::Timeout
        })
    );
    receiver.stop().await;
    timeouts.stop().await;
}

#[tokio::test]
async fn a_refused_connection_is_retried() {
    // A port nobody listens on any more.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let options = PushOptions {
        attempts: 2,
        ..local_options()
    };
    let result = deliver_to(&format!("http://{addr}/webhook"), options).await;
    assert!(
        matches!(
            result,
            Err(DeliveryError::Exhausted {
                attempts: 2,
                last: AttemptFailure::Connection(_)
            })
        ),
        "{result:?}"
    );
}

#[tokio::test]
async fn an_invalid_authentication_is_not_sent() {
    let mut cfg = config("t-1", "c-1", "http://127.0.0.1:9/webhook");
    cfg.authentication = Some(AuthenticationInfo {
        scheme: "Bearer".into(),
        credentials: Some("a\r\nX-Injected: 1".into()),
    });
    let result = sender(local_options()).deliver(&cfg, &event("x")).await;
    assert!(
        matches!(result, Err(DeliveryError::InvalidConfig(_))),
        "{result:?}"
    );
}

#[tokio::test]
async fn delivery_applies_the_policy_again() {
    // A receiver on loopback, which a production sender must not reach: not by a literal
    // address, not through a name (the check at connect time, against DNS rebinding).
    let receiver = Receiver::always(ok()).await;
    let port = receiver
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let strict = sender(PushOptions {
        policy: WebhookPolicy::default(),
        ..local_options()
    });
    for url in [
        receiver.url.clone(),
        format!("https://127.0.0.1:{port}/webhook"),
        format!("https://localhost:{port}/webhook"),
    ] {
        let result = strict
            .deliver(&config("t-1", "c-1", &url), &event("x"))
            .await;
        assert!(
            matches!(result, Err(DeliveryError::Refused(_))),
            "{url}: {result:?}"
        );
    }
    let Err(DeliveryError::Refused(why)) = strict
        .deliver(
            &config("t-1", "c-1", &format!("https://localhost:{port}/webhook")),
            &event("x"),
        )
        .await
    else {
        panic!("refused expected");
    };
    assert!(why.contains("loopback"), "{why}");
    assert!(receiver.calls().is_empty());

    // The same name is fine when private webhooks are allowed.
    deliver_to(&format!("http://localhost:{port}/webhook"), local_options())
        .await
        .unwrap();
    assert_eq!(receiver.calls().len(), 1);
    receiver.stop().await;
}

/// The push deliveries counted under `result` so far (the registry is the process's: other
/// tests count too, so only growth is checked).
fn deliveries(result: &str) -> f64 {
    use telemetry::metrics::{self, Metric, Value};
    metrics::installed()
        .expect("installed")
        .snapshot()
        .iter()
        .find(|s| s.metric == Metric::PushDeliveries && s.labels[0] == result)
        .map(|s| match s.value {
            Value::Counter(n) => n,
            _ => 0.0,
        })
        .unwrap_or(0.0)
}

#[tokio::test]
async fn each_delivery_is_counted_sent_retried_or_failed() {
    telemetry::metrics::install(telemetry::metrics::Mode::Prometheus);
    let before = ["sent", "retried", "failed"].map(deliveries);
    delivered_after(then_ok(2, status(500)), local_options()).await;
    let receiver = Receiver::always(status(404)).await;
    deliver_to(&receiver.url, local_options())
        .await
        .expect_err("rejected");
    receiver.stop().await;
    let after = ["sent", "retried", "failed"].map(deliveries);
    assert!(after[0] > before[0], "sent: {before:?} → {after:?}");
    assert!(
        after[1] >= before[1] + 2.0,
        "retried: {before:?} → {after:?}"
    );
    assert!(after[2] > before[2], "failed: {before:?} → {after:?}");
}
