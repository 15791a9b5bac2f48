//! `GET /metrics` with `--metrics`: every series in the Prometheus text format, answered
//! before the rate limit like the probes (a scraper is not a client to limit).

use a2a_http::Body;
use http::{Method, Request, Response, StatusCode};
use telemetry::metrics::{self, Mode};

/// Installs the registry the endpoint reads (at start-up, with `--metrics`).
pub(crate) fn install() {
    metrics::install(Mode::Prometheus);
}

/// Whether `request` is a scrape.
pub(crate) fn is_scrape<B>(request: &Request<B>) -> bool {
    (request.method() == Method::GET || request.method() == Method::HEAD)
        && request.uri().path() == "/metrics"
}

/// The exposition (empty when no registry is installed).
pub(crate) fn answer() -> Response<Body> {
    let samples = metrics::installed()
        .map(|registry| registry.snapshot())
        .unwrap_or_default();
    let text = metrics::prometheus::render(&samples);
    crate::health::uncached(
        StatusCode::OK,
        metrics::prometheus::CONTENT_TYPE,
        text.into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_and_head_of_the_path_are_scrapes() {
        let req = |method: Method, path: &str| {
            Request::builder()
                .method(method)
                .uri(path)
                .body(())
                .expect("request")
        };
        assert!(is_scrape(&req(Method::GET, "/metrics")));
        assert!(is_scrape(&req(Method::HEAD, "/metrics?x=1")));
        assert!(!is_scrape(&req(Method::POST, "/metrics")));
        assert!(!is_scrape(&req(Method::GET, "/metrics/x")));
    }
}
