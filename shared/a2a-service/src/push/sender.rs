//! One push notification to one webhook, with retries: the piece shared by the local
//! dispatcher and the deployed notifier.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::Duration;
use telemetry::metrics::Delivery;

use a2a::{StreamResponse, TaskPushNotificationConfig};
use reqwest::StatusCode;
use reqwest::header::{
    AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER,
};

use super::policy::{RefusedAddress, WebhookPolicy, check_static, resolver};

/// The media type of every notification body (A2A §4.3).
pub const A2A_CONTENT_TYPE: &str = "application/a2a+json";

/// The header carrying the config's `token` (the a2a-sdk convention, which receivers check).
pub const NOTIFICATION_TOKEN_HEADER: &str = "x-a2a-notification-token";

/// How the sender behaves. The defaults suit production.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushOptions {
    pub policy: WebhookPolicy,
    /// The whole request, connection included (A2A recommends 10–30 s).
    pub request_timeout: Duration,
    /// Attempts per notification, the first included (at least 1).
    pub attempts: u32,
    /// The delay before the first retry; it doubles each retry, with jitter.
    pub base_delay: Duration,
    /// The longest delay between two attempts, `Retry-After` included.
    pub max_delay: Duration,
}

impl Default for PushOptions {
    fn default() -> Self {
        Self {
            policy: WebhookPolicy::default(),
            request_timeout: Duration::from_secs(10),
            attempts: 5,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
        }
    }
}

/// The HTTP client could not be built (a TLS backend failure).
#[derive(Debug, thiserror::Error)]
#[error("the push notification client could not be built: {0}")]
pub struct PushSetupError(String);

/// Why one attempt failed in a way worth retrying.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttemptFailure {
    /// 408, 429 or 5xx.
    #[error("HTTP {0}")]
    Status(u16),
    #[error("timed out")]
    Timeout,
    /// The connection could not be made or broke (DNS failure included).
    #[error("connection failed: {0}")]
    Connection(String),
}

/// Why a notification was not delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// The URL is refused by the webhook policy — at delivery time this is a host that now
    /// resolves to a private address (DNS rebinding), or a config stored under a laxer policy.
    /// Not retried.
    #[error("webhook refused: {0}")]
    Refused(String),
    /// The config cannot make a valid request (an authentication scheme or token that is not
    /// a valid header value) or the event cannot be encoded. Not retried.
    #[error("invalid push config: {0}")]
    InvalidConfig(String),
    /// The webhook answered a 4xx other than 408 and 429: it will not take this notification.
    /// Not retried.
    #[error("the webhook rejected the notification with HTTP {status}")]
    Rejected { status: u16 },
    /// Every attempt failed with a transient error; the last one is given.
    #[error("gave up after {attempts} attempts, the last one: {last}")]
    Exhausted { attempts: u32, last: AttemptFailure },
}

impl DeliveryError {
    /// Whether trying again later could succeed (only [`DeliveryError::Exhausted`]).
    pub fn is_transient(&self) -> bool {
        matches!(self, DeliveryError::Exhausted { .. })
    }
}

/// Sends push notifications. Holds one HTTP client (connection pool) for its lifetime: build it
/// once and share it (`Arc`).
#[derive(Debug, Clone)]
pub struct PushSender {
    client: reqwest::Client,
    options: PushOptions,
    jitter: RandomState,
}

impl PushSender {
    pub fn new(options: PushOptions) -> Result<Self, PushSetupError> {
        let client = reqwest::Client::builder()
            .timeout(options.request_timeout)
            .connect_timeout(options.request_timeout)
            .redirect(reqwest::redirect::Policy::none())
            // A proxy would resolve the host itself, around the address check.
            .no_proxy()
            // Connections go only to addresses the policy accepts, checked when resolved.
            .dns_resolver(resolver(options.policy))
            .build()
            .map_err(|e| PushSetupError(error_chain(&e)))?;
        Ok(Self {
            client,
            options,
            jitter: RandomState::new(),
        })
    }

    pub fn options(&self) -> &PushOptions {
        &self.options
    }

    /// POSTs `event` (the REST `StreamResponse` shape, `{"statusUpdate":{…}}` etc.) to the
    /// config's URL, with `Content-Type: application/a2a+json`, `Authorization: <scheme>
    /// <credentials>` when the config has `authentication`, and `X-A2A-Notification-Token`
    /// when it has a `token`. Any 2xx is success. Connection errors, timeouts, 408, 429 and
    /// 5xx are retried with exponential backoff and jitter (`Retry-After` honoured up to
    /// `max_delay`); other 4xx end at once. Each is counted (sent, retried, failed).
    pub async fn deliver(
        &self,
        config: &TaskPushNotificationConfig,
        event: &StreamResponse,
    ) -> Result<(), DeliveryError> {
        let delivered = self.deliver_with_retries(config, event).await;
        telemetry::metrics::push_delivery(match delivered {
            Ok(()) => Delivery::Sent,
            Err(_) => Delivery::Failed,
        });
        delivered
    }

    async fn deliver_with_retries(
        &self,
        config: &TaskPushNotificationConfig,
        event: &StreamResponse,
    ) -> Result<(), DeliveryError> {
        // Literal IPs are checked here, host names when resolved (see `PolicyResolver`).
        let (url, _) =
            check_static(&config.url, &self.options.policy).map_err(DeliveryError::Refused)?;
        let mut headers = headers(config)?;
        // The delivery's span, in the trace of the work that appended the event; the
        // receiver gets its context (`traceparent`) to continue it.
        let span = tracing::debug_span!("push.deliver", task.id = %config.task_id);
        telemetry::traces::adopt(&span);
        if let Some(context) = span.in_scope(telemetry::traces::outgoing) {
            trace_headers(&mut headers, &context);
        }
        let body =
            serde_json::to_vec(event).map_err(|e| DeliveryError::InvalidConfig(e.to_string()))?;
        let attempts = self.options.attempts.max(1);
        let mut attempt = 1;
        loop {
            let sent = self
                .client
                .post(url.clone())
                .headers(headers.clone())
                .body(body.clone())
                .send()
                .await;
            let (failure, retry_after) = match sent {
                Ok(response) => {
                    let status = response.status();
                    if status.is_success() {
                        return Ok(());
                    }
                    if !retryable(status) {
                        return Err(DeliveryError::Rejected {
                            status: status.as_u16(),
                        });
                    }
                    let retry_after = response
                        .headers()
                        .get(RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(parse_retry_after);
                    (AttemptFailure::Status(status.as_u16()), retry_after)
                }
                Err(err) => {
                    if let Some(refused) = refused_in(&err) {
                        return Err(DeliveryError::Refused(refused));
                    }
                    if err.is_timeout() {
                        (AttemptFailure::Timeout, None)
                    } else if err.is_builder() {
                        return Err(DeliveryError::InvalidConfig(error_chain(&err)));
                    } else {
                        (AttemptFailure::Connection(error_chain(&err)), None)
                    }
                }
            };
            if attempt >= attempts {
                return Err(DeliveryError::Exhausted {
                    attempts,
                    last: failure,
                });
            }
            let delay = self.delay(attempt, retry_after);
            tracing::debug!(
                url = %url, attempt, failure = %failure, delay_ms = delay.as_millis() as u64,
                "push notification attempt failed; retrying"
            );
            telemetry::metrics::push_delivery(Delivery::Retried);
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// The wait after failed attempt `attempt` (1-based): `base · 2^(attempt-1)` capped at
    /// `max_delay`, of which the upper half is random ("equal jitter"); a `Retry-After`
    /// longer than that is waited instead, up to `max_delay`.
    fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let max = self.options.max_delay;
        let exp = self
            .options
            .base_delay
            .saturating_mul(
                1u32.checked_shl(attempt.saturating_sub(1))
                    .unwrap_or(u32::MAX),
            )
            .min(max);
        let half = exp / 2;
        let random = self
            .jitter
            .hash_one((attempt, std::time::SystemTime::now()));
        let jitter = half.mul_f64((random % 10_000) as f64 / 10_000.0);
        let backoff = half + jitter;
        match retry_after {
            Some(wait) => wait.max(backoff).min(max),
            None => backoff,
        }
    }
}

fn retryable(status: StatusCode) -> bool {
    status == StatusCode::REQUEST_TIMEOUT
        || status == StatusCode::TOO_MANY_REQUESTS
        || status.is_server_error()
}

fn headers(config: &TaskPushNotificationConfig) -> Result<HeaderMap, DeliveryError> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(A2A_CONTENT_TYPE));
    if let Some(auth) = &config.authentication {
        let value = match auth.credentials.as_deref() {
            Some(credentials) if !credentials.is_empty() => {
                format!("{} {credentials}", auth.scheme)
            }
            _ => auth.scheme.clone(),
        };
        let mut value = HeaderValue::from_str(&value).map_err(|_| {
            DeliveryError::InvalidConfig(
                "the authentication is not a valid header value".to_owned(),
            )
        })?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    if let Some(token) = &config.token {
        let mut value = HeaderValue::from_str(token).map_err(|_| {
            DeliveryError::InvalidConfig("the token is not a valid header value".to_owned())
        })?;
        value.set_sensitive(true);
        headers.insert(HeaderName::from_static(NOTIFICATION_TOKEN_HEADER), value);
    }
    Ok(headers)
}

/// The W3C trace context headers of `context` (a value that is not a valid header is left
/// out: the delivery goes without it).
fn trace_headers(headers: &mut HeaderMap, context: &telemetry::traces::TraceContext) {
    if let Ok(parent) = HeaderValue::from_str(&context.traceparent()) {
        headers.insert(
            HeaderName::from_static(telemetry::traces::TRACEPARENT),
            parent,
        );
    }
    if let Some(Ok(state)) = context.state.as_deref().map(HeaderValue::from_str) {
        headers.insert(
            HeaderName::from_static(telemetry::traces::TRACESTATE),
            state,
        );
    }
}

/// `Retry-After`: delay-seconds or an HTTP date.
fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = at.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

/// The policy refusal behind a request error, if that is what it is.
fn refused_in(err: &reqwest::Error) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(refused) = e.downcast_ref::<RefusedAddress>() {
            return Some(refused.0.clone());
        }
        source = e.source();
    }
    None
}

/// An error and its causes on one line (reqwest's own message hides the cause).
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn retry_after_seconds_and_dates() {
        assert_eq!(parse_retry_after(" 3 "), Some(Duration::from_secs(3)));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let sender = PushSender::new(PushOptions::default()).unwrap();
        for attempt in 1..=10 {
            let exp = Duration::from_millis(200)
                .saturating_mul(1 << (attempt - 1))
                .min(Duration::from_secs(5));
            let d = sender.delay(attempt, None);
            assert!(
                d >= exp / 2 && d <= exp,
                "attempt {attempt}: {d:?} vs {exp:?}"
            );
        }
        assert_eq!(
            sender.delay(1, Some(Duration::from_secs(60))),
            Duration::from_secs(5)
        );
        assert!(sender.delay(1, Some(Duration::from_secs(2))) == Duration::from_secs(2));
    }
}
