//! A `stream: true` chat completion: its server-sent events read as they arrive, the text
//! passed on piece by piece, the calls and the usage assembled into the same reply a plain
//! call gives.

use serde::Deserialize;
use serde_json::Value;

use super::reply::{Content, WireUsage, arguments, overflow_or, transport_error};
use crate::{ModelError, ModelReply, TextSink, ToolCall};

/// Reads the events of `response` (a 2xx) until `[DONE]`, passing text to `sink`.
pub(super) async fn read(
    mut response: reqwest::Response,
    sink: &dyn TextSink,
) -> Result<ModelReply, ModelError> {
    let mut reply = Assembly::default();
    let mut events = Events::default();
    while let Some(bytes) = response.chunk().await.map_err(transport_error)? {
        for data in events.push(&bytes) {
            if reply.apply(&data, sink)? == Flow::Done {
                return Ok(reply.finish());
            }
        }
    }
    for data in events.end() {
        if reply.apply(&data, sink)? == Flow::Done {
            return Ok(reply.finish());
        }
    }
    if reply.finished {
        // Some servers end the body after the finish chunk without `[DONE]`.
        return Ok(reply.finish());
    }
    Err(ModelError::Unavailable(
        "the completion stream ended before the reply did".into(),
    ))
}

/// The SSE parser: bytes in, the `data` of each complete event out.
#[derive(Default)]
struct Events {
    /// Bytes of a line not yet ended.
    line: Vec<u8>,
    /// The event's `data` lines so far.
    data: Option<String>,
}

impl Events {
    fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut complete = Vec::new();
        for &byte in bytes {
            if byte != b'\n' {
                self.line.push(byte);
                continue;
            }
            let line = std::mem::take(&mut self.line);
            // UTF-8 never has 0x0A inside a character, so a line is whole characters.
            let line = String::from_utf8_lossy(&line);
            let line = line.strip_suffix('\r').unwrap_or(&line);
            if line.is_empty() {
                complete.extend(self.data.take());
            } else if let Some(value) = line.strip_prefix("data:") {
                let value = value.strip_prefix(' ').unwrap_or(value);
                match &mut self.data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(value);
                    }
                    None => self.data = Some(value.to_owned()),
                }
            }
            // Comments (`: …`) and the `event`, `id` and `retry` fields carry nothing here.
        }
        complete
    }

    /// The body ended: an event not closed by a blank line still counts.
    fn end(&mut self) -> Vec<String> {
        let mut rest = self.push(b"\n");
        rest.extend(self.data.take());
        rest
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Flow {
    More,
    Done,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    /// An error reported in the stream after the 200.
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Deserialize)]
struct CallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    /// A piece of the arguments' JSON text (some servers send the object whole).
    #[serde(default)]
    arguments: Option<Value>,
}

/// A call while its deltas arrive.
#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// The reply while its events arrive.
#[derive(Default)]
struct Assembly {
    text: String,
    refusal: String,
    calls: Vec<PartialCall>,
    usage: Option<WireUsage>,
    finished: bool,
}

impl Assembly {
    fn apply(&mut self, data: &str, sink: &dyn TextSink) -> Result<Flow, ModelError> {
        if data.trim() == "[DONE]" {
            return Ok(Flow::Done);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            ModelError::InvalidReply(format!(
                "not a chat completion chunk ({e}): {}",
                crate::text::truncate(data, 500)
            ))
        })?;
        if let Some(error) = chunk.error {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_owned);
            return Err(overflow_or(
                &error,
                &message,
                ModelError::Unavailable(format!("an error in the stream: {message}")),
            ));
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        let Some(choice) = chunk.choices.into_iter().next() else {
            return Ok(Flow::More);
        };
        self.finished |= choice.finish_reason.is_some();
        let Some(delta) = choice.delta else {
            return Ok(Flow::More);
        };
        let piece = match delta.content {
            Some(Content::Text(text)) => text,
            Some(Content::Parts(parts)) => parts.into_iter().filter_map(|p| p.text).collect(),
            None => String::new(),
        };
        if !piece.is_empty() {
            sink.text(&piece);
            self.text.push_str(&piece);
        }
        if let Some(refusal) = delta.refusal.filter(|r| !r.is_empty()) {
            sink.text(&refusal);
            self.refusal.push_str(&refusal);
        }
        for (position, call) in delta.tool_calls.into_iter().flatten().enumerate() {
            let index = call.index.unwrap_or(position);
            if self.calls.len() <= index {
                self.calls.resize_with(index + 1, PartialCall::default);
            }
            let partial = &mut self.calls[index];
            if let Some(id) = call.id.filter(|id| !id.is_empty()) {
                partial.id = id;
            }
            if let Some(function) = call.function {
                if let Some(name) = function.name {
                    partial.name.push_str(&name);
                }
                match function.arguments {
                    Some(Value::String(piece)) => partial.arguments.push_str(&piece),
                    Some(Value::Null) | None => {}
                    Some(whole) => partial.arguments = whole.to_string(),
                }
            }
        }
        Ok(Flow::More)
    }

    fn finish(self) -> ModelReply {
        let text = if !self.text.is_empty() {
            Some(self.text)
        } else {
            Some(self.refusal).filter(|r| !r.is_empty())
        };
        let tool_calls = self
            .calls
            .into_iter()
            .filter(|call| !call.name.is_empty())
            .enumerate()
            .map(|(i, call)| ToolCall {
                id: if call.id.is_empty() {
                    format!("call-{}", i + 1)
                } else {
                    call.id
                },
                name: call.name,
                arguments: arguments(Some(Value::String(call.arguments))),
            })
            .collect();
        ModelReply {
            text,
            tool_calls,
            usage: self.usage.map(WireUsage::usage),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn events_are_cut_at_blank_lines_whatever_the_chunking() {
        let body =
            "data: {\"a\":1}\r\n\r\n: keep-alive\n\nevent: x\ndata: one\ndata: two\n\ndata: [DONE]";
        for size in [1, 3, body.len()] {
            let mut events = Events::default();
            let mut got = Vec::new();
            for piece in body.as_bytes().chunks(size) {
                got.extend(events.push(piece));
            }
            got.extend(events.end());
            assert_eq!(got, ["{\"a\":1}", "one\ntwo", "[DONE]"], "pieces of {size}");
        }
    }

    #[test]
    fn calls_are_assembled_by_index_and_ids_filled_in() {
        let mut reply = Assembly::default();
        for data in [
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"name":"b","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"a","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":": 1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ] {
            assert_eq!(reply.apply(data, &crate::NoSink).unwrap(), Flow::More);
        }
        let reply = reply.finish();
        assert_eq!(reply.text, None);
        assert_eq!(reply.tool_calls[0].id, "call_a");
        assert_eq!(reply.tool_calls[0].arguments, serde_json::json!({}));
        assert_eq!(reply.tool_calls[1].id, "call-2");
        assert_eq!(reply.tool_calls[1].arguments, serde_json::json!({"x": 1}));
    }
}
