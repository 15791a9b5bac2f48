//! The HTTP/1.1 listener: an accept loop over hyper that bounds what a slow or idle client may
//! hold, which `axum::serve` does not (no header, body or idle timeout, no connection cap).
//!
//! Why a watchdog of our own rather than hyper's `header_read_timeout`: hyper 1.12 starts that
//! timer as soon as a kept-alive connection goes idle (`proto/h1/conn.rs`: `State::idle` sets
//! `notify_read`, and `poll_read_head` arms the timer), so it would also close every idle
//! connection after the header timeout, and an idle timeout longer than it would never apply.
//! Each connection's watchdog instead follows its phase: waiting for a request (the idle
//! timeout), a request's head arriving (the header timeout, from its first byte, not reset by
//! later bytes), or a request being served (no limit here: the body timeout is the handler's,
//! and a long response such as an SSE stream is not idle).
//!
//! Past the connection cap, new connections are not accepted until one closes: they wait in
//! the kernel's listen backlog and are served in turn. Refusing them instead would mean
//! accepting and closing each, work an attacker can make us repeat as fast as they connect,
//! while the timeouts above already free the slots that slow clients hold.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use a2a_http::Body;
use bytes::Bytes;
use http::{Request, Response};
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;

/// What a connection may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// From a request's first byte (a new connection: from its accept) to the end of its
    /// headers.
    pub header_timeout: Duration,
    /// From the end of a response to the first byte of the next request.
    pub idle_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
}

impl Limits {
    /// How often a watchdog looks at its connection's phase at least.
    fn shortest(&self) -> Duration {
        self.header_timeout.min(self.idle_timeout)
    }
}

/// Serves `listener` with `handler` until `stop` turns true, then lets the open connections
/// finish (each closes once its request in flight is answered).
pub async fn serve<H, F>(
    listener: TcpListener,
    limits: Limits,
    handler: H,
    mut stop: watch::Receiver<bool>,
) where
    H: Fn(Request<Incoming>, SocketAddr) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    // Every connection holds a receiver; the sender's `closed` is "all connections are done".
    let (open_tx, open_rx) = watch::channel(());
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.wait_for(|stopping| *stopping) => break,
            accepted = accept(&listener, &slots) => accepted,
        };
        let Some((stream, peer, slot)) = accepted else {
            continue;
        };
        let handler = handler.clone();
        let stop = stop.clone();
        let open = open_rx.clone();
        tokio::spawn(async move {
            connection(stream, peer, limits, handler, stop).await;
            drop(slot);
            drop(open);
        });
    }
    drop(open_rx);
    drop(listener);
    open_tx.closed().await;
}

/// The next connection, once a slot is free; `None` after an accept error.
async fn accept(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
) -> Option<(TcpStream, SocketAddr, OwnedSemaphorePermit)> {
    let slot = slots.clone().acquire_owned().await.ok()?;
    match listener.accept().await {
        Ok((stream, peer)) => Some((stream, peer, slot)),
        Err(err) if is_connection_error(&err) => None,
        Err(err) => {
            // Out of file descriptors, most likely: pause rather than spin.
            tracing::error!(%err, "accepting a connection failed");
            tokio::time::sleep(Duration::from_secs(1)).await;
            None
        }
    }
}

/// An error of the one connection being accepted, not of the listener.
fn is_connection_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Why a connection was closed by its watchdog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expired {
    Header,
    Idle,
}

async fn connection<H, F>(
    stream: TcpStream,
    peer: SocketAddr,
    limits: Limits,
    handler: H,
    mut stop: watch::Receiver<bool>,
) where
    H: Fn(Request<Incoming>, SocketAddr) -> F + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let activity = Arc::new(Activity::new());
    let watchdog = watchdog(activity.clone(), limits);
    let io = TokioIo::new(Watched {
        stream,
        activity: activity.clone(),
    });
    let service = service_fn(move |request: Request<Incoming>| {
        let done = activity.busy();
        let answer = handler(request, peer);
        async move {
            Ok::<_, Infallible>(answer.await.map(|body| Tracked {
                body,
                done: Some(done),
            }))
        }
    });
    let mut builder = http1::Builder::new();
    // The watchdog times the headers (see the module's note); hyper's timer would need one.
    builder.header_read_timeout(None);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn, watchdog);
    let mut stopping = false;
    loop {
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(err) = served {
                    tracing::debug!(%err, %peer, "connection ended with an error");
                }
                break;
            }
            expired = &mut watchdog => {
                // Dropping the connection closes the socket.
                tracing::debug!(?expired, %peer, "closing a connection that timed out");
                break;
            }
            _ = stop.wait_for(|stopping| *stopping), if !stopping => {
                // Closes the connection now if it is idle, else after the response in flight.
                conn.as_mut().graceful_shutdown();
                stopping = true;
            }
        }
    }
}

/// Where a connection is between requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for a request since then; none of its bytes has come.
    Idle(Instant),
    /// A request's head is arriving; its first byte came then.
    Head(Instant),
    /// Request number `n` is being served: its body read, its response written.
    Busy(u64),
}

/// A connection's phase, told by its reads, its service and its response bodies, and looked at
/// by its watchdog when a deadline comes. Nothing is woken when the phase changes: a request
/// costs three uncontended locks, not three wake-ups of the connection's task.
struct Activity {
    phase: Mutex<Phase>,
    /// Whether the phase is `Idle`: the read path checks this before taking the lock.
    idle: AtomicBool,
    requests: AtomicU64,
}

impl Activity {
    /// A new connection counts as a request's head arriving: it has the header timeout to
    /// send its first request.
    fn new() -> Self {
        Activity {
            phase: Mutex::new(Phase::Head(Instant::now())),
            idle: AtomicBool::new(false),
            requests: AtomicU64::new(0),
        }
    }

    fn phase(&self) -> MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes came in.
    fn read(&self) {
        if self.idle.load(Ordering::Acquire) {
            let mut phase = self.phase();
            if let Phase::Idle(_) = *phase {
                *phase = Phase::Head(Instant::now());
                self.idle.store(false, Ordering::Release);
            }
        }
    }

    /// A request's head is complete and it goes to the handler.
    fn busy(self: &Arc<Self>) -> Done {
        let n = self.requests.fetch_add(1, Ordering::Relaxed) + 1;
        self.idle.store(false, Ordering::Release);
        *self.phase() = Phase::Busy(n);
        Done {
            activity: self.clone(),
            n,
        }
    }
}

/// Marks the connection idle when its request's response is over (dropped or ended).
struct Done {
    activity: Arc<Activity>,
    n: u64,
}

impl Drop for Done {
    fn drop(&mut self) {
        let mut phase = self.activity.phase();
        if *phase == Phase::Busy(self.n) {
            *phase = Phase::Idle(Instant::now());
            self.activity.idle.store(true, Ordering::Release);
        }
    }
}

/// Resolves when the connection has stayed in one phase past its limit.
///
/// Nothing wakes it when the phase changes: it looks at the phase at least every
/// [`Limits::shortest`] (and at the phase's deadline, when sooner), and expires only when the
/// phase it saw is still the phase and its deadline has passed. A phase that began since its
/// last look (a request's head arriving on an idle connection) is thus seen within the
/// shortest limit of its start, in time to sleep to its own deadline.
async fn watchdog(activity: Arc<Activity>, limits: Limits) -> Expired {
    loop {
        let seen = *activity.phase();
        let (deadline, expired) = match seen {
            Phase::Idle(since) => (since.checked_add(limits.idle_timeout), Some(Expired::Idle)),
            Phase::Head(since) => (
                since.checked_add(limits.header_timeout),
                Some(Expired::Header),
            ),
            Phase::Busy(_) => (None, None),
        };
        let now = Instant::now();
        // A limit past the clock's range: look again in an hour.
        let next_look = now
            .checked_add(limits.shortest())
            .unwrap_or_else(|| now + Duration::from_secs(3600));
        let wake = deadline.map_or(next_look, |deadline| deadline.min(next_look));
        tokio::time::sleep_until(wake).await;
        if let (Some(expired), Some(deadline)) = (expired, deadline)
            && Instant::now() >= deadline
            && *activity.phase() == seen
        {
            return expired;
        }
    }
}

/// The socket, telling the activity when bytes come in.
struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// A response body that marks its connection idle once it has ended (or been dropped).
struct Tracked {
    body: Body,
    done: Option<Done>,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.done.take();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
