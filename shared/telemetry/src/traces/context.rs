//! W3C trace context (`traceparent`, `tracestate`): the type the service passes around, its
//! header forms (W3C and X-Ray), and where the current one is kept while work runs.
//!
//! Why a task-local besides the spans: with no exporter configured the spans are disabled
//! (nothing is recorded), yet a request's context must still reach the remote agents and the
//! webhooks it leads to. The task-local carries the incoming context; with an exporter, the
//! current span's context takes its place (same trace id, the span's own id).

use std::fmt::Write as _;
use std::future::Future;

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The W3C `traceparent` header.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C `tracestate` header.
pub const TRACESTATE: &str = "tracestate";

/// One position in a trace: the trace id, the span that is the parent of what comes next,
/// whether the trace is sampled, and the vendors' `tracestate` (passed on as it came).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub sampled: bool,
    pub state: Option<String>,
}

tokio::task_local! {
    static CURRENT: TraceContext;
}

impl TraceContext {
    /// From the W3C headers; `None` when `traceparent` is absent or malformed (a malformed
    /// one is ignored, as the W3C spec asks: the request starts a new trace).
    pub fn from_w3c(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        let mut parts = traceparent.trim().split('-');
        let version = parts.next()?;
        let trace_id = parts.next()?;
        let span_id = parts.next()?;
        let flags = parts.next()?;
        // Version 00 has exactly four fields; a later version may add more.
        if version.len() != 2 || version == "ff" || (version == "00" && parts.next().is_some()) {
            return None;
        }
        let trace_id: [u8; 16] = hex(trace_id)?;
        let span_id: [u8; 8] = hex(span_id)?;
        let [flags]: [u8; 1] = hex(flags)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Self {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
            state: tracestate
                .map(str::trim)
                .filter(|s| !s.is_empty() && s.len() <= 512)
                .map(str::to_owned),
        })
    }

    /// The `traceparent` header value.
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            hex_string(&self.trace_id),
            hex_string(&self.span_id),
            u8::from(self.sampled)
        )
    }

    /// The trace id as 32 lower-case hex digits.
    pub fn trace_id_hex(&self) -> String {
        hex_string(&self.trace_id)
    }

    /// From an X-Ray trace header (`Root=1-…-…;Parent=…;Sampled=…`, as in `_X_AMZN_TRACE_ID`
    /// or `X-Amzn-Trace-Id`); `None` without a well-formed `Root` and `Parent`.
    pub fn from_xray(header: &str) -> Option<Self> {
        let mut root = None;
        let mut parent = None;
        let mut sampled = false;
        for field in header.split(';') {
            match field.trim().split_once('=') {
                Some(("Root", value)) => root = Some(value),
                Some(("Parent", value)) => parent = Some(value),
                Some(("Sampled", value)) => sampled = value == "1",
                _ => {}
            }
        }
        Some(Self {
            trace_id: trace_id_from_xray(root?)?,
            span_id: hex(parent?)?,
            sampled,
            state: None,
        })
    }

    /// The same trace, with a new span id: the parent an outgoing call names when no span of
    /// ours is recorded.
    pub fn child(&self) -> Self {
        let mut span_id = [0; 8];
        span_id.copy_from_slice(&uuid::Uuid::new_v4().as_bytes()[..8]);
        span_id[0] |= 1; // never all zeros
        Self {
            span_id,
            ..self.clone()
        }
    }

    pub(crate) fn to_otel(&self) -> opentelemetry::Context {
        let state = self
            .state
            .as_deref()
            .and_then(|s| s.parse::<TraceState>().ok())
            .unwrap_or_default();
        let flags = if self.sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        let span = SpanContext::new(
            TraceId::from_bytes(self.trace_id),
            SpanId::from_bytes(self.span_id),
            flags,
            true,
            state,
        );
        opentelemetry::Context::new().with_remote_span_context(span)
    }

    fn from_otel(span: &SpanContext) -> Option<Self> {
        span.is_valid().then(|| {
            let state = span.trace_state().header();
            Self {
                trace_id: span.trace_id().to_bytes(),
                span_id: span.span_id().to_bytes(),
                sampled: span.is_sampled(),
                state: (!state.is_empty()).then_some(state),
            }
        })
    }
}

/// The X-Ray form of a W3C trace id: `1-<8 hex: epoch seconds>-<24 hex>`.
pub fn trace_id_to_xray(trace_id: &[u8; 16]) -> String {
    let hex = hex_string(trace_id);
    format!("1-{}-{}", &hex[..8], &hex[8..])
}

/// The W3C trace id of an X-Ray one.
pub fn trace_id_from_xray(root: &str) -> Option<[u8; 16]> {
    let mut parts = root.split('-');
    let (Some("1"), Some(time), Some(rest), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    if time.len() != 8 || rest.len() != 24 {
        return None;
    }
    hex(&format!("{time}{rest}"))
}

/// Runs `work` with `context` as the current trace context (no change when `None`).
pub async fn scope<F: Future>(context: Option<TraceContext>, work: F) -> F::Output {
    match context {
        Some(context) => CURRENT.scope(context, work).await,
        None => work.await,
    }
}

/// `work` with the trace context of where it is made: for work spawned to run later (a
/// turn, a push delivery), so what it leads to stays in the trace that started it.
pub fn carry<F: Future>(work: F) -> impl Future<Output = F::Output> {
    scope(current(), work)
}

/// Where we are in a trace: the current span's context when spans are recorded, else the
/// context carried in from the request (or `None`).
pub fn current() -> Option<TraceContext> {
    recorded().or_else(|| CURRENT.try_with(Clone::clone).ok())
}

/// The context an outgoing call (to a remote agent, a webhook) sends: the current span's,
/// or the carried one under a new span id; `None` outside any trace.
pub fn outgoing() -> Option<TraceContext> {
    recorded().or_else(|| CURRENT.try_with(TraceContext::child).ok())
}

/// The current span's context, when the OpenTelemetry layer records it.
fn recorded() -> Option<TraceContext> {
    let span = tracing::Span::current();
    if span.is_disabled() {
        return None;
    }
    TraceContext::from_otel(span.context().span().span_context())
}

/// Makes the carried context (if any) the parent of `span`, a span that starts a piece of
/// work (a request, a turn, a delivery). Nothing happens when spans are not recorded.
pub fn adopt(span: &tracing::Span) {
    if span.is_disabled() {
        return;
    }
    if let Ok(parent) = CURRENT.try_with(TraceContext::to_otel) {
        // Fails only when the span is not recorded by the OpenTelemetry layer.
        let _ = span.set_parent(parent);
    }
}

fn hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let bytes = text.as_bytes();
    if bytes.len() != 2 * N {
        return None;
    }
    let mut out = [0; N];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        let digit = |b: u8| match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            _ => None,
        };
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

pub(crate) fn hex_string(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(2 * bytes.len()), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn traceparent_round_trips() {
        let context = TraceContext::from_w3c(PARENT, Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(context.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert!(context.sampled);
        assert_eq!(context.state.as_deref(), Some("congo=t61rcWkgMzE"));
        assert_eq!(context.traceparent(), PARENT);
        let unsampled = TraceContext::from_w3c(&PARENT.replace("-01", "-00"), None).unwrap();
        assert!(!unsampled.sampled);
    }

    #[test]
    fn malformed_traceparents_are_ignored() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert_eq!(TraceContext::from_w3c(bad, None), None, "{bad}");
        }
    }

    #[test]
    fn xray_ids_map_to_and_from_w3c() {
        let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        let context = TraceContext::from_xray(header).unwrap();
        assert_eq!(context.trace_id_hex(), "5759e988bd862e3fe1be46a994272793");
        assert_eq!(hex_string(&context.span_id), "53995c3f42cd8ad8");
        assert!(context.sampled);
        assert_eq!(
            trace_id_to_xray(&context.trace_id),
            "1-5759e988-bd862e3fe1be46a994272793"
        );
        assert!(
            !TraceContext::from_xray(&header.replace("Sampled=1", "Sampled=0"))
                .unwrap()
                .sampled
        );
        assert_eq!(
            TraceContext::from_xray("Root=1-5759e988-bd86;Parent=53995c3f42cd8ad8"),
            None
        );
        assert_eq!(
            TraceContext::from_xray("Root=1-5759e988-bd862e3fe1be46a994272793"),
            None
        );
    }

    #[tokio::test]
    async fn an_outgoing_call_keeps_the_trace_under_a_new_span() {
        assert_eq!(outgoing(), None);
        let incoming = TraceContext::from_w3c(PARENT, None).unwrap();
        let sent = scope(Some(incoming.clone()), async {
            // Spawned work carries it too.
            tokio::spawn(carry(async { outgoing() })).await.unwrap()
        })
        .await
        .unwrap();
        assert_eq!(sent.trace_id, incoming.trace_id);
        assert_ne!(sent.span_id, incoming.span_id);
        assert!(sent.sampled);
    }
}
