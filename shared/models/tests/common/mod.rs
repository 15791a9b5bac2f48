//! What the provider tests share: a stub HTTP server on 127.0.0.1 that records every request
//! and plays programmed replies in order (the last one again once they are spent), and the
//! requests they send.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod eventstream;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use models::{ModelError, ModelRequest, Turn};
use serde_json::Value;
use task_core::commands::{ModelSpec, ProviderKind};

/// One request the stub received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: Method,
    /// The path as sent (still percent-encoded).
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Recorded {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("the request body is JSON")
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().expect("ascii"))
    }
}

/// One programmed reply.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    pub delay: Duration,
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            headers: vec![("content-type", "application/json".to_owned())],
            body: body.to_string().into_bytes(),
            delay: Duration::ZERO,
        }
    }

    pub fn raw(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![],
            body: body.as_bytes().to_vec(),
            delay: Duration::ZERO,
        }
    }

    /// A 200 whose body is these event-stream messages (see [`eventstream`]).
    pub fn event_stream(messages: Vec<Vec<u8>>) -> Self {
        Self {
            status: 200,
            headers: vec![(
                "content-type",
                "application/vnd.amazon.eventstream".to_owned(),
            )],
            body: messages.concat(),
            delay: Duration::ZERO,
        }
    }

    pub fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_owned()));
        self
    }

    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

#[derive(Clone)]
struct Shared {
    replies: Arc<Vec<Reply>>,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

pub struct Stub {
    /// `http://127.0.0.1:<port>`
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl Stub {
    pub async fn start(replies: Vec<Reply>) -> Stub {
        assert!(!replies.is_empty());
        let shared = Shared {
            replies: Arc::new(replies),
            requests: Arc::default(),
        };
        let requests = shared.requests.clone();
        let app = Router::new().fallback(handle).with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Stub { url, requests }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// The one request the stub got, a POST.
    pub fn only_post(&self) -> Recorded {
        let sent = self.requests();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].method, "POST");
        sent[0].clone()
    }

    pub fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

async fn handle(
    State(shared): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let index = {
        let mut requests = shared.requests.lock().unwrap();
        requests.push(Recorded {
            method,
            path: uri.path().to_owned(),
            headers,
            body,
        });
        requests.len() - 1
    };
    let reply = &shared.replies[index.min(shared.replies.len() - 1)];
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut headers = HeaderMap::new();
    for (name, value) in &reply.headers {
        headers.insert(
            HeaderName::from_static(name),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    (
        StatusCode::from_u16(reply.status).unwrap(),
        headers,
        reply.body.clone(),
    )
        .into_response()
}

/// A local address nothing listens on (connections are refused).
pub async fn closed_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}

/// A request to the catalog entry `id` of `provider`, with these settings and turns.
pub fn request_to(
    id: &str,
    provider: ProviderKind,
    settings: Value,
    turns: Vec<Turn>,
) -> ModelRequest {
    ModelRequest {
        task_name: "t".into(),
        model: ModelSpec {
            id: id.into(),
            provider,
            default_effort: None,
            settings: match settings {
                Value::Object(map) => map,
                _ => panic!("settings are an object"),
            },
            context_window: None,
        },
        effort: None,
        system: "You are a helpful agent.".into(),
        turns,
        tools: Default::default(),
    }
}

/// One user message.
pub fn hello() -> Vec<Turn> {
    vec![Turn::User {
        text: "Hello?".into(),
    }]
}

/// Checks that a provider refuses each of these successful (HTTP 200) bodies as an invalid
/// reply; `answered` makes one call to a stub that answers the given reply.
pub async fn each_is_an_invalid_reply<F, Fut>(bodies: &[&str], answered: F)
where
    F: Fn(Reply) -> Fut,
    Fut: Future<Output = ModelError>,
{
    for body in bodies {
        let err = answered(Reply::raw(200, body)).await;
        assert!(
            matches!(err, ModelError::InvalidReply(_)),
            "{body}: {err:?}"
        );
    }
}

/// What the deployment builds (`store_dynamodb::sdk_config()`: rustls with ring), pointed at
/// a stub with static credentials.
pub fn bedrock_sdk_config(endpoint: &str) -> aws_config::SdkConfig {
    use aws_config::{BehaviorVersion, Region};
    use aws_sdk_bedrockruntime::config::{Credentials, SharedCredentialsProvider};
    use aws_smithy_http_client::tls;

    let http_client = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::Ring,
        ))
        .build_https();
    aws_config::SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            "AKIDTESTONLY",
            "test-secret",
            None,
            None,
            "test",
        )))
        .endpoint_url(endpoint)
        .http_client(http_client)
        .build()
}
