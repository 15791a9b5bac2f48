//! What the push tests share: a webhook receiver on 127.0.0.1 scripted per call, configs,
//! sender options and the events they deliver.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a::{StreamResponse, TaskPushNotificationConfig, TaskState};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use task_core::extension::Role;
use task_store::contract::{at, record, status_event};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::push::{DeliveryError, PushOptions, PushSender, WebhookPolicy};

/// What the receiver answers to its n-th call (0-based) with the given body.
#[derive(Clone)]
pub(super) struct Reply {
    pub(super) status: u16,
    pub(super) retry_after: Option<&'static str>,
    pub(super) delay: Duration,
}

pub(super) fn ok() -> Reply {
    status(200)
}

pub(super) fn status(code: u16) -> Reply {
    Reply {
        status: code,
        retry_after: None,
        delay: Duration::ZERO,
    }
}

impl Reply {
    /// The same reply, sent only after `delay`.
    pub(super) fn after(self, delay: Duration) -> Self {
        Self { delay, ..self }
    }

    /// The same reply with a `Retry-After` header.
    pub(super) fn retry_after(self, after: &'static str) -> Self {
        Self {
            retry_after: Some(after),
            ..self
        }
    }
}

/// Answers `first` to the first `calls` calls, then 200.
pub(super) fn then_ok(
    calls: usize,
    first: Reply,
) -> impl Fn(usize, &serde_json::Value) -> Reply + Send + Sync + 'static {
    move |n, _| if n < calls { first.clone() } else { ok() }
}

type Behaviour = Arc<dyn Fn(usize, &serde_json::Value) -> Reply + Send + Sync>;

#[derive(Debug, Clone)]
pub(super) struct Call {
    pub(super) at: Instant,
    pub(super) status: u16,
    pub(super) headers: HeaderMap,
    pub(super) body: serde_json::Value,
}

struct Hook {
    calls: Mutex<Vec<Call>>,
    behaviour: Behaviour,
}

pub(super) struct Receiver {
    pub(super) url: String,
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
    pub(super) async fn start(
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

    /// A receiver that gives every call the same reply.
    pub(super) async fn always(reply: Reply) -> Self {
        Self::start(move |_, _| reply.clone()).await
    }

    pub(super) fn calls(&self) -> Vec<Call> {
        self.hook.calls.lock().unwrap().clone()
    }

    /// The message ids of the events answered with a 2xx, in arrival order.
    pub(super) fn delivered(&self) -> Vec<String> {
        self.calls()
            .iter()
            .filter(|c| (200..300).contains(&c.status))
            .map(|c| event_id(&c.body))
            .collect()
    }

    pub(super) async fn stop(mut self) {
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
pub(super) fn event_id(body: &serde_json::Value) -> String {
    body.pointer("/statusUpdate/status/message/messageId")
        .and_then(|v| v.as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| body.to_string())
}

pub(super) fn config(task: &str, id: &str, url: &str) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        url: url.to_owned(),
        id: Some(id.to_owned()),
        task_id: task.to_owned(),
        token: None,
        authentication: None,
        tenant: None,
    }
}

pub(super) fn local_options() -> PushOptions {
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

pub(super) fn sender(options: PushOptions) -> PushSender {
    PushSender::new(options).unwrap()
}

pub(super) fn event(text: &str) -> StreamResponse {
    status_event(&record("t-1", "ctx", TEAM, TaskState::Working, at(0)), text)
}

/// Delivers the event `x` of task `t-1` to `url` (config `c-1`) with a sender of `options`.
pub(super) async fn deliver_to(url: &str, options: PushOptions) -> Result<(), DeliveryError> {
    sender(options)
        .deliver(&config("t-1", "c-1", url), &event("x"))
        .await
}

pub(super) const TEAM: &[(&str, Role)] = &[("alice", Role::Reporter), ("agent", Role::Assignee)];
