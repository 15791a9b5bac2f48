//! The functions' metrics: the EMF registry installed at init, and what one invocation
//! recorded printed as embedded-metric-format lines when it ends (stdout, which CloudWatch
//! Logs reads: no call to CloudWatch on the request path).

use std::io::Write;
use std::sync::{Arc, Mutex};

use a2a_http::Body;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream;
use telemetry::metrics::{self, Mode};

/// Where the lines go: stdout, or a writer a test reads.
type Out = Box<dyn Write + Send>;

/// The EMF flush of one function.
pub struct Emf {
    namespace: String,
    out: Option<Mutex<Out>>,
}

impl Emf {
    /// Installs the process's EMF registry; the lines go to stdout under `namespace`.
    pub fn install(namespace: impl Into<String>) -> Arc<Self> {
        metrics::install(Mode::Emf);
        Arc::new(Self {
            namespace: namespace.into(),
            out: None,
        })
    }

    /// The same, the lines written to `out` instead (tests).
    pub fn install_writing_to(namespace: impl Into<String>, out: Out) -> Arc<Self> {
        metrics::install(Mode::Emf);
        Arc::new(Self {
            namespace: namespace.into(),
            out: Some(Mutex::new(out)),
        })
    }

    /// Prints what was recorded since the last flush.
    pub fn flush(&self) {
        match &self.out {
            // One lock for all the lines: log lines of other threads go between, not inside.
            None => metrics::flush_emf(&self.namespace, &mut std::io::stdout().lock()),
            Some(out) => {
                if let Ok(mut out) = out.lock() {
                    metrics::flush_emf(&self.namespace, &mut *out);
                }
            }
        }
    }

    /// Runs one invocation, then flushes what it recorded.
    pub async fn around<T>(&self, invocation: impl Future<Output = T>) -> T {
        let out = invocation.await;
        self.flush();
        out
    }

    /// A streamed answer that flushes once it has ended (what the stream recorded counts in
    /// its own invocation).
    pub fn after_stream(self: &Arc<Self>, body: Body) -> Body {
        let emf = Arc::clone(self);
        let flushed = stream::once(async move {
            emf.flush();
            Bytes::new()
        })
        .filter(|chunk| std::future::ready(!chunk.is_empty()));
        Body::Stream(body.into_stream().chain(flushed).boxed())
    }
}
