//! Traces: the service's `tracing` spans (request, turn, model call, tool call, store call,
//! push delivery) exported through OpenTelemetry, and W3C trace context in and out.
//!
//! The spans are at `debug`, so the default log filter (`info`) leaves them disabled: with no
//! exporter configured there is no OpenTelemetry layer and a span costs one cached callsite
//! check. With an exporter, the OpenTelemetry layer has its own filter (our crates' spans,
//! no events) and the logs keep theirs, so the log lines do not change.

mod context;
mod setup;
mod xray;

pub use context::{
    TRACEPARENT, TRACESTATE, TraceContext, adopt, carry, current, outgoing, scope,
    trace_id_from_xray, trace_id_to_xray,
};
pub use setup::{Export, Logs, Tracing, TracingError, install};
pub use xray::{XrayExporter, XrayIdGenerator, subsegment};
