//! Server-sent events: a reader of `data:` frames, and the stream of `StreamResponse`s a
//! streaming method answers over either binding.

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use serde_json::Value;

use crate::client::Reply;
use crate::outcome::{ApiError, rest_outcome, rpc_outcome};
use crate::wait::WAIT;

/// Reads an SSE body: yields the JSON of each `data:` field, skips comments (keep-alives).
pub struct Sse {
    body: BoxStream<'static, reqwest::Result<Vec<u8>>>,
    buffer: Vec<u8>,
    ended: bool,
}

impl Sse {
    pub fn new(resp: reqwest::Response) -> Self {
        Self {
            body: resp
                .bytes_stream()
                .map(|chunk| chunk.map(|b| b.to_vec()))
                .boxed(),
            buffer: Vec::new(),
            ended: false,
        }
    }

    /// One complete event (the bytes before a blank line), if buffered.
    fn take_frame(&mut self) -> Option<String> {
        let find = |sep: &[u8]| {
            self.buffer
                .windows(sep.len())
                .position(|w| w == sep)
                .map(|at| (at, sep.len()))
        };
        let (end, len) = match (find(b"\n\n"), find(b"\r\n\r\n")) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        let frame: Vec<u8> = self.buffer.drain(..end + len).take(end).collect();
        Some(String::from_utf8(frame).expect("UTF-8 SSE frame"))
    }

    /// The next `data:` JSON; `None` when the stream ended. Fails the test after [`WAIT`].
    pub async fn next(&mut self) -> Option<Value> {
        tokio::time::timeout(WAIT, self.next_unbounded())
            .await
            .expect("an SSE event or the end of the stream")
    }

    async fn next_unbounded(&mut self) -> Option<Value> {
        loop {
            while let Some(frame) = self.take_frame() {
                let data: Vec<&str> = frame
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                if data.is_empty() {
                    continue; // a comment (keep-alive) or a field we do not use
                }
                let json = data.join("\n");
                return Some(
                    serde_json::from_str(&json)
                        .unwrap_or_else(|e| panic!("SSE data is not JSON ({e}): {json}")),
                );
            }
            if self.ended {
                let rest = String::from_utf8_lossy(&self.buffer);
                assert!(rest.trim().is_empty(), "an incomplete SSE frame: {rest:?}");
                return None;
            }
            match self.body.next().await {
                Some(chunk) => self.buffer.extend(chunk.expect("SSE chunk")),
                None => self.ended = true,
            }
        }
    }
}

/// A stream of `StreamResponse`s from either binding (JSON-RPC frames are unwrapped after
/// checking that each carries the request id).
pub struct Events {
    pub headers: HeaderMap,
    sse: Sse,
    rpc_id: Option<String>,
}

impl Events {
    /// Sends the request; an answer that is not an event stream is the error it carries.
    pub async fn open(
        req: reqwest::RequestBuilder,
        rpc_id: Option<String>,
    ) -> Result<Events, ApiError> {
        // No overall timeout on a stream: each read is bounded instead.
        let resp = tokio::time::timeout(WAIT, req.timeout(Duration::from_secs(3600)).send())
            .await
            .expect("the stream's response head")
            .expect("HTTP request");
        let headers = resp.headers().clone();
        let content_type = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        if !content_type.starts_with("text/event-stream") {
            let status = resp.status();
            let text = resp.text().await.expect("body");
            let reply = Reply {
                status,
                headers,
                text,
            };
            let outcome = match rpc_id {
                Some(_) => rpc_outcome(&reply),
                None => rest_outcome(&reply),
            };
            return match outcome {
                Err(err) => Err(err),
                Ok(value) => panic!("a stream method answered a document: {value}"),
            };
        }
        assert_eq!(resp.status(), StatusCode::OK);
        Ok(Events {
            headers,
            sse: Sse::new(resp),
            rpc_id,
        })
    }

    /// The next `StreamResponse`; `None` when the stream ended.
    pub async fn next(&mut self) -> Option<Value> {
        let frame = self.sse.next().await?;
        match &self.rpc_id {
            None => {
                assert!(frame.get("error").is_none(), "an error event: {frame}");
                Some(frame)
            }
            Some(id) => {
                assert_eq!(frame["jsonrpc"], "2.0", "{frame}");
                assert_eq!(
                    frame["id"],
                    id.as_str(),
                    "each frame carries the request id"
                );
                assert!(frame.get("error").is_none(), "an error event: {frame}");
                Some(frame["result"].clone())
            }
        }
    }

    /// Every remaining event, until the server ends the stream.
    pub async fn collect(mut self) -> Vec<Value> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            events.push(event);
        }
        events
    }
}
