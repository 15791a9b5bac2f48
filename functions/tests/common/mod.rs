//! Helpers of the in-process function tests: invocations built from the API Gateway (REST,
//! payload v1) and Function URL (payload v2) event fixtures in `tests/fixtures/`, apps over one
//! embedded store, answers read back whole or as SSE; and everything of `test-support` (the
//! webhook receiver, message builders and readers).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;

use a2a_http::{Method, Serves};
use functions::{App, FromLookup, FunctionConfig};
use serde_json::{Value, json};
use store_embedded::EmbeddedStore;
use task_store::Store;
pub use test_support::*;

pub mod template;

pub const BASE_URL: &str = "https://k3x9q2abcd.execute-api.eu-west-1.amazonaws.com/prod";

pub fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).expect(&path)).expect("fixture JSON")
}

/// Which event shape an invocation arrives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// API Gateway REST API (v1), stage `prod`.
    RestV1,
    /// Lambda Function URL (v2).
    FunctionUrl,
}

pub const PAYLOADS: [Payload; 2] = [Payload::RestV1, Payload::FunctionUrl];

/// An HTTP request to put into an event.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: &'static str,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
}

impl Call {
    pub fn new(method: &'static str, path: impl Into<String>) -> Self {
        Call {
            method,
            path: path.into(),
            query: Vec::new(),
            headers: vec![("A2A-Version".into(), "1.0".into())],
            body: None,
        }
    }

    pub fn get(path: impl Into<String>) -> Self {
        Call::new("GET", path)
    }

    pub fn post(path: impl Into<String>, body: &Value) -> Self {
        Call::new("POST", path)
            .header("Content-Type", "application/json")
            .body(body.to_string())
    }

    pub fn rpc(method: &str, params: Value) -> Self {
        Call::post(
            "/",
            &json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}),
        )
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn without_header(mut self, name: &str) -> Self {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self
    }

    pub fn query(mut self, name: &str, value: &str) -> Self {
        self.query.push((name.into(), value.into()));
        self
    }

    pub fn body(mut self, body: impl Into<String>) -> Self {
        self.body = Some(body.into());
        self
    }

    pub fn participant(self, id: &str) -> Self {
        self.header("X-Participant-Id", id)
    }

    /// The event JSON: `fixture` (a file of `tests/fixtures/`) with this request in it.
    pub fn event(&self, payload: Payload, fixture_name: &str) -> Value {
        let mut event = fixture(fixture_name);
        let query: String = self
            .query
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&");
        match payload {
            Payload::RestV1 => {
                event["httpMethod"] = json!(self.method);
                event["path"] = json!(self.path);
                event["requestContext"]["httpMethod"] = json!(self.method);
                event["requestContext"]["path"] = json!(format!("/prod{}", self.path));
                for (name, value) in &self.headers {
                    event["headers"][name] = json!(value);
                    event["multiValueHeaders"][name] = json!([value]);
                }
                if !self.query.is_empty() {
                    let mut single = serde_json::Map::new();
                    let mut multi: HashMap<String, Vec<String>> = HashMap::new();
                    for (k, v) in &self.query {
                        single.insert(k.clone(), json!(v));
                        multi.entry(k.clone()).or_default().push(v.clone());
                    }
                    event["queryStringParameters"] = Value::Object(single);
                    event["multiValueQueryStringParameters"] = json!(multi);
                }
            }
            Payload::FunctionUrl => {
                event["rawPath"] = json!(self.path);
                event["rawQueryString"] = json!(query);
                event["requestContext"]["http"]["method"] = json!(self.method);
                event["requestContext"]["http"]["path"] = json!(self.path);
                for (name, value) in &self.headers {
                    event["headers"][name.to_ascii_lowercase()] = json!(value);
                }
                if !self.query.is_empty() {
                    let single: serde_json::Map<String, Value> = self
                        .query
                        .iter()
                        .map(|(k, v)| (k.clone(), json!(v)))
                        .collect();
                    event["queryStringParameters"] = Value::Object(single);
                }
            }
        }
        if let Some(body) = &self.body {
            event["body"] = json!(body);
        }
        event
    }

    /// The invocation as lambda_http decodes it.
    pub fn request(&self, payload: Payload, fixture_name: &str) -> lambda_http::Request {
        let event = self.event(payload, fixture_name).to_string();
        lambda_http::request::from_str(&event).expect("lambda_http decodes the event")
    }
}

/// The base fixture of a payload, without an authorizer.
pub fn plain(payload: Payload) -> &'static str {
    match payload {
        Payload::RestV1 => "rest-v1.json",
        Payload::FunctionUrl => "function-url.json",
    }
}

/// Functions over one store.
pub struct Deployment {
    pub store: Arc<dyn Store>,
    _dir: tempfile::TempDir,
    env: Vec<(&'static str, String)>,
}

impl Deployment {
    pub fn new() -> Self {
        Self::with_env(&[])
    }

    pub fn with_env(extra: &[(&'static str, &str)]) -> Self {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let store: Arc<dyn Store> =
            Arc::new(EmbeddedStore::open(dir.path().join("tasks.redb")).unwrap());
        let mut env: Vec<(&'static str, String)> = vec![
            ("TH_TABLE", "tasks".into()),
            ("TH_BASE_URL", BASE_URL.into()),
        ];
        env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
        Self {
            store,
            _dir: dir,
            env,
        }
    }

    pub fn config(&self) -> FunctionConfig {
        FunctionConfig::from_lookup(|name| {
            self.env
                .iter()
                .rev()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.clone())
        })
        .unwrap()
    }

    /// The function that answers `route` (see [`function_of`]).
    pub fn app(&self, route: Serves) -> Arc<App> {
        Arc::new(App::new(
            self.store.clone(),
            &self.config(),
            function_of(route),
        ))
    }
}

/// The fifteen A2A HTTP routes (the JSON-RPC endpoint, the card, the eleven REST routes, the
/// task extension's two):
/// the binary of the function behind each and what it serves. Tests name a route by the
/// second item; [`function_of`] gives the function that answers it.
pub const HTTP_ROUTES: [(&str, Serves); 15] = [
    ("jsonrpc", Serves::JsonRpc),
    ("agent-card", Serves::AgentCard),
    ("send-message", Serves::Rest(Method::SendMessage)),
    (
        "send-streaming-message",
        Serves::Rest(Method::SendStreamingMessage),
    ),
    ("task", Serves::Rest(Method::GetTask)),
    ("list-tasks", Serves::Rest(Method::ListTasks)),
    ("task", Serves::Rest(Method::CancelTask)),
    ("task", Serves::Rest(Method::SubscribeToTask)),
    ("create-push-config", Serves::Rest(Method::CreatePushConfig)),
    ("get-push-config", Serves::Rest(Method::GetPushConfig)),
    ("list-push-configs", Serves::Rest(Method::ListPushConfigs)),
    ("delete-push-config", Serves::Rest(Method::DeletePushConfig)),
    (
        "get-extended-agent-card",
        Serves::Rest(Method::GetExtendedAgentCard),
    ),
    ("task", Serves::Rest(Method::GetTaskTranscript)),
    ("task", Serves::Rest(Method::GetTaskAuditLog)),
];

/// What the function answering `route` serves: the `task` function for the methods on
/// `/tasks/{id}` and its records, the route's own otherwise.
pub fn function_of(route: Serves) -> Serves {
    match route {
        Serves::Rest(method) if Serves::TASK_RESOURCE_METHODS.contains(&method) => {
            Serves::TaskResource
        }
        other => other,
    }
}

/// An answer as the client gets it.
#[derive(Debug)]
pub struct Got {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: String,
}

impl Got {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The `data:` payloads of an SSE body, in order, and its comment lines.
    pub fn sse(&self) -> (Vec<Value>, Vec<String>) {
        let mut data = Vec::new();
        let mut comments = Vec::new();
        for line in self.body.lines() {
            if let Some(payload) = line.strip_prefix("data:") {
                data.push(serde_json::from_str(payload.trim()).expect("SSE data is JSON"));
            } else if let Some(comment) = line.strip_prefix(':') {
                comments.push(comment.trim().to_owned());
            }
        }
        (data, comments)
    }
}

/// Invokes the function as its runtime would (buffered or streamed) and reads the answer.
pub async fn invoke(app: &Arc<App>, route: Serves, request: lambda_http::Request) -> Got {
    if function_of(route).may_stream() {
        let response = app.respond_streaming(request).await;
        let (parts, body) = response.into_parts();
        assert!(body.is_stream(), "streamed functions always write a stream");
        let bytes = body.collect().await;
        Got {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body: String::from_utf8(bytes.to_vec()).expect("UTF-8"),
        }
    } else {
        let response = app.respond_buffered(request).await;
        let (parts, body) = response.into_parts();
        let body = match body {
            lambda_http::Body::Empty => String::new(),
            lambda_http::Body::Text(text) => text,
            lambda_http::Body::Binary(bytes) => String::from_utf8(bytes).expect("UTF-8"),
            _ => String::new(),
        };
        Got {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        }
    }
}

/// A user text message from `from` with a fresh id.
pub fn message(from: Option<&str>, text: &str) -> Value {
    test_support::message(from, vec![text_part(text)])
}
