//! The response body every binding returns: a whole buffer, or a stream of SSE frames.
//!
//! Why a type of our own: the same responses go to hyper (local server) and to lambda_http's
//! streaming responses (Lambda). Both accept any [`http_body::Body`] whose data is [`Bytes`], so
//! this enum implements that trait and neither consumer needs a conversion step (the local
//! server only wraps it to learn when a response has ended; lambda_http takes it as is). Non-streaming Lambda functions
//! can take the buffer out with [`Body::try_into_bytes`].

use std::convert::Infallible;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use futures::stream::{self, BoxStream};
use http_body::{Frame, SizeHint};

/// A response body: `Full` for JSON documents, `Stream` for `text/event-stream` responses
/// (each item is one or more complete SSE frames, written as soon as it is produced).
pub enum Body {
    Full(Bytes),
    Stream(BoxStream<'static, Bytes>),
}

impl Body {
    /// An empty body (304 responses).
    pub fn empty() -> Self {
        Body::Full(Bytes::new())
    }

    /// Whether this is an SSE stream (the consumer must not buffer it).
    pub fn is_stream(&self) -> bool {
        matches!(self, Body::Stream(_))
    }

    /// The buffer of a `Full` body, or the body back if it is a stream.
    pub fn try_into_bytes(self) -> Result<Bytes, Body> {
        match self {
            Body::Full(bytes) => Ok(bytes),
            stream @ Body::Stream(_) => Err(stream),
        }
    }

    /// The body as a stream of chunks (a `Full` body is one chunk, none if empty).
    pub fn into_stream(self) -> BoxStream<'static, Bytes> {
        match self {
            Body::Full(bytes) if bytes.is_empty() => stream::empty().boxed(),
            Body::Full(bytes) => stream::once(async move { bytes }).boxed(),
            Body::Stream(stream) => stream,
        }
    }

    /// Every byte of the body; for a stream, waits until it ends.
    pub async fn collect(self) -> Bytes {
        match self {
            Body::Full(bytes) => bytes,
            Body::Stream(mut stream) => {
                let mut buf = BytesMut::new();
                while let Some(chunk) = stream.next().await {
                    buf.extend_from_slice(&chunk);
                }
                buf.freeze()
            }
        }
    }
}

impl Default for Body {
    fn default() -> Self {
        Body::empty()
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Body::Full(bytes) => f.debug_tuple("Full").field(bytes).finish(),
            Body::Stream(_) => f.write_str("Stream(..)"),
        }
    }
}

impl From<Bytes> for Body {
    fn from(bytes: Bytes) -> Self {
        Body::Full(bytes)
    }
}

impl From<Vec<u8>> for Body {
    fn from(bytes: Vec<u8>) -> Self {
        Body::Full(Bytes::from(bytes))
    }
}

impl From<String> for Body {
    fn from(text: String) -> Self {
        Body::Full(Bytes::from(text))
    }
}

impl From<&'static str> for Body {
    fn from(text: &'static str) -> Self {
        Body::Full(Bytes::from_static(text.as_bytes()))
    }
}

impl From<BoxStream<'static, Bytes>> for Body {
    fn from(stream: BoxStream<'static, Bytes>) -> Self {
        Body::Stream(stream)
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Full(bytes) => {
                if bytes.is_empty() {
                    Poll::Ready(None)
                } else {
                    Poll::Ready(Some(Ok(Frame::data(std::mem::take(bytes)))))
                }
            }
            Body::Stream(stream) => loop {
                match stream.poll_next_unpin(cx) {
                    // An empty chunk would read as "end of body" to some consumers; skip it.
                    Poll::Ready(Some(chunk)) if chunk.is_empty() => continue,
                    Poll::Ready(Some(chunk)) => return Poll::Ready(Some(Ok(Frame::data(chunk)))),
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Pending => return Poll::Pending,
                }
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Full(bytes) => bytes.is_empty(),
            Body::Stream(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Full(bytes) => SizeHint::with_exact(bytes.len() as u64),
            Body::Stream(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    async fn frames(mut body: Body) -> Vec<Bytes> {
        let mut out = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            out.push(frame.unwrap().into_data().unwrap());
        }
        out
    }

    #[tokio::test]
    async fn full_body_is_one_frame_with_an_exact_size() {
        let body = Body::from("hello");
        assert_eq!(body.size_hint().exact(), Some(5));
        assert!(!body.is_end_stream());
        assert_eq!(frames(body).await, vec![Bytes::from_static(b"hello")]);
        assert!(Body::empty().is_end_stream());
        assert!(frames(Body::empty()).await.is_empty());
    }

    #[tokio::test]
    async fn stream_body_yields_its_chunks_and_skips_empty_ones() {
        let chunks = vec![
            Bytes::from_static(b"a"),
            Bytes::new(),
            Bytes::from_static(b"b"),
        ];
        let body = Body::Stream(stream::iter(chunks).boxed());
        assert!(body.is_stream());
        assert_eq!(
            frames(body).await,
            vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")]
        );
    }

    #[tokio::test]
    async fn collect_and_try_into_bytes() {
        let body = Body::Stream(
            stream::iter(vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")]).boxed(),
        );
        let body = body.try_into_bytes().unwrap_err();
        assert_eq!(body.collect().await, Bytes::from_static(b"ab"));
        assert_eq!(
            Body::from(vec![1u8, 2]).try_into_bytes().unwrap(),
            Bytes::from(vec![1u8, 2])
        );
        assert_eq!(
            Body::from("x".to_string())
                .into_stream()
                .collect::<Vec<_>>()
                .await
                .len(),
            1
        );
    }
}
