//! An OTLP/HTTP collector: a real HTTP server on 127.0.0.1 that takes `POST /v1/traces`
//! (protobuf `ExportTraceServiceRequest`, as exporters send it) and keeps the spans.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use prost::Message as _;
use tokio::sync::Notify;

use crate::wait::WAIT;

/// One span as received (ids in lower-case hex; an absent parent is an empty string).
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    /// Each attribute's value as text.
    pub attributes: BTreeMap<String, String>,
    /// The `service.name` of the resource that sent it.
    pub service: String,
}

impl Span {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

#[derive(Default)]
struct Received {
    spans: Mutex<Vec<Span>>,
    arrived: Notify,
}

/// The collector; its OTLP endpoint is [`Collector::endpoint`] (`http://127.0.0.1:<port>`).
pub struct Collector {
    pub endpoint: String,
    received: Arc<Received>,
    serve: tokio::task::JoinHandle<()>,
}

impl Collector {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind collector");
        let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
        let received = Arc::new(Received::default());
        let keep = received.clone();
        let router = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: bytes::Bytes| {
                let keep = keep.clone();
                async move {
                    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
                        return axum::http::StatusCode::BAD_REQUEST;
                    };
                    keep.spans.lock().expect("spans").extend(spans_of(request));
                    keep.arrived.notify_waiters();
                    axum::http::StatusCode::OK
                }
            }),
        );
        let serve = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self {
            endpoint,
            received,
            serve,
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.received.spans.lock().expect("spans").clone()
    }

    /// Waits (at most [`WAIT`]) until the spans received satisfy `done`; returns them.
    pub async fn until(&self, what: &str, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let arrived = self.received.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                panic!("the collector did not receive {what}; it has {spans:#?}");
            }
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.serve.abort();
    }
}

fn spans_of(request: ExportTraceServiceRequest) -> Vec<Span> {
    let mut out = Vec::new();
    for resource in request.resource_spans {
        let service = resource
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .map(|kv| text(kv.value.as_ref().and_then(|v| v.value.as_ref())))
            .unwrap_or_default();
        for scope in resource.scope_spans {
            for span in scope.spans {
                out.push(Span {
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    attributes: span
                        .attributes
                        .iter()
                        .map(|kv| {
                            let value = kv.value.as_ref().and_then(|v| v.value.as_ref());
                            (kv.key.clone(), text(value))
                        })
                        .collect(),
                    service: service.clone(),
                });
            }
        }
    }
    out
}

fn text(value: Option<&any_value::Value>) -> String {
    match value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
