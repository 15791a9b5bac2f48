//! A webhook receiver: a real HTTP server on 127.0.0.1 that records every request it gets
//! and answers with the statuses a test scripts (200 otherwise).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use reqwest::header::HeaderMap;
use serde_json::Value;
use tokio::sync::Notify;

use crate::wait::WAIT;

/// One request the receiver got, and the status it answered.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    /// The body as JSON; a body that is not JSON as a JSON string.
    pub body: Value,
    pub answered: u16,
}

impl Delivery {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// What to answer: the first requests in order, then by path, then 200.
struct Script {
    first: VecDeque<u16>,
    by_path: HashMap<String, u16>,
}

impl Script {
    fn answer(&mut self, path: &str) -> u16 {
        self.first
            .pop_front()
            .or_else(|| self.by_path.get(path).copied())
            .unwrap_or(200)
    }
}

/// What the receiver got so far, and a wake-up for those waiting for more.
#[derive(Default)]
struct Log {
    deliveries: Mutex<Vec<Delivery>>,
    arrived: Notify,
}

/// An HTTP server on 127.0.0.1:0 that records every request. [`Webhook::next`] and
/// [`Webhook::until`] read the requests one by one as they come; [`Webhook::received`] gives
/// all of them so far.
pub struct Webhook {
    pub base: String,
    log: Arc<Log>,
    /// How many deliveries `next` has handed out.
    read: usize,
    serve: tokio::task::JoinHandle<()>,
}

impl Webhook {
    /// A receiver answering 200 to everything.
    pub async fn start() -> Self {
        Self::answering(&[]).await
    }

    /// A receiver that answers its first requests with these statuses, then 200.
    pub async fn answering(first: &[u16]) -> Self {
        Self::scripted(first, &[]).await
    }

    /// A receiver that answers every request to a path with the status given for it, and
    /// 200 to other paths.
    pub async fn answering_paths(by_path: &[(&str, u16)]) -> Self {
        Self::scripted(&[], by_path).await
    }

    async fn scripted(first: &[u16], by_path: &[(&str, u16)]) -> Self {
        let script = Arc::new(Mutex::new(Script {
            first: first.iter().copied().collect(),
            by_path: by_path
                .iter()
                .map(|(path, status)| ((*path).to_owned(), *status))
                .collect(),
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind webhook");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let log = Arc::new(Log::default());
        let recorder = log.clone();
        let router = axum::Router::new().fallback(
            move |method: axum::http::Method,
                  uri: axum::http::Uri,
                  headers: HeaderMap,
                  body: bytes::Bytes| {
                let log = recorder.clone();
                let answer = script.lock().expect("script").answer(uri.path());
                async move {
                    let body = serde_json::from_slice(&body).unwrap_or_else(|_| {
                        Value::String(String::from_utf8_lossy(&body).into_owned())
                    });
                    log.deliveries.lock().expect("log").push(Delivery {
                        method: method.to_string(),
                        path: uri.path().to_owned(),
                        headers,
                        body,
                        answered: answer,
                    });
                    log.arrived.notify_waiters();
                    axum::http::StatusCode::from_u16(answer).expect("status")
                }
            },
        );
        let serve = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self {
            base,
            log,
            read: 0,
            serve,
        }
    }

    /// The URL of a path on the receiver.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The next request not yet read (fails after [`WAIT`]).
    pub async fn next(&mut self) -> Delivery {
        let wait = async {
            loop {
                // Registered before looking, so an arrival in between is not missed.
                let arrived = self.log.arrived.notified();
                if let Some(delivery) = self.log.deliveries.lock().expect("log").get(self.read) {
                    return delivery.clone();
                }
                arrived.await;
            }
        };
        let delivery = tokio::time::timeout(WAIT, wait)
            .await
            .expect("a webhook delivery");
        self.read += 1;
        delivery
    }

    /// Requests until one satisfies `last` (that one included).
    pub async fn until(&mut self, last: impl Fn(&Delivery) -> bool) -> Vec<Delivery> {
        let mut got = Vec::new();
        loop {
            let delivery = self.next().await;
            let stop = last(&delivery);
            got.push(delivery);
            if stop {
                return got;
            }
        }
    }

    /// What arrived and was not read yet, without waiting.
    pub fn drain(&mut self) -> Vec<Delivery> {
        let deliveries = self.log.deliveries.lock().expect("log");
        let unread = deliveries[self.read..].to_vec();
        self.read = deliveries.len();
        unread
    }

    /// Every request so far, in arrival order (read or not).
    pub fn received(&self) -> Vec<Delivery> {
        self.log.deliveries.lock().expect("log").clone()
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.serve.abort();
    }
}
