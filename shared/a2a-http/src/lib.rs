//! The A2A 1.0 protocol bindings — JSON-RPC 2.0, HTTP+JSON (REST), SSE streaming and the
//! public agent card — as plain functions from `http::Request<Bytes>` to
//! `http::Response<`[`Body`]`>`.
//!
//! Why framework-neutral: the Lambda functions (lambda_http) and the local server (axum) must
//! answer byte-for-byte alike, so both call [`handle`] and only adapt the request and response
//! types. Everything protocol-shaped lives here: routing, JSON-RPC envelopes, content types,
//! `A2A-Version` / `A2A-Extensions` / `X-Participant-Id`, parameter validation with field
//! violations, the one error table ([`ErrorKind::mapping`]), SSE framing and keep-alives. The
//! service behind it ([`A2aApi`]) sees only a2a-lf request types and a [`RequestContext`].
//!
//! [`RequestContext`]: a2a_service::RequestContext

mod body;
mod card;
mod error;
mod headers;
mod jsonrpc;
mod ops;
mod params;
mod reply;
mod rest;
mod sse;

#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;

use std::time::Duration;

use a2a_service::A2aApi;
use bytes::Bytes;
use http::{Request, Response};

pub use body::Body;
pub use card::AGENT_CARD_PATH;
pub use error::{ErrorKind, ErrorMapping, ProtocolError};
pub use headers::SUPPORTED_VERSION;

/// Where and how the bindings are served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// The JSON-RPC endpoint, besides `/` (which is always one). Served with and without a
    /// trailing slash (TCK gotcha 1). Default `/`.
    pub jsonrpc_path: String,
    /// The prefix of the REST routes, e.g. `/rest` for `/rest/message:send`; empty (the
    /// default) serves them at the root. The agent card is always at [`AGENT_CARD_PATH`].
    pub rest_prefix: String,
    /// `Cache-Control: public, max-age=<this>` on the agent card. Default 300.
    pub card_max_age_secs: u32,
    /// Interval of `: keep-alive` comments on an idle SSE stream; zero disables them.
    /// Default 15 s.
    pub keep_alive: Duration,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            jsonrpc_path: "/".to_string(),
            rest_prefix: String::new(),
            card_max_age_secs: 300,
            keep_alive: Duration::from_secs(15),
        }
    }
}

/// What the host knows about the caller that is not in the HTTP request itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// The principal an authorizer verified (the Lambda adapter reads it from the API Gateway
    /// authorizer context); `None` when identity is self-asserted (the local server).
    pub verified_principal: Option<String>,
}

impl Caller {
    /// No verified identity (local server; participant from the message or `X-Participant-Id`).
    pub fn anonymous() -> Self {
        Caller::default()
    }

    /// A principal verified by an authorizer.
    pub fn verified(principal: impl Into<String>) -> Self {
        Caller {
            verified_principal: Some(principal.into()),
        }
    }
}

fn is_jsonrpc_path(config: &HttpConfig, path: &str) -> bool {
    let path = path.trim_end_matches('/');
    path.is_empty() || path == config.jsonrpc_path.trim_end_matches('/')
}

/// Answers one HTTP request: the agent card, a JSON-RPC call, or a REST call.
///
/// Never fails: every problem is an A2A error response (JSON-RPC: HTTP 200 with an `error`;
/// REST: the status of the error table with a `google.rpc.Status` body). Streaming methods
/// answer [`Body::Stream`]; the consumer must forward it without buffering.
pub async fn handle(
    api: &dyn A2aApi,
    config: &HttpConfig,
    req: Request<Bytes>,
    caller: Caller,
) -> Response<Body> {
    let path = req.uri().path();
    if path == AGENT_CARD_PATH {
        card::serve(api.agent_card(), config, &req)
    } else if is_jsonrpc_path(config, path) {
        jsonrpc::handle(api, config, req, &caller).await
    } else {
        rest::handle(api, config, req, &caller).await
    }
}
