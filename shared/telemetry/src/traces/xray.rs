//! The functions' exporter: each finished span becomes an X-Ray subsegment of the invocation's
//! trace, sent as one UDP datagram to the X-Ray daemon Lambda runs with active tracing
//! (`AWS_XRAY_DAEMON_ADDRESS`). A send never waits: a datagram the socket cannot take now is
//! dropped, as the daemon's own SDKs do.

use std::net::{SocketAddr, UdpSocket};
use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanId, Status, TraceId};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{IdGenerator, SpanData, SpanExporter};
use serde_json::{Map, json};

use super::context::{hex_string, trace_id_to_xray};

/// What precedes every document the daemon takes.
const HEADER: &str = "{\"format\": \"json\", \"version\": 1}\n";

/// Sends finished spans to the X-Ray daemon.
#[derive(Debug)]
pub struct XrayExporter {
    socket: UdpSocket,
    daemon: SocketAddr,
}

impl XrayExporter {
    /// An exporter to the daemon at `daemon` (`host:port`, as in `AWS_XRAY_DAEMON_ADDRESS`).
    pub fn new(daemon: SocketAddr) -> std::io::Result<Self> {
        let bind: SocketAddr = if daemon.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            ([0u16; 8], 0).into()
        };
        let socket = UdpSocket::bind(bind)?;
        socket.set_nonblocking(true)?;
        Ok(Self { socket, daemon })
    }

    fn send(&self, span: &SpanData) {
        let datagram = format!("{HEADER}{}", subsegment(span));
        // Non-blocking: a full buffer or an absent daemon costs the span, never the request.
        if let Err(error) = self.socket.send_to(datagram.as_bytes(), self.daemon) {
            tracing::debug!(%error, "an X-Ray subsegment was not sent");
        }
    }
}

impl SpanExporter for XrayExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        for span in &batch {
            self.send(span);
        }
        Ok(())
    }
}

/// The subsegment document of a finished span: a child of its parent span, or of the
/// invocation's segment (the `Parent` of its trace header) for the first span of ours.
pub fn subsegment(span: &SpanData) -> serde_json::Value {
    let mut document = json!({
        "type": "subsegment",
        "name": xray_name(&span.name),
        "id": hex_string(&span.span_context.span_id().to_bytes()),
        "trace_id": trace_id_to_xray(&span.span_context.trace_id().to_bytes()),
        "start_time": seconds(span.start_time),
        "end_time": seconds(span.end_time),
        "in_progress": false,
    });
    if span.parent_span_id != SpanId::INVALID {
        document["parent_id"] = hex_string(&span.parent_span_id.to_bytes()).into();
    }
    if matches!(span.status, Status::Error { .. }) {
        document["fault"] = true.into();
    }
    let annotations: Map<String, serde_json::Value> =
        span.attributes.iter().filter_map(annotation).collect();
    if !annotations.is_empty() {
        document["annotations"] = annotations.into();
    }
    document
}

/// An attribute as an X-Ray annotation (indexed, searchable): keys of letters, digits and
/// underscores only, values strings, numbers or booleans.
fn annotation(attribute: &KeyValue) -> Option<(String, serde_json::Value)> {
    let key: String = attribute
        .key
        .as_str()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let value = match &attribute.value {
        Value::Bool(b) => json!(b),
        Value::I64(i) => json!(i),
        Value::F64(f) => json!(f),
        Value::String(s) => json!(s.as_str()),
        Value::Array(_) => return None,
        _ => return None,
    };
    Some((key, value))
}

/// X-Ray names: at most 200 characters of letters, digits, whitespace and `_.:/%&#=+\-@`.
fn xray_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_alphanumeric() || c.is_whitespace() || "_.:/%&#=+\\-@".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(200)
        .collect()
}

fn seconds(time: SystemTime) -> f64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// Ids X-Ray accepts for a trace we start: the first 4 bytes are the epoch seconds (X-Ray
/// refuses a trace id whose time is off by more than its retention).
#[derive(Debug, Default)]
pub struct XrayIdGenerator;

impl IdGenerator for XrayIdGenerator {
    fn new_trace_id(&self) -> TraceId {
        let mut bytes = *uuid::Uuid::new_v4().as_bytes();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        bytes[..4].copy_from_slice(&u32::try_from(now).unwrap_or(u32::MAX).to_be_bytes());
        TraceId::from_bytes(bytes)
    }

    fn new_span_id(&self) -> SpanId {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(&uuid::Uuid::new_v4().as_bytes()[8..]);
        bytes[0] |= 1; // never all zeros
        SpanId::from_bytes(bytes)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use opentelemetry::trace::{SpanContext, SpanKind, TraceFlags, TraceState};
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};

    use super::*;

    fn finished(parent: SpanId) -> SpanData {
        let start = UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
        SpanData {
            span_context: SpanContext::new(
                TraceId::from_hex("5759e988bd862e3fe1be46a994272793").unwrap(),
                SpanId::from_hex("00f067aa0ba902b7").unwrap(),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: parent,
            parent_span_is_remote: true,
            span_kind: SpanKind::Internal,
            name: "a2a.request".into(),
            start_time: start,
            end_time: start + Duration::from_millis(1500),
            attributes: vec![
                KeyValue::new("a2a.method", "SendMessage"),
                KeyValue::new("model.tokens", 42_i64),
            ],
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: Default::default(),
        }
    }

    #[tokio::test]
    async fn a_finished_span_reaches_the_daemon_as_a_subsegment() {
        let daemon = UdpSocket::bind("127.0.0.1:0").unwrap();
        daemon
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let exporter = XrayExporter::new(daemon.local_addr().unwrap()).unwrap();
        let parent = SpanId::from_hex("53995c3f42cd8ad8").unwrap();
        exporter.export(vec![finished(parent)]).await.unwrap();

        let mut buf = [0; 65_536];
        let n = daemon.recv(&mut buf).unwrap();
        let datagram = std::str::from_utf8(&buf[..n]).unwrap();
        let (header, body) = datagram.split_once('\n').unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(header).unwrap(),
            json!({"format": "json", "version": 1})
        );
        assert_eq!(format!("{header}\n"), HEADER);
        let document: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(document["type"], "subsegment");
        assert_eq!(document["trace_id"], "1-5759e988-bd862e3fe1be46a994272793");
        assert_eq!(document["id"], "00f067aa0ba902b7");
        assert_eq!(document["parent_id"], "53995c3f42cd8ad8");
        assert_eq!(document["name"], "a2a.request");
        assert_eq!(document["start_time"], 1_700_000_000.25);
        assert_eq!(document["end_time"], 1_700_000_001.75);
        assert_eq!(document["in_progress"], false);
        assert_eq!(document["annotations"]["a2a_method"], "SendMessage");
        assert_eq!(document["annotations"]["model_tokens"], 42);
        assert!(document.get("fault").is_none());
    }

    #[test]
    fn a_failed_span_is_a_fault() {
        let mut span = finished(SpanId::INVALID);
        span.status = Status::error("boom");
        let document = subsegment(&span);
        assert_eq!(document["fault"], true);
        assert!(document.get("parent_id").is_none());
    }

    #[test]
    fn generated_trace_ids_start_with_the_time() {
        let id = XrayIdGenerator.new_trace_id().to_bytes();
        let seconds = u32::from_be_bytes([id[0], id[1], id[2], id[3]]);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(u64::from(seconds).abs_diff(now) < 60);
    }
}
