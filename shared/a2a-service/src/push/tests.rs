//! Push delivery against real webhook receivers on 127.0.0.1, and the dispatcher over the
//! embedded store.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a::{AuthenticationInfo, StreamResponse, TaskPushNotificationConfig, TaskState};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use task_core::extension::Role;
use task_store::contract::{at, record, status_event};
use task_store::{Change, NewTask, Store, TaskUpdate};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::*;
use crate::error::ServiceError;

// ---------------------------------------------------------------------------------------
// A webhook receiver
// ---------------------------------------------------------------------------------------

/// What the receiver answers to its n-th call (0-based) with the given body.
#[derive(Clone)]
struct Reply {
    status: u16,
    retry_after: Option<&'static str>,
    delay: Duration,
}

fn ok() -> Reply {
    status(200)
}

fn status(code: u16) -> Reply {
    Reply {
        status: code,
        retry_after: None,
        delay: Duration::ZERO,
    }
}

type Behaviour = Arc<dyn Fn(usize, &serde_json::Value) -> Reply + Send + Sync>;

#[derive(Debug, Clone)]
struct Call {
    at: Instant,
    status: u16,
    headers: HeaderMap,
    body: serde_json::Value,
}

struct Hook {
    calls: Mutex<Vec<Call>>,
    behaviour: Behaviour,
}

struct Receiver {
    url: String,
    hook: Arc<Hook>,
    stop: Option<oneshot::Sender<()>>,
    server: JoinHandle<()>,
}

async fn handle(State(hook): State<Arc<Hook>>, headers: HeaderMap, body: Bytes) -> Response {
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    let n = hook.calls.lock().unwrap().len();
    let reply = (hook.behaviour)(n, &body);
    hook.calls.lock().unwrap().push(Call {
        at: Instant::now(),
        status: reply.status,
        headers,
        body,
    });
    tokio::time::sleep(reply.delay).await;
    let code = StatusCode::from_u16(reply.status).unwrap();
    match reply.retry_after {
        Some(after) => (code, [("retry-after", after)]).into_response(),
        None => code.into_response(),
    }
}

impl Receiver {
    async fn start(
        behaviour: impl Fn(usize, &serde_json::Value) -> Reply + Send + Sync + 'static,
    ) -> Self {
        let hook = Arc::new(Hook {
            calls: Mutex::new(Vec::new()),
            behaviour: Arc::new(behaviour),
        });
        let app = axum::Router::new()
            .route("/webhook", axum::routing::post(handle))
            .with_state(Arc::clone(&hook));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Self {
            url: format!("http://{addr}/webhook"),
            hook,
            stop: Some(stop),
            server,
        }
    }

    fn calls(&self) -> Vec<Call> {
        self.hook.calls.lock().unwrap().clone()
    }

    /// The message ids of the events answered with a 2xx, in arrival order.
    fn delivered(&self) -> Vec<String> {
        self.calls()
            .iter()
            .filter(|c| (200..300).contains(&c.status))
            .map(|c| event_id(&c.body))
            .collect()
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Graceful shutdown waits for open connections; a hung handler must not hang the test.
        if tokio::time::timeout(Duration::from_secs(5), &mut self.server)
            .await
            .is_err()
        {
            self.server.abort();
            let _ = self.server.await;
        }
    }
}

/// The status message id of a notification body (`<task>:<text>`), or its top-level key.
fn event_id(body: &serde_json::Value) -> String {
    body.pointer("/statusUpdate/status/message/messageId")
        .and_then(|v| v.as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| body.to_string())
}

fn config(task: &str, id: &str, url: &str) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        url: url.to_owned(),
        id: Some(id.to_owned()),
        task_id: task.to_owned(),
        token: None,
        authentication: None,
        tenant: None,
    }
}

fn local_options() -> PushOptions {
    PushOptions {
        policy: WebhookPolicy {
            allow_private: true,
        },
        request_timeout: Duration::from_millis(500),
        attempts: 5,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_secs(2),
    }
}

fn sender(options: PushOptions) -> PushSender {
    PushSender::new(options).unwrap()
}

fn event(text: &str) -> StreamResponse {
    status_event(&record("t-1", "ctx", TEAM, TaskState::Working, at(0)), text)
}

const TEAM: &[(&str, Role)] = &[("alice", Role::Reporter), ("agent", Role::Assignee)];

// ---------------------------------------------------------------------------------------
// The sender
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn delivers_the_event_with_its_headers() {
    let receiver = Receiver::start(|_, _| ok()).await;
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
    let receiver = Receiver::start(|_, _| status(204)).await;
    sender(local_options())
        .deliver(&config("t-1", "c-1", &receiver.url), &event("x"))
        .await
        .unwrap();
    let call = &receiver.calls()[0];
    assert!(call.headers.get("authorization").is_none());
    assert!(call.headers.get("x-a2a-notification-token").is_none());
    receiver.stop().await;
}

#[tokio::test]
async fn retries_server_errors_then_succeeds() {
    let receiver = Receiver::start(|n, _| if n < 2 { status(500) } else { ok() }).await;
    sender(local_options())
        .deliver(&config("t-1", "c-1", &receiver.url), &event("x"))
        .await
        .unwrap();
    assert_eq!(receiver.calls().len(), 3);
    receiver.stop().await;
}

#[tokio::test]
async fn honours_retry_after_on_429() {
    let receiver = Receiver::start(|n, _| {
        if n == 0 {
            Reply {
                retry_after: Some("1"),
                ..status(429)
            }
        } else {
            ok()
        }
    })
    .await;
    sender(local_options())
        .deliver(&config("t-1", "c-1", &receiver.url), &event("x"))
        .await
        .unwrap();
    let calls = receiver.calls();
    assert_eq!(calls.len(), 2);
    let waited = calls[1].at - calls[0].at;
    assert!(waited >= Duration::from_millis(950), "waited {waited:?}");
    receiver.stop().await;
}

#[tokio::test]
async fn retry_after_is_capped() {
    let receiver = Receiver::start(|n, _| {
        if n == 0 {
            Reply {
                retry_after: Some("3600"),
                ..status(503)
            }
        } else {
            ok()
        }
    })
    .await;
    let options = PushOptions {
        max_delay: Duration::from_millis(300),
        ..local_options()
    };
    let started = Instant::now();
    sender(options)
        .deliver(&config("t-1", "c-1", &receiver.url), &event("x"))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(receiver.calls().len(), 2);
    receiver.stop().await;
}

#[tokio::test]
async fn does_not_retry_other_client_errors() {
    for code in [400, 401, 404] {
        let receiver = Receiver::start(move |_, _| status(code)).await;
        let result = sender(local_options())
            .deliver(&config("t-1", "c-1", &receiver.url), &event("x"))
            .await;
        assert_eq!(result, Err(DeliveryError::Rejected { status: code }));
        assert!(!result.unwrap_err().is_transient());
        assert_eq!(receiver.calls().len(), 1);
        receiver.stop().await;
    }
}

#[tokio::test]
async fn retries_408() {
    let receiver = Receiver::start(|n, _| if n == 0 { status(408) } else { ok() }).await;
    sender(local_options())
        .deliver(&config("t-1", "c-1", &receiver.url), &event("x"))
        .await
        .unwrap();
    assert_eq!(receiver.calls().len(), 2);
    receiver.stop().await;
}

#[tokio::test]
async fn a_timeout_is_retried() {
    let receiver = Receiver::start(|n, _| {
        if n == 0 {
            Reply {
                delay: Duration::from_secs(3),
                ..ok()
            }
        } else {
            ok()
        }
    })
    .await;
    let options = PushOptions {
        request_timeout: Duration::from_millis(200),
        ..local_options()
    };
    let started = Instant::now();
    sender(options)
        .deliver(&config("t-1", "c-1", &receiver.url), &event("x"))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(receiver.calls().len(), 2);
    receiver.stop().await;
}

#[tokio::test]
async fn gives_up_after_the_attempt_budget() {
    let receiver = Receiver::start(|_, _| status(503)).await;
    let options = PushOptions {
        attempts: 3,
        ..local_options()
    };
    let result = sender(options)
        .deliver(&config("t-1", "c-1", &receiver.url), &event("x"))
        .await;
    assert_eq!(
        result,
        Err(DeliveryError::Exhausted {
            attempts: 3,
            last: AttemptFailure::Status(503)
        })
    );
    assert!(result.unwrap_err().is_transient());
    assert_eq!(receiver.calls().len(), 3);

    let timeouts = Receiver::start(|_, _| Reply {
        delay: Duration::from_secs(3),
        ..ok()
    })
    .await;
    let options = PushOptions {
        attempts: 2,
        request_timeout: Duration::from_millis(100),
        ..local_options()
    };
    let result = sender(options)
        .deliver(&config("t-1", "c-1", &timeouts.url), &event("x"))
        .await;
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
    let result = sender(options)
        .deliver(
            &config("t-1", "c-1", &format!("http://{addr}/webhook")),
            &event("x"),
        )
        .await;
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
    let receiver = Receiver::start(|_, _| ok()).await;
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
    sender(local_options())
        .deliver(
            &config("t-1", "c-1", &format!("http://localhost:{port}/webhook")),
            &event("x"),
        )
        .await
        .unwrap();
    assert_eq!(receiver.calls().len(), 1);
    receiver.stop().await;
}

// ---------------------------------------------------------------------------------------
// The URL policy
// ---------------------------------------------------------------------------------------

const STRICT: WebhookPolicy = WebhookPolicy {
    allow_private: false,
};
const LAX: WebhookPolicy = WebhookPolicy {
    allow_private: true,
};

async fn refused(url: &str, policy: &WebhookPolicy) -> String {
    match check_webhook_url(url, policy).await {
        Err(ServiceError::InvalidParams(why)) => why,
        other => panic!("{url}: expected InvalidParams, got {other:?}"),
    }
}

#[tokio::test]
async fn every_non_public_address_class_is_refused() {
    let cases = [
        ("https://127.0.0.1/h", "loopback", "127.0.0.1"),
        ("https://127.9.9.9/h", "loopback", "127.9.9.9"),
        ("https://10.1.2.3/h", "private", "10.1.2.3"),
        ("https://172.16.0.1/h", "private", "172.16.0.1"),
        ("https://172.31.255.255/h", "private", "172.31.255.255"),
        ("https://192.168.1.1/h", "private", "192.168.1.1"),
        (
            "https://169.254.169.254/latest/meta-data",
            "link-local",
            "169.254.169.254",
        ),
        ("https://100.64.0.1/h", "CGNAT", "100.64.0.1"),
        ("https://100.127.255.254/h", "CGNAT", "100.127.255.254"),
        ("https://0.0.0.0/h", "unspecified", "0.0.0.0"),
        ("https://224.0.0.1/h", "multicast", "224.0.0.1"),
        ("https://255.255.255.255/h", "broadcast", "255.255.255.255"),
        ("https://240.0.0.1/h", "reserved", "240.0.0.1"),
        // Other spellings of IPv4 the URL parser normalises.
        ("https://2130706433/h", "loopback", "127.0.0.1"),
        ("https://0x7f.1/h", "loopback", "127.0.0.1"),
        ("https://[::1]/h", "loopback", "::1"),
        ("https://[::]/h", "unspecified", "::"),
        ("https://[fc00::1]/h", "private", "fc00::1"),
        ("https://[fd12:3456::1]/h", "private", "fd12:3456::1"),
        ("https://[fe80::1]/h", "link-local", "fe80::1"),
        ("https://[ff02::1]/h", "multicast", "ff02::1"),
        (
            "https://[::ffff:127.0.0.1]/h",
            "loopback",
            "::ffff:127.0.0.1",
        ),
        ("https://[::ffff:10.0.0.1]/h", "private", "::ffff:10.0.0.1"),
        (
            "https://[::ffff:169.254.169.254]/h",
            "link-local",
            "::ffff:169.254.169.254",
        ),
        (
            "https://[::ffff:100.64.0.1]/h",
            "CGNAT",
            "::ffff:100.64.0.1",
        ),
        ("https://[64:ff9b::a00:1]/h", "private", "64:ff9b::a00:1"),
        ("https://[2002:7f00:1::]/h", "loopback", "2002:7f00:1::"),
    ];
    for (url, class, addr) in cases {
        let why = refused(url, &STRICT).await;
        assert!(why.contains(class), "{url}: {why}");
        assert!(why.contains(&format!("({addr})")), "{url}: {why}");
    }
    let why = refused("https://127.0.0.1/h", &STRICT).await;
    assert_eq!(
        why,
        "webhook URL resolves to a loopback address (127.0.0.1); the operator has not allowed private webhooks"
    );
}

#[tokio::test]
async fn public_addresses_pass() {
    for url in [
        "https://93.184.216.34/hook",
        "https://8.8.8.8:8443/x?y=1",
        "https://[2606:4700:4700::1111]/hook",
        "https://[::ffff:8.8.8.8]/hook",
        "https://172.32.0.1/hook",
        "https://100.128.0.1/hook",
    ] {
        let checked = check_webhook_url(url, &STRICT).await;
        assert!(checked.is_ok(), "{url}: {checked:?}");
    }
}

#[tokio::test]
async fn localhost_resolves_to_loopback() {
    let why = refused("https://localhost:8443/webhook", &STRICT).await;
    assert!(why.contains("loopback"), "{why}");
    assert!(
        why.contains("operator has not allowed private webhooks"),
        "{why}"
    );
    let url = check_webhook_url("http://localhost:8443/webhook", &LAX)
        .await
        .unwrap();
    assert_eq!(url.as_str(), "http://localhost:8443/webhook");
}

#[tokio::test]
async fn https_always_http_only_when_private_webhooks_are_allowed() {
    let why = refused("http://93.184.216.34/hook", &STRICT).await;
    assert!(why.contains("https"), "{why}");
    assert!(
        check_webhook_url("http://93.184.216.34/hook", &LAX)
            .await
            .is_ok()
    );
    assert!(
        check_webhook_url("http://127.0.0.1:8080/hook", &LAX)
            .await
            .is_ok()
    );
    for url in [
        "ftp://93.184.216.34/hook",
        "file:///etc/passwd",
        "ws://93.184.216.34/",
    ] {
        refused(url, &LAX).await;
    }
    for url in ["not a url", "/relative/hook", ""] {
        let why = refused(url, &LAX).await;
        assert!(why.contains("not a valid absolute URL"), "{url}: {why}");
    }
}

#[tokio::test]
async fn credentials_in_the_url_are_refused() {
    for url in [
        "https://user:secret@93.184.216.34/hook",
        "https://user@93.184.216.34/hook",
        "https://:secret@93.184.216.34/hook",
    ] {
        let why = refused(url, &STRICT).await;
        assert!(why.contains("credentials"), "{url}: {why}");
        refused(url, &LAX).await;
    }
}

#[tokio::test]
async fn allowing_private_webhooks_lets_local_addresses_through() {
    for url in [
        "https://127.0.0.1/h",
        "http://127.0.0.1:8080/h",
        "https://10.0.0.1/h",
        "https://169.254.169.254/h",
        "https://100.64.0.1/h",
        "https://[::1]/h",
        "https://[fd00::1]/h",
        "https://[::ffff:127.0.0.1]/h",
        "https://localhost/h",
    ] {
        let checked = check_webhook_url(url, &LAX).await;
        assert!(checked.is_ok(), "{url}: {checked:?}");
    }
    // Never a TCP destination.
    for url in [
        "https://0.0.0.0/h",
        "https://224.0.0.1/h",
        "https://255.255.255.255/h",
        "https://[::]/h",
    ] {
        refused(url, &LAX).await;
    }
}

#[tokio::test]
async fn a_name_that_does_not_resolve_is_refused_unless_private_webhooks_are_allowed() {
    // `.invalid` never resolves (RFC 6761), with or without DNS.
    let url = "https://hooks.tiny-harness.invalid/webhook";
    let why = refused(url, &STRICT).await;
    assert!(why.contains("could not be resolved"), "{why}");
    // Local and test mode (often offline): accepted; delivery resolves and checks again.
    let checked = check_webhook_url(url, &LAX).await;
    assert!(checked.is_ok(), "{checked:?}");
    // The static rules still apply there.
    refused("https://user@hooks.tiny-harness.invalid/webhook", &LAX).await;
}

// ---------------------------------------------------------------------------------------
// The dispatcher
// ---------------------------------------------------------------------------------------

struct Fixture {
    store: Arc<dyn Store>,
}

async fn fixture() -> Fixture {
    Fixture {
        store: Arc::new(store_memory::MemoryStore::new()),
    }
}

/// Creates the task with one event, `<task>:e0`.
async fn create_task(store: &dyn Store, task: &str) {
    let rec = record(task, "ctx", TEAM, TaskState::Working, at(0));
    let mut new = NewTask::new(rec.clone());
    new.events.push(status_event(&rec, "e0"));
    store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .unwrap();
}

/// Appends one event, `<task>:<text>`.
async fn append(store: &dyn Store, task: &str, text: &str, state: TaskState) {
    let base = store.get(task).await.unwrap().unwrap();
    let mut rec = base.record.clone();
    rec.status.state = state;
    let mut update = TaskUpdate::new(base);
    update.events.push(status_event(&rec, text));
    update.record = Some(rec);
    store
        .commit(vec![Change::Update(Box::new(update))])
        .await
        .unwrap();
}

fn ids(task: &str, texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| format!("{task}:{t}")).collect()
}

async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn dispatcher(store: &Arc<dyn Store>, options: PushOptions) -> PushDispatcher {
    PushDispatcher::new(Arc::clone(store), Arc::new(sender(options))).unwrap()
}

fn dispatch_options() -> PushOptions {
    PushOptions {
        request_timeout: Duration::from_secs(5),
        ..local_options()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_event_in_order_to_each_config_and_a_failing_webhook_delays_no_other() {
    let fx = fixture().await;
    let store = &fx.store;
    let good = Receiver::start(|_, _| ok()).await;
    // Slow and failing for its first three calls: about 1.5 s before its first success.
    let flaky = Receiver::start(|n, _| {
        if n < 3 {
            Reply {
                delay: Duration::from_millis(500),
                ..status(500)
            }
        } else {
            ok()
        }
    })
    .await;
    create_task(&**store, "t-1").await;
    store
        .put_push_config("alice", config("t-1", "good", &good.url))
        .await
        .unwrap();
    store
        .put_push_config("alice", config("t-1", "flaky", &flaky.url))
        .await
        .unwrap();
    let push = dispatcher(store, dispatch_options());
    // Configs given with the creating message: from the first event.
    push.register("t-1", "good", 0);
    push.register("t-1", "flaky", 0);
    push.notify("t-1");
    for i in 1..=5 {
        let state = if i == 5 {
            TaskState::Completed
        } else {
            TaskState::Working
        };
        append(&**store, "t-1", &format!("e{i}"), state).await;
        push.notify("t-1");
    }

    let all = ids("t-1", &["e0", "e1", "e2", "e3", "e4", "e5"]);
    eventually("the good webhook", || good.delivered().len() >= all.len()).await;
    eventually("the flaky webhook", || flaky.delivered().len() >= all.len()).await;
    assert_eq!(good.delivered(), all);
    assert_eq!(flaky.delivered(), all);
    assert_eq!(flaky.calls().len(), all.len() + 3);

    // Everything reached the good webhook before the flaky one took anything.
    let good_done = good.calls().last().unwrap().at;
    let flaky_first_ok = flaky.calls().iter().find(|c| c.status == 200).unwrap().at;
    assert!(
        good_done < flaky_first_ok,
        "the failing webhook delayed the other"
    );

    assert_eq!(push.shutdown(Duration::from_secs(5)).await, 0);
    good.stop().await;
    flaky.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn register_sets_where_a_config_starts() {
    let fx = fixture().await;
    let store = &fx.store;
    let late = Receiver::start(|_, _| ok()).await;
    let inline = Receiver::start(|_, _| ok()).await;
    create_task(&**store, "t-1").await;
    append(&**store, "t-1", "e1", TaskState::Working).await;
    append(&**store, "t-1", "e2", TaskState::InputRequired).await;
    let push = dispatcher(store, dispatch_options());

    // Created when the task had 3 events: from seq 3 on.
    store
        .put_push_config("alice", config("t-1", "late", &late.url))
        .await
        .unwrap();
    push.register("t-1", "late", 3);
    store
        .put_push_config("alice", config("t-1", "inline", &inline.url))
        .await
        .unwrap();
    push.register("t-1", "inline", 0);
    append(&**store, "t-1", "e3", TaskState::Working).await;
    push.notify("t-1");
    append(&**store, "t-1", "e4", TaskState::Completed).await;
    push.notify("t-1");

    eventually("both webhooks", || {
        late.delivered().len() >= 2 && inline.delivered().len() >= 5
    })
    .await;
    assert_eq!(push.shutdown(Duration::from_secs(5)).await, 0);
    assert_eq!(late.delivered(), ids("t-1", &["e3", "e4"]));
    assert_eq!(
        inline.delivered(),
        ids("t-1", &["e0", "e1", "e2", "e3", "e4"])
    );
    late.stop().await;
    inline.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unregistered_config_starts_at_the_newest_event() {
    let fx = fixture().await;
    let store = &fx.store;
    let receiver = Receiver::start(|_, _| ok()).await;
    create_task(&**store, "t-1").await;
    append(&**store, "t-1", "e1", TaskState::Working).await;
    // As after a restart: the config is in the store, the dispatcher never heard of it.
    store
        .put_push_config("alice", config("t-1", "c", &receiver.url))
        .await
        .unwrap();
    let push = dispatcher(store, dispatch_options());
    append(&**store, "t-1", "e2", TaskState::Working).await;
    push.notify("t-1");
    eventually("e2", || !receiver.delivered().is_empty()).await;
    append(&**store, "t-1", "e3", TaskState::Completed).await;
    push.notify("t-1");
    eventually("e3", || receiver.delivered().len() >= 2).await;
    assert_eq!(push.shutdown(Duration::from_secs(5)).await, 0);
    assert_eq!(receiver.delivered(), ids("t-1", &["e2", "e3"]));
    receiver.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_event_given_up_on_is_skipped_and_the_next_ones_go() {
    let fx = fixture().await;
    let store = &fx.store;
    // Refuses e1 for good (400), and e2 until the retry budget is spent.
    let receiver = Receiver::start(|_, body| match event_id(body).as_str() {
        "t-1:e1" => status(400),
        "t-1:e2" => status(503),
        _ => ok(),
    })
    .await;
    create_task(&**store, "t-1").await;
    store
        .put_push_config("alice", config("t-1", "c", &receiver.url))
        .await
        .unwrap();
    let push = dispatcher(
        store,
        PushOptions {
            attempts: 3,
            ..dispatch_options()
        },
    );
    push.register("t-1", "c", 0);
    for i in 1..=3 {
        append(&**store, "t-1", &format!("e{i}"), TaskState::Working).await;
    }
    push.notify("t-1");
    eventually("e3", || receiver.delivered().len() >= 2).await;
    assert_eq!(receiver.delivered(), ids("t-1", &["e0", "e3"]));
    let attempts: Vec<String> = receiver.calls().iter().map(|c| event_id(&c.body)).collect();
    assert_eq!(attempts, ids("t-1", &["e0", "e1", "e2", "e2", "e2", "e3"]));
    assert_eq!(push.shutdown(Duration::from_secs(5)).await, 0);
    receiver.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_are_independent_and_deleted_configs_stop() {
    let fx = fixture().await;
    let store = &fx.store;
    let stuck = Receiver::start(|_, _| Reply {
        delay: Duration::from_secs(30),
        ..ok()
    })
    .await;
    let receiver = Receiver::start(|_, _| ok()).await;
    create_task(&**store, "t-1").await;
    create_task(&**store, "t-2").await;
    store
        .put_push_config("alice", config("t-1", "c", &stuck.url))
        .await
        .unwrap();
    store
        .put_push_config("alice", config("t-2", "c", &receiver.url))
        .await
        .unwrap();
    let push = dispatcher(store, dispatch_options());
    push.register("t-1", "c", 0);
    push.register("t-2", "c", 0);
    push.notify("t-1");
    push.notify("t-2");
    eventually("t-2's first event", || receiver.delivered().len() == 1).await;

    store
        .delete_push_config("t-2", "c", task_store::DeleteScope::Owner("alice"))
        .await
        .unwrap();
    append(&**store, "t-2", "e1", TaskState::Working).await;
    push.notify("t-2");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.delivered(), ids("t-2", &["e0"]));

    // The stuck delivery to t-1 is abandoned at the shutdown bound.
    let started = Instant::now();
    assert_eq!(push.shutdown(Duration::from_millis(300)).await, 1);
    assert!(started.elapsed() < Duration::from_secs(2));
    // Shut down: notifications are ignored.
    append(&**store, "t-2", "e2", TaskState::Working).await;
    push.notify("t-2");
    stuck.stop().await;
    receiver.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shutdown_lets_pending_deliveries_finish() {
    let fx = fixture().await;
    let store = &fx.store;
    let receiver = Receiver::start(|_, _| Reply {
        delay: Duration::from_millis(50),
        ..ok()
    })
    .await;
    create_task(&**store, "t-1").await;
    for i in 1..=4 {
        append(&**store, "t-1", &format!("e{i}"), TaskState::Working).await;
    }
    store
        .put_push_config("alice", config("t-1", "c", &receiver.url))
        .await
        .unwrap();
    let push = dispatcher(store, dispatch_options());
    push.register("t-1", "c", 0);
    push.notify("t-1");
    assert_eq!(push.shutdown(Duration::from_secs(10)).await, 0);
    assert_eq!(
        receiver.delivered(),
        ids("t-1", &["e0", "e1", "e2", "e3", "e4"])
    );
    receiver.stop().await;
}

/// The service registers a config before storing it: a scan that runs in between (another
/// event of the task) must neither drop the registration nor start the config anywhere
/// else, so it gets every event from where it was registered, once and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_config_registered_before_it_is_stored_starts_where_registered() {
    let fx = fixture().await;
    let store = &fx.store;
    let receiver = Receiver::start(|_, _| ok()).await;
    create_task(&**store, "t-1").await;
    append(&**store, "t-1", "e1", TaskState::Working).await;
    let push = dispatcher(store, dispatch_options());
    push.register("t-1", "c", 0);
    // A scan lists no config yet, and must keep the registration.
    append(&**store, "t-1", "e2", TaskState::Working).await;
    push.notify("t-1");
    eventually("the scan to settle", || push.scanning("t-1") == Some(false)).await;
    store
        .put_push_config("alice", config("t-1", "c", &receiver.url))
        .await
        .unwrap();
    push.notify("t-1");
    eventually("three events", || receiver.delivered().len() >= 3).await;
    append(&**store, "t-1", "e3", TaskState::Completed).await;
    push.notify("t-1");
    eventually("four events", || receiver.delivered().len() >= 4).await;
    assert_eq!(push.shutdown(Duration::from_secs(5)).await, 0);
    assert_eq!(receiver.delivered(), ids("t-1", &["e0", "e1", "e2", "e3"]));
    receiver.stop().await;
}

#[test]
fn the_dispatcher_needs_a_runtime() {
    let store: Arc<dyn Store> = Arc::new(store_memory::MemoryStore::new());
    // The sender builds without a runtime; the dispatcher refuses to.
    let sender = Arc::new(PushSender::new(PushOptions::default()).unwrap());
    assert!(PushDispatcher::new(store, sender).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn several_events_of_one_commit_all_go_even_the_terminal_one() {
    let fx = fixture().await;
    let store = &fx.store;
    let receiver = Receiver::start(|_, _| ok()).await;
    create_task(&**store, "t-1").await;
    store
        .put_push_config("alice", config("t-1", "c", &receiver.url))
        .await
        .unwrap();
    let push = dispatcher(store, dispatch_options());
    push.register("t-1", "c", 0);
    push.notify("t-1");
    eventually("e0", || receiver.delivered().len() == 1).await;

    let base = store.get("t-1").await.unwrap().unwrap();
    let mut rec = base.record.clone();
    rec.status.state = TaskState::Completed;
    let mut update = TaskUpdate::new(base);
    for text in ["e1", "e2", "e3"] {
        update.events.push(status_event(&rec, text));
    }
    update.record = Some(rec);
    store
        .commit(vec![Change::Update(Box::new(update))])
        .await
        .unwrap();
    push.notify("t-1");

    eventually("e1..e3", || receiver.delivered().len() >= 4).await;
    assert_eq!(push.shutdown(Duration::from_secs(5)).await, 0);
    assert_eq!(receiver.delivered(), ids("t-1", &["e0", "e1", "e2", "e3"]));
    receiver.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_without_configs_is_not_listed_once_its_configs_are() {
    let fx = fixture().await;
    let store = &fx.store;
    let receiver = Receiver::start(|_, _| ok()).await;
    create_task(&**store, "t-1").await;
    let push = dispatcher(store, dispatch_options());
    // The embedded store knows the task has no configs: no listing starts.
    append(&**store, "t-1", "e1", TaskState::Working).await;
    push.notify("t-1");
    assert_eq!(push.scanning("t-1"), None);
    // A config stored without a `register` (as if by another handle): the store knows now.
    store
        .put_push_config("alice", config("t-1", "c", &receiver.url))
        .await
        .unwrap();
    append(&**store, "t-1", "e2", TaskState::Working).await;
    push.notify("t-1");
    assert!(push.scanning("t-1").is_some());
    eventually("e2", || !receiver.delivered().is_empty()).await;
    assert_eq!(push.shutdown(Duration::from_secs(5)).await, 0);
    assert_eq!(receiver.delivered(), ids("t-1", &["e2"]));
    receiver.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_whose_owner_left_the_task_gets_nothing_more_and_is_removed() {
    let fx = fixture().await;
    let store = &fx.store;
    let alices = Receiver::start(|_, _| ok()).await;
    let bobs = Receiver::start(|_, _| ok()).await;
    let team = [("alice", Role::Admin), ("bob", Role::Watcher)];
    let rec = record("t-1", "ctx", &team, TaskState::Working, at(0));
    let mut new = NewTask::new(rec.clone());
    new.events.push(status_event(&rec, "e0"));
    store
        .commit(vec![Change::Create(Box::new(new))])
        .await
        .unwrap();
    store
        .put_push_config("alice", config("t-1", "alices", &alices.url))
        .await
        .unwrap();
    store
        .put_push_config("bob", config("t-1", "bobs", &bobs.url))
        .await
        .unwrap();
    let push = dispatcher(store, dispatch_options());
    push.register("t-1", "alices", 0);
    push.register("t-1", "bobs", 0);
    push.notify("t-1");
    append(&**store, "t-1", "e1", TaskState::Working).await;
    push.notify("t-1");
    eventually("bob's first events", || bobs.delivered().len() >= 2).await;

    // Bob is removed: the removal's own event and everything after go to alice only.
    let base = store.get("t-1").await.unwrap().unwrap();
    let mut rec = base.record.clone();
    rec.extension.participants.retain(|p| p.id != "bob");
    let mut update = TaskUpdate::new(base);
    update.events.push(status_event(&rec, "bob removed"));
    update.record = Some(rec);
    store
        .commit(vec![Change::Update(Box::new(update))])
        .await
        .unwrap();
    push.notify("t-1");
    append(&**store, "t-1", "e3", TaskState::Completed).await;
    push.notify("t-1");

    eventually("alice's events", || alices.delivered().len() >= 4).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    while store
        .get_push_config("t-1", "bobs")
        .await
        .unwrap()
        .is_some()
    {
        assert!(Instant::now() < deadline, "bob's config was not removed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(push.shutdown(Duration::from_secs(5)).await, 0);
    assert_eq!(
        alices.delivered(),
        ids("t-1", &["e0", "e1", "bob removed", "e3"])
    );
    assert_eq!(bobs.delivered(), ids("t-1", &["e0", "e1"]));
    alices.stop().await;
    bobs.stop().await;
}
