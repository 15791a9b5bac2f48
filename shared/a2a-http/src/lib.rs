//! The A2A 1.0 protocol bindings — JSON-RPC 2.0, HTTP+JSON (REST), SSE streaming and the
//! public agent card, with the task extension's two methods — as plain functions from `http::Request<Bytes>` to
//! `http::Response<`[`Body`]`>`.
//!
//! Why framework-neutral: the Lambda functions (lambda_http) and the local server (hyper) must
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
mod rate_limit;
mod reply;
mod rest;
mod sse;

#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;

use std::net::IpAddr;
use std::time::Duration;

use a2a::JsonRpcId;
use a2a_service::A2aApi;
use bytes::Bytes;
use http::{Request, Response};

pub use body::Body;
pub use card::AGENT_CARD_PATH;
pub use error::{ErrorKind, ErrorMapping, ProtocolError};
pub use headers::SUPPORTED_VERSION;
pub use ops::Method;
pub use rate_limit::{MAX_TRACKED_CALLERS, RateLimit, RateLimiter};

/// What one deployment unit answers. The local server answers everything; each Lambda
/// function answers its own route only, so a request routed to the wrong function gets a
/// clear error instead of running another method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Serves {
    #[default]
    Everything,
    /// Only `GET /.well-known/agent-card.json`.
    AgentCard,
    /// Only the JSON-RPC endpoint (every method).
    JsonRpc,
    /// Only the REST route of this method.
    Rest(Method),
    /// The REST routes on `/tasks/{id}`: GetTask (`GET /tasks/{id}`), CancelTask
    /// (`POST /tasks/{id}:cancel`) and SubscribeToTask (`GET`/`POST /tasks/{id}:subscribe`).
    /// API Gateway routes by whole path segments and HTTP method, so to it these three are
    /// one resource (`/tasks/{id}`, GET and POST), and one function has to answer them. The
    /// same function answers the task's records, `GET /tasks/{id}/transcript` and
    /// `GET /tasks/{id}/auditLog` (reads of the same task: no function of their own).
    TaskResource,
}

impl Serves {
    /// The REST methods of the resource `/tasks/{id}` and of its records.
    pub const TASK_RESOURCE_METHODS: [Method; 5] = [
        Method::GetTask,
        Method::CancelTask,
        Method::SubscribeToTask,
        Method::GetTaskTranscript,
        Method::GetTaskAuditLog,
    ];

    /// Whether this unit answers `method` over HTTP+JSON.
    pub fn answers_rest(self, method: Method) -> bool {
        match self {
            Serves::Everything => true,
            Serves::Rest(only) => only == method,
            Serves::TaskResource => Self::TASK_RESOURCE_METHODS.contains(&method),
            Serves::AgentCard | Serves::JsonRpc => false,
        }
    }

    /// Whether this unit's Lambda function answers through the streaming runtime: some of
    /// its answers are SSE streams, or may come later than a buffered API Gateway
    /// integration waits (29 s): a blocking SendMessage answers when the agent's turn ends.
    pub fn may_stream(self) -> bool {
        match self {
            Serves::Everything | Serves::JsonRpc | Serves::TaskResource => true,
            Serves::Rest(Method::SendMessage) => true,
            Serves::Rest(method) => method.is_streaming(),
            Serves::AgentCard => false,
        }
    }
}

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
    /// What this deployment answers (default: everything).
    pub serves: Serves,
    /// Requests per caller (the verified principal, else the client address) over this
    /// limit are refused with HTTP 429 and `Retry-After` before anything else is done with
    /// them. Default none. Clones of the config share the limiter's buckets.
    pub rate_limit: Option<RateLimiter>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            jsonrpc_path: "/".to_string(),
            rest_prefix: String::new(),
            card_max_age_secs: 300,
            keep_alive: Duration::from_secs(15),
            serves: Serves::Everything,
            rate_limit: None,
        }
    }
}

/// What the host knows about the caller that is not in the HTTP request itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// The principal an authorizer verified (the Lambda adapter reads it from the API Gateway
    /// authorizer context); `None` when identity is self-asserted (the local server).
    pub verified_principal: Option<String>,
    /// The client's address (the local server's peer; the Lambda adapter's API Gateway
    /// source IP): the rate limit's key when no principal was verified.
    pub address: Option<IpAddr>,
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
            ..Caller::default()
        }
    }

    /// The same caller, coming from `address`.
    pub fn with_address(mut self, address: Option<IpAddr>) -> Self {
        self.address = address;
        self
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
/// answer [`Body::Stream`]; the consumer must forward it without buffering. A request over
/// the configured rate limit is refused first ([`over_rate_limit`]).
pub async fn handle(
    api: &dyn A2aApi,
    config: &HttpConfig,
    req: Request<Bytes>,
    caller: Caller,
) -> Response<Body> {
    if let Some(refused) = over_rate_limit(config, req.uri().path(), &caller) {
        return refused;
    }
    handle_admitted(api, config, req, caller).await
}

/// The refusal of a request from `caller` to `path` when it is over the configured rate limit
/// (HTTP 429, `Retry-After`, an error body in the binding of `path`); `None`, having taken a
/// token, when it may go on. A host that reads the body itself checks this before reading it
/// and then calls [`handle_admitted`], so that a refused request costs it nothing more.
pub fn over_rate_limit(config: &HttpConfig, path: &str, caller: &Caller) -> Option<Response<Body>> {
    let retry_after_secs = config.rate_limit.as_ref()?.check(caller).err()?;
    tracing::debug!(path, retry_after_secs, "rate limited");
    let err = ProtocolError::rate_limited(retry_after_secs);
    // The request's id is unknown: its body is not read.
    Some(
        if path != AGENT_CARD_PATH
            && is_jsonrpc_path(config, path)
            && matches!(config.serves, Serves::Everything | Serves::JsonRpc)
        {
            reply::rpc_error(JsonRpcId::Null, &err)
        } else {
            reply::rest_error(&err)
        },
    )
}

/// [`handle`] without the rate limit, for a host that checked [`over_rate_limit`] already.
pub async fn handle_admitted(
    api: &dyn A2aApi,
    config: &HttpConfig,
    req: Request<Bytes>,
    caller: Caller,
) -> Response<Body> {
    let path = req.uri().path();
    let serves = config.serves;
    if path == AGENT_CARD_PATH {
        if !matches!(serves, Serves::Everything | Serves::AgentCard) {
            return reply::rest_error(&not_served(path));
        }
        card::serve(api.agent_card(), config, &req)
    } else if is_jsonrpc_path(config, path)
        && matches!(serves, Serves::Everything | Serves::JsonRpc)
    {
        jsonrpc::handle(api, config, req, &caller).await
    } else if matches!(
        serves,
        Serves::Everything | Serves::Rest(_) | Serves::TaskResource
    ) {
        rest::handle(api, config, req, &caller).await
    } else {
        reply::rest_error(&not_served(path))
    }
}

/// A transport-level refusal (HTTP 401, `WWW-Authenticate: Bearer`) for a request without the
/// verified principal a deployment behind an authorizer expects. Rendered like any REST
/// error, whichever binding the request used.
pub fn unauthenticated(message: impl Into<String>) -> Response<Body> {
    let mut response = reply::rest_error(&ProtocolError::new(ErrorKind::Unauthenticated, message));
    response.headers_mut().insert(
        http::header::WWW_AUTHENTICATE,
        http::HeaderValue::from_static("Bearer"),
    );
    response
}

/// A request that reached a deployment unit which does not answer it (a routing mistake).
fn not_served(path: &str) -> ProtocolError {
    ProtocolError::new(
        ErrorKind::MethodNotFound,
        format!("no A2A route for {path} here"),
    )
}
