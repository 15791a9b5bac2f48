//! The server's own probes, answered before the rate limit and the bindings: `GET /healthz`
//! (liveness: the process serves requests) and `GET /readyz` (readiness: the store answers a
//! read within two seconds).

use std::time::Duration;

use a2a_http::Body;
use a2a_service::Service;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};

/// How long the readiness probe waits for the store.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// The probe `request` asks for, if it is one.
pub(crate) fn probe<B>(request: &Request<B>) -> Option<Probe> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return None;
    }
    match request.uri().path() {
        "/healthz" => Some(Probe::Live),
        "/readyz" => Some(Probe::Ready),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    Live,
    Ready,
}

/// The probe's answer: 200 `{"status":"ok"|"ready"}`, or 503 `{"status":"unavailable"}`
/// when the store does not answer (the reason is logged, never sent).
pub(crate) async fn answer(service: &Service, probe: Probe) -> Response<Body> {
    match probe {
        Probe::Live => json(StatusCode::OK, r#"{"status":"ok"}"#),
        Probe::Ready => match tokio::time::timeout(READY_TIMEOUT, service.ready()).await {
            Ok(Ok(())) => json(StatusCode::OK, r#"{"status":"ready"}"#),
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "readiness: the store failed");
                json(
                    StatusCode::SERVICE_UNAVAILABLE,
                    r#"{"status":"unavailable"}"#,
                )
            }
            Err(_) => {
                tracing::warn!("readiness: the store did not answer in time");
                json(
                    StatusCode::SERVICE_UNAVAILABLE,
                    r#"{"status":"unavailable"}"#,
                )
            }
        },
    }
}

fn json(status: StatusCode, body: &'static str) -> Response<Body> {
    uncached(
        status,
        "application/json",
        Bytes::from_static(body.as_bytes()),
    )
}

/// An answer no cache keeps (`Cache-Control: no-store`): the probes' and the metrics'.
pub(crate) fn uncached(
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
) -> Response<Body> {
    let mut response = Response::new(Body::Full(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    headers.insert(
        header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_and_head_of_the_two_paths_are_probes() {
        let req = |method: Method, path: &str| {
            Request::builder()
                .method(method)
                .uri(path)
                .body(())
                .expect("request")
        };
        assert_eq!(probe(&req(Method::GET, "/healthz")), Some(Probe::Live));
        assert_eq!(probe(&req(Method::HEAD, "/readyz")), Some(Probe::Ready));
        assert_eq!(probe(&req(Method::POST, "/healthz")), None);
        assert_eq!(probe(&req(Method::GET, "/tasks")), None);
        assert_eq!(probe(&req(Method::GET, "/healthz/x")), None);
    }
}
