//! The HTTP functions: one [`App`] per function, built once at init, answering each
//! invocation with the shared handlers of `a2a-http` (the same code the local server runs).
//!
//! Buffered functions run under `lambda_http::run`; the streaming ones (SendStreamingMessage,
//! SubscribeToTask, and the JSON-RPC endpoint, which carries both) under
//! `run_with_streaming_response`, where *every* answer is written as a stream, the one-buffer
//! JSON answers included (a buffered body under the streaming runtime is not sent, see
//! aws-lambda-rust-runtime#967). A stream ends a margin before the invocation's deadline,
//! with a comment saying so, rather than being cut off: the client subscribes again and the
//! event log replays from the task.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use a2a_http::{Body, Caller, HttpConfig, RateLimiter, Serves};
use a2a_service::Service;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::{self, BoxStream};
use http::Response;
use lambda_http::{RequestExt, service_fn};
use task_store::Store;

use crate::config::{AuthMode, FunctionConfig};
use crate::emf::Emf;
use crate::{identity, service};

/// The SSE comment a stream ends with when the invocation's time is nearly up.
pub const DEADLINE_COMMENT: &str =
    ": the stream ends before the function's time limit; subscribe again to continue\n\n";

/// One HTTP function: the service over its store, what it serves, how it knows callers.
pub struct App {
    service: Service,
    http: HttpConfig,
    auth: AuthMode,
    stream_end_margin: Duration,
}

impl App {
    /// An app over `store` with the offline models only (tests).
    pub fn new(store: Arc<dyn Store>, config: &FunctionConfig, serves: Serves) -> Self {
        let agent = assembly::offline_agent(&config.settings);
        Self::with_agent(store, config, serves, agent)
    }

    /// An app over `store` (the DynamoDB table when deployed) and `agent`.
    pub fn with_agent(
        store: Arc<dyn Store>,
        config: &FunctionConfig,
        serves: Serves,
        agent: Arc<dyn a2a_service::Agent>,
    ) -> Self {
        Self {
            service: service::service(store, config, agent),
            http: HttpConfig {
                serves,
                // Per instance: each execution environment keeps its own buckets.
                rate_limit: config.settings.rate_limit.map(RateLimiter::new),
                ..HttpConfig::default()
            },
            auth: config.auth,
            stream_end_margin: config.stream_end_margin,
        }
    }

    /// Hands `returnImmediately` runs to `dispatcher` (the runner function) instead of
    /// running them before the invocation ends.
    pub fn with_dispatcher(mut self, dispatcher: Arc<dyn a2a_service::RunDispatcher>) -> Self {
        self.service = self.service.with_dispatcher(dispatcher);
        self
    }

    pub fn service(&self) -> &Service {
        &self.service
    }

    /// The answer to one invocation. Never fails: every problem is an A2A error response.
    pub async fn respond(&self, request: lambda_http::Request) -> Response<Body> {
        let address = source_ip(request.request_context_ref());
        let caller = match self.auth {
            AuthMode::None => Caller::anonymous(),
            AuthMode::Authorizer => {
                match identity::verified_principal(request.request_context_ref()) {
                    Some(principal) => Caller::verified(principal),
                    None => {
                        tracing::warn!("no verified principal in the request context");
                        return a2a_http::unauthenticated(
                            "this endpoint needs an authenticated caller",
                        );
                    }
                }
            }
        };
        let caller = caller.with_address(address);
        let end_at = request
            .lambda_context_ref()
            .and_then(|ctx| stream_end(ctx.deadline, self.stream_end_margin));
        // The invocation's X-Ray trace, when sampled, is the request span's parent (else the
        // request's own `traceparent`, read by the bindings).
        let trace = crate::mains::invocation_trace(
            request
                .lambda_context_ref()
                .and_then(|ctx| ctx.xray_trace_id.as_deref()),
        );
        let stage = stage_of(request.request_context_ref());
        let (mut parts, body) = request.into_parts();
        if let Some(uri) = stage.and_then(|stage| without_stage(&parts.uri, &stage)) {
            parts.uri = uri;
        }
        let body = match body {
            lambda_http::Body::Empty => Bytes::new(),
            lambda_http::Body::Text(text) => Bytes::from(text),
            lambda_http::Body::Binary(bytes) => Bytes::from(bytes),
            _ => Bytes::new(),
        };
        let request = http::Request::from_parts(parts, body);
        let response = telemetry::traces::scope(
            trace,
            a2a_http::handle(&self.service, &self.http, request, caller),
        )
        .await;
        response.map(|body| match body {
            Body::Stream(events) => Body::Stream(bounded(events, end_at)),
            full => full,
        })
    }

    /// The buffered answer, after every run this invocation started has finished (the
    /// environment is frozen once the invocation returns).
    pub async fn respond_buffered(
        &self,
        request: lambda_http::Request,
    ) -> Response<lambda_http::Body> {
        let response = self.respond(request).await;
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await;
        self.service.runner().settle().await;
        let body = match String::from_utf8(bytes.to_vec()) {
            Ok(text) if text.is_empty() => lambda_http::Body::Empty,
            Ok(text) => lambda_http::Body::Text(text),
            Err(raw) => lambda_http::Body::Binary(raw.into_bytes()),
        };
        Response::from_parts(parts, body)
    }

    /// The streamed answer: always a stream, which waits for the runs this invocation started
    /// before it ends.
    pub fn respond_streaming(
        self: &Arc<Self>,
        request: lambda_http::Request,
    ) -> impl Future<Output = Response<Body>> + Send + use<> {
        let app = Arc::clone(self);
        async move {
            let response = app.respond(request).await;
            let runner = app.service.runner().clone();
            response.map(move |body| {
                let settle = stream::once(async move {
                    runner.settle().await;
                    Bytes::new()
                })
                .filter(|chunk| std::future::ready(!chunk.is_empty()));
                Body::Stream(body.into_stream().chain(settle).boxed())
            })
        }
    }
}

/// The client address API Gateway saw (`identity.sourceIp` on REST APIs, `http.sourceIp` on
/// HTTP APIs and Function URLs): the TCP peer of the front door, not a header the client sets.
fn source_ip(context: Option<&lambda_http::request::RequestContext>) -> Option<IpAddr> {
    use lambda_http::request::RequestContext;
    let ip = match context? {
        RequestContext::ApiGatewayV1(ctx) => ctx.identity.source_ip.as_deref(),
        RequestContext::ApiGatewayV2(ctx) => ctx.http.source_ip.as_deref(),
        _ => None,
    }?;
    ip.parse().ok()
}

/// The API Gateway stage of the request (`None` for `$default`, Function URLs included).
fn stage_of(context: Option<&lambda_http::request::RequestContext>) -> Option<String> {
    use lambda_http::request::RequestContext;
    let stage = match context? {
        RequestContext::ApiGatewayV1(ctx) => ctx.stage.clone(),
        RequestContext::ApiGatewayV2(ctx) => ctx.stage.clone(),
        _ => None,
    }?;
    (stage != "$default" && !stage.is_empty()).then_some(stage)
}

/// The URI without the `/<stage>` prefix lambda_http puts in front of API Gateway paths: the
/// A2A routes are the same whatever the stage is called.
fn without_stage(uri: &http::Uri, stage: &str) -> Option<http::Uri> {
    let path = uri.path();
    let rest = path.strip_prefix('/')?.strip_prefix(stage)?;
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    let rest = if rest.is_empty() { "/" } else { rest };
    let path_and_query = match uri.query() {
        Some(query) => format!("{rest}?{query}"),
        None => rest.to_owned(),
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = path_and_query.parse().ok();
    http::Uri::from_parts(parts).ok()
}

/// When a stream of an invocation whose deadline is `deadline_ms` (epoch milliseconds) must
/// end: `margin` before it, but never more than a tenth of the time left (a function with a
/// short timeout still streams for most of it). `None` when the deadline is unknown: 0, or
/// already past as the invocation starts, which no real invocation has (`cargo lambda watch`
/// sends its timeout, 600000, instead of an instant).
fn stream_end(deadline_ms: u64, margin: Duration) -> Option<Instant> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()?
        .as_millis();
    let left_ms = u128::from(deadline_ms)
        .checked_sub(now_ms)
        .filter(|left| *left > 0)?;
    let left = Duration::from_millis(u64::try_from(left_ms).ok()?);
    Some(Instant::now() + left.saturating_sub(margin.min(left / 10)))
}

/// The stream, ended with [`DEADLINE_COMMENT`] at `end_at` if it has not ended by then.
fn bounded(
    events: BoxStream<'static, Bytes>,
    end_at: Option<Instant>,
) -> BoxStream<'static, Bytes> {
    let Some(end_at) = end_at else {
        return events;
    };
    let deadline = Box::pin(tokio::time::sleep_until(end_at.into()));
    stream::unfold(Some((events, deadline)), |state| async move {
        let (mut events, mut deadline) = state?;
        tokio::select! {
            // What is ready goes out first; the deadline ends only a stream that waits.
            biased;
            next = events.next() => next.map(|chunk| (chunk, Some((events, deadline)))),
            () = &mut deadline => Some((Bytes::from_static(DEADLINE_COMMENT.as_bytes()), None)),
        }
    })
    .boxed()
}

/// Serves buffered invocations until the runtime stops, each one's metrics printed when it
/// ends.
pub async fn run_buffered(app: App, emf: Arc<Emf>) -> Result<(), lambda_http::Error> {
    let app = Arc::new(app);
    lambda_http::run(service_fn(move |request| {
        let app = Arc::clone(&app);
        let emf = Arc::clone(&emf);
        async move {
            let response = emf.around(app.respond_buffered(request)).await;
            Ok::<_, lambda_http::Error>(response)
        }
    }))
    .await
}

/// Serves streamed invocations until the runtime stops, each one's metrics printed when its
/// stream ends.
pub async fn run_streaming(app: App, emf: Arc<Emf>) -> Result<(), lambda_http::Error> {
    let app = Arc::new(app);
    lambda_http::run_with_streaming_response(service_fn(move |request| {
        let answer = app.respond_streaming(request);
        let emf = Arc::clone(&emf);
        async move { Ok::<_, lambda_http::Error>(answer.await.map(|body| emf.after_stream(body))) }
    }))
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch_ms() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or_default()
    }

    #[test]
    fn a_stream_ends_a_margin_before_the_deadline_at_most_a_tenth_of_the_time_left() {
        let margin = Duration::from_secs(3);
        let end = stream_end(epoch_ms() + 60_000, margin).expect("a deadline");
        let left = end - Instant::now();
        assert!(
            left > Duration::from_millis(56_500) && left <= Duration::from_secs(57),
            "{left:?}"
        );
        // 2 s left: end 0.2 s before, not 3 s (which would end it at once).
        let end = stream_end(epoch_ms() + 2_000, margin).expect("a deadline");
        let left = end - Instant::now();
        assert!(
            left > Duration::from_millis(1_600) && left <= Duration::from_millis(1_800),
            "{left:?}"
        );
    }

    #[test]
    fn an_unknown_or_past_deadline_bounds_nothing() {
        let margin = Duration::from_secs(3);
        assert_eq!(stream_end(0, margin), None);
        assert_eq!(
            stream_end(600_000, margin),
            None,
            "cargo lambda watch's timeout"
        );
        assert_eq!(stream_end(epoch_ms() - 1_000, margin), None);
    }
}
