//! Traces: spans exported through OpenTelemetry, and W3C trace context in and out.
