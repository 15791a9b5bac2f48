//! The hosts' subscriber: their log layer, and the OpenTelemetry layer when an exporter is
//! configured (OTLP locally, X-Ray in the functions).

use std::net::SocketAddr;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{EnvFilter, filter_fn};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;

use super::xray::{XrayExporter, XrayIdGenerator};

/// The crates whose spans are exported (a dependency's spans, the AWS SDK's or hyper's, are
/// not).
const TRACED_CRATES: [&str; 8] = [
    "a2a_http",
    "a2a_service",
    "store_dynamodb",
    "store_embedded",
    "models",
    "functions",
    "local_server",
    "telemetry",
];

/// How long one OTLP export may take before it is given up.
#[cfg(feature = "otlp")]
const OTLP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Where the spans go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Export {
    /// Nowhere: no OpenTelemetry layer, spans stay disabled.
    Off,
    /// OTLP over HTTP/protobuf to this collector (`http://host:4318`; `/v1/traces` is added
    /// unless the URL already names it), in batches from a background thread.
    Otlp(String),
    /// X-Ray subsegments over UDP to the daemon at this address, each as its span ends (a
    /// Lambda function may be frozen right after its answer: nothing can wait for a batch).
    Xray(SocketAddr),
}

impl Export {
    /// The X-Ray daemon Lambda runs with active tracing (`AWS_XRAY_DAEMON_ADDRESS`:
    /// `host:port`, or `udp:host:port tcp:host:port`), else `Off`.
    pub fn xray_from_env() -> Self {
        std::env::var("AWS_XRAY_DAEMON_ADDRESS")
            .ok()
            .as_deref()
            .and_then(xray_daemon)
            .map_or(Export::Off, Export::Xray)
    }
}

fn xray_daemon(value: &str) -> Option<SocketAddr> {
    value
        .split_whitespace()
        .filter(|part| !part.starts_with("tcp:"))
        .find_map(|part| part.trim_start_matches("udp:").parse().ok())
}

/// The exporter could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TracingError {
    #[error("the OTLP exporter: {0}")]
    Otlp(String),
    #[error("the X-Ray exporter: {0}")]
    Xray(std::io::Error),
}

/// The installed tracer: flush it at shutdown.
#[derive(Debug, Default)]
pub struct Tracing {
    provider: Option<SdkTracerProvider>,
}

impl Tracing {
    /// Whether spans are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Exports what is left and stops the exporter (blocking: call it off the runtime's
    /// threads, or at the very end).
    pub fn shutdown(&self) {
        if let Some(provider) = &self.provider
            && let Err(error) = provider.shutdown()
        {
            tracing::warn!(%error, "the trace exporter did not shut down cleanly");
        }
    }
}

/// The tracer provider of `export` (`None` for `Off`).
fn provider(export: &Export, service: &str) -> Result<Option<SdkTracerProvider>, TracingError> {
    let resource = Resource::builder()
        .with_service_name(service.to_owned())
        .build();
    // A trace the caller did not sample (`Sampled=0`, flags 00) is not recorded here either.
    let sampler = Sampler::ParentBased(Box::new(Sampler::AlwaysOn));
    let builder = SdkTracerProvider::builder()
        .with_resource(resource)
        .with_sampler(sampler);
    Ok(Some(match export {
        Export::Off => return Ok(None),
        Export::Otlp(endpoint) => builder.with_batch_exporter(otlp(endpoint)?).build(),
        Export::Xray(daemon) => {
            let exporter = XrayExporter::new(*daemon).map_err(TracingError::Xray)?;
            builder
                .with_id_generator(XrayIdGenerator)
                .with_simple_exporter(exporter)
                .build()
        }
    }))
}

/// The OTLP/HTTP (protobuf) exporter to the collector at `endpoint`.
#[cfg(feature = "otlp")]
fn otlp(endpoint: &str) -> Result<opentelemetry_otlp::SpanExporter, TracingError> {
    use opentelemetry_otlp::{Protocol, WithExportConfig as _};
    let endpoint = if endpoint.trim_end_matches('/').ends_with("/v1/traces") {
        endpoint.to_owned()
    } else {
        format!("{}/v1/traces", endpoint.trim_end_matches('/'))
    };
    opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(endpoint)
        .with_timeout(OTLP_TIMEOUT)
        .build()
        .map_err(|e| TracingError::Otlp(e.to_string()))
}

/// Without the `otlp` feature (the functions) there is no OTLP exporter.
#[cfg(not(feature = "otlp"))]
fn otlp(_endpoint: &str) -> Result<XrayExporter, TracingError> {
    Err(TracingError::Otlp("not built into this binary".to_owned()))
}

/// The hosts' log layer, made for whichever subscriber it ends up in.
pub trait Logs {
    fn layer<S>(&self) -> Box<dyn Layer<S> + Send + Sync>
    where
        S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync;
}

/// Installs the process's subscriber: the `logs` layer filtered by `filter`, and the
/// OpenTelemetry layer (our crates' spans only, no events) when `export` names an exporter.
/// With `Off` it is the logs layer behind a global filter, as before traces existed.
pub fn install(
    logs: &impl Logs,
    filter: EnvFilter,
    export: &Export,
    service: &str,
) -> Result<Tracing, TracingError> {
    let provider = provider(export, service)?;
    match &provider {
        None => tracing_subscriber::registry()
            .with(filter)
            .with(logs.layer())
            .init(),
        Some(provider) => tracing_subscriber::registry()
            .with(logs.layer().with_filter(filter))
            .with(spans_layer(provider))
            .init(),
    }
    Ok(Tracing { provider })
}

/// The OpenTelemetry layer over `provider`: our crates' spans, no events.
fn spans_layer<S>(provider: &SdkTracerProvider) -> impl Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let ours = filter_fn(|meta| {
        meta.is_span() && TRACED_CRATES.iter().any(|c| meta.target().starts_with(c))
    });
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("tiny-harness"))
        .with_filter(ours)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use tracing::Instrument as _;

    use super::*;
    use crate::traces::{TraceContext, adopt, outgoing, scope};

    /// A request's spans reach a real OTLP/HTTP collector, in the caller's trace: the
    /// request span's parent is the incoming `traceparent`, the inner span's the request's.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn spans_are_exported_over_otlp_in_the_incoming_trace() {
        let collector = test_support::otlp::Collector::start().await;
        let provider = provider(&Export::Otlp(collector.endpoint.clone()), "test-service")
            .unwrap()
            .unwrap();
        let subscriber = tracing_subscriber::registry().with(spans_layer(&provider));
        let incoming = TraceContext::from_w3c(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            None,
        )
        .unwrap();
        let sent = {
            let _default = tracing::subscriber::set_default(subscriber);
            scope(Some(incoming.clone()), async {
                let request = tracing::debug_span!("a2a.request", a2a.method = "SendMessage");
                adopt(&request);
                async {
                    let call = tracing::debug_span!("store.call", store.operation = "get");
                    let _in_call = call.enter();
                    outgoing().unwrap()
                }
                .instrument(request)
                .await
            })
            .await
        };
        tokio::task::spawn_blocking(move || provider.force_flush())
            .await
            .unwrap()
            .unwrap();

        let spans = collector
            .until("both spans", |spans| spans.len() >= 2)
            .await;
        let request = spans.iter().find(|s| s.name == "a2a.request").unwrap();
        let call = spans.iter().find(|s| s.name == "store.call").unwrap();
        assert_eq!(request.trace_id, incoming.trace_id_hex());
        assert_eq!(request.parent_span_id, "00f067aa0ba902b7");
        assert_eq!(request.attribute("a2a.method"), Some("SendMessage"));
        assert_eq!(request.service, "test-service");
        assert_eq!(call.trace_id, incoming.trace_id_hex());
        assert_eq!(call.parent_span_id, request.span_id);
        assert_eq!(call.attribute("store.operation"), Some("get"));
        // What an outgoing call sends is the current span's context.
        assert_eq!(sent.trace_id, incoming.trace_id);
        assert_eq!(
            crate::traces::context::hex_string(&sent.span_id),
            call.span_id
        );
    }

    #[test]
    fn the_daemon_address_takes_both_forms() {
        assert_eq!(
            xray_daemon("169.254.79.129:2000"),
            Some("169.254.79.129:2000".parse().unwrap())
        );
        assert_eq!(
            xray_daemon("tcp:127.0.0.1:2000 udp:127.0.0.2:2001"),
            Some("127.0.0.2:2001".parse().unwrap())
        );
        assert_eq!(xray_daemon("nonsense"), None);
    }
}
