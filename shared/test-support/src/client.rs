//! An HTTP client of one server: the A2A headers every request carries, raw JSON-RPC and
//! REST calls, and the whole-read [`Reply`].

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::fixtures::fresh_id;
use crate::wait::WAIT;

/// Which binding a call goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    JsonRpc,
    Rest,
}

pub const BOTH: [Binding; 2] = [Binding::JsonRpc, Binding::Rest];

/// One HTTP response, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?} {}", self.status, self.text))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn content_type(&self) -> &str {
        self.header("content-type").unwrap_or("")
    }
}

fn http_client() -> reqwest::ClientBuilder {
    reqwest::Client::builder().no_proxy()
}

/// A client of one server. Every request carries `A2A-Version: 1.0` unless told otherwise,
/// and `X-Participant-Id` when [`Client::as_participant`] set one.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    pub base: String,
    participant: Option<String>,
    extensions: Option<String>,
    version: Option<String>,
}

impl Client {
    pub fn new(base: &str) -> Self {
        Self {
            http: http_client().build().expect("http client"),
            base: base.trim_end_matches('/').to_owned(),
            participant: None,
            extensions: None,
            version: Some("1.0".to_owned()),
        }
    }

    /// The same client sending `X-Participant-Id: <id>`.
    pub fn as_participant(&self, id: &str) -> Self {
        Self {
            participant: Some(id.to_owned()),
            ..self.clone()
        }
    }

    /// The same client sending `A2A-Extensions: <uris>`.
    pub fn with_extensions(&self, uris: &str) -> Self {
        Self {
            extensions: Some(uris.to_owned()),
            ..self.clone()
        }
    }

    /// The same client without the `A2A-Version` header.
    pub fn without_version(&self) -> Self {
        Self {
            version: None,
            ..self.clone()
        }
    }

    /// A separate connection pool (streams and other calls on distinct connections).
    pub fn fresh_connection(&self) -> Self {
        Self {
            http: http_client().build().expect("http client"),
            ..self.clone()
        }
    }

    /// The same client connecting from another local address (e.g. `127.0.0.2`, which Linux
    /// routes over loopback like 127.0.0.1): another caller to a per-address rate limit.
    pub fn bound_to(&self, address: &str) -> Self {
        Self {
            http: http_client()
                .local_address(address.parse::<std::net::IpAddr>().expect("an IP address"))
                .build()
                .expect("http client"),
            ..self.clone()
        }
    }

    /// A request with the client's headers.
    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .timeout(WAIT);
        if let Some(v) = &self.version {
            req = req.header("A2A-Version", v);
        }
        if let Some(p) = &self.participant {
            req = req.header("X-Participant-Id", p);
        }
        if let Some(e) = &self.extensions {
            req = req.header("A2A-Extensions", e);
        }
        req
    }

    pub async fn send(req: reqwest::RequestBuilder) -> Reply {
        let resp = req.send().await.expect("HTTP request");
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.expect("body");
        Reply {
            status,
            headers,
            text,
        }
    }

    /// GET `path` with one more header.
    pub async fn get_with_header(&self, path: &str, name: &str, value: &str) -> Reply {
        Self::send(self.request(Method::GET, path).header(name, value)).await
    }

    /// The JSON-RPC request body for `method` with a fresh id.
    pub fn rpc_body(method: &str, params: Value) -> (String, Value) {
        let id = fresh_id("rpc");
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        (id, body)
    }

    /// POSTs a JSON-RPC request to `/`; checks the envelope (HTTP 200, JSON, the id echoed).
    pub async fn rpc(&self, method: &str, params: Value) -> Reply {
        let (id, body) = Self::rpc_body(method, params);
        let reply = Self::send(self.request(Method::POST, "/").json(&body)).await;
        assert_eq!(reply.status, StatusCode::OK, "{method}: {}", reply.text);
        assert!(
            reply.content_type().starts_with("application/json"),
            "{method}: content type {}",
            reply.content_type()
        );
        let value = reply.json();
        assert_eq!(value["jsonrpc"], "2.0", "{value}");
        assert_eq!(
            value["id"],
            id.as_str(),
            "the request id is echoed: {value}"
        );
        reply
    }

    /// A REST call; `body` is sent as `application/json` when given.
    pub async fn rest(&self, method: Method, path: &str, body: Option<Value>) -> Reply {
        let mut req = self.request(method, path);
        if let Some(body) = body {
            req = req.json(&body);
        }
        Self::send(req).await
    }
}
